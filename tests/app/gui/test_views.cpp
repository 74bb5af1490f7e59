// Every view drawn for a few frames in a real OpenGL 3.3 context (a hidden GLFW window; CTest
// runs this under Xvfb), on synthetic analyses of several sizes, with selections and modes that
// exercise each code path. A crash, a GL error or an ImGui assertion fails the test.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <tuple>

#include <gtest/gtest.h>

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include "app/core/exit_code.h"
#include "app/core/names.h"
#include "app/gui/fonts.h"
#include "app/gui/views/view_common.h"
#include "app/gui/window_state.h"
#include "app/gui/worker.h"
#include "tests/app/gui/synthetic.h"
#include "app/gui/views/view_head_table.h"
#include "app/gui/views/view_heads.h"
#include "app/gui/views/view_heatmap.h"
#include "app/gui/views/view_interventions.h"
#include "app/gui/views/view_predictions.h"
#include "app/gui/views/view_matrix.h"
#include "app/gui/views/view_temperature.h"
#include "app/gui/views/view_model.h"
#include "app/gui/views/view_checkpoint.h"
#include "app/gui/views/view_graph.h"
#include "app/gui/views/view_open.h"
#include "app/gui/views/view_sparsity.h"
#include "app/gui/views/view_text.h"
#include "model/nn/model_weights.h"
#include "app/gui/views/view_export.h"
#include "app/gui/views/view_finetune.h"
#include "viz/imgui/demo.h"

namespace {

class Views : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        ASSERT_TRUE(glfwInit()) << "no display: run under xvfb-run";
        glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
        glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
        glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
        glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
        s_window = glfwCreateWindow(1400, 900, "ssaviz views test", nullptr, nullptr);
        ASSERT_NE(s_window, nullptr) << "no OpenGL 3.3 context";
        glfwMakeContextCurrent(s_window);
        ImGui::CreateContext();
        ImGui::GetIO().IniFilename = nullptr;
        app::LoadFonts(15.0f);
        ImGui_ImplGlfw_InitForOpenGL(s_window, false);
        ImGui_ImplOpenGL3_Init("#version 330");
    }
    static void TearDownTestSuite() {
        ImGui_ImplOpenGL3_Shutdown();
        ImGui_ImplGlfw_Shutdown();
        ImGui::DestroyContext();
        glfwDestroyWindow(s_window);
        glfwTerminate();
    }

    // One frame: `draw` runs inside a full-size window, as in the app.
    template <class Draw>
    void Frame(Draw&& draw) {
        ImGui_ImplOpenGL3_NewFrame();
        ImGui_ImplGlfw_NewFrame();
        ImGui::NewFrame();
        ImGui::SetNextWindowPos(ImVec2(0, 0));
        ImGui::SetNextWindowSize(ImVec2(1400, 900));
        ImGui::Begin("test", nullptr, ImGuiWindowFlags_NoDecoration);
        draw();
        ImGui::End();
        ImGui::Render();
        ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
        EXPECT_EQ(glGetError(), static_cast<GLenum>(GL_NO_ERROR));
    }

    static GLFWwindow* s_window;
};

GLFWwindow* Views::s_window = nullptr;

app::WindowState StateWith(int L, int H, int T) {
    app::WindowState state;
    state.analysis = std::make_shared<const model::Analysis>(app::MakeSyntheticAnalysis(L, H, T, 3));
    model::ModelInfo info;
    info.dir = "/synthetic";
    info.config.n_layer = L;
    info.config.n_head = H;
    info.config.n_embd = 16 * H;
    info.config.n_positions = 2048;
    info.config.vocab_size = 50257;
    state.model = info;
    state.text = "synthetic text";
    return state;
}

// A fine-tune's base beside the synthetic analysis: another synthetic analysis's values under the
// base's names (no thumbnails or maps of the base: a synthetic analysis pools none).
void AddBase(app::WindowState* state) {
    model::Analysis a = *state->analysis;
    const model::Analysis base = app::MakeSyntheticAnalysis(a.n_layer, a.n_head, a.n_tokens, 9);
    a.comparison = model::Comparison::Base;
    a.base_label = "/models/base";
    a.metrics_base = base.metrics_compare;
    a.tau_q_base = base.tau_q_compare;
    a.tau_v_base = base.tau_v_compare;
    a.loss_base = base.loss;
    a.js_total = base.js;  // rows of the right shape (the views read shapes; the numbers are the CLI tests')
    a.js_drift = base.js;
    state->analysis = std::make_shared<const model::Analysis>(std::move(a));
}

// The views of the main window, as the app lists them.
struct MainViews {
    app::TextView text;
    app::HeatmapView heatmap;
    app::HeadsView heads;
    app::HeadTableView table;
    app::HeadMatrixView matrix;
    app::TemperatureView temperature;
    app::SparsityView sparsity;
    app::ModelView model_view;
    app::PredictionView predictions;
    app::InterventionsView interventions;

    void Draw(app::WindowState& state) {
        predictions.Draw(state);
        interventions.Draw(state);
        text.Draw(state);
        heatmap.Draw(state);
        heads.Draw(state);
        table.Draw(state);
        matrix.Draw(state);
        temperature.Draw(state);
        sparsity.Draw(state);
        model_view.Draw(state);
    }
};

TEST_F(Views, EveryViewDrawsAtSeveralSizes) {
    for (int T : {1, 2, 7, 64, 300}) {
        app::WindowState state = StateWith(2, 3, T);
        MainViews views;
        for (int frame = 0; frame < 3; ++frame) Frame([&] { views.Draw(state); });
        EXPECT_TRUE(state.regions.count("heatmap")) << "T = " << T;
        EXPECT_TRUE(state.regions.count("matrix")) << "T = " << T;
        EXPECT_TRUE(state.regions.count("next_tokens")) << "T = " << T;
        EXPECT_TRUE(state.regions.count("interventions")) << "T = " << T;
    }
}

TEST_F(Views, ModesSelectionsAndPinsAllDraw) {
    app::WindowState state = StateWith(3, 4, 40);
    app::HeatmapView heatmap;
    app::HeadsView heads;
    app::TextView text;
    app::SparsityView sparsity;
    // A base's modes too, as a session may hold them: without a base they show SSA.
    state.pinned = {{0, 1}, {2, 3, app::MapMode::Difference}, {1, 1, app::MapMode::Compare}, {0, 0}, {1, 2, app::MapMode::BaseDifference}};
    for (app::MapMode mode : {app::MapMode::Ssa, app::MapMode::Compare, app::MapMode::Difference}) {
        state.settings.grid_mode = mode == app::MapMode::Difference ? app::MapMode::Base : app::MapMode::Ssa;
        for (app::TokenColor color : {app::TokenColor::TauQ, app::TokenColor::TauV, app::TokenColor::Entropy, app::TokenColor::Spikiness,
                                      app::TokenColor::SinkMass, app::TokenColor::TauQPosition, app::TokenColor::TauQToken,
                                      app::TokenColor::Loss, app::TokenColor::LossCompare, app::TokenColor::LossDelta}) {
            for (app::TokenScope scope : {app::TokenScope::Head, app::TokenScope::LayerMean, app::TokenScope::ModelMean}) {
                state.settings.map_mode = mode;
                state.settings.token_color = color;
                state.settings.token_scope = scope;
                state.settings.log_scale = color == app::TokenColor::Entropy;
                state.settings.colormap = scope == app::TokenScope::Head ? viz::Colormap::Viridis : viz::Colormap::Magma;
                state.selected = {2, 3};
                state.query = 17;
                Frame([&] {
                    text.Draw(state);
                    heatmap.Draw(state);
                    heads.Draw(state);
                    sparsity.Draw(state);
                });
            }
        }
    }
}

