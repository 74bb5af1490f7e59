// GPT-2 byte-level BPE: the pre-tokenizer regex, the byte <-> unicode table, BPE merging and the
// loaders for vocab.json + merges.txt and HF tokenizer.json. Behaviour follows OpenAI's encoder.py
// as ported to JavaScript by the npm package gpt-3-encoder, our test reference.
#include "model/text/tokenizer.h"
#include "model/io/files.h"
#include "model/text/sentencepiece.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <utility>

namespace model {
namespace {

// ---------------------------------------------------------------------------------------------
// UTF-8

// Length of the strictly valid UTF-8 sequence starting at text[i] (and its code point), or 0 when
// the bytes there are not one: overlongs, surrogates, > U+10FFFF and truncated sequences fail.
size_t DecodeUtf8(std::string_view text, size_t i, uint32_t* code_point) {
    const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
    const size_t left = text.size() - i;
    const uint8_t b0 = byte(i);
    if (b0 < 0x80) {
        *code_point = b0;
        return 1;
    }
    size_t length = 0;
    uint8_t second_min = 0x80, second_max = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        length = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        length = 3;
        if (b0 == 0xE0) second_min = 0xA0;  // overlong
        if (b0 == 0xED) second_max = 0x9F;  // surrogates U+D800..DFFF
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        length = 4;
        if (b0 == 0xF0) second_min = 0x90;  // overlong
        if (b0 == 0xF4) second_max = 0x8F;  // > U+10FFFF
    } else {
        return 0;  // continuation byte, C0/C1 (always overlong) or F5..FF
    }
    if (left < length) return 0;
    if (byte(i + 1) < second_min || byte(i + 1) > second_max) return 0;
    uint32_t cp = b0 & (0xFF >> (length + 1));
    for (size_t k = 1; k < length; ++k) {
        const uint8_t b = byte(i + k);
        if ((b & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b & 0x3F);
    }
    *code_point = cp;
    return length;
}

void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
        out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

// ---------------------------------------------------------------------------------------------
// GPT-2's bytes_to_unicode(): vocab.json and merges.txt spell each byte as a visible character.
// Printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 bytes
// (controls, space, 0x7F..0xA0, 0xAD) become U+0100, U+0101, ... in byte order.

constexpr uint32_t kByteCodePointEnd = 256 + 68;

struct ByteTable {
    uint32_t byte_to_code_point[256];
    int16_t code_point_to_byte[kByteCodePointEnd];  // -1: not a byte's character

