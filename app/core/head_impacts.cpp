#include "app/core/head_impacts.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "app/core/names.h"

namespace app {

namespace {

// Which of a head's temperatures the what-ifs already set to 1: both with L:H (or L:*), or =q and
// =v stacked; tau_q alone with =q, tau_v alone with =v. One the model lacks is at 1 throughout.
struct AlreadyOff {
    bool tau_q = false, tau_v = false;
};
AlreadyOff OffByWhatIfs(const HeadImpacts& impacts, int l, int h) {
    using Kind = model::Intervention::Kind;
    const std::vector<model::Intervention>& on_top = impacts.on_top;
    AlreadyOff off{!impacts.has_tau_q, !impacts.has_tau_v};
    for (const model::Intervention& x : on_top) {
        if (x.layer != l || (x.head >= 0 && x.head != h)) continue;
        off.tau_q = off.tau_q || x.kind == Kind::Ablate || x.kind == Kind::QueryOff;
        off.tau_v = off.tau_v || x.kind == Kind::Ablate || x.kind == Kind::ValueOff;
    }
    return off;
}

float MeanOf(const LossByToken& losses) { return losses ? model::MeanLoss(*losses) : NAN; }

}  // namespace

model::Status MeasureHeadImpacts(model::Engine& engine, const model::Tokenization& tokens, const model::AnalyzeOptions& options,
                                 HeadImpacts* impacts, const std::function<bool(const HeadImpacts&)>& each, RankOptions what) {
    const model::ModelConfig& c = engine.Info().config;
    *impacts = HeadImpacts{};
    impacts->on_top = engine.interventions();
    impacts->ids = tokens.ids;
    impacts->total = c.n_layer * c.n_head;
    auto baseline = engine.Analyze(tokens, options);  // usually the shown analysis, reused whole
    if (!baseline) return model::Fail(baseline.error());
    if (baseline->loss.empty()) return model::Fail("a text of one token has no loss to rank the heads by");
    // Every loss here, the baseline's too, from the engine's loss pass: SSA's side alone, no map,
    // measure or prediction (a whole analysis a what-if cost three to five times as much), one pass
    // for all so that a part is the difference of two sums made alike.
    auto loss_now = [&]() -> LossByToken {
        auto loss = engine.LossFromBase(tokens.ids, {}, options.cancel);
        return loss ? std::make_shared<const std::vector<float>>(std::move(*loss)) : nullptr;
    };
    auto first = engine.LossFromBase(tokens.ids, {}, options.cancel);
    if (!first) return model::Fail(first.error());
    impacts->baseline_tokens = std::make_shared<const std::vector<float>>(std::move(*first));
    impacts->baseline = MeanOf(impacts->baseline_tokens);
    bool go_on = true;
    // A model of one temperature (the official checkpoints: tau_q alone) has the other's part of
    // nothing, not measured (null), and its own alone is the whole part: one pass a head, not three.
    const bool has_q = c.query.Active(), has_v = c.value.Active();
    impacts->has_tau_q = has_q, impacts->has_tau_v = has_v;
    const int passes = RankPasses(c.n_layer, c.n_head, what, engine.BaseInfo() != nullptr, has_q && has_v);
    int passed = 1;  // the baseline
    auto tell = [&] {
        if (what.progress) what.progress->store(std::min(1.0f, static_cast<float>(passed) / static_cast<float>(std::max(passes, 1))));
    };
    tell();
    // The loss with one more what-if on top (null where cancelled).
    auto loss_with = [&](model::Intervention x) -> LossByToken {
        ++passed;
        tell();
        std::vector<model::Intervention> with = impacts->on_top;
        with.push_back(x);
        if (!engine.SetInterventions(with)) return nullptr;  // cannot happen: the layer and head are the model's
        return loss_now();
    };
    // The drift's: the loss with some weights from the base (null where cancelled or refused).
    impacts->drift = what.drift && engine.BaseInfo() != nullptr;
    using Part = model::BasePart::Kind;
    auto loss_from_base = [&](std::vector<model::BasePart> parts) -> LossByToken {
        // On the what-ifs it was asked on alone: loss_with leaves its head's what-if set (a head's
        // drift read with its own tau_v at 1, each MLP's with its layer's last head's).
        if (engine.interventions() != impacts->on_top) (void)engine.SetInterventions(impacts->on_top);
        ++passed;
        tell();
        bool unchanged = false;  // weights the fine-tune left as they were: the loss with none taken, not run again
        auto loss = engine.LossFromBase(tokens.ids, parts, options.cancel, parts.empty() ? nullptr : &unchanged);
        if (loss && unchanged) return impacts->drift_baseline_tokens;
        if (!loss && !(options.cancel && *options.cancel) &&
            std::find(impacts->not_measured.begin(), impacts->not_measured.end(), loss.error()) == impacts->not_measured.end())
            impacts->not_measured.push_back(loss.error());
        return loss ? std::make_shared<const std::vector<float>>(std::move(*loss)) : nullptr;
    };
    if (impacts->drift) {
        impacts->base_temperatures = BaseTemperatures(*baseline);
        impacts->settings_difference = model::SettingsDifference(c, engine.BaseInfo()->config);
        impacts->drift_baseline_tokens = impacts->baseline_tokens;  // the same pass: no weight taken, the what-ifs asked
        impacts->embeddings_from_base_tokens = loss_from_base({{Part::Embeddings}});
        impacts->all_from_base_tokens = loss_from_base({{Part::All}});
        impacts->drift_baseline = MeanOf(impacts->drift_baseline_tokens);
        impacts->embeddings_from_base = MeanOf(impacts->embeddings_from_base_tokens);
        impacts->all_from_base = MeanOf(impacts->all_from_base_tokens);
        impacts->mlp_from_base.assign(static_cast<size_t>(c.n_layer), NAN);
        impacts->attention_from_base.assign(static_cast<size_t>(c.n_layer), NAN);
        impacts->mlp_from_base_tokens.assign(static_cast<size_t>(c.n_layer), nullptr);
        impacts->attention_from_base_tokens.assign(static_cast<size_t>(c.n_layer), nullptr);
        impacts->path_from_base.assign(2 * static_cast<size_t>(c.n_layer), NAN);
        impacts->path_from_base_tokens.assign(2 * static_cast<size_t>(c.n_layer), nullptr);
        impacts->path_down_from_base = impacts->path_from_base;
        impacts->path_down_from_base_tokens = impacts->path_from_base_tokens;
    }
    // The path from the top down, step j: every part of the path (PathPartName's order) from
    // 2 L - j up taken back, measured two steps a layer as the layers go.
    auto path_down_step = [&](int j) {
        std::vector<model::BasePart> down;
        for (int k = 2 * c.n_layer - j; k <= 2 * c.n_layer; ++k) down.push_back({k % 2 ? Part::Attention : Part::Mlp, (k - 1) / 2});
        impacts->path_down_from_base_tokens[j] = loss_from_base(down);
        impacts->path_down_from_base[j] = MeanOf(impacts->path_down_from_base_tokens[j]);
    };
    std::vector<model::BasePart> path = {{Part::Embeddings}};  // the path's parts taken so far
    using Kind = model::Intervention::Kind;
    for (int l = 0; l < c.n_layer && go_on; ++l) {
        for (int h = 0; h < c.n_head && go_on; ++h) {
            // A temperature the what-ifs set to 1 already: setting it again changes nothing (not run again).
            const AlreadyOff off = OffByWhatIfs(*impacts, l, h);
            HeadImpact impact;
            impact.layer = l, impact.head = h;
            impact.tokens = off.tau_q && off.tau_v ? impacts->baseline_tokens : loss_with({Kind::Ablate, l, h, 0.0f});
            if (what.split && has_q && has_v)
                impact.tokens_tau_q = off.tau_q ? impacts->baseline_tokens : loss_with({Kind::QueryOff, l, h, 0.0f}),
                impact.tokens_tau_v = off.tau_v ? impacts->baseline_tokens : loss_with({Kind::ValueOff, l, h, 0.0f});
            else if (what.split && (has_q || has_v))  // one temperature: its part is the whole; the other's not measured
                (has_q ? impact.tokens_tau_q : impact.tokens_tau_v) = impact.tokens;
            if (impacts->drift) {
                impact.tokens_from_base = loss_from_base({{Part::Head, l, h}});
                if (h == c.n_head - 1) {  // the layer's last step
                    impacts->attention_from_base_tokens[l] = loss_from_base({{Part::Attention, l}});
                    impacts->mlp_from_base_tokens[l] = loss_from_base({{Part::Mlp, l}});
                    impacts->attention_from_base[l] = MeanOf(impacts->attention_from_base_tokens[l]);
                    impacts->mlp_from_base[l] = MeanOf(impacts->mlp_from_base_tokens[l]);
                    for (Part kind : {Part::Attention, Part::Mlp}) {  // the path's next two steps
                        path.push_back({kind, l});
                        const size_t k = 2 * static_cast<size_t>(l) + (kind == Part::Mlp);
                        impacts->path_from_base_tokens[k] = loss_from_base(path);
                        impacts->path_from_base[k] = MeanOf(impacts->path_from_base_tokens[k]);
                    }
                    path_down_step(2 * l), path_down_step(2 * l + 1);
                }
            }
            impact.mean_loss = MeanOf(impact.tokens), impact.mean_loss_tau_q = MeanOf(impact.tokens_tau_q);
            impact.mean_loss_tau_v = MeanOf(impact.tokens_tau_v), impact.mean_loss_from_base = MeanOf(impact.tokens_from_base);
            if (options.cancel && *options.cancel) {  // an analysis stopped part-way: not a measure
                go_on = false;
                break;
            }
            impact.delta = impact.mean_loss - impacts->baseline;
            impacts->heads.push_back(impact);
            go_on = !each || each(*impacts);
        }
    }
    (void)engine.SetInterventions(impacts->on_top);  // the next analysis is the caller's again
    impacts->done = static_cast<int>(impacts->heads.size()) == impacts->total;
    if (impacts->done && what.progress) what.progress->store(1.0f);  // heads the what-ifs had at tau = 1 already ran no pass
    impacts->cancelled = !impacts->done;
    return model::Ok{};
}

int RankPasses(int n_layer, int n_head, const RankOptions& what, bool has_base, bool both_temperatures) {
    const bool drift = what.drift && has_base;
    return 1 + n_layer * n_head * ((what.split && both_temperatures ? 3 : 1) + (drift ? 1 : 0)) + (drift ? 2 + 6 * n_layer : 0);
}

std::vector<float> TemperatureParts(const HeadImpacts& impacts, int n_layer, int n_head, TemperaturePart which) {
    std::vector<float> parts(static_cast<size_t>(std::max(0, n_layer * n_head)), NAN);
    for (const HeadImpact& h : impacts.heads) {
        const float loss = which == TemperaturePart::TauQ ? h.mean_loss_tau_q : which == TemperaturePart::TauV ? h.mean_loss_tau_v : h.mean_loss;
        if (h.layer >= 0 && h.layer < n_layer && h.head >= 0 && h.head < n_head) parts[static_cast<size_t>(h.layer) * n_head + h.head] = impacts.baseline - loss;
    }
    // A temperature the what-ifs already set to 1 has no part to measure (it read +0): both for the
    // whole part, the one for tau_q's or tau_v's alone.
    for (int l = 0; l < n_layer; ++l)
        for (int h = 0; h < n_head; ++h) {
            const AlreadyOff off = OffByWhatIfs(impacts, l, h);
            const bool none = which == TemperaturePart::TauQ ? off.tau_q : which == TemperaturePart::TauV ? off.tau_v : off.tau_q && off.tau_v;
            if (none) parts[static_cast<size_t>(l) * n_head + h] = NAN;
        }
    return parts;
}

namespace {

// `into`'s `row`th run of `n` entries: `from` minus `losses`, token by token (left NaN where not measured).
void PartByToken(std::vector<float>& into, size_t row, size_t n, const LossByToken& from, const LossByToken& losses) {
    if (!from || !losses || losses->size() != n || from->size() != n || (row + 1) * n > into.size()) return;
    for (size_t t = 0; t < n; ++t) into[row * n + t] = (*from)[t] - (*losses)[t];
}

}  // namespace

std::vector<float> TemperaturePartsByToken(const HeadImpacts& impacts, int n_layer, int n_head, TemperaturePart which) {
    const size_t n = impacts.baseline_tokens ? impacts.baseline_tokens->size() : 0;
    std::vector<float> parts(static_cast<size_t>(std::max(0, n_layer * n_head)) * n, NAN);
    const std::vector<float> whole = TemperatureParts(impacts, n_layer, n_head, which);  // NaN where none is measured
    for (const HeadImpact& h : impacts.heads) {
        const LossByToken& losses = which == TemperaturePart::TauQ ? h.tokens_tau_q : which == TemperaturePart::TauV ? h.tokens_tau_v : h.tokens;
        const size_t k = static_cast<size_t>(h.layer) * n_head + h.head;
        if (h.layer >= 0 && h.layer < n_layer && h.head >= 0 && h.head < n_head && std::isfinite(whole[k]))
            PartByToken(parts, k, n, impacts.baseline_tokens, losses);
    }
    return parts;
}

DriftTokenParts MeasuredDriftPartsByToken(const HeadImpacts& impacts, int n_layer, int n_head) {
    DriftTokenParts d;
    const LossByToken& from = impacts.drift_baseline_tokens;
    if (!impacts.drift || !from) return d;
    const size_t n = from->size(), L = static_cast<size_t>(std::max(0, n_layer));
    d.tokens = static_cast<int>(n);
    d.heads.assign(L * static_cast<size_t>(std::max(0, n_head)) * n, NAN);
    d.attention.assign(L * n, NAN);
    d.mlp = d.attention;
    d.embeddings.assign(n, NAN);
    d.all = d.embeddings;
    for (const HeadImpact& h : impacts.heads)
        if (h.layer >= 0 && h.layer < n_layer && h.head >= 0 && h.head < n_head)
            PartByToken(d.heads, static_cast<size_t>(h.layer) * n_head + h.head, n, from, h.tokens_from_base);
    for (size_t l = 0; l < L && l < impacts.attention_from_base_tokens.size(); ++l) PartByToken(d.attention, l, n, from, impacts.attention_from_base_tokens[l]);
    for (size_t l = 0; l < L && l < impacts.mlp_from_base_tokens.size(); ++l) PartByToken(d.mlp, l, n, from, impacts.mlp_from_base_tokens[l]);
    PartByToken(d.embeddings, 0, n, from, impacts.embeddings_from_base_tokens);
    PartByToken(d.all, 0, n, from, impacts.all_from_base_tokens);
    d.path.assign((1 + 2 * L) * n, NAN);
    PartByToken(d.path, 0, n, from, impacts.embeddings_from_base_tokens);
    for (size_t k = 0; k < 2 * L && k < impacts.path_from_base_tokens.size(); ++k)
        PartByToken(d.path, k + 1, n, k == 0 ? impacts.embeddings_from_base_tokens : impacts.path_from_base_tokens[k - 1], impacts.path_from_base_tokens[k]);
    d.path_down.assign((1 + 2 * L) * n, NAN);
    const std::vector<LossByToken>& down = impacts.path_down_from_base_tokens;
    if (down.size() == 2 * L) {
        for (size_t j = 0; j < 2 * L; ++j) PartByToken(d.path_down, 2 * L - j, n, j == 0 ? from : down[j - 1], down[j]);
        PartByToken(d.path_down, 0, n, L ? down.back() : from, impacts.all_from_base_tokens);
    }
    return d;
}

TokenPartsGrid HeadTemperatureGrid(const HeadImpacts& impacts, int n_layer, int n_head) {
    TokenPartsGrid g;
    const size_t heads = static_cast<size_t>(std::max(n_layer, 0)) * std::max(n_head, 0);
    g.values = TemperaturePartsByToken(impacts, n_layer, n_head);
    if (heads == 0 || std::none_of(g.values.begin(), g.values.end(), [](float v) { return std::isfinite(v); })) return {};
    for (int l = 0; l < n_layer; ++l)
        for (int h = 0; h < n_head; ++h) g.rows.push_back("L" + std::to_string(l) + " H" + std::to_string(h));
    g.tokens = static_cast<int>(g.values.size() / heads);
    return g;
}

TokenPartsGrid DriftPathGrid(const HeadImpacts& impacts, int n_layer, int n_head) {
    if (!impacts.drift) return {};
    DriftTokenParts d = MeasuredDriftPartsByToken(impacts, n_layer, n_head);
    const size_t n = static_cast<size_t>(std::max(d.tokens, 0)), parts = 1 + 2 * static_cast<size_t>(std::max(n_layer, 0));
    if (n == 0 || d.path.size() != parts * n || d.all.size() != n) return {};
    TokenPartsGrid g;
    for (size_t k = 0; k < parts; ++k) g.rows.push_back(PathPartName(static_cast<int>(k)));
    g.rows.push_back("every weight");
    g.values = std::move(d.path);
    g.values.insert(g.values.end(), d.all.begin(), d.all.end());
    g.tokens = static_cast<int>(n);
    return g;
}

TokenPartsGrid DriftPartsGrid(const HeadImpacts& impacts, int n_layer, int n_head) {
    if (!impacts.drift || n_layer <= 0 || n_head <= 0) return {};
    DriftTokenParts d = MeasuredDriftPartsByToken(impacts, n_layer, n_head);
    const size_t n = static_cast<size_t>(std::max(d.tokens, 0)), L = static_cast<size_t>(n_layer);
    if (n == 0 || d.heads.size() != L * n_head * n || d.attention.size() != L * n || d.all.size() != n) return {};
    TokenPartsGrid g;
    g.values = std::move(d.heads);
    for (int l = 0; l < n_layer; ++l)
        for (int h = 0; h < n_head; ++h) g.rows.push_back("L" + std::to_string(l) + " H" + std::to_string(h));
    for (size_t l = 0; l < L; ++l) {
        g.rows.push_back("L" + std::to_string(l) + " attention");
        g.values.insert(g.values.end(), d.attention.begin() + l * n, d.attention.begin() + (l + 1) * n);
        g.rows.push_back("L" + std::to_string(l) + " MLP");
        g.values.insert(g.values.end(), d.mlp.begin() + l * n, d.mlp.begin() + (l + 1) * n);
    }
    g.rows.push_back("embeddings");
    g.values.insert(g.values.end(), d.embeddings.begin(), d.embeddings.end());
    g.rows.push_back("every weight");
    g.values.insert(g.values.end(), d.all.begin(), d.all.end());
    g.tokens = static_cast<int>(n);
    return g;
}

DriftParts MeasuredDriftParts(const HeadImpacts& impacts, int n_layer, int n_head) {
    DriftParts d;
    d.heads.assign(static_cast<size_t>(std::max(0, n_layer * n_head)), NAN);
    d.mlp.assign(static_cast<size_t>(std::max(0, n_layer)), NAN);
    d.attention = d.mlp;
    if (!impacts.drift) return d;
    const float base = impacts.drift_baseline;
    for (const HeadImpact& h : impacts.heads)
        if (h.layer >= 0 && h.layer < n_layer && h.head >= 0 && h.head < n_head) d.heads[static_cast<size_t>(h.layer) * n_head + h.head] = base - h.mean_loss_from_base;
    for (size_t l = 0; l < d.mlp.size() && l < impacts.mlp_from_base.size(); ++l) d.mlp[l] = base - impacts.mlp_from_base[l];
    for (size_t l = 0; l < d.attention.size() && l < impacts.attention_from_base.size(); ++l) d.attention[l] = base - impacts.attention_from_base[l];
    d.embeddings = base - impacts.embeddings_from_base;
    d.all = base - impacts.all_from_base;
    d.path.assign(1 + 2 * d.mlp.size(), NAN);
    d.path[0] = d.embeddings;
    for (size_t k = 0; k + 1 < d.path.size() && k < impacts.path_from_base.size(); ++k)
        d.path[k + 1] = (k == 0 ? impacts.embeddings_from_base : impacts.path_from_base[k - 1]) - impacts.path_from_base[k];
    d.path_down.assign(d.path.size(), NAN);
    const std::vector<float>& down = impacts.path_down_from_base;
    if (down.size() + 1 == d.path.size()) {
        for (size_t j = 0; j < down.size(); ++j) d.path_down[down.size() - j] = (j == 0 ? base : down[j - 1]) - down[j];
        d.path_down[0] = (down.empty() ? base : down.back()) - impacts.all_from_base;
    }
    return d;
}

std::string PathPartName(int k) {
    if (k <= 0) return "embeddings";
    return "L" + std::to_string((k - 1) / 2) + ((k - 1) % 2 ? " MLP" : " attention");
}

std::string PartsHeadline(const std::vector<float>& parts, int n_head, int n) {
    std::vector<std::string> names(parts.size());
    for (size_t k = 0; k < parts.size(); ++k) names[k] = HeadName({static_cast<int>(k) / std::max(n_head, 1), static_cast<int>(k) % std::max(n_head, 1)});
    return PartsHeadline(names, parts, n);
}

std::string PartsHeadline(const std::vector<std::string>& names, const std::vector<float>& parts, int n) {
    std::vector<int> order;
    for (size_t k = 0; k < parts.size() && k < names.size(); ++k)
        if (std::isfinite(parts[k]) && parts[k] != 0) order.push_back(static_cast<int>(k));
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return parts[a] < parts[b]; });
    auto list = [&](bool lowered) {
        std::string text;
        int listed = 0;
        for (size_t i = 0; i < order.size() && listed < n; ++i) {
            const int k = lowered ? order[i] : order[order.size() - 1 - i];
            if ((parts[k] < 0) != lowered) break;
            char value[32];
            std::snprintf(value, sizeof value, "%+.3g", parts[k]);
            text += (listed++ ? ", " : "") + names[k] + " " + value;
        }
        return text.empty() ? std::string("none") : text;
    };
    return "lowered it most " + list(true) + "; raised it most " + list(false);
}