// Beside a fine-tune's base every view draws its third side: the heads grid in each of the five
// modes (the base's thumbnails absent here: a synthetic analysis pools none, which must draw as
// empty), pins of the base's maps, the Table's and the Matrix's base values, the tooltips.
TEST_F(Views, ABaseIsAThirdSideInEveryView) {
    app::WindowState state = StateWith(2, 3, 24);
    AddBase(&state);
    state.pinned = {{0, 1, app::MapMode::Base}, {1, 2, app::MapMode::BaseDifference}};
    MainViews views;
    const app::TokenColor colorings[] = {app::TokenColor::LossBase, app::TokenColor::LossDeltaBase, app::TokenColor::JsTotal, app::TokenColor::JsDrift,
                                         app::TokenColor::JsDivergence};
    for (app::MapMode mode : app::kAllMapModes) {
        state.settings.grid_mode = mode;
        state.settings.token_color = colorings[static_cast<int>(mode) % std::size(colorings)];
        state.regions.clear();
        for (int frame = 0; frame < 3; ++frame) Frame([&] { views.heads.Draw(state); });
        Frame([&] { views.table.Draw(state); });
        Frame([&] { views.matrix.Draw(state); });
        Frame([&] { views.text.Draw(state); });
        for (const char* region : {"heads", "table", "matrix"}) EXPECT_TRUE(state.regions.count(region)) << region << " " << app::ToString(mode);
    }
}

// A twin shipped beside the model (which the worker found when it opened it): the Model panel's
// button and the map's "vs" chooser draw it from the state, without the file system.
TEST_F(Views, ATwinShippedBesideTheModelIsOffered) {
    app::WindowState state = StateWith(2, 2, 8);
    state.twin_beside = "/synthetic/../vanilla";
    MainViews views;
    for (int frame = 0; frame < 3; ++frame) Frame([&] { views.Draw(state); });
    EXPECT_FALSE(state.open_twin_request.has_value());  // offered, not opened
}

// Per-token losses: token t's value is entry t - 1 of each side's loss (token 0 has none), the
// delta is SSA's minus the comparison's, and an analysis without the comparison's predictions
// (layer-local) has no comparison or delta values at all.
// The window's base folder as the worker's answers come in, in the orders they can come: a base that
// does not open shows the last that did, but only once no other base is on its way.
TEST(BaseRequests, AFailedBaseShowsTheLastThatOpenedOnceNoneIsOnItsWay) {
    app::BaseRequests bases;
    EXPECT_EQ(bases.Failed(1), std::nullopt) << "an answer to no base request (a twin's) changes nothing";
    bases.Asked(1, "ft/base");
    bases.Set(1);
    bases.Asked(2, "typo");
    EXPECT_EQ(bases.Failed(2), std::optional<std::string>("ft/base"));
    // Two asked at once, the first failing before the second answers: nothing to show yet.
    bases.Asked(3, "gone");
    bases.Asked(4, "other/base");
    EXPECT_EQ(bases.Failed(3), std::nullopt);
    bases.Set(4);
    bases.Set(5);  // another comparison set (tau = 1): the base running is still the last set
    bases.Asked(6, "");  // the base beside the model, which does not open
    EXPECT_EQ(bases.Failed(6), std::optional<std::string>("other/base"));
    // Answered in the other order: the second's failure comes while the first is still on its way.
    bases.Asked(7, "first");
    bases.Asked(8, "second");
    EXPECT_EQ(bases.Failed(8), std::nullopt);
    EXPECT_EQ(bases.Failed(7), std::optional<std::string>("other/base"));
    EXPECT_EQ(bases.Failed(7), std::nullopt) << "one answer per request";
}

// Numbers in cells and read-outs keep three significant digits below 1: the Matrix tab showed
// 0.00153 and 0.00148 both as "0.001", and heads could not be ranked by their cells.
// A caption wider than its pane breaks where it says, and a piece wider than a line between its
// words but never inside "L1 H2 -0.147" (the Fine-tune tab broke it after "H2" at 1024 px).
TEST_F(Views, ACaptionKeepsAHeadWithItsNumber) {
    Frame([] {
        const std::string text = "the drift's parts of the loss: lowered it most L0 MLP -0.534, L1 H3 -0.0786; raised it most L3 H1 +0.118";
        const float word = ImGui::CalcTextSize("lowered").x;
        const std::vector<std::string> wide = app::CaptionPieces(text, ", ", 1e6f);
        EXPECT_EQ(wide, (std::vector<std::string>{"the drift's parts of the loss: lowered it most L0 MLP -0.534,",
                                                   "L1 H3 -0.0786; raised it most L3 H1 +0.118"}));
        const std::vector<std::string> narrow = app::CaptionPieces(text, ", ", word * 3.0f);
        for (const char* whole : {"L0 MLP -0.534,", "L1 H3 -0.0786;", "L3 H1 +0.118"})
            EXPECT_NE(std::find(narrow.begin(), narrow.end(), whole), narrow.end()) << whole;
        EXPECT_NE(std::find(narrow.begin(), narrow.end(), "lowered"), narrow.end()) << "other words still break";
        std::string joined;
        for (const std::string& p : narrow) joined += (joined.empty() ? "" : " ") + p;
        EXPECT_EQ(joined, text) << "nothing lost or repeated";
        const std::vector<std::string> spaces = app::CaptionPieces("at 'License' -3.1 and L2 attn", " ", word);
        EXPECT_EQ(spaces, (std::vector<std::string>{"at", "'License' -3.1", "and", "L2 attn"}));
        // A quoted piece with a leading space stays whole, its number with it (the Fine-tune tab
        // broke "' F' -0.81" into "'" and "F' -0.81"); an apostrophe inside a word opens nothing.
        const std::vector<std::string> quoted = app::CaptionPieces("at 'B' -1.06, ' F' -0.81, SSA's '  x y' 2", " ", word);
        EXPECT_EQ(quoted, (std::vector<std::string>{"at", "'B' -1.06,", "' F' -0.81,", "SSA's", "'  x y' 2"}));
    });
}

