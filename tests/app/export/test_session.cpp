// Session files and the export command line: what the GUI saves reads back identically, bad
// files are one-line errors naming the key, and the command line the export dialog shows parses
// back to the same options.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "app/core/launch.h"
#include "app/export/export.h"
#include "app/export/flags.h"
#include "app/export/session.h"
#include "model/nn/interventions.h"
#include "model/io/files.h"
#include "tests/shell_words.h"

namespace {
using nlohmann::json;
namespace fs = std::filesystem;

app::Session Example() {
    app::Session s;
    s.model_dir = "/models/ssa small";
    s.compare = app::CompareSpec::Twin("/models/vanilla");
    s.device = "cpu";
    s.text = "caf\xC3\xA9 \"quoted\"\nsecond line";
    s.truncate = true;
    s.selected = {2, 3};
    s.pinned = {{0, 1}, {2, 3, app::MapMode::Compare}};
    s.query = 7;
    s.settings.colormap = viz::Colormap::Magma;
    s.settings.log_scale = true;
    s.settings.map_mode = app::MapMode::Difference;
    s.settings.token_color = app::TokenColor::Spikiness;
    s.settings.token_scope = app::TokenScope::LayerMean;
    s.settings.sink_epsilon = 0.25f;
    s.settings.grid_metric = "js_divergence";
    s.settings.map_view = {3.5f, 2.0f, 7.25f};
    s.settings.split = true;
    s.settings.grid_mode = app::MapMode::Difference;
    s.settings.per_head_scale = true;
    s.settings.matrix_metric = "sink_mass";
    s.settings.run_curve = "js_drift";
    s.settings.lens_map = app::LensGrid::Drift;
    s.settings.ranking = app::RankingView::Drift;
    s.settings.lens_target = app::LensTarget::NextAgainstOther;
    s.settings.grid_cell = 64;
    s.settings.layout = {0.25f, 0.5f, 0.25f, 0.4f, false};
    app::ExportOptions& e = s.export_options;
    e.out_dir = "/tmp/out dir";
    e.layers = {0, 2};
    e.heads = {1};
    e.json = false;
    e.csv = e.png = e.html = true;
    e.maps = {app::MapMode::Ssa, app::MapMode::Difference};
    e.figures.colormap = viz::Colormap::Magma;
    e.figures.map_size = 512;
    e.figures.highlight = app::TokenColor::TauV;
    e.figures.highlight_scope = app::TokenScope::Head;
    e.figures.highlight_head = {1, 2};
    e.figures.temperature_per_head = true;
    e.sink_epsilon = 0.4f;
    return s;
}

// Ctrl+PageUp / PageDown step through the right pane's tabs as the bar orders them, wrapping round.
TEST(Tabs, StepInTheBarsOrderAndWrap) {
    EXPECT_STREQ(app::StepTab("Heads", 1), "Matrix");
    EXPECT_STREQ(app::StepTab("Heads", -1), "Run");
    EXPECT_STREQ(app::StepTab("Run", 1), "Heads");
    EXPECT_STREQ(app::StepTab("Next token", -1), "Sparsity");
    EXPECT_STREQ(app::StepTab("Lens", 13), "Matrix");      // 13 = 10 + 3: once round, then Run, Heads, Matrix
    EXPECT_STREQ(app::StepTab("Lens", -13), "Next token");  // back once round, then Fine-tune, What-ifs, Next token
    EXPECT_STREQ(app::StepTab("no such tab", 1), "Matrix");
    EXPECT_STREQ(app::StepTab("", -1), "Run");
    // A whole round from every tab visits each tab once.
    for (const char* from : app::LaunchOptions::kTabs) {
        std::set<std::string> seen;
        std::string at = from;
        for (size_t i = 0; i < std::size(app::LaunchOptions::kTabs); ++i) seen.insert(at = app::StepTab(at, 1));
        EXPECT_EQ(at, from);
        EXPECT_EQ(seen.size(), std::size(app::LaunchOptions::kTabs));
    }
}

// --tab and --show take a tab as the bar spells it too ("Lens", "Next token"), or as the files and
// plots do ("finetune"), and keep --tab's spelling.
TEST(Tabs, FlagsTakeTheBarsSpelling) {
    for (const auto& [flag, given, kept] : {std::tuple{"tab", "Lens", "lens"}, {"tab", "Next token", "next-token"}, {"tab", "next-token", "next-token"},
                                            {"show", "Fine-tune", "fine-tune"}, {"show", "WHAT-IFS", "what-ifs"}, {"show", "demo", "demo"},
                                            {"tab", "finetune", "fine-tune"}, {"tab", "fine_tune", "fine-tune"}, {"tab", "next  token", "next-token"}}) {
        app::CommandOptions o;
        EXPECT_TRUE(app::ApplyFlag(app::Command::Window, flag, given, &o)) << flag << " " << given;
        EXPECT_EQ(o.window.show, kept) << flag << " " << given;
    }
    for (const auto& [flag, given] : {std::pair{"tab", "Lenses"}, {"tab", "fine tunes"}, {"tab", "demo"}, {"show", "Demo"}, {"tab", ""}}) {
        app::CommandOptions o;
        const auto s = app::ApplyFlag(app::Command::Window, flag, given, &o);
        ASSERT_FALSE(s) << flag << " " << given;
        EXPECT_NE(s.error().find("is not one of"), std::string::npos) << s.error();
        EXPECT_EQ(o.window.show, "");
    }
}

TEST(Session, RoundTripsEveryField) {
    const app::Session s = Example();
    const std::string path = std::string(SSAVIZ_TEST_OUT) + "/session_roundtrip.json";
    ASSERT_TRUE(app::SaveSession(path, s));
    auto back = app::LoadSession(path);
    ASSERT_TRUE(back) << back.error();
    // Equal JSON means equal fields (every field is written).
    EXPECT_EQ(app::SessionToJson(*back), app::SessionToJson(s));
    EXPECT_EQ(back->text, s.text);
    ASSERT_EQ(back->pinned.size(), 2u);
    EXPECT_EQ(back->pinned[1].mode, app::MapMode::Compare);  // each pin keeps its own map
    EXPECT_FALSE(back->settings.layout.editor_open);
    EXPECT_FLOAT_EQ(back->settings.layout.center, 0.5f);
    EXPECT_EQ(back->settings.map_mode, app::MapMode::Difference);
    EXPECT_EQ(back->settings.run_curve, "js_drift");
    EXPECT_EQ(back->settings.lens_map, app::LensGrid::Drift);
    EXPECT_EQ(back->settings.ranking, app::RankingView::Drift);
    EXPECT_EQ(back->settings.lens_target, app::LensTarget::NextAgainstOther);
    EXPECT_EQ(back->export_options.figures.highlight_head.head, 2);
    EXPECT_TRUE(back->export_options.figures.temperature_per_head);
    EXPECT_FLOAT_EQ(back->export_options.sink_epsilon, 0.4f);

    // The heads matrix showing a run's steps to sparsity saves and opens again as that.
    app::Session run = s;
    run.settings.matrix_metric = "steps_to_sparsity";
    ASSERT_TRUE(app::SaveSession(path, run));
    auto run_back = app::LoadSession(path);
    ASSERT_TRUE(run_back) << run_back.error();
    EXPECT_EQ(run_back->settings.matrix_metric, "steps_to_sparsity");

    // A training run and its compare run, with the step shown as the model, read back as such.
    run.run_dir = "/runs/ssa";
    run.compare_run_dir = "/runs/vanilla";
    run.model_dir = "/runs/ssa/iter-000200-ckpt.pth";
    ASSERT_TRUE(app::SaveSession(path, run));
    std::ifstream in(path);
    const nlohmann::json written = nlohmann::json::parse(in);
    EXPECT_EQ(written["run"], "/runs/ssa");
    EXPECT_EQ(written["compare_run"], "/runs/vanilla");
    run_back = app::LoadSession(path);
    ASSERT_TRUE(run_back) << run_back.error();
    EXPECT_EQ(run_back->run_dir, "/runs/ssa");
    EXPECT_EQ(run_back->compare_run_dir, "/runs/vanilla");
    EXPECT_EQ(run_back->model_dir, "/runs/ssa/iter-000200-ckpt.pth");
    EXPECT_TRUE(run_back->warnings.empty());
}

// What-ifs are kept in the --ablate syntax, and "compare": "unedited" (the model without them)
// reads back; a session from before issue 17 (no such keys) has none and compares with tau = 1.
TEST(Session, WhatIfsAndTheUneditedComparisonRoundTrip) {
    app::Session s;
    s.compare.kind = app::CompareKind::Unedited;
    s.interventions = {{model::Intervention::Kind::Ablate, 1, 2, 0.0f},
                       {model::Intervention::Kind::PositionOnly, 0, -1, 0.0f},
                       {model::Intervention::Kind::Scale, 3, 0, 0.5f}};
    const json j = app::SessionToJson(s);
    EXPECT_EQ(j["compare"], "unedited");
    EXPECT_EQ(j["interventions"], "1:2,0:*=pos,3:0=x0.5");
    auto back = app::SessionFromJson(j);
    ASSERT_TRUE(back) << back.error();
    EXPECT_EQ(back->compare.kind, app::CompareKind::Unedited);
    EXPECT_TRUE(back->compare.twin_dir.empty());
    EXPECT_TRUE(back->interventions == s.interventions);

    auto old = app::SessionFromJson(json{{"ssaviz_session", 1}, {"compare", "local"}, {"text", "hi"}});
    ASSERT_TRUE(old) << old.error();
    EXPECT_TRUE(old->interventions.empty());
    EXPECT_EQ(old->compare.kind, app::CompareKind::LayerLocal);

    // Bad what-ifs are one-line errors with the item escaped.
    for (const std::string spec : {"1:x", "1", "0:0=hot", "2:1=x\x01"}) {
        auto bad = app::SessionFromJson(json{{"ssaviz_session", 1}, {"interventions", spec}});
        ASSERT_FALSE(bad) << spec;
        EXPECT_NE(bad.error().find("'interventions'"), std::string::npos) << bad.error();
        EXPECT_EQ(bad.error().find('\x01'), std::string::npos) << "a control character echoed: " << bad.error();
        EXPECT_EQ(bad.error().find("65536"), std::string::npos) << "the placeholder shape leaked: " << bad.error();
    }
    // More what-ifs than one of each kind on every head of any model: refused at once, with the
    // count (a million no-op ones took 36 s and 1.7 GB to apply); the most is taken.
    std::string many;
    for (size_t k = 0; k <= model::kMaxInterventions; ++k) many += k ? ",0:0" : "0:0";
    auto too_many = app::SessionFromJson(json{{"ssaviz_session", 1}, {"interventions", many}});
    ASSERT_FALSE(too_many);
    EXPECT_NE(too_many.error().find("lists 65537 what-ifs; at most 65536"), std::string::npos) << too_many.error();
    many.resize(many.size() - 4);
    auto most = app::SessionFromJson(json{{"ssaviz_session", 1}, {"interventions", many}});
    ASSERT_TRUE(most) << most.error();
    EXPECT_EQ(most->interventions.size(), model::kMaxInterventions);
}

// Sessions keep their format: the keys a flag also says are written as they always were (the
// what-if scale and sink epsilon as the float they set, lists as arrays, the highlight's scope
// and head as two keys).
TEST(Session, FlagKeysKeepTheirFormat) {
    const json j = app::SessionToJson(Example());
    const json expected = {{"model", "/models/ssa small"},
                           {"compare", "/models/vanilla"},
                           {"interventions", ""},
                           {"device", "cpu"},
                           {"text", Example().text},
                           {"truncate", true}};
    for (const auto& [key, value] : expected.items()) EXPECT_EQ(j[key], value) << key;
    const json expected_export = {{"out", "/tmp/out dir"}, {"layers", {0, 2}}, {"heads", {1}}, {"formats", {"npy", "csv", "png", "html"}},
                                  {"maps", {"ssa", "diff"}}, {"colormap", "magma"}, {"log_scale", false}, {"size", 512}, {"png_scale", 1},
                                  {"no_titles", false}, {"text_scale", 1.0f},
                                  {"highlight", "tau_v"}, {"highlight_scope", "head"}, {"highlight_head", {1, 2}}, {"temperature_scale", "head"},
                                  {"sink_epsilon", 0.4f}};
    EXPECT_EQ(j["export"], expected_export) << j["export"].dump();
    EXPECT_EQ(j["export"]["sink_epsilon"].dump(), json(0.4f).dump());
    // Defaults are written too, and nothing is ticked is a list of none.
    app::Session none;
    none.export_options.maps.clear();
    app::ClearExportFormats(&none.export_options);
    none.export_options.figures.highlight_scope = app::TokenScope::ModelMean;
    none.export_options.figures.highlight_head = {3, 1};  // the dialog keeps it while the scope is the model
    const json d = app::SessionToJson(none);
    EXPECT_EQ(d["compare"], "vanilla");
    EXPECT_EQ(d["device"], "auto");
    EXPECT_EQ(d["truncate"], false);
    EXPECT_EQ(d["export"]["size"], 0);
    EXPECT_EQ(d["export"]["log_scale"], false);
    EXPECT_EQ(d["export"]["maps"], json::array());
    EXPECT_EQ(d["export"]["formats"], json::array());
    EXPECT_EQ(d["export"]["layers"], json::array());
    EXPECT_EQ(d["export"]["highlight_scope"], "model");
    EXPECT_EQ(d["export"]["temperature_scale"], "model");
    auto back = app::SessionFromJson(d);
    ASSERT_TRUE(back) << back.error();
    EXPECT_EQ(app::SessionToJson(*back), d);
    EXPECT_TRUE(back->export_options.maps.empty());
    EXPECT_EQ(back->export_options.figures.highlight_head.layer, 3);
}

// One set of bounds: a session's value goes through its flag, so it is refused where the flag
// refuses it, with the flag's words (the map size: 16 to 8192 pixels, or 0 for automatic).
TEST(Session, FlagKeysHaveTheFlagsBounds) {
    for (const json& size : {json(5), json(8193), json(-1)}) {
        auto s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"export", {{"size", size}}}});
        ASSERT_FALSE(s) << size;
        EXPECT_NE(s.error().find("is not a heatmap side: a whole number of pixels, 16 to 8192"), std::string::npos) << s.error();
        app::CommandOptions o;
        EXPECT_FALSE(app::ApplyFlag(app::Command::Export, "size", size.dump(), &o));
    }
    auto s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"export", {{"size", 0}}}});
    ASSERT_TRUE(s) << s.error();
    EXPECT_EQ(s->export_options.figures.map_size, 0);
    s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"export", {{"sink_epsilon", 1.5}}}});
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("'export.sink_epsilon': must be a number in (0, 1)"), std::string::npos) << s.error();
    s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"export", {{"highlight", "warmth"}}}});
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("'export.highlight': 'warmth' is not one of"), std::string::npos) << s.error();
    s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{"ranking", "heads"}}}});
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("'view.ranking': 'heads' is not one of table, tokens, drift, drift-parts"), std::string::npos) << s.error();
    s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{"lens_target", "logit"}}}});
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("'view.lens_target': 'logit' is not one of next, top, next-against-other"), std::string::npos) << s.error();
    s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{"ranking", "drift-parts"}}}});
    ASSERT_TRUE(s) << s.error();
    EXPECT_EQ(s->settings.ranking, app::RankingView::DriftParts);
    s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{"lens_map", "drift"}}}});
    ASSERT_TRUE(s) << s.error();
    EXPECT_EQ(s->settings.lens_map, app::LensGrid::Drift);
    s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{"lens_map", "diff_base"}}}});  // as ParseMapMode reads it
    ASSERT_TRUE(s) << s.error();
    EXPECT_EQ(s->settings.lens_map, app::LensGrid::BaseDifference);
    s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{"lens_map", "drifts"}}}});
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("'view.lens_map': 'drifts' is not one of ssa, compare, diff, base, base_diff, drift"), std::string::npos) << s.error();
    s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{"run_curve", "js_temperature"}}}});
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("'view.run_curve': 'js_temperature' is not one of entropy, js_divergence, sink_mass, tau_q_mean, tau_v_mean, js_total, "
                             "js_drift, loss, tau_q_token, lens_loss, lens_loss_diff, lens_loss_diff_base"),
              std::string::npos)
        << s.error();
    s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{"run_curve", "lens_loss"}}}});
    ASSERT_TRUE(s) << s.error();
    EXPECT_EQ(s->settings.run_curve, "lens_loss");
    s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{"map", "base_diff"}}}});
    ASSERT_TRUE(s) << s.error();
    EXPECT_EQ(s->settings.map_mode, app::MapMode::BaseDifference);
    // Keys the table does not know are left alone, as before.
    s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"colour", "red"}, {"export", {{"dpi", 300}}}});
    ASSERT_TRUE(s) << s.error();
}

