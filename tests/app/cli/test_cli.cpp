// The real ssaviz binary, run the way users and scripts run it: exit codes, one-line errors,
// and the files `ssaviz export` writes (shapes checked here and by numpy itself).
#include "cli_harness.h"

#include <sys/stat.h>

#include "app/export/export_figures.h"
#include "model/nn/runtime.h"

namespace {
using namespace cli_test;

// Runs `script` (Python with numpy) on an export folder; it fails by raising.
void ExpectPythonCheck(const std::string& name, const std::string& script, const std::string& dir) {
    std::ofstream(Scratch(name)) << script;
    const std::string cmd = std::string(SSAVIZ_PYTHON) + " " + Scratch(name) + " " + dir + " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "numpy check failed: " << cmd;
}

TEST_F(Cli, InfoJsonDescribesTheModel) {
    Outcome r = Ssaviz({"info", "--model", Small(), "--json", "--device", "cpu"});
    ASSERT_EQ(r.code, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["n_layer"], 2);
    EXPECT_EQ(j["n_head"], 2);
    EXPECT_EQ(j["head_size"], 8);
    EXPECT_EQ(j["vocab_size"], 50257);
    EXPECT_EQ(j["query_temperature"]["position"], "sigmoid");
    EXPECT_EQ(j["value_temperature"]["token"], "feature");
    EXPECT_EQ(j["tokenizer"]["kind"], "gpt2-bpe");
    EXPECT_GT(j["parameters"].get<int64_t>(), 50257 * 16);
}

// A binary copied elsewhere opens the bundled English model by default, as --example and Python find
// it (it opened the build's random model: `ssaviz info` and `export` without --model gave another
// tokenizer's tokens than Python's ssaviz.load()).
TEST_F(Cli, ABinaryCopiedElsewhereOpensTheBundledModelByDefault) {
    const std::string dir = Scratch("copied_binary");
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy_file(SSAVIZ_BINARY, dir + "/ssaviz");
    const std::string cmd = "env -u SSAVIZ_MODEL " + dir + "/ssaviz info --json > " + dir + "/out.json 2> " + dir + "/err.txt";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << ReadFile(dir + "/err.txt");
    const json j = json::parse(ReadFile(dir + "/out.json"), nullptr, false);
    ASSERT_TRUE(j.is_object()) << ReadFile(dir + "/out.json");
    EXPECT_EQ(fs::path(j.value("dir", "")).lexically_normal(), (fs::path(SSAVIZ_SOURCE_DIR) / "assets" / "models" / "english" / "ssa").lexically_normal());
    fs::remove_all(dir);
}

// docs/command-line.md's synopsis says it is `ssaviz --help`'s: word for word (it had lost
// --dla-target). Lines that are a command's usage are compared, their wrapping aside.
TEST_F(Cli, TheDocsSynopsisIsHelps) {
    auto usage_words = [](const std::string& text, const std::string& from, const std::string& until) {
        std::vector<std::string> words;
        const size_t begin = text.find(from), end = text.find(until, begin);
        if (begin == std::string::npos || end == std::string::npos) return words;
        std::istringstream lines(text.substr(begin, end - begin));
        for (std::string line; std::getline(lines, line);) {
            std::istringstream in(line);
            std::string word;
            if (!(in >> word)) continue;
            if (word == "usage:") in >> word;
            if (word.rfind("ssaviz", 0) != 0 && word[0] != '[' && word[0] != '(' && word.rfind("--", 0) != 0) continue;  // a description
            do words.push_back(word);
            while (in >> word);
        }
        return words;
    };
    const Outcome help = Ssaviz({"--help"});
    ASSERT_EQ(help.code, 0) << help.err;
    const std::vector<std::string> helps = usage_words(help.out + help.err, "usage: ssaviz", "\n--model takes");
    const std::vector<std::string> docs =
        usage_words(ReadFile(std::string(SSAVIZ_SOURCE_DIR) + "/docs/command-line.md"), "    ssaviz [--model", "\n    --model takes");
    ASSERT_GT(helps.size(), 100u) << help.out << help.err;
    EXPECT_EQ(docs, helps) << "docs/command-line.md's synopsis is not `ssaviz --help`'s";
}

// The harness's fork server (app/fork_server.h) answers each command with the child's own exit
// status, and a malformed or truncated request ends it with one line, exit 2, nothing run.
TEST_F(Cli, TheForkServerGivesEachCommandsStatusAndRefusesBadRequests) {
    Outcome ok = Ssaviz({"info", "--model", Small(), "--device", "cpu"}), bad = Ssaviz({"export"});
    EXPECT_EQ(ok.code, 0) << ok.err;
    EXPECT_EQ(bad.code, 2) << bad.err;
    const std::string binary = Quote(SSAVIZ_BINARY);
    auto serve = [&](const std::string& spec, const std::string& request) {
        std::ofstream(Scratch("request"), std::ios::binary) << request;
        const std::string cmd = "SSAVIZ_FORK_SERVER=" + spec + " " + binary + " <" + Scratch("request") + " >/dev/null 2>" + Scratch("serve");
        const int status = std::system(cmd.c_str());
        return Outcome{WIFEXITED(status) ? WEXITSTATUS(status) : -1, "", ReadFile(Scratch("serve"))};
    };
    ExpectOneLineError(serve("three", ""), 2, "SSAVIZ_FORK_SERVER must be two descriptors");
    ExpectOneLineError(serve("0,1", std::string("\x02\0\0\0\x05\0\0\0ss", 10)), 2, "a truncated fork server request");
    ExpectOneLineError(serve("0,1", std::string("\xff\xff\xff\x7f", 4)), 2, "a fork server request of");
    EXPECT_EQ(serve("0,1", "").code, 0);  // no requests: the harness is done
#ifdef SSAVIZ_TEST_SANITIZED
    // Its children skip the static destructors but not LeakSanitizer's check of what they
    // allocate: a child that loses a block (SSAVIZ_FORK_SERVER_LEAK) is reported, its status the
    // sanitizer's, 1, though `info` itself succeeded. What the server's start-up allocated is not
    // theirs (fork_server.cpp): the libomp structures a forked child's runtime drops, once
    // reported without a suppression, are not, and neither is anything else here.
    const std::string request = app::ForkRequest({SSAVIZ_BINARY, "info", "--model", Small(), "--device", "cpu", Scratch("leak.out"), Scratch("leak.err")});
    std::ofstream(Scratch("request"), std::ios::binary) << request;
    for (const bool leak : {true, false}) {
        const std::string cmd = std::string("LSAN_OPTIONS= SSAVIZ_FORK_SERVER=0,1") + (leak ? " SSAVIZ_FORK_SERVER_LEAK=1 " : " ") + binary + " <" +
                                Scratch("request") + " >" + Scratch("status") + " 2>/dev/null";
        ASSERT_EQ(std::system(cmd.c_str()), 0);
        const std::string status = ReadFile(Scratch("status"));
        ASSERT_EQ(status.size(), 4u);
        int32_t child = 0;
        std::memcpy(&child, status.data(), 4);
        const std::string err = ReadFile(Scratch("leak.err"));
        EXPECT_TRUE(WIFEXITED(child) && WEXITSTATUS(child) == (leak ? 1 : 0)) << child << "\n" << err;
        EXPECT_EQ(err.find("LeakSanitizer: detected memory leaks") != std::string::npos, leak) << err;
        if (leak) EXPECT_NE(err.find("Direct leak of 64 byte(s) in 1 object(s)"), std::string::npos) << err;
        EXPECT_NE(ReadFile(Scratch("leak.out")).find("parameters"), std::string::npos) << "info's stdout, flushed before the check";
    }
#endif
}

// Issue 39: LibTorch's default thread count is its guess of the physical cores, 1 on VMs that give
// the process 2 vCPUs. The command line computes on every usable core unless SSAVIZ_THREADS says
// otherwise, and `info` says how many and why. `prefix` runs before the binary (env, taskset).
json RuntimeOf(const std::string& prefix, const std::string& model) {
    const std::string cmd = prefix + " " + Quote(SSAVIZ_BINARY) + " info --json --device cpu --model " + Quote(model) + " >" +
                            Scratch("runtime") + " 2>&1 </dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd << ": " << ReadFile(Scratch("runtime"));
    return json::parse(ReadFile(Scratch("runtime")), nullptr, false)["runtime"];
}

TEST_F(Cli, EveryUsableCoreComputesByDefault) {
    const json all = RuntimeOf("env -u SSAVIZ_THREADS", Small());
    EXPECT_EQ(all["threads"], model::UsableCores()) << all.dump();
    EXPECT_NE(all["threads_why"].get<std::string>().find(model::CgroupQuotaCores() > 0 ? "quota" : "affinity"), std::string::npos) << all.dump();
    EXPECT_FALSE(all["blas"].get<std::string>().empty());

    const json env = RuntimeOf("env SSAVIZ_THREADS=3", Small());
    EXPECT_EQ(env["threads"], 3) << env.dump();
    EXPECT_EQ(env["threads_why"], "SSAVIZ_THREADS=3");

    if (model::AffinityCores() >= 2) {  // a narrower affinity mask is followed
        const json one = RuntimeOf("env -u SSAVIZ_THREADS taskset -c 0", Small());
        EXPECT_EQ(one["threads"], 1) << one.dump();
        EXPECT_EQ(one["threads_why"], "1 core in the CPU affinity mask") << one.dump();
    }
    Outcome text = Ssaviz({"info", "--model", Small(), "--device", "cpu"});
    EXPECT_NE(text.out.find("\nthreads      "), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("\nblas         "), std::string::npos) << text.out;
}

// OpenBLAS falls back to its generic SSE3 kernels ("Prescott") on a CPU newer than itself (Debian
// 12's on an Intel Xeon of family 6, model 207: products ~3x slower). The command line then starts
// itself again with the kernels the CPU runs (model::RestartWithFasterBlasKernels), so no CPU with
// AVX2 and FMA computes with Prescott's unless the user asks for them, whose setting stands.
TEST_F(Cli, NoCpuWithAvx2RunsOpenBlasFallbackKernelsUnasked) {
    const std::string chosen = RuntimeOf("env -u OPENBLAS_CORETYPE", Small())["blas"];
    if (chosen.find("OpenBLAS") == std::string::npos) GTEST_SKIP() << "the BLAS is not OpenBLAS: " << chosen;
    if (!model::BlasKernelsOfThisCpu().empty()) {
        EXPECT_EQ(chosen.find(" Prescott "), std::string::npos) << chosen;
    }
    const std::string asked = RuntimeOf("env OPENBLAS_CORETYPE=Prescott", Small())["blas"];
    EXPECT_NE(asked.find(" Prescott "), std::string::npos) << asked;
}

// README's device settings that change how an analysis computes are named by `info` and by the
// exports' metrics.json; at their defaults, or where they do not apply, none is.
TEST_F(Cli, InfoAndExportsNameTheSettingsThatChangeHowTheyCompute) {
    auto run = [&](const std::string& env, const std::string& args) {
        const std::string cmd = "env -u SSAVIZ_PRODUCTS -u SSAVIZ_LAYER_PRODUCTS -u SSAVIZ_FUSED_ATTENTION " + env + " " + Quote(SSAVIZ_BINARY) + " " + args +
                                " >" + Scratch("settings") + " 2>&1 </dev/null";
        EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd << ": " << ReadFile(Scratch("settings"));
        return ReadFile(Scratch("settings"));
    };
    const std::string info = "info --json --device cpu --model " + Quote(Small());
    EXPECT_EQ(json::parse(run("", info), nullptr, false)["settings"], json::array());
    // The CUDA kernels' switches and the block size are a device's; blocks is the CPU's default.
    EXPECT_EQ(json::parse(run("SSAVIZ_CUDA_TEMPERATURES=1 SSAVIZ_CUDA_SOFTMAX=0 SSAVIZ_DEVICE_BLOCK_MB=8 SSAVIZ_LAYER_PRODUCTS=blocks", info),
                          nullptr, false)["settings"],
              json::array());
    const json set = json::parse(run("SSAVIZ_PRODUCTS=tf32x3 SSAVIZ_LAYER_PRODUCTS=whole", info), nullptr, false)["settings"];
    ASSERT_EQ(set.size(), 2u) << set.dump();
    EXPECT_EQ(set[0].get<std::string>().rfind("SSAVIZ_PRODUCTS=tf32x3: ", 0), 0u) << set.dump();
    EXPECT_NE(set[0].get<std::string>().find("emulated on the CPU"), std::string::npos) << set.dump();
    EXPECT_EQ(set[1].get<std::string>().rfind("SSAVIZ_LAYER_PRODUCTS=whole: ", 0), 0u) << set.dump();

    // The attention rows fused: on the CPU by the unfused way's ops with whole-layer products, for tests; unused with its blocks.
    const json fused = json::parse(run("SSAVIZ_FUSED_ATTENTION=1", info), nullptr, false)["settings"];
    ASSERT_EQ(fused.size(), 1u) << fused.dump();
    EXPECT_EQ(fused[0].get<std::string>().rfind("SSAVIZ_FUSED_ATTENTION=1 unused: ", 0), 0u) << fused.dump();
    const json fused_whole = json::parse(run("SSAVIZ_FUSED_ATTENTION=1 SSAVIZ_LAYER_PRODUCTS=whole", info), nullptr, false)["settings"];
    ASSERT_EQ(fused_whole.size(), 2u) << fused_whole.dump();
    EXPECT_EQ(fused_whole[1].get<std::string>().rfind("SSAVIZ_FUSED_ATTENTION=1: ", 0), 0u) << fused_whole.dump();

    const std::string text = run("SSAVIZ_PRODUCTS=tf32x3", "info --device cpu --model " + Quote(Small()));
    EXPECT_NE(text.find("\nsetting      SSAVIZ_PRODUCTS=tf32x3: "), std::string::npos) << text;
    const std::string out = kOut + "/settings-export";
    fs::remove_all(out);
    run("SSAVIZ_PRODUCTS=tf32x3", "export --device cpu --model " + Quote(Small()) + " --text 'The cat sat' --format json --out " + Quote(out));
    const json metrics = json::parse(ReadFile(out + "/metrics.json"), nullptr, false);
    ASSERT_TRUE(metrics.contains("model")) << ReadFile(Scratch("settings"));
    EXPECT_EQ(metrics["model"]["settings"], json::array({set[0]}));
}

TEST_F(Cli, TokenizeJsonGivesIdsPiecesAndOffsets) {
    Outcome r = Ssaviz({"tokenize", "--model", Small(), "--text", "Hello world", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["ids"], json({15496, 995}));
    EXPECT_EQ(j["pieces"], json({"Hello", " world"}));
    EXPECT_EQ(j["offsets"], json({{0, 5}, {5, 11}}));
}

TEST_F(Cli, ExportWritesEveryFileWithTheRightShapes) {
    const std::string out = kOut + "/export";
    fs::remove_all(out);
    Outcome r = Ssaviz({"export", "--model", Small(), "--text", "The cat sat on the mat. The cat", "--out", out, "--device", "cpu",
                        "--format", "json,npy,csv"});
    ASSERT_EQ(r.code, 0) << r.err;
    // Its line names the model it ran (an export without --model said nothing of which).
    EXPECT_NE(r.err.find("ssaviz: wrote " + out + " (cli/small: 9 tokens, 2 x 2 heads"), std::string::npos) << r.err;
    json tokens = json::parse(ReadFile(out + "/tokens.json"));
    const int64_t T = static_cast<int64_t>(tokens["ids"].size());
    ASSERT_EQ(T, 9);
    EXPECT_EQ(NpyShape(out + "/attention.npy"), (std::vector<int64_t>{2, 2, T, T}));
    EXPECT_EQ(NpyShape(out + "/attention_compare.npy"), (std::vector<int64_t>{2, 2, T, T}));
    EXPECT_EQ(NpyShape(out + "/tau_q.npy"), (std::vector<int64_t>{2, 2, T}));
    EXPECT_EQ(NpyShape(out + "/tau_v.npy"), (std::vector<int64_t>{2, 2, T}));
    json metrics = json::parse(ReadFile(out + "/metrics.json"));
    EXPECT_EQ(metrics["comparison"], "tau1");  // what the comparison is (a twin's or base's folder when it is one)
    ASSERT_EQ(metrics["heads"].size(), 4u);
    for (const char* key : {"entropy", "normalized_entropy", "spikiness", "max_weight", "top5_mass", "effective_support", "sink_mass",
                            "sink_head", "tau_q", "tau_v"})
        EXPECT_TRUE(metrics["heads"][0]["ssa"].contains(key)) << key;
    for (const char* key : {"js_divergence", "l1_distance", "qk_opnorm", "qk_eig_mean", "qk_eig_var", "effective_qk_norm"})
        EXPECT_TRUE(metrics["heads"][0].contains(key)) << key;
    EXPECT_EQ(metrics["rows"]["ssa"]["entropy"][1][1].size(), static_cast<size_t>(T));
    EXPECT_FALSE(metrics["heads"][0].contains("base") || metrics["rows"].contains("base") || metrics["sink_ratio"].contains("base"))
        << "no base side without a base";
    EXPECT_TRUE(metrics["sink_ratio"].contains("comparison"));
    EXPECT_TRUE(fs::exists(out + "/csv/L1_H0.csv"));
    EXPECT_TRUE(fs::exists(out + "/csv/L1_H0_compare.csv"));

    // numpy itself reads the files, and they agree with metrics.json.
    const std::string check =
        "import json, numpy as np, sys\n"
        "d = sys.argv[1]\n"
        "a = np.load(d + '/attention.npy'); v = np.load(d + '/attention_compare.npy')\n"
        "q = np.load(d + '/tau_q.npy'); m = json.load(open(d + '/metrics.json'))\n"
        "assert a.dtype == np.float32 and a.shape == v.shape\n"
        "assert np.allclose(a.sum(-1), 1, atol=1e-5) and np.allclose(np.triu(a, 1), 0)\n"
        "p = a[1, 0, 1:, :]; h = -(np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0)).sum(-1).mean()\n"
        "assert abs(h - m['heads'][2]['ssa']['entropy']) < 1e-5, (h, m['heads'][2]['ssa']['entropy'])\n"
        "assert abs(q[0, 1].mean() - m['heads'][1]['ssa']['tau_q']['mean']) < 1e-5\n"
        "print('numpy ok')\n";
    ExpectPythonCheck("check_export.py", check, out);
}

TEST_F(Cli, ExportAgainstATwinModel) {
    const std::string out = kOut + "/export_twin";
    Outcome r = Ssaviz({"export", "--model", Small(), "--compare", Twin(), "--text", "one two three four", "--out", out,
                    "--format", "json", "--layers", "1", "--heads", "0"});
    ASSERT_EQ(r.code, 0) << r.err;
    json metrics = json::parse(ReadFile(out + "/metrics.json"));
    EXPECT_EQ(metrics["comparison"], Twin());
    EXPECT_GT(metrics["heads"][0]["js_divergence"].get<double>(), 0.0);
    EXPECT_FALSE(fs::exists(out + "/attention.npy"));  // --format json only
}

// A model without temperatures (a fine-tune's base opened alone) against tau = 1 is compared with
// itself: every difference 0. The export says so, and what to compare instead; a model with
// temperatures, or compared with a twin, has no such note.
TEST_F(Cli, AModelWithoutTemperaturesIsNotComparedWithItselfInSilence) {
    const std::string english = std::string(SSAVIZ_SOURCE_DIR) + "/assets/models/english/";
    const std::string note = "ssaviz: note: every temperature of the SSA side is 1 (a model without temperatures, or every head at tau = 1 "
                             "by the what-ifs), so its tau = 1 comparison is itself and every difference is 0";
    auto err_of = [&](std::vector<std::string> args) {
        args.insert(args.end(), {"--text", "The cat sat on the mat.", "--out", Scratch("self"), "--format", "json"});
        Outcome r = Ssaviz(args);
        EXPECT_EQ(r.code, 0) << r.err;
        return r.err;
    };
    for (const char* compare : {"vanilla", "local"})
        EXPECT_NE(err_of({"export", "--model", english + "vanilla", "--compare", compare}).find(note), std::string::npos) << compare;
    EXPECT_NE(err_of({"export", "--model", Small(), "--ablate", "0:*,1:*"}).find(note), std::string::npos) << "every head at tau = 1";
    EXPECT_EQ(err_of({"export", "--model", Small(), "--ablate", "0:*"}).find("ssaviz: note: every temperature"), std::string::npos);
    // One token: a position term is 1 there whatever the model learned, so nothing is said of its
    // temperatures (an official fine-tune, one slope a layer, was told it had none).
    const Outcome one = Ssaviz({"export", "--model", english + "vanilla", "--text", "The", "--out", Scratch("self_one"), "--format", "json"});
    EXPECT_EQ(one.code, 0) << one.err;
    EXPECT_EQ(one.err.find("ssaviz: note: every temperature"), std::string::npos) << one.err;
    EXPECT_EQ(err_of({"export", "--model", english + "vanilla", "--compare", english + "ssa"}).find("ssaviz: note: every temperature"), std::string::npos);
    // Beside a base, a fine-tune without temperatures: its 'temperatures' part is 0, said, with
    // what shows what training with them gave.
    EXPECT_NE(err_of({"export", "--model", english + "vanilla", "--base", english + "ssa"})
                  .find("ssaviz: note: every temperature of the fine-tune is 1 (a model without temperatures, or every head at tau = 1 by the "
                        "what-ifs), so its 'temperatures' part is 0 and its whole change is the drift"),
              std::string::npos);
    // The model without its what-ifs, with none: itself, said.
    EXPECT_NE(err_of({"export", "--model", Small(), "--compare", "unedited"})
                  .find("ssaviz: note: the comparison is the model without its what-ifs, and there are none, so it is itself"),
              std::string::npos);
    EXPECT_EQ(err_of({"export", "--model", Small(), "--compare", "unedited", "--ablate", "0:1"}).find("ssaviz: note:"), std::string::npos);
    // The model itself as its twin (its folder, or a link to it) is refused, as it is as its base.
    fs::remove(Scratch("self_link"));
    fs::create_directory_symlink(Small(), Scratch("self_link"));
    for (const std::string& twin : {Small(), Scratch("self_link")})
        ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--compare", twin, "--text", "The cat", "--out", Scratch("self"), "--format", "json"}), 2,
                           "' is the model itself (model.safetensors): a twin is another model");
}

// Issue 34: a fine-tune against its base, three sides. --base DIR (and --compare base with a
// sibling base/ folder) writes each side's maps and losses and metrics.json's decomposition, which
// numpy recomputes from the exported maps (each row's JS and L1, the mean over rows 2..T) within
// 1e-5; the maps in float64 here, in float32 in the engine.
TEST_F(Cli, ExportAgainstABaseWritesThreeSidesAndTheDecomposition) {
    const std::string out = kOut + "/export_base";
    fs::remove_all(out);
    const std::string text = "The cat sat on the mat. The cat sat on the hat.";
    Outcome r = Ssaviz({"export", "--model", Small(), "--base", Twin(), "--text", text, "--out", out, "--format", "json,npy,csv", "--layers",
                        "1", "--heads", "0"});
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* f : {"attention.npy", "attention_tau1.npy", "attention_base.npy", "loss.npy", "loss_tau1.npy", "loss_base.npy",
                          "csv/L1_H0_tau1.csv", "csv/L1_H0_base.csv"})
        EXPECT_TRUE(fs::exists(out + "/" + f)) << f;
    EXPECT_FALSE(fs::exists(out + "/attention_compare.npy")) << "beside a base the comparison side is named tau1";
    const json metrics = json::parse(ReadFile(out + "/metrics.json"));
    EXPECT_EQ(metrics["comparison_kind"], "base");
    EXPECT_EQ(metrics["base"], Twin());
    // The side blocks named as the views name them: beside a base "comparison" is tau = 1, not the base.
    EXPECT_EQ(metrics["sides"]["ssa"], "SSA");
    EXPECT_EQ(metrics["sides"]["comparison"], "tau = 1");
    EXPECT_EQ(metrics["sides"]["base"], "base");
    EXPECT_NE(metrics["sides"]["notes"].get<std::string>().find("its base model"), std::string::npos) << metrics["sides"];
    ASSERT_TRUE(metrics.contains("decomposition"));
    // A base trained with SSA (this one has tau_q and tau_v) is named so: the split reads otherwise.
    EXPECT_EQ(metrics["decomposition"]["base_temperatures"], "tau_q and tau_v");
    EXPECT_NE(r.err.find("ssaviz: note: the base has temperatures of its own (tau_q and tau_v): 'temperatures' is all of SSA's"),
              std::string::npos) << r.err;
    {  // The summary line: the decomposition's mean losses and the head the temperatures changed most.
        const json& dec = metrics["decomposition"];
        double most = -1;
        std::string head;
        for (size_t l = 0; l < dec["js_temperature"].size(); ++l)
            for (size_t h = 0; h < dec["js_temperature"][l].size(); ++h)
                if (const double v = dec["js_temperature"][l][h]; v > most) {
                    char said[64];
                    std::snprintf(said, sizeof said, "L%zu H%zu %.3g", l, h, v);  // as TopHeads writes it
                    most = v, head = said;
                }
        char line[160];
        std::snprintf(line, sizeof line, "ssaviz: fine-tuning: mean loss %.4f (base) to %.4f (SSA)", dec["loss_mean"]["base"].get<double>(),
                      dec["loss_mean"]["ssa"].get<double>());
        EXPECT_NE(r.err.find(line), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("by the temperatures: " + head), std::string::npos) << r.err;
        // With what-ifs (on the SSA side only) the line names them: it called the ablated model "SSA".
        Outcome ablated = Ssaviz({"export", "--model", Small(), "--base", Twin(), "--text", text, "--out", out + "_ablated", "--format", "json,svg",
                                  "--ablate", "1:0", "--layers", "1", "--heads", "0"});
        ASSERT_EQ(ablated.code, 0) << ablated.err;
        const json what_if = json::parse(ReadFile(out + "_ablated/metrics.json"))["decomposition"]["loss_mean"];
        std::snprintf(line, sizeof line, "mean loss %.4f (base) to %.4f (SSA with what-ifs)", what_if["base"].get<double>(),
                      what_if["ssa"].get<double>());
        EXPECT_NE(ablated.err.find(line), std::string::npos) << ablated.err;
        EXPECT_NE(ablated.err.find(" = temperatures and what-ifs "), std::string::npos) << ablated.err;
        EXPECT_NE(ablated.err.find("by the temperatures and what-ifs: "), std::string::npos) << ablated.err;
        // The figures' panel and legend name them too (they said "temperatures: SSA vs tau = 1").
        EXPECT_NE(ReadFile(out + "_ablated/finetune.svg").find("temperatures and what-ifs: SSA with what-ifs vs tau = 1 (loss "), std::string::npos);
        EXPECT_NE(ReadFile(out + "_ablated/finetune_loss.svg").find("temperatures and what-ifs: SSA with what-ifs - tau = 1"), std::string::npos);
        EXPECT_NE(what_if["ssa"], dec["loss_mean"]["ssa"]) << "the what-if changed nothing";
        EXPECT_EQ(what_if["base"], dec["loss_mean"]["base"]);
    }
    const std::string check =
        "import json, numpy as np, sys\n"
        "d = sys.argv[1]\n"
        "a, t, b = (np.load(d + f).astype(np.float64) for f in ('/attention.npy', '/attention_tau1.npy', '/attention_base.npy'))\n"
        "m = json.load(open(d + '/metrics.json')); dec = m['decomposition']\n"
        "def kl(p, q): return np.where(p > 0, p * np.log(np.where(p > 0, p, 1) / np.where(q > 0, q, 1)), 0).sum(-1)\n"
        "def js(p, q): return 0.5 * (kl(p, (p + q) / 2) + kl(q, (p + q) / 2))\n"
        "def l1(p, q): return np.abs(p - q).sum(-1)\n"
        "for part, (p, q) in {'total': (a, b), 'temperature': (a, t), 'drift': (t, b)}.items():\n"
        "    for name, f in (('js', js), ('l1', l1)):\n"
        "        want = f(p, q)[:, :, 1:].mean(-1); got = np.array(dec[name + '_' + part])\n"
        "        assert got.shape == want.shape and np.abs(want - got).max() < 1e-5, (name, part, np.abs(want - got).max())\n"
        "        if name == 'js' and part != 'temperature':  # each query row's, beside the temperatures' part's js_divergence\n"
        "            rows = np.array(m['rows']['js_' + part]); assert np.abs(rows - f(p, q)).max() < 1e-5, part\n"
        "assert dec['js_total'] != dec['js_drift'] and np.array(dec['js_temperature']).max() > 0\n"
        "for side, f in (('ssa', '/loss.npy'), ('tau1', '/loss_tau1.npy'), ('base', '/loss_base.npy')):\n"
        "    assert abs(np.load(d + f).mean() - dec['loss_mean'][side]) < 1e-5, side\n"
        "assert abs(np.load(d + '/loss_base.npy').mean() - m['loss']['base']) < 1e-5\n"
        "# The base is a side of every head and row, as SSA and tau = 1 are: its entropy and sink mass from its maps.\n"
        "ent = -np.where(b > 0, b * np.log(np.where(b > 0, b, 1)), 0).sum(-1)\n"
        "for h in m['heads']:\n"
        "    l, k = h['layer'], h['head']\n"
        "    assert abs(h['base']['entropy'] - ent[l, k, 1:].mean()) < 1e-5, (l, k, h['base'])\n"
        "    assert abs(h['base']['sink_mass'] - b[l, k, 1:, 0].mean()) < 1e-5, (l, k)\n"
        "    assert h['base']['sink_head'] == (h['base']['sink_mass'] > m['sink_epsilon'])\n"
        "    t = h['base']['tau_q']; assert t['min'] <= t['mean'] <= t['max'] and t != h['ssa']['tau_q'], 'the base\\'s own temperatures'\n"
        "assert np.abs(np.array(m['rows']['base']['entropy']) - ent).max() < 1e-5\n"
        "assert m['sink_ratio']['base'] == np.mean([h['base']['sink_head'] for h in m['heads']])\n"
        "# Each side's CSV of the head is its map (9 significant digits); the base's was not written.\n"
        "import csv\n"
        "for f, npy in (('/csv/L1_H0.csv', '/attention.npy'), ('/csv/L1_H0_tau1.csv', '/attention_tau1.npy'), ('/csv/L1_H0_base.csv', '/attention_base.npy')):\n"
        "    rows = list(csv.reader(open(d + f)))[1:]\n"
        "    got = np.array([[float(x) for x in r[2:]] for r in rows])\n"
        "    assert np.abs(got - np.load(d + npy)[1, 0]).max() < 1e-8, f\n"
        "# heads.csv: a row a head, metrics.json's head values on each side and the decomposition, for pandas.\n"
        "rows = list(csv.DictReader(open(d + '/heads.csv')))\n"
        "assert len(rows) == len(m['heads']) and 'js_temperature' not in rows[0], list(rows[0])\n"
        "for r, h in zip(rows, m['heads']):\n"
        "    l, k = int(r['layer']), int(r['head']); assert (l, k) == (h['layer'], h['head'])\n"
        "    for col, want in (('entropy', h['ssa']['entropy']), ('entropy_tau1', h['comparison']['entropy']), ('entropy_base', h['base']['entropy']),\n"
        "                      ('sink_head_base', int(h['base']['sink_head'])), ('tau_q_mean_base', h['base']['tau_q']['mean']),\n"
        "                      ('js_divergence', dec['js_temperature'][l][k]), ('js_total', dec['js_total'][l][k]), ('js_drift', dec['js_drift'][l][k]),\n"
        "                      ('l1_total', dec['l1_total'][l][k]), ('l1_drift', dec['l1_drift'][l][k])):\n"
        "        assert abs(float(r[col]) - want) <= 1e-6 * max(1, abs(want)), (l, k, col, r[col], want)\n"
        "# How far the weights moved from the base's, from the two safetensors files (GPT-2's conv1d layout: [in, out]).\n"
        "import struct\n"
        "def tensors(path):\n"
        "    f = open(path, 'rb'); n = struct.unpack('<Q', f.read(8))[0]; head = json.loads(f.read(n)); data = f.read()\n"
        "    return {k: np.frombuffer(data[v['data_offsets'][0]:v['data_offsets'][1]], '<f4').reshape(v['shape']).astype(np.float64)\n"
        "            for k, v in head.items() if k != '__metadata__'}\n"
        "ft, base = tensors(m['model']['dir'] + '/model.safetensors'), tensors(m['base'] + '/model.safetensors')\n"
        "def moved(names, split=None):\n"
        "    c = sum((split(ft[x] - base[x]) ** 2).sum(-1) if split else ((ft[x] - base[x]) ** 2).sum() for x in names)\n"
        "    b = sum((split(base[x]) ** 2).sum(-1) if split else (base[x] ** 2).sum() for x in names)\n"
        "    return np.sqrt(c) / np.sqrt(b)\n"
        "H = len(m['heads']) // len(dec['js_total']); w = dec['weights']\n"
        "for l in range(len(dec['js_total'])):\n"
        "    a_ = f'h.{l}.attn.c_attn'; E = ft[a_ + '.weight'].shape[0]; D = E // H\n"
        "    for j, key in enumerate('qkv'):  # the head's slice of the weights and of the bias\n"
        "        def sq(t):\n"
        "            return ((t[a_ + '.weight'][:, j * E:(j + 1) * E].reshape(E, H, D) ** 2).sum((0, 2)) +\n"
        "                    (t[a_ + '.bias'][j * E:(j + 1) * E].reshape(H, D) ** 2).sum(1))\n"
        "        change = {x: ft[x] - base[x] for x in (a_ + '.weight', a_ + '.bias')}\n"
        "        want = np.sqrt(sq(change)) / np.sqrt(sq(base))\n"
        "        assert np.abs(np.array(w[key][l]) - want).max() < 1e-5 * want.max(), (l, key, w[key][l], want)\n"
        "    want = moved([f'h.{l}.attn.c_proj.weight'], lambda x: x.reshape(H, -1))\n"
        "    assert np.abs(np.array(w['o'][l]) - want).max() < 1e-5 * want.max(), (l, 'o')\n"
        "    want = moved([f'h.{l}.mlp.c_fc.weight', f'h.{l}.mlp.c_fc.bias', f'h.{l}.mlp.c_proj.weight', f'h.{l}.mlp.c_proj.bias'])\n"
        "    assert abs(w['mlp'][l] - want) < 1e-5 * want, (l, 'mlp', w['mlp'][l], want)\n"
        "    for key, norm in (('norm_attention', 'ln_1'), ('norm_mlp', 'ln_2')):\n"
        "        want = moved([f'h.{l}.{norm}.weight', f'h.{l}.{norm}.bias'])\n"
        "        assert abs(w[key][l] - want) <= 1e-5 * want, (l, key, w[key][l], want)\n"
        "want = moved(['ln_f.weight', 'ln_f.bias']); assert abs(w['norm_final'] - want) <= 1e-5 * want, (w['norm_final'], want)\n"
        "want = moved(['wte.weight', 'wpe.weight']); assert abs(w['embeddings'] - want) < 1e-5 * want, (w['embeddings'], want)\n"
        "assert w['head'] is None and 'lm_head.weight' not in ft, 'tied: the embeddings say it'\n"
        "for r, h in zip(rows, m['heads']):  # per head in heads.csv too, and the base's QK spectrum beside SSA's\n"
        "    assert abs(float(r['weights_v']) - w['v'][h['layer']][h['head']]) < 1e-6 and 'qk_opnorm_base' in r\n"
        "    assert h['base']['qk_opnorm'] > 0 and h['base']['qk_opnorm'] != h['qk_opnorm'], h\n"
        "print('numpy ok')\n";
    ExpectPythonCheck("check_base.py", check, out);

