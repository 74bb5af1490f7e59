#include "app/export/export_figures.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "app/core/names.h"
#include "app/export/head_summary.h"
#include "app/export/plots.h"
#include "model/text/tokenizer.h"
#include "model/text/utf8.h"
#include "viz/figures.h"
#include "viz/ticks.h"

namespace app {
namespace {

// A panel's text in a figure of several (Beside): its name kept with --no-titles, which drops the
// figure's own title ("SSA", "tau = 1", "base" are the panels' axis labels, not titles).
viz::FigureText PanelText(const viz::FigureText& text) { return {true, text.Scale}; }

// Text with each character that draws nothing (IsInvisibleFormat: a zero-width space, a byte order
// mark) as \uNNNN; the rest as it is.
std::string ShowInvisible(const std::string& text) {
    std::string out;
    for (size_t i = 0; i < text.size();) {
        const model::Utf8Char c = model::DecodeUtf8(text, i);
        const size_t n = std::max<size_t>(c.length, 1);
        if (c.length > 0 && model::IsInvisibleFormat(c.code_point)) {
            char escaped[12];
            std::snprintf(escaped, sizeof escaped, "\\u%04X", static_cast<unsigned>(c.code_point));
            out += escaped;
        } else {
            out.append(text, i, n);
        }
        i += n;
    }
    return out;
}

// The maps' token labels as the lens's and the window's: a character split over byte tokens whole, "你 1/3".
std::vector<std::string> Labels(const model::Analysis& a) {
    std::vector<std::string> out = TokenLabels(a.tokens);
    out.resize(a.n_tokens, "?");
    return out;
}

std::string ModeTitle(const model::Analysis& a, MapMode mode) {
    switch (mode) {
        case MapMode::Ssa: return SsaSideName(a);
        case MapMode::Compare: if (HasTwin(a)) return "twin " + TwinFolderName(a);
            // The window's names: tau = 1 is SSA's own weights without their temperatures.
            return a.comparison == model::Comparison::LayerLocal && !a.HasBase() ? "tau = 1 local (layer by layer)" : ComparisonWeightsTitle(a);
        case MapMode::Difference: return SsaSideName(a) + " - " + CompareName(a);
        case MapMode::Base: return "base (" + BaseFolderName(a) + ")";
        case MapMode::BaseDifference: return "SSA - base (all that fine-tuning changed)";
    }
    return "";
}

std::string Format(const char* format, double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, value);
    return buf;
}

// SSA - comparison, cell by cell.
std::vector<float> Difference(const std::vector<float>& ssa, const std::vector<float>& other) {
    std::vector<float> out(ssa.size());
    for (size_t k = 0; k < out.size(); ++k) out[k] = ssa[k] - other[k];
    return out;
}

viz::HeatmapStyle StyleFor(MapMode mode, const FigureSettings& settings) {
    viz::HeatmapStyle style;
    style.colormap = IsDifference(mode) ? viz::Colormap::Diverging : settings.colormap;
    style.log_scale = !IsDifference(mode) && settings.log_scale;
    style.blank = {235, 235, 235, 255};  // a paper figure's masked cells: light grey, not the GUI's dark
    return style;
}

viz::Range SymmetricRange(const std::vector<float>& values) {
    float m = 0.0f;
    for (float v : values)
        if (std::isfinite(v)) m = std::max(m, std::abs(v));
    if (!(m > 0.0f)) m = 1e-3f;  // identical maps: zero in the middle
    return {-m, m};
}

std::string HighlightLabel(const model::Analysis& a, const FigureSettings& s) {
    // The window's legend's name ("JS to comparison", "loss change from base"), a difference's sign said.
    const TokenColoring& c = Coloring(s.highlight);
    std::string label = c.label;
    if (IsLoss(s.highlight))
        return label + (s.highlight == TokenColor::LossDelta       ? " (" + SsaSideName(a) + " - " + CompareName(a) + ")"
                        : s.highlight == TokenColor::LossDeltaBase ? " (" + SsaSideName(a) + " - base)"
                                                                   : "") +
               ", " + c.quantity->unit;
    // The catalogue's unit where it has one, as the loss's ("entropy, L3 H2, nats").
    const std::string unit = c.quantity && !c.quantity->unit.empty() ? ", " + c.quantity->unit : "";
    switch (s.highlight_scope) {
        case TokenScope::Head: return label + ", " + HeadName(s.highlight_head) + unit;
        case TokenScope::LayerMean: return label + ", layer " + std::to_string(s.highlight_head.layer) + " mean" + unit;
        case TokenScope::ModelMean: return label + ", mean over heads" + unit;
    }
    return label + unit;
}

// The highlight's pieces (as text, newlines kept) and values; the range skips a row metric's trivial row 1.
struct HighlightData {
    std::vector<std::string> pieces;
    std::vector<float> values;
    viz::HighlightOptions options;
};

// The text as written: a character split over byte tokens whole on its first token, the others
// narrow chips of their colours (a U+FFFD a byte said nothing of the text; "你 1/3 你 2/3" read as
// other text); a character that draws nothing (a zero-width space) named, not an empty chip.
std::vector<std::string> HighlightPieces(const std::vector<std::string>& tokens) {
    std::vector<std::string> pieces;
    const std::vector<CharacterRun> runs = CharacterRuns(tokens);
    for (size_t k = 0; k < tokens.size(); ++k) {
        const CharacterRun r = runs[k];
        std::string bytes = tokens[k];
        if (r.first < r.last) {
            bytes.clear();
            if (r.first == static_cast<int>(k))
                for (int j = r.first; j <= r.last; ++j) bytes += tokens[j];
        }
        pieces.push_back(ShowInvisible(model::PieceToDisplay(bytes)));
    }
    return pieces;
}

HighlightData MakeHighlight(const model::Analysis& a, const std::string& model_name, const FigureSettings& s) {
    HighlightData d;
    d.pieces = HighlightPieces(a.tokens.pieces);
    d.pieces.resize(a.n_tokens);
    d.values.assign(a.n_tokens, NAN);
    HeadRef head = s.highlight_head;
    head.layer = std::clamp(head.layer, 0, std::max(0, a.n_layer - 1));
    head.head = std::clamp(head.head, 0, std::max(0, a.n_head - 1));
    if (IsLoss(s.highlight)) d.values = TokenLosses(a, s.highlight);
    else if (const model::RowArray* rows = TokenQuantity(a, s.highlight))
        for (int i = 0; i < a.n_tokens; ++i) d.values[i] = ScopedTokenValue(a, *rows, s.highlight_scope, head, i);
    float lo = INFINITY, hi = -INFINITY;
    for (int i = IsRowMetric(s.highlight) && a.n_tokens > 1 ? 1 : 0; i < a.n_tokens; ++i)
        if (std::isfinite(d.values[i])) lo = std::min(lo, d.values[i]), hi = std::max(hi, d.values[i]);
    if (lo <= hi) d.options.ValueRange = viz::Range{lo, hi};
    d.options.Title = model_name + " \xC2\xB7 " + HighlightLabel(a, s);
    d.options.Text = s.text;
    d.options.ValueLabel = HighlightLabel(a, s);
    d.options.Map = s.colormap;
    d.options.LogScale = s.log_scale;
    if (IsTemperature(s.highlight)) {
        // The window's scale: diverging around tau = 1 (white), one scale for every head of the
        // model, so a colour is one temperature everywhere; red above 1 (sharper), blue below.
        const float offset = TokenColorOffset(s.highlight);  // tau_q's token term, tanh(..), is shown as 1 + it
        for (float& v : d.values) v += offset;
        if (const model::RowArray* rows = TokenQuantity(a, s.highlight)) {
            // The head's own scale (the window's View > Temperature scale per head), a mean's from its values.
            const bool per_head = s.temperature_per_head;
            const TemperatureScale scale = !per_head ? TemperatureRange(a, *rows, std::nullopt, offset)
                                           : s.highlight_scope == TokenScope::Head ? TemperatureRange(a, *rows, head, offset)
                                                                                    : TemperatureScaleOver(lo + offset, hi + offset);
            d.options.ValueRange = scale.range;
            d.options.LegendRange = scale.used;  // the part of the scale the temperatures reach, as the window's legend
            d.options.ValueLabel += scale.used.min >= 1.0f   ? " (1: vanilla, white; red above, sharper; none is below 1)"
                                    : scale.used.max <= 1.0f ? " (1: vanilla, white; blue below, flatter; none is above 1)"
                                                             : " (1: vanilla; red above, sharper; blue below, flatter)";
            if (per_head) d.options.ValueLabel += s.highlight_scope == TokenScope::Head ? "; this head's own scale" : "; the mean's own scale";
        }
        d.options.Map = viz::Colormap::Diverging;
        d.options.LogScale = false;
    }
    if (IsDelta(s.highlight)) {  // where SSA's temperatures (or the fine-tuning) help (blue, below 0) and where they hurt (red)
        d.options.ValueRange = SymmetricRange(d.values);
        d.options.Map = viz::Colormap::Diverging;
        d.options.LogScale = false;
    }
    return d;
}

}  // namespace

