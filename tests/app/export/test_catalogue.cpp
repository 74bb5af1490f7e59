// The catalogue of quantities (app/core/quantities.h) and what lists from it: every token colouring
// keeps its name and round-trips through sessions and flags, the per-head values answer to the
// keys sessions saved, head summaries read what the analysis holds, and the files keep their keys
// and columns (metrics.json, batch summaries) as users' scripts read them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "app/core/names.h"
#include "app/core/quantities.h"
#include "app/core/state.h"
#include "app/export/batch.h"
#include "app/export/export.h"
#include "app/export/flags.h"
#include "app/export/head_summary.h"
#include "app/export/session.h"
#include "tests/app/gui/synthetic.h"

namespace {
using nlohmann::json;
namespace fs = std::filesystem;

std::set<std::string> Keys(const json& object) {
    std::set<std::string> out;
    for (const auto& item : object.items()) out.insert(item.key());
    return out;
}

const app::TokenColor kAllColors[] = {app::TokenColor::TauQ,         app::TokenColor::TauV,      app::TokenColor::Entropy,
                                      app::TokenColor::Spikiness,    app::TokenColor::SinkMass,  app::TokenColor::TauQPosition,
                                      app::TokenColor::TauQToken,    app::TokenColor::Loss,      app::TokenColor::LossCompare,
                                      app::TokenColor::LossDelta,    app::TokenColor::LossBase,  app::TokenColor::LossDeltaBase,
                                      app::TokenColor::JsDivergence, app::TokenColor::JsTotal,   app::TokenColor::JsDrift};

TEST(Catalogue, KeysAreUniqueAndEveryEntryIsComplete) {
    std::set<std::string> keys, head_keys;
    for (const app::Quantity& q : app::Quantities()) {
        EXPECT_TRUE(keys.insert(q.key).second) << "two quantities named " << q.key;
        EXPECT_FALSE(q.label.empty() || q.short_label.empty() || q.help.empty()) << q.key;
        EXPECT_EQ(&app::GetQuantity(q.key), &q);
        EXPECT_TRUE(q.metric.empty() || q.TwoSided()) << q.key << ": a MapMetrics row is held for both sides";
        const bool per_head = q.reading != app::Reading::None || q.scope == app::Scope::Head;
        EXPECT_EQ(app::HeadValueOf(q) != nullptr, per_head) << q.key;
    }
    for (const app::HeadValue& v : app::HeadValues()) {
        EXPECT_TRUE(head_keys.insert(v.key).second) << "two head values named " << v.key;
        EXPECT_EQ(app::FindHeadValue(v.key), &v);
    }
}

// The names flags, sessions, Python and the figures' titles spell, in the combos' order.
TEST(TokenColorings, KeepTheirNamesAndOrder) {
    const std::vector<std::string> names = {"tau_q",          "tau_v",       "entropy", "spikiness",    "sink_mass",
                                            "tau_q_position", "tau_q_token", "loss",    "loss_compare", "loss_delta",
                                            "loss_base",      "loss_delta_base", "js_divergence", "js_total", "js_drift"};
    ASSERT_EQ(app::TokenColorings().size(), names.size());
    for (size_t k = 0; k < names.size(); ++k) {
        const app::TokenColor c = kAllColors[k];
        EXPECT_EQ(app::Coloring(c).id, c);
        EXPECT_EQ(app::ToString(c), names[k]);
        EXPECT_EQ(app::ParseTokenColor(names[k]), c);
        EXPECT_FALSE(app::Coloring(c).label.empty() || app::Coloring(c).help.empty()) << names[k];
    }
    EXPECT_EQ(app::Coloring(app::TokenColor::SinkMass).label, "sink mass");
    EXPECT_EQ(app::Coloring(app::TokenColor::LossCompare).label, "comparison loss");
    EXPECT_EQ(app::Coloring(app::TokenColor::LossDelta).label, "loss change");
    EXPECT_TRUE(app::IsTemperature(app::TokenColor::TauQToken) && app::TokenColorOffset(app::TokenColor::TauQToken) == 1.0f);
    EXPECT_TRUE(app::IsRowMetric(app::TokenColor::Spikiness) && !app::IsRowMetric(app::TokenColor::TauQ));
    EXPECT_TRUE(app::IsLoss(app::TokenColor::LossDelta) && !app::IsLoss(app::TokenColor::SinkMass));
    EXPECT_TRUE(app::IsDelta(app::TokenColor::LossDeltaBase) && app::IsDelta(app::TokenColor::LossDelta) && !app::IsDelta(app::TokenColor::LossBase));
    // Where fine-tuning changed each query's attention: JS to base and the drift need a base, JS to
    // the comparison does not; all three are row metrics (row 1 has one key).
    EXPECT_TRUE(app::NeedsBase(app::TokenColor::JsTotal) && app::NeedsBase(app::TokenColor::JsDrift) && app::NeedsBase(app::TokenColor::LossBase));
    EXPECT_FALSE(app::NeedsBase(app::TokenColor::JsDivergence) || app::NeedsBase(app::TokenColor::LossDelta));
    EXPECT_TRUE(app::IsRowMetric(app::TokenColor::JsTotal) && !app::IsDelta(app::TokenColor::JsTotal));
}

// Every colouring, as the window's colouring and as the export's highlight, reads back from a
// session and from the flags (a session or flag that chose `loss` once came back as nothing).
TEST(TokenColorings, RoundTripThroughSessionsAndFlags) {
    for (app::TokenColor c : kAllColors) {
        const std::string name = app::ToString(c);
        app::Session s;
        s.text = "hi";
        s.settings.token_color = c;
        s.export_options.figures.highlight = c;
        const json j = app::SessionToJson(s);
        EXPECT_EQ(j["view"]["token_color"], name);
        EXPECT_EQ(j["export"]["highlight"], name);
        auto back = app::SessionFromJson(j);
        ASSERT_TRUE(back) << back.error();
        EXPECT_EQ(back->settings.token_color, c) << name;
        EXPECT_EQ(back->export_options.figures.highlight, c) << name;

        app::CommandOptions o;
        ASSERT_TRUE(app::ApplyFlag(app::Command::Export, "highlight", name, &o)) << name;
        EXPECT_EQ(o.export_options.figures.highlight, c) << name;
        app::CommandOptions source;
        source.model_dir = "/m";
        source.text = "hi";
        const std::string cmd = app::ExportCommandLine(s.export_options, source);
        EXPECT_NE(cmd.find("--highlight " + name), std::string::npos) << cmd;
    }
}

// Every message that lists the colourings lists all of them (the session's left out the losses).
TEST(TokenColorings, EveryNameIsInTheErrors) {
    std::vector<std::string> errors;
    for (const json& j : {json{{"ssaviz_session", 1}, {"view", {{"token_color", "warmth"}}}},
                          json{{"ssaviz_session", 1}, {"export", {{"highlight", "warmth"}}}}}) {
        auto s = app::SessionFromJson(j);
        ASSERT_FALSE(s);
        errors.push_back(s.error());
    }
    app::CommandOptions o;
    auto flag = app::ApplyFlag(app::Command::Export, "highlight", "warmth", &o);
    ASSERT_FALSE(flag);
    errors.push_back(flag.error());
    for (const std::string& error : errors) {
        EXPECT_NE(error.find("'warmth'"), std::string::npos) << error;
        for (app::TokenColor c : kAllColors) EXPECT_NE(error.find(app::ToString(c)), std::string::npos) << app::ToString(c) << ": " << error;
    }
    bool hinted = false;
    for (const app::Flag* f : app::FlagsOf(app::Command::Export))
        if (f->names[0] == "--highlight") hinted = f->hint == app::TokenColorKeys("|");
    EXPECT_TRUE(hinted) << "--highlight's value hint lists every colouring";
}

// The matrix and the heads grid's badge used to keep lists of their own; every key either saved
// still names a head value, "tau_q" (the badge's) the tau_q mean. Unknown keys are refused.
TEST(HeadValues, KeysSessionsSavedStillName) {
    for (const char* key : {"entropy", "normalized_entropy", "spikiness", "sink_mass", "js_divergence", "l1", "tau_q_mean", "tau_q_min",
                            "tau_q_max", "tau_v_mean", "max_weight", "qk_opnorm", "qk_eig_var", "tau_q"})
        EXPECT_NE(app::FindHeadValue(key), nullptr) << key;
    EXPECT_EQ(app::FindHeadValue("tau_q")->key, "tau_q_mean");
    auto s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{"grid_metric", "tau_q"}, {"matrix_metric", "qk_eig_var"}}}});
    ASSERT_TRUE(s) << s.error();
    EXPECT_EQ(s->settings.grid_metric, "tau_q");
    EXPECT_EQ(app::SessionToJson(*s)["view"]["grid_metric"], "tau_q");
    for (const char* key : {"grid_metric", "matrix_metric"}) {
        auto bad = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{key, "warmth"}}}});
        ASSERT_FALSE(bad) << key;
        EXPECT_NE(bad.error().find(std::string("'view.") + key + "': 'warmth'"), std::string::npos) << bad.error();
        EXPECT_NE(bad.error().find("tau_q_mean"), std::string::npos) << bad.error();
    }
}

