// Weights in several files (HF's sharded folders) and the memory they take once loaded. Real
// models are split into real shards here (safetensors by WriteSafetensors, pytorch_model-*.bin by
// WriteTorchSave, the index as transformers writes it): PyTorch's reference cases (pytorch_ref)
// and a lit-gpt Llama checkpoint. A sharded folder must give the single file's tensors bit for bit,
// the single file's forward pass exactly, and the reference's within the parity tolerances. Then
// HF's embedding names and prefixes, one test per broken index, and page dropping measured in
// /proc/self/status.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/io/safetensors.h"
#include "model/io/torch_save.h"
#include "model/io/weights.h"
#include "model/nn/forward.h"
#include "model/nn/model_folder_torch.h"
#include "tests/model/reference.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using model::Dtype;
using model::TensorToWrite;

bool Has(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

std::string Fresh(const std::string& name) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/model_io/shards/" + name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

enum class Format { Safetensors, Bin };

// transformers' shard names: model-00001-of-00003.safetensors, pytorch_model-00001-of-00003.bin.
std::string ShardName(Format f, int i, int n) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s-%05d-of-%05d.%s", f == Format::Bin ? "pytorch_model" : "model", i + 1, n,
                  f == Format::Bin ? "bin" : "safetensors");
    return buf;
}

std::string IndexName(Format f) { return f == Format::Bin ? "pytorch_model.bin.index.json" : "model.safetensors.index.json"; }

TensorToWrite ToWrite(const model::StoredTensor& t) {
    EXPECT_TRUE(t.Contiguous()) << t.name;
    return {t.name, t.dtype, t.shape, t.data};
}

void WriteShard(Format f, const std::string& path, const std::vector<TensorToWrite>& tensors) {
    auto s = f == Format::Bin ? model::WriteTorchSave(path, fs::path(path).stem().string(), tensors) : model::WriteSafetensors(path, tensors);
    ASSERT_TRUE(s.ok()) << s.error();
}

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary | std::ios::trunc) << text; }

// `src`'s tensors in `n` shards of consecutive tensors in `dir`, with the index; the shard of each
// tensor returned by name.
std::map<std::string, std::string> Split(const model::WeightFile& src, int n, Format f, const std::string& dir) {
    std::vector<std::vector<TensorToWrite>> shards(n);
    json map = json::object();
    std::map<std::string, std::string> shard_of;
    uint64_t total = 0;
    for (size_t i = 0; i < src.tensors.size(); ++i) {
        const int k = static_cast<int>(i * n / src.tensors.size());
        shards[k].push_back(ToWrite(src.tensors[i]));
        map[src.tensors[i].name] = shard_of[src.tensors[i].name] = ShardName(f, k, n);
        total += src.tensors[i].Extent();
    }
    for (int k = 0; k < n; ++k) WriteShard(f, dir + "/" + ShardName(f, k, n), shards[k]);
    WriteText(dir + "/" + IndexName(f), json{{"metadata", {{"total_size", total}}}, {"weight_map", map}}.dump(2));
    return shard_of;
}

// The same names, dtypes, shapes and bytes, in any order.
void ExpectSameTensors(const model::WeightFile& a, const model::WeightFile& b) {
    ASSERT_EQ(a.tensors.size(), b.tensors.size());
    for (const auto& t : a.tensors) {
        auto it = b.index.find(t.name);
        ASSERT_NE(it, b.index.end()) << t.name;
        const model::StoredTensor& u = b.tensors[it->second];
        EXPECT_EQ(t.dtype, u.dtype) << t.name;
        EXPECT_EQ(t.shape, u.shape) << t.name;
        ASSERT_EQ(t.Extent(), u.Extent()) << t.name;
        EXPECT_EQ(std::memcmp(t.data, u.data, t.Extent()), 0) << t.name << " differs";
    }
}