model::Status CheckHighlightScope(const FigureSettings& fig, int n_layer, int n_head) {
    if (fig.highlight_scope == TokenScope::ModelMean) return model::Ok{};
    const HeadRef h = fig.highlight_head;
    if (h.layer >= n_layer)
        return model::Fail("--highlight-scope: layer " + std::to_string(h.layer) + " is out of range (the model has " + std::to_string(n_layer) + ")");
    if (fig.highlight_scope == TokenScope::Head && h.head >= n_head)
        return model::Fail("--highlight-scope: head " + std::to_string(h.head) + " is out of range (the model has " + std::to_string(n_head) + ")");
    return model::Ok{};
}

std::string ModelName(const model::ModelInfo& info) {
    const std::string name = FolderAndParent(std::filesystem::path(info.dir).lexically_normal().string());
    return name.empty() ? info.dir : name;
}

viz::Figure MapFigure(const model::Analysis& a, const std::string& model_name, HeadRef head, MapMode mode, const FigureSettings& settings) {
    const int T = a.n_tokens;
    const model::HeadMap ssa_map = a.Map(model::MapSide::Ssa, head.layer, head.head);
    const model::HeadMap other_map = a.Map(IsBaseMode(mode) ? model::MapSide::Base : model::MapSide::Compare, head.layer, head.head);
    if (!ssa_map) return {};
    const float* ssa = ssa_map->data();
    const float* other = other_map ? other_map->data() : nullptr;
    if (!other && mode != MapMode::Ssa) mode = MapMode::Ssa;

    viz::HeatmapFigureOptions options;
    options.Text = settings.text;
    options.NarrowTitle = true;  // a figure of its own
    options.Title = model_name + " \xC2\xB7 layer " + std::to_string(head.layer) + ", head " + std::to_string(head.head) + " \xC2\xB7 " +
                    ModeTitle(a, mode);
    options.RowLabels = Labels(a);
    options.ColLabels = options.RowLabels;
    options.Style = StyleFor(mode, settings);
    options.MapSize = settings.map_size;
    if (IsDifference(mode)) {
        const std::vector<float> diff = Difference(*ssa_map, *other_map);
        options.Style.range = SymmetricRange(diff);
        options.ValueLabel = "weight difference";
        return viz::HeatmapFigure(diff.data(), T, T, options);
    }
    options.Style.range = SharedMapRange(ssa, other, T, options.Style.log_scale);
    return viz::HeatmapFigure(mode == MapMode::Ssa ? ssa : other, T, T, options);
}

