// A session file: the model, the text, the selections, the view settings and the export dialog's
// settings, as JSON. `ssaviz --session FILE` reopens it exactly; File > Save session (Ctrl+S)
// writes it. What a flag can also say (the model, the comparison, the export's settings) is kept
// under the key its row of the flag table names and read through that flag (app/export/flags.h);
// the rest (selections, view) is the session's own. Parsing is strict: a wrong key type or value
// is a one-line error naming the key.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "app/export/export.h"
#include "app/core/run.h"
#include "app/core/state.h"
#include "model/io/result.h"

namespace app {

struct Session {
    std::string model_dir;  // empty: the bundled default model; with a run, the step shown (its checkpoint)
    std::string run_dir, compare_run_dir;  // a training run shown (--run, --compare-run); empty: none
    CompareSpec compare;    // "compare": a keyword or the twin's folder, as --compare takes it
    std::vector<model::Intervention> interventions;  // what-ifs on the SSA side ("interventions": the --ablate syntax)
    std::string device = "auto";
    std::string text;
    bool truncate = false;
    HeadRef selected;
    std::vector<Pin> pinned;
    int query = -1;
    ViewSettings settings;
    ExportOptions export_options;  // empty layers / heads: all
    // Read, not kept: a key this reader does not know (a typo, "map" outside "view"), one line
    // each, for the caller to show; never silence.
    std::vector<std::string> warnings;
};

constexpr int kSessionVersion = 1;

nlohmann::json SessionToJson(const Session& session);
model::Result<Session> SessionFromJson(const nlohmann::json& j);
model::Status SaveSession(const std::string& path, const Session& session);
model::Result<Session> LoadSession(const std::string& path);

// The export part alone, as a session keeps it.
nlohmann::json ExportOptionsToJson(const ExportOptions& options);

}  // namespace app
