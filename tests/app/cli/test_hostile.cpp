// Hostile input through the real binary (issues "Hostile input, round two" and "round three"):
// files that are not files, texts far past the context, tokenizer files present but broken, exports
// into folders holding links or in the way, sizes that cannot be built; then figure sizes, train's
// writes and counts, what-ifs and twins that give wrong results, numbers that wrap, messages and
// limits. Each is a one-line error with the documented exit code, or a result that leaves nothing
// of the user's lost.
#include <cstdio>
#include <cstring>

#include <sys/stat.h>
#include <unistd.h>

#include "cli_harness.h"

namespace {

using namespace cli_test;

std::string Fresh(const std::string& name) {
    const std::string dir = kOut + "/hostile/" + name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

std::vector<std::string> FilesUnder(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir)) out.push_back(fs::relative(e.path(), dir).string());
    std::sort(out.begin(), out.end());
    return out;
}

TEST_F(Cli, ReadsOnlyRegularFilesOfBoundedSize) {
    const std::string dir = Fresh("reads");
    // A device, a FIFO (no writer: reading it would wait forever) and a folder are refused at once.
    ExpectOneLineError(Ssaviz({"tokenize", "--model", Small(), "--text-file", "/dev/zero"}), 3, "is a device, not a file");
    ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
    ExpectOneLineError(Ssaviz({"tokenize", "--model", Small(), "--text-file", dir + "/fifo"}), 3, "is a FIFO, not a file");
    ExpectOneLineError(Ssaviz({"tokenize", "--model", Small(), "--text-file", dir}), 3, "is a folder, not a file");
    ExpectOneLineError(Ssaviz({"--session", "/dev/zero"}), 3, "is a device, not a file");
    ExpectOneLineError(Ssaviz({"info", "--model", "/dev/zero"}), 3, "'/dev/zero' is not a model: neither a folder nor a weights file");
    ExpectOneLineError(Ssaviz({"--session", dir + "/fifo"}), 3, "is a FIFO, not a file");
    // Larger than a text may be (64 MB): refused from its size, not read.
    {
        std::ofstream(dir + "/huge.txt");
    }
    fs::resize_file(dir + "/huge.txt", (size_t{64} << 20) + 1);
    ExpectOneLineError(Ssaviz({"tokenize", "--model", Small(), "--text-file", dir + "/huge.txt"}), 3, "is 67108865 bytes, more than the 67108864 bytes such a file may be");
}

TEST_F(Cli, TruncatingALongTextEncodesOnlyWhatItKeeps) {
    const std::string dir = Fresh("long");
    // 8 MB of prose: the 16-token context is taken from its start, and the ids are those of
    // encoding the start alone (a prefix cut far past them cannot change them).
    std::string text;
    while (text.size() < (size_t{8} << 20)) text += "The quick brown fox jumps over the lazy dog, again and again. ";
    std::ofstream(dir + "/long.txt") << text;
    Outcome r = Ssaviz({"tokenize", "--model", Small(), "--text-file", dir + "/long.txt", "--truncate", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json got = json::parse(r.out);
    Outcome prefix = Ssaviz({"tokenize", "--model", Small(), "--text", text.substr(0, 200), "--truncate", "--json"});
    ASSERT_EQ(prefix.code, 0) << prefix.err;
    EXPECT_EQ(got["ids"], json::parse(prefix.out)["ids"]);
    EXPECT_EQ(got["ids"].size(), 16u);
    // Without --truncate it is refused, without counting all of it.
    ExpectOneLineError(Ssaviz({"tokenize", "--model", Small(), "--text-file", dir + "/long.txt"}), 3,
                       "text is more than 16 tokens, longer than the model's context of 16");
}

TEST_F(Cli, BrokenTokenizerFilesAreErrorsNotReplacedByGpt2) {
    // The small model has GPT-2's vocab_size: without any tokenizer file it gets GPT-2's, and says so.
    const std::string bare = Fresh("bare");
    fs::copy(Small() + "/config.json", bare + "/config.json");
    fs::copy(Small() + "/model.safetensors", bare + "/model.safetensors");
    Outcome r = Ssaviz({"info", "--model", bare});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("from GPT-2's, bundled: the folder has no tokenizer files"), std::string::npos) << r.out;
    r = Ssaviz({"info", "--model", Small()});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("from vocab.json + merges.txt"), std::string::npos) << r.out;

    // Present but broken: the error names the file, whatever is wrong with it.
    struct Case {
        const char* file;
        std::string content;
        const char* error;
    };
    const std::vector<Case> cases = {
        {"vocab.json", "[1, 2, 3]", "vocab.json: not a JSON object"},
        {"vocab.json", R"({"a": 0, "b": 0})", "id 0 is used twice"},
        {"vocab.json", R"({"a": "zero"})", "vocab.json: the id of token 'a'"},
        {"merges.txt", "#version: 0.2\na\n", "merges.txt line 2: expected two symbols"},
        {"tokenizer.json", R"({"model": {"type": "WordPiece", "vocab": {}}})", "model type 'WordPiece' is not supported"},
        {"tokenizer.json", R"({"model": {"type": "Unigram", "vocab": []}})", "model type 'Unigram' is not supported"},
    };
    for (const Case& c : cases) {
        const std::string dir = Fresh("tok");
        fs::copy(bare, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
        if (std::string(c.file) != "tokenizer.json") {
            fs::copy(Small() + "/vocab.json", dir + "/vocab.json");
            fs::copy(Small() + "/merges.txt", dir + "/merges.txt");
        }
        std::ofstream(dir + "/" + c.file, std::ios::trunc) << c.content;
        ExpectOneLineError(Ssaviz({"info", "--model", dir}), 3, c.error);
    }
    // A tokenizer file that is a folder, or only half of the GPT-2 pair, is not "no tokenizer" either.
    const std::string dir = Fresh("tok_folder");
    fs::copy(bare, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    fs::create_directory(dir + "/tokenizer.json");
    ExpectOneLineError(Ssaviz({"info", "--model", dir}), 3, "tokenizer.json' is a folder, not a file");
    fs::remove(dir + "/tokenizer.json");
    fs::copy(Small() + "/merges.txt", dir + "/merges.txt");
    ExpectOneLineError(Ssaviz({"info", "--model", dir}), 3, "merges.txt but no vocab.json");
}

TEST_F(Cli, ExportNeverWritesThroughLinksInsideItsFolder) {
    const std::string dir = Fresh("links"), out = dir + "/out", outside = dir + "/outside";
    fs::create_directories(out);
    fs::create_directories(outside);
    std::ofstream(outside + "/victim.json") << "precious";
    // A link where a file goes is replaced by the file; what it pointed to is untouched.
    fs::create_symlink(outside + "/victim.json", out + "/metrics.json");
    Outcome r = Ssaviz({"export", "--model", Small(), "--text", "hello world", "--out", out, "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(ReadFile(outside + "/victim.json"), "precious");
    EXPECT_FALSE(fs::is_symlink(out + "/metrics.json"));
    EXPECT_TRUE(json::accept(ReadFile(out + "/metrics.json")));
    // A link where a folder goes is refused before the model runs (a usage error: the model ran first).
    fs::create_symlink(outside, out + "/csv");
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "hello world", "--out", out, "--format", "csv"}), 2,
                       "--out: '" + out + "/csv' is a symbolic link: ssaviz does not write through links inside --out");
    fs::create_symlink(outside, out + "/heatmaps");
    Outcome linked = Ssaviz({"export", "--model", Small(), "--text", "hello world", "--out", out, "--format", "png"});
    ExpectOneLineError(linked, 2, "heatmaps' is a symbolic link");
    EXPECT_EQ(linked.err.find("forward"), std::string::npos) << "refused only after the model ran: " << linked.err;
    // Where the export makes no such folder, the link is not in its way.
    ASSERT_EQ(Ssaviz({"export", "--model", Small(), "--text", "hello world", "--out", out, "--format", "npy"}).code, 0);
    EXPECT_EQ(FilesUnder(outside), (std::vector<std::string>{"victim.json"}));
}

TEST_F(Cli, AFailedExportLeavesTheFolderAsItWas) {
    const std::string out = Fresh("atomic");
    std::ofstream(out + "/tokens.json") << "old tokens";
    // The export cannot put the comparison's map in place (a folder is there): refused before the
    // model runs (it was found once every file was written, then none renamed), nothing written.
    const std::string map = out + "/attention_compare.npy";
    fs::create_directories(map);
    Outcome r = Ssaviz({"export", "--model", Small(), "--text", "hello world", "--out", out, "--format", "json,npy"});
    ExpectOneLineError(r, 2, "attention_compare.npy' is a folder where ssaviz writes a file");
    EXPECT_EQ(ReadFile(out + "/tokens.json"), "old tokens");
    EXPECT_EQ(FilesUnder(out), (std::vector<std::string>{"attention_compare.npy", "tokens.json"}));  // no temporary files left
    // A FIFO (or a device) where a file goes is not replaced either: the user's, named, kept.
    fs::remove(map);
    ASSERT_EQ(::mkfifo(map.c_str(), 0600), 0);
    r = Ssaviz({"export", "--model", Small(), "--text", "hello world", "--out", out, "--format", "json,npy"});
    ExpectOneLineError(r, 2, "attention_compare.npy' is a FIFO, not a file: ssaviz does not replace it");
    EXPECT_TRUE(fs::is_fifo(map));
    EXPECT_EQ(ReadFile(out + "/tokens.json"), "old tokens");
}

TEST_F(Cli, ExportFolderIsCheckedBeforeTheModelRuns) {
    const std::string dir = Fresh("out_checks");
    std::ofstream(dir + "/a_file") << "x";
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "hi", "--out", dir + "/a_file"}), 2,
                       "is a file, not a folder");
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "hi", "--out", dir + "/a_file/sub"}), 2,
                       "a_file' is not a folder");
    // Also before the model is opened: a missing model is not what is reported.
    ExpectOneLineError(Ssaviz({"export", "--model", dir + "/no-model", "--text", "hi", "--out", dir + "/a_file"}), 2,
                       "is a file, not a folder");
    // A FIFO is named as one, and a link to nothing as one (mkdir's "File exists" was all it said).
    ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "hi", "--out", dir + "/fifo"}), 2, "fifo' is a FIFO, not a folder");
    fs::create_symlink(dir + "/nowhere", dir + "/dangling");
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "hi", "--out", dir + "/dangling"}), 2,
                       "dangling' is a symbolic link to nothing: name the folder itself, or make the one it names");
    // --export-to likewise, before the window opens (it failed after the model ran, exit 1); no display needed.
    std::ofstream(dir + "/session.json") << R"({"ssaviz_session": 1, "model": ""})";
    ExpectOneLineError(Ssaviz({"--session", dir + "/session.json", "--export-to", dir + "/a_file"}), 2, "--export-to: ");
    EXPECT_FALSE(fs::exists(dir + "/nowhere"));
    // Inside the session's run it would become one of its steps (checkpoint-999 with no weights).
    const std::string run = std::string(SSAVIZ_SOURCE_DIR) + "/assets/models/graph-run/ssa";
    std::ofstream(dir + "/run_session.json") << json{{"ssaviz_session", 1}, {"run", run}}.dump();
    ExpectOneLineError(Ssaviz({"--session", dir + "/run_session.json", "--export-to", run + "/checkpoint-999"}), 2,
                       "/checkpoint-999' is inside the run folder");
    EXPECT_FALSE(fs::exists(run + "/checkpoint-999"));
    // --rank-heads's files: a FIFO or a folder where one goes is refused before the model runs (a
    // missing model is not what is reported), not after the whole ranking (exit 1).
    fs::create_directories(dir + "/ranked/head_impacts.json");
    ExpectOneLineError(Ssaviz({"export", "--model", dir + "/no-model", "--text", "hi there", "--out", dir + "/ranked", "--rank-heads"}), 2,
                       "head_impacts.json' is a folder where ssaviz writes a file");
    fs::remove(dir + "/ranked/head_impacts.json");
    ASSERT_EQ(::mkfifo((dir + "/ranked/head_impacts.png").c_str(), 0600), 0);
    ExpectOneLineError(Ssaviz({"export", "--model", dir + "/no-model", "--text", "hi there", "--out", dir + "/ranked", "--rank-heads", "--format",
                               "json,png"}),
                       2, "head_impacts.png' is a FIFO, not a file");
    // Without png, the FIFO is not in the way.
    Outcome r = Ssaviz({"export", "--model", Small(), "--text", "hi there", "--out", dir + "/ranked", "--rank-heads", "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    // Every export's own files and --lens's likewise (they were refused after every forward pass, exit 1).
    ASSERT_EQ(::mkfifo((dir + "/ranked/dla.npy").c_str(), 0600), 0);
    ExpectOneLineError(Ssaviz({"export", "--model", dir + "/no-model", "--text", "hi there", "--out", dir + "/ranked", "--lens", "--format", "json"}),
                       2, "ranked/dla.npy' is a FIFO, not a file");
    fs::remove(dir + "/ranked/metrics.json");
    fs::create_directories(dir + "/ranked/metrics.json");
    ExpectOneLineError(Ssaviz({"export", "--model", dir + "/no-model", "--text", "hi there", "--out", dir + "/ranked", "--format", "json"}), 2,
                       "ranked/metrics.json' is a folder where ssaviz writes a file");
    // The other sides' files and every figure likewise (found after the whole analysis, lens and
    // ranking, exit 1): a base's lens array, the heads grid, a heatmap in heatmaps/.
    const std::string sides = Fresh("out_sides");
    ASSERT_EQ(::mkfifo((sides + "/dla_base.npy").c_str(), 0600), 0);
    ExpectOneLineError(Ssaviz({"export", "--model", dir + "/no-model", "--text", "hi there", "--out", sides, "--lens", "--format", "json"}), 2,
                       "dla_base.npy' is a FIFO, not a file");
    fs::remove(sides + "/dla_base.npy");
    fs::create_directories(sides + "/heads_grid_tau1.png");
    ExpectOneLineError(Ssaviz({"export", "--model", dir + "/no-model", "--text", "hi there", "--out", sides, "--format", "png"}), 2,
                       "heads_grid_tau1.png' is a folder where ssaviz writes a file");
    fs::remove(sides + "/heads_grid_tau1.png");
    fs::create_directories(sides + "/heatmaps/L1_H0_diff.svg");
    ExpectOneLineError(Ssaviz({"export", "--model", dir + "/no-model", "--text", "hi there", "--out", sides, "--format", "svg"}), 2,
                       "heatmaps/L1_H0_diff.svg' is a folder where ssaviz writes a file");
    EXPECT_EQ(Ssaviz({"export", "--model", Small(), "--text", "hi there", "--out", sides, "--format", "png"}).code, 0) << "svg's not in png's way";
}

// The window's --screenshot likewise: a screenshot is written after the model has run, so where
// it goes (the PNG and PNG.json) is checked first, before any window or model (no display needed).
TEST_F(Cli, TheScreenshotsPlaceIsCheckedBeforeTheModelRuns) {
    const std::string dir = Fresh("shot_checks");
    fs::create_directories(dir + "/shot.png.json");
    ExpectOneLineError(Ssaviz({"--model", dir + "/no-model", "--screenshot", dir + "/no-folder/shot.png"}), 2,
                       "--screenshot: '" + dir + "/no-folder/shot.png': cannot write (No such file or directory)");
    ExpectOneLineError(Ssaviz({"--model", dir + "/no-model", "--screenshot", dir + "/shot.png"}), 2,
                       "shot.png.json' is a folder where ssaviz writes a file");
    ExpectOneLineError(Ssaviz({"--screenshot", "/dev/null"}), 2, "'/dev/null' is a device, not a file: ssaviz does not replace it");
    // A screenshot replaces only an earlier screenshot: not the session it was started from (saved
    // as view.json, a screenshot named "view"), its text file, nor a model's files.
    std::ofstream(dir + "/view.json") << R"({"ssaviz_session": 1, "text": "hi"})";
    std::ofstream(dir + "/text.txt") << "The keeper lit the lamp";
    fs::copy(Small(), dir + "/model", fs::copy_options::recursive);
    const std::string config = ReadFile(dir + "/model/config.json");
    for (const auto& [args, file] : std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{"--session", dir + "/view.json", "--screenshot", dir + "/view"}, "view.json' exists and is not a screenshot's description"},
             {{"--model", dir + "/model", "--text-file", dir + "/text.txt", "--screenshot", dir + "/text.txt"}, "text.txt' exists and is not a PNG"},
             {{"--model", dir + "/model", "--screenshot", dir + "/model/config"}, "config.json' exists and is not a screenshot's description"}})
        ExpectOneLineError(Ssaviz(args), 2, file + ": ssaviz replaces only a screenshot it wrote");
    EXPECT_EQ(ReadFile(dir + "/model/config.json"), config);
    EXPECT_EQ(ReadFile(dir + "/text.txt"), "The keeper lit the lamp");
    // An empty path is refused at once (it opened the window for good).
    ExpectOneLineError(Ssaviz({"--screenshot", ""}), 2, "--screenshot is empty: give a path");
    ExpectOneLineError(Ssaviz({"--export-to", ""}), 2, "--export-to is empty: give a path");
}

