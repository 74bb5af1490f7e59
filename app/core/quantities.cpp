// The catalogue (quantities.h): its entries, then the readers every consumer shares.
//
// Index of this file:
// [SECTION] Sides and readings
// [SECTION] The catalogue: one entry per quantity
// [SECTION] Reading a quantity from an analysis
// [SECTION] Head values
// [SECTION] Token colourings
#include "app/core/quantities.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace app {

//-------------------------------------------------------------------------------------------------
// [SECTION] Sides and readings
//-------------------------------------------------------------------------------------------------

namespace {

struct SideName {
    const char* json;
    const char* suffix;
};
constexpr SideName kSideNames[kSides] = {{"ssa", ""}, {"comparison", "_compare"}, {"base", "_base"}};

struct ModeName {
    MapMode mode;
    const char* key;     // flags, sessions, file names
    const char* label;   // the views
    const char* suffix;  // a token colouring's key: loss, loss_compare, loss_delta
    Side side;           // what it shows, or what its difference subtracts from SSA
    bool difference;
};
constexpr ModeName kModeNames[] = {
    {MapMode::Ssa, "ssa", "SSA", "", Side::Ssa, false},
    {MapMode::Compare, "compare", "comparison", "_compare", Side::Compare, false},
    {MapMode::Difference, "diff", "SSA - comparison", "_delta", Side::Compare, true},
    {MapMode::Base, "base", "base", "_base", Side::Base, false},
    {MapMode::BaseDifference, "base_diff", "SSA - base", "_delta_base", Side::Base, true},
};

const ModeName& NameOf(MapMode mode) { return kModeNames[static_cast<int>(mode)]; }

}  // namespace

const char* JsonName(Side side) { return kSideNames[static_cast<int>(side)].json; }
const char* Suffix(Side side) { return kSideNames[static_cast<int>(side)].suffix; }
bool HasSide(const model::Analysis& a, Side side) { return side != Side::Base || a.HasBase(); }

const char* ToString(MapMode mode) { return NameOf(mode).key; }
const char* MapModeLabel(MapMode mode) { return NameOf(mode).label; }
bool IsDifference(MapMode mode) { return NameOf(mode).difference; }
model::ThumbnailKind ThumbnailKindOf(MapMode mode) {
    static_assert(static_cast<int>(model::ThumbnailKind::Difference) == static_cast<int>(MapMode::Difference) &&
                  static_cast<int>(model::ThumbnailKind::BaseDifference) == static_cast<int>(MapMode::BaseDifference),
                  "the thumbnails' kinds follow the modes");
    return static_cast<model::ThumbnailKind>(mode);
}
Side ReadSide(MapMode mode) { return NameOf(mode).side; }

std::optional<MapMode> ParseMapMode(const std::string& name) {
    if (name == "vanilla") return MapMode::Compare;  // the name before 0.9 (sessions, --maps), read still
    if (name == "diff_base") return MapMode::BaseDifference;  // as its files name it (heatmaps/L0_H0_diff_base.png)
    for (const ModeName& m : kModeNames)
        if (name == m.key) return m.mode;
    return std::nullopt;
}

//-------------------------------------------------------------------------------------------------
// [SECTION] The catalogue: one entry per quantity
//-------------------------------------------------------------------------------------------------

Quantity::Quantity(std::string key_, std::string label_, std::string short_label_, std::string help_, Scope scope_)
    : key(std::move(key_)), label(std::move(label_)), short_label(std::move(short_label_)), help(std::move(help_)), scope(scope_) {}

Quantity& Quantity::Members(const model::RowArray model::Analysis::*ssa, const model::RowArray model::Analysis::*compare,
                            const model::RowArray model::Analysis::*base) {
    rows_member[static_cast<int>(Side::Ssa)] = ssa;
    rows_member[static_cast<int>(Side::Compare)] = compare;
    rows_member[static_cast<int>(Side::Base)] = base;
    sides = static_cast<Sides>(kSsaSide | (compare ? kCompareSide : kNoSide) | (base ? kBaseSide : kNoSide));
    return *this;
}

