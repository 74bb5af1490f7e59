// When a model is "big" (issue 27), in one place: the worker applies the rule when a model opens,
// the model panel and the screenshots say what it decided and why. A big model opens with the
// cheap layer-local comparison (each layer's own q and k with tau = 1, no second forward pass)
// instead of the global tau = 1 counterfactual, whose second forward pass doubles the cost of
// every analysis; the global pass then runs on request (Ctrl+T).
#pragma once

#include <cstdint>
#include <string>

#include "model/nn/model_folder.h"

namespace app {

// A model on a CPU with this many parameters or more is big. The second pass costs what the first
// does, ~2 x parameters x tokens flops: for 400 M parameters and 1,024 tokens ~0.8 TFLOP, over
// 10 s on 2 cores, while GPT-2 small (124 M) and medium (355 M) stay interactive with it. On a
// GPU the second pass is cheap whatever the size. `ssaviz --big-model N` moves the line (tests).
constexpr int64_t kBigModelParameters = 400'000'000;

struct ModelScale {
    bool big = false;
    std::string reason;  // one or two sentences for the model panel: the rule and what it chose
};
ModelScale ScaleOf(const model::ModelInfo& info, int64_t big_parameters = kBigModelParameters);

// A count of parameters as people say it, to three significant digits: 1100 -> "1.1 k",
// 1353472 -> "1.35 M", 124439808 -> "124 M", 400000000 -> "400 M"; under 1,000 the number itself.
std::string CountName(int64_t n);

}  // namespace app
