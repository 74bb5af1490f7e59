#include "app/core/state.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "model/text/tokenizer.h"
#include "model/text/utf8.h"

namespace app {
namespace {

void AppendEscaped(unsigned char c, std::string* out) {
    switch (c) {
        case '\n': *out += "\\n"; return;
        case '\t': *out += "\\t"; return;
        case '\r': *out += "\\r"; return;
        default: break;
    }
    if (c < 0x20 || c >= 0x7F) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02X", c);
        *out += buf;
    } else {
        *out += static_cast<char>(c);
    }
}

}  // namespace

std::string TokenLabel(const std::string& piece) {
    std::string out;
    for (size_t i = 0; i < piece.size();) {
        const model::Utf8Char c = model::DecodeUtf8(piece, i);
        const size_t n = c.length;
        if (n > 1 && (model::IsHiddenControl(c.code_point) || model::IsInvisibleFormat(c.code_point))) {  // C1 and bidirectional controls: shown, not obeyed; a zero-width space: shown
            char buf[12];
            std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(c.code_point));
            out += buf;
            i += n;
        } else if (n > 1) {  // a whole character passes through
            out.append(piece, i, n);
            i += n;
        } else {  // ASCII (escaped if a control character), or a byte that is not a whole character
            AppendEscaped(static_cast<unsigned char>(piece[i]), &out);
            ++i;
        }
    }
    if (out.empty()) return "''";
    if (out.find_first_not_of(' ') == std::string::npos) {
        std::string dots;
        for (size_t k = 0; k < out.size(); ++k) dots += "\xC2\xB7";  // U+00B7
        return dots;
    }
    return out;
}

std::vector<CharacterRun> CharacterRuns(const std::vector<std::string>& pieces) {
    const int T = static_cast<int>(pieces.size());
    std::vector<CharacterRun> runs(T);
    for (int i = 0; i < T; ++i) runs[i] = {i, i};
    auto whole = [](const std::string& bytes) { return model::FindInvalidUtf8(bytes) == std::string::npos; };
    constexpr int kMaxRun = 8;  // a character is at most 4 bytes: a run this long is not one character split up
    for (int i = 0; i < T;) {
        if (whole(pieces[i])) {
            ++i;
            continue;
        }
        std::string bytes = pieces[i];
        int j = i;
        while (!whole(bytes) && j + 1 < T && j - i + 1 < kMaxRun) bytes += pieces[++j];
        if (j == i || !whole(bytes)) {
            ++i;  // bytes that never complete (a cut text, invalid input): the escapes stay
            continue;
        }
        for (int k = i; k <= j; ++k) runs[k] = {i, j};
        i = j + 1;
    }
    return runs;
}

std::string CharacterPart(const std::vector<std::string>& pieces, const std::vector<CharacterRun>& runs, int token,
                          const std::function<std::string(const std::string&)>& show) {
    const CharacterRun r = runs[token];
    if (r.first == r.last) return "";
    std::string bytes;
    for (int k = r.first; k <= r.last; ++k) bytes += pieces[k];
    return show(bytes) + " " + std::to_string(token - r.first + 1) + "/" + std::to_string(r.last - r.first + 1);
}

std::vector<std::string> TokenLabels(const model::Tokenization& tokens) {
    const std::vector<std::string>& pieces = tokens.pieces;
    const std::vector<CharacterRun> runs = CharacterRuns(pieces);
    std::vector<std::string> labels;
    labels.reserve(pieces.size());
    for (size_t k = 0; k < pieces.size(); ++k) {
        std::string part = CharacterPart(pieces, runs, static_cast<int>(k), TokenLabel);
        labels.push_back(part.empty() ? TokenLabel(pieces[k]) : std::move(part));
    }
    return labels;
}

void AppState::RequestGlobalPass(bool on) {
    if (!twin && on == (!layer_local && !compare_unedited)) return;  // runs already (a twin is closed by the request)
    layer_local_request = !on;
    global_pass_running = on && model && ScaleOf(*model, big_model_parameters).big;
}

bool AppState::IsPinned(HeadRef h) const {
    return std::any_of(pinned.begin(), pinned.end(), [&](const Pin& p) { return p.Ref() == h; });
}

bool AppState::TogglePin(HeadRef h) {
    auto it = std::find_if(pinned.begin(), pinned.end(), [&](const Pin& p) { return p.Ref() == h; });
    if (it != pinned.end()) pinned.erase(it);
    else if (pinned.size() >= kMaxPins) return false;
    else pinned.push_back({h.layer, h.head, settings.map_mode});
    return true;
}

bool AppState::IsGenerated(const model::Tokenization& tokens, int i) const {
    if (generated_prefix.empty() || i < 0 || i >= static_cast<int>(tokens.offsets.size())) return false;
    const auto [begin, end] = tokens.offsets[i];
    return begin >= generated_begin && end <= generated_prefix.size();
}