Quantity& Quantity::Members(const std::vector<float> model::Analysis::*ssa, const std::vector<float> model::Analysis::*compare,
                            const std::vector<float> model::Analysis::*base) {
    member[static_cast<int>(Side::Ssa)] = ssa;
    member[static_cast<int>(Side::Compare)] = compare;
    member[static_cast<int>(Side::Base)] = base;
    sides = static_cast<Sides>(kSsaSide | (compare ? kCompareSide : kNoSide) | (base ? kBaseSide : kNoSide));
    return *this;
}

namespace {

// A registry's entries with their places in it.
template <typename T>
std::vector<T> Numbered(std::vector<T> entries) {
    for (size_t k = 0; k < entries.size(); ++k) entries[k].index = static_cast<int>(k);
    return entries;
}

using A = model::Analysis;
using R = Reading;
constexpr unsigned kHeadsAndRows = kJsonHeads | kJsonRows;

std::vector<Quantity> MakeCatalogue() {
    std::vector<Quantity> q = {
        // Row metrics of the attention maps (SPEC section 2): every row of MapMetrics, every side (the base with one).
        Quantity("entropy", "entropy", "entropy", "attention entropy -sum p ln p of a query's row (lower: sharper)", Scope::Row)
            .Unit("nats").Metric("entropy").Read(R::RowMean).Json(kHeadsAndRows).Python("entropy").Batch(kModelSides).Shown(kModelSides),
        Quantity("normalized_entropy", "normalized entropy", "norm. entropy", "entropy / ln i: 1 uniform over the i visible keys, 0 one key",
                 Scope::Row)
            .Metric("normalized_entropy").Read(R::RowMean).Json(kHeadsAndRows).Python("normalized_entropy").Batch(kModelSides).Shown(kSsaSide),
        Quantity("spikiness", "spikiness", "spikiness", "1 / (i sum p^2) over the i visible keys: 1 for a uniform row, 1/i for one-hot (lower: spikier)", Scope::Row)
            .Metric("spikiness").Read(R::RowMean).Json(kHeadsAndRows).Python("spikiness").Batch(kModelSides).Shown(kSsaSide),
        Quantity("sink_mass", "sink mass", "sink mass", "a query's weight on the first token, 0..1", Scope::Row)
            .Metric("sink_mass").Read(R::RowMean).LargerFirst().Json(kHeadsAndRows).Python("sink_mass").Batch(kModelSides).Shown(kSsaSide)
            .SinkRule(),
        // SSA against its comparison, row by row.
        Quantity("js_divergence", "JS to comparison", "JS", "Jensen-Shannon divergence of SSA's rows from the comparison's (0: the same); with a base, "
                 "SSA against tau = 1: the temperatures' part of fine-tuning's change (the Fine-tune tab's 'temperatures', "
                 "metrics.json's decomposition.js_temperature)",
                 Scope::Row)
            .Unit("nats").Members(&A::js).Read(R::RowMean).Format("%.4f").LargerFirst().Scaled(Scale::FromZero).Json(kHeadsAndRows).Python("js").Decomposition("js_temperature").Batch(kSsaSide)
            .Shown(kSsaSide),
        Quantity("l1", "L1 to comparison", "L1", "L1 distance sum_j |p - p'| of SSA's rows from the comparison's, 0..2", Scope::Row)
            .Members(&A::l1).Read(R::RowMean).LargerFirst().Scaled(Scale::FromZero).Json(kHeadsAndRows, "l1_distance").Python("l1").Decomposition("l1_temperature").Shown(kSsaSide),
        // With a fine-tune's base (compare base): the whole change and the other weights' drift;
        // the temperatures' part is js_divergence (SSA against tau = 1). NaN without a base.
        Quantity("js_total", "JS to base", "JS total",
                 "Jensen-Shannon divergence of SSA's rows from the base model's: all that fine-tuning changed (with a base)", Scope::Row)
            .Unit("nats").Members(&A::js_total).Read(R::RowMean).Format("%.4f").LargerFirst().Scaled(Scale::FromZero).Json(kJsonRows).Python("js_total")
            .Shown(kSsaSide)
            .BaseOnly(),
        Quantity("js_drift", "JS drift (tau = 1 to base)", "JS drift",
                 "Jensen-Shannon divergence of the tau = 1 rows from the base's: what fine-tuning did to the other weights, the "
                 "temperatures aside (with a base)",
                 Scope::Row)
            .Unit("nats").Members(&A::js_drift).Read(R::RowMean).Format("%.4f").LargerFirst().Scaled(Scale::FromZero).Json(kJsonRows).Python("js_drift")
            .Shown(kSsaSide)
            .BaseOnly(),
        // Temperatures.
        Quantity("tau_q", "tau_q", "tau_q", "query inverse temperature: larger = sharper row (1 = vanilla)", Scope::Row)
            .Members(&A::tau_q, &A::tau_q_compare, &A::tau_q_base).Read(R::TokenStats).Scaled(Scale::AroundOne).Json(kJsonHeads).Batch(kSsaSide)
            .Shown(kSsaSide),
        Quantity("tau_v", "tau_v", "tau_v", "value temperature: scales the key's value (1 = vanilla)", Scope::Row)
            .Members(&A::tau_v, &A::tau_v_compare, &A::tau_v_base).Read(R::TokenStats).Scaled(Scale::AroundOne).Json(kJsonHeads).Shown(kSsaSide),
        Quantity("tau_q_position", "tau_q position term", "tau_q pos.", "tau_q's position term alone, 1 + s ln i: the same for every text",
                 Scope::Row)
            .Members(&A::tau_q_position).Scaled(Scale::AroundOne),
        Quantity("tau_q_token", "tau_q token term (1 + tanh)", "tau_q tok.",
                 "tau_q's token term alone, shown as 1 + tanh(w . z + b): tau_q with the position term at 1 (Python's a.tau_q_token is "
                 "the tanh itself, 0 for no effect)", Scope::Row)
            .Members(&A::tau_q_token).Scaled(Scale::AroundOne).Offset(1.0f),
        // The rest of the row metrics.
        Quantity("max_weight", "max weight", "max weight", "the largest weight of a query's row (its top-1 mass)", Scope::Row)
            .Metric("max_weight").Read(R::RowMean).Json(kHeadsAndRows).Python("max_weight"),
        Quantity("top5_mass", "top-5 mass", "top-5 mass", "the weight on a row's five largest keys", Scope::Row)
            .Metric("top5_mass").Read(R::RowMean).Json(kHeadsAndRows).Python("top5_mass"),
        Quantity("effective_support", "effective support", "eff. support", "exp(entropy): how many keys a row spreads over", Scope::Row)
            .Metric("effective_support").Read(R::RowMean).Format("%.3g").Json(kHeadsAndRows).Python("effective_support"),
        // The QK circuit.
        Quantity("effective_qk_norm", "effective QK norm", "eff. QK norm", "tau_q(i) * ||W_qk||_2: the query's temperature times the QK norm",
                 Scope::Row)
            .Members(&A::effective_qk_norm).Read(R::TokenStats).Format("%.3g").Json(kHeadsAndRows).Python("effective_qk_norm"),
        Quantity("qk_opnorm", "QK operator norm", "QK opnorm", "operator norm ||W_q W_k^T / sqrt(d_h)||_2 of the head", Scope::Head)
            .Members(&A::qk_opnorm, nullptr, &A::qk_opnorm_base).Format("%.3g").Json(kJsonHeads).Python("qk_opnorm").Shown(kSsaSide),
        Quantity("qk_eig_mean", "QK eigenvalue mean", "QK eig mean", "mean of the real parts of the eigenvalues of W_k^T W_q / sqrt(d_h)",
                 Scope::Head)
            .Members(&A::qk_eig_mean, nullptr, &A::qk_eig_mean_base).Format("%.3g").Json(kJsonHeads).Python("qk_eig_mean"),
        Quantity("qk_eig_var", "QK eigenvalue variance", "QK eig var",
                 "variance of the real parts of the eigenvalues of W_k^T W_q / sqrt(d_h); small = localized (Bao et al.)", Scope::Head)
            .Members(&A::qk_eig_var, nullptr, &A::qk_eig_var_base).Format("%.3g").Json(kJsonHeads).Python("qk_eig_var").Shown(kSsaSide),
        // With a base: how far fine-tuning moved each head's weights (the drift's weights beside
        // what they did, js_drift); metrics.json's decomposition.weights, with the MLPs' and embeddings'.
        Quantity("weights_q", "W_q moved from base", "W_q moved",
                 "||W_q - W_q(base)||_F / ||W_q(base)||_F of the head's query weights: how far fine-tuning moved them (0: not at all; with a base)",
                 Scope::Head)
            .Members(&A::weights_q).Format("%.3g").LargerFirst().Scaled(Scale::FromZero).Python("weights_q").BaseOnly(),
        Quantity("weights_k", "W_k moved from base", "W_k moved",
                 "the same of the head's key weights (its kv head's, shared by the query heads of its group; with a base)", Scope::Head)
            .Members(&A::weights_k).Format("%.3g").LargerFirst().Scaled(Scale::FromZero).Python("weights_k").BaseOnly(),
        Quantity("weights_v", "W_v moved from base", "W_v moved",
                 "the same of the head's value weights (its kv head's; with a base)", Scope::Head)
            .Members(&A::weights_v).Format("%.3g").LargerFirst().Scaled(Scale::FromZero).Python("weights_v").BaseOnly(),
        Quantity("weights_o", "W_o moved from base", "W_o moved",
                 "the same of the head's rows of the output projection (with a base)", Scope::Head)
            .Members(&A::weights_o).Format("%.3g").LargerFirst().Scaled(Scale::FromZero).Python("weights_o").BaseOnly(),
        // What the model predicts (metrics.json reports the loss in its own "loss" object).
        Quantity("loss", "loss", "loss",
                 "-ln p(token | the tokens before it), nats, on the SSA side (with its what-ifs): how surprised the model is", Scope::Token)
            .Unit("nats").Members(&A::loss, &A::loss_compare, &A::loss_base).Scaled(Scale::FromZero).Batch(kModelSides),
    };
    return q;
}

}  // namespace