// A model, or a model's base, that is a loop of symbolic links says so (it read "does not exist"),
// and the model itself given as its base is refused: every SSA - base difference would be 0.
TEST_F(Cli, ALinkLoopAndTheModelAsItsOwnBaseAreNamed) {
    const std::string dir = Fresh("loops");
    fs::create_symlink(dir + "/b", dir + "/a");
    fs::create_symlink(dir + "/a", dir + "/b");
    ExpectOneLineError(Ssaviz({"info", "--model", dir + "/a"}), 3, "a' is a loop of symbolic links");
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--base", dir + "/a", "--text", "a b", "--out", dir + "/x"}), 3,
                       "a' is a loop of symbolic links");
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "a b", "--out", dir + "/a"}), 2, "a' is a loop of symbolic links");
    ExpectOneLineError(Ssaviz({"export", "--run", dir + "/a", "--text", "a b", "--out", dir + "/x"}), 3, "a' is a loop of symbolic links");
    ExpectOneLineError(Ssaviz({"info", "--model", Small(), "--tokenizer", dir + "/a"}), 3, "a' is a loop of symbolic links");
    fs::create_symlink(Small(), dir + "/same");
    for (const std::string& base : {Small(), dir + "/same", Small() + "/model.safetensors"})
        ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--base", base, "--text", "a b", "--out", dir + "/x"}), 2,
                           "is the model itself (model.safetensors): a fine-tune's base is the model it was fine-tuned from");
    EXPECT_FALSE(fs::exists(dir + "/x"));
    // A folder base/ inside the model's that is not a base says why, where it read "no base model beside".
    fs::copy(Small(), dir + "/ft");
    const std::string base = dir + "/ft/base";
    auto no_base = [&](const std::string& why) {
        ExpectOneLineError(Ssaviz({"export", "--model", dir + "/ft", "--compare", "base", "--text", "a b", "--out", dir + "/x"}), 2,
                           "step train kept; '" + base + "'" + why);
    };
    fs::create_symlink("base", base);
    no_base(" is a loop of symbolic links): name it with --base DIR");
    fs::remove(base);
    fs::create_symlink("gone", base);
    no_base(" is a symbolic link to nothing): name it with --base DIR");
    fs::remove(base);
    fs::create_symlink(".", base);
    no_base(" is the model's own folder): name it with --base DIR");
    fs::remove(base);
    fs::create_directory(base);
    no_base(" holds no model: no weights (");
    // A base/ whose lit_model.pth is a FIFO: said once (the folder said the file's reason again).
    const std::string fifo = base + "/lit_model.pth";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    ExpectOneLineError(Ssaviz({"export", "--model", dir + "/ft", "--compare", "base", "--text", "a b", "--out", dir + "/x"}), 2,
                       "step train kept; '" + fifo + "' is a FIFO, not a file): name it with --base DIR");
    fs::remove(fifo);
    fs::remove(base);
    // So does a lit_model.pth beside it that is a FIFO or the model itself.
    const std::string lit = dir + "/ft/lit_model.pth";
    ASSERT_EQ(::mkfifo(lit.c_str(), 0600), 0);
    ExpectOneLineError(Ssaviz({"export", "--model", dir + "/ft", "--compare", "base", "--text", "a b", "--out", dir + "/x"}), 2,
                       "step train kept; '" + lit + "' is a FIFO, not a file): name it with --base DIR");
    fs::remove(lit);
    fs::create_symlink("model.safetensors", lit);
    ExpectOneLineError(Ssaviz({"export", "--model", dir + "/ft", "--compare", "base", "--text", "a b", "--out", dir + "/x"}), 2,
                       "step train kept; '" + lit + "' is the model itself): name it with --base DIR");
    EXPECT_FALSE(fs::exists(dir + "/x"));
}

