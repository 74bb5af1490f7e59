#include "model/text/bpe.h"

#include "model/io/files.h"
#include "model/text/unicode.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <queue>

namespace model {

int32_t BpeModel::Intern(const std::string& text) {
    const auto [it, inserted] = m_symbol_index.emplace(text, static_cast<int32_t>(m_symbols.size()));
    if (inserted) {
        m_symbols.push_back(text);
        m_symbol_id.push_back(-1);
    }
    return it->second;
}

Result<std::unique_ptr<BpeModel>> BpeModel::Create(const std::vector<std::pair<std::string, int32_t>>& vocab,
                                                   const std::vector<std::pair<std::string, std::string>>& merges,
                                                   BpeOptions options) {
    auto model = std::make_unique<BpeModel>();
    BpeModel& m = *model;
    m.m_options = std::move(options);
    const BpeOptions& o = m.m_options;
    int32_t max_id = -1;
    for (const auto& entry : vocab) {
        assert(entry.second >= 0 && entry.second < kMaxTokenId);
        max_id = std::max(max_id, entry.second);
    }
    m.m_id_symbol.assign(static_cast<size_t>(max_id + 1), -1);
    m.m_symbols.reserve(vocab.size() + (o.merges_in_vocab ? 0 : merges.size()));
    m.m_symbol_index.reserve(m.m_symbols.capacity());
    for (const auto& [token, id] : vocab) {
        if (m.m_id_symbol[id] >= 0) return Fail(o.vocab_source + ": id " + std::to_string(id) + " is used twice");
        const int32_t symbol = m.Intern(token);
        if (m.m_symbol_id[symbol] >= 0)
            return Fail(o.vocab_source + ": token '" + EscapeForMessage(token, 60) + "' is listed twice");
        m.m_symbol_id[symbol] = id;
        m.m_id_symbol[id] = symbol;
    }

    m.m_merges.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const auto& [left, right] = merges[rank];
        const std::string joined = left + right;
        if (o.merges_in_vocab) {
            for (const std::string* part : {&left, &right, &joined}) {
                if (m.m_symbol_index.count(*part) == 0)
                    return Fail(o.merges_source + "[" + std::to_string(rank) + "] ('" + EscapeForMessage(left + " " + right, 60) +
                                "'): '" + EscapeForMessage(*part, 60) + "' is not in the vocabulary");
            }
        }
        const int32_t l = m.Intern(left), r = m.Intern(right), result = m.Intern(joined);
        // A pair listed twice keeps its last rank, as both HF's map and encoder.py's dict do.
        m.m_merges[PairKey(l, r)] = Merge{static_cast<int32_t>(rank), result};
    }

    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        const auto it = m.m_symbol_index.find(name);
        m.m_byte_symbol[b] = it != m.m_symbol_index.end() && m.m_symbol_id[it->second] >= 0 ? it->second : -1;
    }
    return model;
}

int32_t BpeModel::IdOf(const std::string& token) const {
    const auto it = m_symbol_index.find(token);
    return it == m_symbol_index.end() ? -1 : m_symbol_id[it->second];
}

const std::string* BpeModel::TokenOf(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= m_id_symbol.size() || m_id_symbol[id] < 0) return nullptr;
    return &m_symbols[m_id_symbol[id]];
}

int BpeModel::BytePiece(int32_t id) const {
    if (!m_options.byte_fallback || id < 0 || static_cast<size_t>(id) >= m_id_symbol.size() || m_id_symbol[id] < 0) return -1;
    for (int byte = 0; byte < 256; ++byte)
        if (m_byte_symbol[byte] == m_id_symbol[id]) return byte;
    return -1;
}

