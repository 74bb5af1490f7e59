#include "app/export/run_curves.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iterator>

#include "app/core/examples.h"
#include "app/core/names.h"
#include "model/io/files.h"
#include "viz/colormap.h"
#include "viz/palette.h"
#include "viz/ticks.h"

namespace app {

namespace fs = std::filesystem;

void RunTimeline::Add(int64_t step, const std::string& checkpoint, const model::Analysis& a) {
    if (!a.loss_compare.empty()) compare_name = CompareName(a);
    Add(step, checkpoint, a.n_layer, a.n_head, SummarizeHeads(a),
        {model::MeanLoss(a.loss), model::MeanLoss(a.loss_compare), a.HasBase() ? model::MeanLoss(a.loss_base) : NAN}, a.n_tokens, a.tau_q.Flat());
}

void RunTimeline::Add(int64_t step, const std::string& checkpoint, int layer_count, int head_count, std::vector<HeadSummary> summaries,
                      StepLosses losses, int tokens, std::vector<float> step_tau_q) {
    n_layer = layer_count;
    n_head = head_count;
    steps.push_back(step);
    checkpoints.push_back(checkpoint);
    heads.push_back(std::move(summaries));
    loss.push_back(losses.ssa);
    loss_compare.push_back(losses.compare);
    loss_base.push_back(losses.base);
    if (tau_q.empty()) n_tokens = tokens;
    tau_q.push_back(std::move(step_tau_q));
}

void RunTimeline::AddLens(std::vector<std::vector<float>> sides) {
    sides.resize(3);
    lens_loss.push_back(std::move(sides[0]));
    lens_loss_compare.push_back(std::move(sides[1]));
    lens_loss_base.push_back(std::move(sides[2]));
}

RunModel RunModelOf(const model::ModelConfig& c) {
    return {c.family,        c.n_layer,        c.n_head,           c.n_embd,         c.vocab_size, c.n_positions, c.rope_n_elem,
            c.sliding_window, c.window_first_layer, c.rope_base, c.layer_norm_epsilon};
}

std::string RunTimeline::Fits(const RunModel& m, const std::vector<int32_t>& text_ids) {
    std::string why = Misfit(m, text_ids);
    if (why.empty() && steps.empty() && !text_ids.empty()) {  // the first analysed step's, until one is added
        if (model_from.empty()) model = m;
        ids = text_ids;
    }
    return why;
}

std::string RunTimeline::Misfit(const RunModel& m, const std::vector<int32_t>& text_ids) const {
    const bool expected = !model_from.empty();
    if (steps.empty() && !expected) return "";
    // The step the others are set against, named: a run's first step may be one that failed.
    const std::string from = expected ? model_from
                                      : "the run's first analysed step, " + std::to_string(steps.front()) + " (" +
                                            model::EscapeForMessage(checkpoints.front()) + ")";
    const int layers = expected ? model.layers : n_layer, heads = expected ? model.heads : n_head;
    if (m.layers != layers || m.heads != heads)
        return "has " + std::to_string(m.layers) + " layers x " + std::to_string(m.heads) + " heads; " + from + ", has " + std::to_string(layers) +
               " x " + std::to_string(heads);
    if (!model.family.empty()) {  // else the first step's model was not told
        auto other = [&](const std::string& what, const std::string& step, const std::string& run) {
            return "has " + what + " " + step + "; " + from + ", has " + run + ": another model";
        };
        if (m.family != model.family) return other("the family", model::Quoted(m.family), model::Quoted(model.family));
        if (m.width != model.width) return other("a width of", std::to_string(m.width), std::to_string(model.width));
        if (m.vocab != model.vocab) return other("a vocabulary of", std::to_string(m.vocab), std::to_string(model.vocab));
        if (m.context != model.context) return other("a context of", std::to_string(m.context), std::to_string(model.context));
        auto number = [](double x) {
            char s[32];
            std::snprintf(s, sizeof s, "%g", x);
            return std::string(s);
        };
        if (m.rope_dims != model.rope_dims)
            return other("RoPE on", std::to_string(m.rope_dims) + " dims of a head", std::to_string(model.rope_dims));
        if (m.rope_dims > 0 && m.rope_base != model.rope_base) return other("a RoPE base of", number(m.rope_base), number(model.rope_base));
        if (m.window != model.window || (m.window > 0 && m.window_from != model.window_from)) {
            auto window = [](int w, int from) {
                return w == 0 ? std::string("no sliding window")
                              : "a sliding window of " + std::to_string(w) + (from > 0 ? " from layer " + std::to_string(from) : std::string());
            };
            return "has " + window(m.window, m.window_from) + "; " + from + ", has " + window(model.window, model.window_from) + ": another model";
        }
        if (m.norm_eps != model.norm_eps) return other("a norm eps of", number(m.norm_eps), number(model.norm_eps));
    }
    // The tokens are the first analysed step's (an expected model's step had none to give).
    if (!steps.empty() && !ids.empty() && !text_ids.empty() && text_ids != ids)
        return "tokenises the text otherwise than the run's first analysed step, " + std::to_string(steps.front()) + " (" +
               model::EscapeForMessage(checkpoints.front()) + "): another tokenizer";
    return "";
}

void RunTimeline::Expect(const RunModel& m, std::string from) {
    model = m;
    model_from = std::move(from);
}

std::string RunTimeline::CompareRunMisfit(int step_layers, int step_heads, const std::vector<int32_t>& text_ids) const {
    if (steps.empty()) return "";
    if (step_layers != n_layer || step_heads != n_head)
        return "has " + std::to_string(step_layers) + " layers x " + std::to_string(step_heads) + (step_heads == 1 ? " head" : " heads") + ", the run " + std::to_string(n_layer) +
               " x " + std::to_string(n_head) + ": its layers and heads are not the run's to set beside";
    if (!ids.empty() && text_ids != ids)
        return "tokenises the text otherwise than the run (" + std::to_string(text_ids.size()) + " tokens, the run " + std::to_string(ids.size()) +
               "): another tokenizer, whose losses are of other tokens";
    return "";
}

bool RunTimeline::HasBase() const {
    // Every step runs with the same comparison, so the first step's heads say (the Run tab asks
    // each frame: not a scan of every step).
    if (heads.empty()) return false;
    const HeadValue& js_total = *FindHeadValue("js_total");
    for (const HeadSummary& h : heads.front())
        if (std::isfinite(h.Get(js_total))) return true;
    return false;
}

std::vector<std::string> RunHeadValues(const RunTimeline& t) {
    std::vector<std::string> keys(std::begin(kRunHeadValues), std::end(kRunHeadValues));
    if (t.HasBase()) keys.insert(keys.end(), std::begin(kRunBaseValues), std::end(kRunBaseValues));
    return keys;
}

std::vector<std::string> RunCurveKeys(const RunTimeline& t) {
    std::vector<std::string> keys = RunHeadValues(t);
    keys.insert(keys.end(), {"loss", kRunTokenCurve});
    if (t.HasLens()) keys.push_back(kRunLensCurve);
    if (t.HasLensCompare()) keys.push_back(kRunLensDiffCurve);
    if (t.HasLensBase()) keys.push_back(kRunLensDiffBaseCurve);
    return keys;
}

std::string RunCurveLabel(const std::string& key, const std::string& compare_name) {
    const std::string compare = compare_name.empty() ? "comparison" : compare_name;
    if (key == "loss") return "loss on the text";
    if (key == kRunTokenCurve) return "tau_q of the selected token";
    if (key == kRunLensCurve) return "loss by layer (lens)";
    if (key == kRunLensDiffCurve) return "SSA - " + compare + ", by layer (lens)";
    if (key == "js_divergence" && !compare_name.empty()) return "JS to " + compare_name;
    if (key == kRunLensDiffBaseCurve) return "SSA - base, by layer (lens)";
    const HeadValue* v = FindHeadValue(key);
    return v ? v->label : key;
}

std::string RunLegendName(const std::string& dir, const std::string& other, const std::string& role) {
    // The folders' parts, last first ("runs/ssa/" is "ssa", "runs").
    auto parts = [](const std::string& folder) {
        std::vector<std::string> out;
        for (const fs::path& p : fs::path(folder).lexically_normal()) {
            const std::string part = p.string();
            if (!part.empty() && part != "/" && part != ".") out.insert(out.begin(), part);
        }
        return out;
    };
    const std::vector<std::string> mine = parts(dir), theirs = parts(other);
    std::string name;
    for (size_t k = 0; k < mine.size() && k < 3; ++k) {
        name = k ? mine[k] + "/" + name : mine[k];
        if (theirs.empty() || k >= theirs.size() || mine[k] != theirs[k]) break;
    }
    if (name.empty() || name == ".." || name == role) return role;
    // Control characters and the bidirectional overrides escaped (a folder named so would draw another
    // name); at most kShown characters, its end kept (the legends hold 40, the role and ", all heads"
    // included, and "seedA/ssa" differs at its start only where the ends agree).
    const std::string shown = model::EscapeForMessage(name, 4096);
    std::string safe;
    for (size_t i = 0; i < shown.size(); ++i) {  // U+202A..U+202E and U+2066..U+2069 as \u202e
        const auto b = [&](size_t k) { return static_cast<unsigned char>(shown[k]); };
        if (i + 2 < shown.size() && b(i) == 0xE2 &&
            ((b(i + 1) == 0x80 && b(i + 2) >= 0xAA && b(i + 2) <= 0xAE) || (b(i + 1) == 0x81 && b(i + 2) >= 0xA6 && b(i + 2) <= 0xA9))) {
            char code[16];
            std::snprintf(code, sizeof code, "\\u%04x", 0x2000 | (b(i + 1) & 0x3F) << 6 | (b(i + 2) & 0x3F));
            safe += code;
            i += 2;
        } else {
            safe += shown[i];
        }
    }
    constexpr size_t kShown = 14;
    size_t chars = 0, start = safe.size();
    while (start > 0 && chars < kShown) {  // back over kShown characters, whole UTF-8 sequences
        do --start;
        while (start > 0 && (static_cast<unsigned char>(safe[start]) & 0xC0) == 0x80);
        ++chars;
    }
    if (start > 0) {  // an ellipsis in the first one's place
        size_t next = start + 1;
        while (next < safe.size() && (static_cast<unsigned char>(safe[next]) & 0xC0) == 0x80) ++next;
        safe = "\xE2\x80\xA6" + safe.substr(next);
    }
    return safe + " (" + role + ")";
}

RunCurve TokenTauQCurve(const RunTimeline& t, int layer, int head, int token) {
    RunCurve c;
    c.label = (t.name.empty() ? t.label : t.name) + ", tau_q of token " + std::to_string(token);
    for (size_t k = 0; k < t.steps.size(); ++k) {
        c.steps.push_back(static_cast<float>(t.steps[k]));
        const int64_t i = (static_cast<int64_t>(layer) * t.n_head + head) * t.n_tokens + token;
        const bool in = layer >= 0 && layer < t.n_layer && head >= 0 && head < t.n_head && token >= 0 && token < t.n_tokens &&
                        i < static_cast<int64_t>(t.tau_q[k].size());
        c.all.push_back(in ? t.tau_q[k][static_cast<size_t>(i)] : NAN);
    }
    return c;
}

RunCurve CurveOf(const RunTimeline& t, const std::string& key, std::optional<HeadRef> head) {
    RunCurve c;
    c.label = t.name.empty() ? t.label : t.name;
    for (int64_t s : t.steps) c.steps.push_back(static_cast<float>(s));
    if (key == "loss") {
        c.label += ", loss";
        c.all = t.loss;
        auto any = [](const std::vector<float>& v) { return std::any_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); }); };
        if (any(t.loss_base)) c.base = t.loss_base;
        if (any(t.loss_compare)) c.compare = t.loss_compare, c.compare_name = t.compare_name.empty() ? "comparison" : t.compare_name;
        // A run trained for the graph task lowered its attention rows' distance to the target maps,
        // not this loss, which may rise (the graph run's did): its title says so.
        if (!t.checkpoints.empty() && TrainedTask((fs::path(t.dir) / t.checkpoints[0]).string()) == "graph")
            c.note = "trained for the graph task, its attention rows against the target maps: this loss need not fall";
        return c;
    }
    if (IsRunLensCurve(key)) {
        // Read after each layer but the last; after the last it is the model's own loss. The
        // embeddings' alone (lens_loss[0], run_lens.csv's) lies far above the layers' and would
        // squash them: not drawn. A difference: SSA's less the other side's, layer by layer.
        const std::vector<std::vector<float>>* other = key == kRunLensDiffCurve       ? &t.lens_loss_compare
                                                       : key == kRunLensDiffBaseCurve ? &t.lens_loss_base
                                                                                      : nullptr;
        if (key == kRunLensDiffCurve) c.compare_name = t.compare_name.empty() ? "comparison" : t.compare_name;
        c.layers.assign(static_cast<size_t>(std::max(t.n_layer - 1, 0)), {});
        for (size_t k = 0; k < t.steps.size(); ++k) {
            auto value = [](const std::vector<std::vector<float>>& sides, size_t step, int l) {
                return step < sides.size() && static_cast<size_t>(l) < sides[step].size() ? sides[step][l] : NAN;
            };
            auto at = [&](int l) { return value(t.lens_loss, k, l) - (other ? value(*other, k, l) : 0.0f); };
            for (int l = 0; l + 1 < t.n_layer; ++l) c.layers[l].push_back(at(l + 1));
            c.all.push_back(at(t.n_layer));
        }
        return c;
    }
    if (key == "js_divergence") c.compare_name = t.compare_name;  // the title says which comparison ("JS to tau = 1")
    c.layers.assign(static_cast<size_t>(t.n_layer), {});
    for (const std::vector<HeadSummary>& heads : t.heads) {
        double all = 0;
        int all_n = 0;
        for (int l = 0; l < t.n_layer; ++l) {
            double sum = 0;
            int n = 0;
            for (int h = 0; h < t.n_head; ++h) {
                const float v = heads[static_cast<size_t>(l) * t.n_head + h].Get(key);
                if (std::isfinite(v)) sum += v, ++n;
            }
            c.layers[l].push_back(n ? static_cast<float>(sum / n) : NAN);
            all += sum;
            all_n += n;
        }
        c.all.push_back(all_n ? static_cast<float>(all / all_n) : NAN);
    }
    // One head's own line: the one asked for, else the one that moved most over the run (a head that
    // halved its entropy alone showed as a smaller dip of its layer's mean, unnamed).
    const int heads = t.n_layer * t.n_head;
    if (heads < 2 || t.heads.empty()) return c;
    auto value = [&](size_t k, int i) { return t.heads[k][static_cast<size_t>(i)].Get(key); };
    int chosen = -1;
    if (head && head->layer >= 0 && head->layer < t.n_layer && head->head >= 0 && head->head < t.n_head) {
        chosen = head->layer * t.n_head + head->head;
    } else if (!head && t.steps.size() > 1) {
        float most = 0;
        for (int i = 0; i < heads; ++i)
            if (const float moved = std::abs(value(t.steps.size() - 1, i) - value(0, i)); moved > most) most = moved, chosen = i;  // NaN: never
    }
    if (chosen < 0) return c;
    for (size_t k = 0; k < t.heads.size(); ++k) c.head.push_back(value(k, chosen));
    c.head_layer = chosen / t.n_head;
    c.head_name = "L" + std::to_string(chosen / t.n_head) + " H" + std::to_string(chosen % t.n_head) + (head ? " (selected head)" : ", moved most");
    return c;
}

