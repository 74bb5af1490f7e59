#include "model/text/utf8.h"

#include <cassert>
#include <cstdint>

namespace model {

Utf8Char DecodeUtf8(std::string_view text, size_t offset) {
    assert(offset < text.size());
    const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
    const uint8_t b0 = byte(offset);
    if (b0 < 0x80) return {b0, 1};
    // The lead byte gives the length; the second byte's range rules out overlongs (E0, F0),
    // surrogates (ED) and code points above U+10FFFF (F4).
    size_t length = 0;
    uint8_t second_min = 0x80, second_max = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        length = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        length = 3;
        if (b0 == 0xE0) second_min = 0xA0;
        if (b0 == 0xED) second_max = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        length = 4;
        if (b0 == 0xF0) second_min = 0x90;
        if (b0 == 0xF4) second_max = 0x8F;
    } else {
        return {};  // a continuation byte, C0/C1 (always overlong) or F5..FF
    }
    if (text.size() - offset < length) return {};
    if (byte(offset + 1) < second_min || byte(offset + 1) > second_max) return {};
    char32_t cp = b0 & (0xFF >> (length + 1));
    for (size_t k = 1; k < length; ++k) {
        const uint8_t b = byte(offset + k);
        if (!IsUtf8Continuation(b)) return {};
        cp = (cp << 6) | (b & 0x3F);
    }
    return {cp, length};
}

char32_t NextCodePoint(std::string_view text, size_t* offset) {
    const Utf8Char c = DecodeUtf8(text, *offset);
    if (c.length == 0) {
        ++*offset;
        return kReplacementCharacter;
    }
    *offset += c.length;
    return c.code_point;
}

size_t FindInvalidUtf8(std::string_view text) {
    for (size_t i = 0; i < text.size();) {
        if (static_cast<uint8_t>(text[i]) < 0x80) {  // ASCII fast path
            ++i;
            continue;
        }
        const size_t length = DecodeUtf8(text, i).length;
        if (length == 0) return i;
        i += length;
    }
    return std::string_view::npos;
}

void AppendUtf8(char32_t cp, std::string* out) {
    assert(cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF));
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

}  // namespace model
