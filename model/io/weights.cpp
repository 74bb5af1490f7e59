#include "model/io/weights.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>
#include <set>
#include <sstream>

#include "model/io/pickle.h"
#include "model/io/zip.h"

namespace model {
namespace {

using Kind = PickleValue::Kind;

bool EndsWith(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& shape) {
    std::vector<int64_t> strides(shape.size(), 1);
    for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
    return strides;
}

// The largest element index a view reaches, or nullopt when it overflows. Empty views reach none.
std::optional<uint64_t> LastElement(const PickledTensor& t) {
    uint64_t last = static_cast<uint64_t>(t.offset);
    for (size_t d = 0; d < t.shape.size(); ++d) {
        if (t.shape[d] == 0) return 0;
        uint64_t step;
        if (__builtin_mul_overflow(static_cast<uint64_t>(t.shape[d] - 1), static_cast<uint64_t>(t.strides[d]), &step) ||
            __builtin_add_overflow(last, step, &last))
            return std::nullopt;
    }
    return last;
}

// Breadth first from the root through dicts, lists and tuples: the first dict with a tensor under
// a key ending in "wte.weight". Cycles are skipped by remembering what was visited.
std::optional<size_t> FindStateDict(const Pickle& p, std::string* path) {
    std::deque<std::pair<size_t, std::string>> queue{{p.root, ""}};
    std::set<size_t> seen;
    while (!queue.empty()) {
        auto [at, where] = queue.front();
        queue.pop_front();
        if (!seen.insert(at).second || where.size() > 200) continue;
        const PickleValue& v = p[at];
        if (v.kind == Kind::Dict) {
            for (size_t i = 0; i + 1 < v.items.size(); i += 2)
                if (p[v.items[i]].kind == Kind::String && EndsWith(p[v.items[i]].text, "wte.weight") && p[v.items[i + 1]].kind == Kind::Tensor) {
                    *path = where.empty() ? "the top level" : where;
                    return at;
                }
            for (size_t i = 0; i + 1 < v.items.size(); i += 2) {
                const PickleValue& key = p[v.items[i]];
                std::string name = key.kind == Kind::String ? "'" + key.text + "'" : key.kind == Kind::Int ? std::to_string(key.integer) : "?";
                queue.push_back({v.items[i + 1], where + "[" + name + "]"});
            }
        } else if (v.kind == Kind::List || v.kind == Kind::Tuple) {
            for (size_t i = 0; i < v.items.size(); ++i) queue.push_back({v.items[i], where + "[" + std::to_string(i) + "]"});
        }
    }
    return std::nullopt;
}

std::string TopLevelKeys(const Pickle& p) {
    const PickleValue& root = p[p.root];
    if (root.kind != Kind::Dict) return std::string("the top level is a ") + ToString(root.kind);
    std::string keys;
    for (size_t i = 0; i + 1 < root.items.size() && i < 20; i += 2)
        keys += (keys.empty() ? "" : ", ") + (p[root.items[i]].kind == Kind::String ? p[root.items[i]].text : std::string("?"));
    return "top-level keys: " + (keys.empty() ? std::string("none") : keys);
}

Status ReadCheckpoint(const uint8_t* data, size_t size, WeightFile* out) {
    auto zip = ParseZip(data, size);
    if (!zip) return Fail(zip.error());
    for (const auto& e : zip->entries)
        if (EndsWith(e.name, "/constants.pkl") || e.name.find("/code/") != std::string::npos)
            return Fail("a TorchScript archive (torch.jit.save), not a torch.save checkpoint; save model.state_dict() with torch.save");
    const ZipEntry* pkl = nullptr;
    for (const auto& e : zip->entries)
        if (EndsWith(e.name, "/data.pkl") && e.name.find('/') == e.name.size() - 9) pkl = &e;
    if (!pkl) return Fail("a ZIP archive without data.pkl: not a torch.save checkpoint");
    if (pkl->method != 0) return Fail(pkl->CompressedError());
    const std::string dir = pkl->name.substr(0, pkl->name.size() - 8);  // "archive/"
    if (const ZipEntry* order = zip->Find(dir + "byteorder"); order && order->method == 0) {
        std::string text(reinterpret_cast<const char*>(data + order->offset), order->size);
        if (text != "little") return Fail("tensors are stored " + text + "-endian; only little-endian checkpoints are read");
    }
    auto pickle = Unpickle(data + pkl->offset, pkl->size);
    if (!pickle) return Fail(pkl->name + ": " + pickle.error());
    const Pickle& p = *pickle;

    auto dict = FindStateDict(p, &out->state_dict_path);
    if (!dict) {
        if (p[p.root].kind == Kind::Object)
            return Fail("the checkpoint holds a pickled '" + p[p.root].text + "' object, not a state dict; ssaviz never imports or calls "
                        "pickled code (for torch.save(model), save model.state_dict() instead)");
        return Fail("no state dict with a token embedding ('wte.weight') in it; " + TopLevelKeys(p));
    }
    if (p[p.root].kind == Kind::Dict)
        if (const PickleValue* args = p.Get(p.root, "model_args"); args && args->kind == Kind::Dict)
            for (size_t i = 0; i + 1 < args->items.size(); i += 2) {
                const PickleValue &key = p[args->items[i]], &value = p[args->items[i + 1]];
                if (key.kind == Kind::String && (value.kind == Kind::Int || value.kind == Kind::Bool)) out->model_args[key.text] = value.integer;
            }

    const PickleValue& sd = p[*dict];
    for (size_t i = 0; i + 1 < sd.items.size(); i += 2) {
        const PickleValue &key = p[sd.items[i]], &value = p[sd.items[i + 1]];
        if (key.kind != Kind::String || value.kind != Kind::Tensor) continue;  // e.g. _extra_state
        const PickledTensor& t = value.tensor;
        const std::string where = "tensor '" + key.text + "'";
        const ZipEntry* storage = zip->Find(dir + "data/" + t.storage_key);
        if (!storage) return Fail(where + ": its storage '" + dir + "data/" + t.storage_key + "' is missing from the archive");
        if (storage->method != 0) return Fail(storage->CompressedError());
        const size_t element = DtypeSize(t.dtype);
        uint64_t storage_bytes;
        if (__builtin_mul_overflow(t.storage_elements, static_cast<uint64_t>(element), &storage_bytes) || storage_bytes > storage->size)
            return Fail(where + ": its storage of " + std::to_string(t.storage_elements) + " " + ToString(t.dtype) + " elements needs " +
                        std::to_string(t.storage_elements * element) + " bytes but '" + storage->name + "' holds " +
                        std::to_string(storage->size) + "; truncated?");
        auto last = LastElement(t);
        const bool empty = std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end();
        if (!empty && (!last || *last >= t.storage_elements))
            return Fail(where + ": a " + ShapeString(t.shape) + " view with strides " + ShapeString(t.strides) + " at offset " +
                        std::to_string(t.offset) + " reaches past its storage of " + std::to_string(t.storage_elements) + " elements");
        if (out->index.count(key.text)) return Fail(where + " appears twice");
        StoredTensor s;
        s.name = key.text;
        s.dtype = t.dtype;
        s.shape = t.shape;
        s.strides = t.strides;
        s.data = data + storage->offset + (empty ? 0 : static_cast<uint64_t>(t.offset) * element);
        out->index[s.name] = out->tensors.size();
        out->tensors.push_back(std::move(s));
    }
    return Ok{};
}

// The names' prefix is whatever precedes "wte.weight": "" (HF), "transformer." (HF with the LM
// head, nanoGPT), and wrappers' "_orig_mod." (torch.compile) or "module." (DDP) before either.
void FindPrefixes(WeightFile* w) {
    bool found = false;
    for (const auto& t : w->tensors)
        if (EndsWith(t.name, "wte.weight") && (!found || t.name.size() - 10 < w->prefix.size())) {
            w->prefix = t.name.substr(0, t.name.size() - 10);
            found = true;
        }
    w->outer_prefix = EndsWith(w->prefix, "transformer.") ? w->prefix.substr(0, w->prefix.size() - 12) : w->prefix;
}

}  // namespace

bool StoredTensor::Contiguous() const {
    int64_t expected = 1;
    for (size_t d = shape.size(); d-- > 0;) {
        if (shape[d] != 1 && strides[d] != expected) return false;
        expected *= shape[d];
    }
    return true;
}

const StoredTensor* WeightFile::Find(const std::string& name) const {
    for (const std::string* pre : {&prefix, &outer_prefix}) {
        auto it = index.find(*pre + name);
        if (it != index.end()) return &tensors[it->second];
    }
    auto it = index.find(name);
    return it == index.end() ? nullptr : &tensors[it->second];
}

Result<WeightFile> OpenWeights(const std::string& path) {
    auto file = MappedFile::Open(path);
    if (!file) return Fail(file.error());
    WeightFile w;
    w.path = path;
    w.file = *file;
    const uint8_t* data = w.file->data();
    const size_t size = w.file->size();
    if (size >= 4 && std::memcmp(data, "PK\x03\x04", 4) == 0) {
        w.format = "torch.save";
        if (Status s = ReadCheckpoint(data, size, &w); !s) return Fail(path + ": " + s.error());
    } else if (size >= 2 && data[0] == 0x80 && data[1] <= 5) {
        return Fail(path + ": a legacy torch.save file (PyTorch < 1.6 or _use_new_zipfile_serialization=False); "
                           "re-save it with a current torch.save, or as safetensors");
    } else {
        w.format = "safetensors";
        auto header = ParseSafetensorsHeader(data, size);
        if (!header) return Fail(path + ": " + header.error());
        for (const auto& t : header->tensors) {
            StoredTensor s{t.name, t.dtype, t.shape, RowMajorStrides(t.shape), data + header->data_offset + t.begin};
            w.index[s.name] = w.tensors.size();
            w.tensors.push_back(std::move(s));
        }
    }
    FindPrefixes(&w);
    return w;
}

Result<ModelFiles> FindModelFiles(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    ModelFiles files;
    if (fs::is_regular_file(path, ec)) {
        files.weights = path;
        files.dir = fs::path(path).parent_path().string();
        if (files.dir.empty()) files.dir = ".";
        if (fs::is_regular_file(files.dir + "/config.json", ec)) files.config = files.dir + "/config.json";
        return files;
    }
    if (!fs::is_directory(path, ec)) return Fail("model '" + path + "' does not exist");
    files.dir = path;
    if (fs::is_regular_file(path + "/config.json", ec)) files.config = path + "/config.json";
    for (const char* name : {"model.safetensors", "pytorch_model.bin"})
        if (fs::is_regular_file(path + "/" + name, ec)) {
            files.weights = path + "/" + name;
            return files;
        }
    std::vector<std::string> candidates;
    bool sharded = false;
    for (const auto& entry : fs::directory_iterator(path, ec)) {
        const std::string name = entry.path().filename().string();
        const std::string ext = entry.path().extension().string();
        sharded = sharded || EndsWith(name, ".index.json");
        if (entry.is_regular_file(ec) && (ext == ".safetensors" || ext == ".pt" || ext == ".pth" || ext == ".bin" || ext == ".ckpt"))
            candidates.push_back(entry.path().string());
    }
    if (sharded) return Fail(path + ": sharded weights (*.index.json) are not supported; merge the shards into one file");
    if (candidates.size() == 1) {
        files.weights = candidates[0];
        return files;
    }
    if (candidates.empty()) return Fail(path + ": no weights (model.safetensors, pytorch_model.bin, or a .pt / .pth / .bin / .ckpt checkpoint)");
    std::sort(candidates.begin(), candidates.end());
    return Fail(path + ": " + std::to_string(candidates.size()) + " weight files (" + candidates[0] + ", " + candidates[1] +
                (candidates.size() > 2 ? ", ..." : "") + "); open one of them directly");
}

Result<TemperatureForm> ParseFormSpec(const std::string& spec) {
    std::vector<std::string> parts;
    std::stringstream in(spec);
    for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
    const std::string usage = "'" + spec + "' is not POSITION[,TOKEN[,COMBINE]] (e.g. sigmoid,shared,sum or none)";
    if (parts.empty() || parts.size() > 3) return Fail(usage);
    TemperatureForm f;
    const std::string& pos = parts[0];
    if (pos == "sigmoid") f.position = PositionForm::Sigmoid;
    else if (pos == "exp_exp") f.position = PositionForm::ExpExp;
    else if (pos == "linear") f.position = PositionForm::Linear;
    else if (pos != "none" && pos != "null") return Fail(usage + ": position '" + pos + "' is not sigmoid, exp_exp, linear or none");
    if (parts.size() > 1) {
        if (parts[1] == "shared") f.token = TokenForm::Shared;
        else if (parts[1] == "feature") f.token = TokenForm::Feature;
        else if (parts[1] != "none" && parts[1] != "null") return Fail(usage + ": token '" + parts[1] + "' is not shared, feature or none");
    }
    if (parts.size() > 2) {
        if (parts[2] == "product") f.combine = Combine::Product;
        else if (parts[2] != "sum") return Fail(usage + ": combine '" + parts[2] + "' is not sum or product");
    }
    return f;
}

std::string FormSpec(const TemperatureForm& f) {
    if (!f.Active()) return "none";
    std::string s = f.position == PositionForm::None ? "none" : ToString(f.position);
    s += std::string(",") + (f.token == TokenForm::None ? "none" : ToString(f.token));
    return s + "," + ToString(f.combine);
}

Result<InferredConfig> InferConfig(const WeightFile& w, const ConfigHints& hints) {
    InferredConfig out;
    ModelConfig& c = out.config;
    const StoredTensor* wte = w.Find("wte.weight");
    const StoredTensor* wpe = w.Find("wpe.weight");
    if (!wte || wte->shape.size() != 2) return Fail("no 2-d token embedding 'wte.weight' to infer the model's shape from");
    if (!wpe || wpe->shape.size() != 2 || wpe->shape[1] != wte->shape[1])
        return Fail("no position embedding 'wpe.weight' of shape [n_positions, " + std::to_string(wte->shape[1]) + "]");
    const int64_t V = wte->shape[0], E = wte->shape[1], P = wpe->shape[0];
    if (V < 1 || E < 1 || P < 1 || V > (1 << 24) || E > (1 << 24) || P > (1 << 24))
        return Fail("embedding shapes " + ShapeString(wte->shape) + " / " + ShapeString(wpe->shape) + " are out of range");
    c.vocab_size = static_cast<int>(V);
    c.n_embd = static_cast<int>(E);
    c.n_positions = static_cast<int>(P);
    while (c.n_layer < 1024 && w.Find("h." + std::to_string(c.n_layer) + ".ln_1.weight")) ++c.n_layer;
    if (c.n_layer == 0) return Fail("no layers: 'h.0.ln_1.weight' is missing");
    const StoredTensor* attn = w.Find("h.0.attn.c_attn.weight");
    const bool linear = attn && attn->shape == std::vector<int64_t>{3 * E, E};

    auto arg = [&](const char* key) -> int64_t { auto it = w.model_args.find(key); return it == w.model_args.end() ? 0 : it->second; };
    for (auto [key, value] : {std::pair<const char*, int64_t>{"n_layer", c.n_layer}, {"n_embd", E}, {"block_size", P}})
        if (arg(key) && arg(key) != value)
            return Fail(std::string("the checkpoint's model_args say ") + key + " = " + std::to_string(arg(key)) + " but the tensors say " + std::to_string(value));

    // n_head: the flag, nanoGPT's model_args, a per-head SSA parameter's length, or GPT-2's head size 64.
    int64_t heads = hints.n_head;
    std::string why = "given";
    if (!heads && arg("n_head")) { heads = arg("n_head"); why = "from the checkpoint's model_args"; }
    for (const char* name : {"h.0.attn.ssa_q_pos", "h.0.attn.beta", "h.0.attn.ssa_v_pos", "h.0.attn.ssa_q_tok.bias", "h.0.attn.ssa_v_tok.bias"}) {
        const StoredTensor* t = w.Find(name);
        if (!heads && t && t->shape.size() == 1 && t->shape[0] > 1) { heads = t->shape[0]; why = std::string("from the length of ") + name; }
    }
    if (!heads && E % 64 == 0) { heads = E / 64; why = "assuming GPT-2's head size of 64; pass --heads N if that is wrong"; }
    if (!heads) return Fail("cannot tell n_head from the tensors' shapes (n_embd " + std::to_string(E) + "); pass --heads N");
    if (heads > 1024 || E % heads) return Fail("n_head " + std::to_string(heads) + " does not divide n_embd " + std::to_string(E));
    c.n_head = static_cast<int>(heads);
    out.notes.push_back("n_head " + std::to_string(heads) + " " + why);

    if (hints.activation) c.activation = *hints.activation;
    else {
        c.activation = linear ? Activation::Gelu : Activation::GeluNew;
        out.notes.push_back(linear ? "activation gelu (exact erf, nanoGPT's nn.GELU) from the Linear layout"
                                   : "activation gelu_new (tanh, HF GPT-2) from the Conv1D layout");
    }

    // The SSA forms: flags win; otherwise what the tensors show, asking where they cannot tell.
    const int64_t D = E / heads;
    for (bool query : {true, false}) {
        const std::optional<TemperatureForm>& hint = query ? hints.query : hints.value;
        TemperatureForm& form = query ? c.query : c.value;
        const std::string side = query ? "q" : "v", flag = query ? "--query-form" : "--value-form";
        if (hint) { form = *hint; continue; }
        const StoredTensor* pos = w.Find("h.0.attn.ssa_" + side + "_pos");
        const StoredTensor* beta = query ? w.Find("h.0.attn.beta") : nullptr;
        const StoredTensor* tok = w.Find("h.0.attn.ssa_" + side + "_tok.weight");
        if (!pos && !beta && !tok) continue;
        const std::string ask = "; no config.json says which, so pass " + flag + " POSITION,TOKEN[,COMBINE] (e.g. sigmoid,shared,sum)";
        if (pos) return Fail("tau_" + side + " has a position parameter (h.0.attn.ssa_" + side + "_pos) whose form (sigmoid, exp_exp or linear) the shapes cannot tell" + ask);
        if (beta) form.position = PositionForm::ExpExp;
        if (tok) {
            const int64_t n = tok->shape.empty() ? 0 : tok->shape.back();
            if (n == D && D != E) form.token = TokenForm::Shared;
            else if (n == E && D != E) form.token = TokenForm::Feature;
            else return Fail("tau_" + side + "'s token weight " + ShapeString(tok->shape) + " fits neither the shared nor the feature form unambiguously" + ask);
        }
        if (form.position != PositionForm::None && form.token != TokenForm::None)
            return Fail("tau_" + side + " has position and token terms, and whether they add or multiply is not in the tensors" + ask);
        out.notes.push_back("tau_" + side + " " + Describe(form) + " from the tensors" + (beta ? " (attn.beta is the official code's exp_exp parameter)" : ""));
    }
    return out;
}

}  // namespace model
