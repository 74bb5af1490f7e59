#include "app/export/session.h"

#include "app/export/run_curves.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/export/flags.h"
#include "model/io/files.h"

namespace app {
using nlohmann::json;

namespace {

// The names a view setting holds (a metric, a tab) are short; a longer one is not a name.
constexpr size_t kMaxNameBytes = 64;

struct BadKey {
    std::string message;
};

// Optional keys of one JSON object, read with their types checked; a problem names the key path.
class Reader {
public:
    Reader(const json& j, std::string where) : m_j(j), m_where(std::move(where)) {
        if (!m_j.is_object()) throw BadKey{Name("") + " must be an object"};
    }

    bool Has(const char* key) const { return m_j.contains(key) && !m_j.at(key).is_null(); }

    template <typename T>
    void Read(const char* key, T* out) const {
        if (!Has(key)) return;
        const json& v = m_j.at(key);
        if constexpr (std::is_same_v<T, bool>) {
            if (!v.is_boolean()) throw BadKey{Name(key) + " must be true or false"};
        } else if constexpr (std::is_same_v<T, std::string>) {
            if (!v.is_string()) throw BadKey{Name(key) + " must be a string"};
        } else if constexpr (std::is_integral_v<T>) {
            // Checked before it is narrowed: 4294967297 must not read as 1.
            using Limits = std::numeric_limits<T>;
            if (!v.is_number_integer()) throw BadKey{Name(key) + " must be an integer, not " + model::DescribeJson(v)};
            const int64_t x = v.is_number_unsigned() ? 0 : v.get<int64_t>();
            const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(Limits::max())
                                                     : x >= static_cast<int64_t>(Limits::min()) &&
                                                           (x < 0 || static_cast<uint64_t>(x) <= static_cast<uint64_t>(Limits::max()));
            if (!fits)
                throw BadKey{Name(key) + " must be an integer from " + std::to_string(Limits::min()) + " to " + std::to_string(Limits::max()) +
                             ", not " + model::DescribeJson(v)};
        } else {
            if (!v.is_number()) throw BadKey{Name(key) + " must be a number, not " + model::DescribeJson(v)};
            if (!(std::abs(v.get<double>()) <= static_cast<double>(std::numeric_limits<T>::max())))  // 1e308 was "must be a number"
                throw BadKey{Name(key) + " is out of range: " + model::DescribeJson(v) + " is more than a float holds"};
        }
        *out = v.get<T>();
    }

    // A string key parsed by `parse` (returns std::optional), e.g. a colour map name.
    template <typename T, typename Parse>
    void ReadEnum(const char* key, T* out, Parse parse, const std::string& expected) const {
        std::string name;
        Read(key, &name);
        if (!Has(key)) return;
        auto value = parse(name);
        if (!value) throw BadKey{Name(key) + ": " + QuoteForMessage(name) + " is not one of " + expected};
        *out = *value;
    }

