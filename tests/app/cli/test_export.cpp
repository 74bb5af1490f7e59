// `ssaviz export` figures and batch mode through the real binary. The files are checked by
// independent tools (tests/app/cli/check_export.py: numpy, xml.etree, zlib), not by our own readers.
#include <set>
#include <sstream>
#include <tuple>

#include "cli_harness.h"

namespace {
using namespace cli_test;

const std::string kChecker = std::string(SSAVIZ_SOURCE_DIR) + "/tests/app/cli/check_export.py";

// Runs the checker on an export folder; its output goes into the failure message.
void ExpectValidExport(const std::string& dir, const std::string& extra = "") {
    const std::string log = Scratch("check.log");
    const std::string cmd = std::string(SSAVIZ_PYTHON) + " " + Quote(kChecker) + " " + Quote(dir) + " " + extra + " >" + log + " 2>&1";
    const int status = std::system(cmd.c_str());
    EXPECT_EQ(status, 0) << cmd << "\n" << ReadFile(log);
}

std::vector<std::string> FilesUnder(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
    std::sort(out.begin(), out.end());
    return out;
}

// Width and height from a PNG's IHDR chunk.
std::pair<int, int> PngSize(const std::string& path) {
    const std::string b = ReadFile(path);
    if (b.size() < 24 || b.compare(1, 3, "PNG") != 0) return {0, 0};
    auto be32 = [&](size_t at) {
        return (static_cast<unsigned char>(b[at]) << 24) | (static_cast<unsigned char>(b[at + 1]) << 16) |
               (static_cast<unsigned char>(b[at + 2]) << 8) | static_cast<unsigned char>(b[at + 3]);
    };
    return {static_cast<int>(be32(16)), static_cast<int>(be32(20))};
}

// Issue 35: --lens writes the lens and the attribution of both sides, shaped as SPEC section 10
// says; numpy reads them, the lens's last row is loss.npy, and --lens with what-ifs is refused.
TEST_F(Cli, ExportLensWritesTheLensAndTheAttribution) {
    const std::string out = kOut + "/lens";
    fs::remove_all(out);
    const std::string text = "The cat sat on the mat. The cat";
    Outcome r = Ssaviz({"export", "--model", Small(), "--text", text, "--out", out, "--format", "npy,json,png,svg", "--lens"});
    ASSERT_EQ(r.code, 0) << r.err;
    const int64_t T = NpyShape(out + "/loss.npy").at(0) + 1;
    for (const std::string suffix : {"", "_compare"}) {
        EXPECT_EQ(NpyShape(out + "/lens_loss" + suffix + ".npy"), (std::vector<int64_t>{3, T - 1}));
        EXPECT_EQ(NpyShape(out + "/dla" + suffix + ".npy"), (std::vector<int64_t>{2, 2, T - 1}));
        EXPECT_EQ(NpyShape(out + "/dla_mlp" + suffix + ".npy"), (std::vector<int64_t>{2, T - 1}));
        for (const char* name : {"dla_embed", "dla_const", "dla_logit"}) EXPECT_EQ(NpyShape(out + "/" + name + suffix + ".npy"), (std::vector<int64_t>{T - 1}));
        const json top = json::parse(ReadFile(out + "/lens_top" + suffix + ".json"));
        EXPECT_EQ(top["layers"], 3);
        EXPECT_EQ(top["top"].size(), 3u);
        EXPECT_EQ(top["top"][2].size(), static_cast<size_t>(T));
        EXPECT_EQ(top["top"][2][0].size(), 5u);
        for (const char* figure : {"lens", "dla_heads"})
            for (const char* ext : {".png", ".svg"}) EXPECT_TRUE(fs::is_regular_file(out + "/" + figure + suffix + ext)) << figure << suffix << ext;
    }
    EXPECT_TRUE(fs::is_regular_file(out + "/lens_diff.svg"));
    EXPECT_FALSE(fs::exists(out + "/lens_diff_base.svg")) << "no base";
    // The last token's logit by head, SSA beside the comparison: both sides' bars, the heads named.
    EXPECT_TRUE(fs::is_regular_file(out + "/dla_bars.png"));
    const std::string bars = ReadFile(out + "/dla_bars.svg");
    // (the comparison named by its kind, as every figure names it)
    for (const char* label : {"the last token", "L1 H1", "L0 H0", ">SSA (logit ", ">tau = 1 (logit "}) EXPECT_NE(bars.find(label), std::string::npos) << label;
    // And by layer, as the Lens tab totals it: each layer's attention and MLP, the embeddings, the biases.
    EXPECT_TRUE(fs::is_regular_file(out + "/dla_layers.png"));
    const std::string layers = ReadFile(out + "/dla_layers.svg");
    for (const char* label : {"part of its logit", "L0 attn", "L1 MLP", "embeddings", "biases", ">final norm<", ">SSA (logit ", ">tau = 1 (logit "})
        EXPECT_NE(layers.find(label), std::string::npos) << label;
    const std::string check = std::string(SSAVIZ_PYTHON) + " -c \"import numpy as np, sys; d = sys.argv[1]; "
                              "lens = np.load(d + '/lens_loss.npy'); loss = np.load(d + '/loss.npy'); "
                              "assert np.all(np.isfinite(lens)), 'not finite'; "
                              "assert np.abs(lens[-1] - loss).max() < 1e-5, np.abs(lens[-1] - loss).max(); "
                              "c = np.load(d + '/lens_loss_compare.npy'); lc = np.load(d + '/loss_compare.npy'); "
                              "assert np.abs(c[-1] - lc).max() < 1e-5, np.abs(c[-1] - lc).max(); "
                              "parts = np.load(d + '/dla.npy').sum((0, 1)) + np.load(d + '/dla_mlp.npy').sum(0) + np.load(d + '/dla_embed.npy') "
                              "+ np.load(d + '/dla_const.npy'); "
                              "assert np.abs(parts - np.load(d + '/dla_logit.npy')).max() < 1e-4, 'the parts sum to the logit'; "
                              // The summary line: each side's mean loss after each layer, lens_loss*.npy's.
                              "line = [l for l in open(sys.argv[2]) if l.startswith('ssaviz: the lens, mean loss')][0]; "
                              "want = 'SSA: ' + ' '.join('%.3f' % v for v in lens.astype(np.float64).mean(1)) + '; tau = 1: ' + ' '.join('%.3f' % v for v in c.astype(np.float64).mean(1)); "
                              "assert line.rstrip().endswith(want), (line, want); "
                              // The lens's columns labelled with the token predicted (1 .. T - 1), as finetune_loss's.
                              "import json, xml.etree.ElementTree as ET; ns = '{http://www.w3.org/2000/svg}'; "
                              "turned = [e.text for e in ET.parse(d + '/lens.svg').getroot().iter(ns + 'text') if 'rotate' in (e.get('transform') or '')]; "
                              "pieces = [p.replace(' ', '\\u00b7') for p in json.load(open(d + '/tokens.json'))['pieces']]; "
                              "assert turned[:len(pieces) - 1] == pieces[1:], (turned, pieces)\" " +
                              Quote(out) + " " + Quote(Scratch("lens_err.txt")) + " >" + Scratch("lens_check.log") + " 2>&1";
    std::ofstream(Scratch("lens_err.txt")) << r.err;
    EXPECT_EQ(std::system(check.c_str()), 0) << ReadFile(Scratch("lens_check.log"));
    // One token: no next token, so no lens difference to draw (it wrote an empty lens_diff.png); no
    // figure of the export is empty.
    r = Ssaviz({"export", "--model", Small(), "--text", "The", "--out", out + "_one", "--format", "png,svg,json", "--lens"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(fs::exists(out + "_one/lens_diff.png"));
    for (const auto& e : fs::recursive_directory_iterator(out + "_one"))
        if (e.is_regular_file()) {
            EXPECT_GT(e.file_size(), 0u) << e.path();
        }
    r = Ssaviz({"export", "--model", Small(), "--text", text, "--out", out + "2", "--lens", "--ablate", "0:1"});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("--lens runs the model as loaded"), std::string::npos) << r.err;
    // --batch: each text's folder gets its lens files, and the summary each text's loss read after
    // each layer (the last, the model's own: its mean loss), in summary.json and as CSV columns.
    const std::string batch = Scratch("lens_batch.txt");
    std::ofstream(batch) << "The cat sat on the mat.\nA dog ran in the park today.\n";
    fs::remove_all(out + "_batch");
    r = Ssaviz({"export", "--model", Small(), "--text-file", batch, "--batch", "--out", out + "_batch", "--format", "npy,json", "--lens"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json summary = json::parse(ReadFile(out + "_batch/summary.json"));
    ASSERT_EQ(summary["texts"].size(), 2u);
    for (const json& row : summary["texts"]) {
        ASSERT_EQ(row["lens_loss"].size(), 3u) << row.dump();
        ASSERT_EQ(row["lens_loss_compare"].size(), 3u) << row.dump();
        EXPECT_NEAR(row["lens_loss"][2].get<double>(), row["loss"].get<double>(), 1e-5) << row.dump();
        EXPECT_TRUE(fs::is_regular_file(out + "_batch/" + row["name"].get<std::string>() + "/lens_loss.npy"));
    }
    const std::string header = ReadFile(out + "_batch/summary.csv").substr(0, ReadFile(out + "_batch/summary.csv").find('\n'));
    EXPECT_NE(header.find(",lens_loss_0,lens_loss_1,lens_loss_2,lens_loss_compare_0,"), std::string::npos) << header;
}

// --dla-position: the position whose next token's logit dla_bars and dla_layers split, counted as
// dla.npy's last axis and Python's plot(position=) (0 predicts token 1), negative from the end; a
// position the text does not have is a usage error before anything is written, in a batch that
// text's failure.
TEST_F(Cli, ExportLensDlaPositionPicksTheLogitTheFiguresSplit) {
    const std::string out = kOut + "/dla_position";
    const std::string text = "The cat sat on the mat. The cat";
    auto bars = [&](const std::string& name, const std::vector<std::string>& extra) {
        fs::remove_all(out + name);
        std::vector<std::string> args = {"export", "--model", Small(), "--text", text, "--out", out + name, "--format", "svg", "--lens"};
        args.insert(args.end(), extra.begin(), extra.end());
        const Outcome r = Ssaviz(args);
        EXPECT_EQ(r.code, 0) << r.err;
        return std::make_pair(ReadFile(out + name + "/dla_bars.svg"), ReadFile(out + name + "/dla_layers.svg"));
    };
    const auto last = bars("_last", {});
    EXPECT_EQ(bars("_minus1", {"--dla-position", "-1"}), last) << "-1 is the default, the last";
    const auto second = bars("_2", {"--dla-position", "2"});
    EXPECT_NE(second.first, last.first);
    EXPECT_NE(second.first.find("token 3 "), std::string::npos) << "position 2 predicts token 3";
    EXPECT_NE(second.second.find("token 3 "), std::string::npos);
    EXPECT_EQ(bars("_first", {"--dla-position", "0"}).first.find("token 1 ") != std::string::npos, true) << "0 predicts token 1";

    // Refused, nothing written: past the text either way, not a number, and without --lens.
    for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{
             {"--lens", "--dla-position", "40"}, {"--lens", "--dla-position", "-40"}, {"--lens", "--dla-position", "x"}, {"--dla-position", "1"}}) {
        fs::remove_all(out + "_bad");
        std::vector<std::string> args = {"export", "--model", Small(), "--text", text, "--out", out + "_bad", "--format", "svg"};
        args.insert(args.end(), extra.begin(), extra.end());
        const Outcome r = Ssaviz(args);
        EXPECT_EQ(r.code, 2) << extra.back() << ": " << r.err;
        EXPECT_FALSE(fs::exists(out + "_bad")) << extra.back();
        EXPECT_NE(r.err.find("--dla-position"), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
    const Outcome past = Ssaviz({"export", "--model", Small(), "--text", text, "--out", out + "_bad", "--format", "svg", "--lens", "--dla-position", "40"});
    EXPECT_NE(past.err.find("is out of range: 0 to "), std::string::npos) << past.err;
    for (const char* huge : {"9223372036854775807", "-99999999999999999999"})  // past what a position holds: out of range, not "no number"
        ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", text, "--out", out + "_bad", "--lens", "--dla-position", huge}), 2,
                           "' is out of range: a position of the text, negative from the end");
    for (const char* odd : {"+-5", "+5"})
        ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", text, "--out", out + "_bad", "--lens", "--dla-position", odd}), 2,
                           "' is not a position: a whole number");
    EXPECT_NE(Ssaviz({"export", "--model", Small(), "--text", text, "--out", out + "_bad", "--dla-position", "1"}).err.find("it needs --lens"),
              std::string::npos);
    // A text of one token predicts nothing: any position asked is refused (without one, its lens files are written).
    const Outcome one = Ssaviz({"export", "--model", Small(), "--text", "The", "--out", out + "_bad", "--format", "svg", "--lens", "--dla-position", "0"});
    EXPECT_EQ(one.code, 2) << one.err;
    EXPECT_NE(one.err.find("a text of one token predicts no next token"), std::string::npos) << one.err;
    EXPECT_FALSE(fs::exists(out + "_bad"));

    // A batch: a text too short for the position is that text's failure; the others are written.
    const std::string batch = Scratch("dla_position_batch.txt");
    std::ofstream(batch) << "The cat sat on the mat today.\nThe cat\nThe\n";  // the second: positions 0 and 1 at most; the third none
    fs::remove_all(out + "_batch");
    const Outcome r = Ssaviz({"export", "--model", Small(), "--text-file", batch, "--batch", "--out", out + "_batch", "--format", "svg,json",
                              "--lens", "--dla-position", "3"});
    EXPECT_EQ(r.code, 3) << r.err;
    const json summary = json::parse(ReadFile(out + "_batch/summary.json"));
    ASSERT_EQ(summary["texts"].size(), 1u) << summary.dump();
    ASSERT_EQ(summary["failed"].size(), 2u) << summary.dump();
    EXPECT_NE(summary["failed"][0]["error"].get<std::string>().find("--dla-position 3 is out of range"), std::string::npos) << summary.dump();
    EXPECT_NE(summary["failed"][1]["error"].get<std::string>().find("one token predicts no next token"), std::string::npos) << summary.dump();
    const std::string written = ReadFile(out + "_batch/" + summary["texts"][0]["name"].get<std::string>() + "/dla_bars.svg");
    EXPECT_NE(written.find("token 4 "), std::string::npos);
}

// --dla-target: whose logit dla_bars and dla_layers split, as the Lens tab's Attribute, written to
// dla_at.json. `next` there equals dla.npy's column; `top` (by default the last token, which has no
// next token in the text) attributes lens_top.json's top token after the last layer; next against
// SSA's other is the next token's parts less that other token's, part by part (the other: the top
// prediction, asked for at the same position). Every side's parts sum to its logit. Bad values are
// one-line usage errors, nothing written.
TEST_F(Cli, ExportLensDlaTargetSplitsTheTopPredictionAndTheDifference) {
    const std::string out = kOut + "/dla_target";
    const std::string text = "The cat sat on the mat. The cat";
    auto at = [&](const std::string& name, const std::vector<std::string>& extra) {
        fs::remove_all(out + name);
        std::vector<std::string> args = {"export", "--model", Small(), "--text", text, "--out", out + name, "--format", "json,npy,svg", "--lens"};
        args.insert(args.end(), extra.begin(), extra.end());
        const Outcome r = Ssaviz(args);
        EXPECT_EQ(r.code, 0) << r.err;
        return json::parse(ReadFile(out + name + "/dla_at.json"));
    };
    constexpr int L = 2, H = 2;
    auto parts = [&](const json& side) {  // heads, MLPs, embeddings, biases: as Attribute's order
        std::vector<float> p;
        for (const auto& row : side["heads"])
            for (const auto& v : row) p.push_back(v.get<float>());
        for (const auto& v : side["mlp"]) p.push_back(v.get<float>());
        p.push_back(side["embed"].get<float>());
        p.push_back(side["const"].get<float>());
        return p;
    };
    auto expect_sums = [&](const json& j) {
        ASSERT_EQ(j["sides"].size(), 2u) << "SSA and tau = 1";
        for (const auto& side : j["sides"]) {
            double sum = 0;
            for (float v : parts(side)) sum += v;
            EXPECT_NEAR(sum, side["logit"].get<double>(), 1e-4) << side["name"];
            // Through SSA's final-norm divisor, with what the side's own adds, they sum to it too.
            ASSERT_TRUE(side.contains("through_ssa_divisor")) << side.dump();
            const json& through = side["through_ssa_divisor"];
            sum = through["final_norm"].get<double>();
            for (float v : parts(through)) sum += v;
            EXPECT_NEAR(sum, side["logit"].get<double>(), 1e-4) << side["name"];
        }
        // The embeddings write the same vector at tau = 1 as in SSA (the same weights, the same
        // token): through one divisor their parts are equal; through each side's own they read
        // apart by the divisors' ratio (the part a researcher took for a change).
        const json &ssa = j["sides"][0], &tau1 = j["sides"][1];
        const float embed = ssa["embed"].get<float>();
        EXPECT_NEAR(tau1["through_ssa_divisor"]["embed"].get<float>(), embed, 1e-5f * std::max(1.0f, std::abs(embed)));
        const double ratio = ssa["divisor"].get<double>() / tau1["divisor"].get<double>();
        EXPECT_NEAR(tau1["embed"].get<double>(), embed * ratio, 1e-5 * std::max(1.0f, std::abs(embed)));
    };

    // next: dla.npy's column at the position asked.
    const json next = at("_next", {"--dla-target", "next", "--dla-position", "2"});
    expect_sums(next);
    // Without --dla-target, the default's numbers all the same (dla_at.json was written only with
    // it), read from the lens's columns (dla.npy's) where `next` runs its own products: 1e-5.
    const json plain = at("_plain", {"--dla-position", "2"});
    EXPECT_EQ(plain["target"], "next");
    EXPECT_EQ(plain["position"], 2);
    EXPECT_EQ(plain["attributed"], next["attributed"]);
    expect_sums(plain);
    for (size_t k = 0; k < 2; ++k) {
        const std::vector<float> mine = parts(plain["sides"][k]), theirs = parts(next["sides"][k]);
        ASSERT_EQ(mine.size(), theirs.size());
        for (size_t i = 0; i < mine.size(); ++i) EXPECT_NEAR(mine[i], theirs[i], 1e-5) << k << " " << i;
    }
    const int64_t T = NpyShape(out + "_next/loss.npy").at(0) + 1;
    EXPECT_EQ(next["position"], 2);
    EXPECT_EQ(next["target"], "next");
    EXPECT_TRUE(next["versus"].is_null());
    for (const auto& [k, suffix] : {std::pair{0, ""}, std::pair{1, "_compare"}}) {
        const std::vector<float> dla = NpyFloats(out + "_next/dla" + std::string(suffix) + ".npy"),
                                 mlp = NpyFloats(out + "_next/dla_mlp" + std::string(suffix) + ".npy"),
                                 logit = NpyFloats(out + "_next/dla_logit" + std::string(suffix) + ".npy");
        const std::vector<float> p = parts(next["sides"][k]);
        ASSERT_EQ(dla.size(), static_cast<size_t>(L * H * (T - 1)));
        for (int h = 0; h < L * H; ++h) EXPECT_NEAR(p[h], dla[h * (T - 1) + 2], 1e-4) << "head " << h << suffix;
        for (int l = 0; l < L; ++l) EXPECT_NEAR(p[L * H + l], mlp[l * (T - 1) + 2], 1e-4) << "MLP " << l << suffix;
        EXPECT_NEAR(next["sides"][k]["logit"].get<float>(), logit[2], 1e-4) << suffix;
        EXPECT_NEAR(next["sides"][k]["divisor"].get<float>(), NpyFloats(out + "_next/dla_divisor" + std::string(suffix) + ".npy").at(2), 1e-5) << suffix;
    }
    EXPECT_GT(std::abs(next["sides"][0]["divisor"].get<double>() / next["sides"][1]["divisor"].get<double>() - 1), 1e-4)
        << "SSA's and tau = 1's divisors differ: the check of the embeddings' parts above can fail";

    // top, by default at the last token: the model's prediction after the text, every side's of that token.
    const json top = at("_top", {"--dla-target", "top"});
    expect_sums(top);
    EXPECT_EQ(top["position"], T - 1);
    const json lens_top = json::parse(ReadFile(out + "_top/lens_top.json"));
    EXPECT_EQ(top["attributed"]["id"], lens_top["top"][L][T - 1][0]["id"]);
    EXPECT_EQ(top["attributed"]["piece"], lens_top["top"][L][T - 1][0]["piece"]);
    EXPECT_NE(ReadFile(out + "_top/dla_bars.svg").find("top prediction"), std::string::npos);

    // next against SSA's other at position 2: the next token's parts less the other's (the top
    // prediction's there, where it is not the next token; else the second's).
    const json versus = at("_versus", {"--dla-target", "next-against-other", "--dla-position", "2"});
    expect_sums(versus);
    const json top2 = at("_top2", {"--dla-target", "top", "--dla-position", "2"});
    ASSERT_FALSE(versus["versus"].is_null());
    EXPECT_EQ(versus["attributed"], next["attributed"]);
    if (top2["attributed"]["id"] != next["attributed"]["id"]) {
        EXPECT_EQ(versus["versus"], top2["attributed"]);
        for (int k = 0; k < 2; ++k) {
            const std::vector<float> a = parts(next["sides"][k]), b = parts(top2["sides"][k]), d = parts(versus["sides"][k]);
            for (size_t i = 0; i < d.size(); ++i) EXPECT_NEAR(d[i], a[i] - b[i], 1e-4) << "part " << i;
        }
    }
    EXPECT_NE(ReadFile(out + "_versus/dla_layers.svg").find("logit difference"), std::string::npos);

    // Refused, nothing written: an unknown target, one without --lens, a position past the text;
    // a text of one token has no next token (its top prediction it has).
    for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{
             {"--lens", "--dla-target", "second"}, {"--dla-target", "top"}, {"--lens", "--dla-target", "next", "--dla-position", "40"}}) {
        fs::remove_all(out + "_bad");
        std::vector<std::string> args = {"export", "--model", Small(), "--text", text, "--out", out + "_bad", "--format", "json"};
        args.insert(args.end(), extra.begin(), extra.end());
        ExpectOneLineError(Ssaviz(args), 2, extra.size() == 2 ? "it needs --lens" : "--dla-");
        EXPECT_FALSE(fs::exists(out + "_bad"));
    }
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "The", "--out", out + "_bad", "--lens", "--dla-target", "next"}), 2,
                       "needs a next token");
    fs::remove_all(out + "_one");
    EXPECT_EQ(Ssaviz({"export", "--model", Small(), "--text", "The", "--out", out + "_one", "--format", "json", "--lens", "--dla-target", "top"}).code, 0);
    EXPECT_EQ(json::parse(ReadFile(out + "_one/dla_at.json"))["position"], 0);
}

