#include "viz/imgui/demo.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <imgui.h>
#include <imgui_internal.h>  // context hooks: free the textures at shutdown

#include "viz/heatmap.h"
#include "viz/imgui/plot.h"
#include "viz/imgui/texture.h"
#include "viz/imgui/widgets.h"

namespace viz {
namespace {

enum MapKind { kDiagonal, kSink, kPrevious, kDiffuse, kKindCount };
const char* kKindNames[kKindCount] = {"diagonal", "sink (key 0)", "previous token", "diffuse"};

// A causal attention-like map [T, T], row-major: each row i is a softmax over keys 0..i of noise
// plus a bump on the kind's key, divided by `temperature` (small = sharp); zero above the diagonal.
std::vector<float> MakeCausalMap(int T, MapKind kind, float temperature, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> noise(0.0f, 1.0f);
    std::vector<float> map(static_cast<size_t>(T) * T, 0.0f);
    std::vector<float> scores(T);
    for (int i = 0; i < T; ++i) {
        float top = -1e30f;
        for (int j = 0; j <= i; ++j) {
            float s = noise(rng);
            if (kind == kDiagonal && j == i) s += 4.0f;
            if (kind == kSink && j == 0) s += 4.0f;
            if (kind == kPrevious && j == std::max(0, i - 1)) s += 4.0f;
            scores[j] = s / temperature;
            top = std::max(top, scores[j]);
        }
        double sum = 0;
        for (int j = 0; j <= i; ++j) sum += scores[j] = std::exp(scores[j] - top);
        for (int j = 0; j <= i; ++j) map[static_cast<size_t>(i) * T + j] = static_cast<float>(scores[j] / sum);
    }
    return map;
}

// A large map that is nearly uniform except for a few hundred isolated sharp weights: the case
// that decides how a map larger than the screen must be reduced.
std::vector<float> MakeSpikyMap(int T, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<float> map(static_cast<size_t>(T) * T, 0.0f);
    for (int i = 0; i < T; ++i)
        for (int j = 0; j <= i; ++j) map[static_cast<size_t>(i) * T + j] = 0.02f / (i + 1);
    std::uniform_int_distribution<int> row(1, T - 1);
    for (int k = 0; k < 400; ++k) {
        const int i = row(rng);
        const int j = std::uniform_int_distribution<int>(0, i)(rng);
        map[static_cast<size_t>(i) * T + j] = 0.5f + 0.5f * static_cast<float>(k % 7) / 6.0f;
    }
    return map;
}

struct ShownMap {
    const std::vector<float>* values = nullptr;
    int rows = 0, cols = 0;
    Texture texture;
};

struct DemoState {
    static constexpr int kSmall = 32;
    static constexpr int kBig = 1024;
    static constexpr int kPooledSide = 256;

    std::vector<float> sharp[kKindCount], vanilla[kKindCount];
    std::vector<float> difference;  // sharp previous-token minus its temperature-1 version
    std::vector<float> big, big_subsampled;
    ShownMap small[kKindCount][4];  // [kind][viridis, viridis log, magma, magma log]
    ShownMap diff_map, pooled, subsampled, region;
    Range diff_range;
    bool causal_blank = true;

    DemoState() { Bake(); }

