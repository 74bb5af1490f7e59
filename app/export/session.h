// A session file: the model, the text, the selections, the view settings and the export dialog's
// settings, as JSON. `ssaviz --session FILE` reopens it exactly; File > Save session (Ctrl+S)
// writes it. Parsing is strict: a wrong key type is a one-line error naming the key.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "app/export/export.h"
#include "app/core/state.h"
#include "model/io/result.h"

namespace app {

struct Session {
    std::string model_dir;  // empty: the bundled default model
    std::string twin_dir;   // empty: compare with tau = 1, as `comparison` says
    bool layer_local = false;  // without a twin: the layer-local tau = 1 comparison ("compare": "local")
    bool compare_unedited = false;  // without a twin: the model without the interventions ("compare": "unedited")
    std::vector<model::Intervention> interventions;  // what-ifs on the SSA side ("interventions": the --ablate syntax)
    std::string device = "auto";
    std::string text;
    bool truncate = false;
    HeadRef selected;
    std::vector<Pin> pinned;
    int query = -1;
    ViewSettings settings;
    ExportOptions export_options;  // empty layers / heads: all
};

constexpr int kSessionVersion = 1;

nlohmann::json SessionToJson(const Session& session);
model::Result<Session> SessionFromJson(const nlohmann::json& j);
model::Status SaveSession(const std::string& path, const Session& session);
model::Result<Session> LoadSession(const std::string& path);

// The export part alone (also what the export dialog shows as a command line).
nlohmann::json ExportOptionsToJson(const ExportOptions& options);
model::Result<ExportOptions> ExportOptionsFromJson(const nlohmann::json& j);

}  // namespace app