    ByteTable() {
        const auto printable = [](int b) {
            return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        };
        std::fill(std::begin(code_point_to_byte), std::end(code_point_to_byte), int16_t{-1});
        uint32_t next_shifted = 256;
        for (int b = 0; b < 256; ++b) {
            byte_to_code_point[b] = printable(b) ? static_cast<uint32_t>(b) : next_shifted++;
            code_point_to_byte[byte_to_code_point[b]] = static_cast<int16_t>(b);
        }
        assert(next_shifted == kByteCodePointEnd);
    }
};

const ByteTable& Bytes() {
    static const ByteTable table;
    return table;
}

// "Ġhello" -> " hello". False when a character is not one of the table's 256.
bool ByteLevelToBytes(std::string_view symbol, std::string* out) {
    out->clear();
    for (size_t i = 0; i < symbol.size();) {
        uint32_t cp = 0;
        const size_t length = DecodeUtf8(symbol, i, &cp);
        if (length == 0 || cp >= kByteCodePointEnd || Bytes().code_point_to_byte[cp] < 0) return false;
        out->push_back(static_cast<char>(Bytes().code_point_to_byte[cp]));
        i += length;
    }
    return true;
}

// " hello" -> "Ġhello", the spelling used in vocab.json (for error messages).
std::string BytesToByteLevel(std::string_view bytes) {
    std::string out;
    for (char c : bytes) AppendUtf8(Bytes().byte_to_code_point[static_cast<uint8_t>(c)], &out);
    return out;
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizer. GPT-2's pattern is
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// Our reference runs it in JavaScript, whose \s is exactly the class below (WhiteSpace plus
// LineTerminator in ECMA-262); PCRE2's \s differs (it includes U+0085 but not U+FEFF), so the
// class is spelled out. \p{L} and \p{N} come from PCRE2's Unicode tables, which may be a few
// Unicode versions older than Node's: letters or digits assigned since then count as "other".

constexpr const char* kJsSpace =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}\\x{FEFF}";

std::string Gpt2Pattern() {
    const std::string space = std::string("[") + kJsSpace + "]";
    const std::string not_space = std::string("[^") + kJsSpace + "]";
    return "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" + std::string(kJsSpace) +
           "\\p{L}\\p{N}]+|" + space + "+(?!" + not_space + ")|" + space + "+";
}

std::string Pcre2Message(int code) {
    PCRE2_UCHAR buffer[256];
    if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) return "error " + std::to_string(code);
    return reinterpret_cast<const char*>(buffer);
}

struct Pcre2CodeDeleter {
    void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
struct Pcre2MatchDataDeleter {
    void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
using Pcre2Code = std::unique_ptr<pcre2_code, Pcre2CodeDeleter>;
using Pcre2MatchData = std::unique_ptr<pcre2_match_data, Pcre2MatchDataDeleter>;

Result<Pcre2Code> CompileGpt2Pattern() {
    const std::string pattern = Gpt2Pattern();
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    Pcre2Code code(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                 PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr));
    if (!code) {
        return Fail("GPT-2 pre-tokenizer regex does not compile at offset " + std::to_string(error_offset) +
                    ": " + Pcre2Message(error_code));
    }
    // JIT is only a speed-up: without it (not built in, or no executable memory) pcre2_match
    // interprets the same pattern.
    pcre2_jit_compile(code.get(), PCRE2_JIT_COMPLETE);
    return code;
}

// ---------------------------------------------------------------------------------------------
// Files

// vocab.json and tokenizer.json spell tokens and merge symbols in byte-level characters.
struct BpeFiles {
    std::vector<std::pair<std::string, int32_t>> vocab;        // [V] (token, id)
    std::vector<std::pair<std::string, std::string>> merges;   // [M] in rank order
    std::string vocab_source;                                   // file names for error messages
    std::string merges_source;
};

constexpr int32_t kMaxTokenId = 1 << 24;

Status ReadVocab(const nlohmann::json& object, const std::string& source, BpeFiles* files) {
    if (!object.is_object()) return Fail(source + ": not a JSON object");
    files->vocab.reserve(object.size());
    for (const auto& [token, id] : object.items()) {
        // Ids index dense tables, so absurd ones are rejected rather than allocated for.
        const bool valid = id.is_number_unsigned() ? id.get<uint64_t>() < kMaxTokenId
                                                   : id.is_number_integer() && id.get<int64_t>() >= 0 &&
                                                         id.get<int64_t>() < int64_t{kMaxTokenId};
        if (!valid) {
            return Fail(source + ": the id of token '" + EscapeForMessage(token) + "' is not an integer in [0, " +
                        std::to_string(kMaxTokenId) + ")");
        }
        files->vocab.emplace_back(token, static_cast<int32_t>(id.get<int64_t>()));
    }
    return Ok{};
}

// "a b" -> {a, b}; false unless there are exactly two symbols separated by spaces or tabs.
bool SplitMerge(std::string_view line, std::pair<std::string, std::string>* merge) {
    std::string_view parts[2];
    size_t count = 0;
    size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
        if (i == line.size()) break;
        const size_t start = i;
        while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
        if (count == 2) return false;
        parts[count++] = line.substr(start, i - start);
    }
    if (count != 2) return false;
    *merge = {std::string(parts[0]), std::string(parts[1])};
    return true;
}

Status ReadMergesText(std::string_view text, const std::string& source, BpeFiles* files) {
    size_t line_number = 0;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(start, end - start);
        start = end + 1;
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line_number == 1 && line.substr(0, 8) == "#version") continue;
        if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
        std::pair<std::string, std::string> merge;
        if (!SplitMerge(line, &merge)) {
            return Fail(source + " line " + std::to_string(line_number) + ": expected two symbols");
        }
        files->merges.push_back(std::move(merge));
    }
    return Ok{};
}

