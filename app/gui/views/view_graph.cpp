#include "app/gui/views/view_graph.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <imgui.h>

#include "model/train/tasks.h"
#include "viz/colormap.h"
#include "viz/imgui/widgets.h"

namespace app {
namespace {

constexpr int kNodes = 8;

using Matrix = std::vector<std::vector<double>>;

// Rows 8..15, keys 0..7 of layer 0's head-averaged map on "ABCDEFGHABCDEFGH": each query node's
// attention over the graph's nodes. Empty when the analysis is not of that text.
Matrix LearnedMap(const model::Analysis& a, bool compare) {
    if (a.n_tokens != 2 * kNodes || a.n_layer < 1) return {};
    Matrix m(kNodes, std::vector<double>(kNodes, 0.0));
    for (int h = 0; h < a.n_head; ++h) {
        const model::HeadMap map = a.Map(compare ? model::MapSide::Compare : model::MapSide::Ssa, 0, h);
        if (!map) return {};
        for (int q = 0; q < kNodes; ++q)
            for (int j = 0; j < kNodes; ++j) m[q][j] += (*map)[static_cast<size_t>(kNodes + q) * a.n_tokens + j] / a.n_head;
    }
    return m;
}

// Mean over query nodes of sum_j |P - P*| and of KL(P* || P) (over the eight nodes).
void Errors(const Matrix& p, const Matrix& target, double* l1, double* kl) {
    *l1 = *kl = 0;
    for (int q = 0; q < kNodes; ++q)
        for (int j = 0; j < kNodes; ++j) {
            *l1 += std::fabs(p[q][j] - target[q][j]) / kNodes;
            if (target[q][j] > 0) *kl += target[q][j] * std::log(target[q][j] / std::max(p[q][j], 1e-30)) / kNodes;
        }
}

void DrawMatrix(const char* id, const char* title, const Matrix& m, float cell, viz::Colormap map) {
    ImGui::BeginGroup();
    ImGui::TextUnformatted(title);
    const char* nodes = model::GraphNodes();
    const float label = ImGui::GetFontSize();
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const ImVec2 grid(origin.x + label, origin.y + label);
    for (int i = 0; i < kNodes; ++i) {
        const char text[2] = {nodes[i], 0};
        draw->AddText(ImVec2(grid.x + i * cell + cell * 0.5f - label * 0.25f, origin.y), ImGui::GetColorU32(ImGuiCol_Text), text);
        draw->AddText(ImVec2(origin.x, grid.y + i * cell + cell * 0.5f - label * 0.5f), ImGui::GetColorU32(ImGuiCol_Text), text);
    }
    for (int q = 0; q < kNodes; ++q)
        for (int j = 0; j < kNodes; ++j) {
            const viz::Rgba8 c = viz::SampleColormap(map, static_cast<float>(m[q][j]));
            const ImVec2 a(grid.x + j * cell, grid.y + q * cell);
            draw->AddRectFilled(a, ImVec2(a.x + cell - 1, a.y + cell - 1), IM_COL32(c.r, c.g, c.b, 255));
        }
    ImGui::InvisibleButton(id, ImVec2(label + kNodes * cell, label + kNodes * cell));
    if (ImGui::IsItemHovered()) {
        const ImVec2 mouse = ImGui::GetIO().MousePos;
        const int j = static_cast<int>((mouse.x - grid.x) / cell), q = static_cast<int>((mouse.y - grid.y) / cell);
        if (q >= 0 && q < kNodes && j >= 0 && j < kNodes)
            viz::Tooltip("query %c -> node %c: %.6f", nodes[q], nodes[j], m[q][j]);
    }
    ImGui::EndGroup();
}

}  // namespace

void GraphView::Draw(WindowState& state) {
    if (!state.show_graph) return;
    // Bottom right, over the row chart and the heads pane, never over the main map (top centre).
    const ImGuiViewport* viewport = ImGui::GetMainViewport();
    const ImVec2 size(std::min(ImGui::GetFontSize() * 64, viewport->WorkSize.x * 0.7f), ImGui::GetFontSize() * 25);
    ImGui::SetNextWindowSize(size, ImGuiCond_FirstUseEver);
    ImGui::SetNextWindowPos(ImVec2(viewport->WorkPos.x + viewport->WorkSize.x - 8, viewport->WorkPos.y + viewport->WorkSize.y - 2 * ImGui::GetFrameHeight()),
                            ImGuiCond_FirstUseEver, ImVec2(1.0f, 1.0f));
    ImGui::SetNextWindowBgAlpha(1.0f);  // over the views: the Lens tab's numbers showed between its grids
    // A pane too narrow for the three maps scrolls rather than cutting the third.
    if (!ImGui::Begin("Graph experiment (paper Figure 3)", &state.show_graph, ImGuiWindowFlags_HorizontalScrollbar)) {
        ImGui::End();
        return;
    }
    const Matrix target = model::GraphTarget();
    const Matrix ssa = state.analysis ? LearnedMap(*state.analysis, false) : Matrix{};
    const Matrix other = state.analysis ? LearnedMap(*state.analysis, true) : Matrix{};
    if (ssa.empty()) {
        ImGui::TextWrapped("Open the graph model (Examples > Graph) and run the text ABCDEFGHABCDEFGH: its last eight "
                           "tokens are the queries, the first eight the graph's nodes.");
        ImGui::End();
        return;
    }
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    // Cells fit three maps across and, below them, the title, node labels and four lines of text.
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float font = ImGui::GetFontSize();
    const char* target_title = "P* (target: 1 / degree on each neighbour)";
    const std::string other_title = state.twin ? "comparison: twin model" : "comparison: same weights, tau = 1";
    // The largest cells at which the three maps, each as wide as its title or its grid, fit across
    // (the third was cut at 1000 px: the titles are wider than their grids), and fit the height.
    float cell = std::max(8.0f, (avail.y - font * 8.0f) / kNodes);
    auto across = [&](float c) {
        float w = 2 * font;  // the gaps
        for (const char* title : {target_title, "SSA (layer 0)", other_title.c_str()}) w += std::max(ImGui::CalcTextSize(title).x, font + kNodes * c);
        return w;
    };
    while (cell > 8.0f && across(cell) > avail.x) cell -= 1.0f;
    const viz::Colormap map = state.settings.colormap == viz::Colormap::Diverging ? viz::Colormap::Viridis : state.settings.colormap;
    double l1 = 0, kl = 0;
    DrawMatrix("##target", target_title, target, cell, map);
    ImGui::SameLine(0, ImGui::GetFontSize());
    DrawMatrix("##ssa", "SSA (layer 0)", ssa, cell, map);
    ImGui::SameLine(0, ImGui::GetFontSize());
    DrawMatrix("##other", other_title.c_str(), other, cell, map);
    state.regions["graph"] = Rect{origin.x, origin.y, ImGui::GetItemRectMax().x - origin.x, ImGui::GetItemRectMax().y - origin.y};
    Errors(ssa, target, &l1, &kl);
    ImGui::Text("SSA: L1 %.4f, KL %.5f", l1, kl);
    ImGui::SameLine(0, ImGui::GetFontSize() * 2);
    Errors(other, target, &l1, &kl);
    ImGui::Text("comparison: L1 %.4f, KL %.5f", l1, kl);
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("L1 = mean over query nodes of sum |P - P*| over the eight nodes; KL(P* || P) in nats. Rows need not "
                       "sum to 1 here: the mass a query puts on the query tokens themselves is left out (ssaviz eval counts it).");
    ImGui::PopStyleColor();
    ImGui::End();
}

}  // namespace app