std::string WhereHeadline(const std::vector<std::string>& labels, const float* part_by_token, int tokens, int n) {
    std::vector<std::string> names;
    std::vector<float> values;
    std::unordered_map<std::string, int> held;  // how often the text holds each piece
    for (const std::string& label : labels) ++held[label];
    for (int t = 0; t < tokens; ++t) {  // entry t: token t + 1's loss
        const size_t at = static_cast<size_t>(t) + 1;
        // A piece the text holds more than once is told apart by its place: "' W' (token 22)".
        const bool again = at < labels.size() && held[labels[at]] > 1;
        names.push_back(at < labels.size() ? "'" + labels[at] + "'" + (again ? " (token " + std::to_string(at) + ")" : "") : "token " + std::to_string(at));
        values.push_back(part_by_token[t]);
    }
    std::string line = PartsHeadline(names, values, n);
    for (const char* most : {"lowered it most ", "raised it most "})  // "... most at 'x' -3.1"
        if (size_t k = line.find(most); k != std::string::npos && line.compare(k + std::strlen(most), 4, "none") != 0)
            line.insert(k + std::strlen(most), "at ");
    return line;
}

std::string WhereLine(const HeadImpacts& impacts, const std::vector<std::string>& labels, int n_layer, int n_head, int n) {
    std::string line;
    const int tokens = impacts.baseline_tokens ? static_cast<int>(impacts.baseline_tokens->size()) : 0;
    auto say = [&](const std::string& name, float whole, const float* by_token) {
        if (!(whole < 0) || tokens == 0) return;
        char value[32];
        std::snprintf(value, sizeof value, "%+.3g", whole);
        line += (line.empty() ? "" : ". ") + name + " (" + value + "): " + WhereHeadline(labels, by_token, tokens, n);
    };
    // The most negative finite entry of `parts` (-1: none below 0).
    auto most = [](const std::vector<float>& parts) {
        int best = -1;
        for (size_t k = 0; k < parts.size(); ++k)
            if (std::isfinite(parts[k]) && parts[k] < 0 && (best < 0 || parts[k] < parts[best])) best = static_cast<int>(k);
        return best;
    };
    const std::vector<float> parts = TemperatureParts(impacts, n_layer, n_head);
    if (const int k = most(parts); k >= 0)
        say(HeadName({k / n_head, k % n_head}) + "'s temperatures", parts[k],
            TemperaturePartsByToken(impacts, n_layer, n_head).data() + static_cast<size_t>(k) * tokens);
    const DriftTokenParts by_token = MeasuredDriftPartsByToken(impacts, n_layer, n_head);
    if (!impacts.drift || by_token.tokens != tokens) return line;
    const DriftParts drift = MeasuredDriftParts(impacts, n_layer, n_head);
    const int head = most(drift.heads), mlp = most(drift.mlp);
    if (mlp >= 0 && (head < 0 || drift.mlp[mlp] < drift.heads[head]))
        say("L" + std::to_string(mlp) + " MLP's drift", drift.mlp[mlp], by_token.mlp.data() + static_cast<size_t>(mlp) * tokens);
    else if (head >= 0)
        say(HeadName({head / n_head, head % n_head}) + "'s drift", drift.heads[head], by_token.heads.data() + static_cast<size_t>(head) * tokens);
    say("every weight's drift", drift.all, by_token.all.data());
    return line;
}

