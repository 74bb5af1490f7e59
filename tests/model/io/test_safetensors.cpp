// safetensors parsing and model-folder loading (SPEC section 3): ParseSafetensorsHeader over
// in-memory bytes whose headers are stated literally, one test per abuse case; the committed
// abuse fixtures; the WriteSafetensors round trip; and model::Engine::Open on corrupted copies
// of a tiny random model folder.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/nn/analysis.h"
#include "model/io/config.h"
#include "model/io/safetensors.h"
#include "model/io/weights.h"

namespace {

namespace fs = std::filesystem;
using model::Dtype;
using model::ParseSafetensorsHeader;
using model::SafetensorsFile;
using model::TensorToWrite;

bool Has(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

// A safetensors file in memory: the 8-byte little-endian length (of `header` unless
// `header_len` overrides it), the header text, then `data_bytes` bytes of data.
std::vector<uint8_t> Bytes(const std::string& header, size_t data_bytes, std::optional<uint64_t> header_len = {}) {
    const uint64_t n = header_len.value_or(header.size());
    std::vector<uint8_t> out;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
    out.insert(out.end(), header.begin(), header.end());
    for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<uint8_t>(i * 7 + 1));
    return out;
}

model::Result<model::SafetensorsHeader> Parse(const std::vector<uint8_t>& bytes) {
    return ParseSafetensorsHeader(bytes.data(), bytes.size());
}

// Parses and expects failure; returns the message.
std::string ParseError(const std::vector<uint8_t>& bytes) {
    auto r = Parse(bytes);
    EXPECT_FALSE(r.ok()) << "accepted " << bytes.size() << " bytes";
    return r.ok() ? std::string() : r.error();
}

// ---------------------------------------------------------------------------------------------
// Valid headers

TEST(SafetensorsParse, TwoTensorsAndMetadata) {
    // JSON object keys are not in offset order: "z_first" holds the first bytes.
    const std::string header = R"({"__metadata__": {"format": "pt", "note": "x"},
        "a_second": {"dtype": "F16", "shape": [4], "data_offsets": [24, 32]},
        "z_first": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}})";
    auto r = Parse(Bytes(header, 32));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->data_offset, 8 + header.size());
    ASSERT_EQ(r->tensors.size(), 2u);

    const model::TensorInfo& first = r->tensors[0];  // sorted by begin
    EXPECT_EQ(first.name, "z_first");
    EXPECT_EQ(first.dtype, Dtype::F32);
    EXPECT_EQ(first.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(first.begin, 0u);
    EXPECT_EQ(first.end, 24u);
    EXPECT_EQ(first.NumElements(), 6u);

    const model::TensorInfo& second = r->tensors[1];
    EXPECT_EQ(second.name, "a_second");
    EXPECT_EQ(second.dtype, Dtype::F16);
    EXPECT_EQ(second.shape, (std::vector<int64_t>{4}));
    EXPECT_EQ(second.begin, 24u);
    EXPECT_EQ(second.end, 32u);
    EXPECT_EQ(second.NumElements(), 4u);

    EXPECT_EQ(r->metadata.size(), 2u);
    EXPECT_EQ(r->metadata.at("format"), "pt");
    ASSERT_NE(r->Find("a_second"), nullptr);
    EXPECT_EQ(r->Find("a_second")->begin, 24u);
    EXPECT_EQ(r->Find("__metadata__"), nullptr);
    EXPECT_EQ(r->Find("missing"), nullptr);
}

TEST(SafetensorsParse, ScalarShape) {
    auto r = Parse(Bytes(R"({"s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}})", 4));
    ASSERT_TRUE(r.ok()) << r.error();
    ASSERT_EQ(r->tensors.size(), 1u);
    EXPECT_TRUE(r->tensors[0].shape.empty());
    EXPECT_EQ(r->tensors[0].NumElements(), 1u);
}

TEST(SafetensorsParse, ZeroSizeTensors) {
    auto r = Parse(Bytes(R"({"e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [0, 0]},
                            "w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
                            "z": {"dtype": "I64", "shape": [5, 0], "data_offsets": [4, 4]}})",
                         4));
    ASSERT_TRUE(r.ok()) << r.error();
    ASSERT_EQ(r->tensors.size(), 3u);
    ASSERT_NE(r->Find("e"), nullptr);
    EXPECT_EQ(r->Find("e")->NumElements(), 0u);
    EXPECT_EQ(r->Find("z")->NumElements(), 0u);
    EXPECT_EQ(r->Find("w")->dtype, Dtype::BF16);
}

TEST(SafetensorsParse, EmptyHeaderNoTensors) {
    auto r = Parse(Bytes("{}", 0));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_TRUE(r->tensors.empty());
    EXPECT_EQ(r->data_offset, 10u);
}

