// Two analyses of the same tokens compared array by array, for the tests that check one way of
// computing an analysis against another (edits against full analyses, a model held in BF16
// against its float32 copy).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "model/nn/analysis.h"

namespace analysis_test {

using model::MapSide;

// Largest |a - b| / max(1, |b|) over two arrays of one shape (NaN only where both are NaN; values
// above 1, such as effective support, compared relatively); +inf on a mismatch.
// Plain arithmetic on raw pointers: test code is compiled at -O0 (tests/CMakeLists.txt), where each
// operator[], std::isnan and std::max would be a call, and this loop reads every map of every edit.
inline float Worst(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return INFINITY;
    const float *pa = a.data(), *pb = b.data();
    const size_t n = a.size();
    float worst = 0;
    for (size_t i = 0; i < n; ++i) {
        const float x = pa[i], y = pb[i];
        const bool x_nan = x != x, y_nan = y != y;
        if (x_nan || y_nan) {
            if (!(x_nan && y_nan)) return INFINITY;
            continue;
        }
        const float difference = x > y ? x - y : y - x, scale = y > 1 ? y : -y > 1 ? -y : 1;
        if (difference / scale > worst) worst = difference / scale;
    }
    return worst;
}

// Two difference thumbnails: a cell holds its block's value of largest magnitude, whose magnitude
// follows the maps continuously but whose sign does not where a positive and a negative cell of the
// block tie to rounding (each side's rounding picks its own: 8.6e-4 against -8.5e-4 at 923 tokens
// under an Intel Xeon's AVX-512 OpenBLAS kernels). Magnitudes as Worst compares them; signs the same
// in all but 0.1% of the cells past `floor` (a sign wrong throughout flips far more; below it a
// cell is rounding, as a head no what-if touches against the unedited model, whose sign is any;
// the maps themselves are compared cell by cell); +inf where they are not.
inline float WorstLargestMagnitude(const std::vector<float>& a, const std::vector<float>& b, float floor = 1e-5f) {
    if (a.size() != b.size()) return INFINITY;
    std::vector<float> x(a.size()), y(b.size());
    size_t flipped = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        x[i] = std::fabs(a[i]), y[i] = std::fabs(b[i]);
        flipped += (x[i] > floor || y[i] > floor) && ((a[i] > 0 && b[i] < 0) || (a[i] < 0 && b[i] > 0));
    }
    return flipped * 1000 > a.size() ? INFINITY : Worst(x, y);
}

inline std::vector<float> Values(const model::RowArray& v) { return v.Flat(); }
inline const std::vector<float>& Values(const std::vector<float>& v) { return v; }