TEST(FormatNumber, KeepsThreeSignificantDigits) {
    EXPECT_EQ(app::FormatNumber(0.00153f), "0.00153");
    EXPECT_EQ(app::FormatNumber(0.00148f), "0.00148");
    EXPECT_EQ(app::FormatNumber(0.0453f), "0.0453");
    EXPECT_EQ(app::FormatNumber(0.5f), "0.500");
    EXPECT_EQ(app::FormatNumber(4.4e-4f), "4.40e-04");
    EXPECT_EQ(app::FormatNumber(0.0f), "0.000");
    EXPECT_EQ(app::FormatNumber(2.345f), "2.35");
    EXPECT_EQ(app::FormatNumber(-0.00153f), "-0.00153");
}

// The compact form turns to powers of ten where FormatNumber does, below 0.001 (it wrote .00083
// beside 4.1e-05 in one matrix).
TEST(FormatCompact, TwoDigitsAndPowersOfTenBelowAThousandth) {
    EXPECT_EQ(app::FormatCompact(0.19f), ".19");
    EXPECT_EQ(app::FormatCompact(-0.05f), "-.05");
    EXPECT_EQ(app::FormatCompact(0.0012f), ".0012");
    EXPECT_EQ(app::FormatCompact(0.00083f), "8.3e-4");
    EXPECT_EQ(app::FormatCompact(4.1e-5f), "4.1e-5");
    EXPECT_EQ(app::FormatCompact(-4.1e-5f), "-4.1e-5");
    EXPECT_EQ(app::FormatCompact(1.2e-12f), "1.2e-12");
    EXPECT_EQ(app::FormatCompact(0.0f), "0");
    EXPECT_EQ(app::FormatCompact(123.4f), "123");
    EXPECT_EQ(app::FormatCompact(99.7f), "100");
    EXPECT_EQ(app::FormatCompact(99.4f), "99");
    EXPECT_EQ(app::FormatCompact(NAN), "-");
    // A grid of thousandths and less: every cell in powers of ten.
    EXPECT_EQ(app::FormatPowerOfTen(0.0011f), "1.1e-3");
    EXPECT_EQ(app::FormatPowerOfTen(9.1e-5f), "9.1e-5");
    EXPECT_EQ(app::FormatPowerOfTen(-20.0f), "-2.0e1");
    EXPECT_EQ(app::FormatPowerOfTen(3.0f), "3.0e0");
    EXPECT_EQ(app::FormatPowerOfTen(0.0f), "0");
    EXPECT_EQ(app::FormatPowerOfTen(INFINITY), "-");
}

TEST(TokenLosses, LineUpWithTheirTokens) {
    model::Analysis a = app::MakeSyntheticAnalysis(1, 1, 12, 5);
    const std::vector<float> loss = app::TokenLosses(a, app::TokenColor::Loss);
    const std::vector<float> delta = app::TokenLosses(a, app::TokenColor::LossDelta);
    ASSERT_EQ(loss.size(), 12u);
    EXPECT_TRUE(std::isnan(loss[0]));
    for (int t = 1; t < 12; ++t) {
        EXPECT_EQ(loss[t], a.loss[t - 1]);
        EXPECT_FLOAT_EQ(delta[t], a.loss[t - 1] - a.loss_compare[t - 1]);
    }
    a.loss_compare.clear();  // the layer-local comparison
    a.top_ids_compare.clear();
    for (float v : app::TokenLosses(a, app::TokenColor::LossDelta)) EXPECT_TRUE(std::isnan(v));
}

// The prediction, what-if and strip views in every state the worker can leave them in: what-ifs
// applied and pending, a note, the heads ranking under way and done, Continue running with its
// generated tokens marked, the last token as the query (nothing after it) and a layer-local
// analysis without the comparison's predictions.
TEST_F(Views, PredictionsAndWhatIfsDrawInEveryState) {
    app::WindowState state = StateWith(3, 2, 30);
    app::TextView text;
    app::PredictionView predictions;
    app::InterventionsView interventions;
    app::HeatmapView heatmap;
    auto vocab = std::make_shared<std::vector<std::string>>();
    for (int id = 0; id < 1100; ++id) vocab->push_back(id % 3 == 0 ? " w" + std::to_string(id) : id % 3 == 1 ? "\n\t" : "\xE6");
    state.vocab = vocab;
    state.interventions = {{model::Intervention::Kind::Ablate, 1, 0, 0.0f}, {model::Intervention::Kind::Scale, 2, -1, 0.5f}};
    state.interventions_request = std::vector<model::Intervention>{{model::Intervention::Kind::TokenOnly, 0, 1, 0.0f}};
    state.notice = "dropped the what-ifs 9:9: they do not fit";
    auto impacts = std::make_shared<app::HeadImpacts>();
    impacts->baseline = 3.0f;
    impacts->total = 6;
    for (auto [l, h, loss] : {std::tuple{0, 0, 3.5f}, std::tuple{0, 1, 2.9f}, std::tuple{1, 0, 3.0f}}) {
        app::HeadImpact impact;
        impact.layer = l, impact.head = h, impact.mean_loss = loss, impact.delta = loss - impacts->baseline;
        impacts->heads.push_back(impact);
    }
    state.head_impacts = impacts;
    state.ranking_heads = true;
    state.generating = true;
    state.text = "synthetic text";
    const model::Analysis& a = *state.analysis;
    state.generated_begin = a.tokens.offsets[20].first;  // tokens 20.. came from Continue
    state.generated_prefix = std::string(a.tokens.offsets.back().second, 'x');
    state.settings.token_color = app::TokenColor::LossDelta;
    for (int query : {-1, 5, 29}) {
        state.query = query;
        for (int frame = 0; frame < 2; ++frame) Frame([&] {
            interventions.Draw(state);  // first, so that its table is on screen
            text.Draw(state);
            heatmap.Draw(state);
            predictions.Draw(state);
        });
    }
    EXPECT_TRUE(state.regions.count("head_ranking"));
    EXPECT_TRUE(state.IsGenerated(a.tokens, 20));
    EXPECT_FALSE(state.IsGenerated(a.tokens, 19));

    impacts->done = true;
    state.ranking_heads = false;
    state.generating = false;
    model::Analysis local = app::MakeSyntheticAnalysis(3, 2, 30, 3);
    local.comparison = model::Comparison::LayerLocal;
    local.loss_compare.clear();
    local.rank_compare.clear();
    local.top_ids_compare.clear();
    local.top_probs_compare.clear();
    state.analysis = std::make_shared<const model::Analysis>(std::move(local));
    for (int frame = 0; frame < 2; ++frame) Frame([&] {
        text.Draw(state);
        predictions.Draw(state);
        interventions.Draw(state);
    });
    EXPECT_TRUE(state.regions.count("next_tokens"));

    // Beside a fine-tune's base, a third column; a base whose predictions fall short of the query is
    // left out, never read past its end.
    for (size_t keep : {size_t{30}, size_t{12}}) {
        model::Analysis with_base = app::MakeSyntheticAnalysis(3, 2, 30, 3);
        const model::Analysis base = app::MakeSyntheticAnalysis(3, 2, 30, 4);
        with_base.comparison = model::Comparison::Base;
        with_base.base_label = "/models/base";
        with_base.loss_base = base.loss;
        with_base.rank_base = base.rank;
        with_base.top_ids_base.assign(base.top_ids.begin(), base.top_ids.begin() + keep * model::Analysis::kTopK);
        with_base.top_probs_base.assign(base.top_probs.begin(), base.top_probs.begin() + keep * model::Analysis::kTopK);
        state.analysis = std::make_shared<const model::Analysis>(std::move(with_base));
        for (int query : {-1, 5, 20}) {
            state.query = query;
            state.regions.clear();
            Frame([&] { predictions.Draw(state); });
            EXPECT_TRUE(state.regions.count("next_tokens")) << keep << " " << query;
        }
    }
}