// --lens against a fine-tune's base: a third side, the base's lens and attribution (`_base`), each
// file the same bytes as the base model's own lens exported alone; its last lens row is
// loss_base.npy; dla_bars draws the three sides; a batch's summary gains lens_loss_base.
TEST_F(Cli, ExportLensAgainstABaseHasTheBasesLens) {
    const std::string out = kOut + "/lens_base";
    fs::remove_all(out);
    fs::remove_all(out + "_alone");
    // Over 100 lens cells (3 rows, 35 positions), so that the difference's scale, the 99th
    // percentile, clips: the pair of Small() and Twin() with a context of 64.
    const std::string tokenizer = std::string(SSAVIZ_SOURCE_DIR) + "/assets/tokenizers/gpt2";
    const std::string ft = kOut + "/small64", base = kOut + "/twin64";
    for (auto [dir, seed] : {std::pair{ft, "7"}, std::pair{base, "99"}}) {
        if (!fs::exists(dir + "/model.safetensors")) {
            ASSERT_EQ(Ssaviz({"init-random", "--out", dir, "--seed", seed, "--tokenizer", tokenizer, "--layers", "2", "--heads", "2", "--embd",
                              "16", "--positions", "64"}).code, 0);
        }
    }
    const std::string text = "The cat sat on the mat. The dog ran to the park, and the cat sat on the mat again while a bird sang "
                             "in the tree by the old house. The cat";
    Outcome r = Ssaviz({"export", "--model", ft, "--base", base, "--text", text, "--out", out, "--format", "npy,json,svg", "--lens"});
    ASSERT_EQ(r.code, 0) << r.err;
    r = Ssaviz({"export", "--model", base, "--text", text, "--out", out + "_alone", "--format", "npy,json", "--lens"});
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* name : {"lens_loss", "dla", "dla_mlp", "dla_embed", "dla_const"}) {
        ASSERT_TRUE(fs::is_regular_file(out + "/" + name + "_base.npy")) << name;
        EXPECT_EQ(ReadFile(out + "/" + name + "_base.npy"), ReadFile(out + "_alone/" + name + ".npy")) << name;
        EXPECT_TRUE(fs::is_regular_file(out + "/" + name + "_tau1.npy")) << name;
    }
    EXPECT_EQ(json::parse(ReadFile(out + "/lens_top_base.json")), json::parse(ReadFile(out + "_alone/lens_top.json")));
    for (const char* figure : {"lens_base.svg", "dla_heads_base.svg", "lens_diff_drift.svg", "dla_heads_change.svg"})
        EXPECT_TRUE(fs::is_regular_file(out + "/" + figure)) << figure;
    const std::string bars = ReadFile(out + "/dla_bars.svg");
    // Each side named with the logit its parts split (the bars, a top few heads, do not sum to it).
    for (const char* label : {">SSA (logit ", ">tau = 1 (logit ", ">base (logit "}) EXPECT_NE(bars.find(label), std::string::npos) << label;
    const std::string layers = ReadFile(out + "/dla_layers.svg");
    for (const char* label : {"L1 attn", ">SSA (logit ", ">tau = 1 (logit ", ">base (logit ", ">final norm<"})
        EXPECT_NE(layers.find(label), std::string::npos) << label;
    const std::string check = std::string(SSAVIZ_PYTHON) + " -c \"import numpy as np, sys; d = sys.argv[1]; "
                              "b = np.load(d + '/lens_loss_base.npy'); lb = np.load(d + '/loss_base.npy'); "
                              "assert np.abs(b[-1] - lb).max() < 1e-5, np.abs(b[-1] - lb).max(); "
                              "assert np.abs(b - np.load(d + '/lens_loss.npy')).max() > 1e-3, 'the base is its own model'\" " +
                              Quote(out) + " >" + Scratch("lens_base_check.log") + " 2>&1";
    EXPECT_EQ(std::system(check.c_str()), 0) << ReadFile(Scratch("lens_base_check.log"));
    // lens_diff_base, lens_diff and lens_diff_drift: SSA's loss of the next token minus the base's and
    // tau = 1's, and tau = 1's minus the base's, each cell (row-major, as lens_loss.npy) blue where the
    // first side predicts it clearly better (its loss - the other's below minus a fifth of the largest
    // change), red where clearly worse; one scale for the three (the 99th percentile of their
    // changes together): the cells at or beyond it all in its end colours, in every figure.
    const std::string signs = std::string(SSAVIZ_PYTHON) + " -c \"import numpy as np, re, sys; d = sys.argv[1]; "
                              "side = lambda s: np.load(d + '/lens_loss' + s + '.npy').ravel()\n"
                              "pairs = (('', '_base', 'lens_diff_base'), ('', '_tau1', 'lens_diff'), ('_tau1', '_base', 'lens_diff_drift'))\n"
                              "deltas = [side(a) - side(b) for a, b, _ in pairs]; pooled = np.concatenate(deltas)\n"
                              "mags = np.sort(np.abs(pooled[np.isfinite(pooled)])); edge = mags[int(np.ceil(0.99 * mags.size)) - 1]\n"
                              "assert mags.size >= 300 and edge < mags[-1], (mags.size, edge, mags[-1])\n"
                              "for (a, b, fig), delta in zip(pairs, deltas):\n"
                              " most = np.abs(delta).max()\n"
                              " fills = re.findall(r'class=.cell.[^>]*fill=.#([0-9a-f]{6})', open(d + '/' + fig + '.svg').read())\n"
                              " assert len(fills) == delta.size, (fig, len(fills), delta.size)\n"
                              " rgb = [(int(f[0:2], 16), int(f[4:6], 16)) for f in fills]; clear = np.abs(delta) > 0.2 * most\n"
                              " assert clear.sum() >= 3, (fig, clear.sum())\n"
                              " wrong = [k for k in np.nonzero(clear)[0] if (rgb[k][0] > rgb[k][1]) != (delta[k] > 0)]\n"
                              " assert not wrong, (fig, wrong, delta[wrong], [fills[k] for k in wrong])\n"
                              " for sign in (1, -1):\n"
                              "  ends = {fills[k] for k in np.nonzero(sign * delta >= edge)[0]}\n"
                              "  assert len(ends) <= 1, (fig, sign, edge, ends)\n"
                              " assert 'one scale for' in open(d + '/' + fig + '.svg').read(), fig\" " +
                              Quote(out) + " >" + Scratch("lens_diff_check.log") + " 2>&1";
    EXPECT_EQ(std::system(signs.c_str()), 0) << ReadFile(Scratch("lens_diff_check.log"));
    const std::string batch = Scratch("lens_base_batch.txt");
    std::ofstream(batch) << "The cat sat on the mat.\nA dog ran in the park today.\n";
    fs::remove_all(out + "_batch");
    r = Ssaviz({"export", "--model", ft, "--base", base, "--text-file", batch, "--batch", "--out", out + "_batch", "--format", "json",
                "--lens"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json summary = json::parse(ReadFile(out + "_batch/summary.json"));  // kept: the loop reads into it
    for (const json& row : summary["texts"]) {
        ASSERT_EQ(row["lens_loss_base"].size(), 3u) << row.dump();
        EXPECT_NEAR(row["lens_loss_base"][2].get<double>(), row["loss_base"].get<double>(), 1e-5) << row.dump();
    }
    const std::string csv = ReadFile(out + "_batch/summary.csv");
    EXPECT_NE(csv.substr(0, csv.find('\n')).find(",lens_loss_base_0,lens_loss_base_1,lens_loss_base_2"), std::string::npos) << csv;
}

// Issue 36: --run analyses each checkpoint of a training run in step order; a truncated
// checkpoint and one of another shape are named and skipped (exit 3) while the rest are written;
// each step's numbers equal that checkpoint exported on its own, exactly.
// --rank-heads: each head's temperatures' part of the loss, the window's What-ifs > Rank heads as
// files. Each head's delta is checked against an export with that head's what-if (--ablate L:H, the
// same analysis path the window's What-ifs take) within 1e-6 nats, on top of the user's what-ifs too.
TEST_F(Cli, ExportRankHeadsMeasuresEachHeadsTemperatures) {
    const std::string dir = kOut + "/rank_heads", text = "The cat sat on the mat. The dog sat on the log.";
    fs::remove_all(dir);
    Outcome r = Ssaviz({"export", "--model", Small(), "--text", text, "--out", dir + "/all", "--format", "json,png,svg", "--rank-heads", "--layers",
                        "0", "--heads", "0"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json ranked = json::parse(ReadFile(dir + "/all/head_impacts.json")), metrics = json::parse(ReadFile(dir + "/all/metrics.json"));
    EXPECT_TRUE(ranked["complete"].get<bool>());
    EXPECT_EQ(ranked["what_ifs"], "");
    EXPECT_NEAR(ranked["baseline"].get<double>(), metrics["loss"]["ssa"].get<double>(), 1e-6);
    const int L = metrics["model"]["n_layer"], H = metrics["model"]["n_head"];
    ASSERT_EQ(ranked["part"].size(), static_cast<size_t>(L));
    EXPECT_NE(r.err.find("ssaviz: each head's temperatures' part of the loss "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("(nats, one head at tau = 1 at a time): lowered it most L"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("; raised it most "), std::string::npos) << r.err;
    for (const char* f : {"head_impacts.csv", "head_impacts.png", "head_impacts.svg", "head_impacts_tokens.png", "head_impacts_tokens.svg"})
        EXPECT_TRUE(fs::exists(dir + "/all/" + f)) << f;
    // Token by token: a row a head, a column a token's loss (no base: no drift's figure).
    const std::string by_token = ReadFile(dir + "/all/head_impacts_tokens.svg");
    for (const char* label : {"part of each token&#39;s loss, the head at tau = 1", ">L0 H0<", ">L1 H1<", ">\xC2\xB7" "cat<", "loss change, nats"})
        EXPECT_NE(by_token.find(label), std::string::npos) << label;
    EXPECT_FALSE(fs::exists(dir + "/all/head_impacts_drift_tokens.svg"));
    EXPECT_EQ(ReadFile(dir + "/all/head_impacts.csv").substr(0, 59), "layer,head,mean_loss,part,part_tau_q,part_tau_v,part_drift\n");
    EXPECT_TRUE(ranked["drift"].is_null()) << "no base, no drift";
    EXPECT_EQ(r.err.find("the drift's parts"), std::string::npos) << r.err;
    // A head's part split into its tau_q's and its tau_v's, each against that what-if alone (=q, =v).
    for (const char* alone : {"q", "v"}) {
        const std::string out = dir + "/alone_" + alone;
        ASSERT_EQ(Ssaviz({"export", "--model", Small(), "--text", text, "--out", out, "--format", "json", "--ablate", std::string("1:1=") + alone}).code, 0);
        const double loss = json::parse(ReadFile(out + "/metrics.json"))["loss"]["ssa"];
        EXPECT_NEAR(ranked[std::string("part_tau_") + alone][1][1].get<double>(), ranked["baseline"].get<double>() - loss, 1e-6) << alone;
    }
    std::vector<double> deltas;
    for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) {
            const std::string what_if = std::to_string(l) + ":" + std::to_string(h), out = dir + "/ablate_" + std::to_string(l) + std::to_string(h);
            ASSERT_EQ(Ssaviz({"export", "--model", Small(), "--text", text, "--out", out, "--format", "json", "--ablate", what_if}).code, 0);
            const double loss = json::parse(ReadFile(out + "/metrics.json"))["loss"]["ssa"];
            EXPECT_NEAR(ranked["mean_loss"][l][h].get<double>(), loss, 1e-6) << what_if;
            // Its part: below 0 where its temperatures lowered the loss, as the fine-tune's split reads.
            EXPECT_NEAR(ranked["part"][l][h].get<double>(), ranked["baseline"].get<double>() - loss, 1e-6) << what_if;
            deltas.push_back(ranked["part"][l][h]);
        }
    EXPECT_GT(*std::max_element(deltas.begin(), deltas.end()) - *std::min_element(deltas.begin(), deltas.end()), 1e-4) << "the heads differ";
    // On top of the user's what-ifs: the baseline is the loss with them, each head's on top.
    r = Ssaviz({"export", "--model", Small(), "--text", text, "--out", dir + "/on_top", "--format", "json", "--rank-heads", "--ablate", "1:0"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json on_top = json::parse(ReadFile(dir + "/on_top/head_impacts.json"));
    EXPECT_EQ(on_top["what_ifs"], "1:0");
    EXPECT_NEAR(on_top["baseline"].get<double>(), json::parse(ReadFile(dir + "/ablate_10/metrics.json"))["loss"]["ssa"].get<double>(), 1e-6);
    EXPECT_TRUE(on_top["part"][1][0].is_null()) << "a head already at tau = 1 has no temperatures to measure";
    EXPECT_NEAR(on_top["mean_loss"][1][0].get<double>(), on_top["baseline"].get<double>(), 1e-6) << "its own what-if again changes nothing";
    // What it cannot do: one token has no loss (the text's fault); a batch or a run is a usage error, before any model runs.
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "The", "--out", dir + "/one", "--format", "json", "--rank-heads"}), 3,
                       "--rank-heads: a text of one token has no loss to rank the heads by");
    std::ofstream(dir + "/texts.txt") << "one text\nanother\n";
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text-file", dir + "/texts.txt", "--batch", "--out", dir + "/b", "--rank-heads"}), 2,
                       "--rank-heads analyses the text once a head: not with --batch");
    EXPECT_FALSE(fs::exists(dir + "/b"));
}

// Beside a base, --rank-heads measures the drift part by part too: each head's weights, each MLP,
// the embeddings, every weight from the base (model/nn/from_base.h; its numbers are test_base.cpp's).
// With every head at tau = 1 and every weight from the vanilla base the model is the base, so the
// whole drift's part is the loss minus the base's (2e-5 nats: two forward passes of other shapes).
TEST_F(Cli, ExportRankHeadsBesideABaseMeasuresTheDriftPartByPart) {
    const std::string dir = kOut + "/rank_heads_drift";
    fs::remove_all(dir);
    Outcome r = Ssaviz({"export", "--example", "licenses", "--out", dir, "--format", "json,csv,svg,npy", "--rank-heads", "--ablate", "0:*,1:*,2:*,3:*"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json ranked = json::parse(ReadFile(dir + "/head_impacts.json")), metrics = json::parse(ReadFile(dir + "/metrics.json"));
    const json& drift = ranked["drift"];
    ASSERT_TRUE(drift.is_object()) << ranked.dump();
    EXPECT_NEAR(drift["baseline"].get<double>(), ranked["baseline"].get<double>(), 1e-5);
    EXPECT_NEAR(drift["all"].get<double>(), drift["baseline"].get<double>() - metrics["loss"]["base"].get<double>(), 2e-5);
    EXPECT_TRUE(metrics["decomposition"]["base_temperatures"].is_null()) << "a vanilla base";
    EXPECT_EQ(r.err.find("ssaviz: note: the base has"), std::string::npos) << r.err;
    ASSERT_EQ(drift["heads"].size(), 4u);
    ASSERT_EQ(drift["mlp"].size(), 4u);
    EXPECT_TRUE(drift["embeddings"].is_number());
    std::set<double> parts;
    for (const json& layer : drift["heads"])
        for (const json& head : layer) parts.insert(head.get<double>());
    EXPECT_GT(*parts.rbegin() - *parts.begin(), 1e-3) << "the heads differ";
    EXPECT_NE(r.err.find("ssaviz: the drift's parts (nats, one head's or MLP's weights from the base at a time, SSA's temperatures kept): "
                         "lowered it most L"),
              std::string::npos)
        << r.err;
    char split[96];  // the split's own drift beside them, another measure (tau = 1 against the base)
    std::snprintf(split, sizeof split, "(the split's drift, tau = 1 against the base: %+.3g)\n",
                  metrics["decomposition"]["loss_mean"]["tau1"].get<double>() - metrics["decomposition"]["loss_mean"]["base"].get<double>());
    EXPECT_NE(r.err.find(split), std::string::npos) << split << r.err;
    EXPECT_NE(r.err.find("; whole attention blocks: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("ssaviz: the drift along the layers (each part taken back from the base on top of those before it, one way and the "
                         "other): from the embeddings up / from the top down: embeddings -"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(", every weight (SSA's temperatures kept) -"), std::string::npos) << r.err;
    ASSERT_EQ(drift["attention"].size(), 4u);
    // Every part a row of head_impacts_drift.csv: none, 16 heads, 4 attention blocks and MLPs, the
    // embeddings, all, then the path along the layers both ways (the embeddings, each layer's attention and MLP).
    const std::string drift_csv = ReadFile(dir + "/head_impacts_drift.csv");
    EXPECT_EQ(drift_csv.substr(0, 37), "part,layer,head,mean_loss,part_drift\n");
    EXPECT_EQ(std::count(drift_csv.begin(), drift_csv.end(), '\n'), 1 + 1 + 16 + 8 + 2 + 9 + 9) << drift_csv;
    EXPECT_NE(drift_csv.find("\nmlp,3,,"), std::string::npos) << drift_csv;
    // The CSV's part_drift is the JSON's, head by head.
    std::istringstream csv(ReadFile(dir + "/head_impacts.csv"));
    std::string line;
    std::getline(csv, line);
    int rows = 0;
    while (std::getline(csv, line)) {
        const int l = line[0] - '0', h = line[2] - '0';
        EXPECT_NEAR(std::stod(line.substr(line.rfind(',') + 1)), drift["heads"][l][h].get<double>(), 1e-6) << line;
        ++rows;
    }
    EXPECT_EQ(rows, 16);
    // Token by token (numpy reads the .npy files): every weight from this vanilla base with every head
    // at tau = 1 is the base, so its row is loss.npy - loss_base.npy; the stderr says where on the text.
    ExpectValidExport(dir, "--head-impacts --drift-all-is-base");
    EXPECT_NE(r.err.find("ssaviz: where on the text: L"), std::string::npos) << r.err;  // no temperatures: the drift's first
    EXPECT_NE(r.err.find(". every weight's drift (-"), std::string::npos) << r.err;
    // The drift's path token by token as a figure: a row a part from the embeddings up, then every
    // weight's; its scale ends at the 99th percentile of those rows' magnitudes (numpy's, from the
    // .npy: none, 16 heads, 8 blocks, the embeddings, then all at 26 and the path at 27 .. 35).
    EXPECT_FALSE(fs::exists(dir + "/head_impacts_tokens.svg")) << "every head already at tau = 1: no temperatures' parts";
    const std::string path_svg = ReadFile(dir + "/head_impacts_drift_tokens.svg");
    for (const char* label : {"the drift token by token", ">embeddings<", ">L0 attention<", ">L3 MLP<", ">every weight<", ">\xC2\xB7program<"})
        EXPECT_NE(path_svg.find(label), std::string::npos) << label;
    const std::string scale_log = Scratch("drift_tokens_scale.log");
    const std::string scale = std::string(SSAVIZ_PYTHON) + " -c \"import numpy as np, sys, math; r = np.load(sys.argv[1]); "
                              "m = np.sort(np.abs(np.concatenate([r[27:36].ravel(), r[26]]))); "
                              "print('%.3g, the 99th percentile (nearest rank) of |part|, largest %.3g' % (m[math.ceil(0.99 * m.size) - 1], m[-1]))\" " +
                              Quote(dir + "/head_impacts_drift_tokens.npy") + " >" + scale_log + " 2>&1";
    ASSERT_EQ(std::system(scale.c_str()), 0) << ReadFile(scale_log);
    std::string note = "scale \xC2\xB1" + ReadFile(scale_log);  // the scale's end, +-, as the figure writes it: "±"
    note.pop_back();
    EXPECT_NE(path_svg.find(note), std::string::npos) << note;
}

TEST_F(Cli, ExportRunWritesATimelineStepByStep) {
    const std::string dir = kOut + "/run_timeline", run = dir + "/run";
    fs::remove_all(dir);
    fs::create_directories(run);
    auto make = [&](const std::string& name, const char* layers, const char* seed) {
        Outcome r = Ssaviz({"init-random", "--out", dir + "/" + name, "--family", "pythia", "--layout", "lit", "--layers", layers, "--heads", "2",
                            "--embd", "32", "--query-form", "exp_exp,none", "--seed", seed});
        ASSERT_EQ(r.code, 0) << r.err;
    };
    make("a", "2", "1");
    make("b", "2", "2");
    make("other", "3", "3");
    for (const char* f : {"lit_config.json", "vocab.json", "merges.txt"}) fs::copy_file(dir + "/a/" + f, run + "/" + f);
    fs::copy_file(dir + "/a/lit_model.pth", run + "/iter-000100-ckpt.pth");
    fs::copy_file(dir + "/b/lit_model.pth", run + "/iter-001000-ckpt.pth");
    fs::copy_file(dir + "/other/lit_model.pth", run + "/iter-000500-ckpt.pth");
    std::ofstream(run + "/iter-000300-ckpt.pth") << ReadFile(dir + "/a/lit_model.pth").substr(0, 5000);
    const std::string text = "The cat sat on the mat and looked at the dog.";
    Outcome r = Ssaviz({"export", "--run", run, "--text", text, "--out", dir + "/out"});
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_NE(r.err.find("step 300 (iter-000300-ckpt.pth)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("step 500 (iter-000500-ckpt.pth)"), std::string::npos) << r.err;
    const json timeline = json::parse(ReadFile(dir + "/out/run.json"));
    ASSERT_EQ(timeline["steps"].size(), 2u);
    EXPECT_EQ(timeline["steps"][0]["step"], 100);
    EXPECT_EQ(timeline["steps"][1]["step"], 1000);
    EXPECT_EQ(timeline["failed"].size(), 2u);
    const std::string csv = ReadFile(dir + "/out/run.csv");
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 2 * 2 * 2);  // a header, then 2 steps x 2 layers x 2 heads
    // Each step's loss at tau = 1 beside SSA's (run.json's row), the loss curve's second line.
    EXPECT_EQ(timeline["steps"][1]["compared_with"], "tau = 1");
    const size_t row = csv.find("\nrun,1000,1,1,"), end = csv.find('\n', row + 1);
    ASSERT_NE(row, std::string::npos);
    const std::string line = csv.substr(row + 1, end - row - 1);
    EXPECT_NEAR(std::stod(line.substr(line.rfind(',') + 1)), timeline["steps"][1]["loss_compare"].get<double>(), 1e-6) << line;
    // Step 1000 against its checkpoint exported alone.
    r = Ssaviz({"export", "--model", run + "/iter-001000-ckpt.pth", "--text", text, "--out", dir + "/single", "--format", "json,npy"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json single = json::parse(ReadFile(dir + "/single/metrics.json"));
    for (const json& head : single["heads"]) {
        const int l = head["layer"], h = head["head"];
        EXPECT_EQ(timeline["steps"][1]["heads"]["entropy"][l][h], head["ssa"]["entropy"]);
        EXPECT_EQ(timeline["steps"][1]["heads"]["sink_mass"][l][h], head["ssa"]["sink_mass"]);
        EXPECT_EQ(timeline["steps"][1]["heads"]["js_divergence"][l][h], head["js_divergence"]);
        EXPECT_EQ(timeline["steps"][1]["heads"]["tau_q_mean"][l][h], head["ssa"]["tau_q"]["mean"]);
        EXPECT_EQ(timeline["steps"][1]["heads"]["tau_v_mean"][l][h], head["ssa"]["tau_v"]["mean"]);  // why a head's rows moved: its values' temperatures
    }
    // Each token's tau_q over the run, [S, L, H, T]: its last step's is the checkpoint's own tau_q.npy.
    const std::vector<int64_t> tau_shape = NpyShape(dir + "/out/tau_q.npy"), single_shape = NpyShape(dir + "/single/tau_q.npy");
    ASSERT_EQ(single_shape.size(), 3u);
    EXPECT_EQ(tau_shape, (std::vector<int64_t>{2, single_shape[0], single_shape[1], single_shape[2]}));
    const std::string tau_run = ReadFile(dir + "/out/tau_q.npy"), tau_single = ReadFile(dir + "/single/tau_q.npy");
    const size_t bytes = 4 * static_cast<size_t>(single_shape[0] * single_shape[1] * single_shape[2]);
    ASSERT_GT(tau_run.size(), bytes);
    EXPECT_EQ(tau_run.substr(tau_run.size() - bytes), tau_single.substr(tau_single.size() - bytes));
    // --steps: step 1000's whole export as step-001000/, what `export --model` wrote for it alone;
    // --compare-run: a second run beside it (here step 100's checkpoint at steps 100 and 1000), in
    // run.json, run.csv and the curves.
    const std::string second = dir + "/second";
    fs::create_directories(second);
    for (const char* f : {"lit_config.json", "vocab.json", "merges.txt"}) fs::copy_file(dir + "/a/" + f, second + "/" + f);
    fs::copy_file(dir + "/a/lit_model.pth", second + "/iter-000100-ckpt.pth");
    fs::copy_file(dir + "/a/lit_model.pth", second + "/iter-001000-ckpt.pth");
    r = Ssaviz({"export", "--run", run, "--compare-run", second, "--steps", "1000", "--text", text, "--out", dir + "/both", "--format", "json,png,svg"});
    EXPECT_EQ(r.code, 3) << r.err;  // the two broken steps of the first run
    const json steps_json = json::parse(ReadFile(dir + "/both/step-001000/metrics.json"));
    EXPECT_EQ(steps_json["heads"], single["heads"]);
    EXPECT_TRUE(fs::exists(dir + "/both/compare-run/step-001000/metrics.json"));
    EXPECT_EQ(NpyShape(dir + "/both/compare-run/tau_q.npy"), tau_shape);
    EXPECT_FALSE(fs::exists(dir + "/both/step-000100"));
    const json both = json::parse(ReadFile(dir + "/both/run.json"));
    ASSERT_EQ(both["compare_run"]["steps"].size(), 2u);
    EXPECT_EQ(both["compare_run"]["steps"][1]["heads"]["entropy"], timeline["steps"][0]["heads"]["entropy"]);  // the same checkpoint
    ASSERT_EQ(both["steps_to_sparsity"].size(), 2u);
    ASSERT_EQ(both["steps_to_sparsity"][0].size(), 2u);
    const std::string both_csv = ReadFile(dir + "/both/run.csv");
    EXPECT_EQ(both_csv.substr(0, both_csv.find('\n')), "run,step,layer,head,entropy,js_divergence,sink_mass,tau_q_mean,tau_v_mean,loss_mean,loss_compare_mean");
    EXPECT_NE(both_csv.find("\ncompare,1000,1,1,"), std::string::npos);
    for (const char* curve : {"entropy", "js_divergence", "sink_mass", "tau_q_mean", "tau_v_mean", "loss"})
        EXPECT_TRUE(fs::exists(dir + "/both/curves/" + curve + ".png")) << curve;
    // The legends name each run by its folder (they said "run" and "compare run"); a folder named "run" is the role itself.
    EXPECT_NE(ReadFile(dir + "/both/curves/entropy.svg").find(">second (compare run), all heads"), std::string::npos);
    EXPECT_NE(ReadFile(dir + "/both/curves/loss.svg").find(">second (compare run), loss"), std::string::npos);
    ExpectOneLineError(Ssaviz({"export", "--run", run, "--steps", "700", "--text", text, "--out", dir + "/x"}), 2, "step 700 is not one of the run's");
    ExpectOneLineError(Ssaviz({"export", "--run", run, "--steps", "1e3", "--text", text, "--out", dir + "/x"}), 2, "'1e3' is not a step number");
    for (const char* steps : {" 100", "+100", "100,"})  // strtoll took a space or a sign; a trailing comma was dropped
        ExpectOneLineError(Ssaviz({"export", "--run", run, "--steps", steps, "--text", text, "--out", dir + "/x"}), 2, "is not a step number");
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--steps", "all", "--text", text, "--out", dir + "/x"}), 2, "--steps goes with --run");
    // Heads the run's models do not have are refused with --steps or without (they were taken, unused).
    // So is a highlight's head (--highlight-scope 5,5 was taken and clamped in a step's figures).
    for (const auto& [flag, value, said] : {std::tuple<std::string, std::string, std::string>{"--layers", "99", "--layers: layer 99 is out of range (the model has 2)"},
                                            {"--highlight-scope", "1,5", "--highlight-scope: head 5 is out of range (the model has 2)"}})
        for (std::vector<std::string> steps : {std::vector<std::string>{}, std::vector<std::string>{"--steps", "1000"}}) {
            std::vector<std::string> args = {"export", "--run", run, flag, value, "--text", text, "--out", dir + "/x"};
            args.insert(args.end(), steps.begin(), steps.end());
            const Outcome r = Ssaviz(args);  // after the first step's line of progress: the model says what it has
            EXPECT_EQ(r.code, 2);
            const std::string line = "\nssaviz: " + said + "\n";
            EXPECT_TRUE(r.err.size() > line.size() && r.err.compare(r.err.size() - line.size(), line.size(), line) == 0) << r.err;
            EXPECT_FALSE(fs::exists(dir + "/x"));
        }
    {  // One token: no loss, one attention row; every curve was empty.
        const Outcome r = Ssaviz({"export", "--run", run, "--text", "The", "--out", dir + "/x"});
        EXPECT_EQ(r.code, 3) << r.err;
        EXPECT_NE(r.err.find("\nssaviz: a text of one token has no loss and one attention row"), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(dir + "/x"));
    }
    ExpectOneLineError(Ssaviz({"export", "--run", run, "--compare-run", dir + "/a", "--text", text, "--out", dir + "/x"}), 3,
                       "--compare-run: ");
    // Not a run: one line each.
    ExpectOneLineError(Ssaviz({"export", "--run", dir + "/a", "--text", text, "--out", dir + "/x"}), 3, "holds no checkpoints");
    ExpectOneLineError(Ssaviz({"export", "--run", dir + "/nothing", "--text", text, "--out", dir + "/x"}), 3, "nothing' does not exist");
    // A step past twelve digits (leading zeros aside) is named; it was passed over in silence.
    fs::create_directories(dir + "/long/checkpoint-00001234567890123");
    ExpectOneLineError(Ssaviz({"export", "--run", dir + "/long", "--text", text, "--out", dir + "/x"}), 3,
                       "'checkpoint-00001234567890123' names a step of more than 12 digits");
}

// Small Pythia-shaped lit-gpt checkpoints in DIR/NAME: "base" without a query form, any other
// name an SSA step of it (tau_q as the official attn.beta), each its own seed.
static void MakeStepsAndBase(const std::string& dir, const std::vector<std::string>& names = {"a", "b", "base"}) {
    int seed = 0;
    for (const std::string& name : names) {
        Outcome r = Ssaviz({"init-random", "--out", dir + "/" + name, "--family", "pythia", "--layout", "lit", "--layers", "2", "--heads", "2",
                            "--embd", "32", "--query-form", name == "base" ? "none" : "exp_exp,none", "--seed", std::to_string(++seed)});
        ASSERT_EQ(r.code, 0) << r.err;
    }
}

// A run against a fine-tune's base (--base DIR): each step's heads in run.json and run.csv gain
// js_total (all that fine-tuning had changed by that step) and js_drift (the other weights' part),
// each equal to that step's own metrics.json decomposition; their curves are drawn; the summary
// row has the base's side. Without a base the columns stay as they were (the test above).
TEST_F(Cli, ExportRunAgainstABaseFollowsTheDecomposition) {
    const std::string dir = kOut + "/run_base", run = dir + "/run";
    fs::remove_all(dir);
    fs::create_directories(run);
    ASSERT_NO_FATAL_FAILURE(MakeStepsAndBase(dir));
    for (const char* f : {"lit_config.json", "vocab.json", "merges.txt"}) fs::copy_file(dir + "/a/" + f, run + "/" + f);
    fs::copy_file(dir + "/a/lit_model.pth", run + "/iter-000100-ckpt.pth");
    fs::copy_file(dir + "/b/lit_model.pth", run + "/iter-000200-ckpt.pth");
    const std::string text = "The cat sat on the mat and looked at the dog.";
    Outcome r = Ssaviz({"export", "--run", run, "--base", dir + "/base", "--steps", "all", "--text", text, "--out", dir + "/out", "--format",
                        "json,png,svg"});
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string csv = ReadFile(dir + "/out/run.csv");
    EXPECT_EQ(csv.substr(0, csv.find('\n')), "run,step,layer,head,entropy,js_divergence,sink_mass,tau_q_mean,tau_v_mean,js_total,js_drift,loss_mean,loss_compare_mean,loss_base_mean");
    const json timeline = json::parse(ReadFile(dir + "/out/run.json"));
    ASSERT_EQ(timeline["steps"].size(), 2u);
    for (const json& step : timeline["steps"]) {
        const json m = json::parse(ReadFile(dir + "/out/" + step["name"].get<std::string>() + "/metrics.json"));
        ASSERT_TRUE(m.contains("decomposition")) << step["name"];
        for (int l = 0; l < 2; ++l)
            for (int h = 0; h < 2; ++h)
                for (const char* part : {"js_total", "js_drift"}) {
                    const double want = m["decomposition"][part][l][h], got = step["heads"][part][l][h];
                    EXPECT_NEAR(got, want, 1e-6) << step["name"] << " " << part << " L" << l << " H" << h;
                    EXPECT_GT(got, 0.0) << part;
                }
        EXPECT_TRUE(step["entropy_base"].is_number() && step["js_total"].is_number()) << step.dump();
    }
    EXPECT_NE(timeline["steps"][0]["heads"]["js_total"], timeline["steps"][1]["heads"]["js_total"]) << "each step its own change";
    EXPECT_EQ(r.err.find("differs in what is no weight"), std::string::npos) << r.err;
    // A base that differs in what is no weight (RoPE's base) is said once for the run, as a lone
    // export says it, and in run.json's rows (a run said nothing).
    fs::copy(dir + "/base", dir + "/base_rope");
    json lit = json::parse(ReadFile(dir + "/base_rope/lit_config.json"));
    lit["rope_base"] = 500000;
    std::ofstream(dir + "/base_rope/lit_config.json") << lit.dump();
    const Outcome rope = Ssaviz({"export", "--run", run, "--base", dir + "/base_rope", "--text", text, "--out", dir + "/out_rope", "--format", "json"});
    ASSERT_EQ(rope.code, 0) << rope.err;
    const size_t note = rope.err.find("ssaviz: note: ");
    ASSERT_NE(note, std::string::npos) << rope.err;
    EXPECT_NE(rope.err.find("RoPE base", note), std::string::npos) << rope.err;
    EXPECT_EQ(rope.err.find("ssaviz: note: ", note + 1), std::string::npos) << "once: " << rope.err;
    EXPECT_NE(json::parse(ReadFile(dir + "/out_rope/run.json"))["steps"][0].value("base_difference", "").find("RoPE base"), std::string::npos);
    // --config names the fine-tune's config: the base, which has its own, is read by its own (it
    // was read by the fine-tune's, its RoPE base unsaid).
    const Outcome given = Ssaviz({"export", "--run", run, "--config", dir + "/a/lit_config.json", "--base", dir + "/base_rope", "--text", text,
                                  "--out", dir + "/out_rope_config", "--format", "json"});
    ASSERT_EQ(given.code, 0) << given.err;
    EXPECT_NE(given.err.find("RoPE base", given.err.find("ssaviz: note: ")), std::string::npos) << given.err;
    // The CSV's rows carry the same numbers (%.9g).
    std::istringstream lines(csv);
    std::string line;
    std::getline(lines, line);
    int rows = 0;
    while (std::getline(lines, line)) {
        std::vector<std::string> cells;
        std::stringstream cut(line);
        for (std::string c; std::getline(cut, c, ',');) cells.push_back(c);
        ASSERT_EQ(cells.size(), 14u) << line;
        const int step = std::stoi(cells[1]) == 100 ? 0 : 1, l = std::stoi(cells[2]), h = std::stoi(cells[3]);
        EXPECT_NEAR(std::stod(cells[8]), timeline["steps"][step]["heads"]["tau_v_mean"][l][h].get<double>(), 1e-7) << line;
        EXPECT_NEAR(std::stod(cells[9]), timeline["steps"][step]["heads"]["js_total"][l][h].get<double>(), 1e-7) << line;
        EXPECT_NEAR(std::stod(cells[10]), timeline["steps"][step]["heads"]["js_drift"][l][h].get<double>(), 1e-7) << line;
        EXPECT_NEAR(std::stod(cells[12]), timeline["steps"][step]["loss_compare"].get<double>(), 1e-6) << line;  // tau = 1 beside a base too
        // The base's loss on the text, the loss curve's base line (it was in run.json only).
        EXPECT_NEAR(std::stod(cells[13]), timeline["steps"][step]["loss_base"].get<double>(), 1e-6) << line;
        EXPECT_NEAR(std::stod(cells[13]), json::parse(ReadFile(dir + "/out/step-000100/metrics.json"))["loss"]["base"].get<double>(), 1e-6) << line;
        ++rows;
    }
    EXPECT_EQ(rows, 2 * 2 * 2);
    for (const char* curve : {"js_total", "js_drift", "entropy", "loss"})
        EXPECT_GT(fs::exists(dir + "/out/curves/" + curve + ".png") ? fs::file_size(dir + "/out/curves/" + curve + ".png") : 0u, 1000u) << curve;
    // The loss curve draws the base's loss beside the run's (where the fine-tune passes its base).
    EXPECT_NE(ReadFile(dir + "/out/curves/loss.svg").find("base (where fine-tuning began)"), std::string::npos);
    EXPECT_EQ(ReadFile(dir + "/out/curves/entropy.svg").find("base (where"), std::string::npos) << "the loss's alone";

    // The same steps as train --from keeps them (OUT/run/ssa/checkpoint-N, the base at OUT/base):
    // --compare base finds that base, where it looked inside each step and beside it, found none
    // and asked for --base.
    const std::string ft = dir + "/ft";
    fs::create_directories(ft + "/run/ssa");
    fs::copy(dir + "/a", ft + "/run/ssa/checkpoint-100");
    fs::copy(dir + "/b", ft + "/run/ssa/checkpoint-200");
    fs::copy(dir + "/base", ft + "/base");
    // Another model of the base's shape in one step's own folder: the run's base is every step's
    // (that step took it as its own, silently).
    fs::copy(dir + "/a", ft + "/run/ssa/checkpoint-200/base");
    r = Ssaviz({"export", "--run", ft + "/run/ssa", "--compare", "base", "--text", text, "--out", dir + "/out_beside", "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json beside = json::parse(ReadFile(dir + "/out_beside/run.json"));
    ASSERT_EQ(beside["steps"].size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
        EXPECT_EQ(beside["steps"][k]["heads"]["js_total"], timeline["steps"][k]["heads"]["js_total"]) << k;
        EXPECT_EQ(beside["steps"][k]["loss_base"], timeline["steps"][k]["loss_base"]) << k;
        EXPECT_EQ(fs::path(beside["steps"][k]["base"].get<std::string>()).lexically_normal(), fs::path(ft + "/base").lexically_normal()) << k;
    }
    // A step that is the run's base itself (a link to it) is compared with itself, as the first step
    // may be (it stopped the whole run once the steps before it had run: "no base model beside").
    fs::create_directory_symlink(fs::absolute(ft + "/base"), ft + "/run/ssa/checkpoint-300");
    r = Ssaviz({"export", "--run", ft + "/run/ssa", "--compare", "base", "--text", text, "--out", dir + "/out_itself", "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json itself = json::parse(ReadFile(dir + "/out_itself/run.json"));
    ASSERT_EQ(itself["steps"].size(), 3u);
    EXPECT_EQ(itself["steps"][2]["step"], 300);
    EXPECT_NEAR(itself["steps"][2]["loss"].get<double>(), itself["steps"][2]["loss_base"].get<double>(), 1e-6) << "the base against itself";
    fs::remove(ft + "/run/ssa/checkpoint-300");
    // Without the run's base, a base inside a step's own folder is said to be passed over (the
    // message listed "a folder base/ inside ... its folder" as a place it looked in).
    fs::remove_all(ft + "/base");
    fs::remove_all(ft + "/run/ssa/checkpoint-100");
    r = Ssaviz({"export", "--run", ft + "/run/ssa", "--compare", "base", "--text", text, "--out", dir + "/out_inside", "--format", "json"});
    EXPECT_EQ(r.code, 2) << r.err;  // after the progress bar's line
    EXPECT_NE(r.err.find("checkpoint-200/base' inside this step's own folder is passed over): name it with --base DIR\n"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("inside or beside its folder"), std::string::npos) << r.err;
}

// A run with --lens: each step's loss read after each layer, on every side (SSA, tau = 1, the base),
// in run.json's rows and run_lens.csv, equal to that step's own lens_loss.npy (the mean over
// positions) and, after the last layer, to the step's loss; the chosen steps' exports hold the lens
// files `export --model CHECKPOINT --lens` writes, byte for byte; the lens curve names each layer.
// The official fine-tune scripts write their iter-*.pth alone: no lit_config.json, no tokenizer
// (both are the base's, in the checkpoint folder it started from). Without a base every step
// failed on the same missing config, said once a step; beside --base the steps read the base's
// config and tokenizer, said so, with the numbers of the same run given them in its folder. And a
// Pythia step without tokenizer files is refused, not read with GPT-2's (lit-gpt pads Pythia's
// vocabulary to 50,304, the size nanoGPT pads GPT-2's to).
TEST_F(Cli, ExportRunOfTheOfficialLayoutReadsWhatItLacksFromItsBase) {
    const std::string dir = kOut + "/run_official", run = dir + "/run", full = dir + "/full";
    fs::remove_all(dir);
    fs::create_directories(run);
    ASSERT_NO_FATAL_FAILURE(MakeStepsAndBase(dir));
    fs::copy_file(dir + "/a/lit_model.pth", run + "/iter-000100-ckpt.pth");
    fs::copy_file(dir + "/b/lit_model.pth", run + "/iter-000200-ckpt.pth");
    fs::create_directories(full);  // the same run with the config and tokenizer in its folder
    for (const char* f : {"iter-000100-ckpt.pth", "iter-000200-ckpt.pth"}) fs::copy_file(run + "/" + f, full + "/" + f);
    for (const char* f : {"lit_config.json", "vocab.json", "merges.txt"}) fs::copy_file(dir + "/base/" + f, full + "/" + f);
    const std::string text = "The cat sat on the mat and looked at the dog.";

    Outcome alone = Ssaviz({"export", "--run", run, "--text", text, "--out", dir + "/alone", "--format", "json"});
    EXPECT_EQ(alone.code, 3) << alone.err;
    size_t said = 0;
    for (size_t at = 0; (at = alone.err.find("needs its lit_config.json", at)) != std::string::npos; ++at) ++said;
    EXPECT_EQ(said, 1u) << alone.err;
    EXPECT_NE(alone.err.find("--base DIR reads its base's"), std::string::npos) << alone.err;
    EXPECT_NE(alone.err.find("run: 1 more step skipped for a reason said above"), std::string::npos) << alone.err;

    Outcome beside = Ssaviz({"export", "--run", run, "--base", dir + "/base", "--steps", "100", "--text", text, "--out", dir + "/beside", "--format", "json"});
    ASSERT_EQ(beside.code, 0) << beside.err;
    const json notes = json::parse(ReadFile(dir + "/beside/step-000100/metrics.json"))["model"]["notes"];
    bool tokenizer = false, config = false;
    for (const json& n : notes) {
        tokenizer = tokenizer || n.get<std::string>().rfind("tokenizer: the base's", 0) == 0;
        config = config || n.get<std::string>().rfind("config: the base's", 0) == 0;
    }
    EXPECT_TRUE(tokenizer && config) << notes.dump();
    Outcome given = Ssaviz({"export", "--run", full, "--base", dir + "/base", "--text", text, "--out", dir + "/given", "--format", "json"});
    ASSERT_EQ(given.code, 0) << given.err;
    const json a = json::parse(ReadFile(dir + "/beside/run.json")), b = json::parse(ReadFile(dir + "/given/run.json"));
    ASSERT_EQ(a["steps"].size(), 2u);
    for (size_t k = 0; k < 2; ++k) EXPECT_EQ(a["steps"][k]["heads"], b["steps"][k]["heads"]) << k;

    Outcome gpt2s = Ssaviz({"info", "--model", run + "/iter-000100-ckpt.pth", "--config", dir + "/base/lit_config.json"});
    EXPECT_EQ(gpt2s.code, 3) << gpt2s.err;
    EXPECT_NE(gpt2s.err.find("has no tokenizer files, and a pythia model's tokenizer is its own: pass --tokenizer DIR"), std::string::npos) << gpt2s.err;
}

// A base that gives none of what the fine-tune lacks is said in the fine-tune's refusal (it advised
// "--base DIR", which was given); a base without tokenizer files reads the fine-tune's (the
// comparison needs one tokenizer; a Pythia base was refused for having none). A model of one
// temperature ranks its heads with the other's part null (it read 0), and a head whose one
// temperature the what-ifs turned off has no part (it read 0).
TEST_F(Cli, ABaseThatGivesNothingIsSaidAndOneTemperatureRanksAlone) {
    const std::string dir = kOut + "/base_gives", text = "The cat sat on the mat and looked at the dog.";
    fs::remove_all(dir);
    ASSERT_NO_FATAL_FAILURE(MakeStepsAndBase(dir, {"ft", "base"}));
    fs::create_directories(dir + "/bare");
    fs::copy_file(dir + "/ft/lit_model.pth", dir + "/bare/lit_model.pth");
    fs::create_directories(dir + "/empty");
    for (const auto& [base, why] : {std::pair<std::string, std::string>{dir + "/empty", "gives none: "},
                                    {dir + "/nowhere", "gives none: "}}) {
        Outcome r = Ssaviz({"export", "--model", dir + "/bare", "--base", base, "--text", text, "--out", dir + "/out", "--format", "json"});
        EXPECT_EQ(r.code, 3) << r.err;
        EXPECT_NE(r.err.find("the base '" + base + "' " + why), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find("--base DIR reads"), std::string::npos) << "advised the flag given: " << r.err;
    }
    fs::copy(dir + "/base", dir + "/base_notok", fs::copy_options::recursive);
    for (const char* f : {"vocab.json", "merges.txt"}) fs::remove(dir + "/base_notok/" + f);
    Outcome beside = Ssaviz({"export", "--model", dir + "/bare", "--base", dir + "/base_notok", "--text", text, "--out", dir + "/out", "--format", "json"});
    EXPECT_EQ(beside.code, 3) << beside.err;
    EXPECT_NE(beside.err.find("the base '" + dir + "/base_notok' has no tokenizer files either"), std::string::npos) << beside.err;
    Outcome full = Ssaviz({"export", "--model", dir + "/ft", "--base", dir + "/base_notok", "--text", text, "--out", dir + "/full", "--format", "json"});
    ASSERT_EQ(full.code, 0) << full.err;

    // A model of tau_v alone (no query form); L0 H1's tau_v off by the what-ifs.
    Outcome made = Ssaviz({"init-random", "--out", dir + "/v", "--layers", "2", "--heads", "2", "--embd", "32", "--query-form", "none"});
    ASSERT_EQ(made.code, 0) << made.err;
    Outcome ranked = Ssaviz({"export", "--model", dir + "/v", "--rank-heads", "--ablate", "0:1=v", "--text", text, "--out", dir + "/ranked",
                             "--format", "json"});
    ASSERT_EQ(ranked.code, 0) << ranked.err;
    EXPECT_NE(ranked.err.find("the model has tau_v alone: the part above is tau_v's (part_tau_q null: not measured)"), std::string::npos) << ranked.err;
    const json impacts = json::parse(ReadFile(dir + "/ranked/head_impacts.json"));
    for (int l = 0; l < 2; ++l)
        for (int h = 0; h < 2; ++h) {
            EXPECT_TRUE(impacts["part_tau_q"][l][h].is_null()) << l << " " << h;
            if (l == 0 && h == 1) {
                EXPECT_TRUE(impacts["part"][l][h].is_null() && impacts["part_tau_v"][l][h].is_null()) << impacts.dump();
            } else {
                ASSERT_TRUE(impacts["part"][l][h].is_number()) << impacts.dump();
                EXPECT_EQ(impacts["part_tau_v"][l][h], impacts["part"][l][h]) << l << " " << h;
            }
        }
}

TEST_F(Cli, ExportRunWithTheLensFollowsEachLayersLoss) {
    const std::string dir = kOut + "/run_lens", run = dir + "/run";
    fs::remove_all(dir);
    fs::create_directories(run);
    for (const auto& [name, form, seed] : {std::tuple<const char*, const char*, const char*>{"a", "exp_exp,none", "4"}, {"b", "exp_exp,none", "5"},
                                           {"base", "none", "6"}}) {
        Outcome r = Ssaviz({"init-random", "--out", dir + "/" + name, "--family", "llama", "--layout", "lit", "--layers", "3", "--heads", "2",
                            "--embd", "32", "--query-form", form, "--seed", seed});
        ASSERT_EQ(r.code, 0) << r.err;
    }
    for (const fs::directory_entry& e : fs::directory_iterator(dir + "/a"))
        if (e.path().filename() != "lit_model.pth") fs::copy(e.path(), run / e.path().filename());
    fs::copy_file(dir + "/a/lit_model.pth", run + "/iter-000100-ckpt.pth");
    fs::copy_file(dir + "/b/lit_model.pth", run + "/iter-000200-ckpt.pth");
    const std::string text = "The cat sat on the mat and looked at the dog.";
    Outcome r = Ssaviz({"export", "--run", run, "--base", dir + "/base", "--lens", "--steps", "200", "--text", text, "--out", dir + "/out",
                        "--format", "json,npy,svg"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json timeline = json::parse(ReadFile(dir + "/out/run.json"));
    ASSERT_EQ(timeline["steps"].size(), 2u);
    const int L = 3;
    // Step 200 exported alone with --lens: the run's step-000200 holds the same lens files.
    r = Ssaviz({"export", "--model", run + "/iter-000200-ckpt.pth", "--base", dir + "/base", "--lens", "--text", text, "--out", dir + "/single",
                "--format", "json,npy"});
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* file : {"lens_loss.npy", "lens_loss_tau1.npy", "lens_loss_base.npy", "dla.npy", "lens_top.json"})
        EXPECT_EQ(ReadFile(dir + "/out/step-000200/" + file), ReadFile(dir + "/single/" + file)) << file;
    const std::string lens_csv = ReadFile(dir + "/out/run_lens.csv");
    std::string header = "run,step";
    for (const char* side : {"lens_loss", "lens_loss_compare", "lens_loss_base"})
        for (int l = 0; l <= L; ++l) header += std::string(",") + side + "_" + std::to_string(l);
    EXPECT_EQ(lens_csv.substr(0, lens_csv.find('\n')), header);
    EXPECT_EQ(std::count(lens_csv.begin(), lens_csv.end(), '\n'), 3);  // a header and two steps
    for (const json& step : timeline["steps"]) {
        const std::string name = "step " + std::to_string(step["step"].get<int>());
        // The loss after the last layer is the model's own, on each side.
        for (const auto& [side, loss] : {std::pair<std::string, std::string>{"lens_loss", "loss"}, {"lens_loss_compare", "loss_compare"},
                                         {"lens_loss_base", "loss_base"}}) {
            ASSERT_TRUE(step[side].is_array() && step[side].size() == L + 1u) << name << " " << side << ": " << step.dump();
            EXPECT_NEAR(step[side][L].get<double>(), step[loss].get<double>(), 1e-5) << name << " " << side;
        }
        EXPECT_NE(step["lens_loss"][0], step["lens_loss"][1]) << name << ": a layer moves the loss";
        // The row of run_lens.csv has the same numbers (%.9g).
        const size_t at = lens_csv.find("\nrun," + std::to_string(step["step"].get<int>()) + ",");
        ASSERT_NE(at, std::string::npos) << name;
        std::stringstream cut(lens_csv.substr(at + 1, lens_csv.find('\n', at + 1) - at - 1));
        std::vector<std::string> cells;
        for (std::string c; std::getline(cut, c, ',');) cells.push_back(c);
        ASSERT_EQ(cells.size(), 2u + 3 * (L + 1)) << name;
        for (int l = 0; l <= L; ++l) {
            EXPECT_NEAR(std::stod(cells[2 + l]), step["lens_loss"][l].get<double>(), 1e-6) << name << " layer " << l;
            EXPECT_NEAR(std::stod(cells[2 + 2 * (L + 1) + l]), step["lens_loss_base"][l].get<double>(), 1e-6) << name << " layer " << l;
        }
    }
    // Step 200's row against its own lens_loss.npy [L + 1, T - 1]: each layer's mean over the positions.
    const std::vector<int64_t> shape = NpyShape(dir + "/single/lens_loss.npy");
    ASSERT_EQ(shape, (std::vector<int64_t>{L + 1, shape.at(1)}));
    const std::vector<float> per_position = NpyFloats(dir + "/single/lens_loss.npy");
    for (int l = 0; l <= L; ++l) {
        double sum = 0;
        for (int64_t t = 0; t < shape[1]; ++t) sum += per_position[l * shape[1] + t];
        EXPECT_NEAR(timeline["steps"][1]["lens_loss"][l].get<double>(), sum / shape[1], 1e-5) << "layer " << l;
    }
    // The curve: each layer but the last as lines, the model's own on top (the embeddings' alone, far
    // above, squashed the layers': in run_lens.csv only).
    const std::string svg = ReadFile(dir + "/out/curves/lens_loss.svg");
    for (const char* name : {">after L0<", ">after L1<", ", its loss<"})
        EXPECT_NE(svg.find(name), std::string::npos) << name;
    EXPECT_EQ(svg.find(">after L2<"), std::string::npos) << "the last layer's is the model's own line";
    EXPECT_EQ(svg.find("embeddings"), std::string::npos);
    // SSA's less tau = 1's and less the base's, layer by layer: what the temperatures, and all of
    // fine-tuning, changed in what each layer predicts.
    EXPECT_NE(ReadFile(dir + "/out/curves/lens_loss_diff.svg").find("SSA - tau = 1"), std::string::npos);
    EXPECT_NE(ReadFile(dir + "/out/curves/lens_loss_diff_base.svg").find("SSA - base"), std::string::npos);
    EXPECT_NE(timeline["about"].get<std::string>().find("lens_loss[0 .. L]"), std::string::npos);
    // When each layer came to predict the text: the first step whose lens loss had fallen half of the
    // way from the first step's to the last's (null: no fall), recomputed here from the rows; on these
    // random steps and on the shipped graph run, whose loss falls.
    auto expect_halfway = [](const json& t, size_t layers) -> int {
        if (t["steps_to_lens_halfway"].size() != layers + 1) {
            ADD_FAILURE() << "steps_to_lens_halfway: " << t["steps_to_lens_halfway"];
            return -1;
        }
        const json& steps = t["steps"];
        int fell = 0;
        for (size_t l = 0; l <= layers; ++l) {
            const float first = steps.front()["lens_loss"][l].get<float>(), last = steps.back()["lens_loss"][l].get<float>();
            json want;
            for (const json& s : steps)
                if (first > last && s["lens_loss"][l].get<float>() <= first - 0.5f * (first - last)) {
                    want = s["step"];
                    break;
                }
            EXPECT_EQ(t["steps_to_lens_halfway"][l], want) << "layer " << l;
            fell += !want.is_null();
        }
        return fell;
    };
    expect_halfway(timeline, L);
    // The same checkpoints the other way round (b, then a twice): every layer's loss falls, half way by
    // step 200, before the last step.
    const std::string falling = dir + "/falling";
    fs::create_directories(falling);
    for (const fs::directory_entry& e : fs::directory_iterator(run))
        if (e.path().extension() != ".pth") fs::copy(e.path(), falling / e.path().filename());
    fs::copy_file(dir + "/b/lit_model.pth", falling + "/iter-000100-ckpt.pth");
    fs::copy_file(dir + "/a/lit_model.pth", falling + "/iter-000200-ckpt.pth");
    fs::copy_file(dir + "/a/lit_model.pth", falling + "/iter-000300-ckpt.pth");
    r = Ssaviz({"export", "--run", falling, "--lens", "--text", text, "--out", dir + "/falling_out", "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json fell = json::parse(ReadFile(dir + "/falling_out/run.json"));
    EXPECT_EQ(expect_halfway(fell, L), L + 1) << fell["steps_to_lens_halfway"];
    EXPECT_EQ(fell["steps_to_lens_halfway"][L], 200);
    // Without --lens nothing of it is written.
    r = Ssaviz({"export", "--run", run, "--text", text, "--out", dir + "/plain", "--format", "json,svg"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(fs::exists(dir + "/plain/run_lens.csv"));
    EXPECT_FALSE(fs::exists(dir + "/plain/curves/lens_loss.svg"));
    EXPECT_FALSE(json::parse(ReadFile(dir + "/plain/run.json"))["steps"][0].contains("lens_loss"));
    ExpectOneLineError(Ssaviz({"export", "--run", run, "--lens", "--ablate", "0:0", "--text", text, "--out", dir + "/x"}), 2,
                       "--lens runs the model as loaded: not with --ablate");
    // The attribution's position and target act on the --steps exports alone: without them, refused (they were ignored).
    ExpectOneLineError(Ssaviz({"export", "--run", run, "--lens", "--dla-target", "top", "--text", text, "--out", dir + "/x"}), 2,
                       "--dla-target picks what a step's attribution figures split, which only --steps exports hold: give --steps");
    EXPECT_FALSE(fs::exists(dir + "/x"));
    // A compare run that does not fit the base is named (it read "the model has 2 x 2", the user's run having 3).
    const std::string other = dir + "/other_run";
    Outcome made = Ssaviz({"init-random", "--out", dir + "/two", "--family", "llama", "--layout", "lit", "--layers", "2", "--heads", "2", "--embd",
                           "32", "--query-form", "exp_exp,none", "--seed", "7"});
    ASSERT_EQ(made.code, 0) << made.err;
    fs::create_directories(other);
    for (const fs::directory_entry& e : fs::directory_iterator(dir + "/two"))
        fs::copy(e.path(), e.path().filename() == "lit_model.pth" ? fs::path(other) / "iter-000100-ckpt.pth" : fs::path(other) / e.path().filename());
    r = Ssaviz({"export", "--run", run, "--compare-run", other, "--base", dir + "/base", "--text", text, "--out", dir + "/x"});
    EXPECT_EQ(r.code, 3);  // after the run's steps' progress, the line that stops it
    EXPECT_NE(r.err.find("\nssaviz: --compare-run step 100 (iter-000100-ckpt.pth): base '" + dir + "/base' has 3 layers x 2 heads; the model has 2 x 2\n"),
              std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir + "/x"));
}

TEST_F(Cli, ExportWritesEveryFigure) {
    const std::string out = kOut + "/figures";
    fs::remove_all(out);
    Outcome r = Ssaviz({"export", "--model", Small(), "--text", "The cat sat on the mat. The cat", "--out", out, "--format",
                        "json,npy,csv,png,svg,html", "--maps", "ssa,vanilla,diff", "--colormap", "magma", "--log", "--highlight", "entropy",
                        "--highlight-scope", "1,0"});
    ASSERT_EQ(r.code, 0) << r.err;
    const std::vector<std::string> files = FilesUnder(out);
    std::vector<std::string> expected = {"attention.npy", "attention_compare.npy", "highlight.html", "loss.npy", "loss_compare.npy",
                                         "metrics.json", "tau_q.npy", "tau_v.npy", "tokens.json"};
    for (const char* ext : {"png", "svg"}) {
        for (int l = 0; l < 2; ++l)
            for (int h = 0; h < 2; ++h)
                for (const char* suffix : {"", "_compare", "_diff", "_side_by_side"})
                    expected.push_back("heatmaps/L" + std::to_string(l) + "_H" + std::to_string(h) + suffix + "." + ext);
        for (const char* name : {"heads_grid", "heads_grid_compare", "heads_grid_diff", "highlight", "plots/dilution", "plots/tau_q_histogram",
                                 "plots/qk_spectrum", "plots/sink_mass"})
            expected.push_back(std::string(name) + "." + ext);
    }
    for (int l = 0; l < 2; ++l)
        for (int h = 0; h < 2; ++h)
            for (const char* suffix : {"", "_compare"}) expected.push_back("csv/L" + std::to_string(l) + "_H" + std::to_string(h) + suffix + ".csv");
    expected.push_back("heads.csv");  // every head's values, a row a head
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(files, expected);
    // 9 tokens: every cell of each small map is an SVG rectangle.
    ExpectValidExport(out, "--expect-cells 81");
    // The title names the model, head and map; the labels are the tokens.
    const std::string svg = ReadFile(out + "/heatmaps/L1_H0_compare.svg");
    EXPECT_NE(svg.find("layer 1, head 0"), std::string::npos);
    EXPECT_NE(svg.find("tau = 1 (SSA&#39;s weights)"), std::string::npos);
    EXPECT_NE(svg.find("\xC2\xB7mat"), std::string::npos);  // a leading space shows as a middle dot
    EXPECT_NE(ReadFile(out + "/highlight.html").find("entropy, L1 H0"), std::string::npos);
    // Side by side: the three maps' titles under one title naming the head and the comparison.
    const std::string beside = ReadFile(out + "/heatmaps/L1_H0_side_by_side.svg");
    for (const char* title : {"layer 1, head 0", "SSA vs tau = 1", ">SSA<", "tau = 1 (SSA&#39;s weights)", "SSA - tau = 1"})
        EXPECT_NE(beside.find(title), std::string::npos) << title;
}

TEST_F(Cli, ExportIsDeterministicAndSizeIsHonoured) {
    const std::string a = kOut + "/det_a", b = kOut + "/det_b";
    for (const std::string& out : {a, b}) {
        fs::remove_all(out);
        Outcome r = Ssaviz({"export", "--model", Small(), "--text", "one two three four five", "--out", out, "--format", "png,svg,json",
                            "--size", "300", "--layers", "0", "--heads", "1"});
        ASSERT_EQ(r.code, 0) << r.err;
    }
    const std::vector<std::string> files = FilesUnder(a);
    ASSERT_EQ(files, FilesUnder(b));
    for (const std::string& f : files) EXPECT_EQ(ReadFile(a + "/" + f), ReadFile(b + "/" + f)) << f << " differs between two runs";
    const auto [w, h] = PngSize(a + "/heatmaps/L0_H1.png");
    EXPECT_GT(w, 300);  // the map area plus labels and colour bar
    EXPECT_GT(h, 300);
    EXPECT_LT(w, 700);
    EXPECT_FALSE(fs::exists(a + "/heatmaps/L0_H0.png"));  // --layers 0 --heads 1 only
    // --png-scale 2: every PNG twice as wide and tall (--size scaled heatmaps only), the SVGs the same.
    const std::string x2 = kOut + "/det_x2";
    fs::remove_all(x2);
    Outcome r = Ssaviz({"export", "--model", Small(), "--text", "one two three four five", "--out", x2, "--format", "png,svg,json", "--size", "300",
                        "--layers", "0", "--heads", "1", "--png-scale", "2"});
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_EQ(FilesUnder(x2), files);
    int pngs = 0;
    for (const std::string& f : files) {
        if (f.size() > 4 && f.substr(f.size() - 4) == ".svg") {
            EXPECT_EQ(ReadFile(x2 + "/" + f), ReadFile(a + "/" + f)) << f;
        }
        if (f.size() < 4 || f.substr(f.size() - 4) != ".png") continue;
        const auto [w1, h1] = PngSize(a + "/" + f);
        EXPECT_EQ(PngSize(x2 + "/" + f), std::make_pair(2 * w1, 2 * h1)) << f;
        ++pngs;
    }
    EXPECT_GE(pngs, 4) << "heatmaps, the heads grid, the highlight and plots";

    // --no-titles --text-scale 2, for a paper's column: no figure draws its title (each SVG's
    // <title> keeps it), every text twice its size; the data are the same.
    const std::string paper = kOut + "/det_paper";
    fs::remove_all(paper);
    r = Ssaviz({"export", "--model", Small(), "--text", "one two three four five", "--out", paper, "--format", "png,svg,json", "--size", "300",
                "--layers", "0", "--heads", "1", "--no-titles", "--text-scale", "2"});
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_EQ(FilesUnder(paper), files);
    const std::string svg = ReadFile(paper + "/heatmaps/L0_H1.svg"), plain = ReadFile(a + "/heatmaps/L0_H1.svg");
    auto count = [](const std::string& text, const std::string& what) {
        size_t n = 0;
        for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
        return n;
    };
    EXPECT_EQ(count(plain, "layer 0, head 1"), 2u) << "drawn, and the SVG's <title>";
    EXPECT_EQ(count(svg, "layer 0, head 1"), 1u) << "the SVG's <title> only";
    EXPECT_NE(svg.find("font-size=\"24"), std::string::npos) << "the labels' 12 px at twice the size";
    EXPECT_EQ(svg.find("font-size=\"12\""), std::string::npos);
    EXPECT_EQ(ReadFile(paper + "/metrics.json"), ReadFile(a + "/metrics.json"));
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "hi", "--out", paper + "_bad", "--text-scale", "4"}), 2,
                       "--text-scale '4' is not a number from 0.5 to 3");
}

TEST_F(Cli, ExportOptionErrorsNameTheFlag) {
    const std::vector<std::string> base = {"export", "--model", Small(), "--text", "hi there", "--out", kOut + "/x"};
    auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = base;
        args.insert(args.end(), extra.begin(), extra.end());
        return Ssaviz(args);
    };
    ExpectOneLineError(with({"--maps", "ssa,sparse"}), 2, "'sparse'");
    // --flag=value as --flag value (it was "unknown argument"); a switch takes none.
    ExpectOneLineError(with({"--maps=ssa,sparse"}), 2, "'sparse'");
    ExpectOneLineError(with({"--lens=yes"}), 2, "--lens takes no value ('--lens=yes')");
    ExpectOneLineError(with({"--format=json", "--layers=9"}), 2, "--layers: layer 9 is out of range");
    fs::remove_all(kOut + "/x");
    EXPECT_EQ(with({"--format=json", "--layers=0", "--heads=1"}).code, 0);
    EXPECT_TRUE(fs::is_regular_file(kOut + "/x/metrics.json"));
    fs::remove_all(kOut + "/x");
    ExpectOneLineError(with({"--maps", "ssa,tau1"}), 2, "'tau1' is not one of ssa, compare, diff, base, base_diff (the comparison's map is 'compare', tau = 1's or a twin's)");
    ExpectOneLineError(with({"--compare", ""}), 2, "--compare is empty: give vanilla, local, unedited, base or a twin's folder");  // an unset $TWIN was tau = 1
    ExpectOneLineError(with({"--base", ""}), 2, "--base is empty: give a path");
    ExpectOneLineError(with({"--config", ""}), 2, "--config needs a file, not an empty path");  // they were taken as not given
    ExpectOneLineError(with({"--tokenizer", ""}), 2, "--tokenizer needs a folder, not an empty path");
    ExpectOneLineError(Ssaviz({"--session", "", "--screenshot", kOut + "/x.png"}), 2, "--session needs a session file, not an empty path");
    ExpectOneLineError(with({"--colormap", "jet"}), 2, "jet");
    // The diverging map is the differences' own: an attention map is not drawn on it.
    ExpectOneLineError(with({"--colormap", "diverging"}), 2, "--colormap 'diverging' is not one of viridis, magma");
    ExpectOneLineError(with({"--size", "5"}), 2, "--size");
    ExpectOneLineError(with({"--size", "8192", "--png-scale", "2", "--format", "png", "--maps", "ssa"}), 2,
                       "--size 8192 at --png-scale 2 draws heatmaps past the most a figure may be (16384 pixels a side, 128 M pixels): a "
                       "smaller --size or --png-scale");
    ExpectOneLineError(with({"--size", "2048", "--png-scale", "4", "--format", "png"}), 2,  // SSA | comparison | difference: three maps wide
                       "--size 2048 at --png-scale 4 draws side-by-side heatmaps past the most a figure may be");
    ExpectOneLineError(with({"--size", "5800", "--png-scale", "2", "--format", "png", "--maps", "ssa"}), 2,  // 12 k a side, past 128 M pixels
                       "--size 5800 at --png-scale 2 draws heatmaps past the most a figure may be");
    for (const char* scale : {"0", "5", "1.5", "x"})
        ExpectOneLineError(with({"--png-scale", scale}), 2, "--png-scale '" + std::string(scale) + "' is not a PNG scale: a whole number, 1 to 4");
    ExpectOneLineError(with({"--highlight", "tau"}), 2, "--highlight 'tau'");
    ExpectOneLineError(with({"--highlight-scope", "7"}), 2, "layer 7");
    ExpectOneLineError(with({"--highlight-scope", "0,9"}), 2, "head 9");
    ExpectOneLineError(with({"--highlight-scope", "x"}), 2, "--highlight-scope 'x'");
    ExpectOneLineError(with({"--temperature-scale", "layer"}), 2, "--temperature-scale 'layer' is not one of model, head");
    ExpectOneLineError(with({"--batch"}), 2, "--batch needs --text-file");
    // A loss colouring of the comparison where it has no loss (the layer-local one): it drew an
    // empty highlight and exited 0.
    for (const char* highlight : {"loss_compare", "loss_delta"})
        ExpectOneLineError(with({"--compare", "local", "--format", "png", "--highlight", highlight}), 2,
                           std::string("--highlight ") + highlight + " needs the comparison's loss, which the tau = 1 local comparison does not give");
    EXPECT_FALSE(fs::exists(kOut + "/x/highlight.png"));
    // Nor does metrics.json name a loss file of it (its note named loss_compare.npy, not written).
    fs::remove_all(kOut + "/local");
    ASSERT_EQ(Ssaviz({"export", "--model", Small(), "--text", "hi there", "--out", kOut + "/local", "--compare", "local", "--format", "json,npy"}).code, 0);
    EXPECT_FALSE(fs::exists(kOut + "/local/loss_compare.npy"));
    const std::string notes = json::parse(ReadFile(kOut + "/local/metrics.json"))["loss"]["notes"];
    EXPECT_EQ(notes.find("loss_compare"), std::string::npos) << notes;
    EXPECT_NE(notes.find("Per token: loss.npy"), std::string::npos) << notes;
}

// A heatmap sized by a long text's tokens (a pixel a token past 720) at --png-scale is refused once
// the text is tokenised, before the model runs (it was refused as drawn, exit 1, after the analysis).
TEST_F(Cli, ALongTextsHeatmapsAtAPngScaleAreRefusedBeforeTheModelRuns) {
    const std::string dir = kOut + "/long_png_scale";
    fs::remove_all(dir);
    ASSERT_EQ(Ssaviz({"init-random", "--out", dir + "/model", "--layers", "1", "--heads", "1", "--embd", "16", "--positions", "4096"}).code, 0);
    std::string text;
    for (int i = 0; i < 3000; ++i) text += " a";
    std::ofstream(dir + "/text.txt") << text;
    const Outcome r = Ssaviz({"export", "--model", dir + "/model", "--text-file", dir + "/text.txt", "--out", dir + "/out", "--format", "png",
                              "--png-scale", "4", "--maps", "ssa"});
    ExpectOneLineError(r, 2, "a text of 3000 tokens at --png-scale 4 draws heatmaps of 3000 pixels a side past the most a figure may be");
    EXPECT_FALSE(fs::exists(dir + "/out/heatmaps"));
    // The highlight, whose height is the text's, likewise, SVG too (it failed after the analysis,
    // exit 1, naming only --png-scale); at --text-scale 1 it fits.
    std::string words;
    for (int i = 0; i < 3000; ++i) words += " hello";
    std::ofstream(dir + "/text.txt") << words;
    const Outcome svg = Ssaviz({"export", "--model", dir + "/model", "--text-file", dir + "/text.txt", "--out", dir + "/out", "--format", "svg",
                                "--size", "64", "--text-scale", "3"});
    ExpectOneLineError(svg, 2, "a text of 3000 tokens at --text-scale 3 draws a highlight ");
    EXPECT_NE(svg.err.find(" pixels tall, past the most a figure may be"), std::string::npos) << svg.err;
    EXPECT_NE(svg.err.find("a smaller --text-scale, a shorter text"), std::string::npos) << svg.err;
    EXPECT_FALSE(fs::exists(dir + "/out"));
    ASSERT_EQ(Ssaviz({"export", "--model", dir + "/model", "--text-file", dir + "/text.txt", "--out", dir + "/out", "--format", "svg", "--size", "64",
                      "--maps", "ssa", "--layers", "0"})
                  .code,
              0);
    EXPECT_TRUE(fs::exists(dir + "/out/highlight.svg"));
}

TEST_F(Cli, BatchOfJsonLinesWritesAFolderPerTextAndASummary) {
    const std::string out = kOut + "/batch_jsonl";
    fs::remove_all(out);
    const std::string file = Scratch("texts.jsonl");
    std::ofstream(file) << "{\"name\": \"cats\", \"text\": \"The cat sat on the mat.\"}\n"
                        << "\n"
                        << "{\"name\": \"dogs/../x\", \"text\": \"A dog barked twice at night.\"}\n"
                        << "{\"name\": \"cats\", \"text\": \"Cats again, a second one.\"}\n"
                        << "{\"name\": \"empty\", \"text\": \"\"}\n";
    Outcome r = Ssaviz({"export", "--model", Small(), "--text-file", file, "--batch", "--out", out, "--format", "json,npy,png"});
    EXPECT_EQ(r.code, 3) << r.err;  // one text was empty: reported, the rest written
    EXPECT_NE(r.err.find("line 5 (empty): text is empty"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("batch [########################] 4/4"), std::string::npos) << r.err;  // the progress bar reached the end
    for (const char* dir : {"cats", "dogs_.._x", "cats_2"}) {
        EXPECT_TRUE(fs::exists(out + "/" + dir + "/metrics.json")) << dir;
        EXPECT_TRUE(fs::exists(out + "/" + dir + "/heatmaps/L0_H0.png")) << dir;
    }
    EXPECT_FALSE(fs::exists(out + "/empty"));
    json summary = json::parse(ReadFile(out + "/summary.json"));
    ASSERT_EQ(summary["texts"].size(), 3u);
    ASSERT_EQ(summary["failed"].size(), 1u);
    EXPECT_EQ(summary["failed"][0]["line"], 5);
    // The summary's numbers are the per-text metrics.json's, averaged over heads.
    json m = json::parse(ReadFile(out + "/cats/metrics.json"));
    double mean = 0;
    for (const json& h : m["heads"]) mean += h["ssa"]["entropy"].get<double>() / m["heads"].size();
    EXPECT_NEAR(summary["texts"][0]["entropy"].get<double>(), mean, 1e-6);
    EXPECT_EQ(summary["texts"][0]["n_tokens"], m["n_tokens"]);
    const std::string csv = ReadFile(out + "/summary.csv");
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4) << csv;  // header + 3 texts
    EXPECT_EQ(csv.rfind("name,n_tokens,entropy,", 0), 0u) << csv;
    EXPECT_NE(r.out.find("cats_2"), std::string::npos) << r.out;  // the table on stdout
}

TEST_F(Cli, BatchOfPlainLines) {
    const std::string out = kOut + "/batch_lines";
    fs::remove_all(out);
    const std::string file = Scratch("texts.txt");
    std::ofstream(file) << "First text here.\r\nSecond text, a little longer than the first.\n\n   \nThird.\n";
    Outcome r = Ssaviz({"export", "--model", Small(), "--text-file", file, "--batch", "--out", out, "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* dir : {"text_0001", "text_0002", "text_0003"}) EXPECT_TRUE(fs::exists(out + "/" + dir + "/tokens.json")) << dir;
    EXPECT_EQ(json::parse(ReadFile(out + "/text_0003/tokens.json"))["text"], "Third.");
    std::ofstream(Scratch("bad.jsonl")) << "{\"text\": \"ok\"}\n{\"name\": 3, \"text\": \"x\"}\n";
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text-file", Scratch("bad.jsonl"), "--batch", "--out", out}), 3,
                       "bad.jsonl:2: \"name\" must be a string");
    std::ofstream(Scratch("blank.txt")) << "\n  \n";
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text-file", Scratch("blank.txt"), "--batch", "--out", out}), 3, "no texts");
}

// A text of the model's full context (1,024 tokens on the build's random long-context model) in every format.
TEST(CliRandomModel, ExportOf1024TokensInEveryFormatIsValid) {
    const std::string out = kOut + "/export_1024";
    fs::remove_all(out);
    std::string text;
    while (text.size() < 9000)
        text += "The keeper of the lighthouse wrote that the sea was calm, that the wind came from the west, and that 17 ships passed. ";
    std::ofstream(Scratch("long.txt")) << text;
    const std::string random_model = (fs::path(SSAVIZ_BINARY).parent_path() / "models" / "default").string();
    Outcome r = Ssaviz({"export", "--model", random_model, "--text-file", Scratch("long.txt"), "--truncate", "--out", out, "--format", "json,npy,csv,png,svg,html",
                        "--maps", "ssa,vanilla,diff", "--layers", "0,3", "--heads", "1"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(ReadFile(out + "/tokens.json"))["n_tokens"], 1024);
    EXPECT_EQ(NpyShape(out + "/attention.npy"), (std::vector<int64_t>{4, 4, 1024, 1024}));
    const auto [w, h] = PngSize(out + "/heatmaps/L0_H1.png");
    EXPECT_GE(w, 1024);  // one pixel per token at least
    EXPECT_GE(h, 1024);
    ExpectValidExport(out);
}

}  // namespace
