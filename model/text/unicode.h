// Unicode as Hugging Face's tokenizers (Rust) sees it, for the tokenizer.json pipeline: the
// character classes its code tests (char::is_whitespace, char::is_numeric, regex \w, combining
// marks), per-character lowercase and the four normalization forms with the spans they changed.
// Character data comes from ICU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/io/result.h"

namespace model {

// The code point at text[i] and its length in bytes. Bytes that do not start a valid UTF-8
// sequence are one "character" each, with a code point above U+10FFFF that equals no real one, so
// decoders can walk raw bytes (a byte-fallback piece) as Rust walks the lossy string.
size_t CodePointAt(std::string_view text, size_t i, uint32_t* code_point);
void AppendCodePoint(uint32_t code_point, std::string* out);

bool IsWhiteSpace(uint32_t c);     // White_Space: Rust's char::is_whitespace and Oniguruma's \s
bool IsNumeric(uint32_t c);        // Nd, Nl, No: char::is_numeric
bool IsCombiningMark(uint32_t c);  // Mn, Mc, Me: what StripAccents removes
bool IsWordCharacter(uint32_t c);  // the regex crate's \w: Alphabetic, M, Nd, Pc, Join_Control

// Rust's char::to_lowercase: the full lowercase mapping of one character, without context (so
// "Σ" always becomes "σ", and "İ" becomes "i̇").
void AppendLowercase(uint32_t c, std::string* out);

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };

// A stretch of the input and what it became: unchanged stretches are copied byte for byte.
struct NormalizedSpan {
    size_t old_length = 0, new_length = 0;
    bool changed = false;
};

// `text` in the form, with the spans that tile input and output in order. `out` stops growing past
// `max_bytes` + 1 bytes (a form can be ~11 times longer than its text): when it is that long, the
// form is only known to be longer than `max_bytes`, and the spans mean nothing.
Status NormalizeUnicode(NormalForm form, std::string_view text, size_t max_bytes, std::string* out, std::vector<NormalizedSpan>* spans);

}  // namespace model
