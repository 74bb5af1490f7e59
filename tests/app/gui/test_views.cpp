// Every view drawn for a few frames in a real OpenGL 3.3 context (a hidden GLFW window; CTest
// runs this under Xvfb), on synthetic analyses of several sizes, with selections and modes that
// exercise each code path. A crash, a GL error or an ImGui assertion fails the test.
#include <gtest/gtest.h>

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include "app/gui/fonts.h"
#include "app/core/state.h"
#include "tests/app/gui/synthetic.h"
#include "app/gui/view_heads.h"
#include "app/gui/view_heatmap.h"
#include "app/gui/view_model.h"
#include "app/gui/view_graph.h"
#include "app/gui/view_open.h"
#include "app/gui/view_sparsity.h"
#include "app/gui/view_text.h"
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

app::AppState StateWith(int L, int H, int T) {
    app::AppState state;
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

// The views of the main window, as the app lists them.
struct MainViews {
    app::TextView text;
    app::HeatmapView heatmap;
    app::HeadsView heads;
    app::HeadTableView table;
    app::SparsityView sparsity;
    app::ModelView model_view;

    void Draw(app::AppState& state) {
        text.Draw(state);
        heatmap.Draw(state);
        heads.Draw(state);
        table.Draw(state);
        sparsity.Draw(state);
        model_view.Draw(state);
    }
};

TEST_F(Views, EveryViewDrawsAtSeveralSizes) {
    for (int T : {1, 2, 7, 64, 300}) {
        app::AppState state = StateWith(2, 3, T);
        MainViews views;
        for (int frame = 0; frame < 3; ++frame) Frame([&] { views.Draw(state); });
        EXPECT_TRUE(state.regions.count("heatmap")) << "T = " << T;
    }
}

TEST_F(Views, ModesSelectionsAndPinsAllDraw) {
    app::AppState state = StateWith(3, 4, 40);
    app::HeatmapView heatmap;
    app::HeadsView heads;
    app::TextView text;
    app::SparsityView sparsity;
    state.pinned = {{0, 1}, {2, 3}};
    for (app::MapMode mode : {app::MapMode::Ssa, app::MapMode::Compare, app::MapMode::Difference}) {
        for (app::TokenColor color : {app::TokenColor::TauQ, app::TokenColor::TauV, app::TokenColor::Entropy,
                                      app::TokenColor::Spikiness, app::TokenColor::SinkMass}) {
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

TEST_F(Views, NoAnalysisYetDrawsPlaceholders) {
    app::AppState state;
    MainViews views;
    Frame([&] { views.Draw(state); });
    state.error = "model folder 'x' does not exist";
    Frame([&] { views.Draw(state); });
}

TEST_F(Views, WindowsAndDialogsDraw) {
    app::AppState state = StateWith(1, 2, 5);
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

// The graph window on a 16-token analysis (the graph example's shape) and on any other, which
// gets a note instead of maps.
TEST_F(Views, GraphWindowDraws) {
    app::GraphView graph;
    for (int tokens : {16, 5}) {
        app::AppState state = StateWith(1, 1, tokens);
        state.show_graph = true;
        for (int frame = 0; frame < 2; ++frame) Frame([&] { graph.Draw(state); });
        EXPECT_EQ(state.regions.count("graph"), tokens == 16 ? 1u : 0u);
    }
}

TEST_F(Views, ANewAnalysisWithFewerHeadsIsSafe) {
    app::AppState state = StateWith(4, 4, 20);
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