// The heads ranking as a grid of parts token by token (the What-ifs tab's "temperatures by token"
// and the drift's along the layers or each part alone): drawn while the text shown is the one ranked, for a few heads and for a GPT-2
// small's 144 over 200 tokens, partly measured or not at all; the drift grid asked for
// without a base shows the temperatures'.
TEST_F(Views, TheRankingGridShowsWhereOnTheText) {
    for (const auto& shape : {std::tuple{3, 2, 30}, std::tuple{12, 12, 200}}) {
        const int L = std::get<0>(shape), H = std::get<1>(shape), T = std::get<2>(shape);  // named: lambdas capture them (clang)
        app::WindowState state = StateWith(L, H, T);
        app::InterventionsView interventions;
        auto impacts = std::make_shared<app::HeadImpacts>();
        impacts->ids = state.analysis->tokens.ids;
        impacts->baseline = 3.0f;
        impacts->total = L * H;
        auto losses = [&](float shift) {
            std::vector<float> v(T - 1);
            for (int t = 0; t < T - 1; ++t) v[t] = 3.0f + shift * std::sin(0.37f * t);
            return std::make_shared<const std::vector<float>>(std::move(v));
        };
        impacts->baseline_tokens = impacts->drift_baseline_tokens = losses(0.0f);
        for (int k = 0; k < L * H - 1; ++k) {  // the last head not measured yet
            app::HeadImpact h;
            h.layer = k / H, h.head = k % H, h.mean_loss = 3.0f, h.delta = 0.0f;
            h.tokens = h.tokens_from_base = losses(0.1f * (k % 5 - 2));
            impacts->heads.push_back(h);
        }
        auto draw = [&](app::RankingView view) {
            state.settings.ranking = view;
            state.regions.clear();
            for (int frame = 0; frame < 2; ++frame) Frame([&] { interventions.Draw(state); });
            return state.regions.count("ranking_grid") ? std::optional(state.regions["ranking_grid"]) : std::nullopt;
        };
        state.head_impacts = impacts;
        const auto heads = draw(app::RankingView::Tokens);
        ASSERT_TRUE(heads) << L << "x" << H;
        EXPECT_GT(heads->w, 100.0f);
        EXPECT_TRUE(draw(app::RankingView::Drift)) << "no drift measured: the temperatures' grid";
        EXPECT_FALSE(state.regions.count("head_ranking")) << "the grid instead of the table";
        EXPECT_TRUE(draw(app::RankingView::Table) == std::nullopt && state.regions.count("head_ranking"));

        // Beside a base, the drift's path (embeddings, each layer's attention and MLP) and every weight's.
        impacts->drift = true;
        impacts->embeddings_from_base_tokens = impacts->all_from_base_tokens = losses(0.3f);
        for (int k = 0; k < 2 * L; ++k) impacts->path_from_base_tokens.push_back(losses(0.05f * k));
        state.head_impacts = std::make_shared<const app::HeadImpacts>(*impacts);
        const auto drift = draw(app::RankingView::Drift);
        ASSERT_TRUE(drift);
        if (2 * L + 2 < L * H) {
            EXPECT_LT(drift->h, heads->h) << "2 L + 2 rows against L H";
        }
        // Each part alone: the heads' rows, each layer's attention and MLP, the embeddings', every weight's.
        const app::TokenPartsGrid parts = app::DriftPartsGrid(*state.head_impacts, L, H);
        ASSERT_EQ(parts.rows.size(), static_cast<size_t>(L * H + 2 * L + 2));
        EXPECT_EQ(parts.rows[1], H > 1 ? "L0 H1" : "L1 H0");
        EXPECT_EQ(parts.rows[L * H + 1], "L0 MLP");
        EXPECT_EQ(parts.rows.back(), "every weight");
        ASSERT_EQ(parts.values.size(), parts.rows.size() * (T - 1));
        EXPECT_NEAR(parts.values[static_cast<size_t>(T - 1) + 7], (*impacts->drift_baseline_tokens)[7] - (*impacts->heads[1].tokens_from_base)[7], 1e-6);
        EXPECT_TRUE(std::isnan(parts.values[static_cast<size_t>(L * H - 1) * (T - 1)])) << "the head not measured";
        EXPECT_TRUE(std::isnan(parts.values[static_cast<size_t>(L * H) * (T - 1)])) << "no attention measured";
        if (L * H + 2 * L + 2 <= 48) {
            const auto alone = draw(app::RankingView::DriftParts);
            ASSERT_TRUE(alone);
            EXPECT_GT(alone->h, drift->h) << "L H + 2 L + 2 rows against 2 L + 2";
        } else {
            EXPECT_TRUE(draw(app::RankingView::DriftParts));
        }

        // Measured on another text, or nothing measured yet: a note, no grid.
        auto other = std::make_shared<app::HeadImpacts>(*impacts);
        other->ids.back() += 1;
        state.head_impacts = other;
        EXPECT_FALSE(draw(app::RankingView::Tokens));
        other = std::make_shared<app::HeadImpacts>(*impacts);
        other->heads.clear();
        other->drift = false;
        state.head_impacts = other;
        EXPECT_FALSE(draw(app::RankingView::Tokens));
        EXPECT_FALSE(draw(app::RankingView::Drift));
        EXPECT_FALSE(draw(app::RankingView::DriftParts));
    }
}

// A new what-if replaces an earlier one on the same head (or the same whole layer) and keeps the rest.
TEST(WhatIfs, ANewOneReplacesTheOneOnTheSameHead) {
    using K = model::Intervention::Kind;
    std::vector<model::Intervention> list = {{K::Ablate, 0, 1, 0.0f}, {K::PositionOnly, 1, -1, 0.0f}};
    list = app::WithIntervention(list, {K::TokenOnly, 0, 1, 0.0f});
    ASSERT_EQ(list.size(), 2u);
    EXPECT_EQ(model::FormatInterventions(list), "1:*=pos,0:1=tok");
    list = app::WithIntervention(list, {K::Scale, 1, 0, 2.0f});  // one head of a layer ablated whole: both kept
    EXPECT_EQ(model::FormatInterventions(list), "1:*=pos,0:1=tok,1:0=x2");
}