viz::Figure SideBySideFigure(const model::Analysis& a, const std::string& model_name, HeadRef head, bool three_way,
                             const FigureSettings& settings) {
    const int T = a.n_tokens;
    const model::HeadMap ssa = a.Map(model::MapSide::Ssa, head.layer, head.head);
    const model::HeadMap other = a.Map(model::MapSide::Compare, head.layer, head.head);
    const model::HeadMap base = three_way && a.HasBase() ? a.Map(model::MapSide::Base, head.layer, head.head) : nullptr;
    if (!ssa || !other || (three_way && !base)) return {};

    viz::HeatmapFigureOptions options;
    options.Text = PanelText(settings.text);
    options.RowLabels = Labels(a);
    options.ColLabels = options.RowLabels;
    // HeatmapFigure's own size for T tokens (cells of 720 / T px, 1..28), capped so three fit.
    const int cell = std::clamp(static_cast<int>(std::lround(720.0 / std::max(T, 1))), 1, 28);
    options.MapSize = std::min(settings.map_size > 0 ? settings.map_size : cell * T, kSideBySideMapSize);
    viz::Range shared = SharedMapRange(ssa->data(), other->data(), T, settings.log_scale);
    if (base) {
        const viz::Range r = SharedMapRange(ssa->data(), base->data(), T, settings.log_scale);
        shared = {std::min(shared.min, r.min), std::max(shared.max, r.max)};
    }
    std::vector<viz::Figure> panels;
    auto panel = [&](const float* values, MapMode mode, const std::string& title) {
        options.Title = title;
        options.Style = StyleFor(mode, settings);
        options.Style.range = shared;
        panels.push_back(viz::HeatmapFigure(values, T, T, options));
    };
    panel(ssa->data(), MapMode::Ssa, ModeTitle(a, MapMode::Ssa));
    const std::string place = model_name + " \xC2\xB7 layer " + std::to_string(head.layer) + ", head " + std::to_string(head.head);
    if (base) {
        panel(other->data(), MapMode::Compare, ModeTitle(a, MapMode::Compare));
        panel(base->data(), MapMode::Compare, ModeTitle(a, MapMode::Base));
        return viz::Beside(panels, place + " \xC2\xB7 what fine-tuning changed: temperatures (SSA vs tau = 1), drift (tau = 1 vs base)", settings.text);
    }
    panel(other->data(), MapMode::Compare, ModeTitle(a, MapMode::Compare));
    const std::vector<float> diff = Difference(*ssa, *other);
    options.Title = ModeTitle(a, MapMode::Difference);
    options.Style = StyleFor(MapMode::Difference, settings);
    options.Style.range = SymmetricRange(diff);
    options.ValueLabel = "weight difference";
    panels.push_back(viz::HeatmapFigure(diff.data(), T, T, options));
    return viz::Beside(panels, place + " \xC2\xB7 " + SsaSideName(a) + " vs " + CompareName(a), settings.text);
}

// Drawn from the thumbnails: exact up to model::kThumbnailCells tokens, max-pooled above, which
// is as much as a grid cell shows.
viz::Figure HeadsGrid(const model::Analysis& a, const std::string& model_name, MapMode mode, const FigureSettings& settings) {
    const int L = a.n_layer, H = a.n_head;
    const model::Thumbnails& t = a.thumbnails;
    viz::HeadsGridOptions options;
    options.Text = settings.text;
    options.Title = model_name + " \xC2\xB7 all heads \xC2\xB7 " + ModeTitle(a, mode);
    options.Style = StyleFor(mode, settings);
    const std::vector<HeadSummary> heads = SummarizeHeads(a);
    // A map's cell its side's entropy; a difference's its two sides' JS divergence (the difference
    // grids said SSA's entropy, whose nothing told).
    const char* caption = mode == MapMode::Difference ? "js_divergence" : mode == MapMode::BaseDifference ? "js_total" : "entropy";
    for (const HeadSummary& s : heads) {
        const float v = s.Get(caption, IsDifference(mode) ? Side::Ssa : ReadSide(mode));
        options.Captions.push_back(HeadName(s.ref) + (!std::isfinite(v)       ? ""
                                                      : IsDifference(mode) ? Format(" \xC2\xB7 JS %.3g", v)
                                                                           : Format(" \xC2\xB7 entropy %.2f", v)));
    }
    if (!t.Holds(ThumbnailKindOf(mode))) return {};
    if (IsDifference(mode)) {
        const std::vector<float> difference = t.All(ThumbnailKindOf(mode));
        options.Style.range = SymmetricRange(difference);
        options.ValueLabel = "weight difference";
        return viz::HeadsGridFigure(difference.data(), L, H, t.side, options);
    }
    // The grids of the maps themselves share one scale: SSA's, the comparison's and the base's.
    const std::vector<float> ssa = t.All(model::ThumbnailKind::Ssa), compare = t.All(model::ThumbnailKind::Compare),
                             base = t.All(model::ThumbnailKind::Base);
    viz::Range range = {0.0f, 0.0f};
    for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) {
            const size_t at = (static_cast<size_t>(l) * H + h) * t.side * t.side;
            viz::Range r = SharedMapRange(ssa.data() + at, compare.data() + at, t.side, options.Style.log_scale);
            if (!base.empty()) {
                const viz::Range b = SharedMapRange(ssa.data() + at, base.data() + at, t.side, options.Style.log_scale);
                r = {std::min(r.min, b.min), std::max(r.max, b.max)};
            }
            range.max = std::max(range.max, r.max);
            range.min = l == 0 && h == 0 ? r.min : std::min(range.min, r.min);
        }
    options.Style.range = range;
    const std::vector<float>& shown = mode == MapMode::Ssa ? ssa : mode == MapMode::Compare ? compare : base;
    return viz::HeadsGridFigure(shown.data(), L, H, t.side, options);
}

