#include "model/nn/interventions.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "model/io/files.h"

namespace model {

std::string Describe(const Intervention& x) {
    std::string where = "L" + std::to_string(x.layer) + (x.head < 0 ? " all heads" : " H" + std::to_string(x.head));
    switch (x.kind) {
        case Intervention::Kind::Ablate: return where + ": tau = 1";
        case Intervention::Kind::PositionOnly: return where + ": position term only";
        case Intervention::Kind::TokenOnly: return where + ": token term only";
        case Intervention::Kind::QueryOff: return where + ": tau_q = 1";
        case Intervention::Kind::ValueOff: return where + ": tau_v = 1";
        case Intervention::Kind::Scale: {
            char scale[32];
            std::snprintf(scale, sizeof scale, "%g", x.scale);
            return where + ": (tau_q - 1) x " + scale;
        }
    }
    return where;
}

std::string FormatInterventions(const std::vector<Intervention>& list) {
    std::string out;
    for (const Intervention& x : list) {
        if (!out.empty()) out += ",";
        out += std::to_string(x.layer) + ":" + (x.head < 0 ? std::string("*") : std::to_string(x.head));
        if (x.kind == Intervention::Kind::PositionOnly) out += "=pos";
        if (x.kind == Intervention::Kind::TokenOnly) out += "=tok";
        if (x.kind == Intervention::Kind::QueryOff) out += "=q";
        if (x.kind == Intervention::Kind::ValueOff) out += "=v";
        if (x.kind == Intervention::Kind::Scale) {
            char scale[32];
            std::snprintf(scale, sizeof scale, "=x%.9g", x.scale);
            out += scale;
        }
    }
    return out;
}

Status CheckCombinedScales(const std::vector<Intervention>& list) {
    // Per layer: the growth its L:* what-ifs give every head, and each named head's own, as sums
    // of log10 so that thousands of factors cannot overflow the check itself.
    std::map<int, double> layer_growth;
    std::map<std::pair<int, int>, double> head_growth;
    for (const Intervention& x : list) {
        if (x.kind != Intervention::Kind::Scale || !(std::abs(x.scale) > 1)) continue;
        const double growth = std::log10(std::abs(static_cast<double>(x.scale)));
        if (x.head < 0) layer_growth[x.layer] += growth;
        else head_growth[{x.layer, x.head}] += growth;
    }
    const double limit = std::log10(kMaxInterventionScale);
    auto fail = [&](const std::string& where, double growth) {
        char what[128];
        if (growth < 300)
            std::snprintf(what, sizeof what, "scale tau_q - 1 by up to %.3g together, more than the %g one head may take", std::pow(10.0, growth),
                          kMaxInterventionScale);
        else
            std::snprintf(what, sizeof what, "scale tau_q - 1 by up to 1e%.0f together, more than the %g one head may take", std::floor(growth),
                          kMaxInterventionScale);
        return Fail("--ablate: the what-ifs on " + where + " " + what + " (the maps would overflow float range)");
    };
    for (const auto& [layer, growth] : layer_growth)
        if (growth > limit + 1e-9) return fail("every head of L" + std::to_string(layer), growth);
    for (const auto& [head, growth] : head_growth) {
        const auto shared = layer_growth.find(head.first);
        const double total = growth + (shared == layer_growth.end() ? 0.0 : shared->second);
        if (total > limit + 1e-9) return fail("L" + std::to_string(head.first) + " H" + std::to_string(head.second), total);
    }
    return Ok{};
}

Result<std::vector<Intervention>> ParseInterventions(std::string_view spec, int n_layer, int n_head) {
    std::vector<Intervention> list;
    const std::string shape = " (the model has " + std::to_string(n_layer) + " layers x " + std::to_string(n_head) + " heads)";
    auto whole = [](std::string_view text, int* out) {  // a small non-negative whole number
        if (text.empty() || text.size() > 6) return false;
        int v = 0;
        for (char ch : text) {
            if (ch < '0' || ch > '9') return false;
            v = v * 10 + (ch - '0');
        }
        *out = v;
        return true;
    };
    if (spec.find_first_not_of(" ,") == std::string_view::npos) return Fail("--ablate is empty");
    if (const size_t items = std::count(spec.begin(), spec.end(), ',') + size_t{1}; items > kMaxInterventions)
        return Fail("--ablate lists " + std::to_string(items) + " what-ifs; at most " + std::to_string(kMaxInterventions) +
                    " (one of each kind on every head of any model fits)");
    size_t start = 0;
    while (start <= spec.size()) {
        const size_t comma = std::min(spec.find(',', start), spec.size());
        const std::string_view item = spec.substr(start, comma - start);
        const std::string shown = "'" + EscapeForMessage(item, 64) + "'";
        Intervention x;
        const size_t colon = item.find(':'), equals = item.find('=');
        if (colon == std::string_view::npos) return Fail("--ablate item " + shown + " is not LAYER:HEAD or LAYER:*");
        const std::string_view layer = item.substr(0, colon);
        const std::string_view head = item.substr(colon + 1, equals == std::string_view::npos ? std::string_view::npos : equals - colon - 1);
        if (!whole(layer, &x.layer) || x.layer >= n_layer) return Fail("--ablate item " + shown + " names no layer of the model" + shape);
        if (head == "*") x.head = -1;
        else if (!whole(head, &x.head) || x.head >= n_head) return Fail("--ablate item " + shown + " names no head of the model" + shape);
        if (equals != std::string_view::npos) {
            const std::string_view what = item.substr(equals + 1);
            if (what == "pos") x.kind = Intervention::Kind::PositionOnly;
            else if (what == "tok") x.kind = Intervention::Kind::TokenOnly;
            else if (what == "q") x.kind = Intervention::Kind::QueryOff;
            else if (what == "v") x.kind = Intervention::Kind::ValueOff;
            else if (what.size() > 1 && what[0] == 'x') {
                const std::string number(what.substr(1));
                char* end = nullptr;
                // Decimal only, as every real-valued flag: strtod also takes hex floats and a leading space.
                const bool decimal = number.find_first_not_of("0123456789.eE+-") == std::string::npos;
                const double v = decimal ? std::strtod(number.c_str(), &end) : NAN;
                if (!decimal || end != number.c_str() + number.size() || !std::isfinite(v))
                    return Fail("--ablate item " + shown + ": the scale is not a finite decimal number");
                if (std::abs(v) > kMaxInterventionScale)  // 1e8 read "not a finite decimal number"
                    return Fail("--ablate item " + shown + ": the scale is at most 1e6 in size (past it the attention logits leave float range)");
                x.kind = Intervention::Kind::Scale;
                x.scale = static_cast<float>(v);
            } else {
                return Fail("--ablate item " + shown + ": after '=' comes pos, tok, xSCALE, q or v");
            }
        }
        list.push_back(x);
        start = comma + 1;
    }
    if (auto s = CheckCombinedScales(list); !s) return Fail(s.error());
    return list;
}

}  // namespace model
