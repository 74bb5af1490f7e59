#include "app/export/export.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "app/core/examples.h"
#include "app/core/names.h"
#include "app/core/state.h"
#include "app/core/timeline.h"
#include "app/export/head_summary.h"
#include "model/io/files.h"
#include "model/io/npy.h"
#include "viz/figure.h"
#include "viz/figures.h"
#include "viz/ticks.h"
#include "viz/palette.h"

namespace app {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Pieces may hold partial UTF-8 characters: dump with replacement instead of throwing.

model::Status WriteText(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) return model::Fail(path + ": cannot write");
    out << text;
    out.close();  // a full disk may only show when the buffer is flushed
    if (!out) return model::Fail(path + ": write failed");
    return model::Ok{};
}

// [L, H, T] as nested arrays.
json Nested(const model::RowArray& values, int L, int H) {
    json out = json::array();
    for (int l = 0; l < L; ++l) {
        json layer = json::array();
        for (int h = 0; h < H; ++h) layer.push_back(values.Row(static_cast<int64_t>(l) * H + h));
        out.push_back(std::move(layer));
    }
    return out;
}

// One head value as metrics.json writes it: a number, or a token statistic's {mean, min, max}.
json HeadJson(const HeadSummary& s, const HeadValue& v, Side side) {
    if (v.quantity->reading != Reading::TokenStats) return s.Get(v, side);  // NaN dumps as null
    const HeadValue* stats = &v;  // mean, min, max: consecutive head values
    return json{{"mean", s.Get(stats[0], side)}, {"min", s.Get(stats[1], side)}, {"max", s.Get(stats[2], side)}};
}

// A head's entry: its two-sided values inside "ssa" and "comparison", and "base" with a base (with
// the sink-head rule beside the quantity it reads), its one-sided ones at the top.
json HeadEntry(const model::Analysis& a, const HeadSummary& s, float sink_epsilon) {
    json head = {{"layer", s.ref.layer}, {"head", s.ref.head}};
    for (Side side : kAllSides)
        if (HasSide(a, side)) head[JsonName(side)] = json::object();
    for (const Quantity& q : Quantities()) {
        const HeadValue* v = HeadValueOf(q);
        if (!(q.json & kJsonHeads) || !v) continue;
        if (!q.TwoSided()) {
            head[q.JsonKey()] = HeadJson(s, *v, Side::Ssa);
            if (Holds(q, a, Side::Base)) head[JsonName(Side::Base)][q.JsonKey()] = HeadJson(s, *v, Side::Base);  // the base's own (QK spectrum)
            continue;
        }
        for (Side side : kAllSides) {
            if (!Holds(q, a, side)) continue;
            head[JsonName(side)][q.JsonKey()] = HeadJson(s, *v, side);
            if (q.sink) head[JsonName(side)]["sink_head"] = IsSinkHead(s, side, sink_epsilon);
        }
    }
    return head;
}

double SinkRatio(const json& heads, const char* side) {
    int sinks = 0;
    for (const auto& h : heads) sinks += h.at(side).value("sink_head", false) ? 1 : 0;
    return heads.empty() ? 0.0 : static_cast<double>(sinks) / static_cast<double>(heads.size());
}

// A CSV cell of a number: 9 significant digits, empty where not measured (NaN).
std::string CsvNumber(float v) {
    char text[32] = "";
    if (std::isfinite(v)) std::snprintf(text, sizeof text, "%.9g", v);
    return text;
}

std::string CsvQuote(const std::string& s) {
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

// heads.csv: a row a head, a column a head value of the catalogue on each side the analysis has
// (its files' suffixes: "entropy", "entropy_compare" or beside a base "entropy_tau1", "entropy_base";
// metrics.json's names, a token statistic's as tau_q_mean, tau_q_min, tau_q_max),
// the sink-head rule's verdict beside the sink mass, and beside a base the decomposition's L1 parts
// (its JS parts are js_total, js_drift and, the temperatures', js_divergence); 9 digits, empty for NaN.
std::string HeadsCsv(const model::Analysis& a, float sink_epsilon) {
    const std::vector<HeadSummary> heads = SummarizeHeads(a);
    std::vector<std::pair<const HeadValue*, Side>> columns;
    std::string csv = "layer,head";
    for (const HeadValue& v : HeadValues())
        for (Side side : kAllSides) {
            if (!Has(v.quantity->sides, side) || !HasSide(a, side) || (v.quantity->base_only && !a.HasBase())) continue;
            const std::string suffix = side == Side::Ssa ? "" : side == Side::Base ? "_base" : CompareFileSuffix(a);
            columns.emplace_back(&v, side);
            csv += "," + (v.Primary() && !v.quantity->json_key.empty() ? v.quantity->json_key : v.key) + suffix;  // metrics.json's "l1_distance"
            if (v.quantity->sink && v.Primary()) csv += ",sink_head" + suffix;
        }
    const model::Decomposition d = model::Decompose(a);
    if (!d.empty()) csv += ",l1_total,l1_drift";
    csv += "\n";
    for (size_t k = 0; k < heads.size(); ++k) {
        const HeadSummary& s = heads[k];
        csv += std::to_string(s.ref.layer) + "," + std::to_string(s.ref.head);
        for (const auto& [v, side] : columns) {
            const float value = s.Get(*v, side);
            csv += "," + CsvNumber(value);
            if (v->quantity->sink && v->Primary()) csv += std::isfinite(value) ? (IsSinkHead(value, sink_epsilon) ? ",1" : ",0") : ",";
        }
        if (!d.empty()) csv += "," + CsvNumber(d.l1_total[k]) + "," + CsvNumber(d.l1_drift[k]);
        csv += "\n";
    }
    return csv;
}

model::Status WriteHeadCsv(const std::string& path, const model::Analysis& a, model::MapSide side, int l, int h) {
    const model::HeadMap head = a.Map(side, l, h);
    if (!head) return model::Fail(path + ": the analysis has no map for layer " + std::to_string(l) + ", head " + std::to_string(h));
    std::ofstream out(path, std::ios::trunc);
    if (!out) return model::Fail(path + ": cannot write");
    const int T = a.n_tokens;
    out << "query,piece";
    for (int j = 0; j < T; ++j) out << ",k" << j;
    out << "\n";
    const float* map = head->data();
    char number[32];
    for (int i = 0; i < T; ++i) {
        // The piece as tokens.json shows it, its control characters written out (\n, \x1b): raw, an
        // ESC replayed its escape sequence in a terminal that printed the file.
        out << i << "," << CsvQuote(model::EscapeForMessage(model::PieceToDisplay(a.tokens.pieces[i]), std::string::npos));
        for (int j = 0; j < T; ++j) {
            std::snprintf(number, sizeof number, ",%.9g", map[static_cast<size_t>(i) * T + j]);
            out << number;
        }
        out << "\n";
    }
    out.close();
    if (!out) return model::Fail(path + ": write failed");
    return model::Ok{};
}

}  // namespace

json TokensToJson(std::string_view text, const model::Tokenization& tokens) {
    json pieces = json::array(), bytes = json::array(), offsets = json::array();
    for (size_t i = 0; i < tokens.ids.size(); ++i) {
        pieces.push_back(model::PieceToDisplay(tokens.pieces[i]));
        bytes.push_back(std::vector<uint8_t>(tokens.pieces[i].begin(), tokens.pieces[i].end()));
        offsets.push_back({tokens.offsets[i].first, tokens.offsets[i].second});
    }
    // Truncated (--truncate), the text the tokens came from, not the rest that was not analysed.
    if (tokens.truncated && !tokens.offsets.empty()) text = text.substr(0, std::min(text.size(), tokens.offsets.back().second));
    return json{{"text", model::PieceToDisplay(text)}, {"n_tokens", tokens.ids.size()}, {"ids", tokens.ids},
                {"pieces", pieces}, {"piece_bytes", bytes}, {"offsets", offsets}};
}

std::vector<int> SlopeContexts(const model::ModelInfo& info) {
    std::vector<int> at = {256, 1024, 4096};
    if (std::find(at.begin(), at.end(), info.config.n_positions) == at.end()) at.push_back(info.config.n_positions);
    std::sort(at.begin(), at.end());
    return at;
}

json SlopesToJson(const model::ModelInfo& info) {
    if (info.query_slopes.empty()) return json();
    json layers = json::array();
    for (size_t l = 0; l < info.query_slopes.size(); ++l) {
        const model::TemperatureSlope& slope = info.query_slopes[l];
        json tau = json::object();
        for (int i : SlopeContexts(info)) {
            std::vector<float> at;
            for (float s : slope.s) at.push_back(1.0f + s * std::log(static_cast<float>(i)));
            tau[std::to_string(i)] = at;
        }
        layers.push_back({{"layer", l}, {"beta", slope.beta}, {"s", slope.s}, {"tau_q_at", tau}});
    }
    return json{{"form", model::ToString(info.config.query.position)},
                {"context", info.config.n_positions},
                {"layers", layers},
                {"notes", "tau_q's position term per layer, 1 + s ln i at query position i (from 1): s = exp(-exp(beta)) (exp_exp, the "
                          "official attn.beta), sigmoid(beta) or beta (linear); one value shared by a layer's heads, or one a head. "
                          "tau_q_at: that term at 256, 1,024, 4,096 tokens and at the model's context (context); a length past the "
                          "context is what the slope gives there, not a length the model runs at"}};
}

json InfoToJson(const model::ModelInfo& info) {
    const model::ModelConfig& c = info.config;
    auto side = [](const model::TemperatureForm& f) {
        return json{{"position", model::ToString(f.position)}, {"token", model::ToString(f.token)},
                    {"combine", model::ToString(f.combine)}, {"description", model::Describe(f)}};
    };
    return json{{"dir", info.dir},
                {"n_layer", c.n_layer},
                {"n_head", c.n_head},
                {"n_embd", c.n_embd},
                {"head_size", c.HeadSize()},
                {"n_positions", c.n_positions},
                {"vocab_size", c.vocab_size},
                {"activation_function", model::ActivationName(c)},
                {"family", c.family},
                {"architecture", {{"description", model::DescribeArchitecture(c)},
                                  {"norm", model::ToString(c.norm)},
                                  {"positions", c.Rope() ? "rope" : "learned"},
                                  {"rope_n_elem", c.rope_n_elem},
                                  {"rope_base", c.rope_base},
                                  {"rope_condense_ratio", c.rope_condense_ratio},
                                  {"n_query_groups", c.KvHeads()},
                                  {"mlp", model::ToString(c.mlp)},
                                  {"intermediate_size", c.MlpWidth()},
                                  {"parallel_residual", c.parallel_residual},
                                  {"shared_attention_norm", c.shared_attention_norm},
                                  {"bias", c.bias},
                                  {"lm_head_bias", c.lm_head_bias},
                                  {"tied_head", c.tied_head},
                                  {"hf_model_type", c.hf_model_type},  // "" unless an HF folder of a RoPE family
                                  {"qk_norm", c.qk_norm},
                                  {"sliding_window", c.sliding_window},
                                  {"window_first_layer", c.window_first_layer},
                                  {"rope_llama3_factor", c.rope_llama3.factor}}},
                {"ssa", c.IsSsa()},
                {"query_temperature", side(c.query)},
                {"value_temperature", side(c.value)},
                {"temperature_slopes", SlopesToJson(info)},
                {"parameters", info.parameters},
                {"layout", info.layout},
                {"device", info.device},
                {"compute_dtype", info.compute_dtype},
                {"tokenizer", {{"kind", info.tokenizer_kind}, {"vocab", info.tokenizer_vocab}, {"source", info.tokenizer_source}}},
                {"unused_tensors", info.unused_tensors},
                {"weights", {{"path", info.weights_path}, {"format", info.weights_format}, {"stored_dtype", info.stored_dtype}}},
                {"notes", info.notes},
                {"settings", info.settings}};
}

json RuntimeToJson() {
    const model::ComputeThreads threads = model::CurrentComputeThreads();
    return json{{"threads", threads.count}, {"threads_why", threads.why}, {"blas", model::DescribeBlas()}};
}

json InfoCommandJson(const model::ModelInfo& info) {
    json j = InfoToJson(info);
    j["runtime"] = RuntimeToJson();
    // Both where both are (a fine-tune with its base, and a twin fine-tuned without temperatures:
    // what training with them gave); TwinBeside gives the base itself for a lit-gpt checkpoint.
    const std::string base = BaseBeside(info.dir), found = TwinBeside(info.dir), twin = found == base ? "" : found;
    j["base_beside"] = base.empty() ? json() : json(base);
    j["twin_beside"] = twin.empty() ? json() : json(twin);
    return j;
}

json CatalogueToJson() {
    json quantities = json::array(), colorings = json::array();
    for (const Quantity& q : Quantities()) {
        json sides = json::array(), head_values = json::array();
        for (Side side : kAllSides)
            if (Has(q.sides, side)) sides.push_back(JsonName(side));
        for (const HeadValue& v : HeadValues())
            if (v.quantity == &q) head_values.push_back(v.key);
        const char* scope = q.scope == Scope::Token ? "token" : q.scope == Scope::Row ? "row" : "head";
        quantities.push_back({{"key", q.key},   {"label", q.label}, {"help", q.help},   {"unit", q.unit},
                              {"scope", scope}, {"sides", sides},   {"head_values", head_values}, {"base_only", q.base_only},
                              {"python", q.python.empty() ? json() : json(q.python)}, {"json", q.JsonKey()},
                              {"head_value", HeadValueOf(q) ? json(HeadValueOf(q)->key) : json()},
                              {"decomposition", q.decomposition.empty() ? json() : json(q.decomposition)},
                              {"reading", q.reading == Reading::TokenStats ? json("every_row") : q.reading == Reading::RowMean ? json("rows_2_to_T") : json()}});
    }
    for (const TokenColoring& c : TokenColorings())
        colorings.push_back({{"key", c.key}, {"label", c.label}, {"help", c.help}, {"quantity", c.quantity->key}});
    return json{{"quantities", quantities}, {"token_colorings", colorings}};
}