// A summary holds what the analysis holds: row metrics as their mean over rows 2..T, temperatures'
// token statistics, the [L, H] spectrum; a one-sided value reads the same whichever side is asked.
TEST(HeadSummaries, ReadWhatTheAnalysisHolds) {
    const model::Analysis a = app::MakeSyntheticAnalysis(3, 4, 17);
    const std::vector<app::HeadSummary> heads = app::SummarizeHeads(a);
    ASSERT_EQ(heads.size(), 12u);
    for (const app::HeadSummary& s : heads) {
        const int l = s.ref.layer, h = s.ref.head;
        EXPECT_FLOAT_EQ(s.Get("entropy"), model::HeadRowMean(a.metrics.Get("entropy"), a, l, h));
        EXPECT_FLOAT_EQ(s.Get("sink_mass", app::Side::Compare), model::HeadRowMean(a.metrics_compare.Get("sink_mass"), a, l, h));
        EXPECT_FLOAT_EQ(s.Get("js_divergence"), model::HeadRowMean(a.js, a, l, h));
        const model::HeadStats tau = model::HeadTokenStats(a.tau_q, a, l, h);
        EXPECT_FLOAT_EQ(s.Get("tau_q_mean"), tau.mean);
        EXPECT_FLOAT_EQ(s.Get("tau_q_min"), tau.min);
        EXPECT_FLOAT_EQ(s.Get("tau_q_max"), tau.max);
        EXPECT_FLOAT_EQ(s.Get("tau_v_mean", app::Side::Compare), 1.0f);
        EXPECT_FLOAT_EQ(s.Get("qk_eig_var"), a.qk_eig_var[static_cast<size_t>(l) * a.n_head + h]);
        const app::HeadValue& entropy = *app::FindHeadValue("entropy");
        EXPECT_FLOAT_EQ(s.Get(entropy, app::MapMode::Difference), s.Get("entropy") - s.Get("entropy", app::Side::Compare));
        const app::HeadValue& js = *app::FindHeadValue("js_divergence");
        EXPECT_EQ(s.Get(js, app::MapMode::Difference), s.Get(js, app::MapMode::Ssa));
        EXPECT_EQ(app::IsSinkHead(s, app::Side::Ssa, 0.3f), app::IsSinkHead(s.Get("sink_mass"), 0.3f));
    }
}

