// SentencePiece tokenizers: one trained here with libsentencepiece keeps every byte and its
// offsets; a corrupt tokenizer.model is a one-line error.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/text/sentencepiece.h"
#include "tests/model/text/decoded.h"

namespace fs = std::filesystem;

namespace {

std::string Out(const std::string& name) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/text/" + name;
    fs::remove_all(dir);
    return dir;
}

TEST(SentencePiece, TrainedModelKeepsBytesAndOffsets) {
    const std::string dir = Out("sp");
    fs::create_directories(dir);
    std::vector<std::string> lines = {"The quick brown fox jumps over the lazy dog.", "A fox is quick; a dog is lazy.",
                                      "Numbers like 2024 and 1999 split into digits."};
    model::SentencePieceTraining options;
    options.vocab_size = 330;
    ASSERT_TRUE(model::TrainSentencePiece(lines, options, dir + "/tokenizer.model"));
    auto tok = model::LoadTokenizer(dir);
    ASSERT_TRUE(tok) << tok.error();
    EXPECT_EQ((*tok)->Kind(), "sentencepiece");
    EXPECT_EQ((*tok)->VocabSize(), 330u);
    // Unseen characters (é, 日本, an emoji) fall back to bytes; nothing is lost or normalised.
    for (const std::string text : {"The  lazy fox.\n\tNew line", "café 日本 🦊", " leading and trailing  "}) {
        auto enc = (*tok)->Encode(text);
        ASSERT_TRUE(enc) << enc.error();
        std::string joined;
        size_t cursor = 0;
        for (size_t i = 0; i < enc->ids.size(); ++i) {
            joined += enc->pieces[i];
            EXPECT_EQ(enc->offsets[i].first, cursor) << text << " token " << i;
            cursor = enc->offsets[i].second;
        }
        EXPECT_EQ(joined, text);
        EXPECT_EQ(cursor, text.size());
        EXPECT_EQ(Decoded(**tok, enc->ids), text);
    }
    auto bad = (*tok)->Encode(std::string("ok \xff bad"));
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().find("not valid UTF-8"), std::string::npos);

    // A byte-fallback piece is its byte in the text, and a prediction names it by its spelling
    // ("<0xF0>"), which no other piece reads as; an ordinary piece reads as its text.
    auto fox = (*tok)->Encode("\xF0\x9F\xA6\x8A fox");
    ASSERT_TRUE(fox) << fox.error();
    const model::PredictedPieces pieces(**tok);
    auto predicted = [&](int32_t id) {
        auto text = pieces(id);
        return text ? *text : std::string("(fails: ") + text.error() + ")";
    };
    int bytes = 0;
    for (size_t i = 0; i < fox->ids.size(); ++i) {
        const int byte = (*tok)->BytePiece(fox->ids[i]);
        if (fox->pieces[i].size() == 1 && static_cast<unsigned char>(fox->pieces[i][0]) >= 0x80) {
            EXPECT_EQ(byte, static_cast<unsigned char>(fox->pieces[i][0])) << "token " << i;
            char spelled[8];
            std::snprintf(spelled, sizeof spelled, "<0x%02X>", byte);
            EXPECT_EQ(predicted(fox->ids[i]), spelled);
            ++bytes;
        } else {
            EXPECT_EQ(byte, -1) << "token " << i << " '" << fox->pieces[i] << "'";
        }
    }
    EXPECT_EQ(bytes, 4) << "the fox's four bytes";
    EXPECT_EQ((*tok)->BytePiece(-1), -1);
    EXPECT_EQ((*tok)->BytePiece(static_cast<int32_t>((*tok)->VocabSize())), -1);
}

// The content hash reads the pieces, not the file: a copy hashes the same, another vocabulary not.
TEST(SentencePiece, ContentHashFollowsThePieces) {
    const std::string a = Out("sp_hash_a"), b = Out("sp_hash_b"), c = Out("sp_hash_c");
    for (const std::string& d : {a, b, c}) fs::create_directories(d);
    const std::vector<std::string> lines = {"The quick brown fox jumps over the lazy dog.", "A fox is quick; a dog is lazy."};
    model::SentencePieceTraining options;
    options.vocab_size = 300;
    ASSERT_TRUE(model::TrainSentencePiece(lines, options, a + "/tokenizer.model"));
    fs::copy_file(a + "/tokenizer.model", b + "/tokenizer.model");
    options.vocab_size = 301;
    ASSERT_TRUE(model::TrainSentencePiece(lines, options, c + "/tokenizer.model"));
    auto ta = model::LoadTokenizer(a), tb = model::LoadTokenizer(b), tc = model::LoadTokenizer(c);
    ASSERT_TRUE(ta && tb && tc);
    EXPECT_EQ((*ta)->ContentHash(), (*tb)->ContentHash());
    EXPECT_NE((*ta)->ContentHash(), (*tc)->ContentHash());
}

