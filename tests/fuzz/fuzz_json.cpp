// The JSON entry points on arbitrary text: the first byte picks one, the rest is the JSON.
//   0: ParseConfig (config.json). An accepted config must be usable and valid; GPT-2's must
//      survive ConfigToJson (the RoPE families' model_types have no GPT-2 config to write back).
//   1: ParseJsonText (tokenizer.json and every other JSON file ssaviz reads). Accepted JSON nests
//      at most kMaxJsonDepth deep and its values describe themselves in a bounded line.
//   2: ParseSafetensorsHeader on the text as a header, with a correct length and 64 data bytes.
// Errors must be one line: every value and key from the text is described or escaped, never dumped.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/io/config.h"
#include "model/io/files.h"
#include "model/io/safetensors.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

void CheckOneLine(const std::string& error) {
    FUZZ_CHECK(!error.empty());
    FUZZ_CHECK(error.find_first_of("\n\r\x1b") == std::string::npos);
}

void FuzzConfig(std::string_view text) {
    auto c = model::ParseConfig(text, "config.json");
    if (!c) return CheckOneLine(c.error());
    FUZZ_CHECK(c->n_layer >= 1 && c->n_layer <= 1024 && c->n_head >= 1 && c->n_head <= 1024);
    FUZZ_CHECK(c->n_positions >= 1 && c->vocab_size >= 1);
    FUZZ_CHECK(c->layer_norm_epsilon > 0 && c->layer_norm_epsilon <= 1);
    FUZZ_CHECK(c->Validate("config.json").ok());
    if (c->Rope()) {  // an HF folder of a RoPE family (model_type): no GPT-2 config.json to write back
        FUZZ_CHECK(c->HeadSize() >= 1 && c->n_head % c->KvHeads() == 0);
        // 0 rotated dims is HF's int(head size x rotary_pct) for a small pct: no rotation (Rope returns x).
        FUZZ_CHECK(c->rope_n_elem >= 0 && c->rope_n_elem <= c->HeadSize() && c->rope_n_elem % 2 == 0);
        FUZZ_CHECK(c->sliding_window >= 0);
        return;
    }
    FUZZ_CHECK(c->n_embd % c->n_head == 0);
    auto again = model::ParseConfig(model::ConfigToJson(*c).dump(), "round trip");
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(model::ConfigToJson(*again) == model::ConfigToJson(*c));
}

// Depth of an accepted value, walked with an explicit stack (a deep value must not be walked
// recursively, which is the point of the cap).
int Depth(const nlohmann::json& root) {
    int deepest = 0;
    std::vector<std::pair<const nlohmann::json*, int>> stack{{&root, root.is_structured() ? 1 : 0}};
    while (!stack.empty()) {
        auto [value, depth] = stack.back();
        stack.pop_back();
        deepest = std::max(deepest, depth);
        if (value->is_structured())
            for (const auto& child : *value) stack.push_back({&child, depth + (child.is_structured() ? 1 : 0)});
    }
    return deepest;
}

void FuzzJsonText(std::string_view text) {
    auto parsed = model::ParseJsonText(text);
    if (!parsed) {
        FUZZ_CHECK(!parsed.error().empty());
        return;
    }
    FUZZ_CHECK(Depth(*parsed) <= model::kMaxJsonDepth);
    FUZZ_CHECK(model::DescribeJson(*parsed).size() < 2048);  // 200 characters, each escaped to at most 6
    if (parsed->is_object())
        for (const auto& [key, value] : parsed->items()) {
            FUZZ_CHECK(model::EscapeForMessage(key).find_first_of("\n\r\x1b") == std::string::npos);
            const std::string described = model::DescribeJson(value);
            FUZZ_CHECK(described.size() < 2048 && described.find_first_of("\n\r\x1b") == std::string::npos);
        }
}

void FuzzHeader(std::string_view text) {
    std::vector<uint8_t> file(8);
    for (int i = 0; i < 8; ++i) file[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
    file.insert(file.end(), text.begin(), text.end());
    file.resize(file.size() + 64);
    auto header = model::ParseSafetensorsHeader(file.data(), file.size());
    if (!header) return CheckOneLine(header.error());
    FUZZ_CHECK(header->tensors.size() <= model::kMaxSafetensorsTensors);
    uint64_t expected = 0;
    for (const model::TensorInfo& t : header->tensors) {
        FUZZ_CHECK(t.begin == expected && t.end <= 64);
        FUZZ_CHECK(header->Find(t.name) == &t);
        expected = t.end;
    }
    FUZZ_CHECK(expected == 64);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    switch (data[0] % 3) {
        case 0: FuzzConfig(text); break;
        case 1: FuzzJsonText(text); break;
        default: FuzzHeader(text); break;
    }
    return 0;
}