json InterventionsToJson(const std::vector<model::Intervention>& list) {
    json out = json::array();
    for (const model::Intervention& x : list) out.push_back(model::FormatInterventions({x}));
    return out;
}

namespace {

// Each side block's name as the views say it ("SSA", "tau = 1", "base") and what the comparison is.
json SidesJson(const model::Analysis& a) {
    json sides = json::object();
    for (Side side : kAllSides)
        if (HasSide(a, side))
            sides[JsonName(side)] = side == Side::Ssa ? SsaSideName(a) : side == Side::Base ? std::string("base") : CompareName(a);
    sides["notes"] = CompareExplanation(a);
    return sides;
}

// Mean losses and perplexities of each side an analysis has, with the files that hold them per token.
json LossJson(const model::Analysis& a) {
    const std::string compare = CompareFileSuffix(a);
    json loss = {{"ssa", model::MeanLoss(a.loss)},
                 {"comparison", model::MeanLoss(a.loss_compare)},
                 {"perplexity_ssa", std::exp(model::MeanLoss(a.loss))},
                 {"perplexity_comparison", std::exp(model::MeanLoss(a.loss_compare))}};
    std::string notes = "mean over tokens 2..T of -ln p(token | tokens before it), nats; null without a comparison forward pass (the "
                        "layer-local comparison). Per token: loss.npy" + (a.HasComparePredictions() ? ", loss" + compare + ".npy" : "");
    if (a.HasBase()) {
        loss["base"] = model::MeanLoss(a.loss_base);
        loss["perplexity_base"] = std::exp(model::MeanLoss(a.loss_base));
        notes += ", loss_base.npy";
    }
    loss["notes"] = notes;
    return loss;
}

json LayerHead(const std::vector<float>& values, int L, int H) {
    if (values.size() != static_cast<size_t>(L) * H) return json();  // not measured: null
    json out = json::array();
    for (int l = 0; l < L; ++l) out.push_back(std::vector<float>(values.begin() + static_cast<size_t>(l) * H, values.begin() + static_cast<size_t>(l + 1) * H));
    return out;
}

}  // namespace

std::string CompareFileSuffix(const model::Analysis& a) { return a.HasBase() ? "_tau1" : "_compare"; }

json DecompositionToJson(const model::Analysis& a) {
    const model::Decomposition d = model::Decompose(a);
    if (d.empty()) return json();
    const int L = d.n_layer, H = d.n_head;
    const std::string base_own = BaseTemperatures(a);
    return json{{"js_total", LayerHead(d.js_total, L, H)},
                {"js_temperature", LayerHead(d.js_temperature, L, H)},
                {"js_drift", LayerHead(d.js_drift, L, H)},
                {"l1_total", LayerHead(d.l1_total, L, H)},
                {"l1_temperature", LayerHead(d.l1_temperature, L, H)},
                {"l1_drift", LayerHead(d.l1_drift, L, H)},
                {"loss_mean", {{"ssa", d.loss_mean}, {"tau1", d.loss_mean_tau1}, {"base", d.loss_mean_base}}},
                {"weights", json{{"q", LayerHead(a.weights_q, L, H)},
                                 {"k", LayerHead(a.weights_k, L, H)},
                                 {"v", LayerHead(a.weights_v, L, H)},
                                 {"o", LayerHead(a.weights_o, L, H)},
                                 {"mlp", a.weights_mlp},
                                 {"norm_attention", a.weights_norm_attention},
                                 {"norm_mlp", a.weights_norm_mlp},
                                 {"norm_final", a.weights_norm_final},
                                 {"embeddings", a.weights_embeddings},
                                 {"head", a.weights_head},
                                 {"notes", std::string("how far fine-tuning moved the weights from the base's: ||W - W_base||_F / ||W_base||_F "
                                           "(0: not at all) of each head's slice of W_q, W_k, W_v (its kv head's; with its slice of the "
                                           "attention's bias) and W_o [layer][head], each layer's MLP (weights and biases together), "
                                           "each layer's norm before its attention (norm_attention: its scale and bias, with Qwen 3's q "
                                           "and k norms) and before its MLP (norm_mlp; null where the attention's is shared), the final "
                                           "norm, the token and position embeddings together, and an untied output head (null where it "
                                           "is tied to the embeddings); a norm's scale multiplies q.k as W_q and W_k do, so a head's "
                                           "attention can drift with its own slices unmoved; the temperatures and the output "
                                           "projection's bias are not among them. null where there is no ratio to give: an output "
                                           "head tied to the embeddings (or the base's tied where the model's is not), a base whose "
                                           "tensor is of another shape (another vocabulary or context), a base's part at 0 (no "
                                           "relative change of nothing), a ratio past float range, a norm the attention shares") +
                                               (a.weights_rounded_to.empty() ? ""
                                                                             : "; measured on weights rounded to " + a.weights_rounded_to +
                                                                                   " (the compute dtype, not the files'): a move below its "
                                                                                   "rounding is noise")}}},
                {"base_temperatures", base_own.empty() ? json() : json(base_own)},
                {"base_difference", a.base_difference.empty() ? json() : json(a.base_difference)},
                {"notes", "[layer][head]: the mean over query rows 2..T of each row's divergence (JS in nats, L1); total: SSA against "
                          "the base; temperature: SSA against its own weights at tau = 1; drift: tau = 1 against the base (the other "
                          "weights' change). The parts need not add up to the total: a divergence is not additive (SPEC section 9). "
                          "base_temperatures: the base's own temperatures, null for a vanilla base" +
                              (base_own.empty() ? std::string() : "; here " + BaseTemperaturesNote(a)) +
                              ". base_difference: what the base differs in that is no weight, the fine-tune's against the base's "
                              "(sliding windows, RoPE's base or scaling, the activation's form, the output head's rows), null where "
                              "none" + (a.base_difference.empty() ? std::string() : "; here " + BaseDifferenceNote(a))}};
}

json MetricsToJson(const model::Analysis& a, const model::ModelInfo& info, float sink_epsilon) {
    const int L = a.n_layer, H = a.n_head, T = a.n_tokens;
    json heads = json::array();
    for (const HeadSummary& s : SummarizeHeads(a)) heads.push_back(HeadEntry(a, s, sink_epsilon));
    // Every row the catalogue reports: a two-sided quantity under "ssa" and "comparison" (and "base").
    json rows = json::object();
    json sink_ratio = json::object();
    for (Side side : kAllSides)
        if (HasSide(a, side)) rows[JsonName(side)] = json::object(), sink_ratio[JsonName(side)] = SinkRatio(heads, JsonName(side));
    for (const Quantity& q : Quantities()) {
        if (!(q.json & kJsonRows)) continue;
        for (Side side : kAllSides)
            if (const model::RowArray* values = RowValues(q, a, side))
                (q.TwoSided() ? rows[JsonName(side)][q.JsonKey()] : rows[q.JsonKey()]) = Nested(*values, L, H);
    }
    json out = json{{"model", InfoToJson(info)},
                // The model compared with (a twin's or the base's folder), else the comparison's kind
                // ("vanilla" for every other kind before, the local and unedited ones included).
                {"comparison", a.comparison == model::Comparison::Twin ? a.compare_label : a.HasBase() ? a.base_label : ComparisonKindName(a.comparison)},
                {"comparison_kind", ComparisonKindName(a.comparison)},  // tau1, local, twin, unedited or base
                // What the heads' and rows' side blocks hold, by name: beside a base "comparison" is the
                // fine-tune's weights at tau = 1 (the top-level "comparison" names the base's folder).
                {"sides", SidesJson(a)},
                {"interventions", InterventionsToJson(a.interventions)},
                {"loss", LossJson(a)},
                {"n_tokens", T},
                {"device", a.device},
                {"sink_epsilon", sink_epsilon},
                {"sink_ratio", sink_ratio},
                {"notes", "Head values of the row metrics average query rows 2..T (row 1 has a single key); tau_q, tau_v and "
                          "effective_qk_norm every row. Rows are [layer][head][query]. "
                          "top-1 mass equals max_weight. Entropies and divergences in nats."},
                {"heads", heads},
                {"rows", rows}};
    if (a.HasBase()) {
        out["base"] = a.base_label;
        out["decomposition"] = DecompositionToJson(a);
    }
    return out;
}

namespace {

constexpr std::pair<bool ExportOptions::*, const char*> kFormats[] = {
    {&ExportOptions::json, "json"}, {&ExportOptions::npy, "npy"}, {&ExportOptions::csv, "csv"},
    {&ExportOptions::png, "png"},   {&ExportOptions::svg, "svg"}, {&ExportOptions::html, "html"}};

}  // namespace

const char* const kExportFormatList = "json, npy, csv, png, svg, html";

std::vector<std::string> ExportFormats(const ExportOptions& options) {
    std::vector<std::string> out;
    for (const auto& [flag, name] : kFormats)
        if (options.*flag) out.push_back(name);
    return out;
}

void ClearExportFormats(ExportOptions* options) {
    for (const auto& [flag, name] : kFormats) options->*flag = false;
}

bool EnableExportFormat(ExportOptions* options, const std::string& name) {
    for (const auto& [flag, format] : kFormats)
        if (name == format) return options->*flag = true;
    return false;
}

namespace {

// File names of a map kind: "L0_H1_compare.png" ("_tau1" beside a base), "heads_grid_diff.svg".
std::string MapSuffix(const model::Analysis& a, MapMode mode) {
    switch (mode) {
        case MapMode::Ssa: return "";
        case MapMode::Compare: return CompareFileSuffix(a);
        case MapMode::Difference: return "_diff";
        case MapMode::Base: return "_base";
        case MapMode::BaseDifference: return "_diff_base";
    }
    return "";
}

model::Status WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    return WriteText(path, std::string(bytes.begin(), bytes.end()));
}

}  // namespace

std::vector<const char*> FigureExtensions(const ExportOptions& options) {
    std::vector<const char*> extensions;
    if (options.png) extensions.push_back("png");
    if (options.svg) extensions.push_back("svg");
    return extensions;
}

ExportFile FigureFile(std::string path, const char* extension, std::function<viz::Figure()> make, size_t memory, int png_scale) {
    const bool png = std::string(extension) == "png";
    const int scale = png ? png_scale : 1;
    auto write = [png, scale, make](const std::string& full) -> model::Status {
        std::string error;
        if (!viz::LoadFigureFonts(&error)) return model::Fail(error);
        const viz::Figure figure = make();
        // The layouts bound every label, so only a figure the layouts got wrong (or a large one at a
        // PNG scale) is this large; it is refused before a raster of it is allocated.
        if (!viz::FigureFits(figure, scale))
            return model::Fail(full + ": a figure of " + std::to_string(int64_t{figure.Width} * scale) + " x " +
                               std::to_string(int64_t{figure.Height} * scale) + " pixels is larger than a figure may be (" +
                               std::to_string(viz::kMaxFigureSide) + " pixels a side, " + std::to_string(viz::kMaxFigurePixels >> 20) +
                               " M pixels" + (scale > 1 ? "; a smaller --png-scale" : "") + ")");
        if (png) return WriteBytes(full, viz::EncodePng(viz::RasterizeFigure(figure, scale), viz::FigurePixelsPerInch(scale)));
        return WriteText(full, viz::FigureToSvg(figure));
    };
    return {std::move(path) + "." + extension, std::move(write), std::move(make), memory * static_cast<size_t>(scale * scale)};
}

model::Status MatchLensComparison(model::Engine& engine, const model::Analysis& a) {
    const model::Comparison now = engine.comparison(), want = a.comparison;
    if (now == want) return model::Ok{};
    const auto of_one_model = [](model::Comparison c) { return c == model::Comparison::Counterfactual || c == model::Comparison::LayerLocal; };
    if (of_one_model(want) && of_one_model(now)) return engine.SetComparison(want);
    // "tau1", "base", ... as metrics.json's comparison_kind names them.
    return model::Fail(std::string("this analysis compared with ") + ComparisonKindName(want) + " and the model has since analysed with " +
                       ComparisonKindName(now) + " (a later analysis): analyze this text again for its other sides' lens");
}

model::Result<std::vector<std::shared_ptr<const model::Lens>>> RunLensSides(model::Engine& engine, const model::Analysis& a,
                                                                     const std::function<void(size_t, size_t)>& side_done,
                                                                     const std::atomic<bool>* cancel) {
    if (auto matched = MatchLensComparison(engine, a); !matched) return model::Fail(matched.error());
    const bool compare = !a.compare_label.empty() && a.comparison != model::Comparison::Unedited;
    std::vector<model::MapSide> run = {model::MapSide::Ssa};
    if (compare) run.push_back(model::MapSide::Compare);
    if (compare && a.HasBase()) run.push_back(model::MapSide::Base);
    std::vector<std::shared_ptr<const model::Lens>> sides;
    model::LensOptions options;
    options.cancel = cancel;
    options.whole = true;  // the same bytes as a command line's lens, whatever lens ran before on this engine
    for (model::MapSide side : run) {
        auto lens = engine.RunLens(a.tokens.ids, side, options);
        if (!lens) return model::Fail(lens.error());
        sides.push_back(std::make_shared<const model::Lens>(std::move(*lens)));
        if (side_done) side_done(sides.size(), run.size());
    }
    return sides;
}

