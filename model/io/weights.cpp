#include "model/io/weights.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/io/files.h"
#include "model/io/pickle.h"
#include "model/io/zip.h"

namespace model {
namespace {

using Kind = PickleValue::Kind;

// The most tensors a checkpoint's state dict may hold, as for safetensors headers.
constexpr size_t kMaxTensors = kMaxSafetensorsTensors;
constexpr size_t kMaxKeyBytes = 4096;  // a state-dict key's bytes (names like "transformer.h.11.attn.c_attn.weight")

// Whether a model's file is at `path`: false where nothing is, true for a regular file (or a link
// to one). Anything else under that name (a folder, a FIFO, a device, a link that leads nowhere) is
// an error naming it, not a file passed over for another one (a folder named lit_model_finetuned.pth
// had the base, lit_model.pth, analysed as the fine-tune).
Result<bool> ModelFileAt(const std::string& path) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return false;
    if (Status s = CheckRegularFile(path, SIZE_MAX); !s) return Fail(s.error());
    return true;
}

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

// 1234567 -> "1,234,567", for element counts in messages.
std::string Grouped(uint64_t n) {
    std::string digits = std::to_string(n), out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

// The element count of a shape, or nullopt when it overflows 64 bits.
std::optional<uint64_t> ElementCount(const std::vector<int64_t>& shape) {
    uint64_t n = 1;
    for (int64_t d : shape)
        if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return std::nullopt;
    return n;
}

// The token embedding's names, one a format (arch.h): "wte.weight", "embed_in.weight", ...
const std::vector<std::string>& EmbeddingNames() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const FormatInfo& f : Formats())
            for (const TensorName& n : NamesOf(f.format, Role::TokenEmbedding, MlpKind::Gelu))
                if (std::find(out.begin(), out.end(), std::string(n.name) + ".weight") == out.end()) out.push_back(std::string(n.name) + ".weight");
        return out;
    }();
    return names;
}

// The length of the token embedding's name `name` ends in, or 0 when it is not one. GPT-2's
// "wte.weight" is matched as any ending (nanoGPT's and wrappers' names have always been); the HF
// names only as a whole component.
size_t EmbeddingNameLength(const std::string& name) {
    const std::string& gpt2 = EmbeddingNames().front();
    if (EndsWith(name, gpt2)) return gpt2.size();
    for (const std::string& suffix : EmbeddingNames())
        if (EndsWith(name, suffix) && (name.size() == suffix.size() || name[name.size() - suffix.size() - 1] == '.')) return suffix.size();
    return 0;
}

bool IsEmbeddingKey(const PickleValue& key) { return key.kind == Kind::String && EmbeddingNameLength(key.text) > 0; }

// Where the search found its state dict, or why not.
struct StateDictSearch {
    std::optional<size_t> dict;
    std::string path;      // of `dict`: "the top level", "['model']"
    std::string mistyped;  // the first embedding key whose value is not a tensor, described
};

// Breadth first from the root through dicts, lists and tuples: the first dict with a tensor under
// a token embedding's name. Each value is visited once (cycles, and a container referenced a
// million times, cost nothing more) and remembers only its parent, so memory is linear in the
// number of values; the path is spelled out for the dict found only.
StateDictSearch FindStateDict(const Pickle& p) {
    constexpr size_t kMaxDepth = 16;
    struct Visit { size_t parent, item, depth; };  // item: the index in the parent's items
    constexpr size_t kRoot = SIZE_MAX;
    std::vector<Visit> visits(p.values.size(), Visit{kRoot, 0, 0});
    std::vector<bool> seen(p.values.size(), false);
    std::deque<size_t> queue{p.root};
    seen[p.root] = true;
    auto path_of = [&](size_t at) {
        std::vector<std::string> parts;
        for (; visits[at].parent != kRoot; at = visits[at].parent) {
            const PickleValue& parent = p[visits[at].parent];
            const size_t i = visits[at].item;
            if (parent.kind == Kind::Dict) {
                const PickleValue& key = p[parent.items[i - 1]];
                parts.push_back(key.kind == Kind::String ? Quoted(key.text) : key.kind == Kind::Int ? std::to_string(key.integer) : "?");
            } else {
                parts.push_back(std::to_string(i));
            }
        }
        std::string path;
        for (size_t k = parts.size(); k-- > 0;) path += "[" + parts[k] + "]";
        return path.empty() ? std::string("the top level") : path;
    };
    StateDictSearch out;
    auto visit = [&](size_t child, size_t parent, size_t item) {
        if (seen[child] || visits[parent].depth >= kMaxDepth) return;
        seen[child] = true;
        visits[child] = {parent, item, visits[parent].depth + 1};
        queue.push_back(child);
    };
    while (!queue.empty()) {
        const size_t at = queue.front();
        queue.pop_front();
        const PickleValue& v = p[at];
        if (v.kind == Kind::Dict) {
            for (size_t i = 0; i + 1 < v.items.size(); i += 2) {
                if (!IsEmbeddingKey(p[v.items[i]])) continue;
                const PickleValue& value = p[v.items[i + 1]];
                if (value.kind == Kind::Tensor) {
                    out.dict = at;
                    out.path = path_of(at);
                    return out;
                }
                if (out.mistyped.empty()) {
                    const std::string where = path_of(at);
                    out.mistyped = Quoted(p[v.items[i]].text) + (where == "the top level" ? "" : " in " + where) + " is " +
                                   (value.kind == Kind::Object ? "a '" + EscapeForMessage(value.text) + "' object" : std::string("a ") + ToString(value.kind)) +
                                   ", not a tensor";
                }
            }
            for (size_t i = 0; i + 1 < v.items.size(); i += 2) visit(v.items[i + 1], at, i + 1);
        } else if (v.kind == Kind::List || v.kind == Kind::Tuple) {
            for (size_t i = 0; i < v.items.size(); ++i) visit(v.items[i], at, i);
        }
    }
    return out;
}