// What a comparison value means is known in one place (app/core/run.h): --compare, a session's
// "compare" and Python's compare (where "none" is a keyword too) read alike and spell back as given.
TEST(Compare, OneVocabularyForFlagsSessionsAndPython) {
    for (const std::string value : {"vanilla", "local", "unedited", "/models/vanilla"}) {
        const app::CompareSpec c = app::ParseCompare(value);
        EXPECT_EQ(app::SpellCompare(c), value);
        app::CommandOptions o;
        ASSERT_TRUE(app::ApplyFlag(app::Command::Export, "compare", value, &o));
        EXPECT_EQ(o.compare.kind, c.kind) << value;
        auto s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"compare", value}});
        ASSERT_TRUE(s) << s.error();
        EXPECT_EQ(s->compare.kind, c.kind) << value;
        EXPECT_EQ(app::SessionToJson(*s)["compare"], value);
    }
    EXPECT_EQ(app::ParseCompare("local").kind, app::CompareKind::LayerLocal);
    EXPECT_EQ(app::ParseCompare("/models/vanilla").twin_dir, "/models/vanilla");
    EXPECT_EQ(app::ParseCompare("none").kind, app::CompareKind::Twin);  // a folder ./none on the command line
    EXPECT_EQ(app::ParseCompare("none", /*python=*/true).kind, app::CompareKind::None);
    // A bare word that names no folder is a mistyped comparison, refused by its key before any model
    // opens (it was found once the model had loaded, as if a flag: "--compare and --base exclude...").
    auto drift = app::SessionFromJson(json{{"ssaviz_session", 1}, {"compare", "drift"}});
    ASSERT_FALSE(drift);
    EXPECT_NE(drift.error().find("'compare': the comparison 'drift' is none of vanilla, local, unedited"), std::string::npos) << drift.error();
    EXPECT_EQ(app::CompareFlagHint(), "vanilla|local|unedited|base|DIR");
    // A fine-tune's base: by keyword (the base beside the model), its folder kept under "base".
    app::CommandOptions base;
    ASSERT_TRUE(app::ApplyFlag(app::Command::Export, "base", "/models/base", &base));
    ASSERT_TRUE(app::ApplyFlag(app::Command::Export, "compare", "base", &base));  // after --base: keeps its folder
    EXPECT_EQ(base.compare.kind, app::CompareKind::Base);
    EXPECT_EQ(base.compare.base_dir, "/models/base");
    auto s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"compare", "base"}, {"base", "/models/base"}});
    ASSERT_TRUE(s) << s.error();
    EXPECT_EQ(s->compare.kind, app::CompareKind::Base);
    EXPECT_EQ(s->compare.base_dir, "/models/base");
    EXPECT_EQ(app::SessionToJson(*s)["base"], "/models/base");
    EXPECT_EQ(app::CompareKindRunning(model::Comparison::LayerLocal).kind, app::CompareKind::LayerLocal);
}

