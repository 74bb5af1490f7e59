#include "model/io/files.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace model {

Result<std::string> ReadFile(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    if (!file) return Fail("cannot open '" + path + "'");
    std::ostringstream contents;
    contents << file.rdbuf();
    if (file.bad()) return Fail("cannot read '" + path + "'");
    return contents.str();
}

Result<nlohmann::json> ParseJsonFile(const std::string& path) {
    auto text = ReadFile(path);
    if (!text) return Fail(text.error());
    try {
        return nlohmann::json::parse(*text);
    } catch (const nlohmann::json::exception& e) {
        return Fail(path + ": invalid JSON (" + e.what() + ")");
    }
}

std::string ExecutableDir() {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? "" : exe.parent_path().string();
}

}  // namespace model