// Generated text stays marked while the text still starts with what Continue left; an edit
// before its end forgets it, typing after it does not.
TEST(Generated, AnEditBeforeTheEndForgetsTheMarks) {
    app::WindowState state;
    state.text = "Hello world";
    state.generated_begin = 5;
    state.generated_prefix = state.text;
    model::Tokenization t;
    t.offsets = {{0, 5}, {5, 11}};
    EXPECT_FALSE(state.IsGenerated(t, 0));
    EXPECT_TRUE(state.IsGenerated(t, 1));
    state.text += "!";
    state.ForgetGeneratedIfEdited();
    EXPECT_TRUE(state.IsGenerated(t, 1));
    state.text = "Hello World!";
    state.ForgetGeneratedIfEdited();
    EXPECT_FALSE(state.IsGenerated(t, 1));
}

// The selected head as SSA | comparison | difference: three maps, each with its region, zoomed
// together; on a model with no comparison the split falls back to the one SSA map.
TEST_F(Views, SplitViewDrawsThreeMaps) {
    app::WindowState state = StateWith(2, 2, 50);
    app::HeatmapView heatmap;
    state.settings.split = true;
    state.settings.map_view.zoom = 2.0f;
    state.query = 30;
    for (int frame = 0; frame < 2; ++frame) Frame([&] { heatmap.Draw(state); });
    for (const char* name : {"heatmap_ssa", "heatmap_compare", "heatmap_diff"}) EXPECT_TRUE(state.regions.count(name)) << name;
    const app::Rect ssa = state.regions["heatmap_ssa"], diff = state.regions["heatmap_diff"];
    EXPECT_FLOAT_EQ(ssa.w, diff.w);
    EXPECT_GT(diff.x, ssa.x + 2 * ssa.w);  // side by side, left to right
    EXPECT_GT(ssa.w, 100.0f);

    model::Analysis no_compare = app::MakeSyntheticAnalysis(1, 1, 10, 4);
    no_compare.compare_label.clear();
    state.analysis = std::make_shared<const model::Analysis>(std::move(no_compare));
    state.ClampSelection();
    state.regions.clear();
    Frame([&] { heatmap.Draw(state); });
    EXPECT_TRUE(state.regions.count("heatmap_ssa"));
    EXPECT_FALSE(state.regions.count("heatmap_diff"));
}

// Real model shapes: 12 x 12, 24 x 16 and 22 x 32 heads in a pane as narrow as the window's right one. The
// matrix keeps every cell wide enough for a number (at 22 x 32 it fits the pane without them
// unless asked) and the grid keeps thumbnails at 40 px (both scroll instead of shrinking).
TEST_F(Views, ManyHeadsStayReadable) {
    for (auto [L, H] : {std::pair{12, 12}, std::pair{24, 16}, std::pair{22, 32}}) {
        app::WindowState state = StateWith(L, H, 24);
        app::HeadMatrixView matrix;
        app::HeadsView heads;
        state.selected = {L - 1, H - 1};
        auto in_pane = [&](auto&& draw) {
            Frame([&] {
                ImGui::BeginChild("pane", ImVec2(420, 800));
                draw();
                ImGui::EndChild();
            });
        };
        for (const app::HeadValue& v : app::HeadValues()) {
            state.settings.matrix_metric = v.key;
            in_pane([&] { matrix.Draw(state); });
        }
        in_pane([&] { heads.Draw(state); });
        ASSERT_TRUE(state.regions.count("matrix_cell"));
        ASSERT_TRUE(state.regions.count("heads_cell"));
        const app::Rect cell = state.regions["matrix_cell"];
        const float number_w = ImGui::CalcTextSize("-.055").x;
        // Numbers in the cells, or (a 22 x 32 model) the whole matrix in the pane without them.
        if (H == 32) EXPECT_LE(cell.w * H, 420.0f) << L << " x " << H << ": the whole matrix should fit the pane";
        else EXPECT_GE(cell.w, number_w) << L << " x " << H;
        EXPECT_GE(cell.h, ImGui::GetTextLineHeight()) << L << " x " << H << ": row labels would overlap";
        EXPECT_GE(state.regions["heads_cell"].w, 40.0f) << L << " x " << H;
        EXPECT_LE(state.regions["heads"].w, 420.0f);  // the visible part fits the pane; the rest scrolls
        EXPECT_LE(state.regions["matrix"].w, 420.0f);
        matrix.ShowNumbers(true);  // the checkbox: numbers again, and the matrix scrolls
        in_pane([&] { matrix.Draw(state); });
        EXPECT_GE(state.regions["matrix_cell"].w, number_w) << L << " x " << H;
    }
}

// Go to / find: the next token holding the text in the text's order, within a token or across
// tokens, round past the end; a label's form ("\n") after.
TEST(FindToken, GoesThroughTheTextInItsOrder) {
    const std::vector<std::string> pieces = {" The", " war", "r", "ant", " program", " ra", "\n"};
    const std::vector<std::string> labels = {" The", " war", "r", "ant", " program", " ra", "\\n"};
    const int T = static_cast<int>(pieces.size());
    int at = -1;
    std::vector<int> visits;
    for (int k = 0; k < 4; ++k) visits.push_back(at = app::FindToken(pieces, labels, T, "ra", at));
    EXPECT_EQ(visits, (std::vector<int>{2, 4, 5, 2}));  // war|r|ant (where it starts), then ' program', ' ra', round again
    EXPECT_EQ(app::FindToken(pieces, labels, T, "warrant", -1), 1);
    EXPECT_EQ(app::FindToken(pieces, labels, T, "\\n", -1), 6);  // the newline as its label shows it
    EXPECT_EQ(app::FindToken(pieces, labels, T, "zzz", 3), -1);
}

// A paste loses the C0 controls ImGui's editor drops (all but tab and newline): the window says
// how many and which, so that the text it analyses is not taken for the clipboard's.
TEST(PasteNotice, NamesWhatTheEditorDrops) {
    EXPECT_EQ(app::PasteNotice("plain text,\ttabs\nand lines \xE4\xBD\xA0"), "");
    EXPECT_EQ(app::PasteNotice("a\x01" "b\x1B[0m"), "the paste left out 2 control characters (U+0001, U+001B): the editor holds tab and newline only "
                                                   "(--text-file keeps every character)");
    EXPECT_EQ(app::PasteNotice("line\r\n"), "the paste left out 1 carriage return: the editor holds tab and newline only (--text-file keeps every character)");
    const std::string many = app::PasteNotice(std::string(9, '\x07') + "\r\r");
    EXPECT_NE(many.find("9 control characters (U+0007, U+0007, U+0007, U+0007, ...) and 2 carriage returns"), std::string::npos) << many;
}