TEST(SafetensorsParse, HeaderPaddedWithSpaces) {
    auto r = Parse(Bytes(R"({"w": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]}}     )", 3));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->tensors.size(), 1u);
    // NULs as some writers pad, spaces after them too: read (JSON text itself holds no NUL).
    for (const std::string& padding : {std::string(4, '\0'), std::string("\0\0  ", 4)}) {
        auto padded = Parse(Bytes(R"({"w": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]}})" + padding, 3));
        ASSERT_TRUE(padded.ok()) << padded.error();
        EXPECT_EQ(padded->tensors.size(), 1u);
    }
    auto inside = Parse(Bytes(std::string(R"({"w": {"dtype": "U8",)") + '\0' + R"( "shape": [3], "data_offsets": [0, 3]}})", 3));
    EXPECT_FALSE(inside.ok()) << "a NUL inside the header's object";
}

// A header whose length's low byte is 0x80 (128, 384, 1152 bytes: a pickle's PROTO opcode, as a
// legacy torch.save file begins) is a safetensors file all the same: its header follows at byte 8.
// Such files were refused as legacy torch.save files, ssaviz's own trainer's among them.
TEST(SafetensorsParse, AHeaderLengthThatLooksLikeAPickleIsStillSafetensors) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/safetensors_0x80";
    fs::create_directories(dir);
    for (size_t length : {size_t{128}, size_t{384}, size_t{1152}}) {
        std::string header = R"({"w": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]}})";
        header.resize(length, ' ');
        const std::vector<uint8_t> bytes = Bytes(header, 3);
        ASSERT_EQ(bytes[0], 0x80);
        const std::string path = dir + "/w" + std::to_string(length) + ".safetensors";
        std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        auto w = model::OpenWeights(path);
        ASSERT_TRUE(w.ok()) << length << ": " << w.error();
        EXPECT_EQ(w->format, "safetensors");
        EXPECT_EQ(w->tensors.size(), 1u);
    }
}

// ---------------------------------------------------------------------------------------------
// Abuse cases: each is rejected with a message naming the tensor and the numbers

TEST(SafetensorsAbuse, EmptyBuffer) {
    auto r = ParseSafetensorsHeader(nullptr, 0);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(Has(r.error(), "0 bytes")) << r.error();
}

TEST(SafetensorsAbuse, FiveByteBuffer) {
    const std::vector<uint8_t> bytes = {2, 0, 0, 0, 0};
    std::string e = ParseError(bytes);
    EXPECT_TRUE(Has(e, "5 bytes")) << e;
}

TEST(SafetensorsAbuse, HeaderLengthBeyondFile) {
    std::string e = ParseError(Bytes("{}", 4, /*header_len=*/100));
    EXPECT_TRUE(Has(e, "header length 100")) << e;
    EXPECT_TRUE(Has(e, "6 bytes")) << e;  // 2 header + 4 data bytes follow the length
}

TEST(SafetensorsAbuse, HeaderLengthTwoToThe63) {
    std::string e = ParseError(Bytes("{}", 0, /*header_len=*/uint64_t{1} << 63));
    EXPECT_TRUE(Has(e, "9223372036854775808")) << e;
}

TEST(SafetensorsAbuse, HeaderLengthAllOnes) {
    std::string e = ParseError(Bytes("{}", 0, /*header_len=*/std::numeric_limits<uint64_t>::max()));
    EXPECT_TRUE(Has(e, "18446744073709551615")) << e;
}

TEST(SafetensorsAbuse, HeaderLengthTooShortForJson) {
    std::string e = ParseError(Bytes("{}", 0, /*header_len=*/1));
    EXPECT_TRUE(Has(e, "header length 1")) << e;
}

TEST(SafetensorsAbuse, HeaderNotJson) {
    std::string e = ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [1], )", 4));
    EXPECT_TRUE(Has(e, "not valid JSON")) << e;
}

TEST(SafetensorsAbuse, HeaderTrailingGarbage) {
    std::string e = ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}xyz)", 4));
    EXPECT_TRUE(Has(e, "JSON")) << e;
}

TEST(SafetensorsAbuse, HeaderIsJsonArray) {
    std::string e = ParseError(Bytes(R"([{"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}])", 4));
    EXPECT_TRUE(Has(e, "not a JSON object")) << e;
}

TEST(SafetensorsAbuse, TruncatedData) {
    std::string e = ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 10));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "[0, 16)")) << e;
    EXPECT_TRUE(Has(e, "10 data bytes")) << e;
}