    void Bake() {
        for (int k = 0; k < kKindCount; ++k) {
            sharp[k] = MakeCausalMap(kSmall, static_cast<MapKind>(k), 0.5f, 11 + k);
            vanilla[k] = MakeCausalMap(kSmall, static_cast<MapKind>(k), 1.0f, 11 + k);
            for (int v = 0; v < 4; ++v) {
                HeatmapStyle style;
                style.colormap = v < 2 ? Colormap::Viridis : Colormap::Magma;
                style.log_scale = v % 2 == 1;
                style.range = style.log_scale ? Range{1e-4f, 1.0f} : Range{0.0f, 1.0f};
                Set(&small[k][v], &sharp[k], kSmall, kSmall, BakeHeatmap(sharp[k].data(), kSmall, kSmall, style));
            }
        }
        difference.resize(sharp[kPrevious].size());
        for (size_t c = 0; c < difference.size(); ++c) difference[c] = sharp[kPrevious][c] - vanilla[kPrevious][c];
        HeatmapStyle diverging;
        diverging.colormap = Colormap::Diverging;
        diff_range = ResolveRange(difference.data(), kSmall, kSmall, diverging);
        Set(&diff_map, &difference, kSmall, kSmall, BakeHeatmap(difference.data(), kSmall, kSmall, diverging));

        big = MakeSpikyMap(kBig, 5);
        HeatmapStyle style;
        style.range = Range{0.0f, 1.0f};
        // Max-pooled: each of the 256 x 256 pixels shows the largest of its 4 x 4 cells.
        Set(&pooled, &big, kBig, kBig, BakeHeatmap(big.data(), kBig, kBig, style, kPooledSide));
        // What plain subsampling would show: every 4th cell, one pixel each.
        const int step = kBig / kPooledSide;
        big_subsampled.assign(static_cast<size_t>(kPooledSide) * kPooledSide, 0.0f);
        for (int i = 0; i < kPooledSide; ++i)
            for (int j = 0; j < kPooledSide; ++j)
                big_subsampled[static_cast<size_t>(i) * kPooledSide + j] = big[static_cast<size_t>(i * step) * kBig + j * step];
        Set(&subsampled, &big_subsampled, kPooledSide, kPooledSide,
            BakeHeatmap(big_subsampled.data(), kPooledSide, kPooledSide, 0, 0, kPooledSide, kPooledSide, kPooledSide,
                        kPooledSide, style, Range{0.0f, 1.0f}));
        // A region at one pixel per cell: what the heatmap view bakes when zoomed in.
        Set(&region, &big, kBig, kBig, BakeHeatmap(big.data(), kBig, kBig, 640, 384, 128, 128, 128, 128, style, Range{0.0f, 1.0f}));
    }

