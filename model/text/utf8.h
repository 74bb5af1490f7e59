// UTF-8, one character at a time: the one decoder behind the tokenizers (which refuse invalid
// text), token labels, the font atlas and figures (which show U+FFFD for a bad byte). After
// llama.cpp's src/unicode.h. A library of its own with no dependencies, so viz can use it too.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace model {

constexpr char32_t kReplacementCharacter = 0xFFFD;

// One character: its code point and its length in bytes (1 to 4). Length 0 when the bytes at the
// offset do not start a well-formed character (Unicode's table 3-7): a continuation byte, C0, C1
// or F5..FF, an overlong form, a surrogate (U+D800..DFFF), a code point above U+10FFFF, or a
// sequence cut short by another byte or by the end of the text.
struct Utf8Char {
    char32_t code_point = 0;
    size_t length = 0;
};
Utf8Char DecodeUtf8(std::string_view text, size_t offset);

// For display: the code point at *offset, advancing *offset past it. Where no character starts
// there, U+FFFD and one byte, so every bad byte shows as one U+FFFD and the next good character
// still shows.
char32_t NextCodePoint(std::string_view text, size_t* offset);

// The offset of the first byte that does not start a well-formed character (a character's first
// byte, for one cut short), or npos when the text is valid UTF-8.
size_t FindInvalidUtf8(std::string_view text);

// The code point's bytes; code_point must be a scalar value (at most U+10FFFF, no surrogate).
void AppendUtf8(char32_t code_point, std::string* out);

// A character beyond C0 and DEL that a terminal acts on or that reorders what it shows: the C1
// controls (U+0080..U+009F, CSI among them) and the bidirectional embeddings, overrides and isolates
// (U+202A..U+202E, U+2066..U+2069). Messages and token labels show it as \uNNNN.
inline bool IsHiddenControl(char32_t c) { return (c >= 0x80 && c <= 0x9F) || (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069); }
// A character that draws nothing and is no space: the soft hyphen, the zero-width space, joiners
// and marks (U+200B..U+200F), the word joiner and invisible operators (U+2060..U+2064), the byte
// order mark. Token labels show it as \uNNNN (a token of one was an empty chip).
inline bool IsInvisibleFormat(char32_t c) {
    return c == 0xAD || (c >= 0x200B && c <= 0x200F) || (c >= 0x2060 && c <= 0x2064) || c == 0xFEFF;
}

// A byte that continues a character (10xxxxxx), never one that starts it.
inline bool IsUtf8Continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

}  // namespace model