std::string PathHeadline(const HeadImpacts& impacts, int n_layer, int n_head, int n) {
    if (!impacts.drift) return "";
    const DriftParts d = MeasuredDriftParts(impacts, n_layer, n_head);
    std::vector<int> shown;
    for (int k = 0; k < static_cast<int>(d.path.size()); ++k) shown.push_back(k);
    if (shown.size() > 13) {  // the n largest in size, kept in path order
        std::stable_sort(shown.begin(), shown.end(), [&](int a, int b) {
            const float x = std::isfinite(d.path[a]) ? std::abs(d.path[a]) : -1.0f, y = std::isfinite(d.path[b]) ? std::abs(d.path[b]) : -1.0f;
            return x > y;
        });
        shown.resize(static_cast<size_t>(std::max(n, 1)));
        std::sort(shown.begin(), shown.end());
    }
    auto value = [](float v) {
        char text[32] = "not measured";
        if (std::isfinite(v)) std::snprintf(text, sizeof text, "%+.3g", v);
        return std::string(text);
    };
    std::string line;
    for (int k : shown) line += (line.empty() ? "" : ", ") + PathPartName(k) + " " + value(d.path[k]) + " / " + value(d.path_down[k]);
    int apart = -1;  // the part the two orders split most differently
    for (int k = 0; k < static_cast<int>(d.path.size()); ++k)
        if (std::isfinite(d.path[k] - d.path_down[k]) && (apart < 0 || std::abs(d.path[k] - d.path_down[k]) > std::abs(d.path[apart] - d.path_down[apart])))
            apart = k;
    char by[32] = "";
    if (apart >= 0) std::snprintf(by, sizeof by, "%.3g", std::abs(d.path[apart] - d.path_down[apart]));
    const std::string which = shown.size() < d.path.size() ? "the " + std::to_string(shown.size()) + " largest of " + std::to_string(d.path.size()) + ": " : "";
    return "from the embeddings up / from the top down: " + which + line + " (each way they add up to every weight's " + value(d.all) +
           (apart < 0 ? ")" : "; the ways differ most at " + PathPartName(apart) + ", by " + by + ": how much the parts act together)");
}