    Reader Child(const char* key) const { return Reader(Has(key) ? m_j.at(key) : Empty(), m_where + key + "."); }
    // "'view.map_zoom'"; the object itself as "the session" (top level) or "'view'" (m_where "view.").
    std::string Name(const std::string& key) const {
        if (!key.empty()) return "'" + m_where + key + "'";
        return m_where.empty() ? "the session" : "'" + m_where.substr(0, m_where.size() - 1) + "'";
    }

private:
    static const json& Empty() {
        static const json empty = json::object();
        return empty;
    }
    const json& m_j;
    std::string m_where;
};

// A head value of the catalogue (the heads grid's badge, the matrix), kept as the session names it
// ("tau_q", as older sessions saved the badge's tau_q mean, stays "tau_q").
std::optional<std::string> HeadValueName(const std::string& name) {
    return FindHeadValue(name) ? std::optional<std::string>(name) : std::nullopt;
}

// The heads matrix's: a head value, or a run's steps to sparsity (shown while a run is open).
std::optional<std::string> MatrixValueName(const std::string& name) {
    return name == kStepsToSparsityKey ? std::optional<std::string>(name) : HeadValueName(name);
}

// The Run tab's curve.
std::optional<std::string> RunCurveName(const std::string& name) {
    return IsRunCurveKey(name) ? std::optional<std::string>(name) : std::nullopt;
}
std::string RunCurveNames() {
    std::string out;
    for (const char* k : kRunHeadValues) out += std::string(out.empty() ? "" : ", ") + k;
    for (const char* k : kRunBaseValues) out += std::string(", ") + k;
    return out + ", loss, " + kRunTokenCurve + ", " + kRunLensCurve + ", " + kRunLensDiffCurve + ", " + kRunLensDiffBaseCurve;
}

HeadRef ReadHead(const json& v, const std::string& name) {
    if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer() || v[0].get<int64_t>() < 0 ||
        v[1].get<int64_t>() < 0 || v[0].get<int64_t>() > 1 << 16 || v[1].get<int64_t>() > 1 << 16)
        throw BadKey{"'" + name + "' must be [layer, head] with non-negative integers"};
    return {v[0].get<int>(), v[1].get<int>()};
}

json HeadRefJson(HeadRef h) { return json::array({h.layer, h.head}); }

// [layer, head, map]; [layer, head] (older sessions) pins the SSA map.
Pin ReadPin(const json& v) {
    if (!v.is_array() || (v.size() != 2 && v.size() != 3)) throw BadKey{"'pinned' must be an array of [layer, head, map]"};
    const HeadRef h = ReadHead(json::array({v[0], v[1]}), "pinned");
    Pin pin{h.layer, h.head, MapMode::Ssa};
    if (v.size() == 3) {
        const auto mode = v[2].is_string() ? ParseMapMode(v[2].get<std::string>()) : std::nullopt;
        if (!mode) throw BadKey{"'pinned': the map of a pinned head must be one of ssa, compare, diff, base, base_diff"};
        pin.mode = *mode;
    }
    return pin;
}

// The part of a session the flags say, as a command line would set it.
CommandOptions SessionFlags(const Session& s) {
    CommandOptions o;
    o.model_dir = s.model_dir;
    if (!s.run_dir.empty()) o.run = s.run_dir;
    if (!s.compare_run_dir.empty()) o.compare_run = s.compare_run_dir;
    o.compare = s.compare;
    if (!s.interventions.empty()) o.ablate = model::FormatInterventions(s.interventions);
    o.device = s.device;
    o.text = s.text;
    o.truncate = s.truncate;
    o.export_options = s.export_options;
    o.out = s.export_options.out_dir;
    return o;
}

}  // namespace

json ExportOptionsToJson(const ExportOptions& options) {
    Session s;
    s.export_options = options;
    return FlagsToSession(SessionFlags(s))["export"];
}

json SessionToJson(const Session& s) {
    json pinned = json::array();
    for (const Pin& p : s.pinned) pinned.push_back(json::array({p.layer, p.head, ToString(p.mode)}));
    const ViewSettings& v = s.settings;
    json j = FlagsToSession(SessionFlags(s));
    j.update(json{{"ssaviz_session", kSessionVersion},
                {"selected", HeadRefJson(s.selected)},
                {"pinned", pinned},
                {"query", s.query},
                {"view",
                 {{"colormap", viz::ColormapName(v.colormap)},
                  {"log_scale", v.log_scale},
                  {"map", ToString(v.map_mode)},
                  {"token_color", ToString(v.token_color)},
                  {"token_scope", ToString(v.token_scope)},
                  {"sink_epsilon", v.sink_epsilon},
                  {"grid_metric", v.grid_metric},
                  {"map_zoom", v.map_view.zoom},
                  {"map_pan", {v.map_view.pan_x, v.map_view.pan_y}},
                  {"split", v.split},
                  {"three_way", v.three_way},
                  {"grid_map", ToString(v.grid_mode)},
                  {"per_head_scale", v.per_head_scale},
                  {"matrix_metric", v.matrix_metric},
                  {"run_curve", v.run_curve},
                  {"lens_map", ToString(v.lens_map)},
                  {"ranking", ToString(v.ranking)},
                  {"lens_target", ToString(v.lens_target)},
                  {"grid_cell", v.grid_cell},
                  {"tab", v.right_tab},
                  {"layout",
                   {{"columns", {v.layout.left, v.layout.center, v.layout.right}},
                    {"editor", v.layout.editor},
                    {"editor_open", v.layout.editor_open}}}}}});
    return j;
}

