// Writes an analysis to files for scripts and papers: tokens.json, metrics.json, .npy tensors and
// per-head CSV (SPEC section 4). The same code serves `ssaviz export` and, later, the GUI.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/analysis.h"

namespace app {

struct ExportOptions {
    std::string out_dir;
    std::vector<int> layers;  // which heads get per-head files (CSV, heatmaps)
    std::vector<int> heads;
    bool json = true, npy = true, csv = false;
    float sink_epsilon = 0.3f;
};

nlohmann::json TokensToJson(std::string_view text, const model::Tokenization& tokens);
nlohmann::json MetricsToJson(const model::Analysis& analysis, const model::ModelInfo& info, float sink_epsilon);
nlohmann::json InfoToJson(const model::ModelInfo& info);

model::Status WriteExport(std::string_view text, const model::Analysis& analysis, const model::ModelInfo& info,
                          const ExportOptions& options);

}  // namespace app
