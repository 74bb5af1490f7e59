#include "model/io/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "model/io/files.h"

namespace model {

namespace {

using nlohmann::json;

Result<int> ReadPositiveInt(const json& root, const char* key, const std::string& source) {
    auto it = root.find(key);
    if (it == root.end()) return Fail(source + ": missing key '" + key + "'");
    // DescribeJson: a number as written (also beyond the int64 range); never a dump of a nested value.
    if (!it->is_number_integer()) return Fail(source + ": '" + key + "' must be an integer, got " + DescribeJson(*it));
    const bool in_range = it->is_number_unsigned() && it->get<uint64_t>() >= 1 && it->get<uint64_t>() <= (1u << 24);
    if (!in_range) return Fail(source + ": '" + key + "' = " + DescribeJson(*it) + " is out of range (1 .. 16777216)");
    return static_cast<int>(it->get<uint64_t>());
}

// Reads one side of the "ssa" block; `side` is "query" or "value".
Result<TemperatureForm> ReadForm(const json& ssa, const char* side, const std::string& source) {
    TemperatureForm form;
    auto it = ssa.find(side);
    if (it == ssa.end() || it->is_null()) return form;
    std::string where = source + ": ssa." + side;
    if (!it->is_object()) return Fail(where + " must be an object, got " + DescribeJson(*it));
    for (auto& [key, _] : it->items()) {
        if (key != "position" && key != "token" && key != "combine")
            return Fail(where + ": unknown key '" + EscapeForMessage(key) + "' (expected position, token, combine)");
    }
    auto text = [&](const char* key) -> Result<std::string> {
        auto v = it->find(key);
        if (v == it->end() || v->is_null()) return std::string("null");
        if (!v->is_string()) return Fail(where + "." + key + " must be a string or null, got " + DescribeJson(*v));
        return v->get<std::string>();
    };
    auto position = text("position");
    if (!position) return Fail(position.error());
    if (*position == "sigmoid") form.position = PositionForm::Sigmoid;
    else if (*position == "exp_exp") form.position = PositionForm::ExpExp;
    else if (*position == "linear") form.position = PositionForm::Linear;
    else if (*position != "null") return Fail(where + ".position: unknown form '" + EscapeForMessage(*position) + "' (expected sigmoid, exp_exp, linear or null)");

    auto token = text("token");
    if (!token) return Fail(token.error());
    if (*token == "shared") form.token = TokenForm::Shared;
    else if (*token == "feature") form.token = TokenForm::Feature;
    else if (*token != "null") return Fail(where + ".token: unknown form '" + EscapeForMessage(*token) + "' (expected shared, feature or null)");

    auto combine = text("combine");
    if (!combine) return Fail(combine.error());
    if (*combine == "product") form.combine = Combine::Product;
    else if (*combine != "sum" && *combine != "null") return Fail(where + ".combine: unknown value '" + EscapeForMessage(*combine) + "' (expected sum or product)");
    return form;
}

// The optional "ssa" block, the same in config.json and lit_config.json.
Status ReadSsaBlock(const json& root, const std::string& source, ModelConfig* c) {
    auto it = root.find("ssa");
    if (it == root.end() || it->is_null()) return Ok{};
    if (!it->is_object()) return Fail(source + ": 'ssa' must be an object, got " + DescribeJson(*it));
    for (auto& [key, _] : it->items())
        if (key != "query" && key != "value") return Fail(source + ": ssa: unknown key '" + EscapeForMessage(key) + "' (expected query, value)");
    auto q = ReadForm(*it, "query", source);
    if (!q) return Fail(q.error());
    auto v = ReadForm(*it, "value", source);
    if (!v) return Fail(v.error());
    c->query = *q;
    c->value = *v;
    return Ok{};
}

// A config's keys each read once with its type and range; a wrong one names the key and what it
// got. A missing or null key takes the fallback.
struct JsonFields {
    const json& root;
    const std::string& source;