    // The base's maps and SSA - base as figures: heatmaps and heads grids (--maps base,base_diff),
    // only with a base.
    const std::string figures = kOut + "/export_base_maps";
    fs::remove_all(figures);
    r = Ssaviz({"export", "--model", Small(), "--base", Twin(), "--text", text, "--out", figures, "--format", "png,svg,html", "--maps",
                "ssa,base,base_diff", "--layers", "1", "--heads", "0", "--highlight", "loss_delta_base"});
    ASSERT_EQ(r.code, 0) << r.err;
    // The base titled by its folder and the one above it, as the window's three-way maps title it.
    const std::string base_title = "base (" + fs::path(kOut).filename().string() + "/twin)";
    EXPECT_NE(ReadFile(figures + "/heatmaps/L1_H0_base.svg").find(base_title), std::string::npos) << base_title;
    // What fine-tuning changed as figures: head by head (each part's JS, one cell a head) and token
    // by token, titled with the mean losses metrics.json's decomposition holds.
    const std::string finetune = ReadFile(figures + "/finetune.svg");
    const json& loss_mean = metrics["decomposition"]["loss_mean"];
    auto nats = [](const char* format, double v) {
        char buf[64];
        std::snprintf(buf, sizeof buf, format, v);
        return std::string(buf);
    };
    const double ssa = loss_mean["ssa"], tau1 = loss_mean["tau1"], base = loss_mean["base"];
    for (const std::string& said : {"mean loss " + nats("%.4f", base) + " (base: " + fs::path(kOut).filename().string() + "/twin) to " + nats("%.4f", ssa) + " (SSA)",
                                    "temperatures: SSA vs tau = 1 (loss " + nats("%+.4f", ssa - tau1) + ")",
                                    "drift: tau = 1 vs base with its tau_q and tau_v (loss " + nats("%+.4f", tau1 - base) + ")"})
        EXPECT_NE(finetune.find(said), std::string::npos) << said;
    const int L = metrics["model"]["n_layer"], H = metrics["model"]["n_head"];
    size_t cells = 0;
    for (size_t at = finetune.find("<rect"); at != std::string::npos; at = finetune.find("<rect", at + 1)) ++cells;
    EXPECT_GE(cells, 2u * L * H) << "a cell a head in each part";
    const std::string loss_bars = ReadFile(figures + "/finetune_loss.svg");
    EXPECT_NE(loss_bars.find("temperatures: SSA - tau = 1"), std::string::npos);
    EXPECT_NE(loss_bars.find("drift: tau = 1 - base"), std::string::npos);
    EXPECT_GT(fs::exists(figures + "/finetune_loss.png") ? fs::file_size(figures + "/finetune_loss.png") : 0u, 1000u);
    EXPECT_NE(ReadFile(figures + "/highlight.html").find("loss change from base"), std::string::npos) << "the highlight of where fine-tuning helped";
    for (const char* f : {"highlight.png", "heads_grid.png", "heads_grid_base.png", "heads_grid_diff_base.png", "heatmaps/L1_H0.png", "heatmaps/L1_H0_base.png",
                          "heatmaps/L1_H0_diff_base.png"})
        EXPECT_GT(fs::exists(figures + "/" + f) ? fs::file_size(figures + "/" + f) : 0u, 1000u) << f;
    EXPECT_FALSE(fs::exists(figures + "/heads_grid_tau1.png")) << "only the maps asked for";
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", text, "--out", kOut + "/export_base_maps_none", "--format", "png",
                               "--maps", "ssa,base_diff"}),
                       2, "--maps base_diff needs a base (--base DIR, or --compare base)");  // a usage error, before the model runs
    EXPECT_FALSE(fs::exists(kOut + "/export_base_maps_none/heads_grid.png"));
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", text, "--out", kOut + "/export_base_maps_none", "--format", "png",
                               "--highlight", "loss_base"}),
                       2, "--highlight loss_base needs a base (--base DIR, or --compare base)");  // a usage error, before the model runs
    // --base and another comparison: one of them would be dropped (the last one won, silently).
    for (const std::vector<std::string>& both : {std::vector<std::string>{"--base", Twin(), "--compare", "local"},
                                                 {"--compare", "unedited", "--base", Twin()}, {"--base", Twin(), "--compare", Twin()}}) {
        std::vector<std::string> command = {"export", "--model", Small(), "--text", text, "--out", kOut + "/export_base_and"};
        command.insert(command.end(), both.begin(), both.end());
        ExpectOneLineError(Ssaviz(command), 2, "exclude each other");
    }
    Outcome kept = Ssaviz({"export", "--model", Small(), "--base", Twin(), "--compare", "vanilla", "--text", text, "--out", kOut + "/export_base_vanilla",
                           "--format", "json"});
    ASSERT_EQ(kept.code, 0) << kept.err;
    EXPECT_EQ(json::parse(ReadFile(kOut + "/export_base_vanilla/metrics.json"))["comparison_kind"], "base") << "vanilla, the default, keeps the base";
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", text, "--out", kOut + "/export_base_maps_none", "--format", "html",
                               "--highlight", "js_total"}),
                       2, "--highlight js_total needs a base (--base DIR, or --compare base)");  // a usage error, before the model runs

    // Where fine-tuning changed attention, token by token: --highlight js_total (one head's rows,
    // SSA against the base) and js_drift (the mean over heads of tau = 1 against the base), each
    // token's value in the HTML equal to numpy's JS of the exported maps' rows (%.4g).
    for (const auto& [key, scope] : {std::pair<const char*, const char*>{"js_total", "1,0"}, {"js_drift", "model"}, {"js_divergence", "0"}}) {
        const std::string where = kOut + "/export_base_js_" + key;
        fs::remove_all(where);
        r = Ssaviz({"export", "--model", Small(), "--base", Twin(), "--text", text, "--out", where, "--format", "html,npy", "--highlight", key,
                    "--highlight-scope", scope});
        ASSERT_EQ(r.code, 0) << r.err;
        const std::string check_js =
            "import json, re, sys, numpy as np\n"
            "d, key, scope = sys.argv[1], '" + std::string(key) + "', '" + scope + "'\n"
            "a, t, b = (np.load(d + f).astype(np.float64) for f in ('/attention.npy', '/attention_tau1.npy', '/attention_base.npy'))\n"
            "def kl(p, q): return np.where(p > 0, p * np.log(np.where(p > 0, p, 1) / np.where(q > 0, q, 1)), 0).sum(-1)\n"
            "def js(p, q): return 0.5 * (kl(p, (p + q) / 2) + kl(q, (p + q) / 2))\n"
            "rows = {'js_total': js(a, b), 'js_drift': js(t, b), 'js_divergence': js(a, t)}[key]\n"
            "want = rows.mean((0, 1)) if scope == 'model' else rows[int(scope)].mean(0) if ',' not in scope else rows[1, 0]\n"
            "html = open(d + '/highlight.html').read()\n"
            "got = [float(v) for v in re.findall(r'title=\"[^\"]* = ([-0-9.e+]+)\"', html)]\n"
            "assert len(got) == want.shape[0], (len(got), want.shape)\n"
            "for i, (g, w) in enumerate(zip(got, want)):\n"
            "    assert abs(g - w) <= 1e-3 * abs(w) + 1e-7, (key, i, g, w)\n"
            "assert max(got) > 0\n"
            "print('numpy ok')\n";
        ExpectPythonCheck(std::string("check_js_") + key + ".py", check_js, where);
    }

    // The base beside a fine-tune: a sibling folder "base".
    const std::string pair = kOut + "/finetune";
    fs::remove_all(pair);
    fs::create_directories(pair);
    fs::copy(Small(), pair + "/ft", fs::copy_options::recursive);
    fs::copy(Twin(), pair + "/base", fs::copy_options::recursive);
    const std::string beside = kOut + "/export_base_beside";
    r = Ssaviz({"export", "--model", pair + "/ft", "--compare", "base", "--text", text, "--out", beside, "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(ReadFile(beside + "/metrics.json"))["base"], pair + "/base");
    // info says what it found beside the fine-tune.
    Outcome info = Ssaviz({"info", "--model", pair + "/ft"});
    ASSERT_EQ(info.code, 0) << info.err;
    EXPECT_NE(info.out.find("base         " + pair + "/base (beside it: --compare base"), std::string::npos) << info.out;
    info = Ssaviz({"info", "--model", pair + "/ft", "--json"});
    ASSERT_EQ(info.code, 0) << info.err;
    EXPECT_EQ(json::parse(info.out)["base_beside"], pair + "/base");
    EXPECT_TRUE(json::parse(Ssaviz({"info", "--model", Small(), "--json"}).out)["base_beside"].is_null());
    // ... or a folder "base" inside the fine-tune's own.
    const std::string inside = kOut + "/finetune_inside";
    fs::remove_all(inside);
    fs::copy(Small(), inside, fs::copy_options::recursive);
    fs::copy(Twin(), inside + "/base", fs::copy_options::recursive);
    r = Ssaviz({"export", "--model", inside, "--compare", "base", "--text", text, "--out", beside + "_inside", "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(ReadFile(beside + "_inside/metrics.json"))["base"], inside + "/base");
    // A batch against the base: summary.csv gains the base's side of every batch column and the
    // decomposition's columns, each a mean over heads of the text's own metrics.json.
    const std::string texts = kOut + "/base_texts.txt", batch = kOut + "/export_base_batch";
    std::ofstream(texts) << text << "\n" << "A second text about a hat and a mat.\n";
    fs::remove_all(batch);
    r = Ssaviz({"export", "--model", Small(), "--base", Twin(), "--batch", "--text-file", texts, "--out", batch, "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.substr(0, r.out.find('\n')).find("H base  JS total"), std::string::npos) << r.out;  // the table on stdout
    const std::string csv = ReadFile(batch + "/summary.csv");
    EXPECT_NE(csv.substr(0, csv.find('\n')).find(",entropy,entropy_compare,entropy_base,normalized_entropy,"), std::string::npos) << csv;
    EXPECT_NE(csv.substr(0, csv.find('\n')).find(",sink_ratio,sink_ratio_compare,sink_ratio_base,"), std::string::npos) << csv;
    EXPECT_NE(csv.substr(0, csv.find('\n')).find(",loss,loss_compare,loss_base,js_total,js_temperature,js_drift"), std::string::npos) << csv;
    const json summary = json::parse(ReadFile(batch + "/summary.json"));
    ASSERT_EQ(summary["texts"].size(), 2u);
    for (const json& row : summary["texts"])
        for (const char* key : {"js_total", "js_temperature", "js_drift", "loss_base", "entropy_base", "sink_mass_base"})
            EXPECT_TRUE(row[key].is_number() && row[key].get<double>() > 0) << key << " " << row.dump();
    const std::string check_batch =
        "import json, numpy as np, os, sys\n"
        "d = sys.argv[1]\n"
        "texts = json.load(open(d + '/summary.json'))['texts']\n"
        "folders = sorted(f for f in os.listdir(d) if os.path.isdir(os.path.join(d, f)))\n"
        "assert len(folders) == len(texts) == 2, folders\n"
        "for row, folder in zip(texts, folders):\n"
        "    m = json.load(open(os.path.join(d, folder, 'metrics.json')))\n"
        "    for side, suffix in (('ssa', ''), ('comparison', '_compare'), ('base', '_base')):\n"
        "        for key in ('entropy', 'normalized_entropy', 'spikiness', 'sink_mass'):\n"
        "            want = np.mean([h[side][key] for h in m['heads']])\n"
        "            assert abs(row[key + suffix] - want) < 1e-6, (folder, key + suffix, row[key + suffix], want)\n"
        "        assert abs(row['sink_ratio' + suffix] - m['sink_ratio'][side]) < 1e-9, (folder, side)\n"
        "    assert abs(row['loss_base'] - m['loss']['base']) < 1e-6 and abs(row['loss'] - m['loss']['ssa']) < 1e-6\n"
        "    assert row['entropy_base'] != row['entropy'], 'the base is its own model'\n"
        "print('numpy ok')\n";
    ExpectPythonCheck("check_base_batch.py", check_batch, batch);

    // A base that does not open: one line saying it is the base's, not the model's.
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--base", kOut + "/no-such-base", "--text", text, "--out", kOut + "/export_bad_base"}),
                       3, "the base: model '" + kOut + "/no-such-base' does not exist");
    // None beside: one line naming what to do.
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--compare", "base", "--text", text, "--out", kOut + "/export_no_base"}), 2,
                       "name it with --base DIR");
    // A mistyped comparison is said to be one (it was "the twin: model 'locl' does not exist", exit 3).
    for (const char* typo : {"locl", "Vanilla", "tau=1"})
        ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--compare", typo, "--text", text, "--out", kOut + "/export_typo"}), 2,
                           std::string("the comparison '") + typo + "' is none of vanilla, local, unedited, base, tau1, and no twin's folder of that name exists");
    // The fine-tune's layers and heads but another width: not the model it started from (the
    // decomposition was computed against it).
    ASSERT_EQ(Ssaviz({"init-random", "--out", kOut + "/narrow_base", "--layers", "2", "--heads", "2", "--embd", "8", "--positions", "16", "--seed", "9"})
                  .code,
              0);
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--base", kOut + "/narrow_base", "--text", text, "--out", kOut + "/export_narrow_base"}),
                       3, "has width 8, heads of 4, 2 kv heads and an MLP of 32; the model 16, 8, 2 and 64");
    EXPECT_FALSE(fs::exists(kOut + "/export_narrow_base/metrics.json"));
}

// --truncate: tokens.json's text is what the tokens came from, not the rest of a longer text
// (it held the whole input: a 10 MB text in every export of its first tokens).
TEST_F(Cli, ATruncatedExportKeepsTheTextItAnalysed) {
    std::string text;
    for (int i = 0; i < 100; ++i) text += "word" + std::to_string(i % 10) + " ";
    const std::string out = kOut + "/export_truncated";
    fs::remove_all(out);
    Outcome r = Ssaviz({"export", "--model", Small(), "--text", text, "--truncate", "--out", out, "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json tokens = json::parse(ReadFile(out + "/tokens.json"));
    const size_t end = tokens["offsets"].back()[1].get<size_t>();
    ASSERT_LT(end, text.size());
    EXPECT_EQ(tokens["text"].get<std::string>(), text.substr(0, end));
    EXPECT_EQ(tokens["n_tokens"].get<size_t>(), 16u) << "the small model's context";
    // Not truncated: the text whole.
    r = Ssaviz({"export", "--model", Small(), "--text", "word1 word2 ", "--out", out, "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(ReadFile(out + "/tokens.json"))["text"], "word1 word2 ");
}

// Issue 17: per-token losses and what-ifs in an export. numpy reads the losses and agrees with
// metrics.json; the what-if against the unedited model is named in metrics.json.
TEST_F(Cli, ExportWritesLossesAndWhatIfs) {
    const std::string out = kOut + "/export_loss";
    fs::remove_all(out);
    Outcome r = Ssaviz({"export", "--model", Small(), "--text", "The cat sat on the mat. The cat", "--out", out, "--format", "json,npy,png",
                        "--ablate", "1:0,0:*=x0.5", "--compare", "unedited", "--highlight", "loss_delta", "--layers", "0", "--heads", "0"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(NpyShape(out + "/loss.npy"), (std::vector<int64_t>{8}));
    EXPECT_EQ(NpyShape(out + "/loss_compare.npy"), (std::vector<int64_t>{8}));
    EXPECT_TRUE(fs::exists(out + "/highlight.png"));
    json metrics = json::parse(ReadFile(out + "/metrics.json"));
    EXPECT_EQ(metrics["comparison_kind"], "unedited");
    EXPECT_EQ(metrics["interventions"], json({"1:0", "0:*=x0.5"}));
    EXPECT_EQ(metrics["sides"], json({{"ssa", "SSA with what-ifs"}, {"comparison", "unedited"}, {"notes", metrics["sides"]["notes"]}}))
        << "no base block without a base";
    const std::string check =
        "import json, numpy as np, sys\n"
        "d = sys.argv[1]\n"
        "l = np.load(d + '/loss.npy'); c = np.load(d + '/loss_compare.npy'); m = json.load(open(d + '/metrics.json'))\n"
        "assert l.dtype == np.float32 and (l > 0).all()\n"
        "assert abs(l.mean() - m['loss']['ssa']) < 1e-5 and abs(c.mean() - m['loss']['comparison']) < 1e-5\n"
        "assert abs(np.exp(l.mean()) - m['loss']['perplexity_ssa']) < 1e-2 * np.exp(l.mean())\n"
        "assert np.abs(l - c).max() > 1e-6, 'the what-if changes the losses'\n"
        "print('numpy ok')\n";
    ExpectPythonCheck("check_loss.py", check, out);

    // Without what-ifs the unedited comparison is the model itself: zero difference.
    r = Ssaviz({"export", "--model", Small(), "--text", "The cat sat", "--out", out + "_same", "--format", "npy", "--compare", "unedited"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(ReadFile(out + "_same/loss.npy"), ReadFile(out + "_same/loss_compare.npy"));
}

TEST_F(Cli, GenerateIsGreedyOrSeeded) {
    auto run = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = {"generate", "--model", Small(), "--text", "The cat sat", "--tokens", "5", "--json"};
        args.insert(args.end(), extra.begin(), extra.end());
        Outcome r = Ssaviz(args);
        EXPECT_EQ(r.code, 0) << r.err;
        return r.code == 0 ? json::parse(r.out) : json();
    };
    const json greedy = run({});
    ASSERT_EQ(greedy["ids"].size(), 5u);
    EXPECT_EQ(greedy["prompt_tokens"], 3);
    EXPECT_EQ(run({})["ids"], greedy["ids"]) << "greedy is deterministic";
    const json a = run({"--temperature", "1.5", "--seed", "3"}), b = run({"--temperature", "1.5", "--seed", "3"});
    EXPECT_EQ(a["ids"], b["ids"]) << "the same seed draws the same tokens";
    bool differs = false;
    for (const char* seed : {"4", "5", "6", "7"})  // until one differs (each run ~3 s under the sanitizers)
        if (!differs) differs = run({"--temperature", "1.5", "--seed", seed})["ids"] != a["ids"];
    EXPECT_TRUE(differs) << "other seeds draw other tokens";
    // A seed or top-k without a temperature draws nothing: said, and greedy's tokens.
    Outcome seeded = Ssaviz({"generate", "--model", Small(), "--text", "The cat sat", "--tokens", "5", "--json", "--seed", "3", "--top-k", "2"});
    ASSERT_EQ(seeded.code, 0) << seeded.err;
    EXPECT_EQ(json::parse(seeded.out)["ids"], greedy["ids"]);
    EXPECT_NE(seeded.err.find("--temperature 0 takes the most likely token: --top-k and --seed draw nothing"), std::string::npos) << seeded.err;
    EXPECT_EQ(Ssaviz({"generate", "--model", Small(), "--text", "The cat sat", "--tokens", "5"}).err.find("draw nothing"), std::string::npos);
    // The context (16) stops it: 3 prompt tokens + 13.
    Outcome r = Ssaviz({"generate", "--model", Small(), "--text", "The cat sat", "--tokens", "40", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["ids"].size(), 13u);
    EXPECT_NE(r.err.find("context of 16 is full"), std::string::npos) << r.err;
}

TEST_F(Cli, BadWhatIfsAndCountsExitTwo) {
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "a b", "--out", kOut + "/x", "--ablate", "2:0"}), 2,
                       "names no layer of the model (the model has 2 layers x 2 heads)");
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "a b", "--out", kOut + "/x", "--ablate", "0:5"}), 2, "names no head");
    for (const char* scale : {"0:1=xinf", "0:1=x0x1p-3", "0:1=x 2"})  // decimal numbers only, as every real-valued flag
        ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "a b", "--out", kOut + "/x", "--ablate", scale}), 2,
                           "not a finite decimal number");
    // Finite but past the bound: said so (it read "not a finite decimal number").
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "a b", "--out", kOut + "/x", "--ablate", "0:1=x100000000"}), 2,
                       "--ablate item '0:1=x100000000': the scale is at most 1e6 in size");
    ExpectOneLineError(Ssaviz({"generate", "--model", Small(), "--text", "a b", "--tokens", "-3"}), 2, "--tokens '-3'");
    ExpectOneLineError(Ssaviz({"generate", "--model", Small(), "--text", "a b", "--tokens", "2.5"}), 2, "not a whole number");
    ExpectOneLineError(Ssaviz({"generate", "--model", Small(), "--text", "a b", "--tokens", "3", "--temperature", "nan"}), 2,
                       "--temperature 'nan'");
}

