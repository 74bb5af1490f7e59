// Small file helpers shared by the loaders, the trainer and the app.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "model/io/result.h"

namespace model {

// A whole file as bytes; the error names the path.
Result<std::string> ReadFile(const std::string& path);
// A whole file parsed as JSON; the error names the path and the parser's complaint.
Result<nlohmann::json> ParseJsonFile(const std::string& path);
// The folder of the running executable (from /proc/self/exe); empty if unknown.
std::string ExecutableDir();

}  // namespace model
