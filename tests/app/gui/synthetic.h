// Synthetic analyses with plausible structure (diagonal, sink, and previous-token heads; tau
// varying with position; per-token losses, ranks and top-10 predictions over ids 0..1099), for the
// headless view tests. Never shown as a real model's result.
#pragma once

#include <cstdint>

#include "model/nn/analysis.h"

namespace app {

model::Analysis MakeSyntheticAnalysis(int layers, int heads, int tokens, uint64_t seed = 1);

}  // namespace app