    Status Wrong(const std::string& key, const char* want, const json& v) const {
        return Fail(source + ": '" + EscapeForMessage(key) + "' must be " + want + ", got " + DescribeJson(v));
    }
    const json* Get(const char* key) const {
        auto it = root.find(key);
        return it == root.end() || it->is_null() ? nullptr : &*it;
    }
    Result<int64_t> Int(const char* key, int64_t fallback, int64_t lo, int64_t hi) const {
        const json* v = Get(key);
        if (!v) return fallback;
        if (!v->is_number_integer()) return Fail(Wrong(key, "an integer", *v).error());
        if (v->is_number_unsigned() ? v->get<uint64_t>() > static_cast<uint64_t>(hi) || v->get<uint64_t>() < static_cast<uint64_t>(std::max<int64_t>(lo, 0))
                                    : v->get<int64_t>() < lo || v->get<int64_t>() > hi)
            return Fail(source + ": '" + key + "' = " + DescribeJson(*v) + " is out of range (" + std::to_string(lo) + " .. " + std::to_string(hi) + ")");
        return v->get<int64_t>();
    }
    Result<double> Number(const char* key, double fallback, double lo, double hi) const {
        const json* v = Get(key);
        if (!v) return fallback;
        if (!v->is_number()) return Fail(Wrong(key, "a number", *v).error());
        const double x = v->get<double>();
        if (!(x >= lo && x <= hi)) return Fail(source + ": '" + key + "' = " + DescribeJson(*v) + " is out of range (" + FormatRange(lo, hi) + ")");
        return x;
    }
    Result<bool> Bool(const char* key, bool fallback) const {
        const json* v = Get(key);
        if (!v) return fallback;
        if (!v->is_boolean()) return Fail(Wrong(key, "true or false", *v).error());
        return v->get<bool>();
    }
    Result<std::string> String(const char* key, const std::string& fallback) const {
        const json* v = Get(key);
        if (!v) return fallback;
        if (!v->is_string()) return Fail(Wrong(key, "a string", *v).error());
        return v->get<std::string>();
    }
    static std::string Format(double x) {  // %g: a bound of 1e-12 read "0" in fixed notation, 0 seemingly inside
        char text[32];
        std::snprintf(text, sizeof text, "%g", x);
        return text;
    }
    static std::string FormatRange(double lo, double hi) { return Format(lo) + " .. " + Format(hi); }
};

// Of `candidates` (rows of one kind: an HF model_type's, or lit-gpt's of one norm and MLP), the
// one a config's RoPE says: llama3 scaling names its row, else the largest base the config reaches
// (llama 10000, llama3 500000), else the first.
const Family* ByRope(const std::vector<const Family*>& candidates, const ModelConfig& c) {
    const Family* best = nullptr;
    for (const Family* f : candidates) {
        if (f->rope_llama3 && c.rope_llama3.factor > 0) return f;
        if (f->rope_base <= c.rope_base && (!best || f->rope_base > best->rope_base)) best = f;
    }
    return best ? best : candidates.empty() ? nullptr : candidates.front();
}

// lit-gpt's family from its config name (the longest of the table's lit-gpt name pieces it holds),
// else from its structure (for info and presets only).
std::string LitFamily(const std::string& name, const ModelConfig& c) {
    std::string n;
    for (char ch : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const Family* by_name = nullptr;
    size_t longest = 0;
    std::vector<const Family*> alike;  // lit-gpt's families of this norm and MLP
    for (const Family& f : Families()) {
        if (!*f.lit_names) continue;
        std::string pieces = f.lit_names;
        for (size_t from = 0, to; from <= pieces.size(); from = to + 1) {
            to = pieces.find('|', from);
            if (to == std::string::npos) to = pieces.size();
            const std::string piece = pieces.substr(from, to - from);
            if (piece.size() > longest && n.find(piece) != std::string::npos) {
                by_name = &f;
                longest = piece.size();
            }
        }
        if (f.positions == PositionKind::Rope && f.norm == c.norm && f.mlp == c.mlp) alike.push_back(&f);
    }
    if (by_name) return by_name->name;
    if (const Family* f = ByRope(alike, c)) return f->name;
    for (const Family& f : Families())
        if (*f.lit_names && f.positions == PositionKind::Rope) return f.name;
    return "lit-gpt";  // a table without lit-gpt families
}

// rope_scaling (`key`): null, "default", "linear" (positions / factor: lit-gpt's condense ratio) or
// Llama 3.1's "llama3"; any other type is refused by name, and so are keys without a type (a
// factor alone was read as no scaling) and llama3 without its three keys (defaults were made up).
Status ReadRopeScaling(const JsonFields& f, ModelConfig* c, const char* key = "rope_scaling") {
    const json* v = f.Get(key);
    if (!v) return Ok{};
    if (!v->is_object()) return f.Wrong(key, "an object or null", *v);
    const JsonFields scaling{*v, f.source};
    std::string type;
    for (const char* type_key : {"rope_type", "type"}) {
        auto t = scaling.String(type_key, "");
        if (!t) return Fail(t.error());
        if (type.empty()) type = *t;
    }
    if (type.empty() && !v->empty() && std::string(key) == "rope_scaling")
        return Fail(f.source + ": rope_scaling has no rope_type (expected default, linear or llama3)");
    if (type.empty() || type == "default") return Ok{};
    if (type != "linear" && type != "llama3")  // before its keys: a type not read says so, not that it lacks a factor
        return Fail(f.source + ": " + key + " type '" + EscapeForMessage(type, 40) + "' is not supported (expected default, linear or llama3)");
    auto factor = scaling.Number("factor", 0, 1e-6, 1e6);
    if (!factor) return Fail(factor.error());
    if (*factor == 0) return Fail(f.source + ": " + key + " type '" + EscapeForMessage(type) + "' needs a 'factor'");
    if (type == "linear") {
        c->rope_condense_ratio = *factor;
        return Ok{};
    }
    for (const char* needed : {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
        if (!scaling.Get(needed)) return Fail(f.source + ": " + key + " llama3 needs '" + needed + "'");
    auto low = scaling.Number("low_freq_factor", 1, 1e-6, 1e6);
    if (!low) return Fail(low.error());
    auto high = scaling.Number("high_freq_factor", 4, 1e-6, 1e6);
    if (!high) return Fail(high.error());
    auto original = scaling.Int("original_max_position_embeddings", 8192, 1, 1 << 24);
    if (!original) return Fail(original.error());
    if (!(*high > *low))
        return Fail(f.source + ": " + key + " llama3: high_freq_factor " + JsonFields::Format(*high) + " must exceed low_freq_factor " +
                    JsonFields::Format(*low));
    c->rope_llama3 = {*factor, *low, *high, static_cast<int>(*original)};
    return Ok{};
}

// A RoPE family's config.json in HF's names (transformers' LlamaConfig, MistralConfig,
// Qwen2Config, Qwen3Config, GPTNeoXConfig), each missing key at that class's default: the family
// row `f` of the model_type says the defaults and which switches its keys have. Keys ssaviz does
// not run on (token ids, dtypes, dropout, ...) are metadata here.
Result<ModelConfig> ParseHfConfig(const json& root, const std::string& type, const Family& row, const std::string& source) {
    const JsonFields f{root, source};
    const bool layer_norm = row.norm == NormKind::LayerNorm;
    ModelConfig c;
    c.hf_model_type = type;
    c.family = type;
    c.positions = PositionKind::Rope;
    c.tied_head = false;
    c.bias = false;
    c.norm = row.norm;
    c.mlp = row.mlp;
    c.parallel_residual = false;

    auto need = [&](const char* key, int* out) -> Status {
        if (!f.Get(key)) return Fail(source + ": missing key '" + key + "' (model_type " + type + ")");
        auto v = f.Int(key, 0, 1, 1 << 24);
        if (!v) return Fail(v.error());
        *out = static_cast<int>(*v);
        return Ok{};
    };
    for (auto [key, out] : {std::pair<const char*, int*>{"hidden_size", &c.n_embd}, {"num_hidden_layers", &c.n_layer},
                            {"num_attention_heads", &c.n_head}, {"intermediate_size", &c.intermediate_size}, {"vocab_size", &c.vocab_size}})
        if (Status s = need(key, out); !s) return Fail(s.error());
    struct { const char* key; int64_t fallback; int64_t lo; int* out; } ints[] = {
        {"num_key_value_heads", c.n_head, 1, &c.n_query_groups},
        {"max_position_embeddings", row.hf_max_positions, 1, &c.n_positions},
        {"head_dim", row.hf_head_dim, 1, &c.head_dim}};
    for (auto& x : ints) {
        auto v = f.Int(x.key, x.fallback, x.lo, 1 << 24);
        if (!v) return Fail(v.error());
        *x.out = static_cast<int>(*v);
    }
    if (!GetFormat(row.hf_format).kv_groups) c.n_query_groups = c.n_head;  // GPT-NeoX has no grouped heads
    if (c.n_query_groups > c.n_head || c.n_head % c.n_query_groups != 0)
        return Fail(source + ": num_key_value_heads " + std::to_string(c.n_query_groups) + " does not divide num_attention_heads " + std::to_string(c.n_head));
    if (c.head_dim == 0 && c.n_embd % c.n_head != 0)
        return Fail(source + ": hidden_size " + std::to_string(c.n_embd) + " is not divisible by num_attention_heads " + std::to_string(c.n_head) +
                    " and no head_dim is given");
    if (c.head_dim == c.n_embd / c.n_head && c.n_embd % c.n_head == 0) c.head_dim = 0;  // the usual head size, said once

    auto eps = f.Number(layer_norm ? "layer_norm_eps" : "rms_norm_eps", layer_norm ? 1e-5 : 1e-6, 1e-12, 1);
    if (!eps) return Fail(eps.error());
    c.layer_norm_epsilon = *eps;
    // GPT-NeoX named the base rotary_emb_base until transformers 4.45, rope_theta since; transformers
    // 5 saves both, and the scaling, in rope_parameters (it ran at base 10000 here, unsaid).
    const json* parameters = f.Get("rope_parameters");
    if (parameters && !parameters->is_object()) return Fail(f.Wrong("rope_parameters", "an object or null", *parameters).error());
    if (parameters && !parameters->contains("rope_type") && !parameters->contains("rope_theta"))
        return Fail(source + ": rope_parameters has neither rope_type nor rope_theta (a set for each layer type is not supported)");
    // Each key from rope_parameters where it holds it, else from the top level as before.
    const JsonFields inside = parameters ? JsonFields{*parameters, source} : f;
    auto base = parameters && parameters->contains("rope_theta")
                    ? inside.Number("rope_theta", 10000, 1, 1e12)
                    : f.Number(f.Get("rope_theta") || !*row.hf_old_base_key ? "rope_theta" : row.hf_old_base_key, 10000, 1, 1e12);
    if (!base) return Fail(base.error());
    c.rope_base = *base;
    // The rotary fraction: rope_parameters' partial_rotary_factor, else the family's own top-level key
    // (GPT-NeoX's rotary_pct, which its class reads over a partial_rotary_factor beside it: a
    // quarter-rotary Pythia ran fully rotary), else partial_rotary_factor.
    const bool inside_fraction = parameters && parameters->contains("partial_rotary_factor");
    const char* rotary_key = inside_fraction || !f.Get(row.hf_rotary_key) ? "partial_rotary_factor" : row.hf_rotary_key;
    auto rotary = (inside_fraction ? inside : f).Number(rotary_key, row.rotary, 0, 1);
    if (!rotary) return Fail(rotary.error());
    c.rope_n_elem = static_cast<int>(*rotary * c.HeadSize());
    if (Status s = parameters ? ReadRopeScaling(f, &c, "rope_parameters") : ReadRopeScaling(f, &c); !s) return Fail(s.error());
    // Both: transformers reads rope_scaling over rope_parameters; where they scale alike, one is
    // read, else refused (rope_scaling was dropped, unsaid).
    if (const json* old = f.Get("rope_scaling"); parameters && old && !old->is_null()) {
        ModelConfig scaled = c;
        scaled.rope_condense_ratio = ModelConfig{}.rope_condense_ratio;
        scaled.rope_llama3 = {};
        if (Status s = ReadRopeScaling(f, &scaled); !s) return Fail(s.error());
        const ModelConfig::RopeLlama3 &a = scaled.rope_llama3, &b = c.rope_llama3;
        if (scaled.rope_condense_ratio != c.rope_condense_ratio || a.factor != b.factor || a.low_freq_factor != b.low_freq_factor ||
            a.high_freq_factor != b.high_freq_factor || a.original_max_positions != b.original_max_positions)
            return Fail(source + ": rope_scaling and rope_parameters scale RoPE differently: keep one (transformers reads rope_scaling)");
    }

    auto act = f.String("hidden_act", row.mlp == MlpKind::Gelu ? "gelu" : "silu");
    if (!act) return Fail(act.error());
    if (row.mlp == MlpKind::Gelu) {
        if (*act == "gelu") c.activation = Activation::Gelu;
        else if (*act == "gelu_new" || *act == "gelu_pytorch_tanh" || *act == "gelu_fast") c.activation = Activation::GeluNew;
        else return Fail(source + ": hidden_act '" + EscapeForMessage(*act, 40) + "' is not supported for " + type + " (expected gelu, gelu_new, gelu_pytorch_tanh or gelu_fast)");
    } else if (*act != "silu" && *act != "swish") {
        return Fail(source + ": hidden_act '" + EscapeForMessage(*act, 40) + "' is not supported for " + type + " (its MLP is silu(gate) * up: expected silu)");
    }

    struct { const char* key; bool fallback; bool* out; } flags[] = {
        {"tie_word_embeddings", false, &c.tied_head},
        {"use_parallel_residual", true, &c.parallel_residual},
        {"attention_bias", row.hf_biases == HfBiases::Neox, &c.out_bias},
        {"mlp_bias", false, &c.mlp_bias}};
    for (auto& x : flags) {
        if (!row.parallel_residual && x.out == &c.parallel_residual) continue;  // a family with a sequential residual only
        auto v = f.Bool(x.key, x.fallback);
        if (!v) return Fail(v.error());
        *x.out = *v;
    }
    // Where the row says the family has biases (arch.h HfBiases): attention_bias turns on q, k, v
    // and o together.
    switch (row.hf_biases) {
        case HfBiases::Neox: c.mlp_bias = true; break;
        case HfBiases::Keys: break;
        case HfBiases::Attention: c.mlp_bias = false; break;
        case HfBiases::Qkv: c.out_bias = c.mlp_bias = false; break;
        case HfBiases::None: c.out_bias = c.mlp_bias = false; break;
    }
    c.qkv_bias = row.hf_biases == HfBiases::Qkv || c.out_bias;
    c.qk_norm = row.qk_norm;
    if (c.qkv_bias && c.out_bias && c.mlp_bias) {  // Pythia: every layer, lit-gpt's bias true
        c.bias = true;
        c.qkv_bias = c.out_bias = c.mlp_bias = false;
    }

    // The sliding window: on every layer when given; for a family with an opt-in window (Qwen) only
    // with use_sliding_window, from layer max_window_layers on (or as layer_types lists, sliding
    // layers after full ones).
    // Llama's and GPT-NeoX's classes never read the key (their masks are causal alone): metadata there.
    const bool windowed_family = type == "mistral" || row.window_opt_in;
    if (const json* w = windowed_family ? f.Get("sliding_window") : nullptr) {
        if (!w->is_number_integer() || w->get<int64_t>() < 1 || w->get<int64_t>() > (1 << 30))
            return Fail(source + ": sliding_window must be a positive integer or null, got " + DescribeJson(*w));
        c.sliding_window = static_cast<int>(std::min<int64_t>(w->get<int64_t>(), 1 << 24));
    } else if (windowed_family && !root.contains("sliding_window")) {
        c.sliding_window = 4096;  // MistralConfig's and Qwen's default where the key is absent (null: none; Qwen's only with use_sliding_window)
    }
    if (row.window_opt_in) {
        auto use = f.Bool("use_sliding_window", false);
        if (!use) return Fail(use.error());
        auto first = f.Int("max_window_layers", 28, 0, 1 << 24);
        if (!first) return Fail(first.error());
        if (!*use) c.sliding_window = 0;
        c.window_first_layer = static_cast<int>(std::min<int64_t>(*first, c.n_layer));
    }
    if (const json* types = windowed_family ? f.Get("layer_types") : nullptr) {  // as sliding_window: metadata where never read
        if (!types->is_array() || types->size() != static_cast<size_t>(c.n_layer))
            return Fail(source + ": layer_types must list num_hidden_layers " + std::to_string(c.n_layer) + " entries, got " + DescribeJson(*types));
        int first_sliding = c.n_layer;
        for (int l = 0; l < c.n_layer; ++l) {
            const json& t = (*types)[l];
            const bool sliding = t == "sliding_attention";
            if (!sliding && t != "full_attention")
                return Fail(source + ": layer_types[" + std::to_string(l) + "] = " + DescribeJson(t) + " (expected full_attention or sliding_attention)");
            if (sliding) first_sliding = std::min(first_sliding, l);
            else if (first_sliding < l)
                return Fail(source + ": layer_types: full attention at layer " + std::to_string(l) + " after sliding layers is not supported");
        }
        // use_sliding_window false takes the window away (transformers' Qwen configs set it None):
        // every layer attends fully; a window the file never gives is the file's fault.
        if (first_sliding < c.n_layer && c.sliding_window == 0 && !(windowed_family && f.Get("sliding_window")))
            return Fail(source + ": layer_types has sliding_attention layers but sliding_window is null");
        c.window_first_layer = first_sliding;
        if (first_sliding == c.n_layer) c.sliding_window = 0;
    }
    if (c.sliding_window == 0) c.window_first_layer = 0;

    if (Status s = ReadSsaBlock(root, source, &c); !s) return Fail(s.error());
    // Llama 3 (and 3.1, 3.2) is model_type llama: its rope_theta 500000 and llama3 scaling tell it.
    if (const auto rows = FamiliesOfModelType(type); rows.size() > 1) c.family = ByRope(rows, c)->name;
    if (Status s = c.Validate(source); !s) return Fail(s.error());
    return c;
}

}  // namespace

Result<ModelConfig> ParseConfig(std::string_view json_text, const std::string& source) {
    auto parsed = ParseJsonText(json_text);  // nesting at most kMaxJsonDepth
    if (!parsed) return Fail(source + ": not valid JSON (" + EscapeForMessage(parsed.error()) + ")");
    const json& root = *parsed;
    if (!root.is_object()) return Fail(source + ": expected a JSON object at the top level, got " + DescribeJson(root));

    if (auto type = root.find("model_type"); type != root.end() && !(type->is_string() && *type == "gpt2")) {
        const std::string t = type->is_string() ? type->get<std::string>() : "";
        if (const auto rows = FamiliesOfModelType(t); !rows.empty()) return ParseHfConfig(root, t, *rows.front(), source);
        return Fail(source + ": model_type " + DescribeJson(*type) + " is not supported (expected one of " + HfModelTypes() + ")");
    }
    ModelConfig c;
    struct { const char* key; int* field; } ints[] = {
        {"n_layer", &c.n_layer}, {"n_head", &c.n_head}, {"n_embd", &c.n_embd}, {"vocab_size", &c.vocab_size}};
    for (auto& [key, field] : ints) {
        auto v = ReadPositiveInt(root, key, source);
        if (!v) return Fail(v.error());
        *field = *v;
    }
    // GPT-2 configs name the context n_positions; some older ones only n_ctx; nanoGPT's GPTConfig
    // block_size.
    const bool old_style = !root.contains("n_positions") && root.contains("n_ctx");
    const bool nanogpt = !root.contains("n_positions") && !root.contains("n_ctx") && root.contains("block_size");
    auto positions = ReadPositiveInt(root, old_style ? "n_ctx" : nanogpt ? "block_size" : "n_positions", source);
    if (!positions) return Fail(positions.error());
    c.n_positions = *positions;
    // nanoGPT's (and ssaviz's own config.json for such a model): every bias on or off.
    if (auto it = root.find("bias"); it != root.end()) {
        if (!it->is_boolean()) return Fail(source + ": 'bias' must be true or false, got " + DescribeJson(*it));
        c.bias = c.norm_bias = it->get<bool>();  // the linear layers' and the LayerNorms' together
    }
    if (nanogpt) {
        c.activation = Activation::Gelu;  // nanoGPT's nn.GELU(): exact erf
        if (auto it = root.find("dropout"); it != root.end() && !(it->is_number() && it->get<double>() >= 0 && it->get<double>() <= 1))
            return Fail(source + ": 'dropout' must be a number in [0, 1], got " + DescribeJson(*it));
    }

    if (c.n_embd % c.n_head != 0)
        return Fail(source + ": n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " + std::to_string(c.n_head));
    if (c.n_layer > 1024 || c.n_head > 1024)
        return Fail(source + ": n_layer " + std::to_string(c.n_layer) + " / n_head " + std::to_string(c.n_head) + " is implausibly large");

    if (auto it = root.find("layer_norm_epsilon"); it != root.end()) {
        if (!it->is_number() || it->get<double>() <= 0 || it->get<double>() > 1)
            return Fail(source + ": layer_norm_epsilon must be a number in (0, 1], got " + DescribeJson(*it));
        c.layer_norm_epsilon = it->get<double>();
    }
    if (auto it = root.find("activation_function"); it != root.end()) {
        const std::string a = it->is_string() ? it->get<std::string>() : "";
        if (a == "gelu_new" || a == "gelu_pytorch_tanh") c.activation = Activation::GeluNew;
        else if (a == "gelu") c.activation = Activation::Gelu;
        else return Fail(source + ": activation_function " + DescribeJson(*it) + " is not supported (expected gelu_new or gelu)");
    }
    // GPT2MLP is n_inner wide where it is given (4 n_embd where null); GPT2Attention's switches that
    // change the scores are refused by name (they were read as their defaults, other maps unsaid).
    if (auto it = root.find("n_inner"); it != root.end() && !it->is_null()) {
        auto inner = ReadPositiveInt(root, "n_inner", source);
        if (!inner) return Fail(inner.error());
        if (*inner != 4 * c.n_embd) c.intermediate_size = *inner;
    }
    for (const auto& [key, runs_as] : {std::pair<const char*, bool>{"scale_attn_by_inverse_layer_idx", false}, {"scale_attn_weights", true}})
        if (auto it = root.find(key); it != root.end() && !it->is_null() && !(it->is_boolean() && it->get<bool>() == runs_as))
            return Fail(source + ": " + key + " " + DescribeJson(*it) + " is not supported by ssaviz (it runs GPT-2's attention with " + key + " " +
                        (runs_as ? "true" : "false") + ")");

    if (Status s = ReadSsaBlock(root, source, &c); !s) return Fail(s.error());
    return c;
}

Result<ModelConfig> LoadConfig(const std::string& path) {
    auto text = ReadFile(path, kMaxJsonFileBytes);  // a regular file of at most 64 MB
    if (!text) return Fail(text.error());
    return ParseConfig(*text, path);
}

Result<ModelConfig> ParseLitConfig(std::string_view json_text, const std::string& source) {
    auto parsed = ParseJsonText(json_text);
    if (!parsed) return Fail(source + ": not valid JSON (" + EscapeForMessage(parsed.error()) + ")");
    const json& root = *parsed;
    if (!root.is_object()) return Fail(source + ": expected a JSON object at the top level, got " + DescribeJson(root));

    // Each key once, with its type; a wrong type names the key and what it got.
    auto wrong = [&](const std::string& key, const char* want, const json& v) {
        return Fail(source + ": '" + EscapeForMessage(key) + "' must be " + want + ", got " + DescribeJson(v));
    };
    auto get_int = [&](const char* key, int64_t fallback, int64_t lo, int64_t hi) -> Result<int64_t> {
        auto it = root.find(key);
        if (it == root.end() || it->is_null()) return fallback;
        if (!it->is_number_integer()) return wrong(key, "an integer", *it);
        if (it->is_number_unsigned() ? it->get<uint64_t>() > static_cast<uint64_t>(hi) || it->get<uint64_t>() < static_cast<uint64_t>(lo)
                                      : it->get<int64_t>() < lo || it->get<int64_t>() > hi)
            return Fail(source + ": '" + key + "' = " + DescribeJson(*it) + " is out of range (" + std::to_string(lo) + " .. " + std::to_string(hi) + ")");
        return it->get<int64_t>();
    };
    auto get_number = [&](const char* key, double fallback, double lo, double hi) -> Result<double> {
        auto it = root.find(key);
        if (it == root.end() || it->is_null()) return fallback;
        if (!it->is_number()) return wrong(key, "a number", *it);
        const double v = it->get<double>();
        if (!(v >= lo && v <= hi)) return Fail(source + ": '" + key + "' = " + DescribeJson(*it) + " is out of range (" + JsonFields::FormatRange(lo, hi) + ")");
        return v;
    };
    auto get_bool = [&](const char* key, bool fallback) -> Result<bool> {
        auto it = root.find(key);
        if (it == root.end() || it->is_null()) return fallback;
        if (!it->is_boolean()) return wrong(key, "true or false", *it);
        return it->get<bool>();
    };
    auto get_string = [&](const char* key, const char* alias, const std::string& fallback) -> Result<std::string> {
        for (const char* k : {key, alias}) {
            if (!k) continue;
            auto it = root.find(k);
            if (it == root.end() || it->is_null()) continue;
            if (!it->is_string()) return wrong(k, "a string", *it);
            return it->get<std::string>();
        }
        return fallback;
    };

    // Keys lit-gpt (and newer litgpt) configs carry: read, ignored (metadata), or accepted only at
    // the value that means "off", since ssaviz does not run what they turn on.
    static const char* const kRead[] = {"name", "block_size", "vocab_size", "padding_multiple", "padded_vocab_size", "n_layer", "n_head",
                                        "n_embd", "head_size", "rotary_percentage", "parallel_residual", "bias", "lm_head_bias",
                                        "n_query_groups", "shared_attention_norm", "_norm_class", "norm_class_name", "norm_eps",
                                        "_mlp_class", "mlp_class_name", "gelu_approximate", "intermediate_size", "rope_condense_ratio",
                                        "condense_ratio", "rope_base", "n_expert", "n_expert_per_token", "ssa", "family",
                                        "hf_config", "org", "dropout"};
    static const char* const kOff[] = {"norm_qk", "sliding_window_size", "rope_adjustments", "post_attention_norm", "post_mlp_norm",
                                       "scale_embeddings", "attention_logit_softcapping", "final_logit_softcapping",
                                       "attention_scores_scalar", "sliding_window_layer_placing"};
    for (const auto& item : root.items()) {
        // Named, not a structured binding: lambdas may capture bindings only from C++20 (clang-14 refuses).
        const std::string& key = item.key();
        const json& value = item.value();
        if (std::find_if(std::begin(kRead), std::end(kRead), [&](const char* k) { return key == k; }) != std::end(kRead)) continue;
        const bool off_key = std::find_if(std::begin(kOff), std::end(kOff), [&](const char* k) { return key == k; }) != std::end(kOff);
        const bool off = value.is_null() || (value.is_boolean() && !value.get<bool>()) || (value.is_number() && value.get<double>() == 0);
        if (off_key && off) continue;
        if (off_key) return Fail(source + ": '" + EscapeForMessage(key) + "' = " + DescribeJson(value) + " is not supported by ssaviz (only null / false)");
        return Fail(source + ": unknown key '" + EscapeForMessage(key) + "' (not a lit-gpt Config field ssaviz knows)");
    }

    ModelConfig c;
    c.bias = true;
    c.tied_head = false;  // lit-gpt's lm_head is its own Linear
    c.positions = PositionKind::Rope;
    c.parallel_residual = true;
    c.activation = Activation::Gelu;  // gelu_approximate "none"
    std::string name;
    int64_t vocab = 0, multiple = 0, padded = 0, head_size = 0;
    double rotary = 0;
    {
        auto n = get_string("name", nullptr, "");
        if (!n) return Fail(n.error());
        name = *n;
        struct { const char* key; int64_t fallback; int64_t* out; } ints[] = {
            {"vocab_size", 50254, &vocab}, {"padding_multiple", 512, &multiple}, {"padded_vocab_size", 0, &padded}, {"head_size", 0, &head_size}};
        for (auto& x : ints) {
            auto v = get_int(x.key, x.fallback, 1, int64_t{1} << 24);
            if (!v) return Fail(v.error());
            *x.out = *v;
        }
        struct { const char* key; int fallback; int* out; } shape[] = {
            {"block_size", 4096, &c.n_positions}, {"n_layer", 16, &c.n_layer}, {"n_head", 32, &c.n_head}, {"n_embd", 4096, &c.n_embd},
            {"n_query_groups", 0, &c.n_query_groups}, {"intermediate_size", 0, &c.intermediate_size}};
        for (auto& x : shape) {
            auto v = get_int(x.key, x.fallback, 1, int64_t{1} << 24);
            if (!v) return Fail(v.error());
            *x.out = static_cast<int>(*v);
        }
        auto condense = get_int(root.contains("rope_condense_ratio") ? "rope_condense_ratio" : "condense_ratio", 1, 1, 1 << 20);
        if (!condense) return Fail(condense.error());
        c.rope_condense_ratio = static_cast<double>(*condense);
        auto base = get_number("rope_base", 10000, 1, 1e12);
        if (!base) return Fail(base.error());
        c.rope_base = *base;
        auto r = get_number("rotary_percentage", 0.25, 0, 1);
        if (!r) return Fail(r.error());
        rotary = *r;
        auto eps = get_number("norm_eps", 1e-5, 1e-12, 1);
        if (!eps) return Fail(eps.error());
        c.layer_norm_epsilon = *eps;
        struct { const char* key; bool fallback; bool* out; } flags[] = {
            {"parallel_residual", true, &c.parallel_residual}, {"bias", true, &c.bias}, {"lm_head_bias", false, &c.lm_head_bias},
            {"shared_attention_norm", false, &c.shared_attention_norm}};
        for (auto& x : flags) {
            auto v = get_bool(x.key, x.fallback);
            if (!v) return Fail(v.error());
            *x.out = *v;
        }
        auto experts = get_int("n_expert", 0, 0, 1 << 20);
        if (!experts) return Fail(experts.error());
        if (*experts != 0) return Fail(source + ": 'n_expert' = " + std::to_string(*experts) + ": mixture-of-experts models (LLaMAMoE) are not supported");
    }
    auto norm = get_string("_norm_class", "norm_class_name", "LayerNorm");
    if (!norm) return Fail(norm.error());
    if (*norm == "RMSNorm") c.norm = NormKind::RmsNorm;
    else if (*norm != "LayerNorm") return Fail(source + ": '_norm_class' '" + EscapeForMessage(*norm) + "' is not supported (expected LayerNorm or RMSNorm)");
    auto mlp = get_string("_mlp_class", "mlp_class_name", "GptNeoxMLP");
    if (!mlp) return Fail(mlp.error());
    if (*mlp == "LLaMAMLP") c.mlp = MlpKind::SwiGlu;
    else if (*mlp != "GptNeoxMLP") return Fail(source + ": '_mlp_class' '" + EscapeForMessage(*mlp) + "' is not supported (expected GptNeoxMLP or LLaMAMLP)");
    if (c.mlp == MlpKind::SwiGlu && c.intermediate_size == 0)
        return Fail(source + ": '_mlp_class' LLaMAMLP needs 'intermediate_size' (lit-gpt refuses it too)");
    auto approx = get_string("gelu_approximate", nullptr, "none");
    if (!approx) return Fail(approx.error());
    if (*approx == "tanh") c.activation = Activation::GeluNew;
    else if (*approx != "none") return Fail(source + ": 'gelu_approximate' '" + EscapeForMessage(*approx) + "' is not supported (expected none or tanh)");

    if (c.n_embd % c.n_head != 0 && head_size == 0)
        return Fail(source + ": n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " + std::to_string(c.n_head));
    if (head_size != 0 && head_size * c.n_head != c.n_embd)
        return Fail(source + ": head_size " + std::to_string(head_size) + " x n_head " + std::to_string(c.n_head) + " is not n_embd " +
                    std::to_string(c.n_embd) + " (ssaviz needs n_head x head_size = n_embd)");
    c.rope_n_elem = static_cast<int>(rotary * c.HeadSize());
    // padded_vocab_size: given, else vocab_size rounded up to padding_multiple; the tensors have that many rows.
    c.vocab_size = static_cast<int>(padded != 0 ? padded : (vocab + multiple - 1) / multiple * multiple);
    if (Status s = ReadSsaBlock(root, source, &c); !s) return Fail(s.error());
    auto family = get_string("family", nullptr, "");
    if (!family) return Fail(family.error());
    // A name printed first in `info` and the Model panel: printable ASCII and short, or refused.
    if (family->size() > 64 || std::any_of(family->begin(), family->end(), [](unsigned char ch) { return ch < 0x20 || ch > 0x7e; }))
        return Fail(source + ": 'family' " + Quoted(family->substr(0, 64)) + " is not a family's name (printable ASCII, at most 64 characters)");
    c.family = family->empty() ? LitFamily(name, c) : *family;
    if (Status s = c.Validate(source); !s) return Fail(s.error());
    return c;
}

Result<ModelConfig> LoadLitConfig(const std::string& path) {
    auto text = ReadFile(path, kMaxJsonFileBytes);
    if (!text) return Fail(text.error());
    return ParseLitConfig(*text, path);
}

Status ModelConfig::Validate(const std::string& source) const {
    auto n = [](int64_t v) { return std::to_string(v); };
    if (n_layer < 1 || n_head < 1 || n_embd < 1 || n_positions < 1 || vocab_size < 1)
        return Fail(source + ": n_layer, n_head, n_embd, the context and the vocabulary must all be at least 1");
    if (n_layer > 1024 || n_head > 1024) return Fail(source + ": n_layer " + n(n_layer) + " / n_head " + n(n_head) + " is implausibly large");
    if (head_dim < 0 || head_dim > 65536) return Fail(source + ": head_dim " + n(head_dim) + " is out of range (1 .. 65536)");
    if (head_dim == 0 && n_embd % n_head != 0) return Fail(source + ": n_embd " + n(n_embd) + " is not divisible by n_head " + n(n_head));
    if (static_cast<int64_t>(n_head) * HeadSize() > (1 << 24)) return Fail(source + ": n_head x head size is implausibly large");
    if (n_query_groups < 0 || n_query_groups > n_head || n_head % KvHeads() != 0)
        return Fail(source + ": n_query_groups " + n(n_query_groups) + " does not divide n_head " + n(n_head));
    if (Rope() && (rope_n_elem < 0 || rope_n_elem > HeadSize() || rope_n_elem % 2 != 0))
        return Fail(source + ": the rotary width " + n(rope_n_elem) + " (rotary_percentage x head size " + n(HeadSize()) +
                    ") must be even and at most the head size");
    if (!Rope() && rope_n_elem != 0) return Fail(source + ": a rotary width with learned positions");
    if (!(rope_base > 0) || !(rope_condense_ratio > 0)) return Fail(source + ": rope_base and rope_condense_ratio must be positive");
    if (intermediate_size < 0 || intermediate_size > (1 << 24)) return Fail(source + ": intermediate_size " + n(intermediate_size) + " is out of range");
    if (shared_attention_norm && !parallel_residual)
        return Fail(source + ": shared_attention_norm needs parallel_residual (lit-gpt refuses the sequential form too)");
    if (sliding_window < 0 || window_first_layer < 0 || window_first_layer > n_layer)
        return Fail(source + ": sliding_window " + n(sliding_window) + " from layer " + n(window_first_layer) + " is out of range");
    if (rope_llama3.factor != 0 && !(rope_llama3.factor > 0 && rope_llama3.low_freq_factor > 0 &&
                                     rope_llama3.high_freq_factor > rope_llama3.low_freq_factor && rope_llama3.original_max_positions > 0))
        return Fail(source + ": rope_scaling llama3 needs factor > 0, 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0");
    if (!Rope() && (HfOnly() || head_dim != 0)) return Fail(source + ": an HF family's features with learned positions");
    if (!Rope() && (n_query_groups != 0 && n_query_groups != n_head))
        return Fail(source + ": grouped-query attention with learned positions is not a family ssaviz knows");
    return Ok{};
}

bool ModelConfig::Has(Role role) const {
    switch (role) {
        case Role::PositionEmbedding: return !Rope();
        case Role::QNorm: case Role::KNorm: return qk_norm;
        case Role::MlpNorm: return !shared_attention_norm;
        case Role::QPos: return query.position != PositionForm::None;
        case Role::QTok: return query.token != TokenForm::None;
        case Role::VPos: return value.position != PositionForm::None;
        case Role::VTok: return value.token != TokenForm::None;
        default: return true;
    }
}

bool ModelConfig::HasBias(Role role) const {
    switch (role) {
        case Role::AttnNorm: return norm == NormKind::LayerNorm && norm_bias;
        case Role::MlpNorm: return norm == NormKind::LayerNorm && norm_bias;
        case Role::OutputNorm: return norm == NormKind::LayerNorm && norm_bias;
        case Role::AttnQkv: return QkvBias();
        case Role::AttnOut: return OutBias();
        case Role::MlpUp: case Role::MlpDown: return MlpBias();
        case Role::Output: return lm_head_bias;
        case Role::QTok: case Role::VTok: return true;  // where the file has one (SPEC section 3: the bias is optional)
        default: return false;
    }
}

std::vector<int64_t> ModelConfig::Shape(Role role) const {
    const int64_t E = n_embd, H = n_head, G = KvHeads(), D = HeadSize(), I = MlpWidth();
    const int64_t token = [&] {
        const TokenForm t = role == Role::VTok ? value.token : query.token;
        return t == TokenForm::Shared ? D : E;
    }();
    switch (role) {
        case Role::TokenEmbedding: case Role::Output: return {vocab_size, E};
        case Role::PositionEmbedding: return {n_positions, E};
        case Role::AttnNorm: case Role::MlpNorm: case Role::OutputNorm: return {E};
        case Role::QNorm: case Role::KNorm: return {D};
        case Role::AttnQkv: return {E, (H + 2 * G) * D};
        case Role::AttnOut: return {H * D, E};
        case Role::MlpUp: return {E, mlp == MlpKind::SwiGlu ? 2 * I : I};
        case Role::MlpDown: return {I, E};
        case Role::QPos: return {H};
        case Role::QTok: return {H, token};
        case Role::VPos: return {G};
        case Role::VTok: return {G, token};
    }
    return {};
}

int64_t ModelConfig::ParameterCount() const {
    int64_t total = 0;
    for (int r = 0; r <= static_cast<int>(Role::Output); ++r) {
        const Role role = static_cast<Role>(r);
        if (!Has(role) || (role == Role::Output && tied_head)) continue;
        const std::vector<int64_t> shape = Shape(role);
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        if (HasBias(role)) n += GetRole(role).kind == RoleKind::Matrix ? shape.back() : shape.front();  // [out]; [V] for the head, [N] for a token term
        total += IsLayerRole(role) ? n * n_layer : n;
    }
    return total;
}

bool ModelConfig::HfOnly() const {
    return !hf_model_type.empty() || head_dim != 0 || qk_norm || rope_llama3.factor != 0 || sliding_window != 0 || qkv_bias || out_bias ||
           mlp_bias;
}

const char* ToString(PositionForm form) {
    switch (form) {
        case PositionForm::Sigmoid: return "sigmoid";
        case PositionForm::ExpExp: return "exp_exp";
        case PositionForm::Linear: return "linear";
        case PositionForm::None: break;
    }
    return "null";
}

const char* ToString(TokenForm form) {
    switch (form) {
        case TokenForm::Shared: return "shared";
        case TokenForm::Feature: return "feature";
        case TokenForm::None: break;
    }
    return "null";
}

const char* ToString(Combine combine) { return combine == Combine::Product ? "product" : "sum"; }
const char* ToString(Activation activation) { return activation == Activation::Gelu ? "gelu" : "gelu_new"; }
const char* ToString(NormKind norm) { return norm == NormKind::RmsNorm ? "RMSNorm" : "LayerNorm"; }
const char* ActivationName(const ModelConfig& config) {
    return config.mlp == MlpKind::SwiGlu ? "silu (SwiGLU)" : ToString(config.activation);
}

const char* ToString(MlpKind mlp) { return mlp == MlpKind::SwiGlu ? "LLaMAMLP" : "GptNeoxMLP"; }

std::string Describe(const TemperatureForm& form) {
    if (!form.Active()) return "none (tau = 1)";
    std::string s;
    if (form.position != PositionForm::None) s += std::string(ToString(form.position)) + " position";
    if (form.token != TokenForm::None) s += std::string(s.empty() ? "" : " + ") + ToString(form.token) + " token";
    if (form.position != PositionForm::None && form.token != TokenForm::None) s += std::string(" (") + ToString(form.combine) + ")";
    return s;
}

namespace {
json SsaBlock(const ModelConfig& c) {
    auto side = [](const TemperatureForm& f) {
        auto term = [](const char* s) { return std::string(s) == "null" ? json(nullptr) : json(s); };
        return json{{"position", term(ToString(f.position))}, {"token", term(ToString(f.token))}, {"combine", ToString(f.combine)}};
    };
    json ssa = json::object();
    if (c.query.Active()) ssa["query"] = side(c.query);
    if (c.value.Active()) ssa["value"] = side(c.value);
    return ssa;
}
}  // namespace

nlohmann::json ConfigToJson(const ModelConfig& c) {
    json j = {{"model_type", "gpt2"},
              {"n_layer", c.n_layer},
              {"n_head", c.n_head},
              {"n_embd", c.n_embd},
              {"n_positions", c.n_positions},
              {"vocab_size", c.vocab_size},
              {"layer_norm_epsilon", c.layer_norm_epsilon},
              {"activation_function", ToString(c.activation)}};
    if (!c.bias) j["bias"] = false;  // nanoGPT's bias = False: no bias anywhere (ParseConfig reads it)
    if (c.intermediate_size > 0 && c.intermediate_size != 4 * c.n_embd) j["n_inner"] = c.intermediate_size;
    if (c.IsSsa()) j["ssa"] = SsaBlock(c);
    return j;
}

std::string DescribeArchitecture(const ModelConfig& c) {
    auto n = [](double v) {
        std::string s = std::to_string(v);
        s.erase(s.find_last_not_of('0') + 1);
        if (!s.empty() && s.back() == '.') s.pop_back();
        return s;
    };
    std::string s = c.family + ": " + ToString(c.norm);
    s += c.Rope() ? ", RoPE on " + std::to_string(c.rope_n_elem) + " of " + std::to_string(c.HeadSize()) + " dims (base " + n(c.rope_base) +
                        (c.rope_condense_ratio != 1 ? ", condense ratio " + n(c.rope_condense_ratio) : "") + ")"
                  : ", learned positions";
    if (c.rope_llama3.factor > 0)
        s += ", llama3 RoPE scaling (factor " + n(c.rope_llama3.factor) + ", frequencies " + n(c.rope_llama3.low_freq_factor) + " .. " +
             n(c.rope_llama3.high_freq_factor) + ", original context " + std::to_string(c.rope_llama3.original_max_positions) + ")";
    const int G = c.KvHeads();
    s += G == c.n_head ? ", " + std::to_string(c.n_head) + " heads"
                       : ", " + std::to_string(c.n_head) + " query heads over " + std::to_string(G) + " kv head" + (G == 1 ? " (MQA)" : "s (GQA)");
    if (c.head_dim != 0) s += " of size " + std::to_string(c.head_dim);
    if (c.qk_norm) s += ", q/k RMSNorm";
    if (c.sliding_window > 0)
        s += ", sliding window " + std::to_string(c.sliding_window) +
             (c.window_first_layer > 0 ? " from layer " + std::to_string(c.window_first_layer) : std::string());
    s += c.mlp == MlpKind::SwiGlu ? ", SwiGLU MLP " : std::string(", GELU MLP (") + ToString(c.activation) + ") ";
    s += std::to_string(c.MlpWidth());
    s += c.parallel_residual ? (c.shared_attention_norm ? ", parallel residual (shared norm)" : ", parallel residual") : ", sequential residual";
    s += c.tied_head ? ", tied head" : ", untied head";
    if (c.lm_head_bias) s += " with bias";
    if (!c.bias) {
        std::string some;
        for (auto [on, what] : {std::pair<bool, const char*>{c.qkv_bias, "q, k, v"}, {c.out_bias, "attention output"}, {c.mlp_bias, "MLP"}})
            if (on) some += (some.empty() ? "" : ", ") + std::string(what);
        s += some.empty() ? ", no linear biases" : ", biases in " + some + " only";
    }
    return s;
}

nlohmann::json LitConfigToJson(const ModelConfig& c) {
    // Every field lit-gpt's Config takes, so the file stands alone (no defaults left to guess).
    json j = json::object();
    j["name"] = j["family"] = c.family;
    j["block_size"] = c.n_positions;
    j["vocab_size"] = j["padded_vocab_size"] = c.vocab_size;
    for (auto [key, value] : {std::pair<const char*, int>{"n_layer", c.n_layer}, {"n_head", c.n_head}, {"n_embd", c.n_embd},
                              {"n_query_groups", c.KvHeads()}, {"intermediate_size", c.MlpWidth()}})
        j[key] = value;
    j["rotary_percentage"] = c.HeadSize() ? static_cast<double>(c.rope_n_elem) / c.HeadSize() : 0.0;
    j["rope_base"] = c.rope_base;
    j["rope_condense_ratio"] = static_cast<int64_t>(c.rope_condense_ratio);
    for (auto [key, value] : {std::pair<const char*, bool>{"parallel_residual", c.parallel_residual},
                              {"shared_attention_norm", c.shared_attention_norm}, {"bias", c.bias}, {"lm_head_bias", c.lm_head_bias}})
        j[key] = value;
    j["_norm_class"] = ToString(c.norm);
    j["norm_eps"] = c.layer_norm_epsilon;
    j["_mlp_class"] = ToString(c.mlp);
    j["gelu_approximate"] = c.activation == Activation::GeluNew ? "tanh" : "none";
    if (c.IsSsa()) j["ssa"] = SsaBlock(c);
    return j;
}

const Family* FamilyOf(const ModelConfig& c) {
    if (c.hf_model_type.empty()) return FindFamily(c.family);
    const auto rows = FamiliesOfModelType(c.hf_model_type);
    for (const Family* f : rows)
        if (c.family == f->name) return f;  // llama3 of model_type llama
    return rows.empty() ? nullptr : rows.front();
}

Format FormatOf(const ModelConfig& c) {
    if (const Family* f = FamilyOf(c); f && !c.hf_model_type.empty()) return f->hf_format;
    return c.Rope() ? Format::Lit : Format::Gpt2;
}

namespace {

// What a config computes, field by field as text: two configs with the same fingerprint run the
// same model (the activation counts for a GELU MLP only; names and metadata do not count).
std::vector<std::pair<const char*, std::string>> Fingerprint(const ModelConfig& c) {
    auto n = [](double v) { return JsonFields::Format(v); };
    std::string windows;
    for (int l = 0; l < c.n_layer; ++l) windows += (l ? "," : "") + std::to_string(c.AttentionWindow(l));
    return {{"n_layer", n(c.n_layer)}, {"n_embd", n(c.n_embd)}, {"n_head", n(c.n_head)}, {"kv heads", n(c.KvHeads())},
            {"head size", n(c.HeadSize())}, {"context", n(c.n_positions)}, {"vocabulary", n(c.vocab_size)},
            {"norm", ToString(c.norm)}, {"norm eps", n(c.layer_norm_epsilon)}, {"MLP", ToString(c.mlp)}, {"MLP width", n(c.MlpWidth())},
            {"activation", c.mlp == MlpKind::Gelu ? ToString(c.activation) : "-"},
            {"positions", c.Rope() ? "rope" : "learned"}, {"rotary width", n(c.rope_n_elem)}, {"RoPE base", n(c.rope_base)},
            {"RoPE condense ratio", n(c.rope_condense_ratio)},
            {"llama3 RoPE scaling", n(c.rope_llama3.factor) + "/" + n(c.rope_llama3.low_freq_factor) + "/" + n(c.rope_llama3.high_freq_factor) + "/" +
                                        n(c.rope_llama3.original_max_positions)},
            {"residual", c.parallel_residual ? (c.shared_attention_norm ? "parallel, shared norm" : "parallel") : "sequential"},
            {"q, k, v bias", c.QkvBias() ? "yes" : "no"}, {"attention output bias", c.OutBias() ? "yes" : "no"},
            {"MLP bias", c.MlpBias() ? "yes" : "no"}, {"head bias", c.lm_head_bias ? "yes" : "no"}, {"tied head", c.tied_head ? "yes" : "no"},
            {"q/k norm", c.qk_norm ? "yes" : "no"}, {"sliding windows", windows}, {"tau_q", Describe(c.query)}, {"tau_v", Describe(c.value)}};
}

}  // namespace

std::string ArchitectureDifference(const ModelConfig& a, const ModelConfig& b, bool shape) {
    const auto x = Fingerprint(a), y = Fingerprint(b);
    for (size_t i = 0; i < x.size(); ++i) {
        const std::string field = x[i].first;
        if (!shape && (field == "n_layer" || field == "n_embd" || field == "n_head" || field == "kv heads" || field == "head size" ||
                       field == "MLP width" || field == "rotary width"))
            continue;
        // What a fine-tune may change and still be its base's model: the temperatures, the context,
        // a padded vocabulary, the positions' scaling; and what two readings of one model may differ
        // in: GELU's tanh form and erf's (the official GPT-2 runs fine-tune HF's gpt2, gelu_new, in
        // nanoGPT's nn.GELU), a head tied or stored (lit-gpt's configs never tie).
        if (field == "tau_q" || field == "tau_v" || field == "context" || field == "vocabulary" || field.compare(0, 4, "RoPE") == 0 ||
            field == "llama3 RoPE scaling" || field == "sliding windows" || field == "activation" || field == "tied head")
            continue;
        if (x[i].second != y[i].second) return field + " " + x[i].second + " against " + y[i].second;
    }
    return "";
}

std::string SettingsDifference(const ModelConfig& a, const ModelConfig& b) {
    const auto x = Fingerprint(a), y = Fingerprint(b);
    std::string out;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
        const std::string field = x[i].first;
        const bool setting = field.compare(0, 4, "RoPE") == 0 || field == "llama3 RoPE scaling" || field == "sliding windows" || field == "activation";
        if (setting && x[i].second != y[i].second) out += (out.empty() ? "" : ", ") + field + " " + x[i].second + " against " + y[i].second;
    }
    return out;
}

Result<nlohmann::json> HfConfigToJson(const ModelConfig& c) {
    const Family* f = FamilyOf(c);
    if (!c.Rope() || !f || !*f->model_type)
        return Fail("a " + c.family + " model has no HF model_type ssaviz writes with RoPE (it writes " + HfModelTypes() + ")");
    const bool layer_norm = c.norm == NormKind::LayerNorm;
    json j = json::object();
    j["model_type"] = f->model_type;
    j["architectures"] = json::array({f->hf_architecture});
    for (auto [key, value] : {std::pair<const char*, int>{"hidden_size", c.n_embd}, {"num_hidden_layers", c.n_layer},
                              {"num_attention_heads", c.n_head}, {"num_key_value_heads", c.KvHeads()}, {"head_dim", c.HeadSize()},
                              {"intermediate_size", c.MlpWidth()}, {"vocab_size", c.vocab_size}, {"max_position_embeddings", c.n_positions}})
        j[key] = value;
    j[layer_norm ? "layer_norm_eps" : "rms_norm_eps"] = c.layer_norm_epsilon;
    j["rope_theta"] = c.rope_base;
    // HF reads int(fraction x head size): a fraction just above n / D says n whatever the rounding.
    double rotary = static_cast<double>(c.rope_n_elem) / c.HeadSize();
    if (static_cast<int>(rotary * c.HeadSize()) != c.rope_n_elem) rotary = (c.rope_n_elem + 0.5) / c.HeadSize();
    j[f->hf_rotary_key] = rotary;
    if (c.rope_llama3.factor > 0)
        j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", c.rope_llama3.factor}, {"low_freq_factor", c.rope_llama3.low_freq_factor},
                             {"high_freq_factor", c.rope_llama3.high_freq_factor},
                             {"original_max_position_embeddings", c.rope_llama3.original_max_positions}};
    else if (c.rope_condense_ratio != 1)
        j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope_condense_ratio}};
    j["hidden_act"] = c.mlp == MlpKind::SwiGlu ? "silu" : ToString(c.activation);
    j["tie_word_embeddings"] = c.tied_head;
    if (f->parallel_residual) j["use_parallel_residual"] = c.parallel_residual;
    j["attention_bias"] = c.OutBias();
    j["mlp_bias"] = c.MlpBias();
    if (c.sliding_window > 0) {
        j["sliding_window"] = c.sliding_window;
        if (f->window_opt_in) {
            j["use_sliding_window"] = true;
            j["max_window_layers"] = c.window_first_layer;
        }
    } else if (f->model_type == std::string("mistral")) {
        j["sliding_window"] = nullptr;  // none: an absent key is MistralConfig's 4096
    }
    if (c.IsSsa()) j["ssa"] = SsaBlock(c);
    // What HF's keys for this model_type cannot say (a lit-gpt model's shared norm, a bias the
    // family never has, ...) would silently change the model: refused by name.
    auto back = ParseConfig(j.dump(), "config.json");
    if (!back) return Fail("a " + c.family + " model as HF model_type " + f->model_type + ": " + back.error());
    const auto want = Fingerprint(c), got = Fingerprint(*back);
    for (size_t i = 0; i < want.size(); ++i)
        if (want[i].second != got[i].second)
            return Fail("a " + c.family + " model cannot be written as HF model_type " + f->model_type + ": its " + want[i].first + " (" +
                        want[i].second + ") would read back as " + got[i].second);
    return j;
}