// A base with the fine-tune's own weights, its temperatures taken out, has no drift: float32
// rounding (JS ~1e-8) is said to be none, where it was ranked as the heads the drift changed most
// (and the window ranked other heads of the same noise).
TEST_F(Cli, ADriftOfFloatRoundingIsNoDrift) {
    const std::string dir = Fresh("no_drift"), base = dir + "/ft/base";
    fs::copy(Small(), dir + "/ft");
    fs::create_directories(base);
    for (const char* f : {"vocab.json", "merges.txt"}) fs::copy_file(Small() + "/" + f, base + "/" + f);
    json config = json::parse(ReadFile(Small() + "/config.json"));
    config.erase("ssa");
    std::ofstream(base + "/config.json") << config.dump();
    // model.safetensors without its temperature tensors: the header's other entries moved up.
    const std::string raw = ReadFile(Small() + "/model.safetensors");
    uint64_t n = 0;
    std::memcpy(&n, raw.data(), 8);
    const json header = json::parse(raw.substr(8, n));
    json kept = json::object();
    std::string data;
    for (const auto& [name, info] : header.items()) {
        if (name == "__metadata__" || name.find("ssa_") != std::string::npos) continue;
        const uint64_t begin = info["data_offsets"][0], end = info["data_offsets"][1];
        kept[name] = {{"dtype", info["dtype"]}, {"shape", info["shape"]}, {"data_offsets", {data.size(), data.size() + (end - begin)}}};
        data += raw.substr(8 + n + begin, end - begin);
    }
    ASSERT_LT(kept.size(), header.size()) << "the model has temperature tensors";
    const std::string text = kept.dump();
    const uint64_t length = text.size();
    std::ofstream(base + "/model.safetensors", std::ios::binary) << std::string(reinterpret_cast<const char*>(&length), 8) << text << data;
    const Outcome r = Ssaviz({"export", "--model", dir + "/ft", "--compare", "base", "--text", "The cat sat on the mat and the dog ran.",
                              "--out", dir + "/out", "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("; by the drift: none above 1e-06 (float32 rounding)"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("by the temperatures: none"), std::string::npos) << r.err;
    const json drift = json::parse(ReadFile(dir + "/out/metrics.json"))["decomposition"]["js_drift"];
    for (const json& layer : drift)
        for (const json& head : layer) EXPECT_LT(head.get<double>(), 1e-6);
}

TEST_F(Cli, BatchTextsCannotTakeTheSummarysPlace) {
    const std::string dir = Fresh("batch_names"), out = dir + "/out";
    std::ofstream(dir + "/texts.jsonl") << R"({"name": "summary.json", "text": "one text"})" << "\n"
                                        << R"({"name": "summary.csv", "text": "another text"})" << "\n"
                                        << R"({"name": ".export.ssaviz-abc123", "text": "a third"})" << "\n";
    Outcome r = Ssaviz({"export", "--model", Small(), "--text-file", dir + "/texts.jsonl", "--batch", "--out", out, "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    // Nor the name of ssaviz's staging folders, which the next export there would take for a killed one's.
    EXPECT_TRUE(fs::is_directory(out + "/_export.ssaviz-abc123"));
    EXPECT_FALSE(fs::exists(out + "/.export.ssaviz-abc123"));
    EXPECT_TRUE(fs::is_regular_file(out + "/summary.json"));
    EXPECT_TRUE(fs::is_regular_file(out + "/summary.csv"));
    EXPECT_TRUE(fs::is_directory(out + "/summary.json_2"));
    EXPECT_TRUE(fs::is_directory(out + "/summary.csv_2"));
    EXPECT_EQ(json::parse(ReadFile(out + "/summary.json"))["texts"].size(), 3u);
    // A line nested far too deep is a one-line error naming the line.
    std::ofstream(dir + "/deep.jsonl") << "{\"text\": " << std::string(100000, '[') << "\n";
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text-file", dir + "/deep.jsonl", "--batch", "--out", out}), 3,
                       "deep.jsonl:1: not JSON (");
    // A line that is an object but holds a lone surrogate's escape (Python's json.dumps writes
    // one for a str it got from os.fsdecode) says what is wrong in it, not "not a JSON object".
    std::ofstream(dir + "/lone.jsonl") << "{\"name\": \"ok\", \"text\": \"\\ud800\"}\n";
    const Outcome surrogate = Ssaviz({"export", "--model", Small(), "--text-file", dir + "/lone.jsonl", "--batch", "--out", out});
    ExpectOneLineError(surrogate, 3, "lone.jsonl:1: not JSON (");
    EXPECT_NE(surrogate.err.find("surrogate"), std::string::npos) << surrogate.err;
    // A batch whose every text fails, into an --out not made yet: the summary lists them (exit 3;
    // it said "summary.json: cannot write", exit 1).
    std::ofstream(dir + "/failing.txt") << "one text\nanother text\n";
    const std::string none = dir + "/none_written";
    r = Ssaviz({"export", "--model", Small(), "--text-file", dir + "/failing.txt", "--batch", "--lens", "--dla-position", "50", "--out", none,
                "--format", "json"});
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_NE(r.err.find("ssaviz: wrote 0 of 2 texts to"), std::string::npos) << r.err;
    EXPECT_EQ(json::parse(ReadFile(none + "/summary.json"))["failed"].size(), 2u);
}

// A link (or a file) where a text's sub-folder goes is refused before the model runs: the batch
// wrote through a link there, over the link target's files.
TEST_F(Cli, ABatchNeverWritesThroughALinkAtATextsFolder) {
    const std::string dir = Fresh("batch_link"), out = dir + "/out", victim = dir + "/victim";
    fs::create_directories(victim);
    fs::create_directories(out);
    std::ofstream(victim + "/metrics.json") << "precious";
    fs::create_directory_symlink("../victim", out + "/mine");
    std::ofstream(dir + "/texts.jsonl") << R"({"name": "fine", "text": "one text"})" << "\n"
                                        << R"({"name": "mine", "text": "another text"})" << "\n";
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text-file", dir + "/texts.jsonl", "--batch", "--out", out, "--format", "json"}), 2,
                       "out/mine' is a symbolic link");
    EXPECT_EQ(ReadFile(victim + "/metrics.json"), "precious");
    EXPECT_EQ(std::distance(fs::directory_iterator(victim), fs::directory_iterator()), 1);
    EXPECT_FALSE(fs::exists(out + "/fine")) << "nothing is written when a text's place is refused";
    fs::remove(out + "/mine");
    std::ofstream(out + "/text_0001") << "a file of the user's";
    std::ofstream(dir + "/plain.txt") << "a plain text\n";
    ExpectOneLineError(Ssaviz({"export", "--model", dir + "/no-model", "--text-file", dir + "/plain.txt", "--batch", "--out", out}), 2,
                       "text_0001' is in the way: not a folder");
    EXPECT_EQ(ReadFile(out + "/text_0001"), "a file of the user's");
}

// init-random writes each file to a new name and renames it over its place: a link there is
// replaced, its target untouched (it copied the tokenizer and wrote config.json and the weights
// through links). A tokenizer folder of a tokenizer.model (or a tokenizer.json) is copied as it is
// (only GPT-2's pair was, so any other failed, leaving an empty --out).
TEST_F(Cli, InitRandomNeverWritesThroughALinkAndTakesAnyTokenizer) {
    const std::string dir = Fresh("init_links"), out = dir + "/out", victim = dir + "/victim";
    fs::create_directories(victim);
    fs::create_directories(out);
    for (const char* name : {"config.json", "model.safetensors", "vocab.json", "merges.txt"}) {
        std::ofstream(victim + "/" + name) << "precious";
        fs::create_symlink("../victim/" + std::string(name), out + "/" + name);
    }
    Outcome r = Ssaviz({"init-random", "--out", out, "--layers", "1", "--heads", "2", "--embd", "16", "--positions", "32"});
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* name : {"config.json", "model.safetensors", "vocab.json", "merges.txt"}) {
        EXPECT_EQ(ReadFile(victim + "/" + name), "precious") << name;
        EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(out + "/" + name))) << name;
    }
    EXPECT_EQ(Ssaviz({"info", "--model", out}).code, 0);
    const std::string passkey = std::string(SSAVIZ_SOURCE_DIR) + "/assets/models/passkey/ssa";
    r = Ssaviz({"init-random", "--out", dir + "/sp", "--tokenizer", passkey, "--layers", "1", "--heads", "2", "--embd", "16", "--positions", "32"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(ReadFile(dir + "/sp/tokenizer.model"), ReadFile(passkey + "/tokenizer.model"));
    r = Ssaviz({"tokenize", "--model", dir + "/sp", "--text", "the key is 12345"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, Ssaviz({"tokenize", "--model", passkey, "--text", "the key is 12345"}).out);
    // A tokenizer folder without tokenizer files: one line, and no --out left behind.
    ExpectOneLineError(Ssaviz({"init-random", "--out", dir + "/none", "--tokenizer", victim}), 3, "");
    EXPECT_FALSE(fs::exists(dir + "/none"));
    // Its own model written again is replaced whole: GPT-2's pair, no SentencePiece model left beside it.
    r = Ssaviz({"init-random", "--out", dir + "/sp/", "--layers", "1", "--heads", "2", "--embd", "16", "--positions", "32"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(fs::exists(dir + "/sp/tokenizer.model"));
    EXPECT_TRUE(fs::is_regular_file(dir + "/sp/vocab.json"));
    // A model it did not write (a trained one, with its train.json) is refused, as it was.
    const std::string trained = dir + "/trained";
    fs::copy(passkey, trained);
    const std::string weights = ReadFile(trained + "/model.safetensors");
    ExpectOneLineError(Ssaviz({"init-random", "--out", trained, "--layers", "1", "--heads", "2", "--embd", "16", "--positions", "32"}), 2,
                       "holds 'train.json', which init-random does not write");
    EXPECT_EQ(ReadFile(trained + "/model.safetensors"), weights);
    EXPECT_TRUE(fs::exists(trained + "/tokenizer.model"));
}

TEST_F(Cli, SizesThatCannotBeBuiltAreRefusedUpFront) {
    const std::string dir = Fresh("sizes");
    ExpectOneLineError(Ssaviz({"init-random", "--out", dir + "/a", "--embd", "1048576"}), 2, "of weights, more than");
    ExpectOneLineError(Ssaviz({"init-random", "--out", dir + "/b", "--layers", "2000"}), 2, "at most 1024");
    EXPECT_FALSE(fs::exists(dir + "/a"));
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "hi", "--out", dir + "/c", "--size", "16384"}), 2,
                       "--size '16384' is not a heatmap side: a whole number of pixels, 16 to 8192");
}

//-----------------------------------------------------------------------------
// Round three
//-----------------------------------------------------------------------------

// A copy of the small model whose BPE vocabulary holds "a" x 2^k for k = 0..`bits`, merged in that
// order: 2^bits + 2 a's encode as two tokens, 2^bits bytes (a megabyte at 20) and "aa".
// `keep_last` false leaves the longest piece out of the vocabulary (the merges still make it).
std::string LongTokenModel(const std::string& small, const std::string& name, int bits = 20, bool keep_last = true) {
    const std::string dir = Fresh(name);
    fs::copy(small + "/config.json", dir + "/config.json");
    fs::copy(small + "/model.safetensors", dir + "/model.safetensors");
    json vocab = json::object();
    std::ofstream merges(dir + "/merges.txt");
    merges << "#version: 0.2\n";
    for (int k = 0; k <= bits; ++k) {
        if (k < bits || keep_last) vocab[std::string(size_t{1} << k, 'a')] = k;
        if (k < bits) merges << std::string(size_t{1} << k, 'a') << " " << std::string(size_t{1} << k, 'a') << "\n";
    }
    std::ofstream(dir + "/vocab.json") << vocab.dump();
    std::ofstream(dir + "/text.txt") << std::string((size_t{1} << bits) + 2, 'a');
    return dir;
}

// The width and height of a PNG, from its IHDR.
std::pair<uint32_t, uint32_t> PngSize(const std::string& path) {
    const std::string png = ReadFile(path);
    if (png.size() < 24) return {0, 0};
    auto be32 = [&](size_t at) {
        return (uint32_t(uint8_t(png[at])) << 24) | (uint32_t(uint8_t(png[at + 1])) << 16) | (uint32_t(uint8_t(png[at + 2])) << 8) | uint8_t(png[at + 3]);
    };
    return {be32(16), be32(20)};
}

bool HasTemporaries(const std::string& dir) {
    for (const std::string& f : FilesUnder(dir))
        if (f.find(".ssaviz-") != std::string::npos) return true;
    return false;
}

TEST_F(Cli, FigureSizesAreBoundedByTheirContentNotByTheirText) {
    // A token that is a megabyte of text: the highlight cuts it to its line (it aborted before).
    const std::string model = LongTokenModel(Small(), "megabyte"), out = model + "/out";
    Outcome r = Ssaviz({"export", "--model", model, "--text-file", model + "/text.txt", "--out", out, "--format", "png,svg,html"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto [w, h] = PngSize(out + "/highlight.png");
    EXPECT_GT(w, 100u);
    EXPECT_LE(w, 1400u);
    EXPECT_LE(h, 400u);
    EXPECT_LT(ReadFile(out + "/highlight.svg").size(), size_t{100000});
    EXPECT_GT(ReadFile(out + "/highlight.html").size(), size_t{1} << 20);  // the page keeps the whole text
    EXPECT_FALSE(HasTemporaries(out));

    // Thousands of what-ifs: titles name three and count the rest.
    std::string ablate;
    for (int k = 0; k < 3000; ++k) ablate += (k ? "," : "") + std::to_string(k % 2) + ":" + std::to_string(k / 2 % 2);
    const std::string many = Fresh("many_whatifs");
    r = Ssaviz({"export", "--model", Small(), "--text", "a b c d", "--out", many, "--format", "png,svg", "--ablate", ablate});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_LE(PngSize(many + "/heatmaps/L0_H0.png").first, 1400u);
    EXPECT_NE(ReadFile(many + "/heatmaps/L0_H0.svg").find("and 2997 more what-ifs"), std::string::npos);

    // A figure that cannot fit (a heads grid of 128 heads a layer) is a one-line error; the folder
    // is left as it was, without temporaries.
    const std::string wide = Fresh("wide");
    r = Ssaviz({"init-random", "--out", wide + "/model", "--layers", "1", "--heads", "128", "--embd", "128", "--positions", "16",
                "--tokenizer", std::string(SSAVIZ_SOURCE_DIR) + "/assets/tokenizers/gpt2"});
    ASSERT_EQ(r.code, 0) << r.err;
    fs::create_directories(wide + "/out");
    std::ofstream(wide + "/out/keep.txt") << "mine";
    r = Ssaviz({"export", "--model", wide + "/model", "--text", "a b", "--out", wide + "/out", "--format", "png", "--layers", "0", "--heads", "0"});
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.substr(r.err.rfind("ssaviz: ")).find("is larger than a figure may be"), std::string::npos) << r.err;
    EXPECT_EQ(FilesUnder(wide + "/out"), (std::vector<std::string>{"keep.txt"}));
}

TEST_F(Cli, TrainNeverWritesThroughLinksNorDeletesWhatItDidNotMake) {
    const std::string dir = Fresh("train_links"), out = dir + "/out", victim = dir + "/victim";
    fs::create_directories(out);
    fs::copy(Small(), victim, fs::copy_options::recursive);
    const std::string weights = ReadFile(victim + "/model.safetensors");
    const std::vector<std::string> train = {"train", "--task", "graph", "--out", out, "--steps", "3"};
    // DIR/ssa a link to another model: refused before training, the model untouched.
    fs::create_symlink(victim, out + "/ssa");
    ExpectOneLineError(Ssaviz(train), 2, "ssa' is a symbolic link: ssaviz does not write through links");
    EXPECT_EQ(ReadFile(victim + "/model.safetensors"), weights);
    fs::remove(out + "/ssa");
    // DIR/vanilla a file, DIR/checkpoint a folder of the user's: refused, left alone.
    std::ofstream(out + "/vanilla") << "notes";
    ExpectOneLineError(Ssaviz(train), 2, "vanilla' is a file where ssaviz writes a folder");
    fs::remove(out + "/vanilla");
    fs::create_directories(out + "/checkpoint");
    std::ofstream(out + "/checkpoint/notes.txt") << "mine";
    ExpectOneLineError(Ssaviz(train), 2, "holds 'notes.txt': it is not a folder ssaviz train wrote");
    EXPECT_EQ(ReadFile(out + "/checkpoint/notes.txt"), "mine");
    fs::remove_all(out + "/checkpoint");
    // A model folder of someone else's (no train.json of train's) is not replaced either.
    fs::copy(Small(), out + "/ssa", fs::copy_options::recursive);
    ExpectOneLineError(Ssaviz(train), 2, "has no train.json with \"role\": \"ssa\"");
    fs::remove_all(out + "/ssa");

    // Its own folders it replaces, through temporary names that do not stay behind.
    Outcome r = Ssaviz(train);
    ASSERT_EQ(r.code, 0) << r.err;
    r = Ssaviz(train);
    ASSERT_EQ(r.code, 0) << r.err;
    std::vector<std::string> top;
    for (const auto& e : fs::directory_iterator(out)) top.push_back(e.path().filename().string());
    std::sort(top.begin(), top.end());
    EXPECT_EQ(top, (std::vector<std::string>{"checkpoint", "ssa", "vanilla"}));

    // A checkpoint's state.json with a field of the wrong type: one line naming it, not a JSON exception.
    json state = json::parse(ReadFile(out + "/checkpoint/state.json"));
    const std::string rng = state["rng"];
    state["rng"] = 5;
    std::ofstream(out + "/checkpoint/state.json", std::ios::trunc) << state.dump();
    std::vector<std::string> resume = train;
    resume.back() = "6";
    resume.push_back("--resume");
    ExpectOneLineError(Ssaviz(resume), 3, "state.json: 'rng' must be the batch generator's state (a string), not 5");
    state["rng"] = "not a generator";
    std::ofstream(out + "/checkpoint/state.json", std::ios::trunc) << state.dump();
    ExpectOneLineError(Ssaviz(resume), 3, "'rng' is not the batch generator's state");
    // A state cut short, or with more after it, is no state (the generator read what it could and went on).
    for (const std::string& edited : {rng.substr(0, rng.size() / 2), rng + " 7", rng + "x"}) {
        state["rng"] = edited;
        std::ofstream(out + "/checkpoint/state.json", std::ios::trunc) << state.dump();
        ExpectOneLineError(Ssaviz(resume), 3, "state.json: 'rng' is not the batch generator's state (312 whole numbers)");
    }
    state["rng"] = rng;  // as it was: the run resumes
    std::ofstream(out + "/checkpoint/state.json", std::ios::trunc) << state.dump();
    r = Ssaviz(resume);
    ASSERT_EQ(r.code, 0) << r.err;
    state = json::parse(ReadFile(out + "/checkpoint/state.json"));
    EXPECT_EQ(state["step"], 6);
    state = json::array();
    std::ofstream(out + "/checkpoint/state.json", std::ios::trunc) << state.dump();
    ExpectOneLineError(Ssaviz(resume), 2, "has no state.json with an \"identity\"");  // not provably train's: not touched
}

TEST_F(Cli, TrainCountsAreBoundedByWhatTheMachineCanUse) {
    const std::string out = Fresh("train_counts") + "/out";
    const std::vector<std::string> train = {"train", "--task", "graph", "--out", out, "--steps", "2"};
    auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = train;
        args.insert(args.end(), extra.begin(), extra.end());
        return Ssaviz(args);
    };
    ExpectOneLineError(with({"--threads", "1048576"}), 2, "--threads '1048576' is not a whole number from 1 to 1024");
    ExpectOneLineError(with({"--threads", "1024"}), 2, "cores this process may use");  // no CI machine has 1,024 cores
    ExpectOneLineError(with({"--batch", "1000000"}), 2, "of memory here");
    ExpectOneLineError(with({"--width", "1048576"}), 2, "of memory here");
    ExpectOneLineError(with({"--seq-len", "100"}), 2, "--seq-len 100 must be from 2 to the context (--context 16)");
    ExpectOneLineError(with({"--seq-len", "1"}), 2, "--seq-len 1 must be from 2");
    ExpectOneLineError(with({"--width", "10", "--heads", "3"}), 2, "n_embd 10 is not divisible by n_head 3");
    ExpectOneLineError(Ssaviz({"train", "--out", out, "--data", ","}), 2, "--data is empty");
    // An empty --data with a synthetic task was taken as no --data at all (trained, exit 0).
    ExpectOneLineError(Ssaviz({"train", "--task", "graph", "--out", out, "--data", ""}), 2, "--data is empty: give a path");
    EXPECT_FALSE(fs::exists(out));
}

// --example is a model, its twin and a text: a flag naming another model or comparison is
// refused, not lost under it (a usage error before any window opens).
TEST_F(Cli, AnExampleRefusesFlagsNamingAnotherModel) {
    for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
             {"--model", "x"}, {"--base", "x"}, {"--compare", "base"}, {"--run", "x"}, {"--session", "x"}, {"--config", "x"}, {"--tokenizer", "x"}})
        ExpectOneLineError(Ssaviz({"--example", "english", flag, value}), 2, "--example opens a bundled model with its twin or base: not with " + flag);
    // The commands alike, --compare vanilla (the default's spelling) too; nothing is written.
    const std::string out = Fresh("example");
    ExpectOneLineError(Ssaviz({"export", "--example", "english", "--compare", "vanilla", "--out", out}), 2,
                       "--example opens a bundled model with its twin or base: not with --compare");
    ExpectOneLineError(Ssaviz({"export", "--example", "graph-run", "--run", out, "--out", out}), 2, "not with --run");
    ExpectOneLineError(Ssaviz({"info", "--model", Small(), "--example", "english"}), 2, "not with --model");
    ExpectOneLineError(Ssaviz({"tokenize", "--example", "ENGLISH"}), 2, "--example 'ENGLISH' is not one of the bundled examples (english, ");
    // A map's name given to --show points to --map.
    ExpectOneLineError(Ssaviz({"--show", "three-way", "--screenshot", out + "/x.png"}), 2, "(tabs); a map is --map three-way");
    // What goes with a run, or not, said in the example's words (the user typed no --run).
    ExpectOneLineError(Ssaviz({"export", "--example", "english", "--steps", "5", "--out", out}), 2,
                       "--steps goes with --run DIR: --example english is no training run");
    ExpectOneLineError(Ssaviz({"export", "--example", "graph-run", "--rank-heads", "--out", out}), 2,
                       "--example graph-run, a training run, opens each of its checkpoints: not with --rank-heads");
    EXPECT_FALSE(fs::exists(out + "/metrics.json"));
}