// The tokenize table shows a token that is part of a character as its bytes (\xE4) and names the
// character and the part ("你 1/2"), as the window's labels do, never as U+FFFD.
TEST_F(Cli, TokenizeShowsASplitCharactersBytesAndTheCharacter) {
    Outcome r = Ssaviz({"tokenize", "--model", Small(), "--text", "\xE4\xBD\xA0 a"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out.find("\xEF\xBF\xBD"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\"\\xE4"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("(\xE4\xBD\xA0 1/"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\" a\""), std::string::npos) << r.out;
}

// The table on a terminal runs no control character a text holds: DEL, the C1 controls (CSI) and
// the bidirectional overrides are escaped, whole or split into byte pieces (the licenses model's
// SentencePiece vocabulary has <0x7F> and byte fallback).
TEST_F(Cli, TokenizeTableEscapesEveryControlCharacter) {
    const Outcome r = Ssaviz({"tokenize", "--example", "licenses", "--text", "a\x7f" "b\xc2\x9b" "31m\xe2\x80\xae" "x"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto at = [&](size_t i) { return static_cast<unsigned char>(i < r.out.size() ? r.out[i] : 0); };
    for (size_t i = 0; i < r.out.size(); ++i)
        EXPECT_FALSE(at(i) == 0x7F || (at(i) == 0xC2 && at(i + 1) >= 0x80 && at(i + 1) <= 0x9F) ||
                     (at(i) == 0xE2 && at(i + 1) == 0x80 && at(i + 2) >= 0xAA && at(i + 2) <= 0xAE))
            << "byte " << i << ": " << r.out;
    for (const char* shown : {"\"\\u007f\"", "(\\u009B 1/2)", "(\\u202E 1/3)"}) EXPECT_NE(r.out.find(shown), std::string::npos) << shown << "\n" << r.out;
}

TEST_F(Cli, TextLongerThanTheContextIsRefusedUnlessTruncated) {
    std::string text;
    for (int i = 0; i < 40; ++i) text += "word ";
    Outcome r = Ssaviz({"tokenize", "--model", Small(), "--text", text});
    ExpectOneLineError(r, 3, "longer than the model's context of 16");
    EXPECT_NE(r.err.find("--truncate"), std::string::npos);
    r = Ssaviz({"export", "--model", Small(), "--text", text, "--truncate", "--out", kOut + "/truncated", "--format", "npy"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(NpyShape(kOut + "/truncated/attention.npy"), (std::vector<int64_t>{2, 2, 16, 16}));
}

TEST_F(Cli, BadTextIsACleanError) {
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "", "--out", kOut + "/x"}), 3, "text is empty");
    std::ofstream(Scratch("latin1.txt"), std::ios::binary) << "caf\xe9 au lait";
    ExpectOneLineError(Ssaviz({"tokenize", "--model", Small(), "--text-file", Scratch("latin1.txt")}), 3,
                       "--text-file '" + Scratch("latin1.txt") + "': not valid UTF-8 at byte 3");
    // Every tokenizer says it alike (SentencePiece said "(byte 3)").
    ExpectOneLineError(Ssaviz({"tokenize", "--example", "licenses", "--text", "caf\xe9 au lait"}), 3, "text is not valid UTF-8 at byte 3");
    ExpectOneLineError(Ssaviz({"tokenize", "--model", Small(), "--text-file", kOut + "/no-such.txt"}), 3, "no-such.txt");
}

TEST_F(Cli, BadModelsAreCleanErrors) {
    ExpectOneLineError(Ssaviz({"info", "--model", kOut + "/no-such-model"}), 3, "does not exist");
    const std::string broken = kOut + "/broken";
    fs::remove_all(broken);
    fs::copy(Small(), broken);
    fs::resize_file(broken + "/model.safetensors", fs::file_size(broken + "/model.safetensors") / 2);
    ExpectOneLineError(Ssaviz({"info", "--model", broken}), 3, "model.safetensors");
}

// A researcher's checkpoint: the small model re-saved by python3-torch as a nanoGPT-style
// {"model": state dict} with no config.json and no tokenizer (tests/app/cli/make_checkpoint.py).
TEST_F(Cli, CheckpointWithoutConfigOpensWithFlagsAndMatchesTheFolder) {
    const std::string ckpt = kOut + "/checkpoint/ckpt.pt";
    ExpectOneLineError(Ssaviz({"info", "--model", ckpt}), 3, "--query-form");
    ExpectOneLineError(Ssaviz({"info", "--model", ckpt, "--query-form", "sigmoid,shared,maybe"}), 2, "--query-form");

    Outcome from_ckpt = Ssaviz({"info", "--model", ckpt, "--query-form", "sigmoid,shared,sum", "--json"});
    Outcome from_dir = Ssaviz({"info", "--model", Small(), "--json"});
    ASSERT_EQ(from_ckpt.code, 0) << from_ckpt.err;
    ASSERT_EQ(from_dir.code, 0) << from_dir.err;
    nlohmann::json a = nlohmann::json::parse(from_ckpt.out), b = nlohmann::json::parse(from_dir.out);
    EXPECT_EQ(a["weights"]["format"], "torch.save");
    EXPECT_EQ(b["weights"]["format"], "safetensors");
    EXPECT_NE(a["notes"].dump().find("GPT-2's"), std::string::npos) << a["notes"].dump();  // the bundled tokenizer
    for (const char* key : {"n_layer", "n_head", "n_embd", "n_positions", "vocab_size", "query_temperature", "value_temperature",
                            "activation_function", "parameters"})
        EXPECT_EQ(a[key], b[key]) << key;
    // The same tokenizer, from the folder's own files or, for the lone checkpoint, GPT-2's, and each says which.
    for (const char* key : {"kind", "vocab"}) EXPECT_EQ(a["tokenizer"][key], b["tokenizer"][key]) << key;
    EXPECT_EQ(a["tokenizer"]["source"], "GPT-2's, bundled: the folder has no tokenizer files");
    EXPECT_EQ(b["tokenizer"]["source"], "vocab.json + merges.txt");

    // The same maps, byte for byte, from either file.
    for (const auto& [model, out] : {std::pair<std::string, std::string>{ckpt, kOut + "/ckpt_export"}, {Small(), kOut + "/dir_export"}}) {
        fs::remove_all(out);
        std::vector<std::string> args = {"export", "--model", model, "--text", "The cat sat on the mat", "--out", out, "--format", "npy",
                                         "--query-form", "sigmoid,shared,sum"};
        Outcome r = Ssaviz(args);
        ASSERT_EQ(r.code, 0) << r.err;
    }
    for (const char* file : {"attention.npy", "attention_compare.npy", "tau_q.npy", "tau_v.npy"})
        EXPECT_EQ(ReadFile(kOut + "/ckpt_export/" + file), ReadFile(kOut + "/dir_export/" + file)) << file;
}

TEST_F(Cli, UsageErrorsExitTwo) {
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "hi"}), 2, "--out");
    ExpectOneLineError(Ssaviz({"info", "--model", Small(), "--bogus"}), 2, "--bogus");
    ExpectOneLineError(Ssaviz({"frobnicate"}), 2, "frobnicate");
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "hi", "--out", kOut + "/x", "--layers", "5"}), 2, "layer 5");
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "hi", "--out", kOut + "/x", "--heads", "a"}), 2, "'a'");
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "hi", "--out", kOut + "/x", "--format", "gif"}), 2, "gif");
    ExpectOneLineError(Ssaviz({"info", "--model", Small(), "--device", "tpu"}), 2, "tpu");
    ExpectOneLineError(Ssaviz({"tokenize", "--model", Small()}), 2, "--text");
}

