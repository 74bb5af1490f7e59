#include "model/text/sentencepiece.h"

#include "model/io/files.h"
#include "model/text/utf8.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string_view>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define SSAVIZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SSAVIZ_ASAN 1
#endif
#endif

namespace model {
namespace {

// The C interface of libssaviz_spm.so (model/text/spm_shim.cpp), loaded on first use.
using PieceFn = void (*)(void*, int, unsigned, unsigned, int, const char*, size_t);
using BytesFn = void (*)(void*, const char*, size_t);
struct Shim {
    void* (*load)(const char*, size_t, char*, size_t) = nullptr;
    void (*free)(void*) = nullptr;
    int (*piece_size)(void*) = nullptr;
    int (*encode)(void*, const char*, size_t, PieceFn, void*) = nullptr;
    void (*decode)(void*, const int*, size_t, BytesFn, void*) = nullptr;
    int (*train)(const char* const*, size_t, const char* const*, const char* const*, size_t, BytesFn, void*, char*, size_t) = nullptr;
    std::string error;  // why it could not be loaded
};

const Shim& GetShim() {
    static Shim shim;
    static std::once_flag once;
    std::call_once(once, [] {
        namespace fs = std::filesystem;
        std::vector<std::string> candidates;
        if (const char* env = std::getenv("SSAVIZ_SPM_LIBRARY"); env && *env) candidates.push_back(env);
        if (const std::string dir = ExecutableDir(); !dir.empty()) candidates.push_back(dir + "/libssaviz_spm.so");
#ifdef SSAVIZ_SPM_BUILD_PATH
        candidates.push_back(SSAVIZ_SPM_BUILD_PATH);
#endif
        void* lib = nullptr;
        std::string tried;
        std::error_code ec;
        for (const auto& path : candidates) {
            if (!fs::exists(path, ec)) {
                tried += (tried.empty() ? "" : ", ") + path;
                continue;
            }
            // Local and deep-bound: SentencePiece's bundled protobuf stays out of LibTorch's way.
            // AddressSanitizer aborts on RTLD_DEEPBIND (google/sanitizers#611), so sanitizer builds
            // isolate the shim in a link namespace of its own instead (it is built without ASan).
#ifdef SSAVIZ_ASAN
            lib = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
#else
            lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
#endif
            if (lib) break;
            tried += (tried.empty() ? "" : ", ") + path + " (" + dlerror() + ")";
        }
        if (!lib) {
            shim.error = "SentencePiece support (libssaviz_spm.so) is missing; looked for " + tried;
            return;
        }
        auto get = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(lib, name)); };
        get(shim.load, "ssaviz_spm_load");
        get(shim.free, "ssaviz_spm_free");
        get(shim.piece_size, "ssaviz_spm_piece_size");
        get(shim.encode, "ssaviz_spm_encode");
        get(shim.decode, "ssaviz_spm_decode");
        get(shim.train, "ssaviz_spm_train");
        if (!shim.load || !shim.free || !shim.piece_size || !shim.encode || !shim.decode || !shim.train)
            shim.error = "libssaviz_spm.so lacks its functions (a stale build?)";
    });
    return shim;
}

// "<0xE2>" -> 0xE2: the bytes of characters the vocabulary lacks.
bool ParseBytePiece(const char* piece, size_t size, unsigned char* byte) {
    if (size != 6 || std::string_view(piece, 3) != "<0x" || piece[5] != '>') return false;
    *byte = static_cast<unsigned char>(std::stoi(std::string(piece + 3, 2), nullptr, 16));
    return true;
}

class SentencePieceTokenizer : public Tokenizer {
public:
    SentencePieceTokenizer(const Shim& shim, void* handle, uint64_t hash, std::vector<int16_t> byte_pieces)
        : m_shim(shim), m_handle(handle), m_hash(hash), m_byte_pieces(std::move(byte_pieces)) {}
    ~SentencePieceTokenizer() override { m_shim.free(m_handle); }

