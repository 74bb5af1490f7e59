// ssaviz: the command line and (when built with SSAVIZ_GUI) the live inspector window.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#include "app/cli/interrupts.h"
#include "model/nn/runtime.h"
#ifdef SSAVIZ_HAVE_GUI
#include "app/gui/gui.h"
#endif
#ifdef SSAVIZ_FORK_SERVER
#include "app/fork_server.h"
#endif

namespace {

int Run(const std::vector<std::string>& args) {
    app::Interrupts interrupts;  // Ctrl+C leaves nothing half-written behind
    app::LaunchOptions launch;
    std::optional<app::Session> session;
    int code = app::RunCommandLine(args, &launch, &session);
    if (code >= 0) return code;
#ifdef SSAVIZ_HAVE_GUI
    return app::RunGui(launch, session);
#else
    std::fprintf(stderr, "ssaviz: built without the GUI (SSAVIZ_GUI=OFF); here is the model instead\n");
    return app::RunCommandLine({args[0], "info", "--model", launch.model_dir, "--device", launch.device}, &launch, &session);
#endif
}

}  // namespace

int main(int argc, char** argv) {
    model::RestartWithFasterBlasKernels(argv);  // OpenBLAS's fallback kernels where it does not know the CPU
#ifdef SSAVIZ_FORK_SERVER  // the test suite's harness (fork_server.h); not in a build without tests
    if (const char* spec = std::getenv("SSAVIZ_FORK_SERVER")) return app::ServeForks(spec, Run);
#endif
    return Run(std::vector<std::string>(argv, argv + argc));
}