TEST_F(Cli, CudaWithoutAGpuIsAUsageError) {
    Outcome r = Ssaviz({"info", "--model", Small(), "--device", "cuda", "--json"});
    if (r.code == 0) {  // a CUDA machine: then it must really run there
        EXPECT_EQ(json::parse(r.out)["device"].get<std::string>().rfind("cuda", 0), 0u) << r.out;
        return;
    }
    ExpectOneLineError(r, 2, "no CUDA device");
}

}  // namespace

namespace {
using namespace cli_test;

const std::string kBundled = std::string(SSAVIZ_SOURCE_DIR) + "/assets/models";

// The binary started on its own (not through the fork server), to be signalled: stdin and stdout
// on /dev/null, stderr into `err_file`. Returns its pid.
pid_t StartSsaviz(const std::vector<std::string>& args, const std::string& err_file) {
    const pid_t pid = fork();
    if (pid != 0) return pid;
    const int err = open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(err, 2);
    std::vector<char*> argv = {const_cast<char*>(SSAVIZ_BINARY)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(SSAVIZ_BINARY, argv.data());
    _exit(127);
}

// A StartSsaviz process waited for: its exit code (-1: a signal ended it) and what it wrote to `err_file`.
Outcome Finished(pid_t pid, const std::string& err_file) {
    int status = 0;
    waitpid(pid, &status, 0);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, "", ReadFile(err_file)};
}

std::string Fixed(const char* format, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, v);
    return buf;
}