    Result<Tokenization> Encode(std::string_view text) const override {
        if (size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos)
            return Fail("text is not valid UTF-8 at byte " + std::to_string(bad));
        struct Context {
            std::string_view text;
            Tokenization out;
            size_t cursor = 0;  // end of the previous piece: byte pieces take one byte each from here
        } ctx{text, {}};
        if (text.empty()) return ctx.out;
        m_shim.encode(m_handle, text.data(), text.size(),
                      [](void* p, int id, unsigned b, unsigned e, int is_byte, const char* piece, size_t size) {
                          auto& c = *static_cast<Context*>(p);
                          unsigned char byte = 0;
                          c.out.ids.push_back(id);
                          if (is_byte && ParseBytePiece(piece, size, &byte)) {
                              // SentencePiece gives a character's byte pieces one shared range; split it.
                              const size_t at = std::min(c.cursor, c.text.size());
                              c.out.pieces.push_back(std::string(1, static_cast<char>(byte)));
                              c.out.offsets.emplace_back(at, std::min(at + 1, c.text.size()));
                              c.cursor = at + 1;
                              return;
                          }
                          const size_t begin = std::min<size_t>(b, c.text.size());
                          const size_t end = std::max(begin, std::min<size_t>(e, c.text.size()));
                          c.out.pieces.push_back(std::string(c.text.substr(begin, end - begin)));
                          c.out.offsets.emplace_back(begin, end);
                          c.cursor = end;
                      },
                      &ctx);
        return ctx.out;
    }

    Result<std::string> Decode(const std::vector<int32_t>& ids) const override {
        std::vector<int> valid;
        const int size = m_shim.piece_size(m_handle);
        for (int32_t id : ids)
            if (id >= 0 && id < size) valid.push_back(id);
        std::string text;
        m_shim.decode(m_handle, valid.data(), valid.size(),
                      [](void* p, const char* bytes, size_t n) { static_cast<std::string*>(p)->assign(bytes, n); }, &text);
        return text;
    }

    size_t VocabSize() const override { return static_cast<size_t>(m_shim.piece_size(m_handle)); }
    std::string Kind() const override { return "sentencepiece"; }
    uint64_t ContentHash() const override { return m_hash; }
    int BytePiece(int32_t id) const override {
        return id >= 0 && static_cast<size_t>(id) < m_byte_pieces.size() ? m_byte_pieces[static_cast<size_t>(id)] : -1;
    }

private:
    const Shim& m_shim;
    void* m_handle;
    uint64_t m_hash;
    std::vector<int16_t> m_byte_pieces;  // [V] each id's byte where it is a byte piece, else -1
};

// ---- The normalizer's character map, checked before libsentencepiece sees it ----------------
// libsentencepiece trusts a model file's precompiled character map: a hostile one makes it read
// outside the map while it encodes (a crash in Debian's 0.1.97). So the map is walked here first,
// the way the library walks it. Its layout: a little-endian uint32 with the trie's size in bytes,
// a darts-clone double-array trie (uint32 units), then the replacement strings, each ending in NUL.

constexpr size_t kMaxCharsMapBytes = size_t{4} << 20;  // the largest built-in map (nmt_nfkc_cf) is ~0.25 MB

// One protobuf field of a message: length-delimited fields give their bytes.
struct ProtoField {
    uint64_t number = 0;
    int wire_type = 0;
    std::string_view bytes;
};