    static void Set(ShownMap* shown, const std::vector<float>* values, int rows, int cols, const Image& image) {
        shown->values = values;
        shown->rows = rows;
        shown->cols = cols;
        shown->texture.Upload(image);
    }
};

std::unique_ptr<DemoState> g_demo;  // textures: freed when the window closes or the context shuts down
ImGuiContext* g_hooked_context = nullptr;

void FreeDemo() { g_demo.reset(); }

void HookShutdown() {
    ImGuiContext* context = ImGui::GetCurrentContext();
    if (g_hooked_context == context) return;
    ImGuiContextHook hook;
    hook.Type = ImGuiContextHookType_Shutdown;
    hook.Callback = [](ImGuiContext*, ImGuiContextHook*) {
        FreeDemo();
        g_hooked_context = nullptr;
    };
    ImGui::AddContextHook(context, &hook);
    g_hooked_context = context;
}

// The texture at `size`, with the exact value under the mouse as a tooltip; row0/col0 offset the
// reported cell when the texture holds a region of a larger map.
void ShowMap(const char* id, const ShownMap& map, ImVec2 size, int row0 = 0, int col0 = 0, int region_rows = 0) {
    ImGui::PushID(id);
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    ImGui::Image(map.texture.Id(), size);
    if (ImGui::IsItemHovered() && map.values) {
        const int shown_rows = region_rows > 0 ? region_rows : map.rows, shown_cols = region_rows > 0 ? region_rows : map.cols;
        const ImVec2 mouse = ImGui::GetIO().MousePos;
        const int i = row0 + std::clamp(static_cast<int>((mouse.y - pos.y) / size.y * shown_rows), 0, shown_rows - 1);
        const int j = col0 + std::clamp(static_cast<int>((mouse.x - pos.x) / size.x * shown_cols), 0, shown_cols - 1);
        const float v = (*map.values)[static_cast<size_t>(i) * map.cols + j];
        if (j > i && map.rows == map.cols) viz::Tooltip("%s\nrow %d, column %d: above the diagonal (masked)", id, i, j);
        else viz::Tooltip("%s\nrow %d, column %d: %.4g", id, i, j, v);
    }
    ImGui::PopID();
}

void SectionColorMaps() {
    ImGui::TextWrapped(
        "SampleColormap(map, t) reads a 256-entry table expanded from a few key colours; Normalize(value, range, log) "
        "maps a value into t. ColorBar(id, what, map, range, log, size) draws the bar with its range and round ticks "
        "(NiceTicks, FormatTick); hover it to read the value at the mouse. ColorBar(..., shown) draws a part of the "
        "range in the range's colours: the last bar, temperatures 1 .. 2.4 on a scale centred at 1 (-0.4 .. 2.4).");
    const float h = ImGui::GetFontSize() * 12.0f, w = ColorBarWidth();
    struct Bar {
        const char* caption;
        Colormap map;
        Range range;
        bool log;
        Range shown = {NAN, NAN};  // the part the bar shows (NaN: all of it)
    } bars[] = {{"viridis", Colormap::Viridis, {0.0f, 1.0f}, false},
                {"viridis, log", Colormap::Viridis, {1e-4f, 1.0f}, true},
                {"magma", Colormap::Magma, {0.0f, 0.35f}, false},
                {"magma, log", Colormap::Magma, {2e-6f, 0.8f}, true},
                {"diverging", Colormap::Diverging, {-0.42f, 0.42f}, false},
                {"upper half", Colormap::Diverging, {-0.4f, 2.4f}, false, {1.0f, 2.4f}}};
    if (ImGui::BeginTable("##bars", 6, ImGuiTableFlags_SizingFixedFit)) {
        for (const Bar& b : bars) {
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(b.caption);
            ColorBar(b.caption, "value", b.map, b.range, b.log, ImVec2(w, h), b.shown);
        }
        ImGui::EndTable();
    }
}

void SectionHeatmaps(DemoState& demo) {
    ImGui::TextWrapped(
        "BakeHeatmap(values, rows, cols, style) turns a row-major float map into RGBA pixels, one per cell here; the "
        "texture is drawn with ImGui::Image and scaled up with nearest filtering, so cells stay crisp. Cells above the "
        "diagonal (future keys) take style.blank. 32 x 32 synthetic maps at temperature 0.5; hover a map for exact values.");
    const float side = std::floor(ImGui::GetFontSize() * 6.5f);
    const char* columns[] = {"viridis", "viridis, log", "magma", "magma, log"};
    if (ImGui::BeginTable("##heatmaps", 5, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_BordersInnerV)) {
        ImGui::TableSetupColumn("kind");
        for (const char* c : columns) ImGui::TableSetupColumn(c);
        ImGui::TableHeadersRow();
        for (int k = 0; k < kKindCount; ++k) {
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(kKindNames[k]);
            for (int v = 0; v < 4; ++v) {
                ImGui::TableNextColumn();
                char id[64];
                std::snprintf(id, sizeof id, "%s, %s", kKindNames[k], columns[v]);
                ShowMap(id, demo.small[k][v], ImVec2(side, side));
            }
        }
        ImGui::EndTable();
    }
    ImGui::Spacing();
    ImGui::TextWrapped(
        "A signed difference (sharp minus temperature-1 previous-token map) with Colormap::Diverging: ResolveRange makes "
        "the automatic range symmetric around 0, so white means no change.");
    ShowMap("difference", demo.diff_map, ImVec2(side * 1.5f, side * 1.5f));
    ImGui::SameLine();
    ColorBar("##diff_bar", "difference", Colormap::Diverging, demo.diff_range, false, ImVec2(ColorBarWidth(), side * 1.5f));
}

void SectionLevelOfDetail(DemoState& demo) {
    ImGui::TextWrapped(
        "A 1,024 x 1,024 map, near-uniform with 400 isolated sharp weights, reduced to 256 x 256. BakeHeatmap max-pools: "
        "each pixel shows the largest of its 4 x 4 cells (for the diverging map, the largest magnitude), so every sharp "
        "weight stays visible at any zoom. Plain subsampling (every 4th cell) loses about 15 of 16 of them.");
    const float side = DemoState::kPooledSide;
    if (ImGui::BeginTable("##lod", 3, ImGuiTableFlags_SizingFixedFit)) {
        ImGui::TableNextColumn();
        ImGui::TextUnformatted("max-pooled (BakeHeatmap)");
        ShowMap("max-pooled", demo.pooled, ImVec2(side, side));
        ImGui::TableNextColumn();
        ImGui::TextUnformatted("subsampled (for contrast)");
        ShowMap("subsampled", demo.subsampled, ImVec2(side, side));
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(" ");
        ColorBar("##lod_bar", "value", Colormap::Viridis, {0.0f, 1.0f}, false, ImVec2(ColorBarWidth(), side));
        ImGui::EndTable();
    }
    ImGui::TextWrapped(
        "Zoomed in, the heatmap view bakes only the visible region: BakeHeatmap(values, rows, cols, row0, col0, "
        "row_count, col_count, out_w, out_h, style, range). Rows 640..767 x columns 384..511 at one pixel per cell, "
        "shown 2x:");
    ShowMap("region", demo.region, ImVec2(256, 256), 640, 384, 128);
}

void SectionWidgets() {
    ImGui::TextUnformatted("HelpMarker(text): a dimmed (?) with a tooltip");
    ImGui::SameLine();
    HelpMarker("This is HelpMarker(). Views put one after a control whose meaning is not obvious.");
    ImGui::Button("a control");
    ItemTooltip("ItemTooltip(text) after a control: what it does and its shortcut.");
    ImGui::SameLine();
    ImGui::TextDisabled("<- hover it (ItemTooltip)");

    static bool picked = false;
    if (SelectableText("SelectableText(text, selected): a folder named a##b shows as a##b", picked)) picked = !picked;

    ImGui::Spacing();
    ImGui::TextUnformatted("AddTextVertical(draw_list, pos, color, text): column labels reading upwards");
    {
        const char* words[] = {" the", " lighthouse", " keeper", "\\n", " climbed", " stairs", ".", " 42"};
        ImDrawList* draw = ImGui::GetWindowDrawList();
        const float line = ImGui::GetTextLineHeight(), height = ImGui::GetFontSize() * 6.0f;
        const ImVec2 p = ImGui::GetCursorScreenPos();
        for (int k = 0; k < 8; ++k) {
            const ImVec2 cell(p.x + k * (line + 6.0f), p.y + height);
            draw->AddRectFilled(ImVec2(cell.x, cell.y + 2), ImVec2(cell.x + line, cell.y + 2 + line),
                                IM_COL32(60 + 20 * k, 90, 160, 255));
            AddTextVertical(draw, cell, ImGui::GetColorU32(ImGuiCol_Text), EllipsizeText(words[k], height).c_str());
        }
        ImGui::Dummy(ImVec2(8 * (line + 6.0f), height + line + 4.0f));
    }

    ImGui::Spacing();
    ImGui::TextUnformatted("EllipsizeText(text, max_width): labels cut to a width with \"..\"");
    static float width = 80.0f;
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 12.0f);
    ImGui::SliderFloat("max width (px)", &width, 10.0f, 300.0f, "%.0f");
    ImGui::Text("[%s]", EllipsizeText(" Selective self-attention, token by token", width).c_str());