viz::Figure Highlight(const model::Analysis& a, const std::string& model_name, const FigureSettings& settings) {
    const HighlightData d = MakeHighlight(a, model_name, settings);
    return viz::HighlightFigure(d.pieces, d.values, d.options);
}

model::Status CheckHighlightFits(const std::vector<std::string>& tokens, const FigureSettings& settings, bool png, bool svg) {
    if (!png && !svg) return model::Ok{};
    // Its layout is the text's as the fonts measure it (without them the layouts guess widths: no
    // check, the export says there are none), the pieces as drawn, no values (a title and legend of
    // one line, as the drawn one's; the figure as drawn is checked again).
    std::string error;
    if (!viz::LoadFigureFonts(&error)) return model::Ok{};
    viz::HighlightOptions options;
    options.Title = "x";
    options.Text = settings.text;
    const viz::Figure f = viz::HighlightFigure(HighlightPieces(tokens), std::vector<float>(tokens.size(), NAN), options);
    const int scale = png ? settings.png_scale : 1;
    if (viz::FigureFits(f, scale)) return model::Ok{};
    std::string at = png ? "--png-scale " + std::to_string(scale) : "";
    if (settings.text.Size(1.0f) != 1.0f) {
        char text_scale[48];
        std::snprintf(text_scale, sizeof text_scale, "--text-scale %g", settings.text.Size(1.0f));
        at += (at.empty() ? "" : " and ") + std::string(text_scale);
    }
    // What does not fit, as this layout measures it: its height is the text's; its width here is the
    // text's alone (the drawn figure's title and colour bar can widen it).
    const int64_t w = int64_t{f.Width} * scale, h = int64_t{f.Height} * scale;
    const std::string size = h > viz::kMaxFigureSide ? std::to_string(h) + " pixels tall"
                             : w > viz::kMaxFigureSide ? std::to_string(w) + " pixels wide"
                                                       : "at least " + std::to_string(w) + " x " + std::to_string(h) + " pixels";
    return model::Fail("a text of " + std::to_string(tokens.size()) + (tokens.size() == 1 ? " token" : " tokens") + (at.empty() ? "" : " at " + at) +
                       " draws a highlight " + size + ", past the most a figure may be (" + std::to_string(viz::kMaxFigureSide) + " pixels a side, " +
                       std::to_string(viz::kMaxFigurePixels >> 20) + " M pixels): " +
                       (settings.text.Size(1.0f) > 1.0f ? "a smaller --text-scale, " : "") + (scale > 1 ? "a smaller --png-scale, " : "") +
                       "a shorter text, or no png/svg (--format json,npy,csv,html)");
}

std::string HighlightHtmlPage(const model::Analysis& a, const std::string& model_name, const FigureSettings& settings) {
    const HighlightData d = MakeHighlight(a, model_name, settings);
    return viz::HighlightHtml(d.pieces, d.values, d.options);
}

const std::vector<std::string>& SparsityFigureNames() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const AnalysisPlot& p : SparsityPlots()) out.push_back(p.key);
        return out;
    }();
    return names;
}

viz::Range FineTuneRange(const model::Decomposition& d, bool log_scale) {
    float most = 1e-6f, least = INFINITY;
    for (const std::vector<float>* part : {&d.js_temperature, &d.js_drift, &d.js_total})
        for (float v : *part)
            if (std::isfinite(v)) {
                most = std::max(most, v);
                if (v > kJsRoundingFloor) least = std::min(least, v);
            }
    if (!log_scale) return {0.0f, most};
    const float lo = std::max(most * 1e-4f, std::isfinite(least) ? least : 0.0f);
    return {lo < most ? lo : most * 1e-4f, most};
}