// `ssaviz train` and `ssaviz eval` refuse bad input with one line.
TEST(CliTrain, BadFlagsAreOneLineErrors) {
    ExpectOneLineError(Ssaviz({"train", "--task", "graph"}), 2, "train needs --out DIR");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "poetry"}), 2, "'poetry' is not one of text, graph, passkey");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t")}), 2, "--task text needs --data");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "graph", "--lr", "fast"}), 2, "--lr must be a number");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "graph", "--query-form", "sigmoid"}), 2,
                       "--query-form 'sigmoid' is not POSITION,TOKEN[,COMBINE]");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "graph", "--query-form", "cosine,shared"}), 2, "cosine");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--data", Scratch("nothing-here")}), 3, "no such file or folder");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "graph", "--resume"}), 3, "nothing to resume");
    // Flags that would be ignored or contradict, and counts too small, named as given (round
    // twenty-eight: taken silently, SentencePiece's assertion, exit 3 naming seq_len for --context).
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "graph", "--vocab", "50"}), 2,
                       "--vocab is for --task text: the graph task has its own tokenizer");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "passkey", "--data", kBundled + "/README.md"}), 2,
                       "--data is for --task text: the passkey task makes its own sequences");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--data", kBundled + "/README.md", "--vocab", "2"}), 2,
                       "--vocab '2' is not a whole number from 4 to");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "graph", "--freeze-positions", "--learn-positions"}), 2,
                       "--freeze-positions and --learn-positions exclude each other");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "passkey", "--context", "20"}), 2,
                       "--context 20 is too short for the passkey task: its sequences hold at least");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "passkey", "--seq-len", "23"}), 2,
                       "--seq-len 23 is too short for the passkey task");
    fs::create_directories(Scratch("blank"));
    std::ofstream(Scratch("blank") + "/blank.txt") << "\n \n\t\r\n\n";  // it was said to have lines too long
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--data", Scratch("blank") + "/blank.txt"}), 3,
                       "the corpus holds no text to learn a tokenizer from (only blank lines)");
    fs::remove_all(Scratch("blank"));
    // A checkpoint whose state.json is broken has nothing to resume, and the line says what it is
    // instead; it was called a folder train did not write.
    fs::create_directories(Scratch("t") + "/checkpoint");
    std::ofstream(Scratch("t") + "/checkpoint/state.json") << "{";
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "graph", "--resume"}), 3,
                       "--resume: nothing to resume (" + Scratch("t") + "/checkpoint/state.json: invalid JSON (");
    fs::remove(Scratch("t") + "/checkpoint/state.json");
    ASSERT_EQ(::mkfifo((Scratch("t") + "/checkpoint/state.json").c_str(), 0600), 0);
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "graph", "--resume"}), 3,
                       "--resume: nothing to resume ('" + Scratch("t") + "/checkpoint/state.json' is a FIFO");
    fs::remove_all(Scratch("t"));
    // A fine-tune takes its base's shape and tokenizer, and starts from a vanilla model.
    const std::string graph = kBundled + "/graph/";
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "graph", "--from", graph + "vanilla", "--width", "16"}), 2,
                       "--from takes the base's shape and tokenizer: not with --width");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "graph", "--from", graph + "vanilla", "--vocab", "300"}), 2,
                       "not with --vocab");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "graph", "--from", graph + "ssa"}), 3,
                       "--from: '" + graph + "ssa' has temperatures already; a fine-tune starts from a vanilla model (its base)");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "graph", "--from", ""}), 2, "--from needs a model folder");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--data", kBundled + "/README.md", "--from", graph + "vanilla", "--tokenizer",
                               std::string(SSAVIZ_SOURCE_DIR) + "/assets/tokenizers/gpt2"}),
                       3, "--from: the tokenizer has 50257 tokens, more than the base's");
    // A base without its tokenizer is said as --from's (it read as any model folder's).
    const std::string bare = Scratch("graph_no_tokenizer");
    fs::remove_all(bare);
    fs::create_directories(bare);
    for (const char* f : {"config.json", "model.safetensors"}) fs::copy(graph + "vanilla/" + f, bare + "/" + f);
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--task", "graph", "--from", bare}), 3,
                       "--from: model folder '" + bare + "' has no tokenizer");
    // A base whose weights overflow: its loss is NaN before any update, said so (it blamed --lr).
    const std::string huge = Scratch("graph_overflows");
    fs::remove_all(huge);
    fs::copy(graph + "vanilla", huge, fs::copy_options::recursive);
    std::string bytes = ReadFile(huge + "/model.safetensors");
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    const json header = json::parse(bytes.substr(8, n));
    const auto [begin, end] = std::pair{header["wte.weight"]["data_offsets"][0].get<size_t>(), header["wte.weight"]["data_offsets"][1].get<size_t>()};
    for (size_t at = 8 + n + begin; at < 8 + n + end; at += 4) {
        const float value = 3e38f;
        std::memcpy(&bytes[at], &value, 4);
    }
    std::ofstream(huge + "/model.safetensors", std::ios::binary | std::ios::trunc) << bytes;
    const Outcome overflow = Ssaviz({"train", "--out", Scratch("t_overflow"), "--task", "graph", "--from", huge, "--steps", "2"});
    EXPECT_NE(overflow.code, 0) << overflow.err;
    EXPECT_NE(overflow.err.find("loss is NaN at step 1, before any update: the weights it starts from overflow float range (--from '" + huge + "')"),
              std::string::npos)
        << overflow.err;
    // The base is never one of the folders train replaces: a fine-tune of the graph twin into
    // graph/ would have put the fine-tune in the twin's place.
    const std::string copy = Scratch("graph_copy");
    fs::remove_all(copy);
    fs::create_directories(copy);
    fs::copy(graph + "vanilla", copy + "/vanilla");
    const std::string before = ReadFile(copy + "/vanilla/model.safetensors");
    ExpectOneLineError(Ssaviz({"train", "--out", copy + "/vanilla/..", "--task", "graph", "--from", copy + "/vanilla", "--steps", "2"}), 2,
                       "--out: '" + copy + "/vanilla/../vanilla' would replace --from '" + copy + "/vanilla', the model it starts from: choose another --out");
    EXPECT_EQ(ReadFile(copy + "/vanilla/model.safetensors"), before);
    fs::remove_all(copy);
    EXPECT_FALSE(fs::exists(Scratch("t")));
    ExpectOneLineError(Ssaviz({"eval", "--model", kOut + "/small"}), 3, "train.json: missing");
    ExpectOneLineError(Ssaviz({"eval"}), 2, "eval needs --model DIR");
}