// HF's merge_word then merge_all (models/bpe/model.rs, word.rs).
Status BpeModel::MergeWord(std::string_view word, std::vector<Piece>* out) const {
    struct Symbol {
        int32_t symbol;
        int32_t prev, next;
        uint32_t length;  // bytes of the word; 0 once merged into its left neighbour
    };
    std::vector<Symbol> symbols;
    uint32_t dropped = 0;  // bytes of characters dropped since the last symbol: they go to the next one
    const auto add = [&](int32_t symbol, uint32_t length) {
        const int32_t at = static_cast<int32_t>(symbols.size());
        symbols.push_back({symbol, at - 1, -1, length + dropped});
        dropped = 0;
        if (at > 0) symbols[at - 1].next = at;
    };
    // The unknown token waiting to be added (HF adds it when a known character follows, so
    // byte pieces in between come first, as they do there).
    bool unk_pending = false;
    uint32_t unk_length = 0;
    int32_t unk_symbol = -1;
    for (size_t i = 0; i < word.size();) {
        uint32_t cp = 0;
        const size_t length = CodePointAt(word, i, &cp);
        const std::string character(word.substr(i, length));
        i += length;
        const auto known = m_symbol_index.find(character);
        if (known != m_symbol_index.end()) {
            if (unk_pending) add(unk_symbol, unk_length);
            unk_pending = false;
            add(known->second, static_cast<uint32_t>(length));
            continue;
        }
        if (m_options.byte_fallback) {
            bool all = true;
            for (char b : character) all = all && m_byte_symbol[static_cast<uint8_t>(b)] >= 0;
            if (all) {
                for (char b : character) add(m_byte_symbol[static_cast<uint8_t>(b)], 1);
                continue;
            }
        }
        if (m_options.has_unk) {
            if (unk_symbol < 0) {
                const auto it = m_symbol_index.find(m_options.unk_token);
                if (it == m_symbol_index.end() || m_symbol_id[it->second] < 0)
                    return Fail(m_options.unk_source + " '" + EscapeForMessage(m_options.unk_token, 60) + "' is not in the vocabulary");
                unk_symbol = it->second;
            }
            if (unk_pending && m_options.fuse_unk) {
                unk_length += static_cast<uint32_t>(length);
            } else {
                if (unk_pending) add(unk_symbol, unk_length);
                unk_pending = true;
                unk_length = static_cast<uint32_t>(length);
            }
            continue;
        }
        if (m_options.unknown_is_error)
            return Fail("piece '" + EscapeForMessage(character, 40) + "' (at byte " + std::to_string(i - length) + " of the word) is not in the vocabulary of " +
                        EscapeForMessage(m_options.vocab_source, 120));
        dropped += static_cast<uint32_t>(length);  // HF drops a character it has no piece for
    }
    if (unk_pending) add(unk_symbol, unk_length);
    if (symbols.empty()) return Ok{};
    symbols.back().length += dropped;

    struct Candidate {
        int32_t rank, position, result;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : position > o.position; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
    const auto push = [&](int32_t left) {
        const int32_t right = symbols[left].next;
        if (right < 0) return;
        const auto it = m_merges.find(PairKey(symbols[left].symbol, symbols[right].symbol));
        if (it != m_merges.end()) queue.push({it->second.rank, left, it->second.result});
    };
    for (int32_t k = 0; k + 1 < static_cast<int32_t>(symbols.size()); ++k) push(k);
    while (!queue.empty()) {
        const Candidate top = queue.top();
        queue.pop();
        Symbol& left = symbols[top.position];
        if (left.length == 0 || left.next < 0) continue;
        Symbol& right = symbols[left.next];
        const auto it = m_merges.find(PairKey(left.symbol, right.symbol));
        if (it == m_merges.end() || it->second.result != top.result) continue;  // stale
        left.symbol = top.result;
        left.length += right.length;
        right.length = 0;
        left.next = right.next;
        if (left.next >= 0) symbols[left.next].prev = top.position;
        if (left.prev >= 0) push(left.prev);
        push(top.position);
    }
    size_t at = 0;
    for (int32_t k = 0; k >= 0; k = symbols[k].next) {
        const int32_t id = m_symbol_id[symbols[k].symbol];
        if (id < 0) {
            // The piece cut short (a word can be megabytes), its size and place, and the file.
            const std::string& piece = m_symbols[symbols[k].symbol];
            return Fail("piece '" + EscapeForMessage(piece, 40) + "' (" + std::to_string(piece.size()) + " bytes, at byte " +
                        std::to_string(at) + " of the word) is not in the vocabulary of " + EscapeForMessage(m_options.vocab_source, 120));
        }
        out->push_back({id, symbols[k].length});
        at += symbols[k].length;
    }
    return Ok{};
}

Status BpeModel::Tokenize(std::string_view word, std::vector<Piece>* out) const {
    if (word.empty()) return Ok{};
    if (m_options.ignore_merges) {
        const int32_t id = IdOf(std::string(word));
        if (id >= 0) {
            out->push_back({id, static_cast<uint32_t>(word.size())});
            return Ok{};
        }
    }
    if (word.size() > kMaxCachedWordBytes) return MergeWord(word, out);
    std::string key(word);
    {
        std::lock_guard<std::mutex> lock(m_cache_mutex);
        const auto it = m_cache.find(key);
        if (it != m_cache.end()) {
            out->insert(out->end(), it->second.begin(), it->second.end());
            return Ok{};
        }
    }
    std::vector<Piece> pieces;
    if (Status s = MergeWord(word, &pieces); !s) return s;
    out->insert(out->end(), pieces.begin(), pieces.end());
    std::lock_guard<std::mutex> lock(m_cache_mutex);
    if (m_cache.size() >= kMaxCacheEntries) m_cache.clear();
    m_cache.emplace(std::move(key), std::move(pieces));
    return Ok{};
}

}  // namespace model