TEST(SentencePiece, CorruptModelIsAOneLineError) {
    const std::string dir = Out("sp_bad");
    fs::create_directories(dir);
    std::ofstream(dir + "/tokenizer.model") << "this is not a protobuf";
    auto tok = model::LoadTokenizer(dir);
    ASSERT_FALSE(tok);
    EXPECT_NE(tok.error().find("tokenizer.model: not a SentencePiece model"), std::string::npos) << tok.error();
    EXPECT_EQ(tok.error().find('\n'), std::string::npos);
}

}  // namespace

namespace {

// The byte range of a serialized SentencePiece model's normalizer character map
// (ModelProto.normalizer_spec = 3, NormalizerSpec.precompiled_charsmap = 2), found by walking the
// protobuf here, independently of the loader's own walk.
bool Varint(const std::string& s, size_t* at, uint64_t* v) {
    *v = 0;
    for (int shift = 0; *at < s.size() && shift < 64; shift += 7) {
        const uint8_t b = static_cast<uint8_t>(s[(*at)++]);
        *v |= uint64_t{b & 0x7Fu} << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

bool FindField(const std::string& s, size_t begin, size_t end, uint64_t field, size_t* out_begin, size_t* out_end) {
    size_t at = begin;
    while (at < end) {
        uint64_t tag, len;
        if (!Varint(s, &at, &tag)) return false;
        switch (tag & 7) {
            case 0: if (!Varint(s, &at, &len)) return false; break;
            case 1: at += 8; break;
            case 5: at += 4; break;
            case 2:
                if (!Varint(s, &at, &len)) return false;
                if ((tag >> 3) == field) {
                    *out_begin = at;
                    *out_end = at + len;
                    return true;
                }
                at += len;
                break;
            default: return false;
        }
    }
    return false;
}

std::string ReadAll(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

// A model trained with NFKC normalization carries a real character map, which loads and encodes;
// the same map made hostile (it would send libsentencepiece outside its buffers while encoding)
// is refused when the file is opened, with a one-line error, before the library sees it.
TEST(SentencePiece, HostileCharacterMapsAreRefusedBeforeEncoding) {
    const std::string dir = Out("sp_nfkc");
    fs::create_directories(dir);
    std::vector<std::string> lines = {"The quick brown fox jumps over the lazy dog.", "Ｆｕｌｌｗｉｄｔｈ letters and ﬁ ligatures.",
                                      "Numbers like 2024 and 1999 split into digits."};
    model::SentencePieceTraining options;
    options.vocab_size = 330;
    options.normalization = "nmt_nfkc";
    ASSERT_TRUE(model::TrainSentencePiece(lines, options, dir + "/tokenizer.model"));
    auto tok = model::LoadTokenizer(dir);
    ASSERT_TRUE(tok) << tok.error();
    auto enc = (*tok)->Encode("Ｆｕｌｌｗｉｄｔｈ ﬁsh");
    ASSERT_TRUE(enc) << enc.error();
    EXPECT_GT(enc->ids.size(), 0u);

    const std::string good = ReadAll(dir + "/tokenizer.model");
    size_t spec_begin = 0, spec_end = 0, map_begin = 0, map_end = 0;
    ASSERT_TRUE(FindField(good, 0, good.size(), 3, &spec_begin, &spec_end));
    ASSERT_TRUE(FindField(good, spec_begin, spec_end, 2, &map_begin, &map_end));
    ASSERT_GT(map_end - map_begin, 1000u) << "nmt_nfkc should carry a character map";
    auto put32 = [](std::string* s, size_t at, uint32_t v) { std::memcpy(&(*s)[at], &v, 4); };

    struct Case {
        const char* what;
        size_t at;
        uint32_t value;
        const char* error;
    };
    const std::vector<Case> cases = {
        {"the root points far past the trie", map_begin + 4, 0xFFFFFC00u, "leads outside its trie"},
        {"the trie claims the whole map: no replacement strings", map_begin, static_cast<uint32_t>(map_end - map_begin - 4),
         "points outside its replacement strings"},
        {"the trie is larger than the map", map_begin, static_cast<uint32_t>(map_end - map_begin), "has a trie larger than the map"},
    };
    for (const Case& c : cases) {
        std::string bad = good;
        put32(&bad, c.at, c.value);
        const std::string bad_dir = Out("sp_hostile");
        fs::create_directories(bad_dir);
        std::ofstream(bad_dir + "/tokenizer.model", std::ios::binary) << bad;
        auto loaded = model::LoadTokenizer(bad_dir);
        ASSERT_FALSE(loaded) << c.what;
        EXPECT_NE(loaded.error().find(c.error), std::string::npos) << c.what << ": " << loaded.error();
        EXPECT_NE(loaded.error().find("tokenizer.model"), std::string::npos) << loaded.error();
        EXPECT_EQ(loaded.error().find('\n'), std::string::npos);
    }
}