TEST(SafetensorsAbuse, OffsetsFarOutOfBounds) {
    std::string e = ParseError(Bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                         "w": {"dtype": "F32", "shape": [1], "data_offsets": [18446744073709551611, 18446744073709551615]}})",
                                     4));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "18446744073709551615")) << e;
}

TEST(SafetensorsAbuse, OverlappingOffsets) {
    std::string e = ParseError(Bytes(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                         "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                                     12));
    EXPECT_TRUE(Has(e, "'b'")) << e;
    EXPECT_TRUE(Has(e, "overlaps")) << e;
    EXPECT_TRUE(Has(e, "[4, 12)")) << e;
    EXPECT_TRUE(Has(e, "ends at 8")) << e;
}

TEST(SafetensorsAbuse, SameOffsetsTwice) {
    std::string e = ParseError(Bytes(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                         "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                                     8));
    EXPECT_TRUE(Has(e, "overlaps")) << e;
}

TEST(SafetensorsAbuse, GapBetweenTensors) {
    std::string e = ParseError(Bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                         "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                                     12));
    EXPECT_TRUE(Has(e, "'b'")) << e;
    EXPECT_TRUE(Has(e, "gap")) << e;
    EXPECT_TRUE(Has(e, "byte 4")) << e;
}

TEST(SafetensorsAbuse, GapBeforeFirstTensor) {
    std::string e = ParseError(Bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8));
    EXPECT_TRUE(Has(e, "'a'")) << e;
    EXPECT_TRUE(Has(e, "gap")) << e;
}

TEST(SafetensorsAbuse, TrailingBytesNotCovered) {
    std::string e = ParseError(Bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 12));
    EXPECT_TRUE(Has(e, "cover 4")) << e;
    EXPECT_TRUE(Has(e, "12 data bytes")) << e;
}

TEST(SafetensorsAbuse, EndBeforeBegin) {
    std::string e = ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", 8));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "[8, 4]")) << e;
}

TEST(SafetensorsAbuse, UnknownDtype) {
    std::string e = ParseError(Bytes(R"({"w": {"dtype": "F12", "shape": [1], "data_offsets": [0, 4]}})", 4));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "F12")) << e;
}

TEST(SafetensorsAbuse, DtypeNotAString) {
    std::string e = ParseError(Bytes(R"({"w": {"dtype": 32, "shape": [1], "data_offsets": [0, 4]}})", 4));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "dtype")) << e;
}

TEST(SafetensorsAbuse, ShapeTimesDtypeSizeDiffersFromSpan) {
    std::string e = ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "[3]")) << e;
    EXPECT_TRUE(Has(e, "12 bytes")) << e;
    EXPECT_TRUE(Has(e, "span 8")) << e;
}

TEST(SafetensorsAbuse, ShapeProductOverflows64Bits) {
    std::string e =
        ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", 0));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "overflow")) << e;
    EXPECT_TRUE(Has(e, "4294967296")) << e;
}

TEST(SafetensorsAbuse, ShapeProductWrapsToSpan) {
    // 2^62 x 4 bytes wraps to exactly 0 in 64 bits: must not be taken for an empty tensor.
    std::string e = ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 0]}})", 0));
    EXPECT_TRUE(Has(e, "'w'")) << e;
}

TEST(SafetensorsAbuse, HugeDimensionWithZeroDimension) {
    // A zero dimension makes the product 0, but each dimension must still be sane.
    std::string e = ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [0, 18446744073709551615], "data_offsets": [0, 0]}})", 0));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "18446744073709551615")) << e;
}

TEST(SafetensorsAbuse, NegativeDimension) {
    std::string e = ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}})", 16));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "-1")) << e;
}

TEST(SafetensorsAbuse, FractionalDimension) {
    std::string e = ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "1.5")) << e;
}

TEST(SafetensorsAbuse, DataOffsetsWithThreeEntries) {
    std::string e = ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})", 8));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "data_offsets")) << e;
    EXPECT_TRUE(Has(e, "[0, 4, 8]")) << e;
}

TEST(SafetensorsAbuse, NegativeDataOffset) {
    std::string e = ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "data_offsets")) << e;
}

TEST(SafetensorsAbuse, DuplicateTensorNames) {
    std::string e = ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                         "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                                     8));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "twice")) << e;
}

TEST(SafetensorsAbuse, DuplicateNamesThatWouldOtherwiseParse) {
    // The second entry alone would be a valid file: the duplicate must still be caught.
    std::string e = ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                         "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                                     4));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "twice")) << e;
}

TEST(SafetensorsAbuse, EntryNotAnObject) {
    std::string e = ParseError(Bytes(R"({"w": [0, 4]})", 4));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "not an object")) << e;
}

TEST(SafetensorsAbuse, MissingDtype) {
    std::string e = ParseError(Bytes(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "dtype")) << e;
}

