#include "app/cli/interrupts.h"

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <thread>

#include "model/io/files.h"

namespace app {
namespace {

// The handler only writes a byte down a pipe (what a signal handler may safely do); a thread of
// ours reads it and does the rest where anything may be done: removing folders, taking the lock
// that puts files in place. A 0 byte is the destructor's way of ending that thread.
int g_pipe[2] = {-1, -1};
std::atomic<std::atomic<bool>*> g_stop{nullptr};
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kCount = sizeof kSignals / sizeof kSignals[0];

extern "C" void OnSignal(int) {
    const int saved = errno;
    const char one = 1;
    [[maybe_unused]] const ssize_t n = ::write(g_pipe[1], &one, 1);
    errno = saved;
}

int64_t MonotonicNs() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

std::mutex g_note_mutex;
std::string g_note;

[[noreturn]] void EndNow() {
    const int removed = model::RemoveUnfinishedTemporaries();
    std::string note;
    {
        std::lock_guard<std::mutex> lock(g_note_mutex);
        note = g_note;
    }
    std::fprintf(stderr, "%sssaviz: interrupted%s%s\n", isatty(STDERR_FILENO) ? "\n" : "",
                 removed > 0 ? ("; removed the " + std::to_string(removed) + " unfinished files and folders it was writing").c_str() : "",
                 note.empty() ? "" : ("; " + note).c_str());
    std::fflush(stderr);
    _exit(130);
}

}  // namespace

void SetInterruptNote(std::string note) {
    std::lock_guard<std::mutex> lock(g_note_mutex);
    g_note = std::move(note);
}

namespace {

void Watch() {
    int64_t stopped_at = -1;  // when the first interrupt set *g_stop
    for (char byte = 0;;) {
        const ssize_t n = ::read(g_pipe[0], &byte, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 || byte == 0) return;
        const int64_t now = MonotonicNs();
        if (std::atomic<bool>* stop = g_stop.load()) {
            if (!stop->exchange(true)) {
                stopped_at = now;
                continue;
            }
            if (stopped_at >= 0 && now - stopped_at < 1000000000) continue;
        }
        EndNow();
    }
}

struct Installed {
    struct sigaction old[kCount] {};
    std::thread watcher;
};
Installed* g_installed = nullptr;

}  // namespace

Interrupts::Interrupts() {
    if (g_installed || ::pipe2(g_pipe, O_CLOEXEC) != 0) return;  // one at a time; without a pipe, the defaults
    g_installed = new Installed;
    g_installed->watcher = std::thread(Watch);
    // A closed pipe on stdout or stderr (`ssaviz export ... 2>&1 | head -1`) makes writes to it fail
    // instead of killing the process mid-export, its temporary folders left in --out.
    ::signal(SIGPIPE, SIG_IGN);
    for (int k = 0; k < kCount; ++k) {
        struct sigaction ours {};
        ours.sa_handler = OnSignal;
        sigemptyset(&ours.sa_mask);
        ours.sa_flags = SA_RESTART;
        sigaction(kSignals[k], nullptr, &g_installed->old[k]);
        if (g_installed->old[k].sa_handler != SIG_IGN) sigaction(kSignals[k], &ours, nullptr);
    }
}

Interrupts::~Interrupts() {
    if (!g_installed) return;
    for (int k = 0; k < kCount; ++k) sigaction(kSignals[k], &g_installed->old[k], nullptr);
    const char zero = 0;
    while (::write(g_pipe[1], &zero, 1) < 0 && errno == EINTR) {
    }
    g_installed->watcher.join();
    ::close(g_pipe[0]);
    ::close(g_pipe[1]);
    g_pipe[0] = g_pipe[1] = -1;
    delete g_installed;
    g_installed = nullptr;
}

StopAtNextStep::StopAtNextStep(std::atomic<bool>* stop) {
    stop->store(false);
    g_stop.store(stop);
}
StopAtNextStep::~StopAtNextStep() { g_stop.store(nullptr); }

}  // namespace app