viz::Figure FineTuneFigure(const model::Analysis& a, const std::string& model_name, bool log_scale, const viz::FigureText& text) {
    const model::Decomposition d = model::Decompose(a);
    if (d.empty()) return {};
    viz::HeatmapFigureOptions options;
    options.Text = PanelText(text);
    for (int l = 0; l < d.n_layer; ++l) options.RowLabels.push_back("L" + std::to_string(l));
    for (int h = 0; h < d.n_head; ++h) options.ColLabels.push_back("H" + std::to_string(h));
    options.RowAxis = "layer";
    options.ColAxis = "head";
    options.ValueLabel = log_scale ? "JS divergence of the rows, nats (log scale)" : "JS divergence of the rows, nats";
    options.Style.causal = false;
    options.Style.log_scale = log_scale;
    // Cells of up to 48 px, each head's value written in it where it fits (up to some 12 heads and layers).
    const int cells = std::max(d.n_layer, d.n_head);
    options.MapSize = cells * std::clamp(560 / std::max(cells, 1), 12, 60);  // 60: room for "4.1e-05"
    // Two significant digits on either scale: a coloured cell of 4.1e-05 read "0.000" at three decimals.
    options.CellValues = "%#.2g";  // two significant digits each: "5.0e-05" beside "4.1e-05", "0.00080" beside "0.00083"
    options.Style.range = FineTuneRange(d, log_scale);  // the Fine-tune tab's
    auto nats = [](const char* format, float v) {
        char buf[64];
        std::snprintf(buf, sizeof buf, format, v);
        return std::string(buf);
    };
    std::vector<viz::Figure> panels;
    options.Title = TemperaturePartName(a) + ": " + SsaSideName(a) + " vs tau = 1 (loss " + nats("%+.4f", d.loss_mean - d.loss_mean_tau1) + ")";
    panels.push_back(viz::HeatmapFigure(d.js_temperature.data(), d.n_layer, d.n_head, options));
    const std::string base_own = BaseTemperatures(a);  // a base trained with SSA: the drift takes its temperatures away too
    options.Title = "drift: tau = 1 vs base" + (base_own.empty() ? "" : " with its " + base_own) + " (loss " +
                    nats("%+.4f", d.loss_mean_tau1 - d.loss_mean_base) + ")";
    panels.push_back(viz::HeatmapFigure(d.js_drift.data(), d.n_layer, d.n_head, options));
    return viz::Beside(panels, model_name + " \xC2\xB7 what fine-tuning changed, head by head \xC2\xB7 mean loss " +
                                   nats("%.4f", d.loss_mean_base) + " (base: " + BaseFolderName(a) + ") to " + nats("%.4f", d.loss_mean) +
                                   " (" + SsaSideName(a) + "), " + nats("%+.4f", d.loss_mean - d.loss_mean_base) + " nats",
                       text);
}

viz::Figure HeadImpactsFigure(const HeadImpacts& impacts, int n_layer, int n_head, const std::string& model_name, const viz::FigureText& text) {
    if (n_layer <= 0 || n_head <= 0) return {};
    // The largest |value| of some panels' values: their common scale's end.
    auto largest = [](std::initializer_list<const std::vector<float>*> panels) {
        float most = 1e-6f;
        for (const std::vector<float>* values : panels)
            for (float v : *values)
                if (std::isfinite(v)) most = std::max(most, std::abs(v));
        return most;
    };
    // One panel: [layers, columns] of loss changes, blue below 0 (lowered the loss, as every loss
    // change reads), on a diverging scale from -most to most.
    // `labels`: the columns' ("attn up", ...), else the heads', then the layer's attention and MLP where there are columns for them.
    auto panel = [&](const std::vector<float>& values, int columns, float most, const std::string& title, const std::string& value_label,
                     std::vector<std::string> labels = {}, const std::string& axis = "") {
        viz::HeatmapFigureOptions options;
        options.Text = PanelText(text);
        for (int l = 0; l < n_layer; ++l) options.RowLabels.push_back("L" + std::to_string(l));
        if (labels.empty()) {
            for (int h = 0; h < n_head; ++h) labels.push_back("H" + std::to_string(h));
            if (columns > n_head) labels.insert(labels.end(), {"attn", "MLP"});
        }
        options.ColLabels = std::move(labels);
        options.RowAxis = "layer";
        options.ColAxis = !axis.empty() ? axis : columns > n_head ? "head, then the layer's whole attention and its MLP" : "head";
        options.ValueLabel = value_label;
        options.Style.causal = false;
        options.Style.colormap = viz::Colormap::Diverging;
        options.Style.range = viz::Range{-most, most};
        const int cells = std::max(n_layer, columns);
        options.MapSize = cells * std::clamp(720 / std::max(cells, 1), 12, 48);  // 48 px cells hold "-0.534" up to 15 columns
        options.CellValues = "%+.3f";
        options.Title = title;
        return viz::HeatmapFigure(values.data(), n_layer, columns, options);
    };
    auto nats = [](const char* format, float v) {
        char text[64];
        std::snprintf(text, sizeof text, format, v);
        return std::string(text);
    };
    std::string title = model_name;
    if (std::string what_ifs = model::FormatInterventions(impacts.on_top); !what_ifs.empty())  // digits and ":*=,x.": no escaping
        title += " \xC2\xB7 on what-ifs " + (what_ifs.size() > 40 ? what_ifs.substr(0, 37) + "..." : what_ifs);
    const std::vector<float> parts = TemperatureParts(impacts, n_layer, n_head);
    const std::string temperatures = "each head's temperatures' part of the loss " + nats("%.4f", impacts.baseline) + ", one at a time (blue: lowered it)";
    if (!impacts.drift) return panel(parts, n_head, largest({&parts}), title + " \xC2\xB7 " + temperatures, "loss - loss at tau = 1, nats");
    // Beside a base: the drift's parts too, a head's weights or a layer's MLP from the base.
    const DriftParts d = MeasuredDriftParts(impacts, n_layer, n_head);
    const int columns = n_head + 2;  // the heads, the layer's whole attention, its MLP
    std::vector<float> drift(static_cast<size_t>(n_layer) * columns, NAN);
    for (int l = 0; l < n_layer; ++l) {
        float* row = drift.data() + static_cast<size_t>(l) * columns;
        for (int h = 0; h < n_head; ++h) row[h] = d.heads[static_cast<size_t>(l) * n_head + h];
        row[n_head] = d.attention[l], row[n_head + 1] = d.mlp[l];
    }
    // Along the layers, each part on top of those before it: from the embeddings up, and from the last MLP down.
    std::vector<float> path(static_cast<size_t>(n_layer) * 4, NAN);
    for (int l = 0; l < n_layer; ++l)
        for (int c = 0; c < 4; ++c) {
            const std::vector<float>& way = c < 2 ? d.path : d.path_down;
            const size_t k = 1 + 2 * static_cast<size_t>(l) + c % 2;
            if (k < way.size()) path[static_cast<size_t>(l) * 4 + c] = way[k];
        }
    // One colour scale for all, as the Fine-tune tab's: a pale temperatures panel beside a dark
    // drift one says the drift moved the loss more.
    const float most = largest({&parts, &drift, &path});
    return viz::Beside({panel(parts, n_head, most, "temperatures: loss - loss with the head at tau = 1", "nats"),
                        panel(drift, columns, most, "drift: loss - loss with the base's weights there", "nats"),
                        panel(path, 4, most, "drift along the layers, each on top of those before it", "nats", {"attn", "MLP", "attn", "MLP"},
                              "from the embeddings up | from the last MLP down")},
                       title + " \xC2\xB7 each part's effect on the loss " + nats("%.4f", impacts.baseline) +
                           ", one colour scale (blue: lowered it) \xC2\xB7 drift of the embeddings " + nats("%+.3f", d.embeddings) +
                           " alone or first, " + nats("%+.3f", d.path_down.empty() ? NAN : d.path_down[0]) + " last; of every weight (SSA's temperatures kept) " + nats("%+.3f", d.all) +
                           (impacts.base_temperatures.empty() ? "" : " \xC2\xB7 the base has its own " + impacts.base_temperatures),
                       text);
}