// A fine-tune's base is a third side: the summary reads its row metrics and temperatures, the base
// modes read it and SSA minus it; without a base it is NaN. (The base here is the synthetic
// analysis's comparison arrays, under the base's names.)
TEST(HeadSummaries, ReadTheBaseAsAThirdSide) {
    model::Analysis a = app::MakeSyntheticAnalysis(2, 3, 15);
    for (const app::HeadSummary& s : app::SummarizeHeads(a)) {
        EXPECT_TRUE(std::isnan(s.Get("entropy", app::Side::Base)));
        EXPECT_TRUE(std::isnan(s.Get(*app::FindHeadValue("entropy"), app::MapMode::BaseDifference)));
    }
    a.comparison = model::Comparison::Base;
    a.metrics_base = a.metrics_compare;
    a.tau_q_base = a.tau_q_compare;
    a.tau_v_base = a.tau_v_compare;
    a.loss_base = a.loss_compare;
    ASSERT_TRUE(app::HasSide(a, app::Side::Base));
    const app::HeadValue& entropy = *app::FindHeadValue("entropy");
    for (const app::HeadSummary& s : app::SummarizeHeads(a)) {
        const int l = s.ref.layer, h = s.ref.head;
        EXPECT_FLOAT_EQ(s.Get("entropy", app::Side::Base), model::HeadRowMean(a.metrics_base.Get("entropy"), a, l, h));
        EXPECT_FLOAT_EQ(s.Get("tau_q_max", app::Side::Base), model::HeadTokenStats(a.tau_q_base, a, l, h).max);
        EXPECT_EQ(s.Get(entropy, app::MapMode::Base), s.Get("entropy", app::Side::Base));
        EXPECT_FLOAT_EQ(s.Get(entropy, app::MapMode::BaseDifference), s.Get("entropy") - s.Get("entropy", app::Side::Base));
        EXPECT_EQ(s.Get(*app::FindHeadValue("js_divergence"), app::MapMode::Base), s.Get("js_divergence")) << "one-sided: SSA's";
    }
    const app::Quantity& loss = app::GetQuantity("loss");
    const std::vector<float> delta = app::TokenValues(loss, a, app::MapMode::BaseDifference);
    for (int t = 1; t < a.n_tokens; ++t) EXPECT_FLOAT_EQ(delta[t], a.loss[t - 1] - a.loss_base[t - 1]);
    EXPECT_TRUE(app::Holds(loss, a, app::MapMode::Base));
}