Result<BpeFiles> ReadHfTokenizerJson(const std::string& path) {
    auto root = ParseJsonFile(path, kMaxTokenizerFileBytes);
    if (!root) return Fail(root.error());
    if (!root->is_object()) return Fail(path + ": not a JSON object");
    const auto model = root->find("model");
    if (model == root->end() || !model->is_object()) return Fail(path + ": no \"model\" object");
    const auto type = model->find("type");
    if (type != model->end() && !(type->is_string() && type->get<std::string>() == "BPE")) {
        return Fail(path + ": model type " + DescribeJson(*type) + " is not supported (only \"BPE\")");
    }
    BpeFiles files;
    files.vocab_source = path + " model.vocab";
    files.merges_source = path + " model.merges";
    const auto vocab = model->find("vocab");
    if (vocab == model->end()) return Fail(path + ": no model.vocab");
    if (Status status = ReadVocab(*vocab, files.vocab_source, &files); !status) return Fail(status.error());

    const auto merges = model->find("merges");
    if (merges == model->end() || !merges->is_array()) return Fail(path + ": model.merges is not an array");
    files.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
        const nlohmann::json& entry = (*merges)[i];
        std::pair<std::string, std::string> merge;
        bool ok = false;
        if (entry.is_string()) {  // older files: "a b"
            ok = SplitMerge(entry.get_ref<const std::string&>(), &merge);
        } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
            merge = {entry[0].get<std::string>(), entry[1].get<std::string>()};  // newer files: ["a", "b"]
            ok = true;
        }
        if (!ok) return Fail(path + ": model.merges[" + std::to_string(i) + "] is not \"a b\" or [\"a\", \"b\"]");
        files.merges.push_back(std::move(merge));
    }
    return files;
}

// ---------------------------------------------------------------------------------------------
// The tokenizer

class Gpt2Tokenizer final : public Tokenizer {
public:
    static Result<std::unique_ptr<Tokenizer>> Create(const BpeFiles& files);

    Result<Tokenization> Encode(std::string_view text) const override;
    std::string Decode(const std::vector<int32_t>& ids) const override;
    size_t VocabSize() const override { return m_id_bytes.size(); }
    std::string Kind() const override { return "gpt2-bpe"; }
    uint64_t ContentHash() const override { return m_hash; }

private:
    struct Merge {
        int32_t rank;
        int32_t result;  // symbol
    };

    int32_t Intern(std::string bytes);
    static uint64_t PairKey(int32_t left, int32_t right) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
    }
    std::vector<int32_t> Bpe(std::string_view word) const;
    std::vector<int32_t> CachedBpe(std::string_view word) const;

    // BPE runs on interned symbols (raw byte strings); symbols 0..255 are the single bytes.
    std::vector<std::string> m_symbols;                        // [S] raw bytes
    std::unordered_map<std::string, int32_t> m_symbol_index;   // raw bytes -> symbol
    std::vector<int32_t> m_symbol_token;                       // [S] vocab id, -1 when not in the vocab
    std::unordered_map<uint64_t, Merge> m_merges;              // (left, right) symbols -> merge

    std::vector<std::string> m_id_bytes;  // [V] raw bytes of each id ("" for ids the vocab skips)
    std::string m_vocab_source;           // the file (and field) the vocabulary came from, for messages
    uint64_t m_hash = kHashSeed;          // ContentHash: the ids' bytes, then the merges in rank order
    Pcre2Code m_pattern;

    // Words repeat a lot in text, so their BPE is cached. The cache is cleared when it reaches
    // kMaxCacheEntries; words longer than kMaxCachedWordBytes (rare, and of any size) are not kept.
    static constexpr size_t kMaxCacheEntries = 1 << 16;
    static constexpr size_t kMaxCachedWordBytes = 64;
    mutable std::mutex m_cache_mutex;
    mutable std::unordered_map<std::string, std::vector<int32_t>> m_cache;  // word bytes -> symbols
};

int32_t Gpt2Tokenizer::Intern(std::string bytes) {
    const auto [it, inserted] = m_symbol_index.emplace(bytes, static_cast<int32_t>(m_symbols.size()));
    if (inserted) {
        m_symbols.push_back(std::move(bytes));
        m_symbol_token.push_back(-1);
    }
    return it->second;
}