std::string TopLevelKeys(const Pickle& p) {
    const PickleValue& root = p[p.root];
    if (root.kind != Kind::Dict) return std::string("the top level is a ") + ToString(root.kind);
    std::string keys;
    for (size_t i = 0; i + 1 < root.items.size() && i < 20; i += 2)
        keys += (keys.empty() ? "" : ", ") + (p[root.items[i]].kind == Kind::String ? EscapeForMessage(p[root.items[i]].text, 60) : std::string("?"));
    return "top-level keys: " + (keys.empty() ? std::string("none") : keys);
}

// `shard`: one of an HF index's .bin shards, whose top level is (a part of) the state dict, the
// embedding perhaps in another shard.
Status ReadCheckpoint(const uint8_t* data, size_t size, bool shard, WeightFile* out) {
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
        if (text != "little") return Fail("tensors are stored " + EscapeForMessage(text, 20) + "-endian; only little-endian checkpoints are read");
    }
    auto pickle = Unpickle(data + pkl->offset, pkl->size);
    if (!pickle) return Fail(EscapeForMessage(pkl->name) + ": " + pickle.error());
    const Pickle& p = *pickle;

    StateDictSearch search;
    if (shard) {
        if (p[p.root].kind != Kind::Dict)
            return Fail(std::string("a shard's top level must be its state dict, a dict, not a ") +
                        (p[p.root].kind == Kind::Object ? "pickled '" + EscapeForMessage(p[p.root].text) + "' object" : ToString(p[p.root].kind)));
        search.dict = p.root;
        search.path = "the top level";
    } else {
        search = FindStateDict(p);
    }
    if (!search.dict) {
        if (p[p.root].kind == Kind::Object)
            return Fail("the checkpoint holds a pickled '" + EscapeForMessage(p[p.root].text) + "' object, not a state dict; ssaviz never imports or calls "
                        "pickled code (for torch.save(model), save model.state_dict() instead)");
        if (!search.mistyped.empty()) return Fail("no state dict with a token embedding: " + search.mistyped);
        std::string names;
        for (const std::string& n : EmbeddingNames()) names += (names.empty() ? "" : n == EmbeddingNames().back() ? " or " : ", ") + Quoted(n);
        return Fail("no state dict with a token embedding (" + names + ") in it; " + TopLevelKeys(p));
    }
    out->state_dict_path = search.path;
    if (!shard && p[p.root].kind == Kind::Dict)
        if (const PickleValue* args = p.Get(p.root, "model_args"); args && args->kind == Kind::Dict)
            for (size_t i = 0; i + 1 < args->items.size(); i += 2) {
                const PickleValue &key = p[args->items[i]], &value = p[args->items[i + 1]];
                if (key.kind == Kind::String && (value.kind == Kind::Int || value.kind == Kind::Bool)) out->model_args[key.text] = value.integer;
            }

    const PickleValue& sd = p[*search.dict];
    // Views may share a storage (a tied head is the embedding's), and each is read into its own
    // copy: bounded by what the storages hold, so many views of one storage cannot ask for 800
    // times the file (a 4 MB file of 1,024 layers' views asked for more than 8 GB).
    uint64_t viewed_bytes = 0, storage_total = 0;
    std::set<std::string> storages;
    for (size_t i = 0; i + 1 < sd.items.size(); i += 2) {
        const PickleValue &key = p[sd.items[i]], &value = p[sd.items[i + 1]];
        if (key.kind != Kind::String) continue;
        // Every key is compared as it goes into a map: one long key repeated through the pickle's
        // memo was compared whole each time (a 6 MB file ran for minutes). A state dict's names are short.
        if (key.text.size() > kMaxKeyBytes)
            return Fail("the state dict has a key of " + std::to_string(key.text.size()) + " bytes (" + Quoted(key.text.substr(0, 40)) +
                        "...); a tensor's name is at most " + std::to_string(kMaxKeyBytes));
        if (value.kind != Kind::Tensor) {  // e.g. _extra_state; said if a tensor is looked for under its name
            if (out->not_tensors.size() < kMaxTensors)
                out->not_tensors[key.text] =
                    value.kind == Kind::Object ? "a '" + EscapeForMessage(value.text) + "' object" : std::string("a ") + ToString(value.kind);
            continue;
        }
        const PickledTensor& t = value.tensor;
        const std::string where = "tensor " + Quoted(key.text);
        if (out->tensors.size() == kMaxTensors)
            return Fail("the state dict holds more than " + std::to_string(kMaxTensors) + " tensors, the most ssaviz reads");
        const ZipEntry* storage = zip->Find(dir + "data/" + t.storage_key);
        if (!storage) return Fail(where + ": its storage " + Quoted(dir + "data/" + t.storage_key) + " is missing from the archive");
        if (storage->method != 0) return Fail(storage->CompressedError());
        const size_t element = DtypeSize(t.dtype);
        uint64_t storage_bytes;
        if (__builtin_mul_overflow(t.storage_elements, static_cast<uint64_t>(element), &storage_bytes) || storage_bytes > storage->size)
            return Fail(where + ": its storage of " + std::to_string(t.storage_elements) + " " + ToString(t.dtype) + " elements needs " +
                        std::to_string(t.storage_elements * element) + " bytes but " + Quoted(storage->name) + " holds " +
                        std::to_string(storage->size) + "; truncated?");
        auto last = LastElement(t);
        const bool empty = std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end();
        if (!empty && (!last || *last >= t.storage_elements))
            return Fail(where + ": a " + ShapeString(t.shape) + " view with strides " + ShapeString(t.strides) + " at offset " +
                        std::to_string(t.offset) + " reaches past its storage of " + std::to_string(t.storage_elements) + " elements");
        // Inside its storage, a view of more elements than the storage holds repeats some (a zero
        // stride broadcasts one): the loader would materialise every copy, so a 3 MB file could
        // ask for 16 GB.
        const auto elements = ElementCount(t.shape);
        if (!elements || *elements > t.storage_elements)
            return Fail(where + " views " + (elements ? Grouped(*elements) : "more than 2^64") + " elements of a storage of " +
                        Grouped(t.storage_elements) + " (shape " + ShapeString(t.shape) + ", strides " + ShapeString(t.strides) +
                        "); broadcast views are not read");
        if (out->index.count(key.text)) return Fail(where + " appears twice");
        if (storages.insert(t.storage_key).second) storage_total += storage_bytes;
        viewed_bytes += *elements * element;  // at most the storage's bytes (above), so no overflow
        StoredTensor s;
        s.name = key.text;
        s.dtype = t.dtype;
        s.shape = t.shape;
        s.strides = t.strides;
        s.data = data + storage->offset + (empty ? 0 : static_cast<uint64_t>(t.offset) * element);
        out->index[s.name] = out->tensors.size();
        out->tensors.push_back(std::move(s));
    }
    if (viewed_bytes > 2 * storage_total + (uint64_t{16} << 20))
        return Fail("the state dict's tensors view " + FormatBytes(viewed_bytes) + " of storages holding " + FormatBytes(storage_total) +
                    ": more than twice (a tied head) what they hold; tensors sharing a storage are read once each");
    return Ok{};
}