void ExpectSameForward(const model::SsaGpt& a, const model::SsaGpt& b, const std::vector<int32_t>& ids) {
    auto x = model::Forward(a, ids), y = model::Forward(b, ids);
    ASSERT_TRUE(x.ok() && y.ok()) << (x.ok() ? y.error() : x.error());
    EXPECT_TRUE(at::equal(x->logits, y->logits)) << "logits differ";
    EXPECT_TRUE(at::equal(x->attention, y->attention)) << "attention maps differ";
    EXPECT_TRUE(at::equal(x->tau_q, y->tau_q)) << "tau_q differs";
}

// ---- sharded folders of real models ----

struct ShardCase {
    const char* reference;  // the pytorch_ref case
    const char* source;     // its file to split
    Format format;
    int shards;
};

void PrintTo(const ShardCase& c, std::ostream* os) { *os << c.reference << "/" << c.source << " in " << c.shards << " shards"; }

class ShardedReference : public ::testing::TestWithParam<ShardCase> {};

// Split, then loaded through the folder loader (FindModelFiles picks the index), the shards are
// the single file's tensors and give its forward pass exactly and the reference's within 2e-5.
TEST_P(ShardedReference, SameTensorsAndForwardAsTheSingleFile) {
    const ShardCase& c = GetParam();
    const std::string ref = std::string(SSAVIZ_TEST_OUT) + "/ref/" + c.reference;
    const std::string sub = std::string("sharded_") + (c.format == Format::Bin ? "bin" : "st");
    const std::string dir = ref + "/" + sub;
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy_file(ref + "/config.json", dir + "/config.json");
    auto single = model::OpenWeights(ref + "/" + c.source);
    ASSERT_TRUE(single.ok()) << single.error();
    const auto shard_of = Split(*single, c.shards, c.format, dir);

    auto files = model::FindModelFiles(dir);
    ASSERT_TRUE(files.ok()) << files.error();
    EXPECT_EQ(files->weights, dir + "/" + IndexName(c.format));
    auto sharded = model::OpenWeights(files->weights);
    ASSERT_TRUE(sharded.ok()) << sharded.error();
    EXPECT_EQ(sharded->shards.size(), static_cast<size_t>(c.shards));
    EXPECT_EQ(sharded->files.size(), static_cast<size_t>(c.shards));
    EXPECT_EQ(sharded->prefix, single->prefix);
    EXPECT_EQ(sharded->outer_prefix, single->outer_prefix);
    const std::string kind = c.format == Format::Bin ? "torch.save" : "safetensors";
    const std::string name = c.format == Format::Bin ? "pytorch_model-0000k-of-0000" : "model-0000k-of-0000";
    EXPECT_EQ(sharded->format, kind + ", " + std::to_string(c.shards) + " shards " + name + std::to_string(c.shards) +
                                   (c.format == Format::Bin ? ".bin" : ".safetensors"));
    ExpectSameTensors(*single, *sharded);
    for (const auto& t : sharded->tensors)  // each tensor points into its own shard's mapping
        EXPECT_EQ(fs::path(sharded->FileOf(t)->path()).filename().string(), shard_of.at(t.name)) << t.name;
    // The token embedding and the LM head are in different shards; both are found.
    const model::StoredTensor *wte = sharded->Find("wte.weight"), *head = sharded->Find("lm_head.weight");
    ASSERT_NE(wte, nullptr);
    if (head) {
        EXPECT_NE(sharded->FileOf(*head), sharded->FileOf(*wte));
    }

    model::testing::ReferenceCase loaded(c.reference, sub), direct(c.reference);
    ASSERT_TRUE(loaded.ok) << loaded.error;
    ASSERT_TRUE(direct.ok) << direct.error;
    EXPECT_TRUE(loaded.gpt.unused_tensors.empty()) << loaded.gpt.unused_tensors.front();
    EXPECT_EQ(loaded.gpt.weights_format, sharded->format);
    ExpectSameForward(loaded.gpt, direct.gpt, loaded.ids);
    model::testing::ExpectForwardMatchesReference(loaded, 1e-5, 2e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ShardedReference,
    ::testing::Values(ShardCase{"vanilla", "model.safetensors", Format::Safetensors, 3},
                      // '_orig_mod.transformer.' names with '_orig_mod.lm_head.weight' in the last shard
                      ShardCase{"compiled_prefix", "model.safetensors", Format::Safetensors, 4},
                      ShardCase{"bf16_storage", "model.pt", Format::Bin, 2},
                      ShardCase{"ddp_prefix", "model.pt", Format::Bin, 3}),
    [](const ::testing::TestParamInfo<ShardCase>& info) {
        return std::string(info.param.reference) + (info.param.format == Format::Bin ? "_bin" : "_safetensors");
    });

// A lit-gpt Llama (RMSNorm, SwiGLU, grouped kv heads, BF16 on disk, an untied head) written as
// lit_model.pth, then the same tensors as pytorch_model-*.bin shards beside its lit_config.json:
// the same model, bit for bit.
TEST(Shards, LitGptCheckpointInShards) {
    const std::string single = Fresh("lit_single"), dir = Fresh("lit_sharded");
    model::ModelConfig c;
    c.family = "llama";
    c.n_layer = 3;
    c.n_head = 4;
    c.n_embd = 32;
    c.n_positions = 64;
    c.positions = model::PositionKind::Rope;
    c.tied_head = false;
    c.norm = model::NormKind::RmsNorm;
    c.mlp = model::MlpKind::SwiGlu;
    c.parallel_residual = false;
    c.bias = false;
    c.rope_n_elem = c.HeadSize();
    c.n_query_groups = 2;
    c.intermediate_size = 96;
    c.vocab_size = 1;
    c.query = {model::PositionForm::Sigmoid, model::TokenForm::Shared, model::Combine::Sum};
    c.value = {model::PositionForm::None, model::TokenForm::Feature, model::Combine::Sum};
    const std::string tokenizer = std::string(SSAVIZ_SOURCE_DIR) + "/assets/tokenizers/gpt2";
    auto s = model::WriteRandomModel(c, 5, tokenizer, single, Dtype::BF16, model::Layout::Lit);
    ASSERT_TRUE(s.ok()) << s.error();
    ASSERT_TRUE(fs::exists(single + "/lit_model.pth"));
    auto weights = model::OpenWeights(single + "/lit_model.pth");
    ASSERT_TRUE(weights.ok()) << weights.error();
    Split(*weights, 3, Format::Bin, dir);
    fs::copy_file(single + "/lit_config.json", dir + "/lit_config.json");

    auto a = model::LoadSsaGptFolder(single, at::kCPU, {}), b = model::LoadSsaGptFolder(dir, at::kCPU, {});
    ASSERT_TRUE(a.ok()) << a.error();
    ASSERT_TRUE(b.ok()) << b.error();
    EXPECT_EQ(b->weights_path, dir + "/pytorch_model.bin.index.json");
    EXPECT_EQ(b->stored_dtype, "BF16");
    EXPECT_TRUE(b->unused_tensors.empty()) << b->unused_tensors.front();
    EXPECT_TRUE(at::equal(a->lm_head, b->lm_head));
    std::vector<int32_t> ids(24);
    std::iota(ids.begin(), ids.end(), 100);
    ExpectSameForward(*a, *b, ids);
}

// transformers prefers safetensors: model.safetensors, its index, pytorch_model.bin, its index.
TEST(Shards, SafetensorsArePreferredAsTransformersDoes) {
    const std::string dir = Fresh("preference");
    auto single = model::OpenWeights(std::string(SSAVIZ_TEST_OUT) + "/ref/vanilla/model.safetensors");
    ASSERT_TRUE(single.ok()) << single.error();
    Split(*single, 2, Format::Bin, dir);
    auto expect = [&](const std::string& name) {
        auto files = model::FindModelFiles(dir);
        ASSERT_TRUE(files.ok()) << files.error();
        EXPECT_EQ(fs::path(files->weights).filename().string(), name);
    };
    expect("pytorch_model.bin.index.json");
    fs::copy_file(dir + "/" + ShardName(Format::Bin, 0, 2), dir + "/pytorch_model.bin");
    expect("pytorch_model.bin");
    Split(*single, 2, Format::Safetensors, dir);
    expect("model.safetensors.index.json");
    fs::copy_file(std::string(SSAVIZ_TEST_OUT) + "/ref/vanilla/model.safetensors", dir + "/model.safetensors");
    expect("model.safetensors");
}

// ---- HF's names: the embedding finds the state dict's root, the prefixes find the rest ----

struct Names {
    std::vector<std::string> stored;  // as in the file
    std::string prefix, outer;
};

// Small tensors of the given names (each [2, 3] F32).
std::vector<TensorToWrite> Tensors(const std::vector<std::string>& names, const std::vector<float>& values) {
    std::vector<TensorToWrite> out;
    for (const auto& n : names) out.push_back({n, Dtype::F32, {2, 3}, values.data()});
    return out;
}

TEST(Shards, HfEmbeddingNamesSetThePrefixes) {
    const std::vector<float> values = {1, 2, 3, 4, 5, 6};
    const Names cases[] = {
        {{"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.norm.weight", "lm_head.weight"}, "model.", ""},
        {{"gpt_neox.embed_in.weight", "gpt_neox.layers.0.attention.query_key_value.weight", "embed_out.weight"}, "gpt_neox.", ""},
        {{"embed_tokens.weight", "layers.0.self_attn.q_proj.weight"}, "", ""},  // a bare LlamaModel
        {{"_orig_mod.model.embed_tokens.weight", "_orig_mod.model.layers.0.self_attn.q_proj.weight", "_orig_mod.lm_head.weight"},
         "_orig_mod.model.", "_orig_mod."},
        {{"module.gpt_neox.embed_in.weight", "module.embed_out.weight"}, "module.gpt_neox.", "module."},
        {{"transformer.wte.weight", "lm_head.weight"}, "transformer.", ""},  // as before
        {{"wte.weight", "h.0.ln_1.weight"}, "", ""},
    };
    for (const Names& c : cases) {
        for (Format f : {Format::Safetensors, Format::Bin}) {
            for (bool sharded : {false, true}) {
                const std::string dir = Fresh("names");
                const auto tensors = Tensors(c.stored, values);
                std::string path = dir + (f == Format::Bin ? "/pytorch_model.bin" : "/model.safetensors");
                if (!sharded) {
                    WriteShard(f, path, tensors);
                } else {  // one tensor a shard: the embedding's is the first only
                    json map = json::object();
                    for (size_t i = 0; i < tensors.size(); ++i) {
                        const std::string shard = ShardName(f, static_cast<int>(i), static_cast<int>(tensors.size()));
                        WriteShard(f, dir + "/" + shard, {tensors[i]});
                        map[tensors[i].name] = shard;
                    }
                    path = dir + "/" + IndexName(f);
                    WriteText(path, json{{"weight_map", map}}.dump());
                }
                const std::string what = c.stored[0] + (f == Format::Bin ? " .bin" : " safetensors") + (sharded ? " sharded" : "");
                auto w = model::OpenWeights(path);
                ASSERT_TRUE(w.ok()) << what << ": " << w.error();
                EXPECT_EQ(w->prefix, c.prefix) << what;
                EXPECT_EQ(w->outer_prefix, c.outer) << what;
                for (const std::string& stored : c.stored) {
                    // The model-relative name: without the prefix, or without the outer prefix outside the root.
                    const bool inside = stored.compare(0, c.prefix.size(), c.prefix) == 0;
                    const std::string relative = stored.substr(inside ? c.prefix.size() : c.outer.size());
                    const model::StoredTensor* t = w->Find(relative);
                    ASSERT_NE(t, nullptr) << what << ": Find(\"" << relative << "\")";
                    EXPECT_EQ(t->name, stored) << what;
                    EXPECT_EQ(std::memcmp(t->data, values.data(), sizeof(float) * values.size()), 0) << what << " " << stored;
                }
            }
        }
    }
}

// A torch.save state dict nested under "state_dict" with HF Llama names is found by its embedding;
// a shard of an index is read as a top-level state dict even without one.
TEST(Shards, TorchSaveFindsHfStateDicts) {
    const std::string dir = Fresh("nested");
    const std::vector<float> values = {1, 2, 3, 4, 5, 6};
    WriteShard(Format::Bin, dir + "/only_layers.bin", Tensors({"model.layers.0.mlp.up_proj.weight"}, values));
    auto alone = model::OpenWeights(dir + "/only_layers.bin");
    ASSERT_FALSE(alone.ok());
    EXPECT_TRUE(Has(alone.error(), "'embed_tokens.weight'")) << alone.error();
    WriteShard(Format::Bin, dir + "/llama.bin", Tensors({"model.embed_tokens.weight", "lm_head.weight"}, values));
    auto llama = model::OpenWeights(dir + "/llama.bin");
    ASSERT_TRUE(llama.ok()) << llama.error();
    EXPECT_EQ(llama->state_dict_path, "the top level");
    EXPECT_EQ(llama->prefix, "model.");
    EXPECT_NE(llama->Find("lm_head.weight"), nullptr);
}

// ---- a broken index or shard: one line naming the index and what is wrong ----

class BrokenIndex : public ::testing::Test {
protected:
    // A two-shard safetensors folder of four tensors: a, b in shard 1, c, d in shard 2.
    void SetUp() override {
        dir = Fresh(::testing::UnitTest::GetInstance()->current_test_info()->name());
        for (int k = 0; k < 2; ++k) {
            const std::vector<std::string> names = k == 0 ? std::vector<std::string>{"wte.weight", "wpe.weight"}
                                                          : std::vector<std::string>{"h.0.ln_1.weight", "lm_head.weight"};
            WriteShard(Format::Safetensors, dir + "/" + ShardName(Format::Safetensors, k, 2), Tensors(names, values));
            for (const auto& n : names) map[n] = ShardName(Format::Safetensors, k, 2);
        }
        index = dir + "/model.safetensors.index.json";
    }
    std::string Write(const json& weight_map) {
        WriteText(index, json{{"metadata", {{"total_size", 96}}}, {"weight_map", weight_map}}.dump());
        return index;
    }
    // Opening it fails with `expected` in a one-line message that names the index; through the
    // folder loader too.
    void ExpectError(const std::string& expected) {
        auto w = model::OpenWeights(index);
        ASSERT_FALSE(w.ok()) << "opened";
        EXPECT_TRUE(Has(w.error(), expected)) << w.error();
        EXPECT_TRUE(Has(w.error(), "model.safetensors.index.json")) << "names the index: " << w.error();
        EXPECT_EQ(w.error().find_first_of("\n\r"), std::string::npos) << w.error();
        auto loaded = model::LoadSsaGptFolder(dir, at::kCPU, {});
        ASSERT_FALSE(loaded.ok());
        EXPECT_TRUE(Has(loaded.error(), expected)) << loaded.error();
    }
    std::vector<float> values = {1, 2, 3, 4, 5, 6};
    std::string dir, index;
    json map = json::object();
};

TEST_F(BrokenIndex, TheIntactFolderOpens) {
    Write(map);
    auto w = model::OpenWeights(index);
    ASSERT_TRUE(w.ok()) << w.error();
    EXPECT_EQ(w->tensors.size(), 4u);
    EXPECT_EQ(w->format, "safetensors, 2 shards model-0000k-of-00002.safetensors");
}

TEST_F(BrokenIndex, MissingShard) {
    fs::remove(dir + "/model-00002-of-00002.safetensors");
    Write(map);
    ExpectError("shard 'model-00002-of-00002.safetensors' is missing (the index puts 'h.0.ln_1.weight' and 1 more in it)");
}

TEST_F(BrokenIndex, AbsoluteShardPath) {
    map["lm_head.weight"] = dir + "/model-00002-of-00002.safetensors";
    Write(map);
    ExpectError("is an absolute path");
}

TEST_F(BrokenIndex, ShardPathWithDotDot) {
    fs::create_directories(dir + "/sub");
    map["lm_head.weight"] = "sub/../model-00002-of-00002.safetensors";
    Write(map);
    ExpectError("is not a plain path inside the index's folder (it has '..')");
}

TEST_F(BrokenIndex, ShardLinkLeadingOutOfTheFolder) {
    const std::string outside = Fresh("outside");
    fs::rename(dir + "/model-00002-of-00002.safetensors", outside + "/elsewhere.safetensors");
    fs::create_symlink(outside + "/elsewhere.safetensors", dir + "/model-00002-of-00002.safetensors");
    Write(map);
    ExpectError("shard 'model-00002-of-00002.safetensors' leads out of the index's folder");
}

TEST_F(BrokenIndex, ShardLinkInsideTheFolderIsFollowed) {
    fs::create_directories(dir + "/blobs");
    fs::rename(dir + "/model-00002-of-00002.safetensors", dir + "/blobs/abc123");
    fs::create_symlink("blobs/abc123", dir + "/model-00002-of-00002.safetensors");
    Write(map);
    auto w = model::OpenWeights(index);
    ASSERT_TRUE(w.ok()) << w.error();
}

// HF's hub cache: snapshots/REV/NAME are links to ../../blobs/HASH.
TEST_F(BrokenIndex, HubCacheSnapshotLinksAreFollowed) {
    const std::string repo = Fresh("models--org--name");
    fs::create_directories(repo + "/blobs");
    fs::create_directories(repo + "/snapshots/0123abc");
    for (int k = 0; k < 2; ++k) {
        const std::string name = ShardName(Format::Safetensors, k, 2);
        fs::rename(dir + "/" + name, repo + "/blobs/hash" + std::to_string(k));
        fs::create_symlink("../../blobs/hash" + std::to_string(k), repo + "/snapshots/0123abc/" + name);
    }
    index = repo + "/snapshots/0123abc/model.safetensors.index.json";
    Write(map);
    auto w = model::OpenWeights(index);
    ASSERT_TRUE(w.ok()) << w.error();
    EXPECT_EQ(w->tensors.size(), 4u);
}

TEST_F(BrokenIndex, ShardThatIsNotAFile) {
    fs::remove(dir + "/model-00002-of-00002.safetensors");
    fs::create_directories(dir + "/model-00002-of-00002.safetensors");
    Write(map);
    ExpectError("shard 'model-00002-of-00002.safetensors' is not a regular file");
    fs::remove(dir + "/model-00002-of-00002.safetensors");
    ASSERT_EQ(::mkfifo((dir + "/model-00002-of-00002.safetensors").c_str(), 0644), 0);
    ExpectError("shard 'model-00002-of-00002.safetensors' is not a regular file");  // and nothing waits for a writer
}

TEST_F(BrokenIndex, ShardsOverlap) {
    WriteShard(Format::Safetensors, dir + "/model-00002-of-00002.safetensors",
               Tensors({"h.0.ln_1.weight", "lm_head.weight", "wpe.weight"}, values));
    Write(map);
    ExpectError("tensor 'wpe.weight' is in shard 'model-00001-of-00002.safetensors' and in shard "
                "'model-00002-of-00002.safetensors': the shards overlap");
}

TEST_F(BrokenIndex, TensorNamedButAbsentFromItsShard) {
    map["h.1.ln_1.weight"] = "model-00002-of-00002.safetensors";
    Write(map);
    ExpectError("the index puts tensor 'h.1.ln_1.weight' in shard 'model-00002-of-00002.safetensors', which does not hold it");
}

TEST_F(BrokenIndex, TensorInAShardButNotInTheIndex) {
    map.erase("lm_head.weight");
    Write(map);
    ExpectError("tensor 'lm_head.weight' is in shard 'model-00002-of-00002.safetensors' but not in the index's weight_map");
}

TEST_F(BrokenIndex, TensorInAnotherShardThanTheIndexSays) {
    map["lm_head.weight"] = "model-00001-of-00002.safetensors";
    Write(map);
    ExpectError("tensor 'lm_head.weight' is in shard 'model-00002-of-00002.safetensors' but the index puts it in "
                "'model-00001-of-00002.safetensors'");
}

TEST_F(BrokenIndex, IndexThatIsNotJson) {
    WriteText(index, "{\"weight_map\": {\"wte.weight\": ");
    ExpectError("invalid JSON");
}

TEST_F(BrokenIndex, IndexTooLarge) {
    Write(map);
    ASSERT_EQ(::truncate(index.c_str(), static_cast<off_t>(model::kMaxShardIndexBytes) + 1), 0);  // sparse: nothing is written
    ExpectError("bytes, more than the " + std::to_string(model::kMaxShardIndexBytes) + " bytes such a file may be");
}

TEST_F(BrokenIndex, WeightMapThatIsNotAnObjectOfStrings) {
    WriteText(index, json{{"metadata", json::object()}}.dump());
    ExpectError("no \"weight_map\"");
    Write(json::array({"model-00001-of-00002.safetensors"}));
    ExpectError("\"weight_map\" is an array of 1, not an object");
    map["lm_head.weight"] = 2;
    Write(map);
    ExpectError("\"weight_map\" gives tensor 'lm_head.weight' 2, not a shard file name");
    WriteText(index, "[1, 2]");
    ExpectError("a shard index must be a JSON object");
}

TEST_F(BrokenIndex, TooManyShards) {
    json many = json::object();
    for (size_t i = 0; i <= model::kMaxShards; ++i) many["t" + std::to_string(i)] = "shard" + std::to_string(i) + ".safetensors";
    Write(many);
    ExpectError("the index names more than 1024 shards");
}

TEST_F(BrokenIndex, ShardsOfTwoFormats) {
    WriteShard(Format::Bin, dir + "/model-00002-of-00002.safetensors", Tensors({"h.0.ln_1.weight", "lm_head.weight"}, values));
    Write(map);
    ExpectError("shard 'model-00002-of-00002.safetensors' is torch.save but shard 'model-00001-of-00002.safetensors' is safetensors");
}

TEST_F(BrokenIndex, BrokenShardIsNamed) {
    WriteText(dir + "/model-00002-of-00002.safetensors", "not a safetensors file at all");
    Write(map);
    ExpectError("shard 'model-00002-of-00002.safetensors': ");
}

// ---- memory: converted tensors give their file pages back ----

// A field of /proc/self/status in bytes ("RssFile", "VmHWM").
size_t StatusBytes(const std::string& field) {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.compare(0, field.size() + 1, field + ":") == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
    return 0;
}

TEST(Shards, DroppedPagesLeaveResidentMemoryAndStayReadable) {
    const std::string dir = Fresh("drop");
    std::vector<float> values(16 << 20 >> 2);  // 16 MB
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
    ASSERT_TRUE(model::WriteSafetensors(dir + "/big.safetensors", {{"x", Dtype::F32, {static_cast<int64_t>(values.size())}, values.data()}}).ok());
    auto w = model::OpenWeights(dir + "/big.safetensors");
    ASSERT_TRUE(w.ok()) << w.error();
    const model::StoredTensor& t = w->tensors[0];
    const size_t before = StatusBytes("RssFile");
    volatile uint64_t sum = 0;
    for (size_t i = 0; i < t.Extent(); i += 4096) sum = sum + t.data[i];  // fault every page in
    const size_t touched = StatusBytes("RssFile");
    // The kernel's counters lag by a few pages per thread: the margins are 4 MB of the 16.
    EXPECT_GT(touched, before + (12 << 20)) << "reading the tensor maps its pages";
    w->DropPages(t);
    const size_t dropped = StatusBytes("RssFile");
    EXPECT_LT(dropped + (12 << 20), touched) << "before " << before << ", touched " << touched << ", after DropPages " << dropped;
    EXPECT_EQ(std::memcmp(t.data, values.data(), t.Extent()), 0) << "the bytes read back from the file";
}

}  // namespace