namespace {

// The keys of `given` that `known` (every key a session is written with) lacks, recursively into
// objects, as one-line warnings naming each and where a key of that name belongs. At most
// kMaxWarnings are listed, then how many more.
void WarnUnknownKeys(const json& given, const json& known, const std::string& path, std::vector<std::string>* out) {
    constexpr size_t kMaxWarnings = 20;
    if (!given.is_object()) return;
    size_t more = 0;
    for (const auto& [key, value] : given.items()) {
        const std::string name = path.empty() ? key : path + "." + key;
        if (known.contains(key)) {
            if (value.is_object() && known[key].is_object()) WarnUnknownKeys(value, known[key], name, out);
            continue;
        }
        if (out->size() >= kMaxWarnings) {
            ++more;
            continue;
        }
        std::string hint;
        for (const char* part : {"view", "export"})
            if (path.empty() && known.contains(part) && known[part].contains(key)) hint = "; did you mean '" + std::string(part) + "." + key + "'?";
        out->push_back("session key " + QuoteForMessage(name) + " is not one this ssaviz reads (ignored" + hint + ")");
    }
    if (more) out->push_back("and " + std::to_string(more) + " more session keys it does not read (ignored)");
}

}  // namespace

model::Result<Session> SessionFromJson(const json& j) {
    try {
        Reader r(j, "");
        if (!r.Has("ssaviz_session")) throw BadKey{"not an ssaviz session file (no 'ssaviz_session' key)"};
        int version = 0;
        r.Read("ssaviz_session", &version);
        if (version != kSessionVersion)
            throw BadKey{"session version " + std::to_string(version) + " is not supported (this ssaviz reads version " +
                         std::to_string(kSessionVersion) + ")"};
        // The keys a flag also says, through its handler; a session's export starts from the
        // dialog's defaults, not the command line's.
        Session s;
        CommandOptions o;
        o.export_options = s.export_options;
        if (auto flags = FlagsFromSession(j, &o); !flags) throw BadKey{flags.error()};
        s.model_dir = o.model_dir.value_or("");
        s.run_dir = o.run.value_or("");
        s.compare_run_dir = o.compare_run.value_or("");
        if (!s.compare_run_dir.empty() && s.run_dir.empty()) throw BadKey{"'compare_run' goes with 'run' (a run to compare it with)"};
        s.compare = o.compare;
        // Before any model opens, by its key (it was found once the model had loaded, as if a flag).
        if (const std::string why = MistypedComparison(s.compare); !why.empty()) throw BadKey{"'compare': " + why};
        s.device = o.device.value_or(s.device);
        s.text = o.text.value_or("");
        // The editor holds C strings: a NUL would hide the text after it while the model reads it all.
        if (const size_t nul = s.text.find('\0'); nul != std::string::npos)
            throw BadKey{"'text' holds a NUL character at byte " + std::to_string(nul) + " (the window's editor would hide what follows it)"};
        s.truncate = o.truncate;
        s.export_options = o.export_options;
        s.export_options.out_dir = o.out;
        if (o.ablate && !o.ablate->empty()) {
            // The model's shape is not known here: the syntax is checked now, the layers and heads
            // when the model opens (what does not fit it is dropped with a note).
            constexpr int kAnyShape = 1 << 16;
            auto list = model::ParseInterventions(*o.ablate, kAnyShape, kAnyShape);
            if (!list) {  // the parser names the model's shape, which here is a placeholder
                const std::string why = list.error().substr(0, list.error().find(" (the model has"));
                throw BadKey{"'interventions': " + why + " (the --ablate syntax: L:H or L:*, then =pos, =tok or =xS)"};
            }
            s.interventions = std::move(*list);
        }
        if (r.Has("selected")) s.selected = ReadHead(j.at("selected"), "selected");
        if (r.Has("pinned")) {
            if (!j.at("pinned").is_array()) throw BadKey{"'pinned' must be an array of [layer, head]"};
            // A head pinned twice is one pin (the first); more than the window shows is refused.
            std::set<std::pair<int, int>> seen;
            for (const json& p : j.at("pinned")) {
                const Pin pin = ReadPin(p);
                if (!seen.insert({pin.layer, pin.head}).second) continue;
                if (s.pinned.size() == kMaxPins)
                    throw BadKey{"'pinned' holds more than " + std::to_string(kMaxPins) + " heads, the most the window pins"};
                s.pinned.push_back(pin);
            }
        }
        r.Read("query", &s.query);
        if (s.query < -1) throw BadKey{"'query' must be -1 (none) or a token index"};
        const Reader v = r.Child("view");
        ViewSettings& vs = s.settings;
        v.ReadEnum("colormap", &vs.colormap, ParseSessionColormap, "viridis, magma");
        v.Read("log_scale", &vs.log_scale);
        v.ReadEnum("map", &vs.map_mode, ParseMapMode, "ssa, compare, diff, base, base_diff");
        v.ReadEnum("token_color", &vs.token_color, ParseTokenColor, TokenColorKeys());
        v.ReadEnum("token_scope", &vs.token_scope, ParseTokenScope, "head, layer, model");
        v.Read("sink_epsilon", &vs.sink_epsilon);
        if (!(vs.sink_epsilon > 0 && vs.sink_epsilon < 1)) throw BadKey{"'view.sink_epsilon' must be in (0, 1)"};
        v.ReadEnum("grid_metric", &vs.grid_metric, HeadValueName, HeadValueKeys());
        v.Read("map_zoom", &vs.map_view.zoom);
        if (!(vs.map_view.zoom >= 1.0f && vs.map_view.zoom <= 1e6f)) throw BadKey{"'view.map_zoom' must be from 1 (the whole map) to 1000000"};
        if (j.contains("view") && j["view"].is_object() && j["view"].contains("map_pan") && !j["view"]["map_pan"].is_null()) {  // null: the default
            const json& pan = j["view"]["map_pan"];
            if (!pan.is_array() || pan.size() != 2 || !pan[0].is_number() || !pan[1].is_number() || !(pan[0].get<double>() >= 0) ||
                !(pan[1].get<double>() >= 0))
                throw BadKey{"'view.map_pan' must be [x, y], the top-left visible cell"};
            vs.map_view.pan_x = pan[0].get<float>();
            vs.map_view.pan_y = pan[1].get<float>();
        }
        v.Read("split", &vs.split);
        v.Read("three_way", &vs.three_way);
        v.ReadEnum("grid_map", &vs.grid_mode, ParseMapMode, "ssa, compare, diff, base, base_diff");
        v.Read("per_head_scale", &vs.per_head_scale);
        v.ReadEnum("matrix_metric", &vs.matrix_metric, MatrixValueName, HeadValueKeys() + ", " + kStepsToSparsityKey);
        v.ReadEnum("run_curve", &vs.run_curve, RunCurveName, RunCurveNames());
        v.ReadEnum("lens_map", &vs.lens_map, ParseLensGrid, "ssa, compare, diff, base, base_diff, drift");
        v.ReadEnum("ranking", &vs.ranking, ParseRankingView, "table, tokens, drift, drift-parts");
        v.ReadEnum("lens_target", &vs.lens_target, ParseLensTarget, "next, top, next-against-other");
        v.Read("grid_cell", &vs.grid_cell);
        v.Read("tab", &vs.right_tab);
        {  // A tab's label, read as --tab reads one ("fine-tune" is "Fine-tune"); another was taken in silence.
            const std::string flag = vs.right_tab.size() <= kMaxNameBytes ? FindTabFlag(vs.right_tab) : "";
            std::string labels;
            for (const char* tab : LaunchOptions::kTabs) {
                labels += (labels.empty() ? "" : ", ") + std::string(tab);
                if (!flag.empty() && TabFlag(tab) == flag) vs.right_tab = tab;
            }
            if (flag.empty()) throw BadKey{"'view.tab' is not a tab's name (" + QuoteForMessage(vs.right_tab) + "): one of " + labels};
        }
        if (!(vs.grid_cell == 0 || (vs.grid_cell >= 8 && vs.grid_cell <= 512))) throw BadKey{"'view.grid_cell' must be 0 (fit) or 8..512 pixels"};
        const Reader layout = v.Child("layout");
        layout.Read("editor", &vs.layout.editor);
        layout.Read("editor_open", &vs.layout.editor_open);
        if (!(vs.layout.editor >= 0.05f && vs.layout.editor <= 0.9f)) throw BadKey{"'view.layout.editor' must be a share of the column, 0.05..0.9"};
        if (j.contains("view") && j["view"].is_object() && j["view"].contains("layout") && j["view"]["layout"].is_object() &&
            j["view"]["layout"].contains("columns")) {
            const json& c = j["view"]["layout"]["columns"];
            // Shares of their sum: checked once they are shares ([0.25, 0.5, 4294967296] leaves two
            // columns no width, and a session saved from it would not read back).
            const bool numbers = c.is_array() && c.size() == 3 && c[0].is_number() && c[1].is_number() && c[2].is_number();
            const double sum = numbers ? c[0].get<double>() + c[1].get<double>() + c[2].get<double>() : 0.0;
            if (!numbers || !(sum > 0) || !std::isfinite(sum) || !(c[0].get<double>() / sum > 0.02) || !(c[1].get<double>() / sum > 0.02) ||
                !(c[2].get<double>() / sum > 0.02))
                throw BadKey{"'view.layout.columns' must be [left, center, right], shares of the width above 0.02"};
            vs.layout.left = static_cast<float>(c[0].get<double>() / sum);
            vs.layout.center = static_cast<float>(c[1].get<double>() / sum);
            vs.layout.right = static_cast<float>(c[2].get<double>() / sum);
        }
        WarnUnknownKeys(j, SessionToJson(Session{}), "", &s.warnings);
        return s;
    } catch (const BadKey& e) {
        return model::Fail("session: " + e.message);
    } catch (const json::exception& e) {  // a path the checks above missed: bounded, like every echo
        return model::Fail("session: " + model::JsonErrorText(e));
    }
}

model::Status SaveSession(const std::string& path, const Session& session) {
    return model::WriteFileAtomically(path, model::JsonText(SessionToJson(session), 1) + "\n");
}

model::Result<Session> LoadSession(const std::string& path) {
    auto text = model::ReadFile(path, model::kMaxJsonFileBytes);
    if (!text) return model::Fail(text.error() + " (cannot read session file)");
    std::vector<std::string> duplicates;
    auto j = model::ParseJsonText(*text, &duplicates);
    if (!j) return model::Fail(model::EscapeForMessage(path) + ": not valid JSON (" + j.error() + ")");
    auto s = SessionFromJson(*j);
    if (!s) return model::Fail(model::EscapeForMessage(path) + ": " + s.error());
    for (const std::string& key : duplicates)
        s->warnings.push_back("session key " + QuoteForMessage(key) + " is given more than once (the last is used)");
    return s;
}

}  // namespace app
