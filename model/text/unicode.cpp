#include "model/text/unicode.h"

#include <unicode/bytestream.h>
#include <unicode/edits.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

namespace model {

size_t CodePointAt(std::string_view text, size_t i, uint32_t* code_point) {
    const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
    const uint8_t b0 = byte(i);
    *code_point = 0x110000u + b0;  // an invalid byte stands for itself, unlike any character
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
        if (b0 == 0xE0) second_min = 0xA0;
        if (b0 == 0xED) second_max = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        length = 4;
        if (b0 == 0xF0) second_min = 0x90;
        if (b0 == 0xF4) second_max = 0x8F;
    } else {
        return 1;
    }
    if (text.size() - i < length || byte(i + 1) < second_min || byte(i + 1) > second_max) return 1;
    uint32_t cp = b0 & (0xFF >> (length + 1));
    for (size_t k = 1; k < length; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80) return 1;
        cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    *code_point = cp;
    return length;
}

void AppendCodePoint(uint32_t cp, std::string* out) {
    if (cp >= 0x110000u) {  // an invalid byte, as CodePointAt gives it
        out->push_back(static_cast<char>(cp - 0x110000u));
    } else if (cp < 0x80) {
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

namespace {

bool InCategories(uint32_t c, uint32_t mask) {
    return c < 0x110000u && (U_MASK(u_charType(static_cast<UChar32>(c))) & mask) != 0;
}

}  // namespace

bool IsWhiteSpace(uint32_t c) {
    if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
    return c < 0x110000u && u_isUWhiteSpace(static_cast<UChar32>(c));
}

bool IsNumeric(uint32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    return InCategories(c, U_GC_ND_MASK | U_GC_NL_MASK | U_GC_NO_MASK);
}

bool IsCombiningMark(uint32_t c) { return c >= 0x300 && InCategories(c, U_GC_M_MASK); }

bool IsWordCharacter(uint32_t c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (c >= 0x110000u) return false;
    const UChar32 u = static_cast<UChar32>(c);
    return u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL) ||
           InCategories(c, U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK);
}

void AppendLowercase(uint32_t c, std::string* out) {
    if (c < 0x80 || c >= 0x110000u) {
        AppendCodePoint(c >= 'A' && c <= 'Z' ? c + 32 : c, out);
        return;
    }
    UChar in[2];
    int32_t in_length = 0;
    U16_APPEND_UNSAFE(in, in_length, static_cast<UChar32>(c));
    UChar lower[8];  // no character lowercases to more than 3 UTF-16 units
    UErrorCode status = U_ZERO_ERROR;
    const int32_t length = u_strToLower(lower, 8, in, in_length, "", &status);
    if (U_FAILURE(status) || length > 8) {
        AppendCodePoint(c, out);
        return;
    }
    for (int32_t k = 0; k < length;) {
        UChar32 cp;
        U16_NEXT_UNSAFE(lower, k, cp);
        AppendCodePoint(static_cast<uint32_t>(cp), out);
    }
}

Status NormalizeUnicode(NormalForm form, std::string_view text, std::string* out, std::vector<NormalizedSpan>* spans) {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* normalizer = nullptr;
    switch (form) {
        case NormalForm::kNFC: normalizer = icu::Normalizer2::getNFCInstance(status); break;
        case NormalForm::kNFD: normalizer = icu::Normalizer2::getNFDInstance(status); break;
        case NormalForm::kNFKC: normalizer = icu::Normalizer2::getNFKCInstance(status); break;
        case NormalForm::kNFKD: normalizer = icu::Normalizer2::getNFKDInstance(status); break;
    }
    if (U_FAILURE(status) || !normalizer) return Fail(std::string("ICU's normalizer data is missing: ") + u_errorName(status));
    out->clear();
    spans->clear();
    const icu::StringPiece input(text.data(), static_cast<int32_t>(text.size()));
    if (normalizer->isNormalizedUTF8(input, status) && U_SUCCESS(status)) {
        out->assign(text);
        spans->push_back({text.size(), text.size(), false});
        return Ok{};
    }
    status = U_ZERO_ERROR;
    icu::StringByteSink<std::string> sink(out);
    icu::Edits edits;
    normalizer->normalizeUTF8(0, input, sink, &edits, status);
    if (U_FAILURE(status)) return Fail(std::string("Unicode normalization failed: ") + u_errorName(status));
    icu::Edits::Iterator it = edits.getFineIterator();
    while (it.next(status)) {
        spans->push_back({static_cast<size_t>(it.oldLength()), static_cast<size_t>(it.newLength()), it.hasChange() != 0});
    }
    if (U_FAILURE(status)) return Fail(std::string("Unicode normalization failed: ") + u_errorName(status));
    return Ok{};
}

}  // namespace model
