// SentencePiece tokenizers: one trained here with libsentencepiece keeps every byte and its
// offsets; a corrupt tokenizer.model is a one-line error.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/text/sentencepiece.h"

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
        EXPECT_EQ((*tok)->Decode(enc->ids), text);
    }
    auto bad = (*tok)->Encode(std::string("ok \xff bad"));
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().find("not valid UTF-8"), std::string::npos);
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
