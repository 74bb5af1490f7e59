#include "app/core/model_scale.h"

#include <cstdio>

namespace app {

ModelScale ScaleOf(const model::ModelInfo& info, int64_t big_parameters) {
    ModelScale s;
    const bool on_cpu = info.device.rfind("cuda", 0) != 0;
    s.big = on_cpu && info.parameters >= big_parameters;
    const std::string line = CountName(big_parameters) + " parameters";
    if (s.big)
        s.reason = CountName(info.parameters) + " parameters on the CPU: big (" + line +
                   " or more), so the window opens with the layer-local comparison, which needs no second forward pass. "
                   "The global tau = 1 pass (a whole second forward pass) runs on request: Ctrl+T or the button below.";
    else if (!on_cpu)
        s.reason = "On the GPU a second forward pass is cheap: the global tau = 1 pass runs with every analysis.";
    else
        s.reason = CountName(info.parameters) + " parameters: under " + line +
                   ", so the global tau = 1 pass (a second forward pass) runs with every analysis.";
    return s;
}

std::string CountName(int64_t n) {
    const double v = static_cast<double>(n);
    char buf[32];
    if (n < 1000) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
    else if (n < 999'500) std::snprintf(buf, sizeof buf, "%.3g k", v / 1e3);
    else if (n < 999'500'000) std::snprintf(buf, sizeof buf, "%.3g M", v / 1e6);
    else std::snprintf(buf, sizeof buf, v < 999.5e9 ? "%.3g B" : "%.0f B", v / 1e9);
    return buf;
}

}  // namespace app