namespace {

// A map area wide enough that each of `tokens` columns is labelled (15 px a column, as
// finetune_loss.png's bars) up to kFineTuneLossBars tokens; past them, or for fewer than fit 720
// px so, the heatmaps' own size (0). Every figure of the text's tokens then labels every token
// where finetune_loss does (head_impacts_tokens named every other at 86 tokens, its largest
// cell's among those unnamed).
int TokenColumnsMapSize(int tokens) { return tokens > 48 && tokens <= kFineTuneLossBars ? 15 * tokens : 0; }

// Parts token by token as a heatmap: `rows` rows of `tokens` values (token t + 1's loss in column
// t), named, on DivergingScaleOf's scale.
viz::Figure TokenPartsFigure(const std::vector<float>& values, const std::vector<std::string>& row_labels, int tokens,
                             const std::vector<std::string>& token_labels, const std::string& title, const std::string& row_axis,
                             const viz::FigureText& text) {
    const int rows = static_cast<int>(row_labels.size());
    if (rows == 0 || tokens <= 0 || values.size() != static_cast<size_t>(rows) * tokens) return {};
    const DivergingScale scale = DivergingScaleOf(values);
    viz::HeatmapFigureOptions o;
    o.Text = text;
    o.NarrowTitle = true;  // a figure of its own
    o.Title = title + ScaleNote(scale, "part");
    o.RowLabels = row_labels;
    for (int t = 1; t <= tokens; ++t) o.ColLabels.push_back(static_cast<size_t>(t) < token_labels.size() ? token_labels[t] : "?");
    o.RowAxis = row_axis;
    o.ColAxis = "token (its loss given the tokens before it)";
    o.ValueLabel = "loss change, nats";
    o.MinRowHeight = rows <= 64 ? 15 : 0;  // every row's label over as many tokens as there are (GPT-2 small's 144 heads: thinned)
    o.MapSize = rows <= tokens ? TokenColumnsMapSize(tokens) : 0;
    o.Style.causal = false;
    o.Style.colormap = viz::Colormap::Diverging;
    o.Style.range = viz::Range{-scale.most, scale.most};
    return viz::HeatmapFigure(values.data(), rows, tokens, o);
}

std::string OnWhatIfs(const HeadImpacts& impacts) {
    const std::string what_ifs = model::FormatInterventions(impacts.on_top);  // digits and ":*=,x.": no escaping
    return what_ifs.empty() ? "" : " \xC2\xB7 on what-ifs " + (what_ifs.size() > 40 ? what_ifs.substr(0, 37) + "..." : what_ifs);
}

}  // namespace

viz::Figure HeadImpactsTokensFigure(const HeadImpacts& impacts, int n_layer, int n_head, const std::string& model_name,
                                    const std::vector<std::string>& token_labels, const viz::FigureText& text) {
    const TokenPartsGrid g = HeadTemperatureGrid(impacts, n_layer, n_head);
    if (g.Empty()) return {};  // none measured, or every head at tau = 1
    return TokenPartsFigure(g.values, g.rows, g.tokens, token_labels,
                            model_name + OnWhatIfs(impacts) + " \xC2\xB7 each head's temperatures' part of each token's loss, the head at tau = 1 "
                                                              "one at a time (blue: lowered it)",
                            "head", text);
}

viz::Figure HeadImpactsDriftTokensFigure(const HeadImpacts& impacts, int n_layer, int n_head, const std::string& model_name,
                                         const std::vector<std::string>& token_labels, const viz::FigureText& text) {
    const TokenPartsGrid g = DriftPathGrid(impacts, n_layer, n_head);
    if (g.Empty()) return {};
    return TokenPartsFigure(g.values, g.rows, g.tokens, token_labels,
                            model_name + OnWhatIfs(impacts) + " \xC2\xB7 the drift token by token: each part's weights taken back from the base on "
                                                              "top of the rows above it (blue: lowered the loss; the parts add up to every weight's, "
                                                              "SSA's temperatures kept)",
                            "from the embeddings up", text);
}

int FineTuneLossWindow(size_t n) {
    return n <= static_cast<size_t>(kFineTuneLossBars) ? 0 : std::max(9, static_cast<int>(n / 64) | 1);
}