void AppState::ForgetGeneratedIfEdited() {
    if (text.compare(0, generated_prefix.size(), generated_prefix) != 0) generated_prefix.clear();
}

void AppState::ClampSelection() {
    const int L = Layers(), H = Heads(), T = Tokens();
    if (L == 0) return;
    selected.layer = std::clamp(selected.layer, 0, L - 1);
    selected.head = std::clamp(selected.head, 0, H - 1);
    if (query >= T) query = T - 1;
    pinned.erase(std::remove_if(pinned.begin(), pinned.end(), [&](const Pin& p) { return p.layer >= L || p.head >= H; }), pinned.end());
}

const char* ToString(TokenScope scope) {
    switch (scope) {
        case TokenScope::Head: return "head";
        case TokenScope::LayerMean: return "layer";
        case TokenScope::ModelMean: return "model";
    }
    return "?";
}

std::optional<TokenScope> ParseTokenScope(const std::string& name) {
    for (TokenScope s : {TokenScope::Head, TokenScope::LayerMean, TokenScope::ModelMean})
        if (name == ToString(s)) return s;
    return std::nullopt;
}

const char* ToString(RankingView view) {
    switch (view) {
        case RankingView::Table: return "table";
        case RankingView::Tokens: return "tokens";
        case RankingView::Drift: return "drift";
        case RankingView::DriftParts: return "drift-parts";
    }
    return "?";
}

std::optional<RankingView> ParseRankingView(const std::string& name) {
    for (RankingView v : {RankingView::Table, RankingView::Tokens, RankingView::Drift, RankingView::DriftParts})
        if (name == ToString(v)) return v;
    return std::nullopt;
}

const char* ToString(LensTarget target) {
    switch (target) {
        case LensTarget::Next: return "next";
        case LensTarget::Top: return "top";
        case LensTarget::NextAgainstOther: return "next-against-other";
    }
    return "?";
}

std::optional<LensTarget> ParseLensTarget(const std::string& name) {
    for (LensTarget t : {LensTarget::Next, LensTarget::Top, LensTarget::NextAgainstOther})
        if (name == ToString(t)) return t;
    return std::nullopt;
}

const char* ToString(LensGrid grid) {
    switch (grid) {
        case LensGrid::Ssa: return ToString(MapMode::Ssa);
        case LensGrid::Compare: return ToString(MapMode::Compare);
        case LensGrid::Difference: return ToString(MapMode::Difference);
        case LensGrid::Base: return ToString(MapMode::Base);
        case LensGrid::BaseDifference: return ToString(MapMode::BaseDifference);
        case LensGrid::Drift: return "drift";
    }
    return "?";
}

std::optional<LensGrid> ParseLensGrid(const std::string& name) {
    if (name == "drift") return LensGrid::Drift;
    const std::optional<MapMode> mode = ParseMapMode(name);  // with the names it reads besides (vanilla, diff_base)
    if (!mode) return std::nullopt;
    switch (*mode) {
        case MapMode::Ssa: return LensGrid::Ssa;
        case MapMode::Compare: return LensGrid::Compare;
        case MapMode::Difference: return LensGrid::Difference;
        case MapMode::Base: return LensGrid::Base;
        case MapMode::BaseDifference: return LensGrid::BaseDifference;
    }
    return std::nullopt;
}

std::optional<viz::Colormap> ParseColormap(const std::string& name) {
    // An attention map's colours: the diverging map is the differences' own, never chosen.
    for (viz::Colormap c : {viz::Colormap::Viridis, viz::Colormap::Magma})
        if (name == viz::ColormapName(c)) return c;
    return std::nullopt;
}

std::optional<viz::Colormap> ParseSessionColormap(const std::string& name) {
    return name == "diverging" ? std::optional(viz::Colormap::Viridis) : ParseColormap(name);
}

float ScopedTokenValue(const model::Analysis& a, const model::RowArray& rows, TokenScope scope, HeadRef head, int i) {
    if (scope == TokenScope::Head) return rows.At(static_cast<int64_t>(head.layer) * a.n_head + head.head, i);
    const int l_begin = scope == TokenScope::LayerMean ? head.layer : 0;
    const int l_end = scope == TokenScope::LayerMean ? head.layer + 1 : a.n_layer;
    double sum = 0;
    int count = 0;
    for (int l = l_begin; l < l_end; ++l)
        for (int h = 0; h < a.n_head; ++h) {
            const float v = rows.At(static_cast<int64_t>(l) * a.n_head + h, i);
            if (std::isfinite(v)) sum += v, ++count;
        }
    return count > 0 ? static_cast<float>(sum / count) : NAN;
}

