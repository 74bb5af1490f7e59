#include "model/nn/sampling.h"

#include <algorithm>
#include <cmath>

namespace model {

int32_t NextToken(const std::vector<float>& logits, size_t vocab, float temperature, int top_k, uint64_t* rng_state) {
    const size_t n = std::min(vocab, logits.size());
    if (n == 0) return 0;
    std::vector<int32_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = static_cast<int32_t>(i);
    auto better = [&](int32_t x, int32_t y) { return logits[x] > logits[y] || (logits[x] == logits[y] && x < y); };
    if (!(temperature > 0)) return *std::min_element(order.begin(), order.end(), better);
    const size_t k = top_k > 0 ? std::min(n, static_cast<size_t>(top_k)) : n;
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), better);
    std::vector<double> weight(k);
    const double top = logits[order[0]];
    double sum = 0;
    for (size_t i = 0; i < k; ++i) sum += weight[i] = std::exp((logits[order[i]] - top) / temperature);
    // SplitMix64, then 53 bits to a double in [0, 1).
    uint64_t z = (*rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    double u = static_cast<double>(z >> 11) * 0x1.0p-53 * sum;
    for (size_t i = 0; i < k; ++i) {
        if (u < weight[i]) return order[i];
        u -= weight[i];
    }
    return order[k - 1];
}

Result<std::string> AppendToken(const Tokenizer& tokenizer, int32_t id, Tokenization* tokens) {
    const size_t end = tokens->offsets.empty() ? 0 : tokens->offsets.back().second;
    auto piece = DecodeAfter(tokenizer, tokens->ids.empty() ? -1 : tokens->ids.back(), id);
    if (!piece) return piece;
    tokens->ids.push_back(id);
    tokens->offsets.push_back({end, end + piece->size()});
    tokens->pieces.push_back(std::move(*piece));
    return tokens->pieces.back();
}

}  // namespace model
