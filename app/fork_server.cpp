#include "app/fork_server.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace app {
namespace {

// Bounds on a request: the harness's commands are a few dozen short arguments.
constexpr uint32_t kMaxStrings = 4096;
constexpr uint32_t kMaxLength = 1 << 20;

bool ReadString(int fd, std::string* out) {
    uint32_t length = 0;
    if (!ReadAll(fd, &length, sizeof length) || length > kMaxLength) return false;
    out->resize(length);
    return ReadAll(fd, out->data(), length);
}

// The child's descriptors as the harness's shell redirection made them: `>out 2>err </dev/null`.
bool Redirect(const std::string& path, int fd, int flags) {
    const int opened = open(path.c_str(), flags | O_CLOEXEC, 0644);
    if (opened < 0) return false;
    const bool ok = dup2(opened, fd) == fd;
    close(opened);
    return ok;
}

// The sanitizer runtime's leak check, present (non-null) only in a build with LeakSanitizer.
extern "C" void __lsan_do_leak_check() __attribute__((weak));

// The child ends as `main` would end for the harness, less the static destructors. LibTorch's
// unregister each of its thousands of operators, writing pages this child shares with the server,
// and every page written is copied: 0.35 s a command in Release here (64 ms in a process of its
// own), more under AddressSanitizer, most of some commands' time. So: flush what was written, run
// LeakSanitizer's check as its exit handler would (it exits with its own status on a leak), exit.
[[noreturn]] void ExitWithoutTeardown(int code) {
    std::fflush(nullptr);
    if (__lsan_do_leak_check) __lsan_do_leak_check();
    _exit(code);
}

}  // namespace

int ServeForks(const char* spec, const std::function<int(const std::vector<std::string>&)>& run) {
    int in = -1, out = -1;
    if (std::sscanf(spec, "%d,%d", &in, &out) != 2 || in < 0 || out < 0) {
        std::fprintf(stderr, "ssaviz: SSAVIZ_FORK_SERVER must be two descriptors, IN,OUT\n");
        return 2;
    }
    for (;;) {
        uint32_t count = 0;
        if (!ReadAll(in, &count, sizeof count)) return 0;  // the harness is done
        if (count > kMaxStrings) {
            std::fprintf(stderr, "ssaviz: a fork server request of %u arguments\n", count);
            return 2;
        }
        std::vector<std::string> strings(count + 2);
        for (std::string& s : strings)
            if (!ReadString(in, &s)) {
                std::fprintf(stderr, "ssaviz: a truncated fork server request\n");
                return 2;
            }
        std::fflush(nullptr);
        const pid_t pid = fork();
        if (pid == 0) {
            close(in);
            close(out);
            const std::string& err = strings.back();
            const std::string& std_out = strings[count];
            if (!Redirect(std_out, STDOUT_FILENO, O_WRONLY | O_CREAT | O_TRUNC) || !Redirect(err, STDERR_FILENO, O_WRONLY | O_CREAT | O_TRUNC) ||
                !Redirect("/dev/null", STDIN_FILENO, O_RDONLY))
                _exit(127);
            strings.resize(count);
            const int code = run(strings);
            ExitWithoutTeardown(code);
        }
        int status = 127 << 8;  // as a shell that could not start the command
        if (pid > 0)
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
        const int32_t answer = status;
        if (!WriteAll(out, &answer, sizeof answer)) return 0;
    }
}

}  // namespace app
