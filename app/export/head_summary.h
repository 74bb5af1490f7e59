// Each head in a few numbers: the Heads grid badges, the Table tab, the sparsity plots and
// metrics.json agree on them.
#pragma once

#include <string>
#include <vector>

#include "app/core/state.h"
#include "model/nn/analysis.h"

namespace app {

// One head in numbers, as metrics.json reports it (app/export/export.cpp): row metrics averaged over query
// rows 2..T (model::HeadRowMean), temperatures over all T tokens. NaN where the analysis lacks it.
struct HeadSummary {
    HeadRef ref;
    float entropy, entropy_compare;  // nats
    float normalized_entropy, normalized_entropy_compare;
    float spikiness, spikiness_compare;
    float sink_mass, sink_mass_compare;
    float max_weight;
    float js, l1;  // SSA against the comparison; JS in nats
    float tau_q_mean, tau_q_min, tau_q_max, tau_v_mean;
    float tau_q_compare_mean;
    float qk_opnorm, qk_eig_mean, qk_eig_var;
};

// model::HeadRowMean, or NaN when the array is missing (null) or too short.
float HeadMean(const std::vector<float>* rows, const model::Analysis& a, int l, int h);

// Per query position, the mean over every head of a [L, H, T] row metric; position 1 (one key,
// trivial) and positions without a finite value are NaN.
std::vector<float> RowMeanOverHeads(const std::vector<float>* rows, const model::Analysis& a);

// All heads, layer-major: [L * H].
std::vector<HeadSummary> SummarizeHeads(const model::Analysis& a);

// The sink-head rule of SPEC section 2 and metrics.json: mean first-token mass above epsilon.
bool IsSinkHead(float sink_mass, float epsilon);

}  // namespace app