TEST(Session, MissingKeysKeepDefaults) {
    auto s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"text", "hi"}});
    ASSERT_TRUE(s) << s.error();
    EXPECT_EQ(s->text, "hi");
    EXPECT_EQ(s->compare.kind, app::CompareKind::Global);
    EXPECT_EQ(s->settings.colormap, viz::Colormap::Viridis);
    EXPECT_TRUE(s->export_options.json);
}

// view.tab is a tab's label, read as --tab reads one; anything else is refused (it was taken in silence).
TEST(Session, TheTabIsReadAsTheTabFlagReadsIt) {
    for (const char* spelled : {"fine-tune", "Fine-tune", "FINETUNE", "fine_tune"}) {
        auto s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{"tab", spelled}}}});
        ASSERT_TRUE(s) << spelled << ": " << s.error();
        EXPECT_EQ(s->settings.right_tab, "Fine-tune") << spelled;
    }
    auto s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{"tab", "next token"}}}});
    ASSERT_TRUE(s);
    EXPECT_EQ(s->settings.right_tab, "Next token");
}

TEST(Session, BadFilesAreOneLineErrorsNamingTheKey) {
    struct Case {
        json j;
        std::string needle;
    };
    const std::vector<Case> cases = {
        {json::array(), "must be an object"},
        {json{{"text", "x"}}, "not an ssaviz session file"},
        {json{{"ssaviz_session", 9}}, "version 9"},
        {json{{"ssaviz_session", 1}, {"text", 5}}, "'text' must be a string"},
        {json{{"ssaviz_session", 1}, {"selected", {1}}}, "'selected' must be [layer, head]"},
        {json{{"ssaviz_session", 1}, {"selected", {-1, 0}}}, "'selected'"},
        {json{{"ssaviz_session", 1}, {"pinned", "L0"}}, "'pinned'"},
        {json{{"ssaviz_session", 1}, {"view", {{"colormap", "jet"}}}}, "'view.colormap': 'jet'"},
        {json{{"ssaviz_session", 1}, {"view", {{"log_scale", 1}}}}, "'view.log_scale' must be true or false"},
        {json{{"ssaviz_session", 1}, {"view", {{"sink_epsilon", 2}}}}, "'view.sink_epsilon'"},
        {json{{"ssaviz_session", 1}, {"device", "tpu"}}, "'device': 'tpu'"},
        {json{{"ssaviz_session", 1}, {"export", {{"formats", {"gif"}}}}}, "'export.formats': 'gif'"},
        {json{{"ssaviz_session", 1}, {"export", {{"maps", {"sparse"}}}}}, "'export.maps': 'sparse'"},
        {json{{"ssaviz_session", 1}, {"export", {{"layers", {-2}}}}}, "'export.layers'"},
        {json{{"ssaviz_session", 1}, {"export", {{"size", 1e9}}}}, "'export.size'"},
        {json{{"ssaviz_session", 1}, {"query", -5}}, "'query'"},
        {json{{"ssaviz_session", 1}, {"view", {{"map_zoom", 0.5}}}}, "'view.map_zoom'"},
        // A number past a float's range is a number (it said "must be a number").
        {json{{"ssaviz_session", 1}, {"view", {{"map_zoom", 1e308}}}}, "'view.map_zoom' is out of range: 1e+308 is more than a float holds"},
        {json{{"ssaviz_session", 1}, {"view", {{"map_pan", {1}}}}}, "'view.map_pan'"},
        {json{{"ssaviz_session", 1}, {"view", {{"tab", "Bogus"}}}}, "'view.tab' is not a tab's name ('Bogus'): one of Heads, Matrix, "},
        {json{{"ssaviz_session", 1}, {"view", {{"tab", ""}}}}, "'view.tab' is not a tab's name"},
        {json{{"ssaviz_session", 1}, {"compare_run", "/runs/vanilla"}}, "'compare_run' goes with 'run'"},  // as --compare-run with --run
        // The editor would show "hello" while the model read all of it.
        {json{{"ssaviz_session", 1}, {"text", std::string("hello\0world secret", 18)}}, "'text' holds a NUL character at byte 5"},
        // A path with a NUL opened the path before it (a model's file, not the one named).
        {json{{"ssaviz_session", 1}, {"model", std::string("/m/model.safetensors\0.pth", 25)}}, "'model' holds a NUL character"},
        {json{{"ssaviz_session", 1}, {"run", std::string("/r\0x", 4)}}, "'run' holds a NUL character"},
        {json{{"ssaviz_session", 1}, {"base", std::string("/b\0x", 4)}}, "'base' holds a NUL character"},
        {json{{"ssaviz_session", 1}, {"export", {{"out", std::string("/o\0x", 4)}}}}, "'export.out' holds a NUL character"},
    };
    for (const Case& c : cases) {
        auto s = app::SessionFromJson(c.j);
        ASSERT_FALSE(s) << c.j.dump();
        EXPECT_NE(s.error().find(c.needle), std::string::npos) << c.j.dump() << " -> " << s.error();
        EXPECT_EQ(s.error().find('\n'), std::string::npos) << s.error();
    }
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/session_bad";
    fs::create_directories(dir);
    std::ofstream(dir + "/huge.json") << "{\"ssaviz_session\": 1, \"query\": 1e400}";  // the JSON library's words, not its tag
    auto huge = app::LoadSession(dir + "/huge.json");
    ASSERT_FALSE(huge);
    EXPECT_EQ(huge.error().find("[json.exception"), std::string::npos) << huge.error();
    EXPECT_NE(huge.error().find("1e400"), std::string::npos) << huge.error();
    std::ofstream(dir + "/truncated.json") << "{\"ssaviz_session\": 1, \"text\": \"ab";
    auto s = app::LoadSession(dir + "/truncated.json");
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("truncated.json: not valid JSON"), std::string::npos) << s.error();
    s = app::LoadSession(dir + "/missing.json");
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("cannot read"), std::string::npos) << s.error();
    // A key given twice: the last is read, as Python's json reads it, and the first is named.
    std::ofstream(dir + "/twice.json") << R"({"ssaviz_session": 1, "view": {"split": true, "grid_metric": "entropy", "split": false}, "query": 2, "query": 3})";
    s = app::LoadSession(dir + "/twice.json");
    ASSERT_TRUE(s) << s.error();
    EXPECT_FALSE(s->settings.split);
    EXPECT_EQ(s->query, 3);
    ASSERT_EQ(s->warnings.size(), 2u);
    EXPECT_EQ(s->warnings[0], "session key 'view.split' is given more than once (the last is used)");
    EXPECT_EQ(s->warnings[1], "session key 'query' is given more than once (the last is used)");
}