// A train.json whose task eval cannot run is one line naming the field, exit 3: 10^15 passkey
// samples ran for ever, a val_fraction of 2 or a seq_len past the context was an internal error.
TEST(CliTrain, EvalNamesAHostileTaskField) {
    const std::string dir = Scratch("eval_hostile");
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy(kBundled + "/passkey/ssa", dir + "/passkey");
    fs::copy(kBundled + "/english/ssa", dir + "/english");
    auto with = [&](const std::string& model, const char* field, json value) {  // the bundled train.json with one field changed
        json j = json::parse(ReadFile(kBundled + "/" + model + "/ssa/train.json"));
        j["task"][field] = value;
        std::ofstream(dir + "/" + model + "/train.json") << j.dump();
        return Ssaviz({"eval", "--model", dir + "/" + model});
    };
    ExpectOneLineError(with("passkey", "eval_samples", 1000000000000000LL), 3, "task.eval_samples 1e+15 must be from 1 to 100000");
    ExpectOneLineError(with("passkey", "eval_samples", 0), 3, "task.eval_samples 0 must be from 1");
    ExpectOneLineError(with("passkey", "seq_len", 3), 3, "seq_len 3 is too short for the passkey task");
    ExpectOneLineError(with("english", "val_fraction", 2.0), 3, "task.val_fraction 2 must be above 0 and below 1");
    ExpectOneLineError(with("english", "seq_len", 100000), 3, "task.seq_len 100000 is more than the model's context of");
    // A field of the wrong type is named ("task spec: type must be array" named none); the text
    // task's empty file list is said as train.json's, not as a --data that was not given.
    ExpectOneLineError(with("english", "data", "/dev/zero"), 3, "train.json: task.data: ");
    ExpectOneLineError(with("english", "data", json::array()), 3, "train.json: task.data is empty: name the text to score with --data");
}