// Every map mode's name round-trips.
TEST(MapModes, NamesRoundTrip) {
    for (app::MapMode mode : app::kAllMapModes) {
        EXPECT_EQ(app::ParseMapMode(app::ToString(mode)), mode);
        EXPECT_EQ(static_cast<int>(app::ThumbnailKindOf(mode)), static_cast<int>(mode));
    }
    EXPECT_EQ(app::ParseMapMode("vanilla"), app::MapMode::Compare);
    EXPECT_EQ(app::ParseMapMode("diff_base"), app::MapMode::BaseDifference);  // as the files name it
    EXPECT_STREQ(app::ToString(app::MapMode::BaseDifference), "base_diff");
    EXPECT_STREQ(app::MapModeLabel(app::MapMode::BaseDifference), "SSA - base");
    EXPECT_TRUE(app::IsDifference(app::MapMode::BaseDifference) && !app::IsDifference(app::MapMode::Base));
}

// metrics.json's keys, as users' scripts read them.
TEST(MetricsJson, KeepsItsKeys) {
    const model::Analysis a = app::MakeSyntheticAnalysis(2, 3, 9);
    model::ModelInfo info;
    info.config.n_layer = 2, info.config.n_head = 3, info.config.n_embd = 24;
    const json m = app::MetricsToJson(a, info, 0.3f);
    ASSERT_EQ(m["heads"].size(), 6u);
    const json& head = m["heads"][4];
    EXPECT_EQ(head["layer"], 1);
    EXPECT_EQ(head["head"], 1);
    EXPECT_EQ(Keys(head), (std::set<std::string>{"layer", "head", "ssa", "comparison", "js_divergence", "l1_distance", "qk_opnorm",
                                                 "qk_eig_mean", "qk_eig_var", "effective_qk_norm"}));
    const std::set<std::string> side = {"entropy", "normalized_entropy", "spikiness", "max_weight", "top5_mass", "effective_support",
                                        "sink_mass", "sink_head", "tau_q", "tau_v"};
    EXPECT_EQ(Keys(head["ssa"]), side);
    EXPECT_EQ(Keys(head["comparison"]), side);
    for (const char* stats : {"tau_q", "tau_v"}) EXPECT_EQ(Keys(head["ssa"][stats]), (std::set<std::string>{"mean", "min", "max"}));
    EXPECT_EQ(Keys(head["effective_qk_norm"]), (std::set<std::string>{"mean", "min", "max"}));
    EXPECT_TRUE(head["ssa"]["sink_head"].is_boolean());
    EXPECT_FLOAT_EQ(head["ssa"]["entropy"].get<float>(), model::HeadRowMean(a.metrics.Get("entropy"), a, 1, 1));
    EXPECT_FLOAT_EQ(head["l1_distance"].get<float>(), model::HeadRowMean(a.l1, a, 1, 1));
    EXPECT_EQ(Keys(m["rows"]), (std::set<std::string>{"ssa", "comparison", "js_divergence", "l1_distance", "effective_qk_norm"}));
    const std::set<std::string> rows = {"entropy", "normalized_entropy", "spikiness", "max_weight", "top5_mass", "effective_support", "sink_mass"};
    EXPECT_EQ(Keys(m["rows"]["ssa"]), rows);
    EXPECT_EQ(Keys(m["rows"]["comparison"]), rows);
    EXPECT_EQ(m["rows"]["js_divergence"][1][2].size(), 9u);
    EXPECT_EQ(Keys(m["sink_ratio"]), (std::set<std::string>{"ssa", "comparison"}));
    // Every row metric the analysis computes is in the catalogue, so metrics.json lists it.
    for (const model::NamedArray& r : a.metrics.rows) EXPECT_NE(app::FindQuantity(r.name), nullptr) << r.name;
}