// What the window's export runs on, as the export dialog gives it to ExportCommandLine.
app::CommandOptions Source(const app::Session& s, const std::string& text, bool truncate = false) {
    app::CommandOptions o;
    o.model_dir = s.model_dir;
    o.compare = s.compare;
    o.device = s.device;
    o.text = text;
    o.truncate = truncate;
    return o;
}

TEST(ExportCommandLine, NamesEverySetting) {
    const app::Session s = Example();
    const std::string cmd = app::ExportCommandLine(s.export_options, Source(s, "it's"));
    for (const char* part : {"ssaviz export --model '/models/ssa small'", "--text 'it'\\''s'", "--out '/tmp/out dir'", "--format npy,csv,png,html",
                             "--maps ssa,diff", "--layers 0,2", "--heads 1", "--colormap magma", "--size 512", "--highlight tau_v",
                             "--highlight-scope 1,2", "--sink-eps 0.4", "--compare /models/vanilla", "--device cpu"})
        EXPECT_NE(cmd.find(part), std::string::npos) << part << " not in: " << cmd;
    EXPECT_EQ(cmd.find("--log"), std::string::npos);
}

// The table writes what it reads: the command line parses back to the options it came from.
TEST(ExportCommandLine, ParsesBackToTheSameOptions) {
    const app::Session s = Example();
    const std::string text = s.text + " it's";
    const std::string cmd = app::ExportCommandLine(s.export_options, Source(s, text, true));
    const std::vector<std::string> args = tests::ShellWords(cmd);
    ASSERT_GE(args.size(), 2u);
    EXPECT_EQ(args[1], "export");
    app::CommandOptions o;
    const model::Status parsed = app::ParseFlags(app::Command::Export, args, 2, &o);
    ASSERT_TRUE(parsed) << parsed.error() << "\n" << cmd;
    o.export_options.out_dir = o.out;
    EXPECT_EQ(app::ExportOptionsToJson(o.export_options), app::ExportOptionsToJson(s.export_options)) << cmd;
    EXPECT_EQ(o.model_dir.value_or(""), s.model_dir);
    EXPECT_EQ(o.text.value_or(""), text);
    EXPECT_EQ(o.device.value_or(""), "cpu");
    EXPECT_EQ(app::SpellCompare(o.compare), s.compare.twin_dir);
    EXPECT_TRUE(o.truncate);
    EXPECT_EQ(app::FormatCommandLine(app::Command::Export, o), cmd);
}

