// A test harness's way to run the ssaviz binary many times without paying its start-up each time
// (tests/app/cli/cli_harness.h). Built into ssaviz only with the test suite (SSAVIZ_TESTS), and
// only entered when the harness sets SSAVIZ_FORK_SERVER to the two pipe descriptors it made.
//
// The server is the binary itself, started once, its libraries loaded and its static state built
// (LibTorch's operator registrations: ~0.7 s a start in Release, ~2 s under AddressSanitizer) and
// nothing else run: no thread pool has started, no model is open. For each request it forks, and
// the child runs `main`'s own code on the request's arguments with stdout and stderr on the named
// files and stdin on /dev/null, flushes them, runs LeakSanitizer's check (in a build with it; of
// the blocks the child allocated, fork_server.cpp says why) and exits with `main`'s status,
// skipping the static destructors (LibTorch's unregistering of its operators writes pages shared
// with the server, each then copied: 0.35 s a command in Release).
// So each command runs in a fresh process of the real binary; only the loader's work is shared,
// and the teardown is left to the tests that start the binary itself (the windowed ones).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace app {

// `spec`: "IN,OUT", the descriptors requests come from and statuses go to. Each request: a 32-bit
// count n, then n + 2 strings (a 32-bit length and the bytes): the arguments, the stdout file, the
// stderr file. Each answer: the child's 32-bit wait status. Returns at the end of the requests (0),
// or 2 with one line on stderr for a malformed spec or request.
int ServeForks(const char* spec, const std::function<int(const std::vector<std::string>&)>& run);

// Both ends of the protocol (the server here, the harness in tests/app/cli/cli_harness.h).
// read() or write() until `size` bytes have moved; false at the end of the pipe or on an error.
template <class Io, class Byte>
bool TransferAll(Io io, int fd, Byte* p, size_t size) {
    while (size > 0) {
        const ssize_t n = io(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}
inline bool ReadAll(int fd, void* data, size_t size) { return TransferAll(read, fd, static_cast<char*>(data), size); }
inline bool WriteAll(int fd, const void* data, size_t size) { return TransferAll(write, fd, static_cast<const char*>(data), size); }
// A request as ServeForks reads it: `strings` are the arguments, then the stdout and stderr files.
inline std::string ForkRequest(const std::vector<std::string>& strings) {
    std::string request;
    auto put = [&request](uint32_t n) { request.append(reinterpret_cast<const char*>(&n), sizeof n); };
    put(static_cast<uint32_t>(strings.size() - 2));
    for (const std::string& s : strings) {
        put(static_cast<uint32_t>(s.size()));
        request += s;
    }
    return request;
}

}  // namespace app