const std::vector<Quantity>& Quantities() {
    static const std::vector<Quantity> catalogue = Numbered(MakeCatalogue());
    return catalogue;
}

const Quantity* FindQuantity(std::string_view key) {
    for (const Quantity& q : Quantities())
        if (q.key == key) return &q;
    return nullptr;
}

const Quantity& GetQuantity(std::string_view key) {
    const Quantity* q = FindQuantity(key);
    assert(q && "not a key of the catalogue");
    return *q;
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Reading a quantity from an analysis
//-------------------------------------------------------------------------------------------------

namespace {

// One side's stored array, unchecked; null when that side is not held.
const model::RowArray* StoredRows(const Quantity& q, const model::Analysis& a, Side side) {
    if (!Has(q.sides, side)) return nullptr;
    if (!q.metric.empty()) {
        const model::MapMetrics* metrics[kSides] = {&a.metrics, &a.metrics_compare, &a.metrics_base};
        return metrics[static_cast<int>(side)]->Find(q.metric);
    }
    const auto member = q.rows_member[static_cast<int>(side)];
    return member ? &(a.*member) : nullptr;
}
const std::vector<float>* Stored(const Quantity& q, const model::Analysis& a, Side side) {
    if (!Has(q.sides, side)) return nullptr;
    const auto member = q.member[static_cast<int>(side)];
    return member ? &(a.*member) : nullptr;
}

const std::vector<float>* Sized(const std::vector<float>* values, size_t n) { return values && values->size() == n && n > 0 ? values : nullptr; }

}  // namespace

const model::RowArray* RowValues(const Quantity& q, const model::Analysis& a, Side side) {
    if (q.scope != Scope::Row) return nullptr;
    const model::RowArray* values = StoredRows(q, a, side);
    const bool sized = values && values->rows() == static_cast<int64_t>(a.n_layer) * a.n_head && values->tokens() == a.n_tokens;
    return sized && !values->empty() ? values : nullptr;
}

const std::vector<float>* HeadArray(const Quantity& q, const model::Analysis& a, Side side) {
    if (q.scope != Scope::Head) return nullptr;
    return Sized(Stored(q, a, side), static_cast<size_t>(a.n_layer) * a.n_head);
}

const std::vector<float>* TokenArray(const Quantity& q, const model::Analysis& a, Side side) {
    if (q.scope != Scope::Token || a.n_tokens < 1) return nullptr;
    return Sized(Stored(q, a, side), static_cast<size_t>(a.n_tokens - 1));
}

std::vector<float> TokenValues(const Quantity& q, const model::Analysis& a, MapMode mode) {
    std::vector<float> values(std::max(a.n_tokens, 0), NAN);
    const std::vector<float>* ssa = TokenArray(q, a, Side::Ssa);
    const std::vector<float>* other = mode == MapMode::Ssa ? nullptr : TokenArray(q, a, ReadSide(mode));
    const bool difference = IsDifference(mode);
    for (int t = 1; t < a.n_tokens; ++t) {
        if (mode == MapMode::Ssa && ssa) values[t] = (*ssa)[t - 1];
        if (mode != MapMode::Ssa && !difference && other) values[t] = (*other)[t - 1];
        if (difference && ssa && other) values[t] = (*ssa)[t - 1] - (*other)[t - 1];
    }
    return values;
}

bool Holds(const Quantity& q, const model::Analysis& a, Side side) {
    switch (q.scope) {
        case Scope::Token: return TokenArray(q, a, side) != nullptr;
        case Scope::Row: return RowValues(q, a, side) != nullptr;
        case Scope::Head: return HeadArray(q, a, side) != nullptr;
    }
    return false;
}

bool Holds(const Quantity& q, const model::Analysis& a, MapMode mode) {
    if (IsDifference(mode)) return Holds(q, a, Side::Ssa) && Holds(q, a, ReadSide(mode));
    return Holds(q, a, ReadSide(mode));
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Head values
//-------------------------------------------------------------------------------------------------

namespace {

std::vector<HeadValue> MakeHeadValues() {
    std::vector<HeadValue> out;
    for (const Quantity& q : Quantities()) {
        if (q.scope == Scope::Head || q.reading == Reading::RowMean) {
            const bool row = q.scope == Scope::Row;
            out.push_back({&q, Stat::Mean, q.key, q.label, q.short_label, q.help + (row ? "; a head: its mean over query rows 2..T" : "")});
        } else if (q.reading == Reading::TokenStats) {
            struct Part { Stat stat; const char* name; const char* over; };
            for (const Part& p : {Part{Stat::Mean, "mean", "mean"}, Part{Stat::Min, "min", "smallest"}, Part{Stat::Max, "max", "largest"}})
                out.push_back({&q, p.stat, q.key + "_" + p.name, q.label + " " + p.name, q.short_label + " " + p.name,
                               q.help + "; a head: its " + p.over + " over the tokens"});
        }
    }
    return out;
}

}  // namespace

const std::vector<HeadValue>& HeadValues() {
    static const std::vector<HeadValue> values = Numbered(MakeHeadValues());
    return values;
}

const HeadValue* HeadValueOf(const Quantity& q) {
    for (const HeadValue& v : HeadValues())
        if (v.quantity == &q) return &v;  // the first of its values, the mean
    return nullptr;
}

const HeadValue* FindHeadValue(std::string_view key) {
    for (const HeadValue& v : HeadValues())
        if (v.key == key) return &v;
    const Quantity* q = FindQuantity(key);
    return q ? HeadValueOf(*q) : nullptr;
}

std::string HeadValueKeys() {
    std::string out;
    for (const HeadValue& v : HeadValues()) out += (out.empty() ? "" : ", ") + v.key;
    return out;
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Token colourings
//-------------------------------------------------------------------------------------------------

namespace {

std::vector<TokenColoring> MakeColorings() {
    // TokenColor's enumerators, in order, and what each reads.
    const std::pair<const char*, MapMode> rows[] = {
        {"tau_q", MapMode::Ssa},          {"tau_v", MapMode::Ssa},          {"entropy", MapMode::Ssa},  {"spikiness", MapMode::Ssa},
        {"sink_mass", MapMode::Ssa},      {"tau_q_position", MapMode::Ssa}, {"tau_q_token", MapMode::Ssa},
        {"loss", MapMode::Ssa},           {"loss", MapMode::Compare},       {"loss", MapMode::Difference},
        {"loss", MapMode::Base},          {"loss", MapMode::BaseDifference},
        {"js_divergence", MapMode::Ssa},  {"js_total", MapMode::Ssa},       {"js_drift", MapMode::Ssa},
    };
    std::vector<TokenColoring> out;
    for (const auto& [key, mode] : rows) {
        const Quantity& q = GetQuantity(key);
        TokenColoring c{static_cast<TokenColor>(out.size()), &q, mode, q.key + NameOf(mode).suffix, q.label, q.help};
        if (mode == MapMode::Compare) {
            c.label = "comparison " + q.label;
            c.help = "the same " + q.label + " on the comparison's side (the tau = 1 counterfactual, a twin or the unedited model)";
        } else if (mode == MapMode::Difference) {
            c.label = q.label + " change";
            c.help = "SSA's " + q.label + " minus the comparison's: blue where SSA's is lower, red where higher";
        } else if (mode == MapMode::Base) {
            c.label = "base " + q.label;
            c.help = "the same " + q.label + " on the fine-tune's base model (with a base)";
        } else if (mode == MapMode::BaseDifference) {
            c.label = q.label + " change from base";
            c.help = "SSA's " + q.label + " minus the base model's: blue where fine-tuning lowered it (helped), red where it raised it";
        }
        out.push_back(std::move(c));
    }
    return out;
}

}  // namespace

const std::vector<TokenColoring>& TokenColorings() {
    static const std::vector<TokenColoring> colorings = MakeColorings();
    return colorings;
}

const TokenColoring& Coloring(TokenColor color) { return TokenColorings()[static_cast<size_t>(color)]; }

std::string TokenColorKeys(const char* separator) {
    std::string out;
    for (const TokenColoring& c : TokenColorings()) out += (out.empty() ? "" : separator) + c.key;
    return out;
}

const char* ToString(TokenColor color) { return Coloring(color).key.c_str(); }

std::optional<TokenColor> ParseTokenColor(const std::string& name) {
    for (const TokenColoring& c : TokenColorings())
        if (name == c.key) return c.id;
    return std::nullopt;
}

bool Holds(const model::Analysis& a, TokenColor color) { return Holds(*Coloring(color).quantity, a, Coloring(color).mode); }

const model::RowArray* TokenQuantity(const model::Analysis& a, TokenColor color) {
    const TokenColoring& c = Coloring(color);
    return IsDifference(c.mode) ? nullptr : RowValues(*c.quantity, a, ReadSide(c.mode));
}

bool IsRowMetric(TokenColor color) { return Coloring(color).quantity->reading == Reading::RowMean; }
float TokenColorOffset(TokenColor color) { return Coloring(color).quantity->offset; }
bool IsTemperature(TokenColor color) { return Coloring(color).quantity->scale == Scale::AroundOne; }
bool IsLoss(TokenColor color) { return Coloring(color).quantity->scope == Scope::Token; }
bool IsDelta(TokenColor color) { return IsDifference(Coloring(color).mode); }
bool NeedsBase(TokenColor color) { return IsBaseMode(Coloring(color).mode) || Coloring(color).quantity->base_only; }

std::vector<float> TokenLosses(const model::Analysis& a, TokenColor color) {
    return TokenValues(*Coloring(color).quantity, a, Coloring(color).mode);
}

}  // namespace app