std::string DriftHeadline(const HeadImpacts& impacts, int n_layer, int n_head, int n) {
    if (!impacts.drift) return "";
    const DriftParts d = MeasuredDriftParts(impacts, n_layer, n_head);
    std::vector<std::string> names;
    std::vector<float> values;
    for (int l = 0; l < n_layer; ++l) {
        for (int h = 0; h < n_head; ++h) names.push_back(HeadName({l, h})), values.push_back(d.heads[static_cast<size_t>(l) * n_head + h]);
        names.push_back("L" + std::to_string(l) + " MLP"), values.push_back(d.mlp[l]);
    }
    std::vector<std::string> layers;
    std::vector<float> blocks;
    for (int l = 0; l < n_layer; ++l) layers.push_back("L" + std::to_string(l)), blocks.push_back(d.attention[l]);
    auto value = [](float v) {
        char text[32];
        std::snprintf(text, sizeof text, "%+.3g", v);
        return std::isfinite(v) ? std::string(text) : std::string("not measured");
    };
    std::string rest = "; embeddings " + value(d.embeddings) + ", every weight (SSA's temperatures kept) " + value(d.all);
    for (const std::string& why : impacts.not_measured) rest += "; not measured: " + why;
    if (!impacts.settings_difference.empty()) rest += "; the base also differs in what is no weight (" + impacts.settings_difference + ")";
    const std::string own = impacts.base_temperatures.empty() ? "" : " (the base has its own " + impacts.base_temperatures + ": a part from it runs under SSA's)";
    return PartsHeadline(names, values, n) + "; whole attention blocks: " + PartsHeadline(layers, blocks, n) + rest + own;
}

}  // namespace app
