// Checkpoints as researchers have them: torch.save files written by Debian's python3-torch
// (tests/model/ssa_reference.py writes every reference case's weights as model.pt too, plus an HF
// folder with pytorch_model.bin, nanoGPT training checkpoints and a protocol-4 pickle), loaded by
// ssaviz's own ZIP reader and unpickler and checked against the same PyTorch reference outputs.
// Then the hostile files of tests/model/fixtures/abuse, each with the error it must produce.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "model/io/pickle.h"
#include "model/nn/forward.h"
#include "model/nn/model_folder_torch.h"
#include "model/nn/runtime_torch.h"
#include "model/io/weights.h"
#include "model/io/zip.h"
#include "tests/model/reference.h"

namespace {

using model::testing::CheckClose;
using model::testing::ReferenceCase;

// The same tolerances as the safetensors parity tests (test_parity.cpp says why).
constexpr double kMapTolerance = 1e-5;
constexpr double kLogitTolerance = 2e-5;

void ExpectMatchesReference(const ReferenceCase& c) {
    model::testing::ExpectForwardMatchesReference(c, kMapTolerance, kLogitTolerance);
}

// Every weight identical, bit for bit, to the model loaded from the case's safetensors.
void ExpectSameWeights(const model::SsaGpt& a, const model::SsaGpt& b) {
    auto same = [](const at::Tensor& x, const at::Tensor& y, const std::string& what) {
        ASSERT_EQ(x.defined(), y.defined()) << what;
        if (x.defined()) {
            EXPECT_TRUE(at::equal(x, y)) << what;
        }
    };
    same(a.wte, b.wte, "wte");
    same(a.wpe, b.wpe, "wpe");
    same(a.lm_head, b.lm_head, "lm_head");
    same(a.ln_f_w, b.ln_f_w, "ln_f");
    ASSERT_EQ(a.layers.size(), b.layers.size());
    for (size_t l = 0; l < a.layers.size(); ++l) {
        const auto &x = a.layers[l], &y = b.layers[l];
        const std::string at = "layer " + std::to_string(l) + " ";
        same(x.attn_w, y.attn_w, at + "c_attn");
        same(x.proj_w, y.proj_w, at + "c_proj");
        same(x.fc_w, y.fc_w, at + "c_fc");
        same(x.mlp_proj_w, y.mlp_proj_w, at + "mlp c_proj");
        same(x.ln1_b, y.ln1_b, at + "ln_1 bias");
        same(x.q.pos, y.q.pos, at + "q pos");
        same(x.q.tok_w, y.q.tok_w, at + "q tok");
        same(x.v.tok_w, y.v.tok_w, at + "v tok");
    }
}

model::TemperatureForm Form(const std::string& spec) {
    auto f = model::ParseFormSpec(spec);
    EXPECT_TRUE(f.ok()) << f.error();
    return f.ok() ? *f : model::TemperatureForm{};
}

class CheckpointParity : public ::testing::TestWithParam<std::string> {};

TEST_P(CheckpointParity, TorchSaveStateDictMatchesReferenceAndSafetensors) {
    ReferenceCase pt(GetParam(), "model.pt"), st(GetParam());
    ASSERT_TRUE(pt.ok) << pt.error;
    ASSERT_TRUE(st.ok) << st.error;
    EXPECT_EQ(pt.gpt.weights_format, "torch.save");
    EXPECT_EQ(st.gpt.weights_format, "");  // loaded through LoadSsaGpt directly
    EXPECT_TRUE(pt.gpt.unused_tensors.empty()) << pt.gpt.unused_tensors.front();
    ExpectSameWeights(pt.gpt, st.gpt);
    ExpectMatchesReference(pt);
}

INSTANTIATE_TEST_SUITE_P(
    Forms, CheckpointParity,
    ::testing::Values("vanilla", "q_sigmoid_shared_sum_perhead", "q_expexp_feature_sum_layer", "q_linear_none_sum",
                      "q_none_shared_sum", "qv_sigmoid_shared_product_perhead", "qv_expexp_feature_product_mixed",
                      "v_only_linear_feature_sum", "q_sigmoid_feature_product_gelu_exact", "qv_none_feature_product",
                      "identity", "fp16_storage", "bf16_storage", "transformer_prefix", "linear_layout", "compiled_prefix",
                      "ddp_prefix"),
    [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(Checkpoint, StoredDtypeIsReported) {
    ReferenceCase half("fp16_storage", "model.pt"), bf16("bf16_storage", "model.pt"), f32("vanilla", "model.pt");
    ASSERT_TRUE(half.ok && bf16.ok && f32.ok) << half.error << bf16.error << f32.error;
    EXPECT_EQ(half.gpt.stored_dtype, "F16");
    EXPECT_EQ(bf16.gpt.stored_dtype, "BF16");
    EXPECT_EQ(f32.gpt.stored_dtype, "F32");
}

// transformers' save_pretrained(safe_serialization=False): a folder with config.json and
// pytorch_model.bin, lm_head tied to wte, matrices saved as transposed (strided) views.
TEST(Checkpoint, HfFolderWithPytorchModelBin) {
    ReferenceCase hf("transformer_prefix", "hf"), st("transformer_prefix");
    ASSERT_TRUE(hf.ok) << hf.error;
    ASSERT_TRUE(st.ok) << st.error;
    EXPECT_NE(hf.gpt.weights_path.find("pytorch_model.bin"), std::string::npos) << hf.gpt.weights_path;
    EXPECT_TRUE(hf.gpt.lm_head.is_same(hf.gpt.wte)) << "a tied head stays one tensor";
    ExpectSameWeights(hf.gpt, st.gpt);
    ExpectMatchesReference(hf);
}

// GPT-2 small's shape (12 x 12 heads, width 768, 50,257 tokens, context 1,024; 124 M parameters)
// with a per-head SSA query, as transformers saves it: config.json + a 249 MB fp16
// pytorch_model.bin. Wider sums than the small cases: maps within 1e-4, logits 1e-4 relative.
TEST(Checkpoint, Gpt2SmallHfFolder) {
    ReferenceCase c("gpt2_small", "hf");
    ASSERT_TRUE(c.ok) << c.error;
    EXPECT_EQ(c.gpt.config.n_layer, 12);
    EXPECT_EQ(c.gpt.config.n_embd, 768);
    EXPECT_EQ(c.gpt.stored_dtype, "F16");
    EXPECT_GT(c.gpt.ParameterCount(), 124000000);
    EXPECT_TRUE(c.gpt.unused_tensors.empty()) << c.gpt.unused_tensors.front();
    model::testing::ExpectForwardMatchesReference(c, 1e-4, 1e-4);
}

// The shapes of GPT-2 small, medium, large and XL, as HF names them and without config.json:
// layers, width, context and vocabulary from the tensors, n_head from GPT-2's head size of 64.
TEST(Checkpoint, Gpt2SizesAreInferredFromShapes) {
    struct Size { int layers, width, heads; } sizes[] = {{12, 768, 12}, {24, 1024, 16}, {36, 1280, 20}, {48, 1600, 25}};
    for (const Size& s : sizes) {
        model::WeightFile w;
        auto add = [&](const std::string& name, std::vector<int64_t> shape) {
            w.index[name] = w.tensors.size();
            w.tensors.push_back({name, model::Dtype::F16, shape, {}, nullptr});
        };
        add("wte.weight", {50257, s.width});
        add("wpe.weight", {1024, s.width});
        for (int l = 0; l < s.layers; ++l) {
            add("h." + std::to_string(l) + ".ln_1.weight", {s.width});
            add("h." + std::to_string(l) + ".attn.c_attn.weight", {s.width, 3 * s.width});
        }
        auto c = model::InferConfig(w, {});
        ASSERT_TRUE(c.ok()) << c.error();
        EXPECT_EQ(c->config.n_layer, s.layers);
        EXPECT_EQ(c->config.n_head, s.heads);
        EXPECT_EQ(c->config.n_positions, 1024);
        EXPECT_EQ(c->config.vocab_size, 50257);
        EXPECT_EQ(c->config.activation, model::Activation::GeluNew);
        EXPECT_FALSE(c->config.IsSsa());
    }
}

// nanoGPT's train.py checkpoint: {"model": state dict, "optimizer": ..., "model_args": ..., ...},
// no config.json. The shape, n_head (from model_args) and the exp_exp form (from attn.beta) are
// inferred; the activation follows the Linear layout (nn.GELU, exact).
TEST(Checkpoint, NanoGptCheckpointWithoutConfig) {
    ReferenceCase ck("linear_layout", "nanogpt/ckpt.pt"), st("linear_layout");
    ASSERT_TRUE(ck.ok) << ck.error;
    ASSERT_TRUE(st.ok) << st.error;
    EXPECT_EQ(model::ConfigToJson(ck.gpt.config), model::ConfigToJson(st.gpt.config));
    std::string notes;
    for (const auto& n : ck.gpt.notes) notes += n + "\n";
    EXPECT_NE(notes.find("no config.json"), std::string::npos) << notes;
    EXPECT_NE(notes.find("model_args"), std::string::npos) << notes;
    EXPECT_NE(notes.find("['model']"), std::string::npos) << notes;
    ExpectSameWeights(ck.gpt, st.gpt);
    ExpectMatchesReference(ck);
}

// torch.compile'd nanoGPT with a query form the tensors cannot pin down (position and token:
// sum or product?). Without a hint: a one-line error naming the flag; with it: the reference.
TEST(Checkpoint, FormTheShapesCannotTellIsAskedFor) {
    ReferenceCase asked("compiled_prefix", "nanogpt/ckpt.pt");
    ASSERT_FALSE(asked.ok);
    EXPECT_NE(asked.error.find("--query-form"), std::string::npos) << asked.error;
    EXPECT_EQ(asked.error.find('\n'), std::string::npos) << asked.error;

    model::ConfigHints hints;
    hints.query = Form("exp_exp,shared,sum");
    ReferenceCase told("compiled_prefix", "nanogpt/ckpt.pt", hints);
    ASSERT_TRUE(told.ok) << told.error;
    EXPECT_EQ(told.gpt.config.n_head, 2);
    ExpectMatchesReference(told);
}

// pickle protocol 4 (FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL); n_head from the length
// of the per-head position parameter.
TEST(Checkpoint, PickleProtocol4) {
    model::ConfigHints hints;
    hints.query = Form("linear,none");
    hints.activation = model::Activation::GeluNew;
    ReferenceCase c("q_linear_none_sum", "protocol4/model.pt", hints);
    ASSERT_TRUE(c.ok) << c.error;
    EXPECT_EQ(c.gpt.config.n_head, 3);
    ExpectMatchesReference(c);
}

TEST(Checkpoint, FormSpecs) {
    EXPECT_EQ(model::FormSpec(Form("sigmoid,shared,sum")), "sigmoid,shared,sum");
    EXPECT_EQ(model::FormSpec(Form("exp_exp")), "exp_exp,none,sum");
    EXPECT_EQ(model::FormSpec(Form("none")), "none");
    EXPECT_EQ(model::FormSpec(Form("none,feature,product")), "none,feature,product");
    for (const char* bad : {"", "sigmoid,shared,sum,extra", "cosine", "sigmoid,wide", "linear,shared,max"}) {
        auto f = model::ParseFormSpec(bad);
        EXPECT_FALSE(f.ok()) << bad;
    }
}

// --dtype bf16: weights held and the forward pass computed in bfloat16 (8 significant bits), the
// captures handed out in float32. Against the float32 reference, after two layers of these
// deliberately sharp random models: attention within 0.1 absolute and tau_q within 5% (measured
// worst: 0.063 and 3.4%; bf16 rounds each weight and activation by up to 0.4%).
TEST(ComputeDtype, Bf16StaysNearTheFloat32Reference) {
    for (const char* name : {"q_sigmoid_shared_sum_perhead", "qv_expexp_feature_product_mixed", "bf16_storage"}) {
        const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/ref/" + name;
        ReferenceCase c(name);
        ASSERT_TRUE(c.ok) << c.error;
        auto gpt = model::LoadSsaGptFolder(dir, at::kCPU, {}, at::kBFloat16);
        ASSERT_TRUE(gpt.ok()) << gpt.error();
        EXPECT_EQ(gpt->dtype(), at::kBFloat16);
        EXPECT_EQ(gpt->layers[0].attn_w.scalar_type(), at::kBFloat16);
        auto out = model::Forward(*gpt, c.ids);
        ASSERT_TRUE(out.ok()) << out.error();
        ASSERT_EQ(out->attention.scalar_type(), at::kFloat);
        const double attn_err = (out->attention - c.Ref("attention")).abs().max().item<double>();
        const double tau_err = ((out->tau_q - c.Ref("tau_q")).abs() / c.Ref("tau_q").abs().clamp_min(1)).max().item<double>();
        EXPECT_LT(attn_err, 0.1) << name;
        EXPECT_LT(tau_err, 0.05) << name;
        EXPECT_GT(attn_err, 0.0) << name << ": bf16 gave float32's exact maps; did it run in bf16?";
        std::printf("[ bf16     ] %s: max |attention - ref| %.4f, max relative tau_q error %.4f\n", name, attn_err, tau_err);
    }
}

TEST(ComputeDtype, HalfOnCpuIsAClearError) {
    auto r = model::ResolveComputeDtype("f16", at::kCPU);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("bf16"), std::string::npos) << r.error();
    EXPECT_FALSE(model::ResolveComputeDtype("f8", at::kCPU).ok());
    EXPECT_EQ(*model::ResolveComputeDtype("bf16", at::kCPU), at::kBFloat16);
}

// ---- the unpickler and the ZIP reader on hand-made bytes ----

model::Result<model::Pickle> Unpickle(const std::string& bytes) {
    return model::Unpickle(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

TEST(Unpickler, ReadsPlainValues) {
    // {'a': [1, -2, 3.5, True, None], 'b': (b'xy', 'z')} at protocol 2.
    const std::string p = std::string("\x80\x02}q\x00(X\x01\x00\x00\x00", 11) + "aq\x01]q\x02(K\x01J\xfe\xff\xff\xff" +
                          std::string("G@\x0c\x00\x00\x00\x00\x00\x00\x88N", 11) + "e" + std::string("X\x01\x00\x00\x00", 5) +
                          "bC\x02xy" + std::string("X\x01\x00\x00\x00", 5) + "z\x86u.";
    auto r = Unpickle(p);
    ASSERT_TRUE(r.ok()) << r.error();
    const model::Pickle& pk = *r;
    const model::PickleValue* a = pk.Get(pk.root, "a");
    ASSERT_NE(a, nullptr);
    ASSERT_EQ(a->kind, model::PickleValue::Kind::List);
    ASSERT_EQ(a->items.size(), 5u);
    EXPECT_EQ(pk[a->items[0]].integer, 1);
    EXPECT_EQ(pk[a->items[1]].integer, -2);
    EXPECT_EQ(pk[a->items[2]].number, 3.5);
    EXPECT_EQ(pk[a->items[3]].kind, model::PickleValue::Kind::Bool);
    EXPECT_EQ(pk[a->items[4]].kind, model::PickleValue::Kind::None);
    const model::PickleValue* b = pk.Get(pk.root, "b");
    ASSERT_NE(b, nullptr);
    ASSERT_EQ(b->kind, model::PickleValue::Kind::Tuple);
    EXPECT_EQ(pk[b->items[0]].text, "xy");
    EXPECT_EQ(pk[b->items[1]].text, "z");
}

TEST(Unpickler, SelfReferenceIsAValueNotALoop) {
    // l = []; l.append(l)
    auto r = Unpickle(std::string("\x80\x02]q\x00h\x00" "a.", 9));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->values[r->root].items.at(0), r->root);
}

TEST(Unpickler, CallsAreNeverMade) {
    // os.system('echo hi'): the global and the call stay data.
    auto r = Unpickle(std::string("\x80\x02" "cposix\nsystem\nX\x07\x00\x00\x00" "echo hi\x85R.", 31));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->values[r->root].kind, model::PickleValue::Kind::Object);
    EXPECT_EQ(r->values[r->root].text, "posix.system");
}

TEST(Unpickler, ErrorsNameTheOpcodeAndOffset) {
    struct { std::string bytes, error; } cases[] = {
        {std::string("\x80\x02]", 3), "ends without STOP"},
        {std::string("\x80\x02h\x05.", 5), "memo key 5 was never stored"},
        {std::string("\x80\x02X\xff\xff\xff\x7f" "ab.", 11), "truncated"},
        {std::string("\x80\x02" "a.", 4), "pops an empty stack"},
        {std::string("\x80\x02" "i__main__\nX\n.", 14), "opcode 'i' at byte 2"},
        {std::string("\x80\x09.", 3), "protocol 9"},
        {std::string("\x80\x02" "K\x01K\x02.", 7), "stops with 2 values"},
        {std::string("\x80\x02" "(K\x01u.", 7), "odd number of keys"},
        {std::string("\x80\x02" "(K\x01K\x02" "X\x07\x00\x00\x00storage" "tQ.", 23), "persistent id"},
    };
    for (const auto& c : cases) {
        auto r = Unpickle(c.bytes);
        ASSERT_FALSE(r.ok()) << c.error;
        EXPECT_NE(r.error().find(c.error), std::string::npos) << r.error();
        EXPECT_EQ(r.error().find('\n'), std::string::npos) << r.error();
    }
}

TEST(Unpickler, ValueCountIsBounded) {
    // 5 million one-byte None opcodes would be ~1 GB of values: refused at 4 million.
    std::string p = std::string("\x80\x02", 2) + std::string(5'000'000, 'N') + ".";
    auto r = Unpickle(p);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("more than 4000000 values"), std::string::npos) << r.error();
}

// ---- issue 20: every thing a pickle grows has a cap, so a small file cannot ask for gigabytes ----

void ExpectRefused(const std::string& bytes, const std::string& error) {
    auto r = Unpickle(bytes);
    ASSERT_FALSE(r.ok()) << error;
    EXPECT_NE(r.error().find(error), std::string::npos) << r.error();
    EXPECT_EQ(r.error().find('\n'), std::string::npos) << r.error();
}

TEST(Unpickler, MemoEntriesAreBounded) {
    // MEMOIZE adds a memo entry and no value: 4.1 million of them in 4 MB.
    ExpectRefused(std::string("\x80\x04N", 3) + std::string(4'100'000, '\x94') + ".", "memoizes more than 4000000");
}

TEST(Unpickler, ContainerElementsAreBounded) {
    // [] then (DUP x 1000, APPENDS) 16,001 times: one list holding 16 million references to
    // itself, from a 16 MB file (a 200 MB one asked for 3 GB before the cap).
    std::string p("\x80\x02]", 3);
    const std::string round = "(" + std::string(1000, '2') + "e";
    for (int i = 0; i < 16'001; ++i) p += round;
    ExpectRefused(p + ".", "more than 16000000 elements");
}

TEST(Unpickler, OpenMarksAreBounded) {
    ExpectRefused(std::string("\x80\x02", 2) + std::string(100'000, '(') + ".", "more than 4096 MARKs");
}

TEST(Unpickler, CopiedNamesAreBounded) {
    // A 1 MB string memoized once, then STACK_GLOBAL on two recalls of it, 100 times: each global
    // copies 2 MB out of a file of 1 MB.
    std::string p = std::string("\x80\x02X\x00\x00\x10\x00", 7) + std::string(1 << 20, 'm') + std::string("q\x00", 2);
    for (int i = 0; i < 100; ++i) p += std::string("h\x00h\x00\x93" "0", 6);
    ExpectRefused(p + "N.", "copies more than");
}

// ---- a stored ZIP and a torch.save-shaped pickle written here, to scale ----

void PutLe(std::string& out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

// A stored (uncompressed) ZIP of `entries`, as torch.save writes one; ZIP64 end records when the
// count does not fit 16 bits.
std::string MakeZip(const std::vector<std::pair<std::string, std::string>>& entries) {
    std::string out, dir;
    for (const auto& [name, data] : entries) {
        const uint64_t local = out.size();
        PutLe(out, 0x04034b50, 4);
        PutLe(out, 20, 2), PutLe(out, 0, 2), PutLe(out, 0, 2), PutLe(out, 0, 4), PutLe(out, 0, 4);  // version, flags, method, time, crc
        PutLe(out, data.size(), 4), PutLe(out, data.size(), 4), PutLe(out, name.size(), 2), PutLe(out, 0, 2);
        out += name + data;
        PutLe(dir, 0x02014b50, 4);
        PutLe(dir, 20, 2), PutLe(dir, 20, 2), PutLe(dir, 0, 2), PutLe(dir, 0, 2), PutLe(dir, 0, 4), PutLe(dir, 0, 4);
        PutLe(dir, data.size(), 4), PutLe(dir, data.size(), 4), PutLe(dir, name.size(), 2);
        PutLe(dir, 0, 2), PutLe(dir, 0, 2), PutLe(dir, 0, 2), PutLe(dir, 0, 2), PutLe(dir, 0, 4);  // extra, comment, disk, attributes
        PutLe(dir, local, 4);
        dir += name;
    }
    const uint64_t dir_offset = out.size(), count = entries.size();
    out += dir;
    const bool zip64 = count >= 0xffff;
    if (zip64) {
        const uint64_t record = out.size();
        PutLe(out, 0x06064b50, 4), PutLe(out, 44, 8), PutLe(out, 45, 2), PutLe(out, 45, 2), PutLe(out, 0, 4), PutLe(out, 0, 4);
        PutLe(out, count, 8), PutLe(out, count, 8), PutLe(out, dir.size(), 8), PutLe(out, dir_offset, 8);
        PutLe(out, 0x07064b50, 4), PutLe(out, 0, 4), PutLe(out, record, 8), PutLe(out, 1, 4);
    }
    PutLe(out, 0x06054b50, 4), PutLe(out, 0, 2), PutLe(out, 0, 2);
    PutLe(out, zip64 ? 0xffff : count, 2), PutLe(out, zip64 ? 0xffff : count, 2);
    PutLe(out, dir.size(), 4), PutLe(out, dir_offset, 4), PutLe(out, 0, 2);
    return out;
}

std::string PickleString(const std::string& s) {
    std::string out = "X";
    PutLe(out, s.size(), 4);
    return out + s;
}

// torch.save's pickle of an OrderedDict of float tensors named `names`, tensor i of `sizes[i]`
// elements in storage "i" (memoized globals, as torch.save writes them).
// {names[i]: a float32 tensor of sizes[i] elements in storage i (or storage[i] where given)}.
std::string StateDictPickle(const std::vector<std::string>& names, const std::vector<int>& sizes, const std::vector<int>& storage = {}) {
    using namespace std::string_literals;
    std::string p = "\x80\x02" "ccollections\nOrderedDict\nq\x00)Rq\x01("s;
    for (size_t i = 0; i < names.size(); ++i) {
        p += PickleString(names[i]);
        p += i ? "h\x02"s : "ctorch._utils\n_rebuild_tensor_v2\nq\x02"s;
        p += "((" + PickleString("storage") + (i ? "h\x03"s : "ctorch\nFloatStorage\nq\x03"s);
        p += PickleString(std::to_string(storage.empty() ? static_cast<int>(i) : storage[i])) + PickleString("cpu") + "J";
        PutLe(p, sizes[i], 4);
        p += "tQK\x00J"s;
        PutLe(p, sizes[i], 4);
        p += "\x85K\x01\x85\x89h\x00)RtR"s;
    }
    return p + "u.";
}

TEST(Zip, HundredThousandEntriesAreFoundInLinearTime) {
    // Find was a linear search, called once a tensor: 100,000 entries took 30 s; now a hash map.
    std::vector<std::pair<std::string, std::string>> entries;
    for (int i = 0; i < 100'000; ++i) entries.push_back({"archive/data/" + std::to_string(i), "abcd"});
    const std::string zip = MakeZip(entries);
    const auto start = std::chrono::steady_clock::now();
    auto r = model::ParseZip(reinterpret_cast<const uint8_t*>(zip.data()), zip.size());
    ASSERT_TRUE(r.ok()) << r.error();
    ASSERT_EQ(r->entries.size(), entries.size());
    for (const auto& [name, data] : entries) {
        const model::ZipEntry* e = r->Find(name);
        ASSERT_NE(e, nullptr) << name;
        ASSERT_EQ(zip.compare(e->offset, e->size, data), 0) << name;
    }
    EXPECT_EQ(r->Find("archive/data/100000"), nullptr);
    std::printf("[ timing   ] ZIP of 100,000 entries parsed and each found in %.3f s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

TEST(Zip, MoreThanAMillionEntriesAreRefused) {
    // A directory of 1,000,001 minimal entries' worth of bytes (46 MB of zeros) behind ZIP64 end
    // records: refused by count before anything is reserved.
    const uint64_t count = model::kMaxZipEntries + 1, dir_size = 46 * count;
    std::string zip(dir_size, '\0');
    const uint64_t record = zip.size();
    PutLe(zip, 0x06064b50, 4), PutLe(zip, 44, 8), PutLe(zip, 45, 2), PutLe(zip, 45, 2), PutLe(zip, 0, 4), PutLe(zip, 0, 4);
    PutLe(zip, count, 8), PutLe(zip, count, 8), PutLe(zip, dir_size, 8), PutLe(zip, 0, 8);
    PutLe(zip, 0x07064b50, 4), PutLe(zip, 0, 4), PutLe(zip, record, 8), PutLe(zip, 1, 4);
    PutLe(zip, 0x06054b50, 4), PutLe(zip, 0, 4), PutLe(zip, 0xffff, 2), PutLe(zip, 0xffff, 2), PutLe(zip, 0xffffffff, 4), PutLe(zip, 0xffffffff, 4), PutLe(zip, 0, 2);
    auto r = model::ParseZip(reinterpret_cast<const uint8_t*>(zip.data()), zip.size());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("1000001 entries, more than the 1000000"), std::string::npos) << r.error();
}

std::string WriteTestFile(const std::string& name, const std::string& bytes) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/model_io";
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/" + name, std::ios::binary | std::ios::trunc) << bytes;
    return dir + "/" + name;
}

TEST(Checkpoint, HundredThousandTensorsOpenInLinearTime) {
    // A state dict of wte.weight and 100,000 one-element tensors, each in a storage of its own.
    std::vector<std::string> names{"wte.weight"};
    std::vector<int> sizes{128};
    for (int i = 0; i < 100'000; ++i) names.push_back("extra." + std::to_string(i)), sizes.push_back(1);
    std::vector<std::pair<std::string, std::string>> entries{{"archive/data.pkl", StateDictPickle(names, sizes)}};
    for (size_t i = 0; i < names.size(); ++i) entries.push_back({"archive/data/" + std::to_string(i), std::string(4 * sizes[i], '\0')});
    entries.push_back({"archive/version", "3\n"});
    const std::string path = WriteTestFile("many_tensors.pt", MakeZip(entries));
    const auto start = std::chrono::steady_clock::now();
    auto w = model::OpenWeights(path);
    ASSERT_TRUE(w.ok()) << w.error();
    std::printf("[ timing   ] checkpoint of %zu tensors opened in %.3f s\n", names.size(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    ASSERT_EQ(w->tensors.size(), names.size());
    EXPECT_EQ(w->Find("extra.99999")->shape, std::vector<int64_t>{1});
    EXPECT_EQ(w->Find("wte.weight")->shape, std::vector<int64_t>{128});
}

TEST(Checkpoint, ViewsSharingAStorageAreBoundedByIt) {
    // wte.weight and 40 tensors, each a whole view of storage 0 (4 MB): read one copy each, 164 MB
    // from a 4 MB file (1,024 layers' views of one storage asked for more than 8 GB). A tied head
    // (two views of one storage) opens.
    constexpr int kElements = 1 << 20;
    std::vector<std::string> names{"wte.weight"};
    for (int i = 0; i < 40; ++i) names.push_back("h." + std::to_string(i) + ".weight");
    const std::vector<int> sizes(names.size(), kElements), storage(names.size(), 0);
    const std::string data(4 * kElements, '\0');
    auto open = [&](const std::string& name, size_t tensors) {
        const std::vector<std::string> some(names.begin(), names.begin() + tensors);
        return model::OpenWeights(WriteTestFile(name, MakeZip({{"archive/data.pkl", StateDictPickle(some, {sizes.begin(), sizes.begin() + tensors},
                                                                                                     {storage.begin(), storage.begin() + tensors})},
                                                               {"archive/data/0", data},
                                                               {"archive/version", "3\n"}})));
    };
    auto tied = open("tied_views.pt", 2);
    ASSERT_TRUE(tied.ok()) << tied.error();
    auto many = open("shared_views.pt", names.size());
    ASSERT_FALSE(many.ok());
    EXPECT_NE(many.error().find("more than twice (a tied head) what they hold"), std::string::npos) << many.error();
}

TEST(Checkpoint, LongKeysAreRefused) {
    // Each key is compared as it goes into a map: one 4 MB key repeated through the memo made a 6 MB
    // file run for minutes. A key over 4,096 bytes is refused.
    const std::string pkl = StateDictPickle({"wte.weight", std::string(5000, 'k')}, {4, 1});
    auto w = model::OpenWeights(WriteTestFile(
        "long_key.pt", MakeZip({{"archive/data.pkl", pkl}, {"archive/data/0", std::string(16, '\0')}, {"archive/data/1", std::string(4, '\0')},
                                {"archive/version", "3\n"}})));
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.error().find("a key of 5000 bytes"), std::string::npos) << w.error();
}

TEST(Unpickler, ReduceReadsItsArgumentsWithoutCopying) {
    // One tuple of 400,000 elements handed to REDUCE 40,000 times: each REDUCE copied the tuple (16
    // billion element copies, 128 GB: most of a minute); read in place, some milliseconds (5 s:
    // room for a sanitizer's build on a busy machine).
    std::string p = std::string("\x80\x02" "ctorch._utils\n_rebuild_parameter\nq\x00" "0(N", 40) + std::string(400'000, '2') + std::string("tq\x01" "0", 4);
    for (int i = 0; i < 40'000; ++i) p += std::string("h\x00h\x01R0", 6);
    const auto start = std::chrono::steady_clock::now();
    auto r = Unpickle(p + "}.");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_LT(seconds, 5.0) << "REDUCE copies its arguments";
}

TEST(Checkpoint, AModelFilesNameOnSomethingElseIsNamed) {
    // A folder named lit_model_finetuned.pth beside lit_model.pth had the base analysed as the
    // fine-tune; a FIFO named model.safetensors gave "no weights" (or another file beside it,
    // taken). Each is now an error naming it.
    namespace fs = std::filesystem;
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/model_io/not_files";
    fs::remove_all(dir);
    fs::create_directories(dir + "/lit/lit_model_finetuned.pth");
    std::ofstream(dir + "/lit/lit_model.pth") << "x";
    auto lit = model::FindModelFiles(dir + "/lit");
    ASSERT_FALSE(lit.ok()) << "took " << lit->weights;
    EXPECT_NE(lit.error().find("lit_model_finetuned.pth' is a folder, not a file"), std::string::npos) << lit.error();
    fs::create_directories(dir + "/hf");
    ASSERT_EQ(::mkfifo((dir + "/hf/model.safetensors").c_str(), 0600), 0);
    std::ofstream(dir + "/hf/other.safetensors") << "x";
    auto hf = model::FindModelFiles(dir + "/hf");
    ASSERT_FALSE(hf.ok()) << "took " << hf->weights;
    EXPECT_NE(hf.error().find("model.safetensors' is a FIFO, not a file"), std::string::npos) << hf.error();
    fs::create_directories(dir + "/link");
    std::ofstream(dir + "/link/model.safetensors") << "x";
    fs::create_symlink(dir + "/nowhere", dir + "/link/config.json");
    auto link = model::FindModelFiles(dir + "/link");
    ASSERT_FALSE(link.ok()) << "took " << link->weights << " without its config";
    EXPECT_NE(link.error().find("config.json' is a symbolic link to nothing"), std::string::npos) << link.error();
    // A folder named like a checkpoint that is not lit-gpt's (Lightning's sharded last.ckpt/) is
    // passed over, as before, for the file beside it.
    fs::create_directories(dir + "/lightning/last.ckpt");
    std::ofstream(dir + "/lightning/epoch-3.ckpt") << "x";
    auto lightning = model::FindModelFiles(dir + "/lightning");
    ASSERT_TRUE(lightning.ok()) << lightning.error();
    EXPECT_EQ(fs::path(lightning->weights).filename(), "epoch-3.ckpt");
}

TEST(Checkpoint, StateDictValueThatIsNotATensorIsNamed) {
    // {'wte.weight': [], ...}: the search reports what the embedding is, not every top-level key.
    const std::string pkl = std::string("\x80\x02}(", 4) + PickleString("wte.weight") + "]" + PickleString("other") + "Nu.";
    const std::string path = WriteTestFile("wte_list.pt", MakeZip({{"archive/data.pkl", pkl}, {"archive/version", "3\n"}}));
    auto w = model::OpenWeights(path);
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.error().find("'wte.weight' is a list, not a tensor"), std::string::npos) << w.error();
}

TEST(Checkpoint, NamesFromTheFileAreEscaped) {
    // A tensor name with a newline and escape sequences whose storage is cut short, and a ZIP
    // entry name with a carriage return and a bell: each message stays one plain line.
    const std::string evil = "wte.weight\n\x1b[2J\x1b[31m";
    std::vector<std::pair<std::string, std::string>> entries{{"archive/data.pkl", StateDictPickle({"wte.weight", evil}, {4, 4})},
                                                             {"archive/data/0", std::string(16, '\0')},
                                                             {"archive/data/1", std::string(8, '\0')}};
    auto w = model::OpenWeights(WriteTestFile("escape.pt", MakeZip(entries)));
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.error().find("tensor 'wte.weight\\n\\x1b[2J\\x1b[31m'"), std::string::npos) << w.error();
    entries.push_back({"archive/data/1", "x"});
    entries.back().first += "\r\a";
    entries.push_back(entries.back());
    const std::string zip = MakeZip(entries);
    auto twice = model::ParseZip(reinterpret_cast<const uint8_t*>(zip.data()), zip.size());
    for (const std::string& error : {w.error(), twice.ok() ? std::string("accepted") : twice.error()}) {
        EXPECT_EQ(error.find_first_of("\n\r\a\x1b"), std::string::npos) << error;
    }
    EXPECT_NE(twice.error().find("'archive/data/1\\r\\x07' appears twice"), std::string::npos) << twice.error();
}

TEST(Zip, RejectsWhatIsNotAStoredArchive) {
    for (size_t size : {0, 10, 21, 22, 100}) {
        std::string junk(size, 'x');
        auto r = model::ParseZip(reinterpret_cast<const uint8_t*>(junk.data()), junk.size());
        EXPECT_FALSE(r.ok());
    }
    // An end record whose directory lies past the end of the file.
    std::string eocd("PK\x05\x06\0\0\0\0\x01\0\x01\0\x2e\0\0\0\xff\0\0\0\0\0", 22);
    auto r = model::ParseZip(reinterpret_cast<const uint8_t*>(eocd.data()), eocd.size());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("outside"), std::string::npos) << r.error();
}

// ---- tests/model/fixtures/abuse: each hostile file and the error it must give ----

TEST(AbuseFixtures, EachGivesItsOneLineError) {
    const std::string dir = std::string(SSAVIZ_SOURCE_DIR) + "/tests/model/fixtures/abuse/";
    model::ConfigHints hints;
    hints.n_head = 2;
    {
        auto valid = model::LoadSsaGptFolder(dir + "valid.pt", at::kCPU, hints);
        ASSERT_TRUE(valid.ok()) << "the files are made from this one, which must load: " << valid.error();
    }
    const std::pair<const char*, const char*> cases[] = {
        {"truncated.pt", "no end-of-central-directory record"},
        {"short_storage.pt", "truncated?"},
        {"compressed.pt", "is compressed"},
        {"legacy.pt", "legacy torch.save"},
        {"whole_module.pt", "torch.nn.modules.linear.Linear"},
        {"code_execution.pt", "posix.system"},
        {"cyclic.pt", "no state dict"},
        {"huge_length.pt", "truncated?"},
        {"complex_dtype.pt", "torch.ComplexFloatStorage"},
        {"int_weights.pt", "dtype I64"},
        {"nan_weights.pt", "NaN"},
        {"view_out_of_bounds.pt", "reaches past its storage"},
        {"entry_count.pt", "entries"},
        {"huge_header.safetensors", "header"},
        {"empty.pt", "empty.pt"},
        {"torchscript.pt", "TorchScript"},
        {"zero_stride.pt", "tensor 'wte.weight' views 4,294,967,296 elements of a storage of 16"},
        {"wte_not_tensor.pt", "'wte.weight' is a dict, not a tensor"},
        {"escape_name.pt", "tensor 'evil\\n\\x1b[2J\\x1b[31mname': its storage of 4 F32 elements needs 16 bytes"},
        {"deep_dtype.safetensors", "nested more than 64 levels deep"},
        {"mark_flood.pt", "more than 4096 MARKs"},
    };
    for (const auto& [file, expected] : cases) {
        auto r = model::LoadSsaGptFolder(dir + file, at::kCPU, hints);
        ASSERT_FALSE(r.ok()) << file << " loaded";
        EXPECT_NE(r.error().find(expected), std::string::npos) << file << ": " << r.error();
        EXPECT_NE(r.error().find(file), std::string::npos) << "the error names the file: " << r.error();
        EXPECT_EQ(r.error().find_first_of("\n\r\x1b"), std::string::npos) << file << ": " << r.error();
    }
    EXPECT_FALSE(std::filesystem::exists("/tmp/ssaviz_pwned"));
}

}  // namespace