// The lens's attribution figures at a position (the window's selected query) are in the command and
// parse back.
TEST(ExportCommandLine, GivesTheLensAndItsAttributionsPosition) {
    const app::Session s = Example();
    app::ExportOptions options = s.export_options;
    options.lens = true;
    options.dla_position = 5;
    const std::string cmd = app::ExportCommandLine(options, Source(s, "some text"));
    EXPECT_NE(cmd.find(" --lens"), std::string::npos) << cmd;
    EXPECT_NE(cmd.find(" --dla-position 5"), std::string::npos) << cmd;
    app::CommandOptions o;
    ASSERT_TRUE(app::ParseFlags(app::Command::Export, tests::ShellWords(cmd), 2, &o)) << cmd;
    EXPECT_EQ(o.export_options.dla_position, std::optional<int64_t>(5));
    EXPECT_TRUE(o.export_options.lens);
    options.dla_position.reset();
    EXPECT_EQ(app::ExportCommandLine(options, Source(s, "some text")).find("--dla-position"), std::string::npos);
}

// Whatever the window's export ran on is in the command: a base (beside the model, or named), the
// what-ifs, the dtype and where the config and tokenizer came from (the base was left out, so the
// command wrote a tau = 1 comparison where the dialog had written the base's files).
TEST(ExportCommandLine, KeepsTheComparisonTheWhatIfsAndHowTheModelOpened) {
    const app::Session s = Example();
    app::CommandOptions source = Source(s, "hi");
    source.compare = app::CompareSpec::Base();
    source.ablate = "0:1,1:*=pos";
    source.dtype = "bf16";
    source.hints.config_file = "/configs/ssa.json";
    source.hints.tokenizer_dir = "/tok";
    std::string cmd = app::ExportCommandLine(s.export_options, source);
    for (const char* part : {"--compare base", "--ablate '0:1,1:*=pos'", "--dtype bf16", "--config /configs/ssa.json", "--tokenizer /tok"})
        EXPECT_NE(cmd.find(part), std::string::npos) << part << " not in: " << cmd;
    app::CommandOptions o;
    ASSERT_TRUE(app::ParseFlags(app::Command::Export, tests::ShellWords(cmd), 2, &o)) << cmd;
    EXPECT_EQ(o.compare.kind, app::CompareKind::Base);
    EXPECT_EQ(o.ablate.value_or(""), "0:1,1:*=pos");
    EXPECT_EQ(o.dtype, "bf16");
    EXPECT_EQ(o.hints.config_file, "/configs/ssa.json");
    source.compare = app::CompareSpec::Base("/models/base");
    cmd = app::ExportCommandLine(s.export_options, source);
    EXPECT_NE(cmd.find("--base /models/base"), std::string::npos) << cmd;
    o = app::CommandOptions();
    ASSERT_TRUE(app::ParseFlags(app::Command::Export, tests::ShellWords(cmd), 2, &o)) << cmd;
    EXPECT_EQ(o.compare.kind, app::CompareKind::Base);
    EXPECT_EQ(o.compare.base_dir, "/models/base");
}

