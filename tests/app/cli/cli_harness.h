// What the command-line tests share: running the real ssaviz binary with captured output, reading
// files, and the two small random models (the `cli_models` CTest fixture writes them).
#pragma once

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cli_test {
namespace fs = std::filesystem;
using nlohmann::json;

inline const std::string kOut = std::string(SSAVIZ_TEST_OUT) + "/cli";

inline std::string Quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

inline std::string ReadFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

struct Outcome {
    int code = -1;
    std::string out, err;
};

// Each test has its own capture files: CTest runs tests in parallel processes.
inline std::string Scratch(const std::string& name) {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    return kOut + "/" + (test ? test->name() : "setup") + "." + name;
}

inline Outcome Ssaviz(const std::vector<std::string>& args) {
    std::string cmd = Quote(SSAVIZ_BINARY);
    for (const auto& a : args) cmd += " " + Quote(a);
    cmd += " >" + Scratch("stdout") + " 2>" + Scratch("stderr") + " </dev/null";
    int status = std::system(cmd.c_str());
    Outcome r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = ReadFile(Scratch("stdout"));
    r.err = ReadFile(Scratch("stderr"));
    return r;
}

// Shape from a .npy header: "'shape': (2, 2, 7, 7)".
inline std::vector<int64_t> NpyShape(const std::string& path) {
    std::string head = ReadFile(path).substr(0, 128);
    std::smatch m;
    std::vector<int64_t> shape;
    if (!std::regex_search(head, m, std::regex("'shape': \\(([0-9, ]*)\\)"))) return shape;
    std::stringstream ss(m[1].str());
    std::string item;
    while (std::getline(ss, item, ','))
        if (item.find_first_of("0123456789") != std::string::npos) shape.push_back(std::stoll(item));
    return shape;
}

class Cli : public ::testing::Test {
protected:
    // The CTest fixture `cli_models` writes these once; a direct run of this binary writes them
    // itself.
    static void SetUpTestSuite() {
        fs::create_directories(kOut);
        if (fs::exists(Small() + "/model.safetensors") && fs::exists(Twin() + "/model.safetensors")) return;
        const std::string tokenizer = std::string(SSAVIZ_SOURCE_DIR) + "/assets/tokenizers/gpt2";
        for (auto [dir, seed] : {std::pair{"small", "7"}, std::pair{"twin", "99"}}) {
            Outcome r = Ssaviz({"init-random", "--out", kOut + "/" + dir, "--seed", seed, "--tokenizer", tokenizer, "--layers", "2",
                            "--heads", "2", "--embd", "16", "--positions", "16"});
            ASSERT_EQ(r.code, 0) << r.err;
        }
    }
    static std::string Small() { return kOut + "/small"; }
    static std::string Twin() { return kOut + "/twin"; }
};

// A failure prints exactly one line naming the problem.
inline void ExpectOneLineError(const Outcome& r, int code, const std::string& needle) {
    EXPECT_EQ(r.code, code) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace cli_test