// A batch summary's columns, in their order (summary.csv's header is a file format).
TEST(BatchSummary, KeepsItsColumns) {
    const model::Analysis a = app::MakeSyntheticAnalysis(2, 2, 12);
    const json row = app::BatchSummaryRow("one", 1, a, 0.3f);
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/catalogue_batch";
    fs::remove_all(dir);
    fs::create_directories(dir);
    ASSERT_TRUE(app::WriteBatchSummary(dir, json::array({row}), json::array()));
    std::ifstream csv(dir + "/summary.csv");
    std::string header;
    std::getline(csv, header);
    EXPECT_EQ(header,
              "name,n_tokens,entropy,entropy_compare,normalized_entropy,normalized_entropy_compare,spikiness,spikiness_compare,sink_mass,"
              "sink_mass_compare,sink_ratio,sink_ratio_compare,js_divergence,tau_q_mean,loss,loss_compare");
    EXPECT_EQ(Keys(row).size(), 17u);  // the columns and "line"
    EXPECT_FLOAT_EQ(row["loss"].get<float>(), model::MeanLoss(a.loss));
    double tau = 0;
    for (int l = 0; l < 2; ++l)
        for (int h = 0; h < 2; ++h) tau += model::HeadTokenStats(a.tau_q, a, l, h).mean / 4.0;
    EXPECT_NEAR(row["tau_q_mean"].get<double>(), tau, 1e-6);
}

// The temperature scale (the window's strips and chips, exported highlights) reads each head's min
// and max from its bands' figures where the head's values are finite, and reads the values
// through where they are not: the same range as a scan of every finite value, to the bit.
TEST(TemperatureRange, EqualsAScanOfEveryFiniteValue) {
    uint32_t state = 11;
    auto next = [&] { return ((state = state * 1664525u + 1013904223u) >> 8) / 16777216.0f; };
    for (int T : {1, 2, 300, 600}) {
        model::Analysis a;
        a.n_layer = 2, a.n_head = 3, a.n_tokens = T;
        std::vector<float> values(static_cast<size_t>(6 * T));
        for (size_t k = 0; k < values.size(); ++k) values[k] = 0.2f + 2.0f * next();
        if (T > 2) {
            values[1 * T + T / 2] = NAN;             // head 1: a NaN, and its largest value after it
            values[1 * T + T - 1] = 9.0f;
            values[2 * T + 0] = INFINITY;            // head 2: an infinity first
            values[3 * T + T - 1] = -INFINITY;       // head 3: one last
            values[4 * T + 1] = 0.0f - 7.0f;         // head 4: far below 1, finite
        }
        const model::RowArray tau(values, 6, T);
        for (float offset : {0.0f, 1.0f})
            for (int head = -1; head < 6; ++head) {
                std::optional<app::HeadRef> ref;
                if (head >= 0) ref = app::HeadRef{head / 3, head % 3};
                float d = 0.05f;
                for (int k = head < 0 ? 0 : head * T; k < (head < 0 ? 6 * T : (head + 1) * T); ++k)
                    if (std::isfinite(values[k])) d = std::max(d, std::abs(values[k] + offset - 1.0f));
                const app::TemperatureScale got = app::TemperatureRange(a, tau, ref, offset);
                EXPECT_EQ(got.range.min, 1.0f - d) << "T " << T << ", head " << head << ", offset " << offset;
                EXPECT_EQ(got.range.max, 1.0f + d) << "T " << T << ", head " << head << ", offset " << offset;
            }
    }
}

