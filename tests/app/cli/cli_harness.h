// What the command-line tests share: running the real ssaviz binary with captured output, reading
// files, and the two small random models (the `cli_models` CTest fixture writes them).
#pragma once

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstring>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/fork_server.h"
#include "tests/npy_floats.h"

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

// One ssaviz process started as a fork server (app/fork_server.h) for this test binary: each
// command then forks from it instead of starting the binary afresh, which costs ~0.7 s in Release
// and ~2 s under AddressSanitizer (loading LibTorch, its static registrations). SSAVIZ_TEST_FORK_SERVER=0
// starts the binary for every command instead.
class ForkServer {
public:
    static ForkServer* Get() {
        static ForkServer* server = Start();
        return server;
    }
    // The command's wait status, or -1 when the server is gone (the caller then starts the binary).
    int Run(const std::vector<std::string>& strings) {
        const std::string request = app::ForkRequest(strings);
        int32_t status = 0;
        if (!app::WriteAll(m_to, request.data(), request.size()) || !app::ReadAll(m_from, &status, sizeof status)) return -1;
        return status;
    }

private:
    static ForkServer* Start() {
        const char* off = std::getenv("SSAVIZ_TEST_FORK_SERVER");
        if (off && std::string(off) == "0") return nullptr;
        int to[2], from[2];  // the harness writes requests to to[1]; the server answers on from[1]
        if (pipe2(to, O_CLOEXEC) != 0 || pipe2(from, O_CLOEXEC) != 0) return nullptr;
        // Everything the child needs is made before fork: this process may have threads.
        // Under LeakSanitizer the children's reports name modules and offsets only (a symbolizer
        // would start for each report), and Ssaviz() adds the same command's report symbolized.
        std::string lsan = "LSAN_OPTIONS=symbolize=0";
        std::vector<std::string> env{"SSAVIZ_FORK_SERVER=3,4"};
        for (char** e = environ; *e; ++e) {
            const std::string entry = *e;
            if (entry.rfind("LSAN_OPTIONS=", 0) == 0)
                lsan = entry + ":" + lsan.substr(lsan.find('=') + 1);
            else if (entry.rfind("SSAVIZ_FORK_SERVER=", 0) != 0)
                env.push_back(entry);
        }
        env.push_back(lsan);
        std::vector<char*> envp;
        for (std::string& e : env) envp.push_back(e.data());
        envp.push_back(nullptr);
        const pid_t pid = fork();
        if (pid == 0) {
            // The server's ends as descriptors 3 and 4, which survive exec; the rest close with it.
            const int in = fcntl(to[0], F_DUPFD_CLOEXEC, 10), out = fcntl(from[1], F_DUPFD_CLOEXEC, 10);
            if (in < 0 || out < 0 || dup2(in, 3) != 3 || dup2(out, 4) != 4) _exit(127);
            execle(SSAVIZ_BINARY, SSAVIZ_BINARY, static_cast<char*>(nullptr), envp.data());
            _exit(127);
        }
        close(to[0]);
        close(from[1]);
        if (pid < 0) return nullptr;
        signal(SIGPIPE, SIG_IGN);  // a server that died answers -1, not a signal
        auto* server = new ForkServer;
        server->m_to = to[1];
        server->m_from = from[0];
        return server;  // ends with this process: its pipe closes and the server returns
    }
    int m_to = -1, m_from = -1;
};

// The binary started afresh for `args`, its output into the scratch files `out` and `err`.
inline int RunAfresh(const std::vector<std::string>& args, const std::string& out, const std::string& err) {
    std::string cmd = Quote(SSAVIZ_BINARY);
    for (const auto& a : args) cmd += " " + Quote(a);
    cmd += " >" + Scratch(out) + " 2>" + Scratch(err) + " </dev/null";
    return std::system(cmd.c_str());
}

inline Outcome Ssaviz(const std::vector<std::string>& args) {
    std::vector<std::string> strings{SSAVIZ_BINARY};
    strings.insert(strings.end(), args.begin(), args.end());
    strings.push_back(Scratch("stdout"));
    strings.push_back(Scratch("stderr"));
    ForkServer* server = ForkServer::Get();
    int status = server ? server->Run(strings) : -1;
    const bool forked = status != -1;
    if (!forked) status = RunAfresh(args, "stdout", "stderr");
    Outcome r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = ReadFile(Scratch("stdout"));
    r.err = ReadFile(Scratch("stderr"));
    // A sanitizer's report fails the test whatever it expected of the command (ASan exits 1, a
    // status some tests expect); from a forked child, unsymbolized, with the same command's report
    // from a process of its own after it (its files written again).
    if (r.err.find("Sanitizer: ") != std::string::npos) {
        std::string again;
        if (forked) {
            RunAfresh(args, "again.stdout", "again.stderr");
            again = "\nThe same command started afresh:\n" + ReadFile(Scratch("again.stderr"));
        }
        ADD_FAILURE() << "a sanitizer's report from ssaviz:\n" << r.err << again;
    }
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

using tests::NpyFloats;

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
