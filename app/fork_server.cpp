#include "app/fork_server.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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
extern "C" void __lsan_disable() __attribute__((weak));
extern "C" void __lsan_enable() __attribute__((weak));

// LeakSanitizer's check marks every block it reaches, writing each block's header: in a child of
// the server that writes nearly every page of the heap the server built (LibTorch's registrations),
// and each page written is copied: ~1.0 s a command under AddressSanitizer, 0.3 s without. The
// blocks allocated while LeakSanitizer is disabled are its "ignored" ones: scanned for pointers
// like the rest but never marked. So a server disables it before the first library's constructor
// runs (.preinit_array, which only an executable has, runs before them all) and enables it again
// when it starts serving (ServeForks): what a child allocates is checked as ever, what the start-up
// allocated is only read. Without SSAVIZ_FORK_SERVER, or without LeakSanitizer, nothing changes.
void DisableLeakChecksForStartup(int, char**, char** envp) {
    if (!__lsan_disable) return;
    for (char** e = envp; e && *e; ++e)
        if (std::strncmp(*e, "SSAVIZ_FORK_SERVER=", 19) == 0) return __lsan_disable();
}
__attribute__((section(".preinit_array"), used)) void (*const kDisableLeakChecksForStartup)(int, char**, char**) = DisableLeakChecksForStartup;

// With SSAVIZ_FORK_SERVER_LEAK set a child loses one block on purpose: the test suite's proof that
// a child's own blocks are checked (test_cli.cpp). Only the block's complement is kept, which no
// scan takes for a pointer into it.
volatile uintptr_t g_lost_block;
__attribute__((noinline)) void LeakABlock() { g_lost_block = ~reinterpret_cast<uintptr_t>(std::malloc(64)); }

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
    if (__lsan_enable) __lsan_enable();  // disabled since start-up (DisableLeakChecksForStartup)
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
            if (std::getenv("SSAVIZ_FORK_SERVER_LEAK")) LeakABlock();
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