// Tokens that split a UTF-8 character (byte-level BPE on Chinese) show the whole character with
// their part, instead of byte escapes.
TEST(TokenLabels, GroupSplitCharacters) {
    model::Tokenization t;
    t.pieces = {" \xE6\xB3\xB3", "\xE6", "\xB3\xB3", "ok", "\xF0\x9F", "\x98\x80"};
    const std::vector<std::string> labels = app::TokenLabels(t);
    ASSERT_EQ(labels.size(), 6u);
    EXPECT_EQ(labels[0], " \xE6\xB3\xB3");        // a whole character stays as it is
    EXPECT_EQ(labels[1], "\xE6\xB3\xB3 1/2");     // 泳 split over two tokens
    EXPECT_EQ(labels[2], "\xE6\xB3\xB3 2/2");
    EXPECT_EQ(labels[3], "ok");
    EXPECT_EQ(labels[4], "\xF0\x9F\x98\x80 1/2");  // an emoji
    EXPECT_EQ(labels[5], "\xF0\x9F\x98\x80 2/2");
    model::Tokenization cut;
    cut.pieces = {"a", "\xE6"};  // a character that never completes keeps its escape
    EXPECT_EQ(app::TokenLabels(cut)[1], "\\xE6");
    // What is not a character by model/text/utf8.h's rule is escaped, never passed through raw:
    // an overlong '/', an encoded surrogate.
    EXPECT_EQ(app::TokenLabel("\xC0\xAF"), "\\xC0\\xAF");
    EXPECT_EQ(app::TokenLabel("a\xED\xA0\x80"), "a\\xED\\xA0\\x80");
    // DEL, a C1 control and a bidirectional override are shown, not obeyed (U+0085 drew nothing).
    EXPECT_EQ(app::TokenLabel("a\x7F" "b\xC2\x85" "c\xE2\x80\xAE" "d"), "a\\x7Fb\\u0085c\\u202Ed");
    // A zero-width space or a byte order mark named, not an empty label.
    EXPECT_EQ(app::TokenLabel("\xE2\x80\x8B"), "\\u200B");
    EXPECT_EQ(app::TokenLabel("x\xEF\xBB\xBF"), "x\\uFEFF");
}

TEST_F(Views, NoAnalysisYetDrawsPlaceholders) {
    app::WindowState state;
    MainViews views;
    Frame([&] { views.Draw(state); });
    state.error = "model folder 'x' does not exist";
    Frame([&] { views.Draw(state); });
}

TEST_F(Views, WindowsAndDialogsDraw) {
    app::WindowState state = StateWith(1, 2, 5);
    state.show_help = true;
    state.show_open_dialog = true;
    app::HelpView help;
    app::OpenDialog open;
    bool demo = true;
    for (int frame = 0; frame < 3; ++frame) {
        Frame([&] {
            help.Draw(state);
            open.Draw(state);
            viz::ShowDemoWindow(&demo);
        });
    }
}

// The open dialog opens what it was shown for: a model folder as the model, the twin or the base, a
// run's folder of checkpoints as a run; Enter opens the selection, and a folder of the wrong kind
// opens nothing (a run's folder is no model, a model folder no run).
// A recent-models list over a megabyte is read from its start, and the next model opened goes on
// top of it (it was read as empty and replaced with the one model).
TEST(RecentModels, ALongListKeepsItsFirstEntries) {
    namespace fs = std::filesystem;
    const fs::path config = fs::path(SSAVIZ_TEST_OUT) / "views_recent";
    fs::remove_all(config);
    fs::create_directories(config / "ssaviz");
    std::ofstream(config / "ssaviz" / "recent.txt") << "/models/a\n/models/b\n" << std::string(1200000, 'x') << "\n/models/c\n";
    const char* was = std::getenv("XDG_CONFIG_HOME");
    const std::string before = was ? was : "";
    ::setenv("XDG_CONFIG_HOME", config.c_str(), 1);
    std::vector<std::string> recent = app::LoadRecentModels();
    EXPECT_EQ(recent, (std::vector<std::string>{"/models/a", "/models/b"})) << "the first megabyte's whole lines";
    app::RememberRecentModel("/models/d", &recent);
    EXPECT_EQ(app::LoadRecentModels(), (std::vector<std::string>{"/models/d", "/models/a", "/models/b"}));
    if (was) ::setenv("XDG_CONFIG_HOME", before.c_str(), 1);
    else ::unsetenv("XDG_CONFIG_HOME");
}

TEST_F(Views, OpenDialogOpensWhatItWasShownFor) {
    namespace fs = std::filesystem;
    const fs::path root = fs::path(SSAVIZ_TEST_OUT) / "views_open";
    fs::remove_all(root);
    fs::create_directories(root / "run");
    fs::create_directories(root / "base");
    model::ModelConfig c;
    c.n_layer = c.n_head = 1;
    c.n_embd = 8;
    c.n_positions = 16;
    c.vocab_size = 32;
    ASSERT_TRUE(model::SaveModelFolder(model::RandomSsaGpt(c, 5), (root / "base").string()).ok());
    for (const char* step : {"iter-000200-ckpt.pth", "iter-000100-ckpt.pth"}) std::ofstream(root / "run" / step) << "x";  // named as steps
    const std::string base = fs::absolute(root / "base").lexically_normal().string();
    const std::string run = fs::absolute(root / "run").lexically_normal().string();

    // Shows the dialog for `purpose`, goes to `dir` and presses Enter.
    auto open_with_enter = [&](app::WindowState& state, app::OpenPurpose purpose, const std::string& dir) {
        app::OpenDialog dialog;
        state.show_open_dialog = false;
        Frame([&] { dialog.Draw(state); });  // closes one an earlier test left open (one ImGui context)
        state.ShowOpenDialog(purpose);
        Frame([&] { dialog.Draw(state); });  // appears from the next frame on
        dialog.NavigateTo(dir);
        Frame([&] { dialog.Draw(state); });
        ImGuiIO& io = ImGui::GetIO();
        io.KeysDown[GLFW_KEY_ENTER] = true;
        Frame([&] { dialog.Draw(state); });
        io.KeysDown[GLFW_KEY_ENTER] = false;
        Frame([&] { dialog.Draw(state); });
        if (state.show_open_dialog) {  // not opened: closed as Escape would, for the next one
            state.show_open_dialog = false;
            Frame([&] { dialog.Draw(state); });
        }
    };
    {
        app::WindowState state = StateWith(1, 1, 4);
        open_with_enter(state, app::OpenPurpose::Base, base);
        EXPECT_EQ(state.open_base_request.value_or("(none)"), base);
        EXPECT_FALSE(state.open_model_request || state.open_twin_request || state.open_run_request);
        EXPECT_FALSE(state.show_open_dialog) << "it closes once it opened something";
    }
    {
        app::WindowState state = StateWith(1, 1, 4);
        open_with_enter(state, app::OpenPurpose::Run, run);
        EXPECT_EQ(state.open_run_request.value_or("(none)"), run);
        EXPECT_FALSE(state.open_model_request || state.open_twin_request || state.open_base_request);
    }
    {
        app::WindowState state = StateWith(1, 1, 4);
        open_with_enter(state, app::OpenPurpose::Twin, base);
        EXPECT_EQ(state.open_twin_request.value_or("(none)"), base);
        open_with_enter(state, app::OpenPurpose::Model, base);
        EXPECT_EQ(state.open_model_request.value_or("(none)"), base);
    }
    {
        app::WindowState state = StateWith(1, 1, 4);
        open_with_enter(state, app::OpenPurpose::Run, base);  // a model folder holds no checkpoints named as steps
        open_with_enter(state, app::OpenPurpose::Model, run);  // nor is a run's folder a model
        open_with_enter(state, app::OpenPurpose::Base, run);
        EXPECT_FALSE(state.open_model_request || state.open_twin_request || state.open_base_request || state.open_run_request);
    }
    fs::remove_all(root);
}

