// The process's compute threads (issue 39): the usable cores by default, what limits them, and
// SSAVIZ_THREADS over all of it.
#include <gtest/gtest.h>

#include <cstdlib>

#include "model/nn/runtime.h"

namespace {

TEST(Runtime, CgroupCpuMaxReadsAsCores) {
    EXPECT_EQ(model::QuotaCoresFromCpuMax("max 100000\n"), 0);
    EXPECT_DOUBLE_EQ(model::QuotaCoresFromCpuMax("150000 100000\n"), 1.5);
    EXPECT_DOUBLE_EQ(model::QuotaCoresFromCpuMax("200000 100000"), 2.0);
    for (const char* bad : {"", "max", "150000", "abc 100000", "150000 0", "-5 100000", "1e400 100000", "150000 100000x"})
        EXPECT_EQ(model::QuotaCoresFromCpuMax(bad), 0) << bad;
}

TEST(Runtime, TheDefaultIsEveryUsableCoreLessWhatIsKept) {
    unsetenv("SSAVIZ_THREADS");
    const int usable = model::UsableCores();
    EXPECT_GE(usable, 1);
    EXPECT_LE(usable, model::AffinityCores());
    EXPECT_EQ(model::ResolveComputeThreads().count, usable);
    EXPECT_EQ(model::ResolveComputeThreads(1).count, std::max(1, usable - 1));
    EXPECT_EQ(model::ResolveComputeThreads(1000).count, 1);
    if (usable > 1) { EXPECT_NE(model::ResolveComputeThreads(1).why.find("1 kept for the window"), std::string::npos); }

    setenv("SSAVIZ_THREADS", "5", 1);
    EXPECT_EQ(model::ResolveComputeThreads(1).count, 5);
    EXPECT_EQ(model::ResolveComputeThreads(1).why, "SSAVIZ_THREADS=5");
    setenv("SSAVIZ_THREADS", "many", 1);  // not a count: the default
    EXPECT_EQ(model::ResolveComputeThreads().count, usable);
    unsetenv("SSAVIZ_THREADS");

    model::UseComputeThreads({2, "a test's two"});
    EXPECT_EQ(model::CurrentComputeThreads().count, 2);
    EXPECT_EQ(model::CurrentComputeThreads().why, "a test's two");
}

}  // namespace