namespace {

// The lens's comparison side in a figure's title: what RunLensSides ran there.
std::string LensCompareTitle(const model::Analysis& a) {
    if (a.HasBase()) return ComparisonWeightsTitle(a);
    if (HasTwin(a)) return "twin " + TwinFolderName(a);
    if (a.comparison == model::Comparison::LayerLocal) return "tau = 1 local (layer by layer)";
    return ComparisonWeightsTitle(a);
}

}  // namespace

// The short name of legends and lines, as every view names the sides ("SSA", "tau = 1", "twin", "base").
std::string LensSideName(const model::Analysis& a, size_t k) { return k == 0 ? SsaSideName(a) : k == 1 ? CompareName(a) : "base"; }

// The base named by its folder: a figure of the base's alone is titled with the fine-tune's name (a
// panel cropped out read "licenses/ssa" over the base's numbers).
std::string LensSideTitle(const model::Analysis& a, size_t k) {
    const std::string folder = k == 2 ? BaseFolderName(a) : "";
    return k == 1 ? LensCompareTitle(a) : folder.empty() ? LensSideName(a, k) : "base (" + folder + ")";
}

viz::Figure LensModeFigure(const model::Analysis& a, const model::ModelInfo& info, MapMode mode, const model::Lens* ssa,
                           const model::Lens* other, const viz::FigureText& text, const DivergingScale* shared) {
    const size_t k = ReadSide(mode) == Side::Base ? 2 : ReadSide(mode) == Side::Compare ? 1 : 0;
    if (IsDifference(mode))
        return ssa && other ? LensDiffFigure(*ssa, *other, ModelName(info), SsaSideName(a), k == 1 ? LensSideName(a, k) : LensSideTitle(a, k),
                                             TokenLabels(a.tokens), text, shared)
                            : viz::Figure{};
    const model::Lens* shown = k == 0 ? ssa : other;
    return shown ? LensFigure(*shown, ModelName(info), LensSideTitle(a, k), TokenLabels(a.tokens), text) : viz::Figure{};
}

model::Result<std::vector<ExportFile>> LensExportFiles(model::Engine& engine, const model::ModelInfo& info, const model::Analysis& a,
                                                       const std::vector<std::shared_ptr<const model::Lens>>& sides, const ExportOptions& options) {
    auto attributed = AttributeForExport(engine, a, sides.size(), options);
    if (!attributed) return model::Fail(attributed.error());
    // Each predicted id as it reads after a token (Python's lens_top and the predictions name it
    // so): decoded alone, SentencePiece's ' be' would read 'be'.
    const model::PredictedPieces piece(engine.tokenizer());
    return LensExportFiles(
        [&](int32_t id) {
            auto text = piece(id);
            return text ? model::PieceWithBytes(*text) : std::string();  // a split character's byte as \xNN, as tokenize spells it
        },
        info, a, sides, options, *attributed ? &**attributed : nullptr);
}

std::vector<ExportFile> LensExportFiles(const std::function<std::string(int32_t)>& piece, const model::ModelInfo& info,
                                        const model::Analysis& a, const std::vector<std::shared_ptr<const model::Lens>>& sides,
                                        const ExportOptions& options, const SidesAttribution* attributed) {
    std::vector<LensSideFiles> named;
    const std::string suffixes[] = {"", CompareFileSuffix(a), "_base"};
    for (size_t k = 0; k < sides.size() && k < std::size(suffixes); ++k) named.push_back({sides[k], suffixes[k], LensSideName(a, k), LensSideTitle(a, k)});
    // The default's, the text's next token, from the lens's own columns (dla.npy's): no parts of
    // its own (LensFiles reads the lens), so dla_at.json holds the numbers the figures draw, the
    // window's and the command line's alike (it was written only with --dla-target).
    SidesAttribution next;
    if (!attributed)  // (the window's export passes its lens without options.lens)
        if (const auto position = DlaQuery(options, a.n_tokens); position && *position + 1 < static_cast<int64_t>(a.tokens.ids.size())) {
            next.position = *position;
            next.token = a.tokens.ids[static_cast<size_t>(*position) + 1];
            attributed = &next;
        }
    return LensFiles(named, piece, options, TokenLabels(a.tokens), ModelName(info), attributed);
}

std::vector<ExportFile> HeadImpactFiles(const HeadImpacts& measured, const model::ModelInfo& info, const ExportOptions& options,
                                        const std::vector<std::string>& token_labels) {
    const auto impacts = std::make_shared<const HeadImpacts>(measured);
    const int L = info.config.n_layer, H = info.config.n_head;
    const std::string model_name = ModelName(info);
    const std::vector<float> parts = TemperatureParts(measured, L, H), parts_q = TemperatureParts(measured, L, H, TemperaturePart::TauQ),
                             parts_v = TemperatureParts(measured, L, H, TemperaturePart::TauV);
    auto grid = [L, H](const std::vector<float>& values) {  // [layer][head], null where not measured
        json rows = json::array();
        for (int l = 0; l < L; ++l) {
            json row = json::array();
            for (int h = 0; h < H; ++h) row.push_back(std::isfinite(values[l * H + h]) ? json(values[l * H + h]) : json());
            rows.push_back(std::move(row));
        }
        return rows;
    };
    std::vector<float> mean_loss(parts.size(), NAN);
    for (const HeadImpact& h : measured.heads)
        if (h.layer >= 0 && h.layer < L && h.head >= 0 && h.head < H) mean_loss[h.layer * H + h.head] = h.mean_loss;
    const DriftParts drift = MeasuredDriftParts(measured, L, H);
    auto number_or_null = [](float v) { return std::isfinite(v) ? json(v) : json(); };
    json drift_json;  // null without a base
    if (measured.drift) {
        json mlp = json::array(), attention = json::array(), path = json::array();
        for (float v : drift.mlp) mlp.push_back(number_or_null(v));
        for (float v : drift.attention) attention.push_back(number_or_null(v));
        for (size_t k = 0; k < drift.path.size(); ++k)
            path.push_back({{"part", PathPartName(static_cast<int>(k))},
                            {"part_drift", number_or_null(drift.path[k])},
                            {"part_drift_top_down", number_or_null(k < drift.path_down.size() ? drift.path_down[k] : NAN)}});
        drift_json = {{"about", "the fine-tune's drift part by part, one at a time: the SSA side's loss (what_ifs on) with that "
                                "part's weights, never its temperatures, taken back from the base; part = baseline - that loss, below "
                                "0 where the fine-tune's change there lowered the loss. heads: the head's query, key, value and output "
                                "weights (with grouped queries its kv head's keys and values, which its group shares); attention: "
                                "the layer's whole attention (every head, the norm before it, the output bias); mlp: the layer's MLP "
                                "and the norm before it; embeddings: the embeddings, final norm and output head; all: every weight, "
                                "SSA's temperatures kept (not the split's drift, tau = 1 against the base, which has no temperatures "
                                "on either side). One part at a time: they need not add up to all. baseline: the same pass with no "
                                "part from the base (the baseline above to float rounding)"},
                      {"baseline", number_or_null(measured.drift_baseline)},
                      {"heads", grid(drift.heads)},
                      {"attention", std::move(attention)},
                      {"mlp", std::move(mlp)},
                      {"base_temperatures", measured.base_temperatures.empty() ? json() : json(measured.base_temperatures)},
                      {"not_measured", measured.not_measured},  // a part the base cannot give, and why
                      {"settings_difference", measured.settings_difference.empty() ? json() : json(measured.settings_difference)},
                      {"embeddings", number_or_null(drift.embeddings)},
                      {"all", number_or_null(drift.all)},
                      {"path_about", "the parts one after another, from the embeddings up: each taken back from the base on top of "
                                     "those before it, part_drift = the loss before it - the loss after, so they add up to all; "
                                     "part_drift_top_down the same from the top down (the last MLP first, the embeddings last), adding "
                                     "up to all too. Where the two orders split all differently, the parts act together"},
                      {"path", std::move(path)}};
    }
    // Token by token: where on the text each part acted (T - 1 entries, token t's loss at t - 1).
    const int n = measured.baseline_tokens ? static_cast<int>(measured.baseline_tokens->size()) : 0;
    const std::string drift_rows = measured.drift ? "; head_impacts_drift_tokens.npy float32 [rows, T - 1]: row k the part of "
                                                    "head_impacts_drift.csv's row k (its header not counted; each way's path rows "
                                                    "add up to all's token by token)" : "";
    // (null where the formats leave out npy: the files are not written)
    const json by_token = !options.npy ? json() : json{{"about", "each part token by token, the last axis entry t - 1 holding token t's (as loss.npy): the part of "
                                     "that token's loss, its mean over the T - 1 tokens the part above. head_impacts_tokens.npy "
                                     "float32 [3, L, H, T - 1]: part, part_tau_q, part_tau_v" + drift_rows + "; NaN: not measured"},
                           {"tokens", n}};
    std::vector<ExportFile> files;
    files.push_back({"head_impacts.json", [impacts, grid, parts, parts_q, parts_v, mean_loss, drift_json, by_token](const std::string& full) {
                         const json j = {{"about", "each head's temperatures' part of the loss, one head at a time: mean_loss is the text's mean "
                                                   "loss with that head at tau = 1 (tau_q = tau_v = 1) on top of what_ifs, part = baseline - "
                                                   "mean_loss, below 0 where the head's temperatures lowered the loss (as the fine-tune's split "
                                                   "reads); one at a time, so the parts need not add up to the temperatures' whole; part_tau_q "
                                                   "and part_tau_v the same with tau_q alone, or tau_v alone, at 1; null: not measured; "
                                                   "drift (beside a base): the same for the weights the fine-tune changed"},
                                         {"baseline", impacts->baseline},
                                         {"what_ifs", model::FormatInterventions(impacts->on_top)},
                                         {"complete", impacts->done},
                                         {"mean_loss", grid(mean_loss)},
                                         {"part", grid(parts)},
                                         {"part_tau_q", grid(parts_q)},
                                         {"part_tau_v", grid(parts_v)},
                                         {"drift", drift_json},
                                         {"by_token", by_token}};
                         return WriteText(full, model::JsonText(j, 1) + "\n");
                     }});
    files.push_back({"head_impacts.csv", [parts, parts_q, parts_v, mean_loss, drift, H](const std::string& full) {
                         // part_drift: the head's weights from the base (empty without a base).
                         std::string csv = "layer,head,mean_loss,part,part_tau_q,part_tau_v,part_drift\n";  // empty: not measured
                         for (size_t k = 0; k < parts.size(); ++k)
                             if (std::isfinite(mean_loss[k]))
                                 csv += std::to_string(k / H) + "," + std::to_string(k % H) + "," + CsvNumber(mean_loss[k]) + "," + CsvNumber(parts[k]) + "," +
                                        CsvNumber(parts_q[k]) + "," + CsvNumber(parts_v[k]) + "," + CsvNumber(drift.heads[k]) + "\n";
                         return WriteText(full, csv);
                     }});
    if (measured.drift)  // every part of the drift a row: the heads, each layer's attention and MLP, the embeddings, all
        files.push_back({"head_impacts_drift.csv", [impacts, drift, L, H](const std::string& full) {
                             std::string csv = "part,layer,head,mean_loss,part_drift\n";  // layer, head: empty where the part has none
                             auto row = [&](const char* kind, const std::string& layer, const std::string& head, float loss, float part) {
                                 csv += std::string(kind) + "," + layer + "," + head + "," + CsvNumber(loss) + "," + CsvNumber(part) + "\n";
                             };
                             row("none", "", "", impacts->drift_baseline, 0.0f);
                             for (const HeadImpact& h : impacts->heads)
                                 if (h.layer >= 0 && h.layer < L && h.head >= 0 && h.head < H)
                                     row("head", std::to_string(h.layer), std::to_string(h.head), h.mean_loss_from_base, drift.heads[h.layer * H + h.head]);
                             for (int l = 0; l < L; ++l) {
                                 if (static_cast<size_t>(l) < impacts->attention_from_base.size())
                                     row("attention", std::to_string(l), "", impacts->attention_from_base[l], drift.attention[l]);
                                 if (static_cast<size_t>(l) < impacts->mlp_from_base.size())
                                     row("mlp", std::to_string(l), "", impacts->mlp_from_base[l], drift.mlp[l]);
                             }
                             row("embeddings", "", "", impacts->embeddings_from_base, drift.embeddings);
                             row("all", "", "", impacts->all_from_base, drift.all);
                             // The path from the embeddings up, then from the top down, in the order each takes the parts:
                             // its loss after each part, and the part (each way adding up to all's).
                             const size_t steps = drift.path.size();
                             for (size_t k = 0; k < steps; ++k) {
                                 const float loss = k == 0 ? impacts->embeddings_from_base
                                                           : k - 1 < impacts->path_from_base.size() ? impacts->path_from_base[k - 1] : NAN;
                                 row(k == 0 ? "path_embeddings" : k % 2 ? "path_attention" : "path_mlp", k == 0 ? "" : std::to_string((k - 1) / 2), "", loss,
                                     drift.path[k]);
                             }
                             for (size_t j = 0; j < steps && steps == impacts->path_down_from_base.size() + 1; ++j) {
                                 const size_t k = steps - 1 - j;  // the part's place in PathPartName's order
                                 const float loss = j + 1 == steps ? impacts->all_from_base : impacts->path_down_from_base[j];
                                 row(k == 0 ? "path_down_embeddings" : k % 2 ? "path_down_attention" : "path_down_mlp", k == 0 ? "" : std::to_string((k - 1) / 2),
                                     "", loss, drift.path_down[k]);
                             }
                             return WriteText(full, csv);
                         }});
    if (n > 0 && options.npy)
        files.push_back({"head_impacts_tokens.npy", [impacts, L, H, n](const std::string& full) {
                             std::vector<float> all;
                             for (TemperaturePart which : {TemperaturePart::Both, TemperaturePart::TauQ, TemperaturePart::TauV}) {
                                 const std::vector<float> one = TemperaturePartsByToken(*impacts, L, H, which);
                                 all.insert(all.end(), one.begin(), one.end());
                             }
                             return model::WriteNpy(full, all.data(), {3, L, H, n});
                         }});
    if (measured.drift && n > 0 && options.npy)  // the rows of head_impacts_drift.csv, in its order
        files.push_back({"head_impacts_drift_tokens.npy", [impacts, L, H, n](const std::string& full) {
                             const DriftTokenParts d = MeasuredDriftPartsByToken(*impacts, L, H);
                             std::vector<float> rows(static_cast<size_t>(n), 0.0f);  // "none": the baseline itself
                             auto add = [&](const std::vector<float>& from, size_t k) {
                                 rows.insert(rows.end(), from.begin() + k * n, from.begin() + (k + 1) * n);
                             };
                             for (const HeadImpact& h : impacts->heads)
                                 if (h.layer >= 0 && h.layer < L && h.head >= 0 && h.head < H) add(d.heads, static_cast<size_t>(h.layer) * H + h.head);
                             for (int l = 0; l < L; ++l) {
                                 if (static_cast<size_t>(l) < impacts->attention_from_base.size()) add(d.attention, l);
                                 if (static_cast<size_t>(l) < impacts->mlp_from_base.size()) add(d.mlp, l);
                             }
                             add(d.embeddings, 0), add(d.all, 0);
                             for (size_t k = 0; k < d.path.size() / n; ++k) add(d.path, k);
                             const size_t steps = d.path_down.size() / n;
                             for (size_t j = 0; j < steps && steps == impacts->path_down_from_base.size() + 1; ++j) add(d.path_down, steps - 1 - j);
                             return model::WriteNpy(full, rows.data(), {static_cast<int64_t>(rows.size() / n), n});
                         }});
    const std::vector<const char*> extensions = FigureExtensions(options);
    for (const char* ext : extensions) {
        files.push_back(FigureFile("head_impacts", ext, [impacts, L, H, model_name, text = options.figures.text] {
            return HeadImpactsFigure(*impacts, L, H, model_name, text);
        },
                                   size_t{16} << 20, options.figures.png_scale));
        // Where on the text: a map of rows by tokens (sized as the lens's, a pixel a token past 720).
        if (n > 0 && std::any_of(parts.begin(), parts.end(), [](float v) { return std::isfinite(v); }))  // not with every head at tau = 1 already
            files.push_back(FigureFile("head_impacts_tokens", ext, [impacts, L, H, model_name, token_labels, text = options.figures.text] {
                return HeadImpactsTokensFigure(*impacts, L, H, model_name, token_labels, text);
            }, size_t{64} << 20, options.figures.png_scale));
        if (measured.drift && n > 0)
            files.push_back(FigureFile("head_impacts_drift_tokens", ext, [impacts, L, H, model_name, token_labels, text = options.figures.text] {
                return HeadImpactsDriftTokensFigure(*impacts, L, H, model_name, token_labels, text);
            }, size_t{64} << 20, options.figures.png_scale));
    }
    return files;
}