// "diverging" is the difference maps' own colour map: the command line refuses it for attention
// maps, and an older session that holds it opens with viridis (in view and export alike).
TEST(Sessions, AnOlderSessionsDivergingColourMapReadsAsViridis) {
    auto s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{"colormap", "diverging"}}}, {"export", {{"colormap", "diverging"}}}});
    ASSERT_TRUE(s) << s.error();
    EXPECT_EQ(s->settings.colormap, viz::Colormap::Viridis);
    EXPECT_EQ(s->export_options.figures.colormap, viz::Colormap::Viridis);
    app::CommandOptions o;
    EXPECT_FALSE(app::ApplyFlag(app::Command::Export, "colormap", "diverging", &o));
}

// What generate prints of a model's text: line breaks, tabs and any UTF-8 kept, every other control
// character (C0, DEL, the C1 range U+0080..U+009F) inert.
TEST(TerminalText, KeepsTextAndMakesControlsInert) {
    EXPECT_EQ(app::TerminalText("caf\xC3\xA9\tline\nnext \xE2\x82\xAC"), "caf\xC3\xA9\tline\nnext \xE2\x82\xAC");
    EXPECT_EQ(app::TerminalText("\x1B[2J\x1B[31mHACK\x07\r\x7F"), "\\x1B[2J\\x1B[31mHACK\\x07\\x0D\\x7F");
    EXPECT_EQ(app::TerminalText("a\xC2\x9B" "31m b\xC2\xA0"), "a\\x9B" "31m b\xC2\xA0");  // CSI as one character; NBSP kept
    EXPECT_EQ(app::TerminalText(std::string("nul\0end", 7)), "nul\\x00end");
    // A byte of no UTF-8 character alone (a lone 0x9B is CSI to a terminal that is not UTF-8), a
    // character cut short at the end too; whole characters of every length kept.
    EXPECT_EQ(app::TerminalText("a\x9B" "31m \xE2\x82 \xF0\x9F\x98\x80 \xC3"), "a\\x9B" "31m \\xE2\\x82 \xF0\x9F\x98\x80 \\xC3");
}

// Keyword arguments (a scripting front end's): a flag by name with a string value.
TEST(Flags, ApplyByNameChecksLikeTheCommandLine) {
    app::CommandOptions o;
    ASSERT_TRUE(app::ApplyFlag(app::Command::Export, "sink_eps", "0.25", &o));
    EXPECT_FLOAT_EQ(o.export_options.sink_epsilon, 0.25f);
    ASSERT_TRUE(app::ApplyFlag(app::Command::Export, "layers", "0, 2", &o));
    EXPECT_EQ(o.export_options.layers, (std::vector<int>{0, 2}));
    ASSERT_TRUE(app::ApplyFlag(app::Command::Export, "log", "true", &o));
    EXPECT_TRUE(o.export_options.figures.log_scale);
    auto s = app::ApplyFlag(app::Command::Export, "size", "99999", &o);
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("--size '99999' is not a heatmap side: a whole number of pixels, 16 to 8192"), std::string::npos) << s.error();
    s = app::ApplyFlag(app::Command::Info, "layers", "0", &o);
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("info takes no --layers"), std::string::npos) << s.error();
    bool lists_layers = false;
    for (const app::Flag* f : app::FlagsOf(app::Command::Export)) lists_layers |= f->names[0] == "--layers";
    EXPECT_TRUE(lists_layers);
}