// A lens kept is the shown one's while the text, the model, the comparison and the base are the
// same: another base chosen under the same comparison (File > Compare with a base model...) makes
// it stale, as another text does.
TEST(Lens, AnotherBaseMakesTheLensKeptStale) {
    app::WindowState state = StateWith(1, 2, 6);
    AddBase(&state);
    auto lens = std::make_shared<app::LensPair>();
    lens->ids = state.analysis->tokens.ids;
    lens->model_dir = state.model->dir;
    lens->compare_label = app::LensKey(*state.analysis);
    state.lens = lens;
    EXPECT_EQ(app::CurrentLens(state), lens.get());
    model::Analysis other_base = *state.analysis;
    other_base.base_label = "/models/another-base";
    state.analysis = std::make_shared<const model::Analysis>(other_base);
    EXPECT_EQ(app::CurrentLens(state), nullptr) << "the lens of another base";
    other_base.base_label = "/models/base";
    other_base.tokens.ids.back() += 1;
    state.analysis = std::make_shared<const model::Analysis>(other_base);
    EXPECT_EQ(app::CurrentLens(state), nullptr) << "the lens of another text";
}

// The checkpoint dialog asks only where the loader would take the shape from the tensors and they
// leave something open (model::ShapeSourceOf, then InferConfig): here tau_q's position form. It
// opens the files once, when asked; drawing and re-inferring work on what it holds (the folder is
// gone by then).
TEST_F(Views, CheckpointDialogAsksOnlyWhatTheTensorsCannotTell) {
    namespace fs = std::filesystem;
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/views_checkpoint";
    fs::remove_all(dir);
    fs::create_directories(dir);
    model::ModelConfig c;
    c.n_layer = c.n_head = 2;
    c.n_embd = 16;
    c.n_positions = 32;
    c.vocab_size = 64;
    c.query = {model::PositionForm::Sigmoid, model::TokenForm::Shared, model::Combine::Sum};
    ASSERT_TRUE(model::SaveModelFolder(model::RandomSsaGpt(c, 3), dir).ok());
    app::CheckpointDialog dialog;
    EXPECT_FALSE(dialog.Ask(dir, {})) << "config.json says the shape";
    fs::remove(dir + "/config.json");
    model::ConfigHints told;
    told.query = c.query;
    EXPECT_FALSE(dialog.Ask(dir, told)) << "the hints say what the tensors cannot";
    EXPECT_FALSE(dialog.Ask(dir + "/missing", {})) << "the worker reports a missing model";
    ASSERT_TRUE(dialog.Ask(dir, {}));
    EXPECT_TRUE(dialog.Showing());
    fs::remove_all(dir);
    app::WindowState state = StateWith(1, 2, 5);
    for (int frame = 0; frame < 3; ++frame) Frame([&] { dialog.Draw(state); });
    EXPECT_TRUE(state.regions.count("checkpoint")) << "the dialog is drawn";
}

// A session without export.out (or with "") leaves the dialog its folder, ./ssaviz-export: it showed
// an empty field and refused to write.
TEST(ExportDialog, ASessionWithoutAnOutputFolderKeepsTheDefault) {
    app::ExportDialog dialog;
    app::ExportOptions options;
    options.out_dir = "";
    dialog.SetOptions(options);
    EXPECT_EQ(dialog.Options().out_dir, (std::filesystem::current_path() / "ssaviz-export").string());
    options.out_dir = "/somewhere/else";
    dialog.SetOptions(options);
    EXPECT_EQ(dialog.Options().out_dir, "/somewhere/else");
}

// The dialog's folder inside the open run (or its compare run) is refused, as export --out and
// --export-to refuse it: ./ssaviz-export of a window started in the run's folder became a step.
TEST_F(Views, TheExportDialogRefusesAFolderInsideTheOpenRun) {
    const std::string run = std::string(SSAVIZ_TEST_OUT) + "/dialog_run";
    std::filesystem::remove_all(run);
    std::filesystem::create_directories(run);
    app::WindowState state = StateWith(1, 2, 5);
    app::ExportDialog dialog;
    app::ExportOptions options;
    for (const bool compare_run : {false, true}) {
        state.run_dir = compare_run ? "" : run;
        state.compare_run_dir = compare_run ? run : "";
        options.out_dir = run + "/ssaviz-export";
        dialog.SetOptions(options);
        EXPECT_FALSE(dialog.Start(state));
        EXPECT_NE(dialog.Error().find("is inside the run folder"), std::string::npos) << dialog.Error();
        EXPECT_EQ(dialog.ErrorExit(), app::kExitUsage);
        EXPECT_FALSE(std::filesystem::exists(run + "/ssaviz-export"));
    }
}