std::vector<double> LensLossMeans(const model::Lens& lens) {
    std::vector<double> out;
    const size_t n = lens.n_tokens > 1 ? static_cast<size_t>(lens.n_tokens - 1) : 0;
    for (int l = 0; l <= lens.n_layer && n > 0; ++l) {
        double sum = 0;
        for (size_t t = 0; t < n; ++t) sum += lens.loss[l * n + t];
        out.push_back(sum / static_cast<double>(n));
    }
    return out;
}

json LensLossByLayer(const model::Lens& lens) { return json(LensLossMeans(lens)); }

namespace {

// Each side's bars, named and coloured as the window's: SSA, the comparison by its kind (tau = 1,
// the twin, layer-local; tau = 1 beside a base), the base; `values` gives a side's bars.
template <typename Values>
void AddSideBars(viz::Plot* plot, const std::vector<DlaColumn>& sides, bool difference, Values&& values) {
    const viz::Rgba8 colors[] = {viz::kSsaColor, viz::kCompareColor, viz::kBaseColor};
    for (size_t n = 0; n < sides.size(); ++n) {
        viz::PlotSeries series;
        // Each side's whole logit in its legend (the bars are a part of it: a top few of the heads).
        char total[64];
        std::snprintf(total, sizeof total, " (%s %.3f)", difference ? "difference" : "logit", sides[n].logit);
        series.Name = (n == 1 && sides.size() > 2 ? std::string("tau = 1") : sides[n].name) + viz::SignlessZero(total);
        series.Kind = viz::SeriesKind::Bars;
        series.Color = colors[std::min<size_t>(n, std::size(colors) - 1)];
        series.Y = values(sides[n]);
        plot->Series.push_back(std::move(series));
    }
}

std::string LabelAt(const std::vector<std::string>& token_labels, int64_t t) {
    return t >= 0 && static_cast<size_t>(t) < token_labels.size() ? token_labels[static_cast<size_t>(t)] : "?";
}

// "the last token 'x'" or "token 5 'x' (predicted at position 4)": the text's token `t` (`piece`:
// as it reads), named by the position --dla-position and the window name too.
std::string TextTokenWords(const std::vector<std::string>& token_labels, int64_t t, const std::string& piece) {
    if (t + 1 == static_cast<int64_t>(token_labels.size())) return "the last token '" + piece + "'";
    return "token " + std::to_string(t) + " '" + piece + "' (predicted at position " + std::to_string(t - 1) + ")";
}

}  // namespace

namespace {

// Each head's part of the next token's logit, mean over positions [L * H]; with `ssa` (another
// side's), each position's part read through SSA's divisor there.
std::vector<float> DlaHeadMeans(const model::Lens& side, const model::Lens* ssa = nullptr) {
    const int64_t L = side.n_layer, H = side.n_head, T = side.n_tokens;
    std::vector<float> mean(static_cast<size_t>(std::max<int64_t>(0, L * H)), 0.0f);
    const size_t n = static_cast<size_t>(std::max<int64_t>(T - 1, 0));
    const bool through = ssa && ssa != &side && ssa->dla_divisor.size() == n && side.dla_divisor.size() == n;
    for (int64_t k = 0; k < L * H && T >= 2 && side.dla.size() >= static_cast<size_t>(L * H * (T - 1)); ++k) {
        double sum = 0;
        for (int64_t t = 0; t < T - 1; ++t)
            sum += side.dla[k * (T - 1) + t] * (through && ssa->dla_divisor[t] > 0 ? static_cast<double>(side.dla_divisor[t]) / ssa->dla_divisor[t] : 1.0);
        mean[k] = static_cast<float>(sum / (T - 1));
    }
    return mean;
}

}  // namespace

float DlaHeadsMost(const std::vector<LensSideFiles>& sides) {
    float most = 1e-6f;
    const model::Lens* ssa = sides.empty() ? nullptr : sides[0].lens.get();
    for (const LensSideFiles& s : sides)
        if (s.lens)
            for (float v : DlaHeadMeans(*s.lens, ssa)) most = std::max(most, std::abs(v));
    return most;
}

viz::Figure DlaHeadsFigure(const LensSideFiles& named, const std::string& model_name, float shared_most, const viz::FigureText& text,
                           const model::Lens* ssa) {
    const model::Lens& side = *named.lens;
    const int64_t L = side.n_layer, H = side.n_head;
    const bool through = ssa && ssa != &side;
    const std::vector<float> mean = DlaHeadMeans(side, through ? ssa : nullptr);
    const float most = shared_most > 0.0f ? shared_most : DlaHeadsMost({named});
    viz::HeatmapFigureOptions o;
    o.Text = text;
    // Cells as large as the fine-tune's, each head's value in it; what is averaged in the bar's
    // caption (a title of both made a small grid beside a wide blank).
    o.Title = model_name + " \xC2\xB7 " + (named.title.empty() ? named.name : named.title) + ": each head's part of the next token's logit";
    for (int64_t l = 0; l < L; ++l) o.RowLabels.push_back("L" + std::to_string(l));
    for (int64_t h = 0; h < H; ++h) o.ColLabels.push_back("H" + std::to_string(h));
    o.Style.colormap = viz::Colormap::Diverging;
    o.Style.range = viz::Range{-most, most};
    o.Style.causal = false;
    o.ValueLabel = through ? "direct logit attribution (logits), mean over positions, through SSA's final-norm divisor"
                           : "direct logit attribution (logits), mean over positions";
    o.RowAxis = "layer";
    o.ColAxis = "head";
    const int64_t cells = std::max<int64_t>({L, H, 1});
    o.MapSize = static_cast<int>(cells * std::clamp<int64_t>(560 / cells, 12, 48));
    // Two decimals; a grid whose values are all below 0.05 in two significant digits (a small
    // model's -0.0012 read 0.00 on the scale's end colour).
    o.CellValues = most >= 0.05f ? "%+.2f" : "%+.2g";
    o.NarrowTitle = true;  // a figure of its own: its siblings (_tau1, _base) as wide as their grids
    return viz::HeatmapFigure(mean.data(), static_cast<int>(L), static_cast<int>(H), o);
}

viz::Figure DlaHeadsChangeFigure(const std::vector<LensSideFiles>& sides, const std::string& model_name, const viz::FigureText& text) {
    if (sides.size() < 3 || !sides[0].lens || !sides[1].lens || !sides[2].lens) return {};
    const model::Lens &s = *sides[0].lens, &t = *sides[1].lens, &b = *sides[2].lens;
    const int64_t L = s.n_layer, H = s.n_head, n = s.n_tokens - 1;
    auto whole = [&](const model::Lens& x) {
        return x.n_tokens == s.n_tokens && x.dla.size() == static_cast<size_t>(L * H * n) && x.dla_divisor.size() == static_cast<size_t>(n);
    };
    if (n < 1 || L * H < 1 || !whole(s) || !whole(t) || !whole(b)) return {};
    std::vector<float> temperatures(static_cast<size_t>(L * H)), drift(temperatures.size());
    for (int64_t k = 0; k < L * H; ++k) {
        double temps = 0, drifts = 0;
        for (int64_t i = 0; i < n; ++i) {
            auto ratio = [&](const model::Lens& x) { return s.dla_divisor[i] > 0 && x.dla_divisor[i] > 0 ? double{x.dla_divisor[i]} / s.dla_divisor[i] : 1.0; };
            const double ssa = s.dla[k * n + i], tau1 = t.dla[k * n + i] * ratio(t), base = b.dla[k * n + i] * ratio(b);
            temps += std::abs(ssa - tau1);
            drifts += std::abs(tau1 - base);
        }
        temperatures[k] = static_cast<float>(temps / n);
        drift[k] = static_cast<float>(drifts / n);
    }
    float most = 1e-6f;
    for (const std::vector<float>* v : {&temperatures, &drift})
        for (float x : *v) most = std::max(most, x);
    viz::HeatmapFigureOptions o;
    o.Text = viz::FigureText{true, text.Scale};  // the panels' titles say which part: kept without the figure's
    for (int64_t l = 0; l < L; ++l) o.RowLabels.push_back("L" + std::to_string(l));
    for (int64_t h = 0; h < H; ++h) o.ColLabels.push_back("H" + std::to_string(h));
    o.RowAxis = "layer";
    o.ColAxis = "head";
    o.ValueLabel = "|change| of the part, logits, mean over positions";
    o.Style.causal = false;
    o.Style.range = viz::Range{0.0f, most};
    const int64_t cells = std::max<int64_t>({L, H, 1});
    o.MapSize = static_cast<int>(cells * std::clamp<int64_t>(560 / cells, 12, 48));
    o.CellValues = "%#.2g";
    std::vector<viz::Figure> panels;
    o.Title = "temperatures: |SSA - tau = 1|";
    panels.push_back(viz::HeatmapFigure(temperatures.data(), static_cast<int>(L), static_cast<int>(H), o));
    o.Title = "drift: |tau = 1 - " + (sides[2].title.empty() ? sides[2].name : sides[2].title) + "|";
    panels.push_back(viz::HeatmapFigure(drift.data(), static_cast<int>(L), static_cast<int>(H), o));
    return viz::Beside(panels, model_name + " \xC2\xB7 what fine-tuning changed in what each head writes: its part of the next token's logit, "
                                            "every side through SSA's final-norm divisor",
                       text);
}

