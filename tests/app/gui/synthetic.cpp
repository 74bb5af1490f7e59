#include "tests/app/gui/synthetic.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

namespace app {
namespace {

const char* kWords[] = {" the", " cat", " sat", " on", " a", " mat", ".", " It", " was", " warm", ",", " and",
                        " é", " 你", " time", " passed", " slowly", " while", " birds", " sang"};

// A causal row-normalised map with a given character: 0 diagonal, 1 sink, 2 previous token,
// 3 diffuse; sharper when tau is larger.
void FillHead(float* map, int T, int kind, float tau, std::mt19937& rng) {
    std::normal_distribution<float> noise(0.0f, 1.0f);
    for (int i = 0; i < T; ++i) {
        float* row = map + static_cast<size_t>(i) * T;
        float max_score = -1e30f;
        for (int j = 0; j <= i; ++j) {
            float s = 0.5f * noise(rng);
            if (kind == 0 && j == i) s += 3.0f;
            if (kind == 1 && j == 0) s += 3.0f;
            if (kind == 2 && j == i - 1) s += 3.0f;
            row[j] = s * tau;
            max_score = std::max(max_score, row[j]);
        }
        float sum = 0;
        for (int j = 0; j <= i; ++j) sum += row[j] = std::exp(row[j] - max_score);
        for (int j = 0; j < T; ++j) row[j] = j <= i ? row[j] / sum : 0.0f;
    }
}

model::MapMetrics RowMetrics(const std::vector<float>& maps, int LH, int T) {
    std::vector<float> entropy(LH * T), normalized(LH * T), spiky(LH * T), max_w(LH * T), top5(LH * T), support(LH * T), sink(LH * T);
    for (int m = 0; m < LH; ++m) {
        for (int i = 0; i < T; ++i) {
            const float* row = maps.data() + (static_cast<size_t>(m) * T + i) * T;
            double h = 0, sq = 0;
            std::vector<float> sorted(row, row + i + 1);
            std::sort(sorted.rbegin(), sorted.rend());
            for (int j = 0; j <= i; ++j) {
                if (row[j] > 0) h -= row[j] * std::log(row[j]);
                sq += row[j] * row[j];
            }
            const size_t at = static_cast<size_t>(m) * T + i;
            entropy[at] = static_cast<float>(h);
            normalized[at] = i > 0 ? static_cast<float>(h / std::log(i + 1.0)) : 0.0f;
            spiky[at] = static_cast<float>(1.0 / ((i + 1) * sq));
            max_w[at] = sorted[0];
            float t5 = 0;
            for (size_t k = 0; k < sorted.size() && k < 5; ++k) t5 += sorted[k];
            top5[at] = t5;
            support[at] = static_cast<float>(std::exp(h));
            sink[at] = row[0];
        }
    }
    model::MapMetrics out;
    for (auto& [name, values] : {std::pair{"entropy", &entropy}, {"normalized_entropy", &normalized}, {"spikiness", &spiky},
                                 {"max_weight", &max_w}, {"top5_mass", &top5}, {"effective_support", &support}, {"sink_mass", &sink}})
        out.rows.push_back({name, model::RowArray(*values, LH, T)});
    return out;
}

}  // namespace

model::Analysis MakeSyntheticAnalysis(int L, int H, int T, uint64_t seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    model::Analysis a;
    a.n_layer = L;
    a.n_head = H;
    a.n_tokens = T;
    a.compare_label = "vanilla";
    a.device = "synthetic";
    std::string text;
    for (int i = 0; i < T; ++i) {
        std::string piece = kWords[(i * 7 + seed) % (sizeof kWords / sizeof kWords[0])];
        a.tokens.ids.push_back(1000 + i % 50);
        a.tokens.offsets.push_back({text.size(), text.size() + piece.size()});
        a.tokens.pieces.push_back(piece);
        text += piece;
    }
    const size_t maps = static_cast<size_t>(L) * H * T * T, rows = static_cast<size_t>(L) * H * T;
    std::vector<float> attention(maps), attention_compare(maps);
    std::vector<float> tau_q(rows), tau_v(rows), tau_q_position(rows), tau_q_token(rows);
    for (int l = 0; l < L; ++l) {
        for (int h = 0; h < H; ++h) {
            const int kind = (l * H + h) % 4;
            const float head_tau = 0.5f + 2.0f * uniform(rng);
            for (int i = 0; i < T; ++i) {
                // tau_q = position + token ("sum"): 1 + s ln i with s = 0.3, and a token term of the head's scale.
                const size_t at = a.RowIndex(l, h) + i;
                tau_q[at] = head_tau * (1.0f + 0.3f * std::log(i + 1.0f)) + 0.2f * uniform(rng);
                tau_q_position[at] = 1.0f + 0.3f * std::log(i + 1.0f);
                tau_q_token[at] = tau_q[at] - tau_q_position[at];
                tau_v[a.RowIndex(l, h) + i] = 0.8f + 0.4f * uniform(rng);
            }
            const size_t at = (static_cast<size_t>(l) * H + h) * T * T;
            FillHead(attention.data() + at, T, kind, head_tau, rng);
            FillHead(attention_compare.data() + at, T, kind, 1.0f, rng);
        }
    }
    const int64_t heads = static_cast<int64_t>(L) * H;
    a.tau_q = model::RowArray(tau_q, heads, T);
    a.tau_v = model::RowArray(tau_v, heads, T);
    a.tau_q_position = model::RowArray(tau_q_position, heads, T);
    a.tau_q_token = model::RowArray(tau_q_token, heads, T);
    a.tau_q_compare = model::RowArray::Filled(heads, T, 1.0f);
    a.tau_v_compare = model::RowArray::Filled(heads, T, 1.0f);
    a.metrics = RowMetrics(attention, L * H, T);
    a.metrics_compare = RowMetrics(attention_compare, L * H, T);
    std::vector<float> js(rows), l1(rows);
    for (size_t r = 0; r < rows; ++r) {
        const float *p = attention.data() + r * T, *q = attention_compare.data() + r * T;
        double js_r = 0, l1_r = 0;
        for (int j = 0; j < T; ++j) {
            double m = 0.5 * (p[j] + q[j]);
            if (p[j] > 0) js_r += 0.5 * p[j] * std::log(p[j] / m);
            if (q[j] > 0) js_r += 0.5 * q[j] * std::log(q[j] / m);
            l1_r += std::abs(p[j] - q[j]);
        }
        js[r] = static_cast<float>(js_r);
        l1[r] = static_cast<float>(l1_r);
    }
    a.js = model::RowArray(js, heads, T);
    a.l1 = model::RowArray(l1, heads, T);
    for (int k = 0; k < L * H; ++k) {
        a.qk_opnorm.push_back(1.0f + 3.0f * uniform(rng));
        a.qk_eig_mean.push_back(0.2f * uniform(rng) - 0.1f);
        a.qk_eig_var.push_back(0.05f + 0.5f * uniform(rng));
    }
    std::vector<float> effective(rows);
    for (size_t r = 0; r < rows; ++r) effective[r] = tau_q[r] * a.qk_opnorm[r / T];
    a.effective_qk_norm = model::RowArray(effective, heads, T);
    // Predictions over a made-up vocabulary of kVocab ids: a loss per token that varies with
    // position, each side's top-k as a softmax over a few likely ids, and the last position's logits.
    constexpr int kVocab = 1100, K = model::Analysis::kTopK;
    for (int t = 1; t < T; ++t) {
        a.loss.push_back(0.5f + 4.0f * uniform(rng));
        a.loss_compare.push_back(std::max(0.05f, a.loss.back() + 1.0f * (uniform(rng) - 0.5f)));
        a.rank.push_back(static_cast<int32_t>(20 * uniform(rng)) % 12);
        a.rank_compare.push_back(static_cast<int32_t>(20 * uniform(rng)) % 12);
    }
    for (int t = 0; t < T; ++t) {
        float sum = 0, sum_compare = 0;
        std::vector<float> p(K), q(K);
        for (int k = 0; k < K; ++k) sum += p[k] = std::exp(-0.5f * k - uniform(rng)), sum_compare += q[k] = std::exp(-0.3f * k);
        for (int k = 0; k < K; ++k) {
            // The actual next token sits at its rank when that is in the top k.
            const bool actual = t + 1 < T && a.rank[t] == k;
            a.top_ids.push_back(actual ? a.tokens.ids[t + 1] : (t * 13 + k * 7) % kVocab);
            a.top_ids_compare.push_back(t + 1 < T && a.rank_compare[t] == k ? a.tokens.ids[t + 1] : (t * 11 + k * 5) % kVocab);
            a.top_probs.push_back(p[k] / sum * 0.9f);
            a.top_probs_compare.push_back(q[k] / sum_compare * 0.8f);
        }
    }
    a.next_logits.resize(kVocab);
    for (float& v : a.next_logits) v = 4.0f * uniform(rng);
    a.thumbnails = model::MakeThumbnails(attention, attention_compare, L, H, T);
    a.maps = model::HostAttentionMaps(L, H, T, std::move(attention), std::move(attention_compare));
    return a;
}

}  // namespace app