TEST(SafetensorsAbuse, MetadataNotAnObject) {
    std::string e = ParseError(Bytes(R"({"__metadata__": "pt"})", 0));
    EXPECT_TRUE(Has(e, "__metadata__")) << e;
}

TEST(SafetensorsAbuse, TooManyDimensions) {
    std::string e = ParseError(Bytes(
        R"({"w": {"dtype": "U8", "shape": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1], "data_offsets": [0, 1]}})", 1));
    EXPECT_TRUE(Has(e, "'w'")) << e;
    EXPECT_TRUE(Has(e, "shape")) << e;
}

// ---------------------------------------------------------------------------------------------
// Issue 20: deep values, huge headers and names that would break the message

std::string Deep(size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

TEST(SafetensorsAbuse, ValueNestedAMillionDeepWhereAStringOrNumberBelongs) {
    // The error message used to dump() the value recursively: a stack overflow.
    for (const char* field : {"dtype", "shape", "data_offsets"}) {
        std::map<std::string, std::string> values = {{"dtype", "\"F32\""}, {"shape", "[1]"}, {"data_offsets", "[0, 4]"}};
        values[field] = Deep(1'000'000);
        const std::string entry = "{\"dtype\": " + values["dtype"] + ", \"shape\": " + values["shape"] +
                                  ", \"data_offsets\": " + values["data_offsets"] + "}";
        std::string e = ParseError(Bytes("{\"w\": " + entry + "}", 4));
        EXPECT_TRUE(Has(e, "nested more than 64 levels deep")) << field << ": " << e;
        EXPECT_LT(e.size(), 300u) << field;
    }
}

TEST(SafetensorsAbuse, NestedValuesAreDescribedNotDumped) {
    std::string e = ParseError(Bytes(R"({"w": {"dtype": [[["F32"]]], "shape": [1], "data_offsets": [0, 4]}})", 4));
    EXPECT_TRUE(Has(e, "unknown dtype an array of 1")) << e;
    e = ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [[0], {"a": [4]}]}})", 4));
    EXPECT_TRUE(Has(e, "got an array of 2")) << e;
    e = ParseError(Bytes(R"({"w": {"dtype": "F32", "shape": [{"x": [1]}], "data_offsets": [0, 4]}})", 4));
    EXPECT_TRUE(Has(e, "dimension (an object of 1 keys)")) << e;
}