// The legend's part of a temperature scale: from the lowest value to the highest, with 1 at an end
// when none is on its other side (all of it when no value is finite or every value is 1), as a
// scan of the values says; never an end no value has (-0.73 for tau_q from 0.12 to 2.73). The
// colours' range is the same whichever part a legend shows.
TEST(TemperatureRange, ItsLegendIsThePartTheValuesReach) {
    struct Case {
        std::vector<float> values;
        float used_min, used_max;  // NAN: the scale's end, 1 - d or 1 + d
    };
    const std::vector<Case> cases = {
        {{1.0f, 1.5f, 2.75f, NAN, 1.2f, 1.0f}, 1.0f, 2.75f},          // an official exp-exp fine-tune: every tau_q >= 1
        {{0.4f, 0.9f, 1.0f, 0.7f, -INFINITY, 0.99f}, 0.4f, 1.0f},     // every tau <= 1
        {{0.4f, 1.9f, 1.0f, 0.7f, 1.3f, 0.99f}, 0.4f, 1.9f},          // both sides: 0.1 (1 - d) is no value's
        {{0.12f, 2.73f, 1.0f, 1.1f, 1.3f, 0.99f}, 0.12f, 2.73f},      // the English model's tau_q: not -0.73
        {{1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f}, NAN, NAN},             // vanilla everywhere: the whole 0.05 scale
        {{NAN, NAN, INFINITY, NAN, NAN, NAN}, NAN, NAN},              // nothing finite
        {{1.0f, 1.01f, 1.0f, 1.0f, 1.0f, 1.0f}, 1.0f, 1.01f},         // a scale of at least 0.05, its legend the values'
    };
    for (size_t c = 0; c < cases.size(); ++c) {
        model::Analysis a;
        a.n_layer = 1, a.n_head = 2, a.n_tokens = 3;
        const model::RowArray tau(cases[c].values, 2, 3);
        const app::TemperatureScale got = app::TemperatureRange(a, tau);
        float d = 0.05f;
        for (float v : cases[c].values)
            if (std::isfinite(v)) d = std::max(d, std::abs(v - 1.0f));
        EXPECT_EQ(got.range.max, 1.0f + d) << "case " << c;
        EXPECT_EQ(got.range.min, 1.0f - d) << "case " << c;
        EXPECT_EQ(got.used.min, std::isnan(cases[c].used_min) ? 1.0f - d : cases[c].used_min) << "case " << c;
        EXPECT_EQ(got.used.max, std::isnan(cases[c].used_max) ? 1.0f + d : cases[c].used_max) << "case " << c;
    }
    const app::TemperatureScale one_head = app::TemperatureRange(
        [] {
            model::Analysis a;
            a.n_layer = 1, a.n_head = 2, a.n_tokens = 3;
            return a;
        }(),
        model::RowArray(cases[2].values, 2, 3), app::HeadRef{0, 1});  // head 1 of case 2: 0.7, 1.3, 0.99
    EXPECT_FLOAT_EQ(one_head.range.max, 1.3f);
    EXPECT_EQ(one_head.used.min, one_head.range.min);
    EXPECT_EQ(one_head.used.max, one_head.range.max);
    const app::TemperatureScale over = app::TemperatureScaleOver(1.1f, 2.0f);
    EXPECT_EQ(over.range.min, 0.0f);
    EXPECT_EQ(over.range.max, 2.0f);
    EXPECT_EQ(over.used.min, 1.0f);
    EXPECT_EQ(over.used.max, 2.0f);
}

}  // namespace