Result<std::unique_ptr<Tokenizer>> Gpt2Tokenizer::Create(const BpeFiles& files) {
    auto pattern = CompileGpt2Pattern();
    if (!pattern) return Fail(pattern.error());

    auto tokenizer = std::make_unique<Gpt2Tokenizer>();
    Gpt2Tokenizer& t = *tokenizer;
    t.m_pattern = std::move(*pattern);
    for (int b = 0; b < 256; ++b) t.Intern(std::string(1, static_cast<char>(b)));

    int32_t max_id = -1;
    for (const auto& entry : files.vocab) max_id = std::max(max_id, entry.second);
    t.m_id_bytes.assign(static_cast<size_t>(max_id + 1), std::string());
    std::vector<bool> id_used(t.m_id_bytes.size(), false);
    std::string bytes;
    for (const auto& [token, id] : files.vocab) {
        if (id_used[id]) return Fail(files.vocab_source + ": id " + std::to_string(id) + " is used twice");
        id_used[id] = true;
        if (!ByteLevelToBytes(token, &bytes)) {
            // Not byte-level text (an added token such as "<unk>" spelled outside the table): BPE
            // never produces it, so it only decodes, as its own text.
            t.m_id_bytes[id] = token;
            continue;
        }
        const int32_t symbol = t.Intern(bytes);
        assert(t.m_symbol_token[symbol] < 0);  // JSON keys are unique and the byte table is a bijection
        t.m_symbol_token[symbol] = id;
        t.m_id_bytes[id] = bytes;
    }

    // A pair listed twice keeps its last rank, as dict(zip(merges, range(...))) does in encoder.py.
    std::string left_bytes, right_bytes;
    for (size_t rank = 0; rank < files.merges.size(); ++rank) {
        const auto& [left, right] = files.merges[rank];
        if (!ByteLevelToBytes(left, &left_bytes) || !ByteLevelToBytes(right, &right_bytes)) {
            return Fail(files.merges_source + ": merge " + std::to_string(rank + 1) + " ('" + EscapeForMessage(left + " " + right) +
                        "') is not byte-level BPE");
        }
        const int32_t left_symbol = t.Intern(left_bytes);
        const int32_t right_symbol = t.Intern(right_bytes);
        const int32_t result = t.Intern(left_bytes + right_bytes);
        t.m_merges[PairKey(left_symbol, right_symbol)] = Merge{static_cast<int32_t>(rank), result};
    }
    // Lengths go in before bytes so that no two different lists hash the same stream.
    auto hash = [&t](std::string_view bytes) {
        const uint64_t size = bytes.size();
        t.m_hash = HashBytes(bytes, HashBytes(std::string_view(reinterpret_cast<const char*>(&size), sizeof size), t.m_hash));
    };
    for (const std::string& bytes : t.m_id_bytes) hash(bytes);
    for (const auto& [left, right] : files.merges) hash(left), hash(right);
    t.m_vocab_source = files.vocab_source;
    return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

// GPT-2's merge loop: repeatedly take the lowest-ranked adjacent pair and merge every occurrence
// of it, left to right. Done with a linked list and a heap so long words stay O(n log n): all
// candidates of the lowest rank are taken out together (they are all the same pair) and applied
// left to right, which is exactly encoder.py's pass; pairs they create wait for the next round.
std::vector<int32_t> Gpt2Tokenizer::Bpe(std::string_view word) const {
    const int32_t n = static_cast<int32_t>(word.size());
    std::vector<int32_t> symbol(n), next(n), prev(n);  // symbol -1: merged into its left neighbour
    for (int32_t i = 0; i < n; ++i) {
        symbol[i] = static_cast<uint8_t>(word[i]);
        prev[i] = i - 1;
        next[i] = i + 1;  // n: end
    }

    struct Candidate {
        int32_t rank, left, right, left_symbol, right_symbol, result;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
    const auto push_pair = [&](int32_t left, int32_t right) {
        if (left < 0 || right >= n) return;
        const auto it = m_merges.find(PairKey(symbol[left], symbol[right]));
        if (it == m_merges.end()) return;
        heap.push({it->second.rank, left, right, symbol[left], symbol[right], it->second.result});
    };
    for (int32_t i = 0; i + 1 < n; ++i) push_pair(i, i + 1);

    std::vector<Candidate> round;
    std::vector<int32_t> merged;  // left positions merged in this round
    while (!heap.empty()) {
        round.clear();
        merged.clear();
        const int32_t rank = heap.top().rank;
        while (!heap.empty() && heap.top().rank == rank) {
            round.push_back(heap.top());
            heap.pop();
        }
        for (const Candidate& c : round) {
            // Stale: an earlier merge consumed or changed one side (e.g. the second pair of "aaa").
            if (symbol[c.left] != c.left_symbol || next[c.left] != c.right || symbol[c.right] != c.right_symbol) {
                continue;
            }
            symbol[c.left] = c.result;
            symbol[c.right] = -1;
            next[c.left] = next[c.right];
            if (next[c.left] < n) prev[next[c.left]] = c.left;
            merged.push_back(c.left);
        }
        // Merged symbols meet new neighbours: candidates for later rounds. A merged symbol can
        // not be absorbed in the same round (its pairs in this round are all stale).
        for (int32_t left : merged) {
            push_pair(prev[left], left);
            push_pair(left, next[left]);
        }
    }

    std::vector<int32_t> symbols;
    for (int32_t i = 0; i < n; i = next[i]) symbols.push_back(symbol[i]);
    return symbols;
}

std::vector<int32_t> Gpt2Tokenizer::CachedBpe(std::string_view word) const {
    if (word.size() > kMaxCachedWordBytes) return Bpe(word);
    std::string key(word);
    {
        std::lock_guard<std::mutex> lock(m_cache_mutex);
        const auto it = m_cache.find(key);
        if (it != m_cache.end()) return it->second;
    }
    std::vector<int32_t> symbols = Bpe(word);
    std::lock_guard<std::mutex> lock(m_cache_mutex);
    if (m_cache.size() >= kMaxCacheEntries) m_cache.clear();
    m_cache.emplace(std::move(key), symbols);
    return symbols;
}

Result<Tokenization> Gpt2Tokenizer::Encode(std::string_view text) const {
    if (const size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
        return Fail("text is not valid UTF-8 at byte " + std::to_string(bad));
    }
    Tokenization out;
    if (text.empty()) return out;

    Pcre2MatchData match(pcre2_match_data_create_from_pattern(m_pattern.get(), nullptr));
    if (!match) return Fail("out of memory for the pre-tokenizer's match data");
    const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t position = 0;
    while (position < text.size()) {
        // The text was validated above, so PCRE2 need not re-check it from the start each call.
        const int rc = pcre2_match(m_pattern.get(), subject, text.size(), position, PCRE2_NO_UTF_CHECK,
                                   match.get(), nullptr);
        if (rc < 0) {
            return Fail("pre-tokenizer failed at byte " + std::to_string(position) + ": " + Pcre2Message(rc));
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
        const size_t begin = ovector[0], end = ovector[1];
        // Every character is a letter, a number, a space or "other", so each match starts where
        // the last one ended and none is empty.
        assert(begin == position && end > begin);
        if (end <= position) return Fail("pre-tokenizer stalled at byte " + std::to_string(position));

        size_t offset = begin;
        for (int32_t symbol : CachedBpe(text.substr(begin, end - begin))) {
            const std::string& bytes = m_symbols[symbol];
            const int32_t id = m_symbol_token[symbol];
            if (id < 0) {
                return Fail("BPE piece '" + EscapeForMessage(BytesToByteLevel(bytes), 40) + "' (" + std::to_string(bytes.size()) +
                            " bytes, at byte " + std::to_string(offset) + ") is not in the vocabulary of " +
                            EscapeForMessage(m_vocab_source));
            }
            out.ids.push_back(id);
            out.pieces.push_back(bytes);
            out.offsets.emplace_back(offset, offset + bytes.size());
            offset += bytes.size();
        }
        position = end;
    }
    return out;
}

// Ids outside the vocabulary are skipped: Decode has no error channel, and dropping them keeps the
// rest of the text intact.
std::string Gpt2Tokenizer::Decode(const std::vector<int32_t>& ids) const {
    std::string text;
    for (int32_t id : ids) {
        if (id >= 0 && static_cast<size_t>(id) < m_id_bytes.size()) text += m_id_bytes[id];
    }
    return text;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> LoadGpt2Tokenizer(const std::string& vocab_json_path,
                                                      const std::string& merges_path) {
    BpeFiles files;
    files.vocab_source = vocab_json_path;
    files.merges_source = merges_path;
    auto vocab = ParseJsonFile(vocab_json_path, kMaxTokenizerFileBytes);
    if (!vocab) return Fail(vocab.error());
    if (Status status = ReadVocab(*vocab, vocab_json_path, &files); !status) return Fail(status.error());
    auto merges = ReadFile(merges_path, kMaxTokenizerFileBytes);
    if (!merges) return Fail(merges.error());
    if (Status status = ReadMergesText(*merges, merges_path, &files); !status) return Fail(status.error());
    return Gpt2Tokenizer::Create(files);
}

std::string TokenizerFilesIn(const std::string& model_dir) {
    namespace fs = std::filesystem;
    std::error_code error;
    const fs::path dir(model_dir);
    auto present = [&](const char* name) { return fs::exists(fs::symlink_status(dir / name, error)); };
    const bool vocab = present("vocab.json"), merges = present("merges.txt");
    if (vocab && merges) return "vocab.json + merges.txt";
    if (present("tokenizer.json")) return "tokenizer.json";
    if (present("tokenizer.model")) return "tokenizer.model";
    if (vocab || merges) return "vocab.json + merges.txt";  // half of the pair: an error to report
    return "";
}

Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& model_dir) {
    namespace fs = std::filesystem;
    std::error_code error;
    if (!fs::is_directory(model_dir, error)) return Fail("model folder '" + EscapeForMessage(model_dir) + "' does not exist");
    const fs::path dir(model_dir);
    const std::string files = TokenizerFilesIn(model_dir);
    if (files == "vocab.json + merges.txt") {
        const fs::path vocab = dir / "vocab.json", merges = dir / "merges.txt";
        const bool has_vocab = fs::exists(fs::symlink_status(vocab, error)), has_merges = fs::exists(fs::symlink_status(merges, error));
        if (has_vocab != has_merges)
            return Fail("model folder '" + EscapeForMessage(model_dir) + "' has " +
                        (has_vocab ? "vocab.json but no merges.txt" : "merges.txt but no vocab.json") +
                        " (GPT-2 BPE needs both, or a tokenizer.json)");
        return LoadGpt2Tokenizer(vocab.string(), merges.string());
    }
    if (files == "tokenizer.json") {
        auto bpe = ReadHfTokenizerJson((dir / "tokenizer.json").string());
        if (!bpe) return Fail(bpe.error());
        return Gpt2Tokenizer::Create(*bpe);
    }
    if (files == "tokenizer.model") return LoadSentencePieceTokenizer((dir / "tokenizer.model").string());
    return Fail("model folder '" + EscapeForMessage(model_dir) + "' has no tokenizer (vocab.json + merges.txt, tokenizer.json or tokenizer.model)");
}

uint64_t HashBytes(std::string_view bytes, uint64_t hash) {
    for (const char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    return hash;
}

size_t FindInvalidUtf8(std::string_view text) {
    uint32_t cp = 0;
    for (size_t i = 0; i < text.size();) {
        if (static_cast<uint8_t>(text[i]) < 0x80) {  // ASCII fast path
            ++i;
            continue;
        }
        const size_t length = DecodeUtf8(text, i, &cp);
        if (length == 0) return i;
        i += length;
    }
    return std::string_view::npos;
}

std::string PieceToDisplay(std::string_view piece_bytes) {
    std::string out;
    out.reserve(piece_bytes.size());
    uint32_t cp = 0;
    for (size_t i = 0; i < piece_bytes.size();) {
        const size_t length = DecodeUtf8(piece_bytes, i, &cp);
        if (length == 0) {
            out += "\xEF\xBF\xBD";  // U+FFFD
            ++i;
        } else {
            out.append(piece_bytes.substr(i, length));
            i += length;
        }
    }
    return out;
}

}  // namespace model