// The names' prefix is whatever precedes the token embedding: "" (HF GPT-2), "transformer." (HF
// GPT-2 with the LM head, nanoGPT, lit-gpt), "model." (HF llama & co.), "gpt_neox.", and wrappers'
// "_orig_mod." (torch.compile) or "module." (DDP) before any. The outer prefix drops the root's own
// name, which the LM head sits beside.
std::string EmbeddingPrefix(const std::string& name) { return name.substr(0, name.size() - EmbeddingNameLength(name)); }

// Whether `prefix` ends in the component(s) `root` ("transformer.").
bool EndsInRoot(const std::string& prefix, const std::string& root) {
    return !root.empty() && EndsWith(prefix, root) && (prefix.size() == root.size() || prefix[prefix.size() - root.size() - 1] == '.');
}

void SetPrefix(WeightFile* w, std::string prefix) {
    w->prefix = std::move(prefix);
    w->outer_prefix = w->prefix;
    for (const FormatInfo& f : Formats())
        if (EndsInRoot(w->prefix, f.root)) {
            w->outer_prefix = w->prefix.substr(0, w->prefix.size() - std::string(f.root).size());
            break;
        }
}

void FindPrefixes(WeightFile* w) {
    std::optional<std::string> shortest;
    for (const auto& t : w->tensors)
        if (EmbeddingNameLength(t.name)) {
            const std::string prefix = EmbeddingPrefix(t.name);
            if (std::none_of(w->embeddings.begin(), w->embeddings.end(), [&](const std::string& e) { return EmbeddingPrefix(e) == prefix; }))
                w->embeddings.push_back(t.name);
            if (!shortest || prefix.size() < shortest->size()) shortest = prefix;
        }
    SetPrefix(w, shortest.value_or(""));
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

std::string WeightFile::Missing(const std::string& name) const {
    for (const std::string& full : {prefix + name, outer_prefix + name, name})
        if (auto it = not_tensors.find(full); it != not_tensors.end())
            return "'" + EscapeForMessage(full) + "' holds " + it->second + ", not a tensor";
    return "no tensor '" + EscapeForMessage(prefix + name) + "'";
}

bool WeightFile::UseRoot(const std::string& root) {
    for (const std::string& name : embeddings)
        if (const std::string prefix = EmbeddingPrefix(name); EndsInRoot(prefix, root)) {
            SetPrefix(this, prefix);
            return true;
        }
    return false;
}

const StoredTensor* WeightFile::Find(const std::string& name) const {
    for (const std::string* pre : {&prefix, &outer_prefix}) {
        auto it = index.find(*pre + name);
        if (it != index.end()) return &tensors[it->second];
    }
    auto it = index.find(name);
    return it == index.end() ? nullptr : &tensors[it->second];
}

uint64_t StoredTensor::Extent() const {
    uint64_t last = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] == 0) return 0;
        last += static_cast<uint64_t>(shape[d] - 1) * static_cast<uint64_t>(d < strides.size() ? strides[d] : 0);
    }
    return (last + 1) * DtypeSize(dtype);  // every element lies inside the file (checked when opened): no overflow
}