viz::Rgba8 RunLayerColor(int layer, int n_layer, bool file) {
    // Viridis by the layer's place among the model's layers: a layer is one colour in every curve
    // (the lens's "after L2" as "layer 2"). A file's white page leaves out its palest end (a lime
    // layer read 1.5:1 there), the window's dark theme its darkest (an indigo layer vanished, and
    // from 0.3 a dark blue layer 0 was still hard to find): the layers' order reads alike in both,
    // from dark to light.
    const float from = file ? 0.0f : 0.4f, span = file ? 0.7f : 0.6f;
    return viz::SampleColormap(viz::Colormap::Viridis,
                               n_layer > 1 ? from + span * static_cast<float>(layer) / static_cast<float>(n_layer - 1) : from + span / 2);
}

viz::Plot RunCurvesPlot(const std::string& key, const std::vector<RunCurve>& runs, bool points) {
    viz::Plot plot;
    const bool token = key == kRunTokenCurve, loss = key == "loss", lens = IsRunLensCurve(key);
    const bool lens_diff = lens && key != kRunLensCurve;
    // The difference's other side, named as the loss curve names the comparison ("tau = 1", "twin").
    const std::string minus = key == kRunLensDiffBaseCurve ? "base" : runs.empty() || runs[0].compare_name.empty() ? "comparison" : runs[0].compare_name;
    const HeadValue* v = loss || token || lens ? nullptr : FindHeadValue(key);
    // The axis in the catalogue's unit where it has one ("entropy (nats)").
    const std::string unit = v && v->quantity && !v->quantity->unit.empty() ? " (" + v->quantity->unit + ")" : "";
    // JS to the comparison named by it, as its sibling "JS drift (tau = 1 to base)" names its sides.
    const std::string name = RunCurveLabel(key, runs.empty() ? "" : runs[0].compare_name);
    const std::string label = loss        ? "mean loss on the text (nats)"
                              : token     ? "tau_q"
                              : lens_diff ? "SSA's mean loss after the layer - " + minus + "'s (nats)"
                              : lens      ? "mean loss read after the layer (nats)"
                              : v         ? name + unit
                                          : key;
    plot.Options.Title = loss        ? "loss on the text against training step" + (runs.empty() || runs[0].note.empty() ? "" : " (" + runs[0].note + ")")
                         : token     ? "a token's tau_q in one head against training step"
                         : lens_diff ? "loss read after each layer (logit lens), SSA - " + minus + ", against training step"
                         : lens      ? "loss read after each layer (logit lens) against training step"
                                 : name + " against training step (mean over heads)";
    plot.Options.XLabel = "training step";
    plot.Options.YLabel = label;
    plot.Options.Width = 720;
    plot.Options.Height = 440;
    plot.Options.LegendForOne = true;  // a one-layer run's lone mean says so, in the window too
    if (runs.empty()) return plot;
    const RunCurve& first = runs[0];
    // The y extent of every curve drawn, to tell when two lie within a pixel or so of each other.
    float lo = INFINITY, hi = -INFINITY;
    auto extend = [&](const std::vector<float>& v) {
        for (float y : v)
            if (std::isfinite(y)) lo = std::min(lo, y), hi = std::max(hi, y);
    };
    for (const RunCurve& r : runs) extend(r.all), extend(r.compare), extend(r.base);
    for (const std::vector<float>& layer : first.layers) extend(layer);
    auto under = [&](const std::vector<float>& v, const std::vector<float>& over) {  // every step within 0.5% of the extent
        if (v.size() != over.size() || !(hi > lo)) return v.size() == over.size() && !v.empty();
        for (size_t k = 0; k < v.size(); ++k)
            if (std::isfinite(v[k]) != std::isfinite(over[k]) || std::abs(v[k] - over[k]) > 0.005f * (hi - lo)) return false;
        return true;
    };
    // A layer's line listed, yet drawn under one drawn after it: the run's own (on top), the base's or
    // a deeper layer's (one layer's entropy lay exactly on another's, and was not seen).
    auto covered = [&](size_t l) -> std::string {
        const std::vector<float>& v = first.layers[l];
        if (under(v, first.all)) return ", under the run's line";
        if (!first.base.empty() && under(v, first.base)) return ", under the base's line";
        for (size_t m = first.layers.size(); m-- > l + 1;)
            if (under(v, first.layers[m])) return ", under " + std::string(lens ? "L" : "layer ") + std::to_string(m) + "'s line";
        return "";
    };
    // One layer is its mean over every head: drawn once, as the mean (a layer's line lay under it).
    // The lens's lines are every layer's but the last (the model's own, the mean's place).
    for (size_t l = 0; l < first.layers.size() && (lens || first.layers.size() > 1); ++l) {
        viz::PlotSeries s;
        const std::string layer = (lens ? "after L" : "layer ") + std::to_string(l);  // the lens as lens.png's rows name it
        s.Name = layer + (runs.size() > 1 ? ", " + first.label : "") + covered(l);  // the first run's layers
        s.X = first.steps;
        s.Y = first.layers[l];
        s.Color = RunLayerColor(static_cast<int>(l), lens ? static_cast<int>(first.layers.size()) + 1 : static_cast<int>(first.layers.size()), points);
        if (!points) s.Color.a = 210;  // the window's layers behind its means (a file's at full strength: translucent, they printed pastel)
        plot.Series.push_back(std::move(s));
    }
    // One head's own, dashed in its layer's colour (the layer means hid a head that moved alone).
    if (!first.head.empty()) {
        viz::PlotSeries s;
        s.Name = first.head_name + (runs.size() > 1 ? ", " + first.label : "");
        s.X = first.steps;
        s.Y = first.head;
        s.Color = RunLayerColor(first.head_layer, static_cast<int>(first.layers.size()), points);
        s.Dashed = true;
        plot.Series.push_back(std::move(s));
    }
    // A fine-tune's base under them (the loss: where the run passes its base), violet.
    if (!first.base.empty()) {
        viz::PlotSeries s;
        s.Name = "base (where fine-tuning began)";
        if (under(first.base, first.all)) s.Name += ", under the run's line";
        s.X = first.steps;
        s.Y = first.base;
        s.Color = viz::kBaseColor;
        plot.Series.push_back(std::move(s));
    }
    // The first run's comparison beside its loss (each step's own weights at tau = 1, by default),
    // blue: where SSA's loss parts from it, the temperatures matter.
    if (!first.compare.empty()) {
        viz::PlotSeries s;
        s.Name = first.compare_name + (runs.size() > 1 ? " (the run's comparison)" : " (the comparison)");
        if (under(first.compare, first.all)) s.Name += ", under the run's line";  // listed, yet drawn under it
        s.X = first.steps;
        s.Y = first.compare;
        s.Color = viz::kCompareColor;
        plot.Series.push_back(std::move(s));
    }
    // The means on top: the run's in black, a second run's in grey.
    const viz::Rgba8 kMeanColors[] = {{20, 20, 20, 255}, {128, 128, 128, 255}};
    for (size_t r = 0; r < runs.size() && r < 2; ++r) {
        // A compare run's curve that never moves (a vanilla run's tau_q, its JS to its own tau = 1) says its one value.
        const std::vector<float>& all = runs[r].all;
        const bool constant = r > 0 && !all.empty() && std::isfinite(all[0]) && std::all_of(all.begin(), all.end(), [&](float v) { return v == all[0]; });
        const std::string name = runs[r].label + (lens_diff                    ? ", its loss - " + minus + "'s"
                                                  : lens                       ? ", its loss"
                                                  : runs[r].layers.empty()       ? ""
                                                  : runs[r].layers.size() == 1 ? ", all heads (layer 0)"
                                                                               : ", all heads") +
                                 (constant ? ": " + viz::FormatTick(all[0]) + " at every step" : "");
        for (viz::SeriesKind kind : {viz::SeriesKind::Line, viz::SeriesKind::Points}) {
            if (kind == viz::SeriesKind::Points && !points) continue;
            viz::PlotSeries s;
            s.Kind = kind;
            s.Name = kind == viz::SeriesKind::Line ? name : "";
            s.X = runs[r].steps;
            s.Y = runs[r].all;
            s.Color = kMeanColors[r];
            if (!points && r == 0) s.Color = {235, 235, 235, 255};  // the window's dark theme
            plot.Series.push_back(std::move(s));
        }
    }
    return plot;
}