DlaShown DlaOfLens(const std::vector<LensSideFiles>& sides, const std::vector<std::string>& token_labels, int64_t position) {
    DlaShown shown;
    if (sides.empty() || !sides[0].lens) return shown;
    const int64_t L = sides[0].lens->n_layer, H = sides[0].lens->n_head, T = sides[0].lens->n_tokens;
    if (position < 0 || position >= T - 1) return shown;
    shown.n_layer = L;
    shown.n_head = H;
    for (const LensSideFiles& named : sides) {
        const model::Lens& side = *named.lens;
        if (side.n_tokens != T || side.dla.size() != static_cast<size_t>(L * H * (T - 1))) return {};
        DlaColumn column;
        column.name = named.name;
        for (int64_t k = 0; k < L * H; ++k) column.heads.push_back(side.dla[k * (T - 1) + position]);
        for (int64_t l = 0; l < L; ++l) column.mlp.push_back(side.dla_mlp[l * (T - 1) + position]);
        column.embed = side.dla_embed[position];
        column.biases = side.dla_const[position];
        column.logit = side.logit[position];
        if (static_cast<size_t>(position) < side.dla_divisor.size() && static_cast<size_t>(position) < side.dla_free.size())
            column.divisor = side.dla_divisor[position], column.free = side.dla_free[position];
        shown.sides.push_back(std::move(column));
    }
    shown.whose = TextTokenWords(token_labels, position + 1, LabelAt(token_labels, position + 1));
    return shown;
}

DlaShown DlaOfAttribution(const SidesAttribution& attributed, const std::vector<std::string>& names, int64_t n_layer, int64_t n_head,
                          const std::vector<std::string>& token_labels, const std::function<std::string(int32_t)>& piece) {
    DlaShown shown;
    const int64_t L = n_layer, H = n_head, t = attributed.position;
    shown.n_layer = L;
    shown.n_head = H;
    for (size_t k = 0; k < attributed.sides.size(); ++k) {
        const model::LensAt& at = attributed.sides[k];
        if (at.parts.size() != static_cast<size_t>(L * H + L + 2)) return {};
        DlaColumn column;
        column.name = k < names.size() ? names[k] : "?";
        column.heads.assign(at.parts.begin(), at.parts.begin() + L * H);
        column.mlp.assign(at.parts.begin() + L * H, at.parts.begin() + L * H + L);
        column.embed = at.parts[L * H + L];
        column.biases = at.parts[L * H + L + 1];
        column.logit = at.logit;
        column.divisor = at.divisor;
        column.free = at.free;
        shown.sides.push_back(std::move(column));
    }
    const std::string after = t + 1 == static_cast<int64_t>(token_labels.size()) ? "after the text (its last token '" + LabelAt(token_labels, t) + "')"
                                                                                  : "after token " + std::to_string(t) + " '" + LabelAt(token_labels, t) + "'";
    const std::string token = TokenLabel(piece(attributed.token));
    if (attributed.target == LensTarget::Top) shown.whose = "SSA's top prediction '" + token + "' " + after;
    else shown.whose = TextTokenWords(token_labels, t + 1, token);
    if (attributed.versus >= 0) {
        shown.whose += " against SSA's other '" + TokenLabel(piece(attributed.versus)) + "'";
        shown.difference = true;
    }
    return shown;
}

DlaShown ThroughSsaDivisor(const DlaShown& shown) {
    DlaShown out = shown;
    if (shown.sides.size() < 2 || !(shown.sides[0].divisor > 0.0f)) return out;
    const float to = shown.sides[0].divisor;
    for (DlaColumn& side : out.sides) {
        if (!(side.divisor > 0.0f)) continue;
        const float norm = model::ReadThroughDivisor(&side.heads, &side.mlp, &side.embed, &side.biases, side.divisor, side.free, to, side.logit);
        side.norm = &side == &out.sides[0] ? 0.0f : norm;
        side.divisor = to;
    }
    return out;
}

namespace {

// "... : each head's part of its logit" / "... of the logit difference", and the axis's unit.
std::string WhatIsSplit(const DlaShown& shown) { return shown.difference ? "the logit difference" : "its logit"; }
std::string DlaAxis(const DlaShown& shown) {
    return shown.difference ? "part of the logit difference (logits)" : "direct logit attribution (logits)";
}

}  // namespace

// " (every side through SSA's final-norm divisor)" where there are other sides, as ThroughSsaDivisor reads them.
std::string DivisorNote(const DlaShown& shown) { return shown.sides.size() > 1 ? " (every side through SSA's final-norm divisor)" : ""; }

viz::Figure DlaBarsFigure(const DlaShown& given, const std::string& model_name, const viz::FigureText& text) {
    const DlaShown shown = ThroughSsaDivisor(given);
    const int64_t L = shown.n_layer, H = shown.n_head;
    if (shown.sides.empty() || L * H <= 0) return {};
    std::vector<int64_t> heads(static_cast<size_t>(L * H));
    for (int64_t k = 0; k < L * H; ++k) heads[k] = k;
    auto weight = [&](int64_t k) {
        float most = 0;
        for (const DlaColumn& side : shown.sides) most = std::max(most, std::abs(side.heads[k]));
        return most;
    };
    std::stable_sort(heads.begin(), heads.end(), [&](int64_t a, int64_t b) { return weight(a) > weight(b); });
    heads.resize(std::min<size_t>(heads.size(), 16));
    viz::Plot plot;
    plot.Options.Title = model_name + " \xC2\xB7 " + shown.whose + ": each head's part of " + WhatIsSplit(shown) + " (the largest " +
                         std::to_string(heads.size()) + ")" + DivisorNote(shown);
    plot.Options.Text = text;
    plot.Options.XLabel = "head";
    plot.Options.YLabel = DlaAxis(shown);
    plot.Options.Width = 900;
    plot.Options.Height = 440;
    for (int64_t k : heads) plot.Options.XCategories.push_back("L" + std::to_string(k / H) + " H" + std::to_string(k % H));
    AddSideBars(&plot, shown.sides, shown.difference, [&](const DlaColumn& side) {
        std::vector<float> y;
        for (int64_t k : heads) y.push_back(side.heads[k]);
        return y;
    });
    return viz::PlotFigure(plot);
}

viz::Figure DlaLayersFigure(const DlaShown& given, const std::string& model_name, const viz::FigureText& text) {
    const DlaShown shown = ThroughSsaDivisor(given);
    const int64_t L = shown.n_layer, H = shown.n_head;
    if (shown.sides.empty() || L * H <= 0) return {};
    const bool sides = shown.sides.size() > 1;
    viz::Plot plot;
    plot.Options.Title = model_name + " \xC2\xB7 " + shown.whose + ": each layer's part of " + WhatIsSplit(shown) + DivisorNote(shown);
    plot.Options.Text = text;
    plot.Options.XLabel = "layer";
    plot.Options.YLabel = DlaAxis(shown);
    plot.Options.Width = 900;
    plot.Options.Height = 440;
    for (int64_t l = 0; l < L; ++l)
        for (const char* part : {" attn", " MLP"}) plot.Options.XCategories.push_back("L" + std::to_string(l) + part);
    plot.Options.XCategories.push_back("embeddings");  // as the lens's rows
    plot.Options.XCategories.push_back("biases");
    if (sides) plot.Options.XCategories.push_back("final norm");  // what a side's own divisor adds to SSA's reading
    AddSideBars(&plot, shown.sides, shown.difference, [&](const DlaColumn& side) {
        std::vector<float> y;
        for (int64_t l = 0; l < L; ++l) {
            double attention = 0;
            for (int64_t h = 0; h < H; ++h) attention += side.heads[l * H + h];
            y.push_back(static_cast<float>(attention));
            y.push_back(side.mlp[l]);
        }
        y.push_back(side.embed);
        y.push_back(side.biases);
        if (sides) y.push_back(side.norm);
        return y;
    });
    return viz::PlotFigure(plot);
}

namespace {

// dla_at.json: the attribution of --dla-target's logit (the next token's by default), the numbers
// dla_bars and dla_layers draw.
json DlaAtJson(const DlaShown& split, const SidesAttribution& at, const std::function<std::string(int32_t)>& piece,
               const std::vector<std::string>& token_labels) {
    auto token = [&](int32_t id) { return id < 0 ? json() : json{{"id", id}, {"piece", piece(id)}}; };
    json sides = json::array();
    for (const DlaColumn& c : split.sides) {
        json heads = json::array();
        for (int64_t l = 0; l < split.n_layer; ++l)
            heads.push_back(std::vector<float>(c.heads.begin() + l * split.n_head, c.heads.begin() + (l + 1) * split.n_head));
        sides.push_back({{"name", c.name}, {"logit", c.logit}, {"heads", std::move(heads)}, {"mlp", c.mlp}, {"embed", c.embed}, {"const", c.biases},
                         {"divisor", c.divisor}, {"const_free", c.free}});
    }
    // Beside other sides: each side's parts through SSA's divisor, and what its own adds (`final_norm`).
    if (split.sides.size() > 1) {
        const DlaShown through = ThroughSsaDivisor(split);
        for (size_t k = 0; k < through.sides.size() && k < sides.size(); ++k) {
            const DlaColumn& c = through.sides[k];
            json heads = json::array();
            for (int64_t l = 0; l < split.n_layer; ++l)
                heads.push_back(std::vector<float>(c.heads.begin() + l * split.n_head, c.heads.begin() + (l + 1) * split.n_head));
            sides[k]["through_ssa_divisor"] = {{"heads", std::move(heads)}, {"mlp", c.mlp}, {"embed", c.embed}, {"const", c.biases}, {"final_norm", c.norm}};
        }
    }
    const size_t t = static_cast<size_t>(at.position);
    return {{"position", at.position},
            {"token", t < token_labels.size() ? json(token_labels[t]) : json()},
            {"target", ToString(at.target)},
            {"attributed", token(at.token)},
            {"versus", token(at.versus)},
            {"about", std::string("each side's parts of the logit of `attributed` after position `position` (heads [layer][head], each layer's MLP, "
                                  "the embeddings, the biases' const; they sum to `logit`), read through the side's final-norm `divisor` "
                                  "(every part but `const_free`, the final norm's and the head's biases, scales as 1 / divisor); beside other "
                                  "sides `through_ssa_divisor` reads them through SSA's divisor, so that a part that wrote the same reads the same, "
                                  "and `final_norm` is what the side's own divisor adds: they sum to `logit` too") +
                          (at.versus >= 0 ? ", less `versus`'s: a logit difference, above 0 toward `attributed`" : "")},
            {"sides", std::move(sides)}};
}

}  // namespace