std::vector<float> CentredMean(const std::vector<float>& y, int window) {
    const int n = static_cast<int>(y.size()), half = window / 2;
    std::vector<double> sum(n + 1, 0.0);
    std::vector<int> count(n + 1, 0);
    for (int t = 0; t < n; ++t) {
        const bool finite = std::isfinite(y[t]);
        sum[t + 1] = sum[t] + (finite ? y[t] : 0.0);
        count[t + 1] = count[t] + (finite ? 1 : 0);
    }
    std::vector<float> out(n, std::nanf(""));
    for (int t = 0; t < n; ++t) {
        const int lo = std::max(0, t - half), hi = std::min(n, t + half + 1);
        if (const int c = count[hi] - count[lo]; c > 0) out[t] = static_cast<float>((sum[hi] - sum[lo]) / c);
    }
    return out;
}

viz::Figure FineTuneLossFigure(const model::Analysis& a, const std::string& model_name, const viz::FigureText& text) {
    const size_t n = a.loss.size();  // entry t: token t + 1's loss
    if (!a.HasBase() || n < 1 || a.loss_compare.size() != n || a.loss_base.size() != n) return {};
    const std::vector<std::string> labels = Labels(a);
    const bool bars = n <= static_cast<size_t>(kFineTuneLossBars);
    viz::Plot plot;
    plot.Options.Title = model_name + " \xC2\xB7 each token's loss change from the base, in two parts";
    plot.Options.Text = text;
    plot.Options.XLabel = bars ? "token (its loss given the tokens before it)" : "token position";
    plot.Options.YLabel = "loss change, nats (below 0: predicted better)";
    // Wide enough that every bar's token is labelled (turned, 15 px apart; at 900 px every other one was).
    plot.Options.Width = bars ? std::max(900, 15 * static_cast<int>(n) + 160) : 900;
    plot.Options.Height = 420;
    viz::PlotSeries parts[2];
    parts[0].Name = TemperaturePartName(a) + ": " + SsaSideName(a) + " - tau = 1";
    parts[1].Name = "drift: tau = 1 - base";
    parts[0].Color = viz::kTemperaturePartColor;
    parts[1].Color = viz::kDriftPartColor;
    float most = 1e-6f;
    for (size_t t = 0; t < n; ++t) {
        parts[0].Y.push_back(a.loss[t] - a.loss_compare[t]);
        parts[1].Y.push_back(a.loss_compare[t] - a.loss_base[t]);
        for (const viz::PlotSeries& p : parts)
            if (std::isfinite(p.Y.back())) most = std::max(most, std::abs(p.Y.back()));
        if (bars) plot.Options.XCategories.push_back(t + 1 < labels.size() ? labels[t + 1] : "?");
    }
    // Symmetric about no change (0, a grid line), as the Fine-tune tab draws it: a gain reads as far
    // below 0 as a loss above; to a round value, so that the axis's ends are labelled (+-9.5 had
    // ticks at +-5 only).
    const std::vector<float> ticks = viz::NiceTicks(viz::Range{-most, most}, false, 5);
    const float step = ticks.size() > 1 ? ticks[1] - ticks[0] : most;
    plot.Options.YRange = viz::Range{-std::ceil(most / step) * step, std::ceil(most / step) * step};
    if (bars) {
        for (viz::PlotSeries& p : parts) p.Kind = viz::SeriesKind::Bars;
        plot.Series = {std::move(parts[0]), std::move(parts[1])};
        return viz::PlotFigure(plot);
    }
    // Past the bars' reach each token's change is noise to the eye: every token's faint, and each
    // part's mean over a window of tokens (odd, about n / 64, at least 9) drawn over them.
    const int window = FineTuneLossWindow(n);
    std::vector<viz::PlotSeries> means;
    for (viz::PlotSeries& p : parts) {
        for (size_t t = 0; t < n; ++t) p.X.push_back(static_cast<float>(t + 1));
        viz::PlotSeries mean = p;
        mean.Y = CentredMean(p.Y, window);
        p.Name.clear();  // the faint lines need no legend entry of their own
        p.Color.a = 70;
        means.push_back(std::move(mean));
    }
    plot.Options.XLabel = "token position (faint: each token; lines: the mean of " + std::to_string(window) + " tokens around it)";
    plot.Series = {std::move(parts[0]), std::move(parts[1]), std::move(means[0]), std::move(means[1])};
    return viz::PlotFigure(plot);
}

viz::Figure SparsityFigure(const model::Analysis& a, const std::string& model_name, const std::string& name, float sink_epsilon,
                           const viz::FigureText& text) {
    const AnalysisPlot* plot = FindSparsityPlot(name);
    assert(plot && "unknown sparsity figure");
    if (!plot) return viz::Figure{};
    const std::vector<HeadSummary> heads = SummarizeHeads(a);
    const PlotInput input{a, heads, model_name, sink_epsilon};
    viz::Plot built = plot->build(input);
    built.Options.Text = text;
    return viz::PlotFigure(built);
}