std::shared_ptr<MappedFile> WeightFile::FileOf(const StoredTensor& t) const {
    for (const auto& f : files)
        if (f && t.data >= f->data() && t.data < f->data() + f->size()) return f;
    return nullptr;
}

void WeightFile::DropPages(const StoredTensor& t) const {
    if (auto f = FileOf(t)) f->DropPages(t.data, t.Extent());
}

namespace {

// One file's tensors; `shard` as in ReadCheckpoint.
Result<WeightFile> OpenWeightsFile(const std::string& path, bool shard) {
    auto file = MappedFile::Open(path);
    if (!file) return Fail(file.error());
    WeightFile w;
    w.path = path;
    w.files.push_back(*file);
    const uint8_t* data = (*file)->data();
    const size_t size = (*file)->size();
    if (size >= 4 && std::memcmp(data, "PK\x03\x04", 4) == 0) {
        w.format = "torch.save";
        if (Status s = ReadCheckpoint(data, size, shard, &w); !s) return Fail(path + ": " + s.error());
    } else if (size >= 2 && data[0] == 0x80 && data[1] <= 5 && !(size > 8 && data[8] == '{')) {
        // A pickle's PROTO opcode, unless a safetensors header follows its 8-byte length (a length
        // whose low byte is 0x80, as 1152 is, begins the same way).
        return Fail(path + ": a legacy torch.save file (PyTorch < 1.6 or _use_new_zipfile_serialization=False); "
                           "re-save it with a current torch.save, or as safetensors");
    } else {
        w.format = "safetensors";
        auto header = ParseSafetensorsHeader(data, size);
        // A safetensors header is JSON from byte 8: a file without one is another kind of file
        // (config.json, a tokenizer) given where the weights go, not a broken weights file.
        if (!header && size > 8 && data[8] != '{' && data[8] != '[')
            return Fail(EscapeForMessage(path) + ": not a weights file (neither torch.save's ZIP nor safetensors): give the model's folder, or its "
                               ".safetensors, .pth or .bin file");
        if (!header) return Fail(path + ": " + header.error());
        for (const auto& t : header->tensors) {
            StoredTensor s{t.name, t.dtype, t.shape, RowMajorStrides(t.shape), data + header->data_offset + t.begin};
            w.index[s.name] = w.tensors.size();
            w.tensors.push_back(std::move(s));
        }
    }
    return w;
}

// A shard's name from the index as a path inside `dir` (the index's folder, resolved), or why not.
// HF's hub cache keeps a snapshot's files as links into the repository's blobs/ folder: those links
// are followed; any other link out of the folder is refused.
Result<std::string> ShardPath(const std::filesystem::path& dir, const std::string& name) {
    namespace fs = std::filesystem;
    const std::string quoted = Quoted(name);
    if (name.empty()) return Fail("a shard's name is empty");
    const fs::path rel(name);
    if (rel.is_absolute()) return Fail("shard " + quoted + " is an absolute path; shards must be in the index's folder");
    for (const auto& part : rel)
        if (part == ".." || part == "." || part.empty())
            return Fail("shard " + quoted + " is not a plain path inside the index's folder (it has '" + part.string() + "')");
    std::error_code ec;
    const fs::path link = dir / rel;
    if (!fs::exists(fs::symlink_status(link, ec))) return Fail("shard " + quoted + " is missing");
    const fs::path real = fs::canonical(link, ec);
    if (ec) return Fail("shard " + quoted + " cannot be resolved (" + ec.message() + "): a broken link?");
    auto inside = [](const fs::path& path, const fs::path& folder) {
        auto p = path.begin();
        for (auto f = folder.begin(); f != folder.end(); ++f, ++p)
            if (p == path.end() || *p != *f) return false;
        return p != path.end();
    };
    const bool hub_blob = dir.parent_path().filename() == "snapshots" && real.parent_path() == dir.parent_path().parent_path() / "blobs";
    if (!inside(real, dir) && !hub_blob)
        return Fail("shard " + quoted + " leads out of the index's folder (to " + Quoted(real.string()) + ")");
    if (!fs::is_regular_file(real, ec)) return Fail("shard " + quoted + " is not a regular file");
    return real.string();
}

// "model-0000k-of-00003.safetensors" for names that count up to their total, else the first and "...".
std::string ShardSummary(const std::vector<std::string>& names) {
    const std::string& first = names.front();
    const size_t of = first.rfind("-of-");
    if (of != std::string::npos && of >= 1) {
        const size_t digits_begin = first.rfind('-', of - 1) + 1;  // npos + 1 == 0
        const size_t width = of - digits_begin;
        bool same = width > 0;
        for (const std::string& n : names)
            same = same && n.size() == first.size() && n.compare(0, digits_begin, first, 0, digits_begin) == 0 &&
                   n.compare(of, std::string::npos, first, of, std::string::npos) == 0;
        if (same) return first.substr(0, digits_begin) + std::string(width - 1, '0') + "k" + first.substr(of);
    }
    return first + (names.size() > 1 ? ", ..." : "");
}

Result<WeightFile> OpenShardedWeights(const std::string& path) {
    namespace fs = std::filesystem;
    auto fail = [&](const std::string& why) -> Error { return Fail(EscapeForMessage(path) + ": " + why); };
    auto index = ParseJsonFile(path, kMaxShardIndexBytes);
    if (!index) return Fail(index.error());
    if (!index->is_object()) return fail("a shard index must be a JSON object, not " + DescribeJson(*index));
    auto map_it = index->find("weight_map");
    if (map_it == index->end()) return fail("no \"weight_map\" in the shard index");
    if (!map_it->is_object()) return fail("\"weight_map\" is " + DescribeJson(*map_it) + ", not an object of tensor name -> shard file");
    if (map_it->size() > kMaxTensors) return fail("the index names more than " + Grouped(kMaxTensors) + " tensors, the most ssaviz reads");
    std::map<std::string, std::string> shard_of;  // tensor -> shard name
    std::map<std::string, std::vector<std::string>> named;  // shard name -> its tensors in the index
    for (const auto& [tensor, shard] : map_it->items()) {
        if (!shard.is_string())
            return fail("\"weight_map\" gives tensor " + Quoted(tensor) + " " + DescribeJson(shard) + ", not a shard file name");
        shard_of[tensor] = shard.get<std::string>();
        auto& list = named[shard.get<std::string>()];
        list.push_back(tensor);
        if (named.size() > kMaxShards) return fail("the index names more than " + std::to_string(kMaxShards) + " shards");
    }
    if (named.empty()) return fail("\"weight_map\" names no tensors");

    std::error_code ec;
    const fs::path dir = fs::canonical(fs::absolute(fs::path(path), ec).parent_path(), ec);
    if (ec) return fail("cannot resolve its folder (" + ec.message() + ")");
    std::vector<std::string> paths;  // every shard's, checked before any is opened
    for (const auto& [name, tensors] : named) {
        auto shard_path = ShardPath(dir, name);
        if (!shard_path)
            return fail(shard_path.error() + " (the index puts " + Quoted(tensors.front()) +
                        (tensors.size() > 1 ? " and " + Grouped(tensors.size() - 1) + " more" : "") + " in it)");
        paths.push_back(*shard_path);
    }
    WeightFile w;
    w.path = path;
    std::map<std::string, std::string> found_in;  // tensor -> the shard that holds it
    for (const auto& [name, tensors] : named) {
        auto shard = OpenWeightsFile(paths[w.shards.size()], /*shard=*/true);
        if (!shard) return fail("shard " + Quoted(name) + ": " + shard.error());
        if (w.format.empty()) w.format = shard->format;
        if (shard->format != w.format)
            return fail("shard " + Quoted(name) + " is " + shard->format + " but shard " + Quoted(w.shards.front()) + " is " + w.format +
                        "; the shards of one model are of one format");
        for (StoredTensor& t : shard->tensors) {
            if (auto [it, fresh] = found_in.emplace(t.name, name); !fresh)
                return fail("tensor " + Quoted(t.name) + " is in shard " + Quoted(it->second) + " and in shard " + Quoted(name) + ": the shards overlap");
            const auto in_index = shard_of.find(t.name);
            if (in_index == shard_of.end())
                return fail("tensor " + Quoted(t.name) + " is in shard " + Quoted(name) + " but not in the index's weight_map");
            if (in_index->second != name)
                return fail("tensor " + Quoted(t.name) + " is in shard " + Quoted(name) + " but the index puts it in " + Quoted(in_index->second));
            if (w.tensors.size() == kMaxTensors) return fail("the shards hold more than " + Grouped(kMaxTensors) + " tensors, the most ssaviz reads");
            w.index[t.name] = w.tensors.size();
            w.tensors.push_back(std::move(t));
        }
        w.files.push_back(shard->files.front());
        w.shards.push_back(name);
    }
    for (const auto& [tensor, shard] : shard_of)
        if (!found_in.count(tensor)) return fail("the index puts tensor " + Quoted(tensor) + " in shard " + Quoted(shard) + ", which does not hold it");
    w.format += ", " + std::to_string(w.shards.size()) + (w.shards.size() == 1 ? " shard " : " shards ") + EscapeForMessage(ShardSummary(w.shards));
    return w;
}

}  // namespace

