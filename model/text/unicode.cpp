#include "model/text/unicode.h"
#include "model/text/utf8.h"

#include <unicode/bytestream.h>
#include <unicode/edits.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include <algorithm>

namespace model {

size_t CodePointAt(std::string_view text, size_t i, uint32_t* code_point) {
    const Utf8Char c = DecodeUtf8(text, i);  // the one UTF-8 decoder (utf8.h)
    if (c.length == 0) {
        *code_point = 0x110000u + static_cast<uint8_t>(text[i]);  // an invalid byte stands for itself, unlike any character
        return 1;
    }
    *code_point = c.code_point;
    return c.length;
}

void AppendCodePoint(uint32_t cp, std::string* out) {
    if (cp >= 0x110000u) out->push_back(static_cast<char>(cp - 0x110000u));  // an invalid byte, as CodePointAt gives it
    else AppendUtf8(cp, out);
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

namespace {

// ICU's sink into a string that stops storing at a size.
class CappedSink final : public icu::ByteSink {
public:
    CappedSink(std::string* out, size_t cap) : m_out(out), m_cap(cap) {}
    void Append(const char* bytes, int32_t n) override {
        if (m_out->size() < m_cap) m_out->append(bytes, std::min(static_cast<size_t>(n), m_cap - m_out->size()));
    }

private:
    std::string* m_out;
    size_t m_cap;
};

}  // namespace

Status NormalizeUnicode(NormalForm form, std::string_view text, size_t max_bytes, std::string* out, std::vector<NormalizedSpan>* spans) {
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
        out->assign(text.substr(0, std::min(text.size(), max_bytes + 1)));
        spans->push_back({text.size(), text.size(), false});
        return Ok{};
    }
    status = U_ZERO_ERROR;
    CappedSink sink(out, max_bytes + 1);
    icu::Edits edits;
    normalizer->normalizeUTF8(0, input, sink, &edits, status);
    if (U_FAILURE(status)) return Fail(std::string("Unicode normalization failed: ") + u_errorName(status));
    if (out->size() > max_bytes) return Ok{};
    icu::Edits::Iterator it = edits.getFineIterator();
    while (it.next(status)) {
        spans->push_back({static_cast<size_t>(it.oldLength()), static_cast<size_t>(it.newLength()), it.hasChange() != 0});
    }
    if (U_FAILURE(status)) return Fail(std::string("Unicode normalization failed: ") + u_errorName(status));
    return Ok{};
}

}  // namespace model
