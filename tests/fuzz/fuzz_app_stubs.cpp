// The one function the app targets' sources reach that this LibTorch-free build cannot compile:
// app/core/examples.cpp generates the passkey example's text with model/train (LibTorch). The fuzz
// build has no bundled models either, so the list is empty and --example is always refused.
#include "app/core/examples.h"

namespace app {

std::vector<Example> BundledExamples() { return {}; }

}  // namespace app