// Integers are checked before they are narrowed: 2^32 + 1 is not 1.
TEST(Flags, IntegersAreRangeCheckedBeforeNarrowing) {
    EXPECT_EQ(app::ParseInteger("4294967297", 1, 1 << 20), std::nullopt);
    EXPECT_EQ(app::ParseInteger("99999999999999999999", 0, 10), std::nullopt);
    EXPECT_EQ(app::ParseInteger("12", 1, 1 << 20), 12);
    EXPECT_EQ(app::ParseInteger("12x", 1, 100), std::nullopt);
    EXPECT_EQ(app::ParseInteger("", 0, 100), std::nullopt);
    app::CommandOptions o;
    EXPECT_FALSE(app::ApplyFlag(app::Command::Generate, "tokens", "4294967297", &o));
    EXPECT_FALSE(app::ParseIndexList("4294967296", "--layers"));
    EXPECT_EQ(*app::ParseIndexList("all", "--layers"), std::vector<int>{});
    EXPECT_EQ(app::FormatIndexList({}), "all");
}

// Hostile input, round three: numbers that wrap, lists that are empty or repeat, values echoed
// without bound, and pins by the million.
TEST(Session, IntegersAreCheckedBeforeNarrowing) {
    for (const json& version : {json(4294967297ull), json(-4294967295ll), json(1.5), json("1")}) {
        auto s = app::SessionFromJson(json{{"ssaviz_session", version}, {"text", "hi"}});
        ASSERT_FALSE(s) << version.dump();
        EXPECT_NE(s.error().find("'ssaviz_session' must be an integer"), std::string::npos) << s.error();
    }
    auto s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"query", 1e300}});
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("'query' must be an integer"), std::string::npos) << s.error();
    s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{"map_zoom", 1e300}}}});  // past float range: not infinity
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("'view.map_zoom'"), std::string::npos) << s.error();
    // Pane shares are checked as shares (fuzz_session found this one: it did not read back once saved).
    s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"view", {{"layout", {{"columns", {0.25, 0.5, 4294967296.0}}}}}}});
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("'view.layout.columns'"), std::string::npos) << s.error();
}

TEST(Session, PinsAreCappedAndRepeatsCountOnce) {
    json pins = json::array();
    for (int k = 0; k < 200000; ++k) pins.push_back({k % 2, k / 2 % 2});  // 4 heads, pinned 50,000 times each
    auto s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"pinned", pins}});
    ASSERT_TRUE(s) << s.error();
    EXPECT_EQ(s->pinned.size(), 4u);
    pins = json::array();
    for (int k = 0; k <= static_cast<int>(app::kMaxPins); ++k) pins.push_back({k, 0});
    s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"pinned", pins}});
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("'pinned' holds more than 64 heads"), std::string::npos) << s.error();
    // The window's own pinning stops at the same cap.
    app::AppState state;
    for (int k = 0; k < static_cast<int>(app::kMaxPins); ++k) EXPECT_TRUE(state.TogglePin({k, 0}));
    EXPECT_FALSE(state.TogglePin({999, 0}));
    EXPECT_EQ(state.pinned.size(), app::kMaxPins);
    EXPECT_TRUE(state.TogglePin({0, 0}));  // unpinning still works
}

TEST(Session, EchoedValuesAreBounded) {
    const std::string huge(1 << 20, 'x');
    for (const json& j : {json{{"ssaviz_session", 1}, {"device", huge}}, json{{"ssaviz_session", 1}, {"view", {{"colormap", huge}}}},
                          json{{"ssaviz_session", 1}, {"export", {{"formats", {huge}}}}}, json{{"ssaviz_session", 1}, {"view", {{"tab", huge}}}},
                          json{{"ssaviz_session", 1}, {"query", huge}}}) {
        auto s = app::SessionFromJson(j);
        ASSERT_FALSE(s);
        EXPECT_LT(s.error().size(), 300u) << s.error().substr(0, 300);
    }
}

TEST(Flags, EmptyListsAreOneErrorEverywhereAndRepeatsCountOnce) {
    for (const char* flag : {"format", "maps", "layers", "heads", "ablate"})
        for (const char* value : {"", " ", ",", " , "}) {
            app::CommandOptions o;
            auto s = app::ApplyFlag(app::Command::Export, flag, value, &o);
            ASSERT_FALSE(s) << flag << " '" << value << "'";
            EXPECT_NE(s.error().find(std::string("--") + flag + " is empty"), std::string::npos) << s.error();
        }
    std::string many;
    for (int k = 0; k < 50000; ++k) many += (k ? "," : "") + std::to_string(k % 3);
    EXPECT_EQ(*app::ParseIndexList(many, "--layers"), (std::vector<int>{0, 1, 2}));
    app::CommandOptions o;
    ASSERT_TRUE(app::ApplyFlag(app::Command::Export, "maps", "ssa,ssa,diff,ssa", &o));
    EXPECT_EQ(o.export_options.maps, (std::vector<app::MapMode>{app::MapMode::Ssa, app::MapMode::Difference}));
    // A session's lists too, once resolved against the model.
    app::ExportOptions e;
    e.layers = {1, 1, 0, 1};
    e.heads = {2, 2};
    ASSERT_TRUE(app::ResolveExportHeads(&e, 2, 3));
    EXPECT_EQ(e.layers, (std::vector<int>{1, 0}));
    EXPECT_EQ(e.heads, (std::vector<int>{2}));
}

