// Shared by the fuzz targets: an invariant check that survives NDEBUG and aborts with the
// condition (libFuzzer then saves the input), and the Tokenizer contract of model/text/tokenizer.h.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>
#include <string>
#include <string_view>

#include "model/text/tokenizer.h"
#include "model/text/utf8.h"

#define FUZZ_CHECK(cond)                                                                        \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            std::fprintf(stderr, "invariant broken: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            std::abort();                                                                       \
        }                                                                                       \
    } while (0)

// A tokenizer every input of a target shares, loaded once; a target that cannot load it is broken.
inline std::unique_ptr<model::Tokenizer> TokenizerOrAbort(const char* target, model::Result<std::unique_ptr<model::Tokenizer>> loaded) {
    if (!loaded) {
        std::fprintf(stderr, "%s: %s\n", target, loaded.error().c_str());
        std::abort();
    }
    return std::move(*loaded);
}

// Which tokens may cover no input bytes: none (GPT-2's files), the first (SentencePiece's dummy
// prefix), or any (tokenizer.json: the post-processor's BOS and EOS, a "▁" a normalizer or
// pre-tokenizer adds, a token whose characters the model drops).
enum class EmptyTokens { kNone, kFirst, kAny };

// What every tokenizer promises for text it accepted: one id, piece and byte range per token, ids
// inside the vocabulary, and ranges that tile the text with each piece the bytes it covers.
inline void CheckTokenization(const model::Tokenizer& tokenizer, std::string_view text,
                              const model::Tokenization& t, EmptyTokens empty = EmptyTokens::kNone) {
    FUZZ_CHECK(t.ids.size() == t.pieces.size() && t.ids.size() == t.offsets.size());
    FUZZ_CHECK(text.empty() == t.ids.empty());
    size_t position = 0;
    for (size_t i = 0; i < t.ids.size(); ++i) {
        FUZZ_CHECK(t.ids[i] >= 0 && static_cast<size_t>(t.ids[i]) < tokenizer.VocabSize());
        FUZZ_CHECK(t.offsets[i].first == position);
        const bool may_be_empty = empty == EmptyTokens::kAny || (empty == EmptyTokens::kFirst && i == 0);
        FUZZ_CHECK((t.offsets[i].second > t.offsets[i].first || may_be_empty) && t.offsets[i].second <= text.size());
        FUZZ_CHECK(t.pieces[i] == text.substr(t.offsets[i].first, t.offsets[i].second - t.offsets[i].first));
        FUZZ_CHECK(model::FindInvalidUtf8(model::PieceToDisplay(t.pieces[i])) == std::string_view::npos);
        position = t.offsets[i].second;
    }
    FUZZ_CHECK(position == text.size());
}

// One fuzz input for a tokenizer: its bytes as ids for Decode (any id must be safe), then as text.
// Valid UTF-8 goes to `check_valid`; invalid UTF-8 must be refused naming the first bad byte, and
// its displayable form (U+FFFD for the bad bytes) goes to `check_valid` instead.
template <class CheckValid>
void FuzzTokenizerInput(const model::Tokenizer& tokenizer, const uint8_t* data, size_t size, CheckValid check_valid) {
    std::vector<int32_t> ids(size / sizeof(int32_t));
    if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * sizeof(int32_t));
    auto decoded = tokenizer.Decode(ids);
    FUZZ_CHECK(decoded.ok());  // the bundled tokenizers have no decoder that can fail

    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const size_t bad = model::FindInvalidUtf8(text);
    if (bad == std::string_view::npos) {
        check_valid(text);
        return;
    }
    FUZZ_CHECK(bad < size);
    auto refused = tokenizer.Encode(text);
    FUZZ_CHECK(!refused.ok() && refused.error().find("byte " + std::to_string(bad)) != std::string::npos);
    check_valid(model::PieceToDisplay(text));
}