    ImGui::Spacing();
    ImGui::TextUnformatted("NiceTicks(range, log, max) and FormatTick(value):");
    const struct {
        Range range;
        bool log;
    } cases[] = {{{0.0f, 1.0f}, false}, {{-0.43f, 0.43f}, false}, {{0.0f, 0.0075f}, false}, {{1e-6f, 1.0f}, true}, {{3e-3f, 0.6f}, true}};
    for (const auto& c : cases) {
        std::string line = "  [" + FormatTick(c.range.min) + ", " + FormatTick(c.range.max) + "]" + (c.log ? " log:" : ":");
        for (float v : NiceTicks(c.range, c.log, 6)) line += " " + FormatTick(v);
        ImGui::TextUnformatted(line.c_str());
    }
}

// The four kinds of series of a plot description (viz/plot.h), each drawn by DrawPlot; the same
// Plot becomes a PNG or SVG with viz::PlotFigure.
void SectionPlots() {
    ImGui::TextWrapped("DrawPlot(id, size, plot): a viz::Plot description (series, axes, labels, ranges, colours) drawn "
                       "here; viz::PlotFigure(plot) makes the same description a paper figure.");
    const float h = ImGui::GetFontSize() * 11.0f;
    // A plot of `sides` series of one kind: SSA orange, then vanilla blue.
    auto sides = [](SeriesKind kind, int count, const char* x_label, const char* y_label) {
        Plot p;
        p.Series.resize(static_cast<size_t>(count));
        for (int k = 0; k < count; ++k) {
            p.Series[k].Name = k == 0 ? "SSA" : "vanilla";
            p.Series[k].Kind = kind;
            p.Series[k].Color = k == 0 ? kSsaColor : kCompareColor;
        }
        p.Options.XLabel = x_label;
        p.Options.YLabel = y_label;
        return p;
    };
    static const Plot lines = [&] {
        Plot p = sides(SeriesKind::Line, 2, "query position i", "Line: H_i / ln i");
        for (int i = 1; i <= 60; ++i) {
            p.Series[0].Y.push_back(0.6f + 0.1f * std::sin(i * 0.3f));
            p.Series[1].Y.push_back(1.0f - 0.5f / i);
        }
        p.Options.YRange = Range{0.0f, 1.05f};
        p.Options.XMarker = 20.0f;  // the selected query
        return p;
    }();
    static const Plot histogram = [&] {
        Plot p = sides(SeriesKind::Histogram, 1, "tau_q", "Histogram: tokens");
        std::mt19937 rng(3);
        std::normal_distribution<float> tau(1.6f, 0.3f);
        for (int i = 0; i < 500; ++i) p.Series[0].Y.push_back(tau(rng));
        p.Options.XMarker = 1.0f;  // vanilla attention
        return p;
    }();
    static const Plot points = [&] {
        Plot p = sides(SeriesKind::Points, 1, "x", "Points (hover one)");
        for (int i = 0; i < 16; ++i) {
            p.Series[0].X.push_back(0.1f * (i % 5) + 0.02f * i);
            p.Series[0].Y.push_back(1.0f + 0.15f * ((i * 7) % 11));
            p.Series[0].Labels.push_back("head " + std::to_string(i));
        }
        p.Options.Highlighted = 5;  // the selected head
        return p;
    }();
    static const Plot bars = [&] {
        Plot p = sides(SeriesKind::Bars, 2, "", "Bars in groups");
        for (int i = 0; i < 8; ++i) {
            for (int k = 0; k < 2; ++k) p.Series[k].Y.push_back(0.1f + 0.08f * ((i * (k + 3)) % 7));
            p.Options.XCategories.push_back("L" + std::to_string(i / 4) + " H" + std::to_string(i % 4));
        }
        p.Options.CategoryGroup = 4;
        p.Options.GroupLabels = {"L0", "L1"};
        p.Options.YLine = PlotLine{0.3f, "eps 0.30"};
        p.Options.Highlighted = 2;
        return p;
    }();
    for (const Plot* plot : {&lines, &histogram, &points, &bars}) DrawPlot(plot->Options.YLabel.c_str(), ImVec2(0, h), *plot);
}

}  // namespace