std::vector<ExportFile> LensFiles(const std::vector<LensSideFiles>& sides, const std::function<std::string(int32_t)>& piece,
                                  const ExportOptions& options, const std::vector<std::string>& token_labels, const std::string& model_name,
                                  const SidesAttribution* attributed) {
    std::vector<ExportFile> files;
    const std::vector<const char*> extensions = FigureExtensions(options);
    for (const LensSideFiles& named : sides) {
        const std::shared_ptr<const model::Lens>& side = named.lens;
        const std::string& suffix = named.suffix;
        if (!side) continue;
        const int64_t L = side->n_layer, H = side->n_head, T = side->n_tokens, k = side->top_k;
        struct Array { const char* name; const std::vector<float>* data; std::vector<int64_t> shape; };
        const Array arrays[] = {{"lens_loss", &side->loss, {L + 1, T - 1}}, {"dla", &side->dla, {L, H, T - 1}},
                                {"dla_mlp", &side->dla_mlp, {L, T - 1}},    {"dla_embed", &side->dla_embed, {T - 1}},
                                {"dla_const", &side->dla_const, {T - 1}}, {"dla_logit", &side->logit, {T - 1}},
                                {"dla_divisor", &side->dla_divisor, {T - 1}}, {"dla_const_free", &side->dla_free, {T - 1}}};
        for (const Array& arr : arrays)
            files.push_back({arr.name + suffix + ".npy", [side = side, arr](const std::string& full) {
                                 return model::WriteNpy(full, arr.data->data(), arr.shape);
                             }});
        // Each id's piece once (the top lists repeat them), named now: the writer runs on another thread.
        std::map<int32_t, std::string> pieces;
        for (int32_t id : side->top_ids) pieces.emplace(id, std::string());
        for (auto& [id, text] : pieces) text = piece(id);
        files.push_back({"lens_top" + suffix + ".json", [side = side, pieces = std::move(pieces), L, T, k](const std::string& full) {
                             json layers = json::array();
                             for (int64_t l = 0; l <= L; ++l) {
                                 json positions = json::array();
                                 for (int64_t t = 0; t < T; ++t) {
                                     json top = json::array();
                                     for (int64_t r = 0; r < k; ++r) {
                                         const size_t at = static_cast<size_t>((l * T + t) * k + r);
                                         const int32_t id = side->top_ids[at];
                                         top.push_back({{"id", id}, {"piece", pieces.at(id)}, {"p", side->top_probs[at]}});
                                     }
                                     positions.push_back(std::move(top));
                                 }
                                 layers.push_back(std::move(positions));
                             }
                             const json j = {{"layers", L + 1}, {"positions", T}, {"k", k},
                                             {"about", "top[l][t]: the k most likely tokens after position t read after layer l "
                                                       "(0: the embeddings, L: the model's own prediction)"},
                                             {"top", std::move(layers)}};
                             return WriteText(full, model::JsonText(j, -1) + "\n");
                         }});
        // Figures for papers: the lens grid and the heads' mean attribution. A text of one token has
        // no next token to read or attribute: its files are empty and it has no figure (a map of 0s
        // would read as heads that write nothing).
        const std::string& side_name = named.title.empty() ? named.name : named.title;
        for (const char* ext : side->n_tokens >= 2 ? extensions : std::vector<const char*>()) {
            files.push_back(FigureFile("lens" + suffix, ext, [side = side, token_labels, model_name, side_name, text = options.figures.text] {
                return LensFigure(*side, model_name, side_name, token_labels, text);
            }, size_t{64} << 20, options.figures.png_scale));
            files.push_back(FigureFile("dla_heads" + suffix, ext, [named, model_name, most = DlaHeadsMost(sides), text = options.figures.text,
                                                                   ssa = sides[0].lens] { return DlaHeadsFigure(named, model_name, most, text, ssa.get()); },
                                       size_t{64} << 20, options.figures.png_scale));
        }
    }
    // For papers: where SSA's lens differs from each other side's, as the loss of the next token SSA
    // minus the other's after each layer (blue where SSA predicts it better), on a symmetric diverging scale (lens_diff against the
    // comparison, lens_diff_base against a base: where in depth fine-tuning changed the prediction).
    // A text of one token has no next token to lose on: no difference to draw (it wrote an empty PNG).
    // A fine-tune's three sides (SSA, tau = 1, base): tau = 1 minus the base too (lens_diff_drift, the
    // other weights' drift), the three on one scale (FineTuneLensScale).
    const LensSideFiles* ssa_side = !sides.empty() && sides[0].suffix.empty() && sides[0].lens && sides[0].lens->n_tokens >= 2 ? &sides[0] : nullptr;
    auto same_shape = [&](const LensSideFiles& s) { return ssa_side && s.lens && s.lens->loss.size() == ssa_side->lens->loss.size(); };
    const bool three = sides.size() >= 3 && sides[1].suffix == "_tau1" && sides[2].suffix == "_base" && same_shape(sides[1]) && same_shape(sides[2]);
    const std::optional<DivergingScale> shared =
        three ? std::optional(FineTuneLensScale(*ssa_side->lens, *sides[1].lens, *sides[2].lens)) : std::nullopt;
    auto diff_figure = [&](const std::string& name, const LensSideFiles& first, const LensSideFiles& other) {
        for (const char* ext : extensions)
            files.push_back(FigureFile(name, ext, [first, other, token_labels, model_name, text = options.figures.text, shared] {
                // "SSA - tau = 1", as the maps' differences; the base by its folder.
                return LensDiffFigure(*first.lens, *other.lens, model_name, first.name, other.suffix == "_base" && !other.title.empty() ? other.title : other.name,
                                      token_labels, text, shared ? &*shared : nullptr);
            }, size_t{64} << 20, options.figures.png_scale));
    };
    for (size_t i = 1; ssa_side && i < sides.size(); ++i)
        if (same_shape(sides[i])) diff_figure(sides[i].suffix == "_base" ? "lens_diff_base" : "lens_diff", *ssa_side, sides[i]);
    if (three) diff_figure("lens_diff_drift", sides[1], sides[2]);
    if (three)
        for (const char* ext : extensions)
            files.push_back(FigureFile("dla_heads_change", ext, [sides, model_name, text = options.figures.text] {
                return DlaHeadsChangeFigure(sides, model_name, text);
            }, size_t{64} << 20, options.figures.png_scale));
    // For papers: a token's logit (the last's, or --dla-position's; --dla-target's token) split by
    // head, SSA's parts beside the other sides', the heads whose parts are largest on any side
    // (dla_bars), and by layer.
    std::vector<LensSideFiles> shown;
    for (const LensSideFiles& side : sides)
        if (side.lens) shown.push_back(side);
    const int64_t T = shown.empty() ? 0 : shown[0].lens->n_tokens;
    const auto position = DlaQuery(options, T);  // refused before the lens ran (CheckDlaPosition): none drawn here
    DlaShown split;
    if (attributed && position && attributed->position == *position && !shown.empty()) {
        std::vector<std::string> names;
        for (const LensSideFiles& side : shown) names.push_back(side.name);
        // An attribution without parts of its own is the next token's, read from the lens's columns (dla.npy's).
        split = attributed->sides.empty() ? DlaOfLens(shown, token_labels, *position)
                                          : DlaOfAttribution(*attributed, names, shown[0].lens->n_layer, shown[0].lens->n_head, token_labels, piece);
        // Made now: `piece` may not outlive this call (the writers run later, on other threads).
        if (!split.sides.empty())
            files.push_back({"dla_at.json", [text = model::JsonText(DlaAtJson(split, *attributed, piece, token_labels), 1) + "\n"](
                                                const std::string& full) { return WriteText(full, text); }});
    } else if (T >= 2 && position) {
        split = DlaOfLens(shown, token_labels, *position);
    }
    if (!split.sides.empty())
        for (const char* ext : extensions) {
            files.push_back(FigureFile("dla_bars", ext, [split, model_name, text = options.figures.text] { return DlaBarsFigure(split, model_name, text); }, size_t{64} << 20,
                                       options.figures.png_scale));
            files.push_back(FigureFile("dla_layers", ext, [split, model_name, text = options.figures.text] { return DlaLayersFigure(split, model_name, text); }, size_t{64} << 20,
                                       options.figures.png_scale));
        }
    return files;
}

std::vector<ExportFile> PlanExport(std::string_view text, const model::Analysis& a, const model::ModelInfo& info,
                                   const ExportOptions& options) {
    std::vector<ExportFile> plan;
    const int64_t L = a.n_layer, H = a.n_head, T = a.n_tokens;
    // Titles name the model and its what-ifs on the temperatures: the first few, then how many
    // more (thousands of them would make a title no figure can hold; metrics.json lists them all).
    constexpr size_t kTitleWhatIfs = 3;
    std::string model_name = ModelName(info);
    for (size_t k = 0; k < a.interventions.size() && k < kTitleWhatIfs; ++k)
        model_name += (k == 0 ? " \xC2\xB7 what-if " : "; ") + model::Describe(a.interventions[k]);
    if (a.interventions.size() > kTitleWhatIfs)
        model_name += " and " + std::to_string(a.interventions.size() - kTitleWhatIfs) + " more what-ifs";
    const FigureSettings fig = options.figures;
    // Memory estimates: a head's map on the host (a difference map holds both sides), and a figure
    // as RGBA raster plus the PNG encoder's filtered copy and output (~10 bytes a pixel, margins included).
    const size_t map_bytes = static_cast<size_t>(T) * T * sizeof(float);
    auto figure_bytes = [&](int64_t side) { return size_t{10} * (side + 400) * (side + 400) + 2 * map_bytes; };
    const size_t heatmap_bytes = figure_bytes(fig.map_size > 0 ? fig.map_size : std::max<int64_t>(T, 800));
    const size_t small_figure_bytes = figure_bytes(1200);  // grids, highlights and plots: fixed-size layouts
    if (options.json) {
        plan.push_back({"tokens.json", [&a, text = std::string(text)](const std::string& full) {
                            return WriteText(full, model::JsonText(TokensToJson(text, a.tokens), 1) + "\n");
                        }});
        plan.push_back({"metrics.json", [&a, &info, eps = options.sink_epsilon](const std::string& full) {
                            return WriteText(full, model::JsonText(MetricsToJson(a, info, eps), 1) + "\n");
                        }});
    }
    if (options.npy) {
        // The maps stream a row at a time, read from each head's kept map (model::MapCells) 256
        // rows at once: [L, H, T, T] never has to fit in memory, nor a head's [T, T] copied whole
        // (at 8,192 tokens 268 MB of fresh memory a head, most of its time page faults).
        std::vector<std::pair<std::string, model::MapSide>> maps = {{"attention.npy", model::MapSide::Ssa},
                                                                    {"attention" + CompareFileSuffix(a) + ".npy", model::MapSide::Compare}};
        if (a.HasBase()) maps.push_back({"attention_base.npy", model::MapSide::Base});
        for (const auto& [name, side] : maps)
            plan.push_back({name, [&a, L, H, T, side = side](const std::string& full) {
                                constexpr int64_t kRows = 256;
                                model::MapCellsPtr head;
                                std::vector<float> rows;
                                return model::WriteNpyParts(full, {L, H, T, T}, L * H * T, [&](int64_t k, std::string* error) -> const float* {
                                    const int64_t i = k % T, first = i - i % kRows;
                                    if (i == first) {  // this head's next rows (its map made at its first row)
                                        if (i == 0) head = a.Cells(side, static_cast<int>(k / T / H), static_cast<int>(k / T % H));
                                        const int64_t n = std::min(kRows, T - first);
                                        rows = head ? head->Cells(0, static_cast<int>(first), 0, static_cast<int>(n), static_cast<int>(T)) : std::vector<float>();
                                        if (rows.size() != static_cast<size_t>(n * T)) {
                                            *error = "the analysis has no maps";
                                            return nullptr;
                                        }
                                    }
                                    return rows.data() + static_cast<size_t>((i - first) * T);
                                });
                            }, nullptr, 2 * map_bytes});
        for (auto [name, values] : {std::pair{"tau_q.npy", &a.tau_q}, std::pair{"tau_v.npy", &a.tau_v}})
            plan.push_back({name, [values = values, L, H, T](const std::string& full) {
                                std::vector<float> row(static_cast<size_t>(T));
                                return model::WriteNpyParts(full, {L, H, T}, L * H, [&](int64_t k, std::string*) {
                                    values->CopyRow(k, row.data());
                                    return row.data();
                                });
                            }});
        struct Array { std::string name; const std::vector<float>* data; std::vector<int64_t> shape; };
        std::vector<Array> arrays = {Array{"loss.npy", &a.loss, {static_cast<int64_t>(a.loss.size())}}};
        // Entry t - 1: token t's loss given the tokens before it (the first token has none).
        if (a.HasComparePredictions())
            arrays.push_back(Array{"loss" + CompareFileSuffix(a) + ".npy", &a.loss_compare, {static_cast<int64_t>(a.loss_compare.size())}});
        if (a.HasBase()) arrays.push_back(Array{"loss_base.npy", &a.loss_base, {static_cast<int64_t>(a.loss_base.size())}});
        for (const Array& arr : arrays)
            plan.push_back({arr.name, [arr](const std::string& full) { return model::WriteNpy(full, arr.data->data(), arr.shape); }});
    }
    if (options.csv) {
        plan.push_back({"heads.csv", [&a, eps = options.sink_epsilon](const std::string& full) { return WriteText(full, HeadsCsv(a, eps)); }});
        for (int l : options.layers)
            for (int h : options.heads) {
                const std::string base = "csv/L" + std::to_string(l) + "_H" + std::to_string(h);
                plan.push_back({base + ".csv", [&a, l, h](const std::string& full) { return WriteHeadCsv(full, a, model::MapSide::Ssa, l, h); },
                                nullptr, 2 * map_bytes});
                plan.push_back({base + CompareFileSuffix(a) + ".csv",
                                [&a, l, h](const std::string& full) { return WriteHeadCsv(full, a, model::MapSide::Compare, l, h); },
                                nullptr, 2 * map_bytes});
                if (a.HasBase())  // the base's map too, as attention_base.npy and the base's heatmaps have it
                    plan.push_back({base + "_base.csv", [&a, l, h](const std::string& full) { return WriteHeadCsv(full, a, model::MapSide::Base, l, h); },
                                    nullptr, 2 * map_bytes});
            }
    }
    const std::vector<const char*> extensions = FigureExtensions(options);
    for (const char* ext : extensions) {
        for (int l : options.layers)
            for (int h : options.heads)
                for (MapMode mode : options.maps) {
                    const HeadRef head{l, h};
                    const std::string path = "heatmaps/L" + std::to_string(l) + "_H" + std::to_string(h) + MapSuffix(a, mode);
                    plan.push_back(FigureFile(path, ext, [&a, model_name, head, mode, fig] { return MapFigure(a, model_name, head, mode, fig); },
                                              heatmap_bytes, fig.png_scale));
                }
        // Side by side for a paper, with the maps SSA and its comparison asked for: SSA |
        // comparison | difference, and with a base SSA | tau = 1 | base.
        const bool both = std::count(options.maps.begin(), options.maps.end(), MapMode::Ssa) &&
                          std::count(options.maps.begin(), options.maps.end(), MapMode::Compare);
        if (!both || a.compare_label.empty()) continue;
        const size_t side_by_side_bytes = 3 * figure_bytes(std::min<int64_t>(fig.map_size > 0 ? fig.map_size : std::max<int64_t>(T, 800),
                                                                               kSideBySideMapSize));
        for (int l : options.layers)
            for (int h : options.heads)
                for (bool three_way : {false, true}) {
                    if (three_way && !a.HasBase()) continue;
                    const HeadRef head{l, h};
                    const std::string path = "heatmaps/L" + std::to_string(l) + "_H" + std::to_string(h) + (three_way ? "_three_way" : "_side_by_side");
                    plan.push_back(FigureFile(path, ext, [&a, model_name, head, three_way, fig] {
                        return SideBySideFigure(a, model_name, head, three_way, fig);
                    }, side_by_side_bytes, fig.png_scale));
                }
    }
    for (const char* ext : extensions) {
        for (MapMode mode : options.maps) {
            plan.push_back(FigureFile("heads_grid" + MapSuffix(a, mode), ext,
                                      [&a, model_name, mode, fig] { return HeadsGrid(a, model_name, mode, fig); }, small_figure_bytes, fig.png_scale));
        }
        plan.push_back(FigureFile("highlight", ext, [&a, model_name, fig] { return Highlight(a, model_name, fig); }, small_figure_bytes, fig.png_scale));
        if (a.HasBase() && a.n_tokens >= 2) {  // what fine-tuning changed: head by head, and token by token (a loss: 2 tokens)
            plan.push_back(FigureFile("finetune", ext, [&a, model_name, fig] { return FineTuneFigure(a, model_name, fig.log_scale, fig.text); },
                                      small_figure_bytes, fig.png_scale));
            plan.push_back(FigureFile("finetune_loss", ext, [&a, model_name, fig] { return FineTuneLossFigure(a, model_name, fig.text); }, small_figure_bytes, fig.png_scale));
        }
        for (const std::string& name : SparsityFigureNames())
            plan.push_back(FigureFile("plots/" + name, ext, [&a, model_name, name, eps = options.sink_epsilon, fig] {
                return SparsityFigure(a, model_name, name, eps, fig.text);
            }, small_figure_bytes, fig.png_scale));
    }
    if (options.html)
        plan.push_back({"highlight.html", [&a, model_name, fig](const std::string& full) {
                            return WriteText(full, HighlightHtmlPage(a, model_name, fig));
                        }});
    return plan;
}