// Ctrl+C during training: the run stops at its next step, removes its temporary folders (they
// piled up in --out, one a Ctrl+C) and exits 130 with one line; the checkpoint it wrote stays whole.
// The signal is sent once a checkpoint exists (not after a fixed time: a slow start under the
// sanitizers would take it before the handler is installed), to the process and then to it again
// at once, as `timeout` signals a process and then its group: one interrupt, not two. With
// --keep-checkpoints the steps kept so far wait in run.new/, and the message says so.
TEST(CliTrain, AnInterruptedTrainingCleansUpAfterItself) {
    for (const bool keep : {false, true}) {
        SCOPED_TRACE(keep ? "--keep-checkpoints" : "plain");
        const std::string out = Scratch(keep ? "train_interrupted_kept" : "train_interrupted");
        fs::remove_all(out);
        const std::string err_file = Scratch("interrupted.err");
        const pid_t pid = StartSsaviz({"train", "--task", "graph", "--out", out, "--steps", "1000000", "--checkpoint-every", "20",
                                       keep ? "--keep-checkpoints" : "--no-twin"},
                                      err_file);
        ASSERT_GE(pid, 0);
        for (int waited = 0; waited < 1200 && !fs::exists(out + "/checkpoint/state.json"); ++waited) usleep(100000);
        ASSERT_TRUE(fs::exists(out + "/checkpoint/state.json")) << ReadFile(err_file);
        // A second train into the folder while this one runs is refused (two mixed their steps).
        Outcome second = Ssaviz({"train", "--task", "graph", "--out", out, "--steps", "5", "--no-twin"});
        EXPECT_EQ(second.code, 3) << second.err;
        EXPECT_NE(second.err.find("is in use by another ssaviz train"), std::string::npos) << second.err;
        kill(pid, SIGINT);
        kill(pid, SIGINT);
        const auto [code, _, err] = Finished(pid, err_file);
        EXPECT_EQ(code, 130) << err;
        EXPECT_NE(err.find("ssaviz: train interrupted (cancelled at step "), std::string::npos) << err;
        EXPECT_NE(err.find("--resume continues from the last checkpoint"), std::string::npos) << err;
        EXPECT_EQ(err.find("the steps kept so far are in " + out + "/run.new") != std::string::npos, keep) << err;
        EXPECT_EQ(fs::exists(out + "/run.new/ssa/checkpoint-20/model.safetensors"), keep);
        for (const auto& entry : fs::directory_iterator(out))
            EXPECT_NE(entry.path().filename().string()[0], '.') << "left behind: " << entry.path();
        EXPECT_NO_THROW(json::parse(ReadFile(out + "/checkpoint/state.json")));
    }
}

// Ctrl+C during an export: the files it was writing (in a folder of its own inside --out,
// ".export.ssaviz-*") and the folders it made are removed, what --out held stays as it was, and it
// exits 130 with one line. They had stayed in --out, a hidden folder or file per interrupt. The
// signal is sent once that folder exists, while the files are being written (seconds, for 1024
// tokens in every format).
TEST(CliExport, AnInterruptedExportLeavesTheFolderAsItWas) {
    std::string text;
    while (text.size() < 9000) text += "The keeper of the lighthouse wrote that the sea was calm and that 17 ships passed. ";
    std::ofstream(Scratch("interrupted.txt")) << text;
    const std::string random_model = (fs::path(SSAVIZ_BINARY).parent_path() / "models" / "default").string();
    for (const bool existed : {true, false}) {
        SCOPED_TRACE(existed ? "into a folder with files" : "into a new folder");
        const std::string out = Scratch(existed ? "export_interrupted" : "export_interrupted_new");
        fs::remove_all(out);
        if (existed) {
            fs::create_directories(out);
            std::ofstream(out + "/tokens.json") << "an earlier export's\n";
            std::ofstream(out + "/notes.txt") << "the user's\n";
        }
        const std::string err_file = Scratch("interrupted_export.err");
        const pid_t pid = StartSsaviz({"export", "--model", random_model, "--text-file", Scratch("interrupted.txt"), "--truncate", "--out", out,
                                       "--format", "json,npy,csv,png,svg,html"},
                                      err_file);
        ASSERT_GE(pid, 0);
        auto writing = [&] {
            std::error_code ec;
            for (fs::directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec))
                if (it->path().filename().string().rfind(".export.ssaviz-", 0) == 0) return true;
            return false;
        };
        for (int waited = 0; waited < 24000 && !writing(); ++waited) usleep(5000);
        ASSERT_TRUE(writing()) << ReadFile(err_file);
        kill(pid, SIGINT);
        const auto [code, _, err] = Finished(pid, err_file);
        EXPECT_EQ(code, 130) << err;
        EXPECT_NE(err.find("ssaviz: interrupted; removed the "), std::string::npos) << err;
        if (!existed) {
            EXPECT_FALSE(fs::exists(fs::symlink_status(out))) << "the folder it made is left";
            continue;
        }
        std::vector<std::string> left;
        for (const auto& e : fs::recursive_directory_iterator(out)) left.push_back(fs::relative(e.path(), out).string());
        std::sort(left.begin(), left.end());
        EXPECT_EQ(left, (std::vector<std::string>{"notes.txt", "tokens.json"}));
        EXPECT_EQ(ReadFile(out + "/tokens.json"), "an earlier export's\n");
    }
}

// A batch is text by text: interrupted into a folder where an earlier batch left its summary, the
// line says how many texts are in place and that the summary there is not this batch's (it read
// as if --out were as it was).
TEST(CliExport, AnInterruptedBatchSaysWhatItLeft) {
    std::string text;
    while (text.size() < 9000) text += "The keeper of the lighthouse wrote that the sea was calm and that 17 ships passed. ";
    std::ofstream(Scratch("interrupted_batch.txt")) << text << "\n" << text << "\n" << text << "\n";
    const std::string random_model = (fs::path(SSAVIZ_BINARY).parent_path() / "models" / "default").string();
    const std::string out = Scratch("batch_interrupted");
    fs::remove_all(out);
    fs::create_directories(out);
    std::ofstream(out + "/summary.json") << "{\"an earlier batch's\": true}\n";
    const std::string err_file = Scratch("interrupted_batch.err");
    const pid_t pid = StartSsaviz({"export", "--model", random_model, "--text-file", Scratch("interrupted_batch.txt"), "--batch", "--truncate",
                                   "--out", out, "--format", "json,npy,csv,png,svg,html"},
                                  err_file);
    ASSERT_GE(pid, 0);
    for (int waited = 0; waited < 24000 && !fs::exists(out + "/text_0001/metrics.json"); ++waited) usleep(5000);
    ASSERT_TRUE(fs::exists(out + "/text_0001/metrics.json")) << ReadFile(err_file);
    kill(pid, SIGINT);
    const auto [code, _, err] = Finished(pid, err_file);
    EXPECT_EQ(code, 130) << err;
    EXPECT_NE(err.find(" of 3 texts were written in '" + out + "' beside an earlier batch's summary.json and summary.csv, which are not this one's"),
              std::string::npos)
        << err;
    EXPECT_EQ(ReadFile(out + "/summary.json"), "{\"an earlier batch's\": true}\n");
}