TEST(Flags, NumbersMeanOneThing) {
    // Whole numbers only: no fraction, sign, space or exponent, the same for --top-k as for --tokens.
    for (const char* text : {"2.5", "+3", " 3", "3 ", "1e3", "0x10", "--3"}) EXPECT_EQ(app::ParseInteger(text, -100, 100), std::nullopt) << text;
    EXPECT_EQ(app::ParseInteger("-3", -100, 100), -3);
    for (const char* flag : {"top_k", "tokens", "seed"}) {
        app::CommandOptions o;
        EXPECT_FALSE(app::ApplyFlag(app::Command::Generate, flag, "2.5", &o)) << flag;
    }
    EXPECT_EQ(app::ParseReal(" 1", 0, 10), std::nullopt);
    EXPECT_EQ(app::ParseReal("nan", 0, 10), std::nullopt);
    for (const char* text : {"0x10", "0x1p-3", "infinity", "1e3x"}) EXPECT_EQ(app::ParseReal(text, 0, 1e6), std::nullopt) << text;  // decimal only
    EXPECT_EQ(app::ParseReal("1.5e-3", 0, 10), 1.5e-3);
    app::CommandOptions o;
    auto s = app::ApplyFlag(app::Command::Window, "window", "4294968576x800", &o);
    ASSERT_FALSE(s);
    EXPECT_EQ(o.window.width, 1600);  // untouched, not 1280
    EXPECT_FALSE(app::ApplyFlag(app::Command::Train, "threads", "1048576", &o));
    EXPECT_FALSE(app::ApplyFlag(app::Command::Window, "frames", "1000000", &o));
    // A value in a message is cut: a megabyte of it is not echoed.
    s = app::ApplyFlag(app::Command::Export, "colormap", std::string(1 << 20, 'x'), &o);
    ASSERT_FALSE(s);
    EXPECT_LT(s.error().size(), 200u);
    s = app::ParseFlags(app::Command::Info, {"ssaviz", "info", std::string(100000, '-')}, 2, &o);
    ASSERT_FALSE(s);
    EXPECT_LT(s.error().size(), 200u);
}

TEST(ExportHeads, EmptyMeansAllAndOutOfRangeIsAnError) {
    app::ExportOptions o;
    ASSERT_TRUE(app::ResolveExportHeads(&o, 2, 3));
    EXPECT_EQ(o.layers, (std::vector<int>{0, 1}));
    EXPECT_EQ(o.heads, (std::vector<int>{0, 1, 2}));
    o.heads = {5};
    auto s = app::ResolveExportHeads(&o, 2, 3);
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("head 5 is out of range (the model has 3)"), std::string::npos) << s.error();
}

}  // namespace

// Issue 34: a key this ssaviz does not read (a typo, "map" outside "view") is a one-line warning
// naming it and where a key of that name belongs; never silence. What the writer wrote has none.
TEST(Session, UnknownKeysAreWarnedAboutByName) {
    auto s = app::SessionFromJson(json{{"ssaviz_session", 1}, {"map", "diff"}, {"split", true}, {"view", {{"zoom", 2}}}, {"colour", 1}});
    ASSERT_TRUE(s) << s.error();
    ASSERT_EQ(s->warnings.size(), 4u);
    EXPECT_EQ(s->warnings[0], "session key 'colour' is not one this ssaviz reads (ignored)");
    EXPECT_EQ(s->warnings[1], "session key 'map' is not one this ssaviz reads (ignored; did you mean 'view.map'?)");
    EXPECT_EQ(s->warnings[2], "session key 'split' is not one this ssaviz reads (ignored; did you mean 'view.split'?)");
    EXPECT_EQ(s->warnings[3], "session key 'view.zoom' is not one this ssaviz reads (ignored)");
    auto again = app::SessionFromJson(app::SessionToJson(*s));
    ASSERT_TRUE(again) << again.error();
    EXPECT_TRUE(again->warnings.empty());
    json many = {{"ssaviz_session", 1}};
    for (int k = 0; k < 100; ++k) many["key" + std::to_string(k)] = k;
    auto flood = app::SessionFromJson(many);
    ASSERT_TRUE(flood) << flood.error();
    ASSERT_EQ(flood->warnings.size(), 21u);
    EXPECT_EQ(flood->warnings.back(), "and 80 more session keys it does not read (ignored)");
}

// Batch workers (Dask's, or exports started together) check folders under one missing parent at
// once, while others make theirs: each check makes what is missing and removes what it made, and
// none may fail because another removed a folder on its way.
TEST(ExportFolder, ChecksSharingAMissingParentAllSucceed) {
    const fs::path root = fs::temp_directory_path() / ("ssaviz-folder-race-" + std::to_string(::getpid()));
    fs::remove_all(root);
    fs::create_directories(root);
    const fs::path shared = root / "shared" / "deeper";
    std::mutex mutex;
    std::vector<std::string> failures;
    std::vector<std::thread> workers;
    for (int w = 0; w < 8; ++w)
        workers.emplace_back([&, w] {
            // Half check a folder of their own, half one folder together.
            const std::string out = (shared / (w % 2 ? "same" : "step-" + std::to_string(w))).string();
            for (int k = 0; k < 400; ++k) {
                std::string failure;
                if (auto s = app::CheckExportFolder(out); !s) failure = s.error();
                if (w < 2 && k == 200)
                    if (std::error_code ec = model::MakeFolders((shared / ("kept-" + std::to_string(w))).string())) failure = ec.message();
                if (!failure.empty()) {
                    std::lock_guard<std::mutex> lock(mutex);
                    failures.push_back(failure);
                }
            }
        });
    for (std::thread& t : workers) t.join();
    EXPECT_TRUE(failures.empty()) << failures.size() << " failed, the first: " << failures.front();
    // What MakeFolders made stays; so may the folder checked together, where one check's probe
    // file was in it when another that made it removed it (an export would be about to write there).
    std::set<std::string> left;
    for (const auto& entry : fs::directory_iterator(shared)) left.insert(entry.path().filename().string());
    left.erase("same");
    EXPECT_EQ(left, (std::set<std::string>{"kept-0", "kept-1"}));
    fs::remove_all(root);
}
