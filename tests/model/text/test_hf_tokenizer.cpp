// HF tokenizer.json against Hugging Face's own JavaScript tokenizers on the real Llama 3, Llama 2
// and Qwen 3 files npm ships (written to SSAVIZ_TEST_OUT by the reference_hf_tokenizers CTest
// fixture, tests/model/hf_tokenizer_reference.js): every id equal, decodes equal. Then, on small
// files written here, what that port cannot check because it differs from HF's Rust crate, which
// ssaviz follows (Split's merged behaviours, Metaspace's split, single_word, Lowercase per
// character), the offsets of byte pieces and split characters, and the refusals.
#include "model/text/tokenizer.h"
#include "tests/model/text/decoded.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using model::Tokenization;
using model::Tokenizer;

const std::string kReferencePath = SSAVIZ_TEST_OUT "/hf_reference.json";
const std::string kPackages = SSAVIZ_SOURCE_DIR "/tests/node_modules/@lenml";

std::string ReadText(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    std::ostringstream contents;
    contents << file.rdbuf();
    return contents.str();
}

std::string IdList(const std::vector<int32_t>& ids) {
    std::string out = "[";
    for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
    return out + "]";
}

// The Tokenization contract: ranges tile the text, pieces are its bytes, ids in the vocabulary.
void ExpectTiles(const Tokenizer& tokenizer, const std::string& text, const Tokenization& t) {
    ASSERT_EQ(t.ids.size(), t.pieces.size());
    ASSERT_EQ(t.ids.size(), t.offsets.size());
    size_t position = 0;
    for (size_t k = 0; k < t.ids.size(); ++k) {
        EXPECT_GE(t.ids[k], 0);
        EXPECT_LT(static_cast<size_t>(t.ids[k]), tokenizer.VocabSize());
        EXPECT_EQ(t.offsets[k].first, position) << "token " << k;
        EXPECT_GE(t.offsets[k].second, t.offsets[k].first) << "token " << k;
        EXPECT_EQ(t.pieces[k], text.substr(t.offsets[k].first, t.offsets[k].second - t.offsets[k].first)) << "token " << k;
        position = t.offsets[k].second;
    }
    EXPECT_EQ(position, text.size());
}

std::unique_ptr<Tokenizer> Load(const std::string& dir) {
    auto loaded = model::LoadTokenizer(dir);
    EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.error());
    return loaded.ok() ? std::move(loaded).value() : nullptr;
}

const Tokenizer& Real(const std::string& name) {
    static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
    auto& slot = cache[name];
    if (!slot) slot = Load(kPackages + "/tokenizer-" + name + "/models");
    if (!slot) std::abort();
    return *slot;
}

std::vector<int32_t> Ids(const Tokenizer& tokenizer, const std::string& text) {
    auto result = tokenizer.Encode(text);
    EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.error());
    if (!result.ok()) return {};
    ExpectTiles(tokenizer, text, *result);
    return result->ids;
}

TEST(HfTokenizer, MatchesHuggingFaceJavaScript) {
    const std::string reference_text = ReadText(kReferencePath);
    ASSERT_FALSE(reference_text.empty()) << kReferencePath << " is missing: run the reference_hf_tokenizers CTest fixture "
                                         << "(node tests/model/hf_tokenizer_reference.js) first";
    const json reference = json::parse(reference_text);
    ASSERT_GE(reference.at("tokenizers").size(), 7u);
    for (const json& entry : reference.at("tokenizers")) {
        const std::string name = entry.at("name").get<std::string>();
        SCOPED_TRACE(name);
        const std::unique_ptr<Tokenizer> tokenizer = Load(entry.at("dir").get<std::string>());
        ASSERT_TRUE(tokenizer);
        size_t checked = 0, skipped = 0, mismatched = 0, decoded = 0, round_trips = 0;
        for (const json& c : entry.at("cases")) {
            const std::string text = c.at("text").get<std::string>();
            if (c.contains("skip")) {
                ++skipped;
                continue;
            }
            ++checked;
            const std::vector<int32_t> expected = c.at("ids").get<std::vector<int32_t>>();
            auto result = tokenizer->Encode(text);
            ASSERT_TRUE(result.ok()) << json(text).dump() << ": " << result.error();
            if (result->ids != expected) {
                if (++mismatched <= 20)
                    ADD_FAILURE() << name << " " << json(text).dump() << "\n  ours:      " << IdList(result->ids)
                                  << "\n  reference: " << IdList(expected);
                continue;
            }
            {
                SCOPED_TRACE(json(text).dump());
                ExpectTiles(*tokenizer, text, *result);
            }
            // HF's decode turns a character split across ids into U+FFFD; ssaviz keeps the bytes.
            const std::string hf_decoded = c.at("decoded").get<std::string>();
            if (hf_decoded.find("\xEF\xBF\xBD") == std::string::npos || text.find("\xEF\xBF\xBD") != std::string::npos) {
                ++decoded;
                EXPECT_EQ(Decoded(*tokenizer, result->ids), hf_decoded) << name << " " << json(text).dump();
                const std::vector<int32_t> body = c.at("body_ids").get<std::vector<int32_t>>();
                const std::string body_decoded = c.at("body_decoded").get<std::string>();
                EXPECT_EQ(Decoded(*tokenizer, body), body_decoded) << name << " " << json(text).dump();
                if (body_decoded == text) ++round_trips;
            }
        }
        EXPECT_EQ(mismatched, 0u) << name << ": " << mismatched << " of " << checked << " cases differ";
        EXPECT_GE(checked, 470u);
        std::cout << "[ " << name << " ] " << checked << " cases, every id equal: " << (mismatched == 0 ? "yes" : "NO")
                  << "; decodes equal to HF's: " << decoded << " (" << round_trips << " give back the text); skipped: " << skipped
                  << "\n";
    }
}

