// The one UTF-8 decoder (model/text/utf8.h): well-formed characters of every length, and each
// kind of ill-formed sequence refused at the right byte.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/text/utf8.h"

namespace {

// Every character of the text as (code point, length); a bad byte as (U+FFFD, 0).
std::vector<std::pair<char32_t, size_t>> Decode(const std::string& text) {
    std::vector<std::pair<char32_t, size_t>> out;
    for (size_t i = 0; i < text.size();) {
        const model::Utf8Char c = model::DecodeUtf8(text, i);
        out.emplace_back(c.length ? c.code_point : model::kReplacementCharacter, c.length);
        i += c.length ? c.length : 1;
    }
    return out;
}

using Chars = std::vector<std::pair<char32_t, size_t>>;
constexpr char32_t kBad = model::kReplacementCharacter;

TEST(Utf8, DecodesEveryLength) {
    EXPECT_EQ(Decode("A"), (Chars{{'A', 1}}));
    EXPECT_EQ(Decode(std::string("\0", 1)), (Chars{{0, 1}}));
    EXPECT_EQ(Decode("\x7F"), (Chars{{0x7F, 1}}));
    EXPECT_EQ(Decode("\xC2\x80"), (Chars{{0x80, 2}}));                // the smallest 2-byte character
    EXPECT_EQ(Decode("\xC3\xA9"), (Chars{{0xE9, 2}}));                // é
    EXPECT_EQ(Decode("\xDF\xBF"), (Chars{{0x7FF, 2}}));
    EXPECT_EQ(Decode("\xE0\xA0\x80"), (Chars{{0x800, 3}}));
    EXPECT_EQ(Decode("\xE6\xB3\xB3"), (Chars{{0x6CF3, 3}}));          // 泳
    EXPECT_EQ(Decode("\xED\x9F\xBF"), (Chars{{0xD7FF, 3}}));          // just below the surrogates
    EXPECT_EQ(Decode("\xEE\x80\x80"), (Chars{{0xE000, 3}}));          // just above them
    EXPECT_EQ(Decode("\xEF\xBF\xBD"), (Chars{{0xFFFD, 3}}));          // U+FFFD itself is a character
    EXPECT_EQ(Decode("\xF0\x90\x80\x80"), (Chars{{0x10000, 4}}));
    EXPECT_EQ(Decode("\xF0\x9F\x98\x80"), (Chars{{0x1F600, 4}}));     // 😀
    EXPECT_EQ(Decode("\xF4\x8F\xBF\xBF"), (Chars{{0x10FFFF, 4}}));    // the largest code point
    EXPECT_EQ(Decode("a\xC3\xA9" "b"), (Chars{{'a', 1}, {0xE9, 2}, {'b', 1}}));
}

TEST(Utf8, RefusesOverlongs) {
    EXPECT_EQ(Decode("\xC0\xAF"), (Chars{{kBad, 0}, {kBad, 0}}));              // '/' in two bytes
    EXPECT_EQ(Decode("\xC1\xBF"), (Chars{{kBad, 0}, {kBad, 0}}));
    EXPECT_EQ(Decode("\xE0\x80\xAF"), (Chars{{kBad, 0}, {kBad, 0}, {kBad, 0}}));  // '/' in three
    EXPECT_EQ(Decode("\xE0\x9F\xBF"), (Chars{{kBad, 0}, {kBad, 0}, {kBad, 0}}));  // U+07FF in three
    EXPECT_EQ(Decode("\xF0\x8F\xBF\xBF"), (Chars{{kBad, 0}, {kBad, 0}, {kBad, 0}, {kBad, 0}}));  // U+FFFF in four
}

TEST(Utf8, RefusesSurrogates) {
    EXPECT_EQ(Decode("\xED\xA0\x80"), (Chars{{kBad, 0}, {kBad, 0}, {kBad, 0}}));  // U+D800
    EXPECT_EQ(Decode("\xED\xBF\xBF"), (Chars{{kBad, 0}, {kBad, 0}, {kBad, 0}}));  // U+DFFF
}

TEST(Utf8, RefusesCodePointsAboveTheLast) {
    EXPECT_EQ(Decode("\xF4\x90\x80\x80"), (Chars{{kBad, 0}, {kBad, 0}, {kBad, 0}, {kBad, 0}}));  // U+110000
    for (const char* lead : {"\xF5", "\xF7", "\xF8", "\xFC", "\xFE", "\xFF"})
        EXPECT_EQ(model::DecodeUtf8(std::string(lead) + "\x80\x80\x80", 0).length, 0u) << static_cast<int>(static_cast<unsigned char>(lead[0]));
}

TEST(Utf8, RefusesTruncatedSequences) {
    EXPECT_EQ(Decode("\xC3"), (Chars{{kBad, 0}}));
    EXPECT_EQ(Decode("\xE4\xB8"), (Chars{{kBad, 0}, {kBad, 0}}));
    EXPECT_EQ(Decode("\xF0\x9F\x98"), (Chars{{kBad, 0}, {kBad, 0}, {kBad, 0}}));
    // Cut short by another character: the next one still decodes.
    EXPECT_EQ(Decode("\xE4\xB8" "A"), (Chars{{kBad, 0}, {kBad, 0}, {'A', 1}}));
    EXPECT_EQ(Decode("\xF0\x9F" "\xC3\xA9"), (Chars{{kBad, 0}, {kBad, 0}, {0xE9, 2}}));
    EXPECT_EQ(Decode("\x80"), (Chars{{kBad, 0}}));  // a stray continuation byte
}

TEST(Utf8, NextCodePointReplacesEachBadByte) {
    const std::string text = "a\xE4\xB8" "b\xF0\x9F\x98\x80";
    std::vector<char32_t> out;
    std::vector<size_t> offsets;
    for (size_t pos = 0; pos < text.size();) {
        out.push_back(model::NextCodePoint(text, &pos));
        offsets.push_back(pos);
    }
    EXPECT_EQ(out, (std::vector<char32_t>{'a', kBad, kBad, 'b', 0x1F600}));
    EXPECT_EQ(offsets, (std::vector<size_t>{1, 2, 3, 4, 8}));
}

TEST(Utf8, FindInvalidNamesTheFirstBadCharacter) {
    EXPECT_EQ(model::FindInvalidUtf8(""), std::string::npos);
    EXPECT_EQ(model::FindInvalidUtf8("caf\xC3\xA9 \xF0\x9F\x98\x80"), std::string::npos);
    EXPECT_EQ(model::FindInvalidUtf8("ab\xE2\x82"), 2u);   // the start of the cut character
    EXPECT_EQ(model::FindInvalidUtf8("ok \xED\xA0\x80"), 3u);
}

TEST(Utf8, AppendRoundTrips) {
    for (char32_t cp : {char32_t{0}, char32_t{'A'}, char32_t{0x7F}, char32_t{0x80}, char32_t{0x7FF}, char32_t{0x800}, char32_t{0xD7FF},
                        char32_t{0xE000}, char32_t{0xFFFD}, char32_t{0xFFFF}, char32_t{0x10000}, char32_t{0x1F600}, char32_t{0x10FFFF}}) {
        std::string bytes;
        model::AppendUtf8(cp, &bytes);
        const model::Utf8Char c = model::DecodeUtf8(bytes, 0);
        EXPECT_EQ(c.code_point, cp);
        EXPECT_EQ(c.length, bytes.size());
    }
}

}  // namespace