// Every array of two analyses of the same tokens; `what` names the first that differs most.
inline float CompareAnalyses(const model::Analysis& got, const model::Analysis& want, std::string* what) {
    float worst = 0;
    auto check = [&](const auto& a, const auto& b, const std::string& name) {
        const float w = Worst(Values(a), Values(b));
        if (w > worst) {
            worst = w;
            *what = name;
        }
    };
    if (got.n_tokens != want.n_tokens || got.tokens.ids != want.tokens.ids) {
        *what = "tokens";
        return INFINITY;
    }
    for (const auto& row : want.metrics.rows) check(got.metrics.Get(row.name), row.values, "SSA " + row.name);
    for (const auto& row : want.metrics_compare.rows) check(got.metrics_compare.Get(row.name), row.values, "compare " + row.name);
    if (got.HasBase() != want.HasBase() || got.metrics_base.rows.size() != want.metrics_base.rows.size()) {
        *what = "whether there is a base";
        return INFINITY;
    }
    for (const auto& row : want.metrics_base.rows) check(got.metrics_base.Get(row.name), row.values, "base " + row.name);
    check(got.js, want.js, "js");
    check(got.l1, want.l1, "l1");
    check(got.js_total, want.js_total, "js_total");
    check(got.l1_total, want.l1_total, "l1_total");
    check(got.js_drift, want.js_drift, "js_drift");
    check(got.l1_drift, want.l1_drift, "l1_drift");
    check(got.tau_q_base, want.tau_q_base, "tau_q_base");
    check(got.tau_v_base, want.tau_v_base, "tau_v_base");
    check(got.loss_base, want.loss_base, "loss_base");
    check(got.top_probs_base, want.top_probs_base, "top_probs_base");
    check(got.tau_q, want.tau_q, "tau_q");
    check(got.tau_v, want.tau_v, "tau_v");
    check(got.tau_q_compare, want.tau_q_compare, "tau_q_compare");
    check(got.tau_v_compare, want.tau_v_compare, "tau_v_compare");
    check(got.tau_q_position, want.tau_q_position, "tau_q_position");
    check(got.tau_q_token, want.tau_q_token, "tau_q_token");
    check(got.effective_qk_norm, want.effective_qk_norm, "effective_qk_norm");
    check(got.loss, want.loss, "loss");
    check(got.loss_compare, want.loss_compare, "loss_compare");
    check(got.top_probs, want.top_probs, "top_probs");
    check(got.top_probs_compare, want.top_probs_compare, "top_probs_compare");
    check(got.next_logits, want.next_logits, "next_logits");
    // Ids and ranks are integers: rounding may swap near-equal logits. A rank counts the logits above
    // the actual token's, and a random model has tens of thousands of near-equal ones, so a few
    // within rounding of it may move: ranks agree within 0.1% of the vocabulary.
    auto ids_agree = [](const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
        if (a.size() != b.size()) return false;
        size_t differ = 0;
        for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
        return differ * 100 <= a.size();
    };
    const int slack = std::max<int>(1, static_cast<int>(want.next_logits.size() / 1000));
    auto ranks_agree = [&](const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
        if (a.size() != b.size()) return false;
        for (size_t i = 0; i < a.size(); ++i)
            if (std::abs(a[i] - b[i]) > slack) return false;
        return true;
    };
    if (!ids_agree(got.top_ids, want.top_ids) || !ids_agree(got.top_ids_compare, want.top_ids_compare) ||
        !ids_agree(got.top_ids_base, want.top_ids_base)) {
        *what = "top ids";
        return INFINITY;
    }
    if (!ranks_agree(got.rank, want.rank) || !ranks_agree(got.rank_compare, want.rank_compare) || !ranks_agree(got.rank_base, want.rank_base)) {
        *what = "ranks";
        return INFINITY;
    }
    if (got.thumbnails.side != want.thumbnails.side || got.thumbnails.pool != want.thumbnails.pool ||
        got.thumbnails.kinds != want.thumbnails.kinds || want.thumbnails.kinds != (want.HasBase() ? model::kThumbnailKinds : 3)) {
        *what = "thumbnail shape";
        return INFINITY;
    }
    using model::ThumbnailKind;
    check(got.thumbnails.All(ThumbnailKind::Ssa), want.thumbnails.All(ThumbnailKind::Ssa), "thumbnails (SSA)");
    check(got.thumbnails.All(ThumbnailKind::Compare), want.thumbnails.All(ThumbnailKind::Compare), "thumbnails (comparison)");
    auto check_difference = [&](ThumbnailKind kind, const std::string& name) {
        const float w = WorstLargestMagnitude(got.thumbnails.All(kind), want.thumbnails.All(kind));
        if (w > worst) worst = w, *what = name;
    };
    check_difference(ThumbnailKind::Difference, "thumbnails (difference)");
    check(got.thumbnails.All(ThumbnailKind::Base), want.thumbnails.All(ThumbnailKind::Base), "thumbnails (base)");
    check_difference(ThumbnailKind::BaseDifference, "thumbnails (SSA - base)");
    const char* side_names[] = {"SSA", "compare", "base"};
    for (MapSide side : {MapSide::Ssa, MapSide::Compare, MapSide::Base}) {
        if (side == MapSide::Base && !want.HasBase()) continue;
        for (int l = 0; l < want.n_layer; ++l)
            for (int h = 0; h < want.n_head; ++h) {
                const model::HeadMap a = got.Map(side, l, h), b = want.Map(side, l, h);
                if (!a || !b) {
                    *what = "a missing map";
                    return INFINITY;
                }
                check(*a, *b, std::string(side_names[static_cast<int>(side)]) + " map L" + std::to_string(l) + "H" + std::to_string(h));
            }
    }
    return worst;
}

}  // namespace analysis_test