Result<nlohmann::json> ConfigJsonFor(Format format, const ModelConfig& c) {
    switch (GetFormat(format).config) {
        case ConfigKind::Gpt2Json: return ConfigToJson(c);
        case ConfigKind::LitJson: return LitConfigToJson(c);
        case ConfigKind::HfJson: return HfConfigToJson(c);
    }
    return Fail("no config writer");
}

Result<ModelConfig> FamilyPreset(const Family& f, const PresetShape& s) {
    ModelConfig c;
    c.family = f.name;
    c.n_layer = s.n_layer;
    c.n_head = s.n_head;
    c.n_embd = s.n_embd;
    c.n_positions = s.n_positions;
    c.positions = f.positions;
    c.norm = f.norm;
    c.mlp = f.mlp;
    c.activation = f.activation;
    c.parallel_residual = f.parallel_residual;
    c.bias = f.bias;
    c.qkv_bias = !f.bias && f.hf_biases == HfBiases::Qkv;
    c.qk_norm = f.qk_norm;
    c.tied_head = !c.Rope();  // GPT-2 ties its head; lit-gpt's and HF's RoPE families have their own
    if (c.Rope()) {
        if (c.n_head < 1 || c.n_embd % c.n_head != 0) return Fail("n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " + std::to_string(c.n_head));
        const int head = c.HeadSize();
        c.rope_base = s.rope_base.value_or(f.rope_base);
        c.rope_n_elem = static_cast<int>(s.rotary.value_or(f.rotary) * head) / 2 * 2;
        c.n_query_groups = s.kv_heads.value_or(f.kv_divisor > 1 && c.n_head % f.kv_divisor == 0 ? c.n_head / f.kv_divisor : c.n_head);
        // SwiGLU's width as Llama sizes it: about 8/3 of the residual, a multiple of 32.
        c.intermediate_size = s.intermediate_size.value_or(c.mlp == MlpKind::SwiGlu ? (8 * c.n_embd / 3 + 31) / 32 * 32 : 4 * c.n_embd);
    } else if (s.kv_heads || s.intermediate_size || s.rotary || s.rope_base) {
        return Fail("a " + std::string(f.name) + " model has learned positions and one kv head per head, and an MLP of 4 x n_embd");
    }
    if (c.HfOnly()) c.hf_model_type = f.model_type;  // a family only HF's folders hold (q, k, v biases; q/k norm)
    c.vocab_size = 1;  // the tokenizer's size, once it is read
    if (Status st = c.Validate(f.name); !st) return Fail(st.error());
    return c;
}

}  // namespace model
