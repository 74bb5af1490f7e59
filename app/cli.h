// The command line (SPEC section 4): `ssaviz info | tokenize | export | init-random | train | eval`, headless,
// on the same model code as the GUI. Exit codes: 0 ok, 1 runtime failure, 2 usage error,
// 3 bad model or input file; every failure prints one line naming what is wrong.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/session.h"
#include "model/weights.h"

namespace app {

enum ExitCode { kExitOk = 0, kExitFailure = 1, kExitUsage = 2, kExitBadInput = 3 };

// Options of the GUI invocation (no subcommand), parsed by the same code.
struct GuiOptions {
    std::string model_dir;  // empty: the bundled default model
    std::string text;
    std::string device = "auto";
    std::string screenshot;  // --screenshot FILE: render, save a PNG of the window, exit
    int frames = 30;         // --frames N: settled frames before the screenshot
    int bench_keys = 0;      // --bench-typing N: a benchmark that types N characters
    int bench_zoom_frames = 0;  // --bench-zoom N: a benchmark that zooms and pans the map for N frames
    std::optional<Session> session;  // --session FILE: selections, view and export settings to restore
    std::string session_path;
    std::string show;        // --show export|help|demo: a window open from the start
    std::string example;     // --example ID: open a bundled model with its twin and text (Examples menu)
    std::string export_to;   // --export-to DIR: export with the session's export settings, then exit (tests)
    model::ConfigHints hints;
    std::string dtype = "f32";  // --dtype: the compute dtype  // --n-head, --query-form, --value-form, --activation: for checkpoints without config.json
};

// Runs a subcommand and returns its exit code. When argv names no subcommand, fills `gui` and
// returns -1 so main() can open the window.
int RunCommandLine(const std::vector<std::string>& args, GuiOptions* gui);

// The `ssaviz export` command that writes what `options` describe for this model and text
// (shell-quoted), so a GUI export can be repeated from a script. Empty twin_dir: vanilla.
std::string ExportCommandLine(const ExportOptions& options, const std::string& model_dir, const std::string& twin_dir,
                              const std::string& device, const std::string& text);

// Resolves an export's heads against a model: empty lists mean all; an index out of range is an
// error naming it.
model::Status ResolveExportHeads(ExportOptions* options, int layers, int heads);

// The default model: $SSAVIZ_MODEL, else the bundled English SSA model (../assets/models/english/ssa
// from the executable), else the build's random model (models/default next to it). Empty if none.
std::string DefaultModelDir();

}  // namespace app