namespace {

// The lens's axes: "embeddings", "after L0", ... and the tokens predicted, 1 to T - 1: column t - 1
// holds token t's p or loss, labelled with token t as finetune_loss.png and head_impacts_tokens.png
// label the same columns (they were labelled with the token before it, predicting it: one figure's
// column read 'U' where the other's read 'Gener').
void LensAxes(const model::Lens& lens, const std::vector<std::string>& token_labels, viz::HeatmapFigureOptions* o) {
    o->RowLabels = {"embeddings"};
    for (int l = 0; l < lens.n_layer; ++l) o->RowLabels.push_back("after L" + std::to_string(l));
    const size_t n = static_cast<size_t>(std::max(0, lens.n_tokens - 1));
    if (token_labels.size() > 1)
        o->ColLabels.assign(token_labels.begin() + 1, token_labels.begin() + 1 + std::min(token_labels.size() - 1, n));
    o->ColLabels.resize(n, "?");
    o->RowAxis = "read after";
    o->ColAxis = "token (predicted from the tokens before it)";
    o->Style.causal = false;  // every layer at every position
    o->MinRowHeight = 15;     // every layer's label, over as many tokens as there are
    if (static_cast<int64_t>(n) >= static_cast<int64_t>(lens.n_layer) + 1) o->MapSize = TokenColumnsMapSize(static_cast<int>(n));
}

}  // namespace

viz::Figure LensFigure(const model::Lens& lens, const std::string& model_name, const std::string& side_name,
                       const std::vector<std::string>& token_labels, const viz::FigureText& text) {
    std::vector<float> p(lens.loss.size());
    for (size_t i = 0; i < p.size(); ++i) p[i] = std::exp(-lens.loss[i]);
    viz::HeatmapFigureOptions o;
    o.Text = text;
    o.NarrowTitle = true;  // a figure of its own
    o.Title = model_name + " \xC2\xB7 logit lens \xC2\xB7 " + side_name + ": each token's p read after each layer";
    LensAxes(lens, token_labels, &o);
    o.Style.colormap = viz::Colormap::Viridis;
    o.Style.log_scale = true;
    o.Style.range = viz::Range{1e-4f, 1.0f};
    o.ValueLabel = "p(token | the tokens before it)";
    return viz::HeatmapFigure(p.data(), lens.n_layer + 1, lens.n_tokens - 1, o);
}

DivergingScale DivergingScaleOf(const std::vector<float>& values) {
    DivergingScale scale;
    std::vector<float> magnitudes;
    for (float v : values)
        if (std::isfinite(v)) magnitudes.push_back(std::abs(v));
    if (magnitudes.empty()) return scale;
    const size_t rank = static_cast<size_t>(std::ceil(kLensScalePercentile * static_cast<double>(magnitudes.size()))) - 1;
    std::nth_element(magnitudes.begin(), magnitudes.begin() + static_cast<std::ptrdiff_t>(rank), magnitudes.end());
    scale.most = std::max(scale.most, magnitudes[rank]);
    scale.largest = *std::max_element(magnitudes.begin() + static_cast<std::ptrdiff_t>(rank), magnitudes.end());
    return scale;
}

std::string ScaleNote(const DivergingScale& scale, const std::string& of) {
    if (!scale.Clips()) return "";
    char buf[160];
    std::snprintf(buf, sizeof buf, "; scale \xC2\xB1%.3g, the 99th percentile (nearest rank) of |%.40s|, largest %.3g", scale.most, of.c_str(),
                  scale.largest);
    return buf;
}

LensDifference LensDifferenceOf(const model::Lens& ssa, const model::Lens& other) {
    LensDifference d;
    if (other.loss.size() != ssa.loss.size() || other.n_layer != ssa.n_layer) return d;
    d.delta.resize(ssa.loss.size());
    for (size_t k = 0; k < d.delta.size(); ++k) d.delta[k] = ssa.loss[k] - other.loss[k];  // -log p_SSA(next) + log p_other(next)
    static_cast<DivergingScale&>(d) = DivergingScaleOf(d.delta);
    return d;
}

std::string LensScaleNote(const LensDifference& d) { return ScaleNote(d); }

DivergingScale FineTuneLensScale(const model::Lens& ssa, const model::Lens& tau1, const model::Lens& base) {
    std::vector<float> all;
    for (const auto& [a, b] : {std::pair{&ssa, &tau1}, std::pair{&ssa, &base}, std::pair{&tau1, &base}}) {
        const LensDifference d = LensDifferenceOf(*a, *b);
        all.insert(all.end(), d.delta.begin(), d.delta.end());
    }
    return DivergingScaleOf(all);
}

viz::Figure LensDiffFigure(const model::Lens& ssa, const model::Lens& other, const std::string& model_name, const std::string& ssa_name,
                           const std::string& other_name, const std::vector<std::string>& token_labels, const viz::FigureText& text,
                           const DivergingScale* shared) {
    LensDifference d = LensDifferenceOf(ssa, other);
    if (d.delta.empty()) return {};
    if (shared) d.most = shared->most;  // the scale's end is the three's; the largest, and whether it clips, this one's
    viz::HeatmapFigureOptions o;
    o.Text = text;
    o.NarrowTitle = true;  // a figure of its own
    // What the colours mean goes in the title: the bar's caption sets the bar's length (centred
    // along it), and a long one made a five-row grid a thin strip atop a tall blank figure.
    o.Title = model_name + " \xC2\xB7 logit lens \xC2\xB7 " + ssa_name + " - " + other_name + ": each token's loss read after each layer (blue: " + ssa_name +
              " predicts it better" + (shared ? "; one scale for the fine-tune's three differences" : "") +
              LensScaleNote(d) + ")";
    LensAxes(ssa, token_labels, &o);
    o.Style.colormap = viz::Colormap::Diverging;
    o.Style.range = viz::Range{-d.most, d.most};
    o.ValueLabel = "loss change, nats";  // whose: the title's (a side's name made the bar taller than five rows)
    return viz::HeatmapFigure(d.delta.data(), ssa.n_layer + 1, ssa.n_tokens - 1, o);
}

}  // namespace app