// A tokenizer.json written here from a skeleton and the parts a test sets.
class SmallTokenizer : public ::testing::Test {
protected:
    std::unique_ptr<Tokenizer> Make(const json& parts, std::string* error = nullptr) {
        json file = {{"version", "1.0"}, {"added_tokens", json::array()}, {"normalizer", nullptr}, {"pre_tokenizer", nullptr},
                     {"post_processor", nullptr}, {"decoder", nullptr},
                     {"model", {{"type", "BPE"}, {"vocab", json::object()}, {"merges", json::array()}}}};
        file.merge_patch(parts);
        const fs::path dir = fs::path(SSAVIZ_TEST_OUT) / "hf_small" / ::testing::UnitTest::GetInstance()->current_test_info()->name();
        fs::create_directories(dir);
        std::ofstream(dir / "tokenizer.json", std::ios::trunc) << file.dump();
        auto loaded = model::LoadTokenizer(dir.string());
        if (error) *error = loaded.ok() ? "" : loaded.error();
        if (!error) {
            EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.error());
        }
        return loaded.ok() ? std::move(loaded).value() : nullptr;
    }
    // The error a file gives; it must be one line naming tokenizer.json.
    std::string Refusal(const json& parts) {
        std::string error;
        EXPECT_FALSE(Make(parts, &error));
        EXPECT_NE(error.find("tokenizer.json"), std::string::npos) << error;
        EXPECT_EQ(error.find('\n'), std::string::npos) << error;
        return error;
    }
    static json Vocab(const std::vector<std::string>& tokens) {
        json vocab = json::object();
        for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
        return vocab;
    }
};

TEST_F(SmallTokenizer, SplitBehaviors) {
    const json model = {{"vocab", Vocab({"a", "-", "b", "a-", "-b", "--"})}, {"merges", {"a -", "- b", "- -"}}};
    const auto split = [&](const std::string& behavior, bool invert, const std::string& text) {
        auto t = Make({{"model", model},
                       {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}}}});
        return t ? Ids(*t, text) : std::vector<int32_t>{};
    };
    EXPECT_EQ(split("Isolated", false, "a-b"), (std::vector<int32_t>{0, 1, 2}));
    EXPECT_EQ(split("Removed", false, "a-b"), (std::vector<int32_t>{0, 2}));
    EXPECT_EQ(split("MergedWithPrevious", false, "a-b"), (std::vector<int32_t>{3, 2}));
    EXPECT_EQ(split("MergedWithNext", false, "a-b"), (std::vector<int32_t>{0, 4}));
    EXPECT_EQ(split("Contiguous", false, "a--b"), (std::vector<int32_t>{0, 5, 2}));
    EXPECT_EQ(split("Removed", true, "a-b"), (std::vector<int32_t>{1}));   // the non-matches are the delimiters
    EXPECT_EQ(split("Isolated", true, "a-b"), (std::vector<int32_t>{0, 1, 2}));
    // Removed drops the "-", which then belongs to the token after it.
    auto t = Make({{"model", model},
                   {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "-"}}}, {"behavior", "Removed"}, {"invert", false}}}});
    ASSERT_TRUE(t);
    auto result = t->Encode("a-b");
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(result->pieces, (std::vector<std::string>{"a", "-b"}));
}

