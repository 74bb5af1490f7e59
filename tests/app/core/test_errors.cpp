// app/core/run.h's ExceptionMessage: what escapes the engine, as one line the command line, the
// window and Python say.
#include <new>
#include <stdexcept>

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "app/core/run.h"

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// LibTorch's own allocator failing (4.5 PB asked of a machine that has no such memory) reads as out
// of memory with the size asked for, not as an internal error with LibTorch's source line.
TEST(ExceptionMessage, AFailedAllocationSaysOutOfMemoryAndHowMuch) {
    if (kAddressSanitizer) GTEST_SKIP() << "AddressSanitizer ends the process on a failed allocation (allocator_may_return_null=0)";
    try {
        const at::Tensor t = at::empty({int64_t{1} << 50}, at::kFloat);  // 2^52 bytes
        FAIL() << "allocated " << t.numel() << " floats";
    } catch (const std::exception& e) {
        EXPECT_TRUE(app::IsOutOfMemory(e)) << e.what();
        EXPECT_EQ(app::ExceptionMessage(e),
                  "out of memory: LibTorch asked for 4.5 PB at once and this machine could not give it (a model or text too large for its memory)")
            << e.what();
    }
}

TEST(ExceptionMessage, OtherwiseTheFirstLineEscaped) {
    EXPECT_TRUE(app::IsOutOfMemory(std::bad_alloc()));
    EXPECT_EQ(app::ExceptionMessage(std::bad_alloc()), "out of memory (a size or text too large for this machine)");
    const std::runtime_error torch_like("shape '[2, 3]' is invalid for input of size 7\nException raised from at::native::view (frame 0)");
    EXPECT_FALSE(app::IsOutOfMemory(torch_like));
    EXPECT_EQ(app::ExceptionMessage(torch_like), "internal error: shape '[2, 3]' is invalid for input of size 7");
    const std::string escaped = app::ExceptionMessage(std::runtime_error("name \x1b[31mred"));
    EXPECT_EQ(escaped.find('\x1b'), std::string::npos) << "control characters escaped";
    const std::runtime_error cuda("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.1 GiB total capacity)");
    EXPECT_TRUE(app::IsOutOfMemory(cuda));
    EXPECT_EQ(app::ExceptionMessage(cuda), "out of GPU memory: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.1 GiB total capacity)");
}

}  // namespace
