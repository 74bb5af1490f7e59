// Each head in a few numbers: every head value of the catalogue (app/core/quantities.h) on each
// side, read once per analysis. The Heads grid badges, the matrix, the Table tab, the tooltips,
// the sparsity plots, batch summaries and metrics.json agree on them.
#pragma once

#include <string_view>
#include <vector>

#include "app/core/quantities.h"
#include "app/core/state.h"
#include "model/nn/analysis.h"

namespace app {

// One head's values: row metrics averaged over query rows 2..T (model::HeadRowMean), temperatures
// over all T tokens, as metrics.json reports them. NaN where the analysis lacks a value.
struct HeadSummary {
    HeadRef ref;
    std::vector<float> values;  // [HeadValues().size(), kSides]

    float Get(const HeadValue& v, Side side = Side::Ssa) const { return values[static_cast<size_t>(v.index) * kSides + static_cast<int>(side)]; }
    // What a view shows: a side, or SSA minus the comparison or the base; a one-sided value reads
    // the same in every mode.
    float Get(const HeadValue& v, MapMode mode) const;
    // By key ("sink_mass"); the key must name a head value.
    float Get(std::string_view key, Side side = Side::Ssa) const;
};

// model::HeadRowMean, or NaN when the array is missing (null) or too short.
float HeadMean(const model::RowArray* rows, const model::Analysis& a, int l, int h);

// Per query position, the mean over every head of a [L, H, T] row metric; position 1 (one key,
// trivial) and positions without a finite value are NaN.
std::vector<float> RowMeanOverHeads(const model::RowArray* rows, const model::Analysis& a);

// All heads, layer-major: [L * H].
std::vector<HeadSummary> SummarizeHeads(const model::Analysis& a);

// The sink-head rule of SPEC section 2 and metrics.json: mean first-token mass (the catalogue's
// quantity with `sink` set) above epsilon.
bool IsSinkHead(float sink_mass, float epsilon);
// The rule on a summary: its sink quantity's head value on `side`.
bool IsSinkHead(const HeadSummary& s, Side side, float epsilon);

}  // namespace app
