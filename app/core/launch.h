// How the window starts: the model and text to open, and what the command line asked of it (a tab
// or dialog open, a Continue, a screenshot, a benchmark, an export). app/cli fills it from the
// flags and a session file; app/gui reads it. The session itself (selections, view and export
// settings) travels beside it, since it is an app/export type: RunGui(options, session).
#pragma once

#include <cctype>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "app/core/model_scale.h"
#include "app/core/run.h"
#include "model/io/weights.h"

namespace app {

struct LaunchOptions {
    std::string model_dir;          // resolved: --model, else the session's, else the bundled default
    std::string device = "auto";    // --device, else the session's
    std::string dtype = "f32";      // --dtype: what the forward pass computes in
    model::ConfigHints hints;       // --n-head, --query-form, --value-form, --activation: checkpoints without config.json
    std::string text;               // --text or --text-file, else the session's; empty: the built-in example text
    bool truncate = false;          // --truncate (or the session's): analyse the first n_positions tokens of a longer text

    std::string session_path;  // --session FILE: where the session came from (File > Save session writes there)
    std::string example;       // --example ID: open a bundled model with its twin and text (Examples menu)
    std::string show;          // --show: export|help|demo|open|open-base|open-run opens that window; heads|matrix|...|what-ifs that tab (--tab)
    // Where the window opens, over a session's: --layer and --head (the selected head), --query
    // (the selected query row), --map ssa|compare|diff|all|three-way (all: the three side by side;
    // three-way: SSA | tau = 1 | base and the Fine-tune tab).
    std::optional<int> layer, head, query;
    std::string map;
    std::optional<CompareSpec> compare;  // --compare / --base, over a session's

    // The right pane's tabs, in order; --tab names them in lower case with '-' for ' ' (TabFlag).
    static constexpr const char* kTabs[] = {"Heads", "Matrix", "Temperatures", "Table", "Sparsity", "Next token", "What-ifs", "Fine-tune", "Lens", "Run"};

    // Once the first analysis is shown (screenshots, tests): --continue N appends N tokens as
    // Continue (Ctrl+G) does, with the session's generation settings; --rank-heads ranks the heads.
    int continue_tokens = 0;
    bool rank_heads = false;
    // --global-pass: run the global tau = 1 pass once the first analysis is shown, as Ctrl+T does.
    bool global_pass = false;
    // --lens: run the logit lens and attribution once the first analysis is shown (the Lens tab).
    bool lens = false;
    // --run DIR: a training run; the window opens its last step and the Run tab, and runs the
    // timeline of the text over every step once the first analysis is shown.
    std::string run;
    std::string compare_run;  // --compare-run DIR: a second run set beside it in the Run tab
    // --big-model N: a model on a CPU with N parameters or more opens with the layer-local
    // comparison (app/core/model_scale.h; tests lower it to reach the big-model path on a small model).
    int64_t big_model_parameters = kBigModelParameters;

    std::string export_to;   // --export-to DIR: export with the session's export settings, then exit (tests)
    std::string screenshot;  // --screenshot FILE: a PNG of the window after `frames` settled frames, then exit
    int frames = 30;         // --frames N
    int width = 1600, height = 1000;  // --window WxH

    // Benchmark (--bench-typing N): type `bench_keys` characters, one every `bench_interval_ms`, at
    // `bench_at` of the text (1 the end, 0.5 the middle, 0 the start: --bench-at), then print frame
    // times and keystroke-to-pixels latency. 0 = off.
    int bench_keys = 0;
    double bench_interval_ms = 100;
    double bench_at = 1.0;
    // Benchmark (--bench-heads N): select the next head N times (a few frames apart), then print the
    // work of the frames that showed a new head (map rebuild, bake and upload). 0 = off.
    int bench_heads = 0;
    // Benchmark (--bench-zoom N): zoom and pan the attention map for N frames, then print frame times.
    int bench_zoom_frames = 0;
    // Benchmark (--bench-open): from the process's start until the model has answered, print when
    // the model loaded and the first map and predictions showed, the frames' work meanwhile and VmHWM.
    bool bench_open = false;
};

// "Next token" -> "next-token": how --tab names a tab (and reads one: "Lens" and "Next token", as
// the bar spells them, are "lens" and "next-token").
inline std::string TabFlag(std::string_view tab) {
    std::string flag(tab);
    for (char& c : flag) c = c == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return flag;
}

// --tab's spelling of the tab `name` names, read loosely: case, spaces, '-' and '_' aside
// ("finetune", "Fine-tune" and "fine_tune" are "fine-tune", as the plot and files spell it);
// empty where it names none.
inline std::string FindTabFlag(std::string_view name) {
    auto letters = [](std::string_view s) {
        std::string out;
        for (char c : s)
            if (c != ' ' && c != '-' && c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return out;
    };
    for (const char* tab : LaunchOptions::kTabs)
        if (letters(tab) == letters(name)) return TabFlag(tab);
    return "";
}

// The tab `step` places after `tab` (before it when negative) in the bar's order, wrapping round;
// from a name that is no tab's, counted from the first (Ctrl+PageUp / PageDown).
inline const char* StepTab(const std::string& tab, int step) {
    constexpr int n = static_cast<int>(std::size(LaunchOptions::kTabs));
    int at = 0;
    while (at < n && tab != LaunchOptions::kTabs[at]) ++at;
    return LaunchOptions::kTabs[(((at == n ? 0 : at) + step) % n + n) % n];
}

}  // namespace app