namespace {

// Makes a temporary file in `folder` and removes it: what every export file will do there.
model::Status ProbeWrite(const fs::path& folder, const std::string& shown) {
    auto probe = model::CreateTempFileBeside((folder / "ssaviz-probe").string());
    if (!probe) {
        const std::string& error = probe.error();  // "'PATH': cannot write (why)": the why is what matters here
        const size_t why = error.rfind(" (");
        return model::Fail(shown + " cannot be written: no file can be made in it" + (why == std::string::npos ? "" : error.substr(why)));
    }
    ::unlink(probe->c_str());
    return model::Ok{};
}

// One try of CheckExportFolder: makes the missing folders (adding those it made to `ours`) and a
// file in the last. `again` says the try is worth making again: a folder on the way was removed
// meanwhile (by another process's check of the same missing folders), which shows as a folder or
// the file that cannot be made for want of its parent; where that is for good (a folder that cannot
// be written, /proc), the last try says so again.
model::Status TryExportFolder(const fs::path& out, const std::string& shown, std::vector<fs::path>& ours, bool& again) {
    again = false;
    std::error_code ec;
    const fs::file_status st = fs::status(out, ec);  // --out itself may be a link to a folder: the user named it
    if (ec && ec.value() == ELOOP) return model::Fail(shown + model::WhyNotThere(ELOOP));
    if (fs::exists(st)) {
        if (!fs::is_directory(st)) {
            const char* kind = fs::is_fifo(st)                                           ? "a FIFO"
                               : fs::is_character_file(st) || fs::is_block_file(st) ? "a device"
                               : fs::is_socket(st)                                   ? "a socket"
                                                                                     : "a file";
            return model::Fail(shown + " is " + kind + ", not a folder: the folder to write is made if missing");
        }
        const model::Status probed = ProbeWrite(out, shown);
        again = !probed;
        return probed;
    }
    if (fs::is_symlink(fs::symlink_status(out, ec)))  // mkdir would say "File exists"
        return model::Fail(shown + " is a symbolic link to nothing: name the folder itself, or make the one it names");
    // The nearest folder that exists is where the new one will be made.
    // (One look at it: another process may remove it at any time, which the folder's mkdir shows.)
    fs::path parent = out.parent_path();
    fs::file_status up;
    while (!parent.empty() && !fs::exists(up = fs::status(parent, ec))) parent = parent.parent_path();
    if (parent.empty()) parent = ".", up = fs::status(parent, ec);
    if (!fs::is_directory(up))
        return model::Fail(shown + " cannot be made: '" + model::EscapeForMessage(parent.string()) + "' is not a folder");
    // Asking is not enough (as root, access() says yes to /proc and read-only mounts): the missing
    // folders are made and a file is made in the last. A folder another process made meanwhile
    // (batch workers sharing OUT) is used, never removed: only the folders made here are.
    std::vector<fs::path> made;
    for (fs::path at = out; at != parent && !at.empty(); at = at.parent_path()) made.insert(made.begin(), at);
    for (const fs::path& folder : made) {
        if (::mkdir(folder.c_str(), 0777) == 0) {
            ours.push_back(folder);
            continue;
        }
        const int why = errno;
        const fs::file_status there = fs::symlink_status(folder, ec);
        if (why == EEXIST && !fs::exists(there))  // made and removed again meanwhile
            return again = true, model::Fail(shown + " cannot be made: a folder on its way keeps vanishing");
        // Its parent removed meanwhile, or a place that says so for good (/proc): the same again.
        again = why == ENOENT;
        if (why != EEXIST || !fs::is_directory(there))
            return model::Fail(shown + " cannot be made: '" + model::EscapeForMessage(folder.string()) + "' (" + std::strerror(why) + ")");
    }
    const model::Status probed = ProbeWrite(out, shown);
    again = !probed;
    return probed;
}

}  // namespace

model::Status CheckExportPlaces(const std::string& out_dir, const std::string& folder, const ExportOptions& options) {
    std::vector<std::string> places = {folder};
    if (options.csv) places.push_back(folder + "/csv");
    if (options.png || options.svg) places.insert(places.end(), {folder + "/heatmaps", folder + "/plots"});
    for (const std::string& place : places)
        if (auto s = model::CheckFoldersBelow(out_dir, place); !s) return s;
    // The files such an export may write, in the formats asked for, every side's (SSA's, the
    // comparison's as `_compare` or beside a base `_tau1`, the base's): a FIFO or a folder where one
    // goes was found only once the model, the lens and the ranking had run. HeadImpactFiles' names
    // with --rank-heads (the drift's beside a base).
    const bool figures = options.png || options.svg;
    std::vector<std::string> names;
    auto figure = [&](const std::string& stem) {
        if (options.png) names.push_back(stem + ".png");
        if (options.svg) names.push_back(stem + ".svg");
    };
    if (options.json) names.insert(names.end(), {"tokens.json", "metrics.json"});
    if (options.npy) names.insert(names.end(), {"tau_q.npy", "tau_v.npy"});
    if (options.csv) names.push_back("heads.csv");
    if (options.html) names.push_back("highlight.html");
    figure("highlight");
    for (const std::string side : {"", "_compare", "_tau1", "_base"}) {
        if (options.npy) names.insert(names.end(), {"attention" + side + ".npy", "loss" + side + ".npy"});
        if (figures) figure("heads_grid" + side);
        if (!options.lens) continue;
        for (const char* stem : {"lens_loss", "dla", "dla_mlp", "dla_embed", "dla_const", "dla_logit", "dla_divisor", "dla_const_free"})
            names.push_back(stem + side + ".npy");
        names.push_back("lens_top" + side + ".json");
        figure("lens" + side);
        figure("dla_heads" + side);
    }
    for (const char* stem : {"finetune", "finetune_loss"}) figure(stem);
    if (options.lens) {
        for (const char* stem : {"lens_diff", "lens_diff_base", "lens_diff_drift", "dla_heads_change", "dla_bars", "dla_layers"}) figure(stem);
        names.push_back("dla_at.json");
    }
    if (options.rank_heads) {
        names.insert(names.end(), {"head_impacts.json", "head_impacts.csv", "head_impacts_drift.csv", "head_impacts_tokens.npy",
                                   "head_impacts_drift_tokens.npy"});
        for (const char* stem : {"head_impacts", "head_impacts_tokens", "head_impacts_drift_tokens"}) figure(stem);
    }
    for (const std::string& name : names)
        if (auto s = model::CheckFilePlace((fs::path(folder) / name).string()); !s) return s;
    // The per-head files and the plots: whatever a folder of them already holds where one of ours
    // could go (a layer and head, a map each: the names are many, the folder's entries few).
    std::vector<std::string> figure_extensions;
    if (options.png) figure_extensions.push_back(".png");
    if (options.svg) figure_extensions.push_back(".svg");
    const std::pair<const char*, std::vector<std::string>> kinds[] = {{"csv", options.csv ? std::vector<std::string>{".csv"} : std::vector<std::string>{}},
                                                                      {"heatmaps", figure_extensions},
                                                                      {"plots", figure_extensions}};
    for (const auto& [sub, extensions] : kinds) {
        if (extensions.empty()) continue;
        std::error_code ec;
        const fs::path dir = fs::path(folder) / sub;
        if (!fs::is_directory(fs::symlink_status(dir, ec))) continue;  // none yet (a link there: CheckFoldersBelow)
        for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
            const std::string ext = it->path().extension().string();
            if (std::find(extensions.begin(), extensions.end(), ext) == extensions.end()) continue;
            if (auto s = model::CheckFilePlace(it->path().string()); !s) return s;
        }
    }
    return model::Ok{};
}

model::Status CheckExportFolder(const std::string& out_dir, bool weights) {
    if (out_dir.empty()) return model::Fail("--out is empty: name the folder to write");
    if (!weights)
        if (auto s = CheckNotANewRunStep(out_dir); !s) return s;
    const std::string shown = "'" + model::EscapeForMessage(out_dir) + "'";
    // Made, probed and removed again; tried again, a few times at most, where another process
    // removed a folder on the way meanwhile. A folder made here that such a process's probe keeps
    // non-empty stays: that process is about to write in it.
    std::vector<fs::path> ours;
    model::Status status = model::Ok{};
    bool again = true;
    for (int attempt = 0; attempt < 16 && again; ++attempt) status = TryExportFolder(out_dir, shown, ours, again);
    for (auto it = ours.rbegin(); it != ours.rend(); ++it) ::rmdir(it->c_str());
    return status;
}

namespace {

// The first value of the analysis that is not finite, described; empty when all are. Maps, losses
// and predictions all follow from these, so an overflow anywhere shows here. `other_models`: only
// the sides another model computes (a twin, a base: the base's went unchecked, its NaN maps
// written beside finite-looking JS).
std::string FirstNonFinite(const model::Analysis& a, bool other_models) {
    const int T = a.n_tokens, H = a.n_head;
    const bool twin = a.comparison == model::Comparison::Twin;
    struct Values {
        const model::RowArray* values;
        const char* name;
        bool other;
    } rows[] = {{&a.tau_q, "tau_q", false},
                {&a.tau_v, "tau_v", false},
                {&a.tau_q_compare, "the comparison's tau_q", twin},
                {&a.tau_v_compare, "the comparison's tau_v", twin},
                {&a.tau_q_base, "the base's tau_q", true},
                {&a.tau_v_base, "the base's tau_v", true}};
    for (const Values& v : rows)
        for (size_t k = 0; (v.other || !other_models) && k < v.values->size() && T > 0 && H > 0; ++k)
            if (!std::isfinite((*v.values)[k]))
                return std::string(v.name) + " of L" + std::to_string(k / T / H) + " H" + std::to_string(k / T % H) + " at token " +
                       std::to_string(k % T);
    for (auto [values, name, other] : {std::tuple{&a.loss, "the loss", false}, std::tuple{&a.loss_compare, "the comparison's loss", twin},
                                       std::tuple{&a.loss_base, "the base's loss", true}})
        for (size_t k = 0; (other || !other_models) && k < values->size(); ++k)
            if (!std::isfinite((*values)[k])) return std::string(name) + " of token " + std::to_string(k + 1);
    return "";
}

std::string NonFiniteMessage(const std::string& bad, const model::Analysis& a) {
    if (bad.empty()) return "";
    const char* who = bad.rfind("the base's", 0) == 0                                                    ? "the base overflows float range"
                      : bad.rfind("the comparison's", 0) == 0 && a.comparison == model::Comparison::Twin ? "the twin overflows float range"
                                                                                                          : "the model or its what-ifs overflow float range";
    return "the analysis is not finite (" + bad + " is NaN or infinite): " + who;
}

}  // namespace

std::string NonFiniteAnalysis(const model::Analysis& a) { return NonFiniteMessage(FirstNonFinite(a, false), a); }

std::string NonFiniteOtherModel(const model::Analysis& a) { return NonFiniteMessage(FirstNonFinite(a, true), a); }