void ShowDemoWindow(bool* open) {
    if (!*open) {
        FreeDemo();
        return;
    }
    ImGui::SetNextWindowSize(ImVec2(ImGui::GetFontSize() * 52.0f, ImGui::GetFontSize() * 56.0f), ImGuiCond_FirstUseEver);
    if (ImGui::Begin("viz widgets (synthetic data)", open)) {
        if (!g_demo) {
            g_demo = std::make_unique<DemoState>();
            HookShutdown();
        }
        ImGui::TextWrapped(
            "Every widget of viz/ on data generated here. viz/ takes const float* plus dimensions and knows nothing of "
            "models; the app's views call the same functions. Source: viz/imgui/demo.cpp.");
        if (ImGui::CollapsingHeader("Colour maps and colour bars", ImGuiTreeNodeFlags_DefaultOpen)) SectionColorMaps();
        if (ImGui::CollapsingHeader("Heatmaps", ImGuiTreeNodeFlags_DefaultOpen)) SectionHeatmaps(*g_demo);
        if (ImGui::CollapsingHeader("Level of detail: max-pooling", ImGuiTreeNodeFlags_DefaultOpen)) SectionLevelOfDetail(*g_demo);
        if (ImGui::CollapsingHeader("Plots", ImGuiTreeNodeFlags_DefaultOpen)) SectionPlots();
        if (ImGui::CollapsingHeader("Small widgets", ImGuiTreeNodeFlags_DefaultOpen)) SectionWidgets();
    }
    ImGui::End();
    if (!*open) FreeDemo();
}

}  // namespace viz