TEST(SafetensorsAbuse, NamesWithControlCharactersAreEscaped) {
    // A name holding a newline and terminal escapes (clear screen, red) must not split the message.
    const std::string header = "{\"w\\n\\u001b[2J\\u001b[31mx\": {\"dtype\": \"F12\", \"shape\": [1], \"data_offsets\": [0, 4]}}";
    std::string e = ParseError(Bytes(header, 4));
    EXPECT_TRUE(Has(e, "tensor 'w\\n\\x1b[2J\\x1b[31mx': unknown dtype 'F12'")) << e;
    EXPECT_EQ(e.find_first_of("\n\x1b"), std::string::npos) << e;
    e = ParseError(Bytes("{\"a\\r\\u0007\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
                         "\"a\\r\\u0007\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
                         4));
    EXPECT_TRUE(Has(e, "header names tensor 'a\\r\\x07' twice")) << e;
    e = ParseError(Bytes("{\"\\u001b]0;title\\u0007\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8));
    EXPECT_TRUE(Has(e, "tensor '\\x1b]0;title\\x07' data [4, 8) leaves a gap")) << e;
}

// A header of `n` one-element F32 tensors, written straight into the bytes of a file.
std::vector<uint8_t> ManyTensors(size_t n) {
    std::string header = "{";
    header.reserve(n * 72);
    for (size_t i = 0; i < n; ++i) {
        header += (i ? ",\"t" : "\"t") + std::to_string(i) + R"(":{"dtype":"F32","shape":[1],"data_offsets":[)" +
                  std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]}";
    }
    header += "}";
    std::vector<uint8_t> out = Bytes(header, 0);
    out.resize(out.size() + 4 * n);
    return out;
}

TEST(SafetensorsAbuse, AMillionTensorsParseInLinearTime) {
    // 30,000 names took 16 s (the parser callback rescanned the object once a name); a million
    // now parse in seconds. The limit is a million: one more is refused before the tree is built.
    const size_t n = model::kMaxSafetensorsTensors;
    {
        const std::vector<uint8_t> bytes = ManyTensors(n);
        const auto start = std::chrono::steady_clock::now();
        auto r = Parse(bytes);
        ASSERT_TRUE(r.ok()) << r.error();
        std::printf("[ timing   ] safetensors header of %zu tensors (%.1f MB) parsed in %.3f s\n", n, bytes.size() / 1e6,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        ASSERT_EQ(r->tensors.size(), n);
        EXPECT_EQ(r->Find("t999999")->begin, 4u * 999'999);
        EXPECT_EQ(r->Find("t1000000"), nullptr);
    }
    std::string e = ParseError(ManyTensors(n + 1));
    EXPECT_TRUE(Has(e, "header names more than 1000000 tensors")) << e;
}

TEST(SafetensorsAbuse, JsonValuesAreBounded) {
    // 16 million and one zeros in the metadata: 32 MB of header that would be ~1 GB as a tree.
    std::string header = R"({"__metadata__": {"x": [0)";
    for (size_t i = 0; i < 16'000'000; ++i) header += ",0";
    std::string e = ParseError(Bytes(header + "]}}", 0));
    EXPECT_TRUE(Has(e, "more than 16000000 JSON values")) << e;
}

// ---------------------------------------------------------------------------------------------
// Committed abuse fixtures, opened from disk

TEST(SafetensorsFixtures, EachIsRejectedWithItsMessage) {
    struct Case { const char* file; const char* expect; };
    const Case cases[] = {
        {"empty.safetensors", "0 bytes"},
        {"short.safetensors", "5 bytes"},
        {"huge_header_len.safetensors", "header length 9223372036854775808"},
        {"header_len_past_end.safetensors", "header length 1000 exceeds"},
        {"not_json.safetensors", "not valid JSON"},
        {"not_object.safetensors", "not a JSON object"},
        {"truncated.safetensors", "tensor 'w' data [0, 16) is not within the file's 8 data bytes"},
        {"out_of_bounds.safetensors", "tensor 'w' data [4096, 4100) is not within"},
        {"overlap.safetensors", "tensor 'b' data [4, 12) overlaps the previous tensor, which ends at 8"},
        {"gap.safetensors", "tensor 'b' data [8, 12) leaves a gap after byte 4"},
        {"trailing.safetensors", "tensors cover 4 of the file's 8 data bytes"},
        {"end_before_begin.safetensors", "tensor 'w': data_offsets [8, 4] end before begin"},
        {"bad_dtype.safetensors", "tensor 'w': unknown dtype 'F12'"},
        {"size_mismatch.safetensors", "tensor 'w': shape [3] of F32 needs 12 bytes but data_offsets span 8"},
        {"shape_overflow.safetensors", "overflows 64 bits"},
        {"negative_dim.safetensors", "not a non-negative integer"},
        {"duplicate.safetensors", "header names tensor 'w' twice"},
    };
    for (const Case& c : cases) {
        const std::string path = std::string(SSAVIZ_SOURCE_DIR "/tests/model/fixtures/safetensors/") + c.file;
        SCOPED_TRACE(path);
        ASSERT_TRUE(fs::is_regular_file(path)) << "fixture missing";
        auto r = SafetensorsFile::Open(path);
        ASSERT_FALSE(r.ok()) << "accepted";
        EXPECT_TRUE(Has(r.error(), c.expect)) << r.error();
        EXPECT_TRUE(Has(r.error(), c.file)) << r.error();  // the message names the file
    }
}

// ---------------------------------------------------------------------------------------------
// Writing and opening files

std::string TestOut(const std::string& name) {
    const std::string dir = SSAVIZ_TEST_OUT "/model_io";
    fs::create_directories(dir);
    return dir + "/" + name;
}

TEST(SafetensorsFile, WriteThenOpenRoundTrip) {
    std::vector<float> a = {1.0f, -2.5f, 3.25f, 0.0f, 1e-8f, -1e8f};
    std::vector<uint16_t> b = {0x3f80, 0xbf80, 0x4000, 0x0000, 0x7f7f};  // BF16
    int64_t c = -1234567890123LL;
    std::vector<uint8_t> d = {1, 2, 3};  // U8, odd size: the next tensor starts unaligned
    std::vector<double> e = {3.141592653589793};
    const std::vector<TensorToWrite> tensors = {
        {"layer.a", Dtype::F32, {2, 3}, a.data()}, {"layer.b", Dtype::BF16, {5}, b.data()},
        {"c", Dtype::I64, {}, &c},                 {"d", Dtype::U8, {3}, d.data()},
        {"e", Dtype::F64, {1, 1}, e.data()},       {"empty", Dtype::F32, {0, 4}, nullptr},
    };
    const std::string path = TestOut("roundtrip.safetensors");
    auto status = model::WriteSafetensors(path, tensors, {{"format", "pt"}, {"seed", "7"}});
    ASSERT_TRUE(status.ok()) << status.error();

    auto r = SafetensorsFile::Open(path);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->header.data_offset % 8, 0u) << r->header.data_offset;
    EXPECT_EQ(r->header.metadata.at("format"), "pt");
    EXPECT_EQ(r->header.metadata.at("seed"), "7");
    ASSERT_EQ(r->header.tensors.size(), tensors.size());
    for (const TensorToWrite& t : tensors) {
        SCOPED_TRACE(t.name);
        const model::TensorInfo* info = r->header.Find(t.name);
        ASSERT_NE(info, nullptr);
        EXPECT_EQ(info->dtype, t.dtype);
        EXPECT_EQ(info->shape, t.shape);
        uint64_t bytes = model::DtypeSize(t.dtype);
        for (int64_t dim : t.shape) bytes *= static_cast<uint64_t>(dim);
        ASSERT_EQ(info->end - info->begin, bytes);
        if (bytes > 0) {
            EXPECT_EQ(std::memcmp(r->Data(*info), t.data, bytes), 0);
        }
    }
    EXPECT_EQ(r->file->size(), r->header.data_offset + 24 + 10 + 8 + 3 + 8);
}

TEST(SafetensorsFile, WriteNoTensors) {
    const std::string path = TestOut("no_tensors.safetensors");
    auto status = model::WriteSafetensors(path, {});
    ASSERT_TRUE(status.ok()) << status.error();
    auto r = SafetensorsFile::Open(path);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_TRUE(r->header.tensors.empty());
    EXPECT_EQ(r->header.data_offset % 8, 0u);
}

TEST(SafetensorsFile, WriteToMissingFolderFails) {
    float x = 1;
    auto status = model::WriteSafetensors(SSAVIZ_TEST_OUT "/no_such_dir/x.safetensors", {{"x", Dtype::F32, {1}, &x}});
    ASSERT_FALSE(status.ok());
    EXPECT_TRUE(Has(status.error(), "no_such_dir/x.safetensors")) << status.error();
}

TEST(SafetensorsFile, OpenMissingPath) {
    const std::string path = SSAVIZ_TEST_OUT "/no_such_file.safetensors";
    auto r = SafetensorsFile::Open(path);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(Has(r.error(), path)) << r.error();
    EXPECT_TRUE(Has(r.error(), "cannot open")) << r.error();
}

TEST(SafetensorsFile, OpenDirectory) {
    const std::string path = SSAVIZ_TEST_OUT;
    auto r = SafetensorsFile::Open(path);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(Has(r.error(), path)) << r.error();
    EXPECT_TRUE(Has(r.error(), "not a regular file")) << r.error();
}

// ---------------------------------------------------------------------------------------------
// Model folders: a tiny random SSA model, then corrupted copies, each opened with Engine::Open

class ModelFolder : public ::testing::Test {
protected:
    // Writes a fresh tiny model into a folder named after the test.
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        m_dir = SSAVIZ_TEST_OUT "/model_io/" + std::string(info->name());
        fs::remove_all(m_dir);
        model::ModelConfig c;
        c.n_layer = 2;
        c.n_head = 2;
        c.n_embd = 16;
        c.n_positions = 32;
        c.vocab_size = 1;  // replaced by the tokenizer's
        c.query = {model::PositionForm::Sigmoid, model::TokenForm::Shared, model::Combine::Sum};
        auto status = model::WriteRandomModel(c, 42, SSAVIZ_SOURCE_DIR "/assets/tokenizers/gpt2", m_dir);
        ASSERT_TRUE(status.ok()) << status.error();
    }
    void TearDown() override {
        if (!HasFailure()) fs::remove_all(m_dir);
    }

    std::string Weights() const { return m_dir + "/model.safetensors"; }

    // Rewrites model.safetensors through `edit`, which may drop or change the tensors listed.
    void RewriteWeights(const std::function<void(std::vector<TensorToWrite>&)>& edit) {
        std::vector<TensorToWrite> tensors;
        std::map<std::string, std::string> metadata;
        {
            auto file = SafetensorsFile::Open(Weights());
            ASSERT_TRUE(file.ok()) << file.error();
            metadata = file->header.metadata;
            for (const auto& t : file->header.tensors) {
                const uint8_t* p = file->Data(t);
                m_keep.emplace_back(p, p + (t.end - t.begin));
                tensors.push_back({t.name, t.dtype, t.shape, m_keep.back().data()});
            }
        }
        edit(tensors);
        auto status = model::WriteSafetensors(Weights(), tensors, metadata);
        ASSERT_TRUE(status.ok()) << status.error();
    }

    nlohmann::json ReadConfigJson() const {
        std::ifstream in(m_dir + "/config.json");
        return nlohmann::json::parse(in);
    }
    void WriteConfigJson(const nlohmann::json& j) const { std::ofstream(m_dir + "/config.json") << j.dump(2); }

    std::string OpenError() const {
        auto r = model::Engine::Open(m_dir, "cpu");
        EXPECT_FALSE(r.ok()) << "opened " << m_dir;
        return r.ok() ? std::string() : r.error();
    }

    std::string m_dir;
    std::vector<std::vector<uint8_t>> m_keep;  // tensor bytes while rewriting
};

TEST_F(ModelFolder, TinyModelOpens) {
    auto r = model::Engine::Open(m_dir, "cpu");
    ASSERT_TRUE(r.ok()) << r.error();
    const model::ModelInfo& info = (*r)->Info();
    EXPECT_EQ(info.config.n_layer, 2);
    EXPECT_EQ(info.config.n_head, 2);
    EXPECT_EQ(info.config.n_embd, 16);
    EXPECT_EQ(info.config.n_positions, 32);
    EXPECT_EQ(info.config.vocab_size, 50257);
    EXPECT_EQ(info.config.query.position, model::PositionForm::Sigmoid);
    EXPECT_EQ(info.config.query.token, model::TokenForm::Shared);
    EXPECT_EQ(info.config.query.combine, model::Combine::Sum);
    EXPECT_FALSE(info.config.value.Active());
    EXPECT_EQ(info.tokenizer_vocab, 50257u);
    EXPECT_EQ(info.device, "cpu");
    EXPECT_EQ(info.layout, "conv1d");
    EXPECT_TRUE(info.unused_tensors.empty());
    EXPECT_GT(info.parameters, 50257 * 16);

    auto file = SafetensorsFile::Open(Weights());
    ASSERT_TRUE(file.ok()) << file.error();
    EXPECT_EQ(file->header.data_offset % 8, 0u);
    EXPECT_NE(file->header.Find("h.1.attn.ssa_q_pos"), nullptr);
    EXPECT_NE(file->header.Find("h.1.attn.ssa_q_tok.weight"), nullptr);
}

TEST_F(ModelFolder, WeightsTruncatedToHalf) {
    const auto size = fs::file_size(Weights());
    fs::resize_file(Weights(), size / 2);
    std::string e = OpenError();
    EXPECT_TRUE(Has(e, "model.safetensors")) << e;
    EXPECT_TRUE(Has(e, "is not within the file's")) << e;
    EXPECT_TRUE(Has(e, "tensor '")) << e;
}

TEST_F(ModelFolder, TensorMissing) {
    RewriteWeights([](std::vector<TensorToWrite>& tensors) {
        auto it = std::find_if(tensors.begin(), tensors.end(), [](const TensorToWrite& t) { return t.name == "h.1.ln_2.weight"; });
        ASSERT_NE(it, tensors.end());
        tensors.erase(it);
    });
    std::string e = OpenError();
    EXPECT_TRUE(Has(e, "model.safetensors")) << e;
    EXPECT_TRUE(Has(e, "no tensor 'h.1.ln_2.weight'")) << e;
}

TEST_F(ModelFolder, ShapeMismatchAgainstConfig) {
    nlohmann::json j = ReadConfigJson();
    j["n_embd"] = 32;
    WriteConfigJson(j);
    std::string e = OpenError();
    EXPECT_TRUE(Has(e, "tensor '")) << e;
    EXPECT_TRUE(Has(e, "[50257, 16]")) << e;  // in the file
    EXPECT_TRUE(Has(e, "[50257, 32]")) << e;  // what config.json implies
}

TEST_F(ModelFolder, LayerShapeMismatch) {
    RewriteWeights([](std::vector<TensorToWrite>& tensors) {
        for (auto& t : tensors)
            if (t.name == "h.1.mlp.c_fc.weight") t.shape = {32, 32};  // [16, 64] has the same byte count
    });
    std::string e = OpenError();
    EXPECT_TRUE(Has(e, "h.1.mlp.c_fc.weight")) << e;
    EXPECT_TRUE(Has(e, "[32, 32]")) << e;
    EXPECT_TRUE(Has(e, "[16, 64]")) << e;
}

TEST_F(ModelFolder, UnsupportedWeightDtype) {
    RewriteWeights([](std::vector<TensorToWrite>& tensors) {
        for (auto& t : tensors)
            if (t.name == "h.0.attn.c_proj.weight") t.dtype = Dtype::I32;  // same 4 bytes per element
    });
    std::string e = OpenError();
    EXPECT_TRUE(Has(e, "h.0.attn.c_proj.weight")) << e;
    EXPECT_TRUE(Has(e, "I32")) << e;
}

TEST_F(ModelFolder, HalfPrecisionWeightLoads) {
    // F16 is a supported storage dtype: one weight stored as F16 (values reinterpreted) loads.
    std::vector<uint16_t> half(16, 0x3c00);  // 1.0
    RewriteWeights([&](std::vector<TensorToWrite>& tensors) {
        for (auto& t : tensors)
            if (t.name == "h.0.ln_1.weight") { t.dtype = Dtype::F16; t.data = half.data(); }
    });
    auto r = model::Engine::Open(m_dir, "cpu");
    ASSERT_TRUE(r.ok()) << r.error();
}

TEST_F(ModelFolder, NanInWeight) {
    uint64_t at = 0;
    {
        auto file = SafetensorsFile::Open(Weights());
        ASSERT_TRUE(file.ok()) << file.error();
        const model::TensorInfo* info = file->header.Find("h.1.attn.c_attn.weight");
        ASSERT_NE(info, nullptr);
        at = file->header.data_offset + info->begin + 4 * 5;  // the sixth float
    }
    {
        std::fstream f(Weights(), std::ios::in | std::ios::out | std::ios::binary);
        ASSERT_TRUE(f.good());
        const float nan = std::numeric_limits<float>::quiet_NaN();
        f.seekp(static_cast<std::streamoff>(at));
        f.write(reinterpret_cast<const char*>(&nan), sizeof nan);
    }
    std::string e = OpenError();
    EXPECT_TRUE(Has(e, "h.1.attn.c_attn.weight")) << e;
    EXPECT_TRUE(Has(e, "NaN")) << e;
}

TEST_F(ModelFolder, SsaConfigWithoutItsTensors) {
    nlohmann::json j = ReadConfigJson();
    j["ssa"]["value"] = {{"token", "feature"}};
    WriteConfigJson(j);
    std::string e = OpenError();
    EXPECT_TRUE(Has(e, "ssa_v_tok.weight")) << e;
    EXPECT_TRUE(Has(e, "no tensor")) << e;
}

TEST_F(ModelFolder, ConfigWithMoreLayersThanTheFile) {
    nlohmann::json j = ReadConfigJson();
    j["n_layer"] = 3;
    WriteConfigJson(j);
    std::string e = OpenError();
    EXPECT_TRUE(Has(e, "h.2.")) << e;
}

TEST_F(ModelFolder, ConfigWithFewerLayersThanTheFile) {
    nlohmann::json j = ReadConfigJson();
    j["n_layer"] = 1;
    WriteConfigJson(j);
    std::string e = OpenError();
    EXPECT_TRUE(Has(e, "more layers")) << e;
}

// Without config.json the shape comes from the tensors; the SSA position form does not, so the
// error asks for it by flag.
TEST_F(ModelFolder, MissingConfigJson) {
    fs::remove(m_dir + "/config.json");
    std::string e = OpenError();
    EXPECT_TRUE(Has(e, "config.json")) << e;
    EXPECT_TRUE(Has(e, "--query-form")) << e;
    model::ConfigHints hints;
    hints.query = *model::ParseFormSpec("sigmoid,shared,sum");
    auto r = model::Engine::Open(m_dir, "cpu", hints);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ((*r)->Info().config.n_layer, 2);
    EXPECT_FALSE((*r)->Info().notes.empty());
}

TEST_F(ModelFolder, BrokenConfigJson) {
    std::ofstream(m_dir + "/config.json") << "{\"n_layer\": 2,";
    std::string e = OpenError();
    EXPECT_TRUE(Has(e, "config.json")) << e;
    EXPECT_TRUE(Has(e, "JSON")) << e;
}

TEST_F(ModelFolder, MissingWeightsFile) {
    fs::remove(Weights());
    std::string e = OpenError();
    EXPECT_TRUE(Has(e, "model.safetensors")) << e;
    EXPECT_TRUE(Has(e, "no weights")) << e;
}

TEST_F(ModelFolder, MissingTokenizerFiles) {
    fs::remove(m_dir + "/vocab.json");
    fs::remove(m_dir + "/merges.txt");
    std::string e = OpenError();
    EXPECT_TRUE(Has(e, "tokenizer")) << e;
    EXPECT_TRUE(Has(e, "vocab.json")) << e;
}

TEST_F(ModelFolder, MissingMergesOnly) {
    fs::remove(m_dir + "/merges.txt");
    std::string e = OpenError();
    EXPECT_TRUE(Has(e, "tokenizer")) << e;
}

TEST_F(ModelFolder, FolderDoesNotExist) {
    const std::string missing = m_dir + "/does_not_exist";
    auto r = model::Engine::Open(missing, "cpu");
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(Has(r.error(), missing)) << r.error();
    EXPECT_TRUE(Has(r.error(), "does not exist")) << r.error();
}

}  // namespace
