// A fine-tune's drift undone in one place (SPEC section 9): the SSA model with some of its weights,
// never its temperatures, taken back from its base. Run on a text, each part's loss against the
// SSA side's says what that part of the drift did to the loss, as tau = 1 on one head says what
// its temperatures did (app/core/head_impacts). The engine runs it (Engine::MeanLossFromBase);
// from_base_torch.h makes the weights.
#pragma once

#include <string>

namespace model {

struct BasePart {
    enum class Kind {
        Head,        // one head's query, key and value columns and its rows of the output projection
                     // (with grouped queries its kv head's keys and values, which its group shares)
        Attention,   // one layer's whole attention: every head's weights, the norm before it, the output bias
                     // (and Qwen 3's q and k norms)
        Mlp,         // one layer's MLP and the norm before it
        Embeddings,  // the token and position embeddings, the final norm and the output head
        All,         // every weight but the temperatures
    };
    Kind kind = Kind::Head;
    int layer = 0, head = 0;  // Head: both; Attention, Mlp: layer
};
// "L1 H2", "L3 attention", "L3 MLP", "embeddings", "every weight"
std::string Describe(const BasePart& part);

}  // namespace model