bool ReadVarint(std::string_view* in, uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64 && !in->empty(); shift += 7) {
        const uint8_t b = static_cast<uint8_t>(in->front());
        in->remove_prefix(1);
        *value |= static_cast<uint64_t>(b & 0x7F) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

// The fields of one protobuf message, in order; false when it is not well formed.
bool ProtoFields(std::string_view message, std::vector<ProtoField>* fields) {
    while (!message.empty()) {
        uint64_t tag = 0, length = 0;
        if (!ReadVarint(&message, &tag)) return false;
        ProtoField f{tag >> 3, static_cast<int>(tag & 7), {}};
        const std::string_view value = message;  // a number's bytes as they are stored
        switch (f.wire_type) {
            case 0: if (!ReadVarint(&message, &length)) return false; f.bytes = value.substr(0, value.size() - message.size()); break;
            case 1: if (message.size() < 8) return false; f.bytes = message.substr(0, 8); message.remove_prefix(8); break;
            case 5: if (message.size() < 4) return false; f.bytes = message.substr(0, 4); message.remove_prefix(4); break;
            case 2:
                if (!ReadVarint(&message, &length) || length > message.size()) return false;
                f.bytes = message.substr(0, length);
                message.remove_prefix(length);
                break;
            default: return false;  // groups (3, 4) are not used by SentencePiece models
        }
        fields->push_back(f);
    }
    return true;
}

uint32_t Unit(std::string_view trie, size_t index) {
    uint32_t u;
    std::memcpy(&u, trie.data() + index * 4, 4);
    return u;  // x86 and ARM are little-endian, as the file is
}

// darts-clone's unit fields (darts.h).
bool HasLeaf(uint32_t u) { return (u >> 8) & 1; }
uint32_t Value(uint32_t u) { return u & ((1U << 31) - 1); }
uint32_t Label(uint32_t u) { return u & ((1U << 31) | 0xFF); }
uint32_t Offset(uint32_t u) { return (u >> 10) << ((u & (1U << 9)) >> 6); }

Status CheckCharsMap(std::string_view blob) {
    if (blob.empty()) return Ok{};  // none: the spec's named rule, built into the library, applies
    if (blob.size() > kMaxCharsMapBytes)
        return Fail("its normalizer's character map is " + FormatBytes(blob.size()) + ", more than the " + FormatBytes(kMaxCharsMapBytes) + " allowed");
    uint32_t trie_bytes = 0;
    if (blob.size() < 4) return Fail("its normalizer's character map is shorter than its header");
    std::memcpy(&trie_bytes, blob.data(), 4);
    if (trie_bytes < 4 || trie_bytes > blob.size() - 4) return Fail("its normalizer's character map has a trie larger than the map");
    const std::string_view trie = blob.substr(4, trie_bytes), strings = blob.substr(4 + trie_bytes);
    const size_t units = trie.size() / 4;
    // A replacement at offset v is read up to its NUL: there must be one at or after v.
    const size_t last_nul = strings.rfind('\0');
    // Every node the search can reach: from each, the search reads the unit at base ^ byte for any
    // byte, and follows it when its label is that byte.
    std::vector<uint8_t> seen(units, 0);
    std::vector<size_t> bases = {Offset(Unit(trie, 0))};
    while (!bases.empty()) {
        const size_t base = bases.back();
        bases.pop_back();
        if ((base | 0xFF) >= units) return Fail("its normalizer's character map leads outside its trie");
        for (uint32_t c = 0; c < 256; ++c) {
            const size_t at = base ^ c;
            const uint32_t unit = Unit(trie, at);
            if (Label(unit) != c) continue;
            const size_t next = at ^ Offset(unit);
            if (next >= units) return Fail("its normalizer's character map leads outside its trie");
            if (HasLeaf(unit) && (last_nul == std::string_view::npos || Value(Unit(trie, next)) > last_nul))
                return Fail("its normalizer's character map points outside its replacement strings");
            if (!seen[next]) {
                seen[next] = 1;
                bases.push_back(next);
            }
        }
    }
    return Ok{};
}

// The character maps of a serialized ModelProto: its normalizer_spec (3) and denormalizer_spec
// (5), field precompiled_charsmap (2) of each.
Status CheckNormalizers(std::string_view model) {
    std::vector<ProtoField> fields;
    if (!ProtoFields(model, &fields)) return Fail("not a SentencePiece model (malformed protobuf)");
    for (const ProtoField& f : fields) {
        if ((f.number != 3 && f.number != 5) || f.wire_type != 2) continue;
        std::vector<ProtoField> spec;
        if (!ProtoFields(f.bytes, &spec)) return Fail("not a SentencePiece model (malformed normalizer)");
        for (const ProtoField& g : spec)
            if (g.number == 2 && g.wire_type == 2)
                if (auto s = CheckCharsMap(g.bytes); !s) return s;
    }
    return Ok{};
}

// ContentHash of a serialized ModelProto (checked well formed by CheckNormalizers): its pieces (1:
// piece, score, type), normalizer (3) and denormalizer (5), and of its trainer_spec (2) only what
// encoding reads: model_type (3), treat_whitespace_as_suffix (24) and byte_fallback (35). Training
// inputs and options that only shaped the pieces do not count.
uint64_t ModelHash(std::string_view model) {
    std::vector<ProtoField> fields;
    ProtoFields(model, &fields);
    uint64_t hash = kHashSeed;
    auto add = [&hash](const ProtoField& f) {
        const uint64_t head[2] = {f.number, f.bytes.size()};
        hash = HashBytes(f.bytes, HashBytes(std::string_view(reinterpret_cast<const char*>(head), sizeof head), hash));
    };
    for (const ProtoField& f : fields) {
        if (f.number == 1 || f.number == 3 || f.number == 5) add(f);
        if (f.number != 2 || f.wire_type != 2) continue;
        std::vector<ProtoField> spec;
        ProtoFields(f.bytes, &spec);
        for (const ProtoField& g : spec)
            if (g.number == 3 || g.number == 24 || g.number == 35) add(g);
    }
    return hash;
}

// Each id's byte where it is a byte-fallback piece (type BYTE, spelt "<0xNN>"), else -1: the
// model's pieces (ModelProto field 1: piece 1, type 3) in id order.
std::vector<int16_t> BytePieces(std::string_view model) {
    constexpr uint64_t kByteType = 6;  // sentencepiece_model.proto's SentencePiece.Type.BYTE
    auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
    std::vector<ProtoField> fields, piece;
    ProtoFields(model, &fields);
    std::vector<int16_t> bytes;
    for (const ProtoField& f : fields) {
        if (f.number != 1 || f.wire_type != 2) continue;
        piece.clear();
        ProtoFields(f.bytes, &piece);
        std::string_view text;
        uint64_t type = 1;  // NORMAL, the default
        for (const ProtoField& g : piece) {
            std::string_view value = g.bytes;
            if (g.number == 1 && g.wire_type == 2) text = g.bytes;
            else if (g.number == 3 && g.wire_type == 0 && !ReadVarint(&value, &type)) type = 1;
        }
        const bool spelt = text.size() == 6 && text.substr(0, 3) == "<0x" && text[5] == '>' && hex(text[3]) >= 0 && hex(text[4]) >= 0;
        bytes.push_back(type == kByteType && spelt ? static_cast<int16_t>(hex(text[3]) * 16 + hex(text[4])) : int16_t{-1});
    }
    return bytes;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> LoadSentencePieceTokenizer(const std::string& path) {
    const Shim& shim = GetShim();
    if (!shim.error.empty()) return Fail(path + ": " + shim.error);
    auto bytes = ReadFile(path, kMaxTokenizerFileBytes);
    if (!bytes) return Fail(bytes.error());
    if (auto s = CheckNormalizers(*bytes); !s) return Fail(EscapeForMessage(path) + ": " + s.error());
    char error[256] = "";
    void* handle = shim.load(bytes->data(), bytes->size(), error, sizeof error);
    if (!handle) return Fail(path + ": not a SentencePiece model (" + std::string(error) + ")");
    auto tokenizer = std::make_unique<SentencePieceTokenizer>(shim, handle, ModelHash(*bytes), BytePieces(*bytes));
    if (tokenizer->VocabSize() == 0) return Fail(path + ": SentencePiece model has no pieces");
    return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

Status TrainSentencePiece(const std::vector<std::string>& lines, const SentencePieceTraining& options,
                          const std::string& path) {
    const Shim& shim = GetShim();
    if (!shim.error.empty()) return Fail(shim.error);
    const bool word = options.model_type == "word";
    std::string symbols;
    for (const auto& s : options.user_symbols) symbols += (symbols.empty() ? "" : ",") + s;
    std::vector<std::pair<std::string, std::string>> args = {
        {"model_type", options.model_type},
        {"vocab_size", std::to_string(options.vocab_size)},
        {"normalization_rule_name", options.normalization},
        {"remove_extra_whitespaces", "false"},
        {"byte_fallback", word ? "false" : "true"},
        {"character_coverage", "0.9995"},
        {"split_digits", word ? "false" : "true"},
        {"hard_vocab_limit", word ? "false" : "true"},
        {"num_threads", "1"},  // deterministic
        {"max_sentence_length", "16384"},
        {"minloglevel", "2"},
    };
    if (!symbols.empty()) args.emplace_back("user_defined_symbols", symbols);
    // SentencePiece learns from lines of at most max_sentence_length bytes (longer ones it skips):
    // a corpus without one is said here, in words, rather than as its assertion.
    if (std::all_of(lines.begin(), lines.end(), [](const std::string& l) { return l.find_first_not_of(" \t\r\f\v") == std::string::npos; }))
        return Fail("the corpus holds no text to learn a tokenizer from (only blank lines)");
    if (std::none_of(lines.begin(), lines.end(), [](const std::string& l) { return !l.empty() && l.size() <= 16384; }))
        return Fail("the tokenizer learns from lines of at most 16,384 bytes, and the corpus has none (break the text into lines)");
    std::vector<const char*> keys, values, line_ptrs;
    for (const auto& [k, v] : args) keys.push_back(k.c_str()), values.push_back(v.c_str());
    // Only the lines it learns from: a longer one it skips only once it has copied and normalised it
    // (a corpus of one 50 MB line held 1 GB here for a tokenizer that never saw it).
    for (const auto& l : lines)
        if (l.size() <= 16384) line_ptrs.push_back(l.c_str());
    std::string model;
    char error[512] = "";
    if (!shim.train(line_ptrs.data(), line_ptrs.size(), keys.data(), values.data(), keys.size(),
                    [](void* p, const char* bytes, size_t n) { static_cast<std::string*>(p)->assign(bytes, n); }, &model, error,
                    sizeof error)) {
        // Its one error a user's flag causes, in the flag's words (its own names --character_coverage,
        // which is not ssaviz's).
        unsigned long asked = 0, needed = 0;
        const char* chars = std::strstr(error, "smaller than required_chars. ");
        if (chars && std::sscanf(chars + std::strlen("smaller than required_chars. "), "%lu vs %lu", &asked, &needed) == 2)
            return Fail("--vocab " + std::to_string(asked) + " is smaller than the " + std::to_string(needed) +
                        " characters of the corpus the tokenizer keeps: give --vocab of at least " + std::to_string(needed) +
                        ", with room for merges");
        // And too many pieces for a small corpus ("Vocabulary size too high (300). Please set it to a value <= 262.").
        const char* high = std::strstr(error, "Vocabulary size too high (");
        if (high && std::sscanf(high + std::strlen("Vocabulary size too high ("), "%lu). Please set it to a value <= %lu", &asked, &needed) == 2)
            return Fail("--vocab " + std::to_string(asked) + " is more pieces than this corpus gives the tokenizer (at most " +
                        std::to_string(needed) + "): give --vocab of at most " + std::to_string(needed) + ", or more text");
        return Fail("training the SentencePiece tokenizer failed: " + EscapeForMessage(error));
    }
    std::ofstream out(path, std::ios::binary);
    if (!out.write(model.data(), static_cast<std::streamsize>(model.size()))) return Fail(path + ": cannot write");
    return Ok{};
}

}  // namespace model