Result<WeightFile> OpenWeights(const std::string& path) {
    auto w = EndsWith(path, ".index.json") ? OpenShardedWeights(path) : OpenWeightsFile(path, /*shard=*/false);
    if (!w) return w;
    FindPrefixes(&*w);
    return w;
}

Status CheckHintFiles(const ConfigHints& hints) {
    if (!hints.tokenizer_dir.empty()) {
        std::error_code ec;
        if (!std::filesystem::is_directory(hints.tokenizer_dir, ec))
            return Fail("--tokenizer '" + EscapeForMessage(hints.tokenizer_dir) + "'" + (ec ? WhyNotThere(ec.value()) : std::string(" is not a folder")) +
                        ": name the folder that holds tokenizer.json, tokenizer.model, or vocab.json and merges.txt");
    }
    if (!hints.config_file.empty())
        if (Status s = CheckRegularFile(hints.config_file, kMaxJsonFileBytes); !s) return Fail("--config " + s.error());
    return Ok{};
}

Result<ModelFiles> FindModelFiles(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    ModelFiles files;
    auto find_configs = [&files]() -> Status {  // config.json and lit_config.json in files.dir
        for (auto [name, into] : {std::pair{"/config.json", &files.config}, std::pair{"/lit_config.json", &files.lit_config}}) {
            auto at = ModelFileAt(files.dir + name);
            if (!at) return Fail(at.error());
            if (*at) *into = files.dir + name;
        }
        return Ok{};
    };
    if (fs::is_regular_file(path, ec)) {
        files.weights = path;
        files.dir = fs::path(path).parent_path().string();
        if (files.dir.empty()) files.dir = ".";
        if (Status s = find_configs(); !s) return Fail(s.error());
        return files;
    }
    if (!fs::is_directory(path, ec)) {
        if (!fs::exists(path, ec)) return Fail("model '" + EscapeForMessage(path) + "'" + WhyNotThere(ec ? ec.value() : ENOENT));
        // A device, a FIFO or a socket: there, but neither a model folder nor a weights file.
        return Fail("model '" + EscapeForMessage(path) + "' is not a model: neither a folder nor a weights file");
    }
    files.dir = path;
    if (Status s = find_configs(); !s) return Fail(s.error());
    for (const char* name : {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json"}) {
        auto at = ModelFileAt(path + "/" + name);
        if (!at) return Fail(at.error());
        if (*at) {
            files.weights = path + "/" + name;
            return files;
        }
    }
    std::vector<std::string> candidates, lit;  // lit: lit-gpt's names, in order of preference
    bool sharded = false;
    size_t entries = 0;
    for (const auto& entry : fs::directory_iterator(path, ec)) {
        if (++entries > 100000) return Fail(path + ": more than 100,000 entries; not a model folder");
        const std::string name = entry.path().filename().string();
        const std::string ext = entry.path().extension().string();
        sharded = sharded || EndsWith(name, ".index.json");
        if (!(ext == ".safetensors" || ext == ".pt" || ext == ".pth" || ext == ".bin" || ext == ".ckpt")) continue;
        const bool iter = name.size() == 20 && name.compare(0, 5, "iter-") == 0 && EndsWith(name, "-ckpt.pth") &&
                          std::all_of(name.begin() + 5, name.begin() + 11, [](char ch) { return ch >= '0' && ch <= '9'; });
        const bool lit_name = name == "lit_model_finetuned.pth" || name == "lit_model.pth" || iter;
        // A lit-gpt name on a folder or a FIFO is named (the base was taken for the fine-tune); other
        // names that are not files (Lightning's sharded .ckpt folders) are passed over.
        if (!entry.is_regular_file(ec)) {
            if (!lit_name) continue;
            if (auto at = ModelFileAt(entry.path().string()); !at) return Fail(at.error());
            continue;  // gone since the listing
        }
        candidates.push_back(entry.path().string());
        if (lit_name) lit.push_back(name);
    }
    if (sharded)
        return Fail(path + ": sharded weights whose index is not model.safetensors.index.json or pytorch_model.bin.index.json; "
                           "open the index file itself");
    if (!lit.empty()) {
        // The fine-tuned model before the training run's newest checkpoint before the base model it started from.
        auto rank = [](const std::string& n) { return n == "lit_model_finetuned.pth" ? 0 : n == "lit_model.pth" ? 2 : 1; };
        std::sort(lit.begin(), lit.end(), [&](const std::string& a, const std::string& b) {
            return rank(a) != rank(b) ? rank(a) < rank(b) : a > b;  // iter-: the highest number first
        });
        files.weights = path + "/" + lit[0];
        if (candidates.size() > 1) {
            std::sort(candidates.begin(), candidates.end());
            std::string others;
            size_t listed = 0;
            for (const std::string& c : candidates) {
                const std::string name = fs::path(c).filename().string();
                if (name == lit[0]) continue;
                if (listed++ == 3) { others += ", ..."; break; }
                others += (others.empty() ? "" : ", ") + EscapeForMessage(name, 80);
            }
            files.choice = "took " + lit[0] + " of " + std::to_string(candidates.size()) + " checkpoint files (also " + others +
                           "); open another one by its path";
        }
        return files;
    }
    if (candidates.size() == 1) {
        files.weights = candidates[0];
        return files;
    }
    if (candidates.empty())
        return Fail(EscapeForMessage(path) + ": no weights (model.safetensors, pytorch_model.bin, or a .pt / .pth / .bin / .ckpt checkpoint)");
    std::sort(candidates.begin(), candidates.end());
    return Fail(EscapeForMessage(path) + ": " + std::to_string(candidates.size()) + " weight files (" + EscapeForMessage(candidates[0], 200) +
                ", " + EscapeForMessage(candidates[1], 200) + (candidates.size() > 2 ? ", ..." : "") + "); open one of them directly");
}

Result<TemperatureForm> ParseFormSpec(const std::string& spec) {
    std::vector<std::string> parts;
    std::stringstream in(spec);
    for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
    const std::string usage = "'" + EscapeForMessage(spec, 40) + "' is not POSITION[,TOKEN[,COMBINE]] (e.g. sigmoid,shared,sum or none)";
    if (parts.empty() || parts.size() > 3) return Fail(usage);
    TemperatureForm f;
    const std::string& pos = parts[0];
    if (pos == "sigmoid") f.position = PositionForm::Sigmoid;
    else if (pos == "exp_exp") f.position = PositionForm::ExpExp;
    else if (pos == "linear") f.position = PositionForm::Linear;
    else if (pos != "none" && pos != "null") return Fail(usage + ": position '" + EscapeForMessage(pos, 40) + "' is not sigmoid, exp_exp, linear or none");
    if (parts.size() > 1) {
        if (parts[1] == "shared") f.token = TokenForm::Shared;
        else if (parts[1] == "feature") f.token = TokenForm::Feature;
        else if (parts[1] != "none" && parts[1] != "null") return Fail(usage + ": token '" + EscapeForMessage(parts[1], 40) + "' is not shared, feature or none");
    }
    if (parts.size() > 2) {
        if (parts[2] == "product") f.combine = Combine::Product;
        else if (parts[2] != "sum") return Fail(usage + ": combine '" + EscapeForMessage(parts[2], 40) + "' is not sum or product");
    }
    return f;
}

std::string FormSpec(const TemperatureForm& f) {
    if (!f.Active()) return "none";
    std::string s = f.position == PositionForm::None ? "none" : ToString(f.position);
    s += std::string(",") + (f.token == TokenForm::None ? "none" : ToString(f.token));
    return s + "," + ToString(f.combine);
}

std::optional<Format> DetectFormat(const WeightFile& w) {
    // Formats whose first layer's attention projection is in the file; GPT-2's and nanoGPT's share
    // the name, and the orientation that fits the embedding's width tells them apart.
    std::optional<Format> first;
    for (const FormatInfo& f : Formats()) {
        const StoredTensor* t = w.Find(FirstLayerName(f.format, Role::AttnQkv) + ".weight");
        if (!t) continue;
        if (!first) first = f.format;
        const StoredTensor* wte = w.Find(FirstLayerName(f.format, Role::TokenEmbedding) + ".weight");
        if (!wte || wte->shape.size() != 2 || t->shape.size() != 2) return first;
        const int64_t E = wte->shape[1];
        const bool fits = f.linear ? t->shape[1] == E && t->shape[0] != E : t->shape[0] == E;
        if (fits) return f.format;
    }
    return first;
}

std::string FirstLayerName(Format format, Role role) {
    const auto names = NamesOf(format, role, MlpKind::Gelu);
    return names.empty() ? std::string() : LayerName(names.front().name, 0);
}

ShapeSource ShapeSourceOf(const ModelFiles& files, const WeightFile& weights, const ConfigHints& hints) {
    const std::optional<Format> format = DetectFormat(weights);
    if (format == Format::Lit) return ShapeSource::LitConfig;
    // nanoGPT's names beside a lit_config.json: the official GPT-2 code's, nanoGPT's GPTConfig (HF's
    // names beside one are lit-gpt's converted weights: its lit_config.json is not their config).
    if (!files.config.empty() || !hints.config_file.empty() || (format == Format::NanoGpt && !files.lit_config.empty()))
        return ShapeSource::ConfigJson;
    return ShapeSource::Tensors;
}

// GPT-2's and nanoGPT's names (the formats a checkpoint without a config comes in) by role.
Result<InferredConfig> InferConfig(const WeightFile& w, const ConfigHints& hints) {
    InferredConfig out;
    ModelConfig& c = out.config;
    const FormatInfo& gpt2 = GetFormat(Format::Gpt2);
    auto name = [&](Role role, int layer = 0) {
        const auto names = NamesOf(Format::Gpt2, role, MlpKind::Gelu);
        return LayerName(names.front().name, layer) + ".weight";
    };
    auto ssa = [&](Role role, const char* suffix = "") { return LayerName(gpt2.attention, 0) + "." + SsaName(role) + suffix; };
    const std::string beta_name = LayerName(gpt2.attention, 0) + "." + kOfficialBeta;
    const StoredTensor* wte = w.Find(name(Role::TokenEmbedding));
    const StoredTensor* wpe = w.Find(name(Role::PositionEmbedding));
    if (!wte || wte->shape.size() != 2) return Fail("no 2-d token embedding '" + name(Role::TokenEmbedding) + "' to infer the model's shape from");
    if (!wpe || wpe->shape.size() != 2 || wpe->shape[1] != wte->shape[1])
        return Fail("no position embedding '" + name(Role::PositionEmbedding) + "' of shape [n_positions, " + std::to_string(wte->shape[1]) + "]");
    const int64_t V = wte->shape[0], E = wte->shape[1], P = wpe->shape[0];
    if (V < 1 || E < 1 || P < 1 || V > (1 << 24) || E > (1 << 24) || P > (1 << 24))
        return Fail("embedding shapes " + ShapeString(wte->shape) + " / " + ShapeString(wpe->shape) + " are out of range");
    c.vocab_size = static_cast<int>(V);
    c.n_embd = static_cast<int>(E);
    c.n_positions = static_cast<int>(P);
    while (c.n_layer < 1024 && w.Find(name(Role::AttnNorm, c.n_layer))) ++c.n_layer;
    if (c.n_layer == 0) return Fail("no layers: '" + name(Role::AttnNorm) + "' is missing");
    const bool linear = DetectFormat(w) == Format::NanoGpt;
    // nanoGPT's bias = False: no bias in any linear layer or LayerNorm.
    const std::string norm_bias = LayerName(NamesOf(Format::Gpt2, Role::AttnNorm, MlpKind::Gelu).front().name, 0) + ".bias";
    if (!w.Find(norm_bias)) {
        c.bias = c.norm_bias = false;
        out.notes.push_back("no biases ('" + norm_bias + "' is absent): nanoGPT's bias = False");
    }

    auto arg = [&](const char* key) -> int64_t { auto it = w.model_args.find(key); return it == w.model_args.end() ? 0 : it->second; };
    for (auto [key, value] : {std::pair<const char*, int64_t>{"n_layer", c.n_layer}, {"n_embd", E}, {"block_size", P}})
        if (arg(key) && arg(key) != value)
            return Fail(std::string("the checkpoint's model_args say ") + key + " = " + std::to_string(arg(key)) + " but the tensors say " + std::to_string(value));

    // n_head: the flag, nanoGPT's model_args, a per-head SSA parameter's length, or GPT-2's head size 64.
    int64_t heads = hints.n_head;
    std::string why = "given";
    if (!heads && arg("n_head")) { heads = arg("n_head"); why = "from the checkpoint's model_args"; }
    for (const std::string& per_head : {ssa(Role::QPos), beta_name, ssa(Role::VPos), ssa(Role::QTok, ".bias"), ssa(Role::VTok, ".bias")}) {
        const StoredTensor* t = w.Find(per_head);
        if (!heads && t && t->shape.size() == 1 && t->shape[0] > 1) { heads = t->shape[0]; why = "from the length of " + per_head; }
    }
    if (!heads && E % 64 == 0) { heads = E / 64; why = "assuming GPT-2's head size of 64; pass --n-head N if that is wrong"; }
    if (!heads) return Fail("cannot tell n_head from the tensors' shapes (n_embd " + std::to_string(E) + "); pass --n-head N");
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
        const std::string pos_name = ssa(query ? Role::QPos : Role::VPos);
        const StoredTensor* pos = w.Find(pos_name);
        const StoredTensor* beta = query ? w.Find(beta_name) : nullptr;
        const StoredTensor* tok = w.Find(ssa(query ? Role::QTok : Role::VTok, ".weight"));
        if (!pos && !beta && !tok) continue;
        const std::string ask = "; no config.json says which, so pass " + flag + " POSITION,TOKEN[,COMBINE] (e.g. sigmoid,shared,sum)";
        if (pos) return Fail("tau_" + side + " has a position parameter (" + pos_name + ") whose form (sigmoid, exp_exp or linear) the shapes cannot tell" + ask);
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