// Every token colouring is offered where the analysis holds it (the losses with predictions, the
// comparison's loss with the comparison's), and the export dialog shows and keeps each one as its
// highlight (it offered 5 of the 10 and picked by the enum's index, so `loss` showed as nothing).
TEST_F(Views, EveryTokenColoringIsOfferedAndKept) {
    app::WindowState state = StateWith(2, 2, 12);
    EXPECT_EQ(app::OfferedColorings(state.analysis.get()).size(), app::TokenColorings().size() - 4) << "the base's four need a base";
    EXPECT_EQ(app::OfferedColorings(nullptr).size(), app::TokenColorings().size());
    model::Analysis local = *state.analysis;  // the layer-local comparison: no predictions of its own
    local.loss_compare.clear();
    local.top_ids_compare.clear();
    const std::vector<app::TokenColor> offered = app::OfferedColorings(&local);
    EXPECT_EQ(offered.size(), app::TokenColorings().size() - 6);
    for (app::TokenColor c : {app::TokenColor::LossCompare, app::TokenColor::LossDelta})
        EXPECT_EQ(std::count(offered.begin(), offered.end(), c), 0) << app::ToString(c);
    AddBase(&state);
    EXPECT_EQ(app::OfferedColorings(state.analysis.get()).size(), app::TokenColorings().size());

    app::ExportDialog dialog;
    app::TextView text;
    dialog.Show(state);
    for (const app::TokenColoring& c : app::TokenColorings()) {
        app::ExportOptions options = dialog.Options();
        options.figures.highlight = c.id;
        options.png = options.svg = false;  // no preview to rasterise: the settings are what is drawn here
        dialog.SetOptions(options);
        state.settings.token_color = c.id;
        for (int frame = 0; frame < 2; ++frame) Frame([&] {
                dialog.Draw(state);
                text.Draw(state);
            });
        EXPECT_EQ(dialog.Options().figures.highlight, c.id) << c.key;
        EXPECT_EQ(state.settings.token_color, c.id) << c.key;
    }
}

// The heads grid's badge and the matrix take every head value of the catalogue on every side, and
// the Table tab lists them all (most hidden at first).
TEST_F(Views, EveryHeadValueDraws) {
    app::WindowState state = StateWith(2, 3, 16);
    app::HeadsView heads;
    app::HeadMatrixView matrix;
    app::HeadTableView table;
    Frame([&] { table.Draw(state); });
    const app::MapMode modes[] = {app::MapMode::Ssa, app::MapMode::Compare, app::MapMode::Difference};
    for (const app::HeadValue& v : app::HeadValues()) {
        state.settings.grid_metric = state.settings.matrix_metric = v.key;
        state.settings.grid_mode = modes[v.index % 3];
        Frame([&] {
            heads.Draw(state);
            matrix.Draw(state);
        });
    }
    EXPECT_TRUE(state.regions.count("table"));
}

// With a base, a head's JS is one colour in the Matrix and the Fine-tune tab: the three JS (the
// temperatures' part, the drift, the whole change) on one scale from 0 to the largest of them
// (the Matrix drew each on its own largest head's, so one value was yellow there and dark here).
TEST_F(Views, AHeadsJsIsOneColourInTheMatrixAndTheFineTuneTab) {
    app::WindowState state = StateWith(2, 3, 16);
    AddBase(&state);
    model::Analysis a = *state.analysis;
    a.js_drift = app::MakeSyntheticAnalysis(2, 3, 16, 11).js;  // the three apart
    state.analysis = std::make_shared<const model::Analysis>(std::move(a));
    const model::Decomposition d = model::Decompose(*state.analysis);
    float most = 0;
    for (const std::vector<float>* part : {&d.js_temperature, &d.js_drift, &d.js_total})
        for (float v : *part) most = std::max(most, v);
    ASSERT_GT(most, 0.0f);
    app::FineTuneView finetune;
    Frame([&] { finetune.Draw(state); });
    ASSERT_TRUE(state.scales.count("finetune_matrix"));
    EXPECT_EQ(state.scales["finetune_matrix"].min, 0.0f);
    EXPECT_EQ(state.scales["finetune_matrix"].max, most);
    app::HeadMatrixView matrix;
    for (const char* key : {"js_divergence", "js_total", "js_drift"}) {
        state.settings.matrix_metric = key;
        state.scales.erase("matrix");
        Frame([&] { matrix.Draw(state); });
        ASSERT_TRUE(state.scales.count("matrix")) << key;
        EXPECT_EQ(state.scales["matrix"].min, 0.0f) << key;
        EXPECT_EQ(state.scales["matrix"].max, most) << key;
    }
    // Without a base, JS to the comparison from 0 to its largest head (another scale: nothing to share).
    state = StateWith(2, 3, 16);
    state.settings.matrix_metric = "js_divergence";
    Frame([&] { matrix.Draw(state); });
    EXPECT_EQ(state.scales["matrix"].min, 0.0f);
    float own = 0;
    for (float v : model::HeadRowMeans(state.analysis->js, *state.analysis)) own = std::max(own, v);
    EXPECT_FLOAT_EQ(state.scales["matrix"].max, own);
}

// With a run's timeline (the Run tab's), the matrix offers each head's steps to sparsity (their
// numbers: RunTimeline.StepsToSparsityAndATokensTauQ); without one the key falls back to a metric.
TEST_F(Views, MatrixShowsARunsStepsToSparsity) {
    app::WindowState state = StateWith(2, 3, 16);
    auto track = std::make_shared<app::RunTrack>();
    track->timeline.label = "run";
    track->compare.emplace();
    track->compare->label = "compare run";
    for (int k = 0; k < 3; ++k) {
        const model::Analysis a = app::MakeSyntheticAnalysis(2, 3, 16, 5 + k);
        track->timeline.Add(100 * k, "step", a);
        track->compare->Add(100 * k, "step", a);
    }
    state.timeline = track;
    state.settings.matrix_metric = "steps_to_sparsity";
    app::HeadMatrixView matrix;
    for (int frame = 0; frame < 2; ++frame) Frame([&] { matrix.Draw(state); });
    EXPECT_TRUE(state.regions.count("matrix"));
    EXPECT_EQ(state.settings.matrix_metric, "steps_to_sparsity");
    state.timeline.reset();
    Frame([&] { matrix.Draw(state); });
    EXPECT_TRUE(state.regions.count("matrix")) << "without a run the matrix shows a metric";
}

// The graph window on a 16-token analysis (the graph example's shape) and on any other, which
// gets a note instead of maps.
TEST_F(Views, GraphWindowDraws) {
    app::GraphView graph;
    for (int tokens : {16, 5}) {
        app::WindowState state = StateWith(1, 1, tokens);
        state.show_graph = true;
        for (int frame = 0; frame < 2; ++frame) Frame([&] { graph.Draw(state); });
        EXPECT_EQ(state.regions.count("graph"), tokens == 16 ? 1u : 0u);
    }
}

TEST_F(Views, ANewAnalysisWithFewerHeadsIsSafe) {
    app::WindowState state = StateWith(4, 4, 20);
    app::HeatmapView heatmap;
    app::HeadsView heads;
    state.selected = {3, 3};
    state.pinned = {{3, 3}};
    Frame([&] { heatmap.Draw(state); heads.Draw(state); });
    state.analysis = std::make_shared<const model::Analysis>(app::MakeSyntheticAnalysis(1, 2, 6, 9));
    state.ClampSelection();
    EXPECT_EQ(state.selected.layer, 0);
    EXPECT_EQ(state.selected.head, 1);
    EXPECT_TRUE(state.pinned.empty());
    Frame([&] { heatmap.Draw(state); heads.Draw(state); });
}

}  // namespace