model::Status CheckHeatmapsFit(const ExportOptions& options, int64_t tokens) {
    const int scale = options.figures.png_scale;
    if (!options.png || (options.figures.map_size <= 0 && tokens <= 0)) return model::Ok{};
    // The map's side as HeatmapFigure sizes it, then its labels and colour bar around it (measured:
    // 170 x 118 px for a heatmap, 554 x 144 for three maps side by side; a little less here, so
    // that only what cannot fit is refused: the figure as drawn is checked again).
    const int64_t n = std::max<int64_t>(tokens, 1);
    const int64_t side = options.figures.map_size > 0 ? options.figures.map_size : std::clamp<int64_t>(std::llround(720.0 / n), 1, 28) * n;
    const bool side_by_side = std::count(options.maps.begin(), options.maps.end(), MapMode::Ssa) &&
                              std::count(options.maps.begin(), options.maps.end(), MapMode::Compare);
    const int64_t three = std::min<int64_t>(side, kSideBySideMapSize);
    // The labels' margins grow with --text-scale (at 3 a 2,700 px map passed here and failed drawn).
    const double t = options.figures.text.Size(1.0f);
    auto margin = [t](int64_t px) { return static_cast<int64_t>(std::floor(px * t)); };
    const struct {
        int64_t w, h;
        const char* what;
    } figures[] = {{side + margin(160), side + margin(110), "heatmaps"},
                   {side_by_side ? 3 * three + margin(540) : 0, side_by_side ? three + margin(130) : 0, "side-by-side heatmaps"}};
    for (const auto& [w, h, what] : figures) {
        if (w * scale <= viz::kMaxFigureSide && h * scale <= viz::kMaxFigureSide && w * scale * h * scale <= viz::kMaxFigurePixels) continue;
        const std::string limits = " past the most a figure may be (" + std::to_string(viz::kMaxFigureSide) + " pixels a side, " +
                                   std::to_string(viz::kMaxFigurePixels >> 20) + " M pixels)";
        char scaled[48] = "";
        if (t > 1.0) std::snprintf(scaled, sizeof scaled, " and --text-scale %g", t);
        const std::string text_scale = scaled;
        if (options.figures.map_size > 0)
            return model::Fail("--size " + std::to_string(options.figures.map_size) + " at --png-scale " + std::to_string(scale) + text_scale + " draws " +
                               what + limits + ": a smaller --size or --png-scale" + (t > 1.0 ? " or --text-scale" : ""));
        return model::Fail("a text of " + std::to_string(tokens) + " tokens at --png-scale " + std::to_string(scale) + " draws " + what + " of " +
                           std::to_string(side) + " pixels a side" + limits + ": a smaller --png-scale, or --size N for smaller maps");
    }
    return model::Ok{};
}

model::Status CheckExportSettings(const ExportOptions& options, bool has_base) {
    if (options.dla_position && !options.lens)
        return model::Fail("--dla-position picks the token whose logit the attribution figures split (dla_bars, dla_layers): it needs --lens");
    if (options.dla_target && !options.lens)
        return model::Fail("--dla-target picks whose logit the attribution figures split (dla_bars, dla_layers, dla_at.json): it needs --lens");
    if (ExportFormats(options).empty()) return model::Fail("nothing to write: no format is chosen (" + std::string(kExportFormatList) + ")");
    // A heatmap of --size drawn at --png-scale past what a figure may be: said before the model runs
    // (a heatmap sized by a text's tokens, once it is tokenised: CheckHeatmapsFit).
    if (auto s = CheckHeatmapsFit(options, 0); !s) return s;
    if (has_base) return model::Ok{};
    for (MapMode mode : options.maps)
        if (IsBaseMode(mode)) return model::Fail(std::string("--maps ") + ToString(mode) + " needs a base (--base DIR, or --compare base)");
    if ((options.png || options.svg || options.html) && NeedsBase(options.figures.highlight))
        return model::Fail(std::string("--highlight ") + ToString(options.figures.highlight) + " needs a base (--base DIR, or --compare base)");
    return model::Ok{};
}

model::Result<int64_t> DlaQuery(const ExportOptions& options, int64_t tokens) {
    // The positions that predict a token: those with a next token in the text, and for SSA's top
    // prediction the last too (what comes after the text).
    const bool top = options.dla_target == LensTarget::Top;
    const int64_t columns = top ? tokens : tokens - 1;
    if (!options.dla_position) {
        if (columns >= 1) return columns - 1;
        const std::string asked = options.dla_target ? "--dla-target " + std::string(ToString(*options.dla_target)) : std::string("the attribution");
        return model::Fail(asked + " needs a next token: a text of one token has none");
    }
    const int64_t asked = *options.dla_position;
    if (asked >= -columns && asked < columns) return asked < 0 ? asked + columns : asked;
    const std::string range = top ? "0 to " + std::to_string(columns - 1) + ", the text's positions (the last: SSA's prediction after the text)"
                                  : "0 to " + std::to_string(columns - 1) + ", the positions that predict a next token of the text (as dla.npy's last axis)";
    return model::Fail("--dla-position " + std::to_string(asked) + " is out of range: " +
                       (columns >= 1 ? range + ", or " + std::to_string(-columns) + " to -1 from the end"
                                     : std::string("a text of one token predicts no next token")));
}

model::Status CheckDlaPosition(const ExportOptions& options, int64_t tokens) {
    // One token: no figures, unless a position or a target is asked (the top prediction after it is one).
    if (!options.lens || (tokens < 2 && !options.dla_position && !options.dla_target)) return model::Ok{};
    if (auto position = DlaQuery(options, tokens); !position) return model::Fail(position.error());
    return model::Ok{};
}

model::Result<std::optional<SidesAttribution>> AttributeForExport(model::Engine& engine, const model::Analysis& a, size_t n_sides,
                                                                  const ExportOptions& options) {
    if (!options.lens || !options.dla_target) return std::optional<SidesAttribution>();
    const auto position = DlaQuery(options, a.n_tokens);
    if (!position) return std::optional<SidesAttribution>();  // refused before the lens ran (CheckDlaPosition)
    const model::MapSide order[] = {model::MapSide::Ssa, model::MapSide::Compare, model::MapSide::Base};
    std::vector<model::MapSide> sides(order, order + std::min(n_sides, std::size(order)));
    auto attributed = AttributeAt(engine, a.tokens.ids, sides, *position, *options.dla_target);
    if (!attributed) return model::Fail("--dla-target: " + attributed.error());
    return std::optional<SidesAttribution>(std::move(*attributed));
}

model::Status CheckHighlightHeld(const ExportOptions& options, const model::Analysis& a) {
    // A loss colouring of a side with no loss (the layer-local comparison has none) drew an empty highlight.
    if ((options.png || options.svg || options.html) && IsLoss(options.figures.highlight) && !Holds(a, options.figures.highlight))
        return model::Fail(std::string("--highlight ") + ToString(options.figures.highlight) + " needs the comparison's loss, which the " +
                           CompareName(a) + " comparison does not give: compare with tau = 1 (--compare vanilla) or a twin");
    return model::Ok{};
}

model::Status WriteExport(std::string_view text, const model::Analysis& a, const model::ModelInfo& info,
                          const ExportOptions& options, const ExportProgress& progress, std::vector<ExportFile> extra) {
    if (auto s = CheckExportFolder(options.out_dir); !s) return s;
    if (const std::string why = NonFiniteAnalysis(a); !why.empty()) return model::Fail(why + "; nothing was written");
    // No format chosen is fine where the caller adds files of its own (the lens's).
    if (auto s = CheckExportSettings(options, a.HasBase()); !s && !ExportFormats(options).empty()) return model::Fail(s.error() + "; nothing was written");
    else if (!s && extra.empty()) return s;
    if (auto s = CheckHighlightHeld(options, a); !s) return s;
    if (auto s = CheckDlaPosition(options, a.n_tokens); !s) return s;
    std::vector<ExportFile> plan = PlanExport(text, a, info, options);
    for (ExportFile& f : extra) plan.push_back(std::move(f));
    const fs::path out(options.out_dir);
    // Folders first, on this thread, so writers never race to create them. Inside --out nothing
    // is followed: a link where a folder belongs is refused, not written through.
    // Each folder a file is in and those between it and --out (run/curves/: run/ first, as the set sorts).
    std::set<fs::path> folders;
    for (const ExportFile& f : plan)
        for (fs::path at = (out / f.path).parent_path(); at != out && at.has_relative_path() && at.native().size() > out.native().size();
             at = at.parent_path())
            folders.insert(at);
    // The folders made here, outermost first: a failed export removes them again (if still empty).
    std::vector<fs::path> made;
    std::error_code ec;
    for (fs::path at = out; !at.empty() && !fs::exists(fs::symlink_status(at, ec)); at = at.parent_path()) made.insert(made.begin(), at);
    auto unmake = [&] {
        for (auto it = made.rbegin(); it != made.rend(); ++it) ::rmdir(it->c_str());
    };
    model::FoldersInProgress in_progress;  // an interrupt removes them too
    for (const fs::path& folder : made) in_progress.Add(folder.string());
    ec = model::MakeFolders(out.string());
    if (ec) return unmake(), model::Fail(out.string() + ": cannot create (" + ec.message() + ")");
    for (const fs::path& folder : folders) {
        if (folder == out) continue;
        const fs::file_status st = fs::symlink_status(folder, ec);
        if (fs::is_symlink(st))
            return unmake(), model::Fail("'" + model::EscapeForMessage(folder.string()) + "' is a symbolic link: ssaviz does not write through links inside --out");
        if (fs::exists(st) && !fs::is_directory(st))
            return unmake(), model::Fail("'" + model::EscapeForMessage(folder.string()) + "' is in the way: not a folder");
        if (fs::create_directory(folder, ec)) {
            made.push_back(folder);
            in_progress.Add(folder.string());
        }
        if (ec) return unmake(), model::Fail(folder.string() + ": cannot create (" + ec.message() + ")");
    }
    // Each file is written to a temporary one in a folder of our own inside the folder it goes to
    // (".export.ssaviz-*", one a folder, so that its rename stays within one file system); only when
    // every one is complete are they renamed into place, so a failure (a full disk, a cancel) leaves
    // --out as it was. (Folders rather than a file beside each: an interrupt removes a folder under
    // writers still running, which then cannot make their file again.) Files are independent and
    // each is deterministic, so several threads give the same bytes. (Held while they are written:
    // a later export removes those a killed one left, and only those.)
    std::map<fs::path, model::HeldTempFolder> staging;  // a file's folder -> ours inside it
    auto discard = [&](const std::string& error) {
        std::error_code ignored;
        for (const auto& [folder, ours] : staging) fs::remove_all(ours.path(), ignored);
        unmake();
        return model::Fail(error);
    };
    std::vector<std::string> temps(plan.size());
    for (size_t k = 0; k < plan.size(); ++k) {
        const fs::path folder = (out / plan[k].path).parent_path();
        auto at = staging.find(folder);
        if (at == staging.end()) {
            auto made = model::HeldTempFolder::Create((folder / "export").string());
            if (!made) return discard(made.error());
            at = staging.emplace(folder, std::move(*made)).first;
        }
        temps[k] = (fs::path(at->second.path()) / (std::to_string(k) + ".tmp")).string();
    }
    const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
    const size_t threads = std::min<size_t>(plan.size(), options.threads > 0 ? options.threads : hardware);
    std::atomic<size_t> next{0};
    std::mutex mutex;  // guards done, failure, in_flight and the progress callback
    std::condition_variable room;
    size_t done = 0, in_flight = 0;  // in_flight: the memory estimates of the files being written
    std::optional<std::string> failure;
    auto work = [&] {
        for (size_t k = next++; k < plan.size(); k = next++) {
            {
                std::unique_lock<std::mutex> lock(mutex);
                room.wait(lock, [&] { return failure || in_flight == 0 || in_flight + plan[k].memory <= kExportMemoryBudget; });
                if (failure) return;
                in_flight += plan[k].memory;
            }
            const std::string full = (out / plan[k].path).string();
            const std::string& temp = temps[k];
            // An allocation that fails (a figure too large for this machine) is this file's error,
            // not the process's end: the temporaries are removed below like any failure's.
            model::Status s = model::Ok{};
            try {
                s = plan[k].write(temp);
            } catch (const std::bad_alloc&) {
                s = model::Fail(temp + ": out of memory while writing it");
            } catch (const std::exception& e) {
                s = model::Fail(temp + ": " + model::EscapeForMessage(e.what()));
            }
            std::lock_guard<std::mutex> lock(mutex);
            in_flight -= plan[k].memory;
            room.notify_all();
            if (failure) return;
            if (!s) {
                std::string error = s.error();  // name the file, not its temporary
                for (size_t at; (at = error.find(temp)) != std::string::npos;) error.replace(at, temp.size(), full);
                failure = error;
                return;
            }
            ++done;
            if (progress && !progress(done, plan.size(), plan[k].path)) failure = "export cancelled";
        }
    };
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (std::thread& t : pool) t.join();
    if (failure) return discard(*failure);
    for (const ExportFile& f : plan)
        if (auto s = model::CheckFilePlace((out / f.path).string()); !s) return discard(s.error());
    // A link at the destination is replaced rather than written through; every file or none (one
    // that could not be replaced left the user's files before it replaced).
    std::vector<std::pair<std::string, std::string>> moves;
    for (size_t k = 0; k < plan.size(); ++k) moves.emplace_back(temps[k], (out / plan[k].path).string());
    model::PuttingInPlace all_or_none;
    if (auto s = model::RenameAllOrNone(moves); !s) return discard(s.error());
    for (const auto& [folder, ours] : staging) ::rmdir(ours.path().c_str());
    return model::Ok{};
}

model::Status ResolveExportHeads(ExportOptions* options, int layers, int heads) {
    for (auto [list, count, flag, what] :
         {std::tuple{&options->layers, layers, "--layers", "layer"}, std::tuple{&options->heads, heads, "--heads", "head"}}) {
        // Each index once (a session may repeat one), in the order first given.
        std::set<int> seen;
        list->erase(std::remove_if(list->begin(), list->end(), [&](int i) { return !seen.insert(i).second; }), list->end());
        if (list->empty())
            for (int i = 0; i < count; ++i) list->push_back(i);
        for (int i : *list)
            if (i < 0 || i >= count)
                return model::Fail(std::string(flag) + ": " + what + " " + std::to_string(i) + " is out of range (the model has " +
                                   std::to_string(count) + ")");
    }
    return model::Ok{};
}

}  // namespace app
