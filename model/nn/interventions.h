// What-ifs on an SSA model's temperatures: what one is, its name in the window, and the
// --ablate syntax that the command line, session files and exports read and write. The engine
// (analysis.h) applies them to the SSA side.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/io/result.h"

namespace model {

// A what-if on the SSA side's temperatures, for one head or a whole layer (issue 17). With the
// Unedited comparison, the difference views and the delta loss show its effect alone.
struct Intervention {
    enum class Kind {
        Ablate,        // tau_q = tau_v = 1: the head without SSA
        PositionOnly,  // tau_q keeps its position term only (the token term 0)
        TokenOnly,     // tau_q keeps its token term only (the position term 1)
        Scale,         // tau_q = 1 + scale (tau_q - 1)
        QueryOff,      // tau_q = 1, tau_v kept: the head's query temperature's part alone
        ValueOff,      // tau_v = 1, tau_q kept: its value temperature's part alone
    };
    Kind kind = Kind::Ablate;
    int layer = 0;
    int head = -1;      // -1: every head of the layer
    float scale = 0.0f; // Scale only
    bool operator==(const Intervention& o) const {
        return kind == o.kind && layer == o.layer && head == o.head && (kind != Kind::Scale || scale == o.scale);
    }
};
// "L1 H2: tau = 1", "L0 all heads: position term only", "L2 H0: (tau_q - 1) x 0.5", "L1 H2: tau_v = 1"
std::string Describe(const Intervention& intervention);
// The --ablate syntax: comma-separated "L:H" or "L:*" (every head of layer L), each optionally
// followed by "=pos" (position term only), "=tok" (token term only), "=xS" (scale tau_q - 1 by
// S, a finite number), "=q" (tau_q = 1 alone) or "=v" (tau_v = 1 alone); plain is tau = 1, both.
// Errors name the item and the model's shape.
Result<std::vector<Intervention>> ParseInterventions(std::string_view spec, int n_layer, int n_head);
std::string FormatInterventions(const std::vector<Intervention>& interventions);  // the inverse

// The most what-ifs one list may hold: a what-if of every kind on every head and layer of an
// 80-layer, 64-head model is 20,800, and more only repeat them (a list of millions, from a session
// or --ablate, took 36 s and 1.7 GB to apply). ParseInterventions and Engine::SetInterventions check it.
constexpr size_t kMaxInterventions = 65536;

// The largest factor on tau_q - 1 that the what-ifs on one head may make together: several scales
// on the same head (its own and its layer's L:*) multiply, and past this the attention logits leave
// float range and the maps and losses turn to NaN. Only factors larger than 1 in size count, so no
// partial product on the way is larger either.
constexpr double kMaxInterventionScale = 1e6;
// Fails, naming the head and the combined factor, when the what-ifs on one head exceed it.
// ParseInterventions and Engine::SetInterventions check it.
Status CheckCombinedScales(const std::vector<Intervention>& interventions);

}  // namespace model
