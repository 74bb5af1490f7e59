#include "app/core/model_scale.h"

#include <cstdio>

namespace app {
namespace {

std::string Millions(int64_t n) {
    char buf[32];
    if (n >= 1'000'000'000) std::snprintf(buf, sizeof buf, "%.2f B", static_cast<double>(n) / 1e9);
    else std::snprintf(buf, sizeof buf, "%.0f M", static_cast<double>(n) / 1e6);
    return buf;
}

}  // namespace

ModelScale ScaleOf(const model::ModelInfo& info, int64_t big_parameters) {
    ModelScale s;
    const bool on_cpu = info.device.rfind("cuda", 0) != 0;
    s.big = on_cpu && info.parameters >= big_parameters;
    const std::string line = Millions(big_parameters) + " parameters";
    if (s.big)
        s.reason = Millions(info.parameters) + " parameters on the CPU: big (" + line +
                   " or more), so the window opens with the layer-local comparison, which needs no second forward pass. "
                   "The global tau=1 pass (a whole second forward pass) runs on request: Ctrl+T or the button below.";
    else if (!on_cpu)
        s.reason = "On the GPU a second forward pass is cheap: the global tau=1 pass runs with every analysis.";
    else
        s.reason = Millions(info.parameters) + " parameters: under " + line +
                   ", so the global tau=1 pass (a second forward pass) runs with every analysis.";
    return s;
}

}  // namespace app