TemperatureScale TemperatureRange(const model::Analysis& a, const model::RowArray& tau, std::optional<HeadRef> head, float offset) {
    const int64_t begin = head ? static_cast<int64_t>(head->layer) * a.n_head + head->head : 0;
    const int64_t end = std::min(head ? begin + 1 : tau.rows(), tau.rows());
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t row = begin; row < end && tau.tokens() > 0; ++row) {
        // v + offset rounds monotonically in v, so a row of finite values (a finite sum) has its
        // extremes at its min and max, which its bands keep; another row is read through.
        const model::RowArray::Running f = tau.Figures(row);
        if (std::isfinite(f.sum)) {
            lo = std::min(lo, f.min + offset), hi = std::max(hi, f.max + offset);
            continue;
        }
        tau.ForEachPart(row, [&](int64_t, const float* v, int64_t n) {
            for (int64_t k = 0; k < n; ++k)
                if (std::isfinite(v[k])) lo = std::min(lo, v[k] + offset), hi = std::max(hi, v[k] + offset);
        });
    }
    return TemperatureScaleOver(lo, hi);
}

TemperatureScale TemperatureScaleOver(float lo, float hi) {
    const bool any = lo <= hi;
    const float d = any ? std::max({0.05f, std::abs(lo - 1.0f), std::abs(hi - 1.0f)}) : 0.05f;
    const bool below = any && lo < 1.0f, above = any && hi > 1.0f;
    TemperatureScale s;
    s.range = {1.0f - d, 1.0f + d};
    // The legend: from the lowest value to the highest, and 1 (white) between or at an end; the
    // whole scale when no value differs from 1.
    s.used = below || above ? viz::Range{below ? lo : 1.0f, above ? hi : 1.0f} : s.range;
    return s;
}

viz::Range SharedMapRange(std::initializer_list<const model::MapExtent*> maps, bool log_scale) {
    float hi = 0.0f, lo_positive = 1.0f;
    for (const model::MapExtent* e : maps)
        if (e) {
            hi = std::max(hi, e->max);
            lo_positive = std::min(lo_positive, e->min_positive);
        }
    if (!(hi > 0.0f)) hi = 1.0f;
    return log_scale ? viz::Range{std::min(std::max(lo_positive, 1e-6f), hi * 0.1f), hi} : viz::Range{0.0f, hi};
}

viz::Image BakeMapWindow(const model::MapCells& map, const viz::HeatmapStyle& style, viz::Range range, int level, int row0, int col0,
                         int rows, int cols) {
    if (level < 0 || level > 31 || row0 < 0 || col0 < 0) return {};
    const int n = static_cast<int>((static_cast<int64_t>(map.Tokens()) + (int64_t{1} << level) - 1) >> level);
    rows = std::min(rows, n - row0);
    cols = std::min(cols, n - col0);
    if (rows <= 0 || cols <= 0) return {};
    const size_t count = static_cast<size_t>(rows) * static_cast<size_t>(cols);
    if (map.OnDevice()) {
        const viz::ColourScale colour(style.colormap, range, style.log_scale, SIZE_MAX);  // its steps, whatever the size
        model::TexelScale scale;
        static_assert(sizeof(viz::Rgba8) == sizeof(uint32_t) && sizeof scale.table == sizeof colour.Colours(), "RGBA8 texels");
        if (colour.Steps(&scale.steps)) {  // else (a range that is not finite) on the host
            std::memcpy(scale.table.data(), colour.Colours().data(), sizeof scale.table);
            std::memcpy(&scale.blank, &style.blank, sizeof scale.blank);
            const std::vector<uint32_t> texels = map.Texels(level, row0, col0, rows, cols, scale);
            if (texels.size() != count) return {};
            viz::Image image;
            image.width = cols;
            image.height = rows;
            image.pixels.resize(count);
            static_assert(std::is_trivially_copyable_v<viz::Rgba8>, "texels copy into pixels byte for byte");
            std::memcpy(static_cast<void*>(image.pixels.data()), texels.data(), count * sizeof(uint32_t));
            return image;
        }
    }
    const std::vector<float> cells = map.Cells(level, row0, col0, rows, cols);
    if (cells.size() != count) return {};
    return viz::BakeHeatmapWindow(cells.data(), row0, col0, rows, cols, cols, rows, style, range);
}

viz::Range SharedMapRange(const float* ssa, const float* compare, int T, bool log_scale) {
    const model::MapExtent a = ssa ? model::HostMapExtent(ssa, T) : model::MapExtent{};
    const model::MapExtent b = compare ? model::HostMapExtent(compare, T) : model::MapExtent{};
    return SharedMapRange({ssa ? &a : nullptr, compare ? &b : nullptr}, log_scale);
}

}  // namespace app