TEST_F(Cli, NumbersThatWrapOrMeanNothingAreUsageErrors) {
    const std::string dir = Fresh("numbers");
    ExpectOneLineError(Ssaviz({"--window", "4294968576x800"}), 2, "--window '4294968576x800' must be WIDTHxHEIGHT");
    ExpectOneLineError(Ssaviz({"generate", "--model", Small(), "--text", "a b", "--tokens", "2", "--top-k", "2.5"}), 2,
                       "--top-k '2.5' is not a whole number");
    ExpectOneLineError(Ssaviz({"generate", "--model", Small(), "--text", "a b", "--tokens", "+2"}), 2, "--tokens '+2'");
    // An empty list is the same error for every list flag, and nothing is written.
    for (const char* flag : {"--format", "--maps", "--layers", "--ablate"})
        ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "a b", "--out", dir + "/empty", flag, ""}), 2,
                           std::string(flag) + " is empty");
    EXPECT_FALSE(fs::exists(dir + "/empty"));
    // A session version past 32 bits is not version 1.
    std::ofstream(dir + "/session.json") << R"({"ssaviz_session": 4294967297, "text": "hi"})";
    ExpectOneLineError(Ssaviz({"--session", dir + "/session.json"}), 3, "'ssaviz_session' must be an integer from");
    // Every --out that cannot be written is a usage error, found before any model runs (as root,
    // access() would say /proc is writable).
    for (const std::string& bad : {std::string("/proc/ssaviz-test/out"), std::string("/proc"), std::string("/proc/self")})
        ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "hi", "--out", bad}), 2, "--out: '" + bad + "' cannot be");
    ExpectOneLineError(Ssaviz({"init-random", "--out", "/proc/ssaviz-test", "--layers", "1", "--heads", "1", "--embd", "8", "--positions", "8"}), 2,
                       "--out: '/proc/ssaviz-test' cannot be made");
    ExpectOneLineError(Ssaviz({"train", "--task", "graph", "--out", "/proc", "--steps", "1"}), 2, "--out: '/proc' cannot be written");
    // The check makes nothing that stays: the folders it tried are gone again.
    ExpectOneLineError(Ssaviz({"export", "--model", dir + "/no-model", "--text", "hi", "--out", dir + "/a/b/c"}), 3, "does not exist");
    EXPECT_FALSE(fs::exists(dir + "/a"));
}