std::vector<int64_t> StepsToSparsity(const RunTimeline& t) {
    std::vector<int64_t> out(static_cast<size_t>(t.n_layer) * t.n_head, -1);
    if (t.heads.empty()) return out;
    for (size_t i = 0; i < out.size(); ++i) {
        const float first = t.heads[0][i].Get("entropy");
        if (!std::isfinite(first) || !(first > 0)) continue;
        for (size_t k = 0; k < t.steps.size(); ++k)
            if (t.heads[k][i].Get("entropy") < 0.5f * first) {
                out[i] = t.steps[k];
                break;
            }
    }
    return out;
}

std::vector<int64_t> StepsToLensHalfway(const RunTimeline& t) {
    std::vector<int64_t> out(static_cast<size_t>(t.n_layer) + 1, -1);
    if (!t.HasLens()) return out;
    for (size_t l = 0; l < out.size(); ++l) {
        auto at = [&](size_t k) { return l < t.lens_loss[k].size() ? t.lens_loss[k][l] : NAN; };
        const float first = at(0), last = at(t.steps.size() - 1);
        if (!(first - last > 0)) continue;  // no fall, or a NaN
        const float halfway = first - 0.5f * (first - last);
        for (size_t k = 0; k < t.steps.size(); ++k)
            if (at(k) <= halfway) {
                out[l] = t.steps[k];
                break;
            }
    }
    return out;
}

std::vector<float> StepsToSparsityValues(const RunTimeline& run, const RunTimeline* compare, MapMode side) {
    auto values = [](const RunTimeline& t) {
        std::vector<float> v;
        for (int64_t s : StepsToSparsity(t)) v.push_back(s < 0 ? NAN : static_cast<float>(s));
        return v;
    };
    const std::vector<float> own = values(run);
    if (side == MapMode::Ssa) return own;
    std::vector<float> out(own.size(), NAN);
    if (!compare || compare->n_layer != run.n_layer || compare->n_head != run.n_head) return out;
    const std::vector<float> other = values(*compare);
    for (size_t k = 0; k < out.size(); ++k) out[k] = side == MapMode::Compare ? other[k] : own[k] - other[k];
    return out;
}

}  // namespace app