TEST_F(SmallTokenizer, MetaspaceSplitAndPrependSchemes) {
    const std::string m = "\xE2\x96\x81";  // U+2581
    const json model = {{"vocab", Vocab({m, "a", "b", m + "a", m + "b", "a" + m})}, {"merges", {"a " + m, m + " a", m + " b"}}};
    const auto run = [&](const std::string& scheme, bool split, const std::string& text) {
        auto t = Make({{"model", model},
                       {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", scheme}, {"split", split}}},
                       {"decoder", {{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", scheme}, {"split", split}}}});
        return t ? Ids(*t, text) : std::vector<int32_t>{};
    };
    EXPECT_EQ(run("always", true, "a b"), (std::vector<int32_t>{3, 4}));
    EXPECT_EQ(run("always", false, "a b"), (std::vector<int32_t>{0, 5, 2}));  // one word: "a▁" merges first
    EXPECT_EQ(run("never", true, "a b"), (std::vector<int32_t>{1, 4}));
    EXPECT_EQ(run("first", true, "a b"), (std::vector<int32_t>{3, 4}));
    // The prepended "▁" comes from no input byte: the token holding it covers only "a".
    auto t = Make({{"model", model}, {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "always"}}}});
    ASSERT_TRUE(t);
    auto result = t->Encode("a b");
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(result->pieces, (std::vector<std::string>{"a", " b"}));
    // HF's Metaspace decoder drops every "▁" of the first token, and turns the others into spaces.
    auto d = Make({{"model", model}, {"decoder", {{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "always"}}}});
    ASSERT_TRUE(d);
    EXPECT_EQ(Decoded(*d, {0, 0, 3, 4}), "  a b");
    EXPECT_EQ(Decoded(*d, {3, 4}), "a b");
}

TEST_F(SmallTokenizer, DigitsAndByteLevel) {
    auto t = Make({{"model", {{"vocab", Vocab({"1", "2", "3", "12", "x"})}, {"merges", {"1 2"}}}},
                   {"pre_tokenizer", {{"type", "Digits"}, {"individual_digits", true}}}});
    ASSERT_TRUE(t);
    EXPECT_EQ(Ids(*t, "x123"), (std::vector<int32_t>{4, 0, 1, 2}));
    t = Make({{"model", {{"vocab", Vocab({"1", "2", "3", "12", "x"})}, {"merges", {"1 2"}}}},
              {"pre_tokenizer", {{"type", "Digits"}, {"individual_digits", false}}}});
    ASSERT_TRUE(t);
    EXPECT_EQ(Ids(*t, "x123"), (std::vector<int32_t>{4, 3, 2}));
}

TEST_F(SmallTokenizer, ByteLevelPrefixSpaceAndRegex) {
    const std::string g = "\xC4\xA0";  // "Ġ", the byte-level space
    const json model = {{"vocab", Vocab({g, "a", "b", g + "a", g + "b", "a" + g})}, {"merges", {g + " a", g + " b", "a " + g}}};
    const auto run = [&](bool prefix, bool regex, const std::string& text) {
        auto t = Make({{"model", model},
                       {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", prefix}, {"trim_offsets", true}, {"use_regex", regex}}},
                       {"decoder", {{"type", "ByteLevel"}}}});
        if (!t) return std::vector<int32_t>{};
        auto r = t->Encode(text);
        EXPECT_TRUE(r.ok());
        if (r.ok()) {
            EXPECT_EQ(Decoded(*t, r->ids), (prefix && text[0] != ' ' ? " " : "") + text);
        }
        return r.ok() ? r->ids : std::vector<int32_t>{};
    };
    EXPECT_EQ(run(false, true, "a b"), (std::vector<int32_t>{1, 4}));
    EXPECT_EQ(run(true, true, "a b"), (std::vector<int32_t>{3, 4}));   // " a" "Ġb"
    EXPECT_EQ(run(true, true, " a"), (std::vector<int32_t>{3}));      // already starts with a space
    EXPECT_EQ(run(false, false, "a b"), (std::vector<int32_t>{1, 4}));  // one word "aĠb": "Ġb" ranks first
}

TEST_F(SmallTokenizer, UnknownTokenFuseAndIgnoreMerges) {
    const json vocab = Vocab({"<unk>", "a", "b", "c", "bc", "abc"});
    auto fused = Make({{"model", {{"vocab", vocab}, {"merges", {"b c"}}, {"unk_token", "<unk>"}, {"fuse_unk", true}}}});
    ASSERT_TRUE(fused);
    EXPECT_EQ(Ids(*fused, "axyza"), (std::vector<int32_t>{1, 0, 1}));
    auto unfused = Make({{"model", {{"vocab", vocab}, {"merges", {"b c"}}, {"unk_token", "<unk>"}}}});
    ASSERT_TRUE(unfused);
    EXPECT_EQ(Ids(*unfused, "axyza"), (std::vector<int32_t>{1, 0, 0, 0, 1}));
    EXPECT_EQ(Ids(*unfused, "abc"), (std::vector<int32_t>{1, 4}));
    auto whole = Make({{"model", {{"vocab", vocab}, {"merges", {"b c"}}, {"ignore_merges", true}}}});
    ASSERT_TRUE(whole);
    EXPECT_EQ(Ids(*whole, "abc"), (std::vector<int32_t>{5}));
    // Without an unknown token or byte pieces HF drops the character; its byte goes to the next token.
    auto dropping = Make({{"model", {{"vocab", vocab}, {"merges", {"b c"}}}}});
    ASSERT_TRUE(dropping);
    auto result = dropping->Encode("xa");
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(result->ids, (std::vector<int32_t>{1}));
    EXPECT_EQ(result->pieces, (std::vector<std::string>{"xa"}));
}

TEST_F(SmallTokenizer, ByteFallbackPiecesAreTheirBytes) {
    json vocab = Vocab({"a"});
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        vocab[name] = 1 + b;
    }
    auto t = Make({{"model", {{"vocab", vocab}, {"merges", json::array()}, {"byte_fallback", true}}},
                   {"decoder", {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}}}});
    ASSERT_TRUE(t);
    const std::string text = "a\xF0\x9F\xA6\x8A" "a";  // a, U+1F98A, a
    auto result = t->Encode(text);
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(result->ids, (std::vector<int32_t>{0, 1 + 0xF0, 1 + 0x9F, 1 + 0xA6, 1 + 0x8A, 0}));
    ExpectTiles(*t, text, *result);
    EXPECT_EQ(result->pieces[1], "\xF0");
    EXPECT_EQ(result->pieces[4], "\x8A");
    EXPECT_EQ(Decoded(*t, result->ids), text);
    EXPECT_EQ(Decoded(*t, {1 + 0xF0}), "\xF0");  // one byte piece decodes to its raw byte
    // ... and a prediction names it by its spelling, which no other piece reads as.
    EXPECT_EQ(t->BytePiece(1 + 0xF0), 0xF0);
    EXPECT_EQ(t->BytePiece(0), -1);
    const model::PredictedPieces predicted(*t);
    EXPECT_EQ(*predicted(1 + 0x2E), "<0x2E>");
    EXPECT_EQ(*predicted(0), "a");
    EXPECT_EQ(*predicted(1 + 0x0A), "\n") << "a control character's byte piece reads as itself (escaped where shown)";
    EXPECT_EQ(*predicted(1 + 0x20), "<0x20>");
}

TEST_F(SmallTokenizer, NormalizersMapBackToTheInput) {
    const json chars = Vocab({"f", "i", "e", "a", " ", "_", "\xCF\x83", "\xCF\x82", "\xCE\xBF", "\xCE\xB4"});
    const json model = {{"vocab", chars}, {"merges", json::array()}};
    // NFKC makes "ﬁ" (3 bytes) "fi": each letter takes part of the ligature's bytes.
    auto nfkc = Make({{"model", model}, {"normalizer", {{"type", "NFKC"}}}});
    ASSERT_TRUE(nfkc);
    auto fi = nfkc->Encode("\xEF\xAC\x81");
    ASSERT_TRUE(fi.ok());
    EXPECT_EQ(fi->ids, (std::vector<int32_t>{0, 1}));
    ExpectTiles(*nfkc, "\xEF\xAC\x81", *fi);
    EXPECT_EQ(fi->offsets[0], (std::pair<size_t, size_t>{0, 1}));
    // NFD then StripAccents: "é" becomes "e".
    auto accents = Make({{"model", model}, {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFD"}}, {{"type", "StripAccents"}}}}}}});
    ASSERT_TRUE(accents);
    EXPECT_EQ(Ids(*accents, "\xC3\xA9" "a"), (std::vector<int32_t>{2, 3}));
    // Lowercase works on each character alone, as Rust's does: a final capital sigma becomes σ, not ς.
    auto lower = Make({{"model", model}, {"normalizer", {{"type", "Lowercase"}}}});
    ASSERT_TRUE(lower);
    EXPECT_EQ(Ids(*lower, "\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3"), (std::vector<int32_t>{8, 9, 8, 6}));
    // Strip and Replace: the stripped and replaced bytes stay covered.
    auto strip = Make({{"model", model}, {"normalizer", json::parse(R"({"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": true, "strip_right": true},
        {"type": "Replace", "pattern": {"Regex": " +"}, "content": "_"}]})")}});
    ASSERT_TRUE(strip);
    auto s = strip->Encode("  a   e  ");
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->ids, (std::vector<int32_t>{3, 5, 2}));
    EXPECT_EQ(s->pieces, (std::vector<std::string>{"  a", "   ", "e  "}));
    auto nmt = Make({{"model", model}, {"normalizer", {{"type", "Nmt"}}}});
    ASSERT_TRUE(nmt);
    EXPECT_EQ(Ids(*nmt, "a\x01\t" "e"), (std::vector<int32_t>{3, 4, 2}));
}

TEST_F(SmallTokenizer, AddedTokenFlags) {
    const json model = {{"vocab", Vocab({"a", "b", " ", "c"})}, {"merges", json::array()}};
    const auto added = [](json extra) {
        json token = {{"id", 4}, {"content", "ab"}, {"single_word", false}, {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}};
        token.merge_patch(extra);
        return json::array({token});
    };
    auto single = Make({{"model", model}, {"added_tokens", added({{"single_word", true}})}});
    ASSERT_TRUE(single);
    EXPECT_EQ(Ids(*single, "ab cab abc ab"), (std::vector<int32_t>{4, 2, 3, 0, 1, 2, 0, 1, 3, 2, 4}));
    auto strips = Make({{"model", model}, {"added_tokens", added({{"lstrip", true}, {"rstrip", true}})}});
    ASSERT_TRUE(strips);
    auto result = strips->Encode("c  ab  c");
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(result->ids, (std::vector<int32_t>{3, 4, 3}));
    EXPECT_EQ(result->pieces, (std::vector<std::string>{"c", "  ab  ", "c"}));
    // A normalized token is found after the normalizer ran, with its normalized content.
    auto normalized = Make({{"model", model}, {"normalizer", {{"type", "Lowercase"}}}, {"added_tokens", added({{"normalized", true}, {"content", "AB"}})}});
    ASSERT_TRUE(normalized);
    EXPECT_EQ(Ids(*normalized, "cAbc"), (std::vector<int32_t>{3, 4, 3}));
    EXPECT_EQ(Decoded(*normalized, {4}), "AB");
}

TEST_F(SmallTokenizer, PostProcessorsAndDecoders) {
    const json model = {{"vocab", Vocab({"<s>", "</s>", "a", "b", " "})}, {"merges", json::array()}};
    auto roberta = Make({{"model", model},
                         {"post_processor", {{"type", "RobertaProcessing"}, {"cls", {"<s>", 0}}, {"sep", {"</s>", 1}}, {"trim_offsets", true}}}});
    ASSERT_TRUE(roberta);
    auto result = roberta->Encode("ab");
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(result->ids, (std::vector<int32_t>{0, 2, 3, 1}));
    EXPECT_EQ(result->offsets.front(), (std::pair<size_t, size_t>{0, 0}));
    EXPECT_EQ(result->offsets.back(), (std::pair<size_t, size_t>{2, 2}));
    ExpectTiles(*roberta, "ab", *result);
    EXPECT_EQ(Decoded(*roberta, result->ids), "<s> a b </s>");  // no decoder: HF joins tokens with spaces
    auto strip = Make({{"model", model},
                       {"decoder", {{"type", "Sequence"},
                                    {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", " x"}},
                                                  {{"type", "Fuse"}},
                                                  {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}}});
    ASSERT_TRUE(strip);
    EXPECT_EQ(Decoded(*strip, {2, 3, 2}), "xb x");
}

TEST_F(SmallTokenizer, ComponentsItCannotRunAreRefused) {
    const json model = {{"vocab", Vocab({"a"})}, {"merges", json::array()}};
    const auto refused = [&](json parts, const std::string& expected) {
        if (!parts.contains("model")) parts["model"] = model;
        const std::string error = Refusal(parts);
        EXPECT_NE(error.find(expected), std::string::npos) << error;
    };
    refused({{"normalizer", {{"type", "BertNormalizer"}}}}, "normalizer: type 'BertNormalizer' is not supported");
    refused({{"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Precompiled"}}}}}}},
            "normalizer.normalizers[1]: type 'Precompiled' is not supported");
    refused({{"normalizer", {{"kind", "NFC"}}}}, "normalizer has no \"type\"");
    refused({{"pre_tokenizer", {{"type", "Whitespace"}}}}, "pre_tokenizer: type 'Whitespace' is not supported");
    refused({{"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Punctuation"}}}}}}}, "pre_tokenizer.pretokenizers[0]");
    refused({{"decoder", {{"type", "WordPiece"}}}}, "decoder: type 'WordPiece' is not supported");
    refused({{"post_processor", {{"type", "Fancy"}}}}, "post_processor: type 'Fancy' is not supported");
    refused({{"truncation", {{"max_length", 512}}}}, "truncation");
    refused({{"padding", {{"strategy", "BatchLongest"}}}}, "padding");
    refused({{"model", {{"vocab", Vocab({"a"})}, {"merges", json::array()}, {"dropout", 0.1}}}}, "model.dropout");
    refused({{"model", {{"vocab", Vocab({"a"})}, {"merges", json::array()}, {"continuing_subword_prefix", "##"}}}},
            "model.continuing_subword_prefix");
    refused({{"model", {{"vocab", Vocab({"a"})}, {"merges", {"a b"}}}}}, "'b' is not in the vocabulary");
    refused({{"added_tokens", {{{"id", 7}, {"content", "<x>"}, {"special", true}}}}},
            "id 7 is not the id Hugging Face's tokenizers give it (1)");
    refused({{"post_processor", {{"type", "TemplateProcessing"}, {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}}}}}},
            "names '<s>', which special_tokens lacks");
    refused({{"post_processor", {{"type", "BertProcessing"}, {"cls", {"[CLS]", 99}}, {"sep", {"[SEP]", 0}}}}}, "id 99 is outside the vocabulary");
    {  // more than 1,024 added tokens, found as the processors are read (a long Sequence was read in quadratic time)
        json processors = json::array();
        for (int i = 0; i < 200000; ++i) processors.push_back({{"type", "RobertaProcessing"}, {"cls", {"a", 0}}, {"sep", {"a", 0}}});
        refused({{"post_processor", {{"type", "Sequence"}, {"processors", std::move(processors)}}}}, "post_processor: adds more than 1024 tokens");
        json ids = json::array();
        for (int i = 0; i < 2000; ++i) ids.push_back(0);
        refused({{"post_processor", {{"type", "TemplateProcessing"},
                                     {"single", {{{"SpecialToken", {{"id", "x"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                                     {"special_tokens", {{"x", {{"id", "x"}, {"ids", ids}, {"tokens", json::array()}}}}}}}},
                "adds more than 1024 tokens");
    }
    const auto split = [](const std::string& regex) {
        return json{{"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}}}};
    };
    refused(split("\\Ga"), "uses \\G");
    refused(split("(?m:a.)"), "cannot run as Oniguruma does");
    refused(split("[a[bc]]"), "a nested character class");
    refused(split("[a-z&&[^q]]"), "a class intersection");
    refused(split("a{2}+"), "{n,m}+");
    refused(split("(unclosed"), "does not compile");
}

TEST_F(SmallTokenizer, OnigurumaClassesAreTranslated) {
    const json model = {{"vocab", Vocab({"a", "b", " ", "\xC2\x85", "\xC2\xA0", "\xEF\xBB\xBF", "5", "{", ",", "}"})}, {"merges", json::array()}};
    // \s is White_Space (U+0085 and U+00A0 in, U+FEFF out); removed stretches join the next token.
    auto t = Make({{"model", model},
                   {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "\\s"}}}, {"behavior", "Removed"}, {"invert", false}}}});
    ASSERT_TRUE(t);
    EXPECT_EQ(Ids(*t, "a\xC2\x85" "b\xC2\xA0" "a\xEF\xBB\xBF" "b"), (std::vector<int32_t>{0, 1, 0, 5, 1}));
    // {,2} is {0,2} to Oniguruma (PCRE2 would read it as text), \h a hex digit (to PCRE2 a space).
    const auto removed = [&](const std::string& regex, const std::string& text) {
        auto s = Make({{"model", model},
                       {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Removed"}, {"invert", false}}}});
        return s ? Ids(*s, text) : std::vector<int32_t>{};
    };
    EXPECT_EQ(removed("[{]b{,2}", "a{bbb"), (std::vector<int32_t>{0, 1}));
    EXPECT_EQ(removed("\\h", "a5, }"), (std::vector<int32_t>{8, 2, 9}));
}

TEST_F(SmallTokenizer, HostileRegexIsRefusedInBoundedTime) {
    const json model = {{"vocab", Vocab({"a", "b"})}, {"merges", json::array()}};
    auto t = Make({{"model", model},
                   {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "(a|a)+$"}}}, {"behavior", "Isolated"}, {"invert", false}}}});
    ASSERT_TRUE(t);
    const auto start = std::chrono::steady_clock::now();
    auto result = t->Encode(std::string(5000, 'a') + "b");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_FALSE(result.ok());
    EXPECT_NE(result.error().find("pre_tokenizer"), std::string::npos) << result.error();
    EXPECT_NE(result.error().find("budget"), std::string::npos) << result.error();
    EXPECT_LT(seconds, 10.0);
    // A normalizer that makes the text grow without bound is refused too.
    auto grow = Make({{"model", model},
                      {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", std::string(100, 'b')}}}});
    ASSERT_TRUE(grow);
    auto grown = grow->Encode(std::string(1000, 'a'));
    ASSERT_FALSE(grown.ok());
    EXPECT_NE(grown.error().find("times longer"), std::string::npos) << grown.error();
}

// Issue 38: the regex budget is the text's, shared by every search made while encoding it (the
// Split after a Split used to get a budget per word: 5,000 words of 19 letters ran past 30 s).
TEST_F(SmallTokenizer, RegexBudgetIsOnePerText) {
    const json model = {{"vocab", Vocab({"a", "b", " ", "<s>"})}, {"merges", json::array()}};
    const json on_space = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Isolated"}, {"invert", false}};
    const json backtracks = {{"type", "Split"}, {"pattern", {{"Regex", "(a|a)+\\d"}}}, {"behavior", "Isolated"}, {"invert", false}};
    auto t = Make({{"model", model}, {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {on_space, backtracks}}}}});
    ASSERT_TRUE(t);
    const auto words = [](int count, int letters) {
        std::string text;
        for (int w = 0; w < count; ++w) text += std::string(letters, 'a') + " ";
        return text;
    };
    // One word of 15 letters is well within a text's budget, and so is a short text of them ...
    EXPECT_EQ(Ids(*t, words(1, 15)).size(), 16u);
    EXPECT_EQ(Ids(*t, words(4, 15)).size(), 64u);
    // ... but 5,000 of them need the work of 5,000 texts: refused, naming the Split, in well under a second.
    for (int letters : {15, 19}) {
        const auto start = std::chrono::steady_clock::now();
        auto result = t->Encode(words(5000, letters));
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        ASSERT_FALSE(result.ok()) << letters;
        EXPECT_NE(result.error().find("tokenizer.json: pre_tokenizer.pretokenizers[1]: the regex needs more work than the budget left"),
                  std::string::npos) << result.error();
        EXPECT_EQ(result.error().find('\n'), std::string::npos) << result.error();
        EXPECT_LT(seconds, 5.0) << letters << " letters";
    }
    // A normalizer draws on the same budget, and so does every stretch between added tokens.
    json raw_token = {{"id", 3}, {"content", "<s>"}, {"special", true}, {"normalized", false}};
    auto n = Make({{"model", model}, {"added_tokens", {raw_token}},
                   {"normalizer", {{"type", "Replace"}, {"pattern", {{"Regex", "(a|a)+\\d"}}}, {"content", "b"}}}});
    ASSERT_TRUE(n);
    std::string stretches;
    for (int k = 0; k < 5000; ++k) stretches += std::string(15, 'a') + "<s>";
    EXPECT_EQ(Ids(*n, stretches.substr(0, 18 * 4)).size(), 64u);
    const auto start = std::chrono::steady_clock::now();
    auto result = n->Encode(stretches);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_FALSE(result.ok());
    EXPECT_NE(result.error().find("tokenizer.json: normalizer: the regex needs more work"), std::string::npos) << result.error();
    EXPECT_LT(seconds, 5.0);
}

// A decoder's regex has a budget per decode call, sized by the tokens it decodes, so the window's
// table of every id (a decode per id) ends at the first hostile piece instead of ~16 ms an id.
TEST_F(SmallTokenizer, DecoderRegexBudgetIsPerCall) {
    std::vector<std::string> pieces;
    for (int i = 0; i < 50001; ++i) {  // 19 letters "a" and a suffix of other letters that tells them apart
        std::string piece(19, 'a');
        for (int n = i; n > 0 || piece.size() == 19; n /= 25) piece += static_cast<char>('b' + n % 25);
        pieces.push_back(piece);
    }
    const json replace = {{"type", "Replace"}, {"pattern", {{"Regex", "(a|a)+\\d"}}}, {"content", "x"}};
    auto t = Make({{"model", {{"vocab", Vocab(pieces)}, {"merges", json::array()}}}, {"decoder", replace}});
    ASSERT_TRUE(t);
    const auto start = std::chrono::steady_clock::now();
    std::string error;
    for (size_t id = 0; id < t->VocabSize() && error.empty(); ++id) {
        auto text = t->Decode({static_cast<int32_t>(id)});
        if (!text) error = text.error();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_NE(error.find("tokenizer.json: decoder: the regex needs more work than the budget left"), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_LT(seconds, 5.0);

    // A pattern that does not backtrack decodes the whole vocabulary.
    auto plain = Make({{"model", {{"vocab", Vocab(pieces)}, {"merges", json::array()}}},
                       {"decoder", {{"type", "Replace"}, {"pattern", {{"Regex", "a+"}}}, {"content", "x"}}}});
    ASSERT_TRUE(plain);
    for (int32_t id : {0, 7, 50000}) EXPECT_EQ(Decoded(*plain, {id}), "x" + pieces[id].substr(19));

    // Tokens fine one by one can be hostile joined: after Fuse the regex sees them as one text.
    const json fused = {{"type", "Sequence"}, {"decoders", {{{"type", "Fuse"}}, replace}}};
    auto f = Make({{"model", {{"vocab", Vocab({"a", "b"})}, {"merges", json::array()}}}, {"decoder", fused}});
    ASSERT_TRUE(f);
    EXPECT_EQ(Decoded(*f, {0, 0, 1}), "aab");
    auto joined = f->Decode(std::vector<int32_t>(5000, 0));
    ASSERT_FALSE(joined.ok());
    EXPECT_NE(joined.error().find("decoder.decoders[1]: the regex needs more work"), std::string::npos) << joined.error();
}

// Issue 38: text a file's steps make is checked as it grows, against one limit for the whole text
// (16 times the input + 4 KB), so a hostile file is refused before it has built what it asks for
// (a Replace of every empty match by 1 KB on a 1 MB text reached 3.6 GB before the old check).
TEST_F(SmallTokenizer, ExpansionsAreRefusedBeforeTheyAreBuilt) {
    const json model = {{"vocab", Vocab({"a", "b", "<s>"})}, {"merges", json::array()}};
    const auto refused = [&](const json& parts, const std::string& text, const std::string& where) {
        auto t = Make(parts);
        ASSERT_TRUE(t);
        rusage before{};
        getrusage(RUSAGE_SELF, &before);
        const auto start = std::chrono::steady_clock::now();
        auto result = t->Encode(text);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        rusage after{};
        getrusage(RUSAGE_SELF, &after);
        ASSERT_FALSE(result.ok()) << where;
        EXPECT_NE(result.error().find("tokenizer.json: " + where + ": makes the text more than 16 times longer"), std::string::npos)
            << result.error();
        EXPECT_LT(seconds, 5.0) << where;
        EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 400 * 1024) << where << ": peak KiB grew this much";  // the limit's text: 16 MB, ~150 MB aligned
    };
    const json empty_pattern = {{"type", "Replace"}, {"pattern", {{"String", ""}}}, {"content", std::string(1024, 'b')}};
    refused({{"model", model}, {"normalizer", empty_pattern}}, std::string(1 << 20, 'a'), "normalizer");
    // The 4 KB slack is the text's, not each stretch's between added tokens.
    json raw_token = {{"id", 2}, {"content", "<s>"}, {"special", true}, {"normalized", false}};
    std::string short_stretches;
    for (int k = 0; k < 1000; ++k) short_stretches += "a<s>";
    refused({{"model", model}, {"added_tokens", {raw_token}}, {"normalizer", {{"type", "Prepend"}, {"prepend", std::string(4000, 'b')}}}},
            short_stretches, "normalizer");
    // A Unicode form checks its size too: U+FDFA is 18 characters in NFKD.
    const std::string fdfa = "\xEF\xB7\xBA";
    std::string five;
    for (int k = 0; k < 5; ++k) five += fdfa;
    refused({{"model", model},
             {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", five}},
                                                                    {{"type", "NFKD"}}}}}}},
            std::string(1000, 'a'), "normalizer.normalizers[1]");
    // Pre-tokenizers: each ByteLevel doubles the bytes above 0x7F, so 40 of them would make 2^40 times as much.
    json levels = json::array();
    for (int k = 0; k < 40; ++k) levels.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
    std::string accents;
    for (int k = 0; k < 1000; ++k) accents += "\xC3\xA9";
    refused({{"model", model}, {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", levels}}}}, accents,
            "pre_tokenizer.pretokenizers[4]");
    // Decoders: Replace steps that each make the text four times longer.
    json fours = json::array();
    for (int k = 0; k < 10; ++k) fours.push_back({{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aaaa"}});
    auto d = Make({{"model", model}, {"decoder", {{"type", "Sequence"}, {"decoders", fours}}}});
    ASSERT_TRUE(d);
    EXPECT_EQ(Decoded(*d, {1}), "b");
    // One byte of tokens may become 16 + 4,096 bytes: 4^6 is within that, 4^7 is not.
    auto grown = d->Decode({0});
    ASSERT_FALSE(grown.ok());
    EXPECT_NE(grown.error().find("tokenizer.json: decoder.decoders[6]: makes the text more than 16 times longer"), std::string::npos)
        << grown.error();
}

// Literal patterns ("String") are found in time linear in the text whatever their length (a
// 64 KB one compared up to 64 KB at every byte: ~7 s for 4 MB on a loaded 2-core machine). Timed
// against the same text split on a two-byte literal, so a slow or loaded machine (the sanitizers)
// slows both: at 2 MB the quadratic search took 7x as long as the short one, the linear one 1x.
TEST_F(SmallTokenizer, LongLiteralPatternsStayLinear) {
    // Every "a" is unknown and fused into one token, so beside the search the work is the same.
    const json model = {{"vocab", Vocab({"<unk>", "b"})}, {"merges", json::array()}, {"unk_token", "<unk>"}, {"fuse_unk", true}};
    const auto split_on = [&](const std::string& literal) {
        return Make({{"model", model},
                     {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"String", literal}}}, {"behavior", "Isolated"}, {"invert", false}}}});
    };
    auto long_literal = split_on(std::string(65535, 'a') + "b");
    auto short_literal = split_on("ab");
    ASSERT_TRUE(long_literal && short_literal);
    const std::string text(2 << 20, 'a');
    const auto seconds = [&](const Tokenizer& t) {
        const auto start = std::chrono::steady_clock::now();
        EXPECT_EQ(Ids(t, text), (std::vector<int32_t>{0}));
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    double long_s = 1e9, short_s = 1e9;
    for (int k = 0; k < 2; ++k) {  // interleaved, the best of two each
        short_s = std::min(short_s, seconds(*short_literal));
        long_s = std::min(long_s, seconds(*long_literal));
    }
    EXPECT_LT(long_s, 3 * short_s + 0.1) << "a 64 KB literal: " << long_s << " s, a 2-byte one: " << short_s << " s";
}

// The real files: pieces are the input bytes each token stands for.
TEST(HfTokenizer, RealPiecesAndOffsets) {
    // Llama 2 (byte_fallback): a character outside the vocabulary is one token per byte, each with
    // its byte; the BOS and the "▁" the normalizer prepends stand for no input.
    const Tokenizer& llama2 = Real("llama2");
    const std::string fox = "\xF0\x9F\xA6\x8A";
    auto r = llama2.Encode(fox);
    ASSERT_TRUE(r.ok()) << r.error();
    ExpectTiles(llama2, fox, *r);
    EXPECT_EQ(r->ids.front(), 1);
    EXPECT_EQ(r->pieces.front(), "");
    std::vector<std::string> bytes;
    for (const std::string& piece : r->pieces)
        if (!piece.empty()) bytes.push_back(piece);
    EXPECT_EQ(bytes, (std::vector<std::string>{"\xF0", "\x9F", "\xA6", "\x8A"}));
    EXPECT_EQ(Decoded(llama2, r->ids), "<s> " + fox);

    // Llama 3 (byte-level): a rare CJK character split across tokens keeps each token's own bytes.
    const Tokenizer& llama3 = Real("llama3");
    const std::string rare = "\xF0\xA0\x80\x80";  // U+20000
    r = llama3.Encode(rare);
    ASSERT_TRUE(r.ok()) << r.error();
    ExpectTiles(llama3, rare, *r);
    EXPECT_GT(r->ids.size(), 1u);
    for (size_t k = 0; k < r->ids.size(); ++k) {
        EXPECT_FALSE(r->pieces[k].empty());
        EXPECT_EQ(Decoded(llama3, {r->ids[k]}), r->pieces[k]);
    }
    // Special-token text in the input is the special token, covering exactly its bytes.
    r = llama3.Encode("a<|eot_id|>b");
    ASSERT_TRUE(r.ok()) << r.error();
    ASSERT_EQ(r->ids.size(), 3u);
    EXPECT_EQ(r->ids[1], 128009);
    EXPECT_EQ(r->pieces[1], "<|eot_id|>");
    // Qwen 3's NFC: "e" + U+0301 is one "é", whose token covers both input characters.
    const Tokenizer& qwen3 = Real("qwen3");
    EXPECT_EQ(Ids(qwen3, "caf\x65\xCC\x81"), Ids(qwen3, "caf\xC3\xA9"));
}

TEST(HfTokenizer, RealLongInputsStayFast) {
    // The Llama 3 regex backtracks over whitespace runs (\s*[\r\n]+): a long run must still finish.
    const Tokenizer& llama3 = Real("llama3");
    for (const std::string& text : {std::string(100000, ' ') + "x", std::string(50000, '\t') + "\n", std::string(100000, 'a')}) {
        const auto start = std::chrono::steady_clock::now();
        auto r = llama3.Encode(text);
        ASSERT_TRUE(r.ok()) << r.error();
        EXPECT_EQ(r->offsets.back().second, text.size());
        EXPECT_EQ(Decoded(llama3, r->ids), text);
        EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
    }
}

}  // namespace