TEST_F(Cli, WrongResultsAreRefusedNotReportedAsSuccess) {
    const std::string dir = Fresh("wrong");
    // What-if scales within their bound one by one but multiplying past float range on one head.
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "a b c", "--out", dir + "/x", "--ablate",
                               "0:0=x1000,0:0=x1000,0:0=x1000,0:*=x1000,0:0=x1000,0:0=x1000,0:0=x1000"}),
                       2, "the what-ifs on L0 H0 scale tau_q - 1 by up to 1e+21 together");
    ExpectOneLineError(Ssaviz({"generate", "--model", Small(), "--text", "a b c", "--tokens", "1", "--ablate", "1:*=x1e6,1:*=x-10"}), 2,
                       "every head of L1");
    Outcome r = Ssaviz({"export", "--model", Small(), "--text", "a b c", "--out", dir + "/ok", "--format", "npy", "--ablate", "0:0=x1000,0:*=x1000"});
    ASSERT_EQ(r.code, 0) << r.err;

    // A twin of the same tokenizer kind and size whose ids mean other pieces.
    const std::string twin = dir + "/permuted";
    fs::copy(Twin(), twin, fs::copy_options::recursive);
    json vocab = json::parse(ReadFile(twin + "/vocab.json"));
    std::string a, b;
    for (const auto& [token, id] : vocab.items()) {
        if (id == 64) a = token;
        if (id == 65) b = token;
    }
    vocab[a] = 65;
    vocab[b] = 64;
    std::ofstream(twin + "/vocab.json", std::ios::trunc) << vocab.dump();
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "a b", "--out", dir + "/twin", "--compare", twin}), 3,
                       "uses a different tokenizer: the same kind (gpt2-bpe) and size (50257 tokens), but other pieces or merges");
    r = Ssaviz({"export", "--model", Small(), "--text", "a b", "--out", dir + "/twin", "--compare", Twin(), "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;

    // One token: no losses, and the default formats write loss.npy as the empty array it is.
    r = Ssaviz({"export", "--model", Small(), "--text", "hello", "--out", dir + "/one"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(NpyShape(dir + "/one/loss.npy"), (std::vector<int64_t>{0}));
    EXPECT_EQ(NpyShape(dir + "/one/attention.npy"), (std::vector<int64_t>{2, 2, 1, 1}));
    EXPECT_TRUE(fs::is_regular_file(dir + "/one/highlight.png"));
}

TEST_F(Cli, MessagesNameTheRightThingAndStayShort) {
    const std::string dir = Fresh("messages");
    // A twin with a shorter context: its context is the one named, and the remedy as for the model's own.
    Outcome r = Ssaviz({"init-random", "--out", dir + "/short", "--seed", "5", "--tokenizer", std::string(SSAVIZ_SOURCE_DIR) + "/assets/tokenizers/gpt2",
                        "--layers", "2", "--heads", "2", "--embd", "16", "--positions", "8"});
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string text = "one two three four five six seven eight nine ten eleven";
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", text, "--out", dir + "/x", "--compare", dir + "/short"}), 3,
                       "longer than the twin's context of 8 (truncating keeps the first 8); pass --truncate to run it");
    r = Ssaviz({"export", "--model", Small(), "--text", text, "--out", dir + "/x", "--compare", dir + "/short", "--truncate", "--format", "npy"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(NpyShape(dir + "/x/attention.npy"), (std::vector<int64_t>{2, 2, 8, 8}));
    // A BPE piece missing from the vocabulary: the file named, the piece cut (here 128 kB).
    const std::string model = LongTokenModel(Small(), "missing_piece", 17, false);
    r = Ssaviz({"tokenize", "--model", model, "--text-file", model + "/text.txt"});
    ExpectOneLineError(r, 3, "is not in the vocabulary of");
    EXPECT_NE(r.err.find("vocab.json"), std::string::npos) << r.err.substr(0, 400);
    EXPECT_LT(r.err.size(), 400u) << r.err.substr(0, 400);
    // Values from the command line are echoed cut.
    r = Ssaviz({"export", "--model", Small(), "--text", "hi", "--out", dir + "/y", "--colormap", std::string(100000, 'j')});
    ExpectOneLineError(r, 2, "--colormap 'jjj");
    EXPECT_LT(r.err.size(), 200u);
    r = Ssaviz({"info", std::string(100000, 'z')});
    ExpectOneLineError(r, 2, "unknown argument 'zzz");
    EXPECT_LT(r.err.size(), 200u);
}

// Issue 38: a lit-gpt checkpoint that also holds HF's names is read by its lit_config.json (and
// without one, one line says it holds two layouts); a pickled os.system in a tensor's place is
// named as what it is, not as a missing key. The files are written by PyTorch (python3-torch).
TEST_F(Cli, CheckpointsHoldingTheWrongThingsAreNamed) {
    const std::string dir = Fresh("wrong_things");
    Outcome r = Ssaviz({"init-random", "--out", dir + "/lit", "--family", "pythia", "--layout", "lit", "--layers", "2", "--heads", "2",
                        "--embd", "32", "--query-form", "exp_exp,none", "--seed", "3"});
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* name : {"both", "system"}) {
        fs::create_directories(dir + "/" + name);
        for (const char* file : {"lit_config.json", "vocab.json", "merges.txt"}) fs::copy_file(dir + "/lit/" + file, dir + "/" + name + "/" + file);
    }
    const std::string script = dir + "/make.py";
    std::ofstream(script) << "import os, sys, torch\n"
                             "d = sys.argv[1]\n"
                             "sd = torch.load(d + '/lit/lit_model.pth', map_location='cpu')\n"
                             "sd = dict(sd.get('model', sd))\n"
                             "both = dict(sd)\n"
                             "both['gpt_neox.embed_in.weight'] = sd['transformer.wte.weight'].clone()\n"
                             "torch.save(both, d + '/both/lit_model.pth')\n"
                             "class Call:\n"
                             "    def __reduce__(self): return (os.system, ('echo never run',))\n"
                             "sd['transformer.h.0.norm_1.weight'] = Call()\n"
                             "torch.save(sd, d + '/system/lit_model.pth')\n";
    ASSERT_EQ(std::system((std::string(SSAVIZ_PYTHON) + " " + Quote(script) + " " + Quote(dir) + " >" + dir + "/make.log 2>&1").c_str()), 0)
        << ReadFile(dir + "/make.log");
    r = Ssaviz({"info", "--model", dir + "/both"});
    EXPECT_EQ(r.code, 0) << r.err;
    fs::remove(dir + "/both/lit_config.json");
    ExpectOneLineError(Ssaviz({"info", "--model", dir + "/both"}), 3,
                       "holds the token embeddings of two layouts ('transformer.wte.weight', 'gpt_neox.embed_in.weight')");
    ExpectOneLineError(Ssaviz({"info", "--model", dir + "/system"}), 3, "'transformer.h.0.norm_1.weight' holds a 'posix.system' object, not a tensor");
}

TEST_F(Cli, RepeatedLayersAndHeadsWriteEachFileOnce) {
    std::string layers;
    for (int k = 0; k < 50000; ++k) layers += (k ? "," : "") + std::to_string(k % 2);
    const std::string out = Fresh("repeats");
    Outcome r = Ssaviz({"export", "--model", Small(), "--text", "a b", "--out", out, "--format", "csv", "--layers", layers, "--heads", "1,1,1"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(FilesUnder(out + "/csv"), (std::vector<std::string>{"L0_H1.csv", "L0_H1_compare.csv", "L1_H1.csv", "L1_H1_compare.csv"}));
}

}  // namespace

namespace {

// A hostile run (issue 36): steps that are links (one to a good checkpoint, one broken, one to
// itself), a FIFO and a folder named as checkpoints, and 10,000 other files. Each bad step is
// named once and skipped, the good ones analysed, and the FIFO never waited on.
TEST_F(Cli, AHostileRunNamesEachBadStepAndGoesOn) {
    const std::string dir = Fresh("run"), run = dir + "/run";
    fs::create_directories(run);
    Outcome r = Ssaviz({"init-random", "--out", dir + "/a", "--family", "pythia", "--layout", "lit", "--layers", "2", "--heads", "2",
                        "--embd", "32", "--query-form", "exp_exp,none", "--seed", "1"});
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* f : {"lit_config.json", "vocab.json", "merges.txt"}) fs::copy_file(dir + "/a/" + f, run + "/" + f);
    fs::copy_file(dir + "/a/lit_model.pth", run + "/iter-000100-ckpt.pth");
    fs::create_symlink("../a/lit_model.pth", run + "/iter-000200-ckpt.pth");
    fs::create_symlink("nowhere", run + "/iter-000300-ckpt.pth");
    ASSERT_EQ(::mkfifo((run + "/iter-000400-ckpt.pth").c_str(), 0600), 0);
    fs::create_directory(run + "/iter-000500-ckpt.pth");
    fs::create_symlink("iter-000600-ckpt.pth", run + "/iter-000600-ckpt.pth");
    for (int i = 0; i < 10000; ++i) std::ofstream(run + "/junk-" + std::to_string(i) + ".txt");
    // Thirty broken checkpoints after them, each for a reason of its own (a header length past its
    // end, another each): twenty lines name broken steps, one counts the rest.
    for (int i = 1; i <= 30; ++i) {
        char name[32];
        std::snprintf(name, sizeof name, "/iter-%06d-ckpt.pth", 1000 * i);
        const uint64_t length = 100 + i;
        std::ofstream(run + name, std::ios::binary) << std::string(reinterpret_cast<const char*>(&length), 8);
    }
    // And before them ten empty ones: one reason, said for the first of them and then counted.
    for (int i = 1; i <= 10; ++i) {
        char name[32];
        std::snprintf(name, sizeof name, "/iter-%06d-ckpt.pth", 700 + i);
        std::ofstream(run + name);
    }
    r = Ssaviz({"export", "--run", run, "--text", "The cat sat on the mat.", "--out", dir + "/out"});
    EXPECT_EQ(r.code, 3) << r.err;
    for (const char* step : {"step 300 (iter-000300-ckpt.pth)", "step 400 (iter-000400-ckpt.pth)", "step 500 (iter-000500-ckpt.pth)",
                             "step 600 (iter-000600-ckpt.pth)"})
        EXPECT_NE(r.err.find(step), std::string::npos) << step << "\n" << r.err;
    const json timeline = json::parse(ReadFile(dir + "/out/run.json"));
    ASSERT_EQ(timeline["steps"].size(), 2u);
    EXPECT_EQ(timeline["steps"][1]["step"], 200);
    EXPECT_EQ(timeline["steps"][0]["heads"], timeline["steps"][1]["heads"]) << "the link opens the checkpoint it points to";
    EXPECT_EQ(timeline["failed"].size(), 44u);
    EXPECT_NE(r.err.find("step 701 (iter-000701-ckpt.pth)"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("step 702 ("), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("step 15000 (iter-015000-ckpt.pth)"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("step 16000 ("), std::string::npos) << "past the twentieth line\n" << r.err;
    EXPECT_NE(r.err.find("run: 9 more steps skipped for a reason said above"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("run: 15 more steps skipped, the last step 30000 (44 of 46 steps skipped in all)"), std::string::npos) << r.err;
}

// A run's steps are one model's: a checkpoint folder of another width (a model folder of its own,
// its config beside it) was taken in with exit 0, its curves beside the others'; so were one of
// another context and one of another family of the same shape; and one whose config differs in
// its norm eps alone (set side by side unsaid before 2026-12-08; RoPE and a sliding window alike).
TEST_F(Cli, ARunsStepOfAnotherModelIsSkipped) {
    const std::string dir = Fresh("run_width"), run = dir + "/run";
    for (const auto& [step, width, positions, family] : {std::tuple{"0", "16", "32", "gpt2"}, {"5", "16", "32", "gpt2"}, {"10", "32", "32", "gpt2"},
                                                         {"15", "16", "64", "gpt2"}, {"20", "16", "32", "pythia"}}) {
        const Outcome r = Ssaviz({"init-random", "--out", run + "/checkpoint-" + step, "--layers", "1", "--heads", "2", "--embd", width,
                                  "--positions", positions, "--family", family, "--seed", std::to_string(std::atoi(step) + 1)});
        ASSERT_EQ(r.code, 0) << r.err;
    }
    fs::copy(run + "/checkpoint-5", run + "/checkpoint-25");
    json config = json::parse(ReadFile(run + "/checkpoint-25/config.json"));
    config["layer_norm_epsilon"] = 1e-6;
    std::ofstream(run + "/checkpoint-25/config.json") << config.dump();
    const Outcome r = Ssaviz({"export", "--run", run, "--text", "The cat sat.", "--out", dir + "/out", "--format", "json"});
    EXPECT_EQ(r.code, 3) << r.err;
    for (const char* why : {"step 25 (checkpoint-25): has a norm eps of 1e-06; the run's first analysed step, 0 (checkpoint-0), has 1e-05: another model; skipped",
                            "step 10 (checkpoint-10): has a width of 32; the run's first analysed step, 0 (checkpoint-0), has 16: another model; skipped",
                            "step 15 (checkpoint-15): has a context of 64; the run's first analysed step, 0 (checkpoint-0), has 32: another model; skipped",
                            "step 20 (checkpoint-20): has the family 'pythia'; the run's first analysed step, 0 (checkpoint-0), has 'gpt2': another model; skipped"})
        EXPECT_NE(r.err.find(why), std::string::npos) << why << "\n" << r.err;
    const json timeline = json::parse(ReadFile(dir + "/out/run.json"));
    EXPECT_EQ(timeline["steps"].size(), 2u);
    EXPECT_EQ(timeline["failed"].size(), 4u);
    // With --steps all, a skipped step has no export: its folder was written as it was analysed and
    // stayed, beside run.json's saying it was skipped.
    const Outcome all = Ssaviz({"export", "--run", run, "--text", "The cat sat.", "--out", dir + "/all", "--format", "json", "--steps", "all"});
    EXPECT_EQ(all.code, 3) << all.err;
    for (const char* step : {"step-000000", "step-000005"}) EXPECT_TRUE(fs::exists(dir + "/all/" + step + "/metrics.json")) << step;
    for (const char* step : {"step-000010", "step-000015", "step-000020", "step-000025"}) EXPECT_FALSE(fs::exists(dir + "/all/" + step)) << step;
}

// A compare run is set beside the run step by step: one of another depth (its lens rows other
// layers') or tokenising the text otherwise (its losses of other tokens) was taken with exit 0.
TEST_F(Cli, ACompareRunOfAnotherShapeOrTokenizerIsRefused) {
    const std::string dir = Fresh("compare_misfit");
    const std::string gpt2 = std::string(SSAVIZ_SOURCE_DIR) + "/assets/tokenizers/gpt2";
    const std::string sentencepiece = std::string(SSAVIZ_SOURCE_DIR) + "/assets/models/english/ssa";
    for (const auto& [name, layers, tokenizer] : {std::tuple{"run/checkpoint-0", "1", gpt2}, {"run/checkpoint-5", "1", gpt2},
                                                   {"deep/checkpoint-0", "2", gpt2}, {"other/checkpoint-0", "1", sentencepiece}}) {
        const Outcome r = Ssaviz({"init-random", "--out", dir + "/" + name, "--layers", layers, "--heads", "2", "--embd", "16", "--tokenizer", tokenizer});
        ASSERT_EQ(r.code, 0) << r.err;
    }
    for (const auto& [other, why] :
         {std::pair<std::string, std::string>{"deep", "has 2 layers x 2 heads, the run 1 x 2: its layers and heads are not the run's to set beside"},
          {"other", "tokenises the text otherwise than the run ("}}) {
        const std::string out = dir + "/out_" + other;
        const Outcome r = Ssaviz({"export", "--run", dir + "/run", "--compare-run", dir + "/" + other, "--lens", "--text", "The cat sat on the mat.",
                                  "--out", out, "--format", "json"});
        EXPECT_EQ(r.code, 3) << r.err;
        const std::string last = r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1);  // after the progress bar's lines
        EXPECT_EQ(last.rfind("ssaviz: --compare-run '" + dir + "/" + other + "' " + why, 0), 0u) << r.err;
        EXPECT_FALSE(fs::exists(out)) << other;
    }
}

// What every step opens with is checked before the first: a device the machine lacks, a dtype the
// device lacks, and a --config or --tokenizer that is not there were said once a step ("skipped",
// seven times), then "no checkpoint could be analysed".
TEST_F(Cli, ARunsOpenSettingsAreCheckedBeforeItsFirstStep) {
    const std::string dir = Fresh("run_settings"), run = dir + "/run";
    fs::create_directories(run);
    fs::copy(Small(), run + "/checkpoint-0", fs::copy_options::recursive);
    fs::copy(Small(), run + "/checkpoint-5", fs::copy_options::recursive);
    const std::vector<std::string> base = {"export", "--run", run, "--text", "The cat sat.", "--out", dir + "/out", "--format", "json"};
    for (const auto& [flag, value, code, want] :
         {std::tuple<std::string, std::string, int, std::string>{"--device", "cuda:99", 2, "--device cuda:99: "},
          {"--config", dir + "/none.json", 3, "--config '" + dir + "/none.json' does not exist"},
          {"--tokenizer", dir + "/none", 3, "--tokenizer '" + dir + "/none' does not exist"}}) {
        std::vector<std::string> args = base;
        args.insert(args.end(), {flag, value});
        ExpectOneLineError(Ssaviz(args), code, want);
        EXPECT_FALSE(fs::exists(dir + "/out")) << flag;
    }
}

// A run's export goes outside the run (--out RUN/checkpoint-999 became a broken step of it, which
// later exports skipped and train --resume refused), and a run's first step may be its base (the
// usual fine-tune: step 0 is the base, no change yet), where a single model as its own base is refused.
TEST_F(Cli, ARunsExportGoesOutsideItAndItsFirstStepMayBeItsBase) {
    const std::string dir = Fresh("run_out"), run = dir + "/run";
    fs::create_directories(run);
    fs::copy(Small(), run + "/checkpoint-0", fs::copy_options::recursive);
    fs::copy(Twin(), run + "/checkpoint-5", fs::copy_options::recursive);
    const std::vector<std::string> export_run = {"export", "--run", run, "--text", "The cat sat on the mat", "--format", "json"};
    for (const std::string& out : {run, run + "/checkpoint-999", run + "/checkpoint-0/out"}) {
        std::vector<std::string> args = export_run;
        args.insert(args.end(), {"--out", out});
        ExpectOneLineError(Ssaviz(args), 2, "is inside the run folder '" + run + "': an export there would become one of its steps");
    }
    // One checkpoint's export there too (it made a step without weights); inside a step that is
    // there, or beside the steps under another name, is the user's choice.
    ExpectOneLineError(Ssaviz({"export", "--model", run + "/checkpoint-5", "--text", "The cat", "--format", "json", "--out", run + "/checkpoint-999/x"}), 2,
                       "--out: '" + run + "/checkpoint-999' would become a step of the run '" + run + "' (its name is a checkpoint's)");
    EXPECT_FALSE(fs::exists(run + "/checkpoint-999"));
    for (const std::string& out : {run + "/checkpoint-5/export", run + "/exports"})
        EXPECT_EQ(Ssaviz({"export", "--model", run + "/checkpoint-5", "--text", "The cat", "--format", "json", "--out", out}).code, 0) << out;
    std::vector<std::string> args = export_run;
    args.insert(args.end(), {"--out", dir + "/out", "--base", run + "/checkpoint-0"});
    Outcome r = Ssaviz(args);
    ASSERT_EQ(r.code, 0) << r.err;
    const json timeline = json::parse(ReadFile(dir + "/out/run.json"));
    ASSERT_EQ(timeline["steps"].size(), 2u) << timeline.dump().substr(0, 400);
    ExpectOneLineError(Ssaviz({"export", "--model", run + "/checkpoint-0", "--base", run + "/checkpoint-0", "--text", "a b", "--out", dir + "/one"}), 2,
                       "is the model itself");
    // Nor is the run inside a folder the export writes (round twenty-seven): a run at OUT/curves or
    // OUT/step-000005 got the curves or a step's files among its checkpoints (a user's loss.png
    // there replaced); the window's run/ holds train's runs (OUT/run/ssa), whose curves/ beside them
    // made train --resume refuse the folder. Elsewhere under OUT the run is fine.
    for (const std::string name : {"curves", "step-000005", "compare-run", "heatmaps/x"}) {
        const std::string holder = dir + "/holder_" + std::to_string(name.size()), inner = holder + "/" + name;
        fs::create_directories(fs::path(inner).parent_path());
        fs::copy(run, inner, fs::copy_options::recursive);
        std::vector<std::string> args = export_run;
        args[2] = inner;
        args.insert(args.end(), {"--out", holder});
        const std::string first = name.substr(0, name.find('/'));
        ExpectOneLineError(Ssaviz(args), 2, "is inside '" + holder + "/" + first + "', a folder the export writes");
        EXPECT_FALSE(fs::exists(holder + "/run.json")) << name;
        // Spelt through a folder that is not there and back (it resolved to OUT/, which no
        // parent of the run equalled).
        args.back() = holder + "/nope/..";
        ExpectOneLineError(Ssaviz(args), 2, "a folder the export writes");
        EXPECT_FALSE(fs::exists(holder + "/run.json")) << name;
    }
    // A step named through a link and back is the step of the folder it resolves to.
    fs::create_directories(dir + "/elsewhere/deeper");
    fs::create_directory_symlink(dir + "/elsewhere/deeper", dir + "/lnk");
    fs::create_directories(dir + "/elsewhere/R");
    fs::copy(run + "/checkpoint-0", dir + "/elsewhere/R/checkpoint-0", fs::copy_options::recursive);
    ExpectOneLineError(Ssaviz({"export", "--model", run + "/checkpoint-5", "--text", "The cat", "--format", "json", "--out", dir + "/lnk/../R/checkpoint-999"}), 2,
                       "would become a step of the run");
    EXPECT_FALSE(fs::exists(dir + "/elsewhere/R/checkpoint-999"));
    const std::string train = dir + "/train";  // train's layout: OUT/run/ssa beside OUT/run.json etc.
    fs::create_directories(train + "/run");
    fs::copy(run, train + "/run/ssa", fs::copy_options::recursive);
    std::vector<std::string> beside = export_run;
    beside[2] = train + "/run/ssa";
    beside.insert(beside.end(), {"--out", train});
    EXPECT_EQ(Ssaviz(beside).code, 0) << "export --run writes no run/";
    EXPECT_TRUE(fs::is_regular_file(train + "/run.json"));
}

// A run's export is all or nothing, and never writes through a link: a link where a step's folder,
// compare-run/ or curves/ goes is refused before any checkpoint opens; one inside a step's folder
// (its heatmaps/) stops the run with everything written so far discarded; --out is as it was
// either way (it wrote through such links, and left the steps before the failing one behind). What
// fails for every step (a twin that does not open, --compare base with none beside, an empty text)
// is said once, with export's exit code, instead of once a checkpoint.
TEST_F(Cli, ARunsExportIsAllOrNothingAndNeverThroughALink) {
    const std::string dir = Fresh("run_links"), run = dir + "/run";
    fs::create_directories(run);
    for (const auto& [name, seed] : {std::pair<const char*, const char*>{"a", "1"}, {"b", "2"}}) {
        Outcome r = Ssaviz({"init-random", "--out", dir + "/" + name, "--family", "pythia", "--layout", "lit", "--layers", "2", "--heads", "2",
                            "--embd", "32", "--query-form", "exp_exp,none", "--seed", seed});
        ASSERT_EQ(r.code, 0) << r.err;
    }
    for (const char* f : {"lit_config.json", "vocab.json", "merges.txt"}) fs::copy_file(dir + "/a/" + f, run + "/" + f);
    fs::copy_file(dir + "/a/lit_model.pth", run + "/iter-000100-ckpt.pth");
    fs::copy_file(dir + "/b/lit_model.pth", run + "/iter-000200-ckpt.pth");
    fs::copy(run, dir + "/twin", fs::copy_options::recursive);  // the compare run: a second run (the run itself is refused)
    const std::string text = "The cat sat on the mat.";
    fs::create_symlink("run", dir + "/link");
    for (const std::string& same : {run, dir + "/link", run + "/"})
        ExpectOneLineError(Ssaviz({"export", "--run", run, "--compare-run", same, "--text", text, "--out", dir + "/same"}), 2,
                           "--compare-run '" + same + "' is the run itself: a compare run is a second run");
    EXPECT_FALSE(fs::exists(dir + "/same"));
    fs::create_directories(dir + "/victim");
    std::ofstream(dir + "/victim/metrics.json") << "precious";
    auto ssaviz_lines = [](const std::string& err) {
        size_t n = 0;
        for (size_t at = 0; (at = err.find("ssaviz: ", at)) != std::string::npos; ++at) ++n;
        return n;
    };
    auto expect_untouched = [&](const std::string& out, const std::string& what) {
        EXPECT_EQ(ReadFile(dir + "/victim/metrics.json"), "precious") << what;
        size_t entries = 0;
        for (const auto& e : fs::directory_iterator(dir + "/victim")) entries += e.path().filename() != "metrics.json";
        EXPECT_EQ(entries, 0u) << what << ": written through the link";
        for (const auto& e : fs::directory_iterator(out))
            EXPECT_TRUE(fs::is_symlink(e.symlink_status()) || e.path().filename() == "step-000200") << what << ": left behind " << e.path();
        EXPECT_FALSE(fs::exists(out + "/run.json")) << what;
    };
    for (const std::string& link : {std::string("step-000100"), std::string("curves"), std::string("compare-run")}) {
        const std::string out = dir + "/out-" + link;
        fs::create_directories(out);
        fs::create_symlink("../victim", out + "/" + link);
        Outcome r = Ssaviz({"export", "--run", run, "--compare-run", dir + "/twin", "--steps", "100", "--text", text, "--out", out, "--format", "json,png"});
        EXPECT_EQ(r.code, 2) << link << ": " << r.err;
        EXPECT_NE(r.err.find("is a symbolic link"), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find("run ["), std::string::npos) << link << ": refused only after opening checkpoints: " << r.err;
        expect_untouched(out, link);
    }
    // A link inside a step's folder, where its heatmaps go: refused before any checkpoint opens too.
    const std::string out = dir + "/out-inside";
    fs::create_directories(out + "/step-000200");
    fs::create_symlink("../../victim", out + "/step-000200/heatmaps");
    Outcome r = Ssaviz({"export", "--run", run, "--steps", "all", "--text", text, "--out", out, "--format", "json,png"});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("step-000200/heatmaps' is a symbolic link"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("run ["), std::string::npos) << "refused only after opening checkpoints: " << r.err;
    expect_untouched(out, "heatmaps");
    EXPECT_FALSE(fs::exists(out + "/step-000100")) << "the step before the failing one was left behind";
    EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 1) << "the staging folder was left behind";
    // Then the same run where nothing is in the way: every file in place.
    fs::remove(out + "/step-000200/heatmaps");
    r = Ssaviz({"export", "--run", run, "--steps", "all", "--text", text, "--out", out, "--format", "json,png"});
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* f : {"run.json", "run.csv", "tau_q.npy", "curves/entropy.png", "step-000100/metrics.json", "step-000200/heatmaps/L1_H1.png"})
        EXPECT_TRUE(fs::exists(out + "/" + f)) << f;
    EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 6) << "run.json, run.csv, tau_q.npy, curves, two steps";
    // What fails for every step: said once.
    for (const auto& [args, code, needle] :
         {std::tuple<std::vector<std::string>, int, std::string>{{"--compare", dir + "/no-such-twin"}, 3, "no-such-twin"},
          {{"--compare", "base"}, 2, "name it with --base DIR"},
          {{"--base", dir + "/no-such-base"}, 3, "no-such-base"},
          {{"--ablate", "9:0"}, 2, "'9:0' names no layer of the model"}}) {
        std::vector<std::string> command = {"export", "--run", run, "--text", text, "--out", dir + "/out-once"};
        command.insert(command.end(), args.begin(), args.end());
        r = Ssaviz(command);
        EXPECT_EQ(r.code, code) << needle << ": " << r.err;
        EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
        EXPECT_EQ(ssaviz_lines(r.err), 1u) << r.err;
        EXPECT_FALSE(fs::exists(dir + "/out-once")) << "--out made, then left behind empty";
    }
}

// A path with control characters (an escape sequence, a newline) is echoed inert on one line,
// also where a loader's message puts it in as given (a safetensors range check, a run's summary).
TEST_F(Cli, PathsWithControlCharactersAreEchoedInert) {
    const std::string dir = Fresh("escaped"), model = dir + "/m\x1b[31mred\nX";
    Outcome r = Ssaviz({"init-random", "--out", model, "--layers", "1", "--heads", "1", "--embd", "16", "--seed", "1"});
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string weights = ReadFile(model + "/model.safetensors");
    std::ofstream(model + "/model.safetensors", std::ios::binary | std::ios::trunc) << weights.substr(0, weights.size() / 2);
    r = Ssaviz({"info", "--model", model});
    ExpectOneLineError(r, 3, "m\\x1b[31mred\\nX");
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
    // A twin so named, in export --lens's line of each side's mean loss by layer (round twenty-seven:
    // it printed the name raw; since, the sides go by their short names there, "twin").
    const std::string twin = dir + "/t\x1b[31m\xe2\x80\xae\xff";
    fs::copy(Twin(), twin, fs::copy_options::recursive);
    r = Ssaviz({"export", "--model", Small(), "--compare", twin, "--lens", "--text", "The cat sat on the mat", "--out", dir + "/lens", "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("the lens, mean loss read after"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("; twin: "), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("\xe2\x80\xae"), std::string::npos) << r.err;
}

// A text's control characters reach the per-head CSV's piece column written out (\x1b), never raw:
// `cat` of the file replayed the escape sequence.
TEST_F(Cli, ControlCharactersInATextAreWrittenOutInTheCsv) {
    const std::string dir = Fresh("csv_controls");
    Outcome r = Ssaviz({"export", "--model", Small(), "--text", "red \x1b[31mtext\x07 and\ttab", "--out", dir, "--format", "csv", "--layers", "0",
                        "--heads", "0"});
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string csv = ReadFile(dir + "/csv/L0_H0.csv");
    for (char c : csv) EXPECT_TRUE(static_cast<unsigned char>(c) >= 0x20 || c == '\n') << "byte " << static_cast<int>(c);
    EXPECT_NE(csv.find("\\x1b"), std::string::npos) << csv.substr(0, 400);
    EXPECT_NE(csv.find("\\t"), std::string::npos) << csv.substr(0, 400);
}

// The window's text from --text-file with a NUL is refused before the window opens, as a session's
// text is: its editor holds C strings, and showed the text up to the NUL while the model read it all.
TEST_F(Cli, TheWindowRefusesATextFileWithANul) {
    const std::string file = Scratch("nul_text.txt");
    std::ofstream(file, std::ios::binary) << std::string("Hello\0 world this is hidden", 28);
    ExpectOneLineError(Ssaviz({"--model", Small(), "--text-file", file, "--screenshot", Scratch("nul_text.png")}), 3,
                       "nul_text.txt': holds a NUL character at byte 5 (the window's editor would hide what follows it)");
    EXPECT_FALSE(fs::exists(Scratch("nul_text.png")));
    // The command line's export reads it whole, the NUL a token of its own, as before.
    EXPECT_EQ(Ssaviz({"export", "--model", Small(), "--text-file", file, "--out", Fresh("nul_text_export"), "--format", "json"}).code, 0);
}

// Folder names are bytes: one that is not UTF-8 is written into JSON (info --json, run.json) with
// U+FFFD for the bad byte, never an "internal error" from the JSON writer.
TEST_F(Cli, FolderNamesThatAreNotUtf8StillMakeJson) {
    const std::string dir = Fresh("not_utf8"), model = dir + "/m\xff", run = dir + "/run\xfe";
    Outcome r = Ssaviz({"init-random", "--out", model, "--family", "pythia", "--layout", "lit", "--layers", "2", "--heads", "2",
                        "--embd", "32", "--query-form", "exp_exp,none", "--seed", "1"});
    ASSERT_EQ(r.code, 0) << r.err;
    r = Ssaviz({"info", "--json", "--model", model});
    ASSERT_EQ(r.code, 0) << r.err;
    const json info = json::parse(r.out);
    EXPECT_EQ(info["dir"].get<std::string>(), dir + "/m\xEF\xBF\xBD");
    fs::create_directories(run);
    for (const char* f : {"lit_config.json", "vocab.json", "merges.txt"}) fs::copy_file(model + "/" + f, run + "/" + f);
    fs::copy_file(model + "/lit_model.pth", run + "/iter-000100-ckpt.pth");
    r = Ssaviz({"export", "--run", run, "--text", "The cat sat on the mat.", "--out", dir + "/out"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json timeline = json::parse(ReadFile(dir + "/out/run.json"));
    ASSERT_EQ(timeline["steps"].size(), 1u);
    EXPECT_NE(timeline.dump().find("run\xEF\xBF\xBD"), std::string::npos) << timeline.dump(1);
}

}  // namespace