// The graph experiment end to end through the binary: train, then eval re-scores what was saved.
// A --data folder's files the trainer cannot use (not UTF-8, empty, a link, a FIFO) are said and
// recorded in train.json; it trained on the rest in silence, exit 0.
TEST(CliTrain, SkippedDataFilesAreSaid) {
    const std::string out = Scratch("train_skipped"), data = Scratch("train_skipped_data");
    fs::remove_all(out);
    fs::remove_all(data);
    fs::create_directories(data);
    {
        std::ofstream good(data + "/good.txt");
        for (int i = 0; i < 300; ++i) good << "the quick brown fox jumps over the lazy dog, and the dog sleeps.\n";
    }
    std::ofstream(data + "/bad.txt", std::ios::binary) << "bad \xff text";
    std::ofstream(data + "/empty.txt");
    std::ofstream(data + "/nul.txt", std::ios::binary) << std::string("a\0b\n", 4);  // UTF-8, yet binary: it was called "not UTF-8"
    ASSERT_EQ(::mkfifo((data + "/fifo.txt").c_str(), 0600), 0);
    fs::create_hard_link(data + "/good.txt", data + "/hard.txt");  // the same file again: read once (by its inode, not its name)
    fs::create_directories(data + "/books");  // not read: --data reads a folder's files, which it says
    std::ofstream(data + "/books/more.txt") << "more text\n";
    // good.txt named twice (its folder and itself) was learned from twice without a word.
    Outcome r = Ssaviz({"train", "--out", out, "--task", "text", "--data", data + "," + data + "/good.txt", "--vocab", "320", "--steps", "1",
                        "--layers", "1", "--heads", "1", "--width", "16", "--context", "16", "--no-twin"});
    ASSERT_EQ(r.code, 0) << r.err;
    // The first three said (what is not a file first, by name), the rest counted; train.json lists them all.
    EXPECT_NE(r.err.find("ssaviz: --data: skipped "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("books (a folder: --data reads a folder's files, not its sub-folders)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("fifo.txt (not a regular file)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("bad.txt (not UTF-8 text: byte 4)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("and 4 more (train.json's task.skipped)"), std::string::npos) << r.err;
    const json record = json::parse(ReadFile(out + "/ssa/train.json"));
    EXPECT_EQ(record["task"]["skipped_files"], 7) << record["task"];
    ASSERT_EQ(record["task"]["skipped"].size(), 7u);
    const std::string skipped = record["task"]["skipped"].dump();
    for (const std::string& why : {std::string("empty.txt (empty)"), std::string("fifo.txt (not a regular file)"),
                                   std::string("nul.txt (a NUL byte at byte 1: binary, not text)"), data + "/good.txt (named twice: read once)",
                                   data + "/hard.txt (named twice: read once)"})
        EXPECT_NE(skipped.find(why), std::string::npos) << why << "\n" << record["task"];
    // An empty entry in --data is said, as an empty one elsewhere; so is a --vocab the corpus cannot fill.
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--data", data + "/good.txt,"}), 2, "has an empty entry (a comma too many?)");
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--data", " ," + data + "/good.txt"}), 2, "has an empty entry (a comma too many?)");
    // eval reads --data as train does (it took "a,b" for one path): the same file twice is one.
    const Outcome once = Ssaviz({"eval", "--model", out + "/ssa", "--data", data + "/good.txt", "--json"});
    const Outcome twice = Ssaviz({"eval", "--model", out + "/ssa", "--data", data + "/good.txt," + data + "/good.txt", "--json"});
    ASSERT_EQ(once.code, 0) << once.err;
    ASSERT_EQ(twice.code, 0) << twice.err;
    EXPECT_EQ(json::parse(once.out)["loss"], json::parse(twice.out)["loss"]);
    ExpectOneLineError(Ssaviz({"eval", "--model", out + "/ssa", "--data", data + "/good.txt,,x"}), 2, "has an empty entry");
    std::ofstream(Scratch("tiny.txt")) << "ab ab ab\n";
    ExpectOneLineError(Ssaviz({"train", "--out", Scratch("t"), "--data", Scratch("tiny.txt"), "--vocab", "320"}), 3,
                       "--vocab 320 is more pieces than this corpus gives the tokenizer (at most ");
    EXPECT_FALSE(fs::exists(Scratch("t")));
}

TEST(CliTrain, TrainThenEvalAgree) {
    const std::string out = Scratch("train_graph");
    fs::remove_all(out);
    Outcome r = Ssaviz({"train", "--task", "graph", "--out", out, "--steps", "200", "--eval-every", "100"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("step 200: ssa CE"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find(out + "/vanilla: CE"), std::string::npos) << r.out;
    for (const char* role : {"ssa", "vanilla"}) {
        Outcome e = Ssaviz({"eval", "--model", out + "/" + role, "--json"});
        ASSERT_EQ(e.code, 0) << e.err;
        const json want = json::parse(ReadFile(out + "/" + role + "/train.json"))["final"];
        const json got = json::parse(e.out);
        EXPECT_NEAR(got["loss"].get<double>(), want["loss"].get<double>(), 1e-5);
        EXPECT_NEAR(got["l1"].get<double>(), want["l1"].get<double>(), 1e-5);
    }
}

// Every bundled model loads, fits the size budget, and `ssaviz eval` reproduces the numbers its
// train.json recorded and assets/models/README.md (the model card) quotes. Tolerances: losses 1e-4
// (evaluation may run with another thread count than training did, so sums are ordered differently),
// passkey accuracies 0.011 (one sequence of the 100 per length), its attention on the key 1e-5.
TEST(BundledModels, EvalReproducesTheModelCard) {
    const std::string card = ReadFile(kBundled + "/README.md");
    ASSERT_FALSE(card.empty()) << "no model card at " << kBundled << "/README.md";
    for (const std::string name : {"english/ssa", "english/vanilla", "licenses/ssa", "licenses/vanilla", "graph/ssa", "graph/vanilla", "passkey/ssa",
                                   "passkey/vanilla"}) {
        SCOPED_TRACE(name);
        const std::string dir = kBundled + "/" + name;
        uintmax_t bytes = 0;
        for (const auto& f : fs::directory_iterator(dir)) bytes += fs::file_size(f.path());
        EXPECT_LE(bytes, 8u << 20) << "model folder over 8 MB";
        Outcome info = Ssaviz({"info", "--model", dir});
        ASSERT_EQ(info.code, 0) << info.err;

        Outcome e = Ssaviz({"eval", "--model", dir, "--json"});
        ASSERT_EQ(e.code, 0) << e.err;
        const json want = json::parse(ReadFile(dir + "/train.json"))["final"];
        const json got = json::parse(e.out);
        EXPECT_NEAR(got["loss"].get<double>(), want["loss"].get<double>(), 1e-4);
        if (name.rfind("english", 0) == 0 || name.rfind("licenses", 0) == 0) {
            EXPECT_NE(card.find(Fixed("%.3f", want["loss"].get<double>())), std::string::npos) << "card lacks the val loss";
        } else if (name.rfind("graph", 0) == 0) {
            EXPECT_NEAR(got["l1"].get<double>(), want["l1"].get<double>(), 1e-4);
            EXPECT_NE(card.find(Fixed("%.4f", want["l1"].get<double>())), std::string::npos) << "card lacks the L1 error";
        } else {
            ASSERT_EQ(got["lengths"].size(), want["lengths"].size());
            for (size_t i = 0; i < got["lengths"].size(); ++i) {
                const double a = want["lengths"][i]["accuracy"];
                EXPECT_NEAR(got["lengths"][i]["accuracy"].get<double>(), a, 0.011);
                // The question's attention on the key, read from the last layer's own rows too.
                EXPECT_NEAR(got["lengths"][i]["key_attention"].get<double>(), want["lengths"][i]["key_attention"].get<double>(), 1e-5);
                EXPECT_NE(card.find(Fixed("%.0f%%", 100 * a)), std::string::npos) << "card lacks accuracy " << a;
            }
        }
    }
}

// The shipped fine-tune (assets/models/licenses): it started from english/vanilla (the base beside
// it, a link), and on the example's text its change splits into the temperatures' part and the
// drift as the model card says; the example opens it against that base.
TEST(BundledModels, TheFineTuneSplitsItsChangeAsTheCardSays) {
    const std::string card = ReadFile(kBundled + "/README.md"), out = Scratch("licenses");
    const json examples = json::parse(ReadFile(kBundled + "/examples.json"));
    const auto example = std::find_if(examples.begin(), examples.end(), [](const json& e) { return e["id"] == "licenses"; });
    ASSERT_NE(example, examples.end());
    EXPECT_EQ((*example)["base"], "english/vanilla");
    EXPECT_TRUE(fs::equivalent(kBundled + "/licenses/base", kBundled + "/english/vanilla"));
    const json record = json::parse(ReadFile(kBundled + "/licenses/ssa/train.json"));
    EXPECT_EQ(record["from"], "assets/models/english/vanilla");
    fs::remove_all(out);
    Outcome r = Ssaviz({"export", "--model", kBundled + "/licenses/ssa", "--compare", "base", "--text", (*example)["text"], "--format", "json",
                        "--out", out});
    ASSERT_EQ(r.code, 0) << r.err;
    const json loss = json::parse(ReadFile(out + "/metrics.json"))["decomposition"]["loss_mean"];
    const double ssa = loss["ssa"], tau1 = loss["tau1"], base = loss["base"];
    std::string flat = card;  // its lines joined, as wrapped
    std::replace(flat.begin(), flat.end(), '\n', ' ');
    const std::string said = "mean loss " + Fixed("%.3f", base) + " (base) to " + Fixed("%.3f", ssa) + " (SSA), " + Fixed("%.3f", ssa - base) +
                             " nats = temperatures " + Fixed("%.3f", ssa - tau1) + " + drift " + Fixed("%.3f", tau1 - base);
    EXPECT_NE(flat.find(said), std::string::npos) << "the card's split: " << said;

    // `export --example licenses` is that export: the model against the base the example names, on its text.
    const std::string by_example = Scratch("licenses_example");
    fs::remove_all(by_example);
    r = Ssaviz({"export", "--example", "licenses", "--format", "json", "--out", by_example});
    ASSERT_EQ(r.code, 0) << r.err;
    const json got = json::parse(ReadFile(by_example + "/metrics.json")), want = json::parse(ReadFile(out + "/metrics.json"));
    EXPECT_EQ(got["decomposition"], want["decomposition"]);
    EXPECT_EQ(got["heads"], want["heads"]);
    EXPECT_TRUE(fs::equivalent(got["base"].get<std::string>(), kBundled + "/english/vanilla")) << got["base"];
    EXPECT_NE(r.err.find("fine-tuning: mean loss"), std::string::npos) << r.err;
    {  // finetune_loss's every bar's token labelled (turned: each and the y axis's caption); it labelled every other.
        r = Ssaviz({"export", "--example", "licenses", "--format", "json,svg", "--layers", "0", "--heads", "0", "--maps", "ssa", "--out",
                    by_example + "/figures"});
        ASSERT_EQ(r.code, 0) << r.err;
        const int tokens = json::parse(ReadFile(by_example + "/figures/metrics.json"))["n_tokens"];
        ASSERT_GT(tokens, 60) << "a text long enough for the labels to crowd";
        ASSERT_LE(tokens - 1, app::kFineTuneLossBars);
        const std::string svg = ReadFile(by_example + "/figures/finetune_loss.svg");
        // Titled by the model's folder and the one above it, as the window's status bar names it ("ssa"
        // alone read as the SSA side), and the base the same way.
        EXPECT_NE(svg.find("<title>licenses/ssa \xC2\xB7 "), std::string::npos) << svg.substr(0, 400);
        EXPECT_NE(ReadFile(by_example + "/figures/finetune.svg").find("(base: english/vanilla)"), std::string::npos);
        size_t turned = 0;
        for (size_t at = svg.find("rotate("); at != std::string::npos; at = svg.find("rotate(", at + 1)) ++turned;
        EXPECT_EQ(turned, static_cast<size_t>(tokens - 1) + 1);
    }
    // Another text in its place, as the window takes one.
    r = Ssaviz({"export", "--example", "licenses", "--text", "Free software.", "--format", "json", "--out", by_example + "/own"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(ReadFile(by_example + "/own/tokens.json"))["text"], "Free software.");
}

// The other commands take an example's model and its text; a run's example, its last step.
TEST(BundledModels, EveryCommandTakesAnExample) {
    Outcome info = Ssaviz({"info", "--example", "graph-run", "--json"});
    ASSERT_EQ(info.code, 0) << info.err;
    EXPECT_TRUE(fs::equivalent(json::parse(info.out)["dir"].get<std::string>(), kBundled + "/graph-run/ssa/checkpoint-300")) << info.out;
    Outcome tokens = Ssaviz({"tokenize", "--example", "english", "--json"}), own = Ssaviz({"tokenize", "--example", "english", "--text", "Hi", "--json"});
    ASSERT_EQ(tokens.code, 0) << tokens.err;
    ASSERT_EQ(own.code, 0) << own.err;
    const json examples = json::parse(ReadFile(kBundled + "/examples.json"));
    const std::string text = std::find_if(examples.begin(), examples.end(), [](const json& e) { return e["id"] == "english"; })->at("text");
    EXPECT_EQ(json::parse(tokens.out)["text"], text);
    EXPECT_EQ(json::parse(own.out)["text"], "Hi");
    Outcome more = Ssaviz({"generate", "--example", "english", "--tokens", "1", "--json"}),
            same = Ssaviz({"generate", "--model", kBundled + "/english/ssa", "--text", text, "--tokens", "1", "--json"});
    ASSERT_EQ(more.code, 0) << more.err;
    EXPECT_EQ(more.out, same.out);
}

// The shipped run (assets/models/graph-run): its steps to sparsity and final fit are what the model
// card says, read back through `export --run` and `eval` of its last step.
TEST(BundledModels, GraphRunReproducesTheModelCard) {
    const std::string card = ReadFile(kBundled + "/README.md"), out = Scratch("graph_run");
    fs::remove_all(out);
    // The example is the run with the vanilla run beside it, on the graph's text.
    Outcome r = Ssaviz({"export", "--example", "graph-run", "--format", "json,svg", "--out", out});
    ASSERT_EQ(r.code, 0) << r.err;
    const json run = json::parse(ReadFile(out + "/run.json"));
    // Its loss curve says the run lowered another loss (the next-token loss rose, and read as a diverging run).
    EXPECT_NE(ReadFile(out + "/curves/loss.svg").find("trained for the graph task"), std::string::npos);
    EXPECT_EQ(ReadFile(out + "/curves/entropy.svg").find("trained for"), std::string::npos);
    EXPECT_TRUE(fs::equivalent(run["run"].get<std::string>(), kBundled + "/graph-run/ssa")) << run["run"];
    EXPECT_TRUE(fs::equivalent(run["compare_run"]["run"].get<std::string>(), kBundled + "/graph-run/vanilla")) << run["compare_run"]["run"];
    EXPECT_EQ(run["steps"].size(), 61u);
    EXPECT_EQ(run["compare_run"]["steps"].size(), 61u);
    const int64_t ssa = run["steps_to_sparsity"][0][0], vanilla = run["compare_run"]["steps_to_sparsity"][0][0];
    EXPECT_NE(card.find("SSA step " + std::to_string(ssa) + ", vanilla\nstep " + std::to_string(vanilla)), std::string::npos)
        << "the card's steps to sparsity: SSA " << ssa << ", vanilla " << vanilla;
    for (const char* role : {"ssa", "vanilla"}) {
        Outcome e = Ssaviz({"eval", "--model", kBundled + "/graph-run/" + role + "/checkpoint-300", "--json"});
        ASSERT_EQ(e.code, 0) << e.err;
        const json got = json::parse(e.out);
        EXPECT_NE(card.find("L1 " + Fixed("%.3f", got["l1"].get<double>())), std::string::npos) << role << " L1 " << got["l1"];
    }
}

}  // namespace
