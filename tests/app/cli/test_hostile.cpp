// Hostile input through the real binary (issue "Hostile input, round two"): files that are not
// files, texts far past the context, tokenizer files present but broken, exports into folders
// holding links or in the way, sizes that cannot be built. Each is a one-line error with the
// documented exit code, or a result that leaves nothing of the user's lost.
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
    ExpectOneLineError(Ssaviz({"tokenize", "--model", Small(), "--text-file", dir + "/huge.txt"}), 3, "more than the 67.1 MB");
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
    EXPECT_NO_THROW(json::parse(ReadFile(out + "/metrics.json")));
    // A link where a folder goes is refused before anything is written.
    fs::create_symlink(outside, out + "/csv");
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "hello world", "--out", out, "--format", "csv"}), 1,
                       "is a symbolic link: ssaviz does not write through links inside --out");
    EXPECT_EQ(FilesUnder(outside), (std::vector<std::string>{"victim.json"}));
}

TEST_F(Cli, AFailedExportLeavesTheFolderAsItWas) {
    const std::string out = Fresh("atomic");
    std::ofstream(out + "/tokens.json") << "old tokens";
    // The export cannot put metrics.json in place (a folder is there): it fails after writing every
    // file, and then renames none of them.
    fs::create_directories(out + "/metrics.json");
    Outcome r = Ssaviz({"export", "--model", Small(), "--text", "hello world", "--out", out, "--format", "json,npy"});
    EXPECT_EQ(r.code, 1) << r.err;  // after the progress lines, one line of error
    EXPECT_NE(r.err.substr(r.err.rfind("ssaviz: ")).find("metrics.json' is a folder where the export writes a file"), std::string::npos) << r.err;
    EXPECT_EQ(ReadFile(out + "/tokens.json"), "old tokens");
    EXPECT_EQ(FilesUnder(out), (std::vector<std::string>{"metrics.json", "tokens.json"}));  // no temporary files left
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
}

TEST_F(Cli, BatchTextsCannotTakeTheSummarysPlace) {
    const std::string dir = Fresh("batch_names"), out = dir + "/out";
    std::ofstream(dir + "/texts.jsonl") << R"({"name": "summary.json", "text": "one text"})" << "\n"
                                        << R"({"name": "summary.csv", "text": "another text"})" << "\n";
    Outcome r = Ssaviz({"export", "--model", Small(), "--text-file", dir + "/texts.jsonl", "--batch", "--out", out, "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(fs::is_regular_file(out + "/summary.json"));
    EXPECT_TRUE(fs::is_regular_file(out + "/summary.csv"));
    EXPECT_TRUE(fs::is_directory(out + "/summary.json_2"));
    EXPECT_TRUE(fs::is_directory(out + "/summary.csv_2"));
    EXPECT_EQ(json::parse(ReadFile(out + "/summary.json"))["texts"].size(), 2u);
    // A line nested far too deep is a one-line error naming the line.
    std::ofstream(dir + "/deep.jsonl") << "{\"text\": " << std::string(100000, '[') << "\n";
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text-file", dir + "/deep.jsonl", "--batch", "--out", out}), 3,
                       "deep.jsonl:1: not a JSON object");
}

TEST_F(Cli, SizesThatCannotBeBuiltAreRefusedUpFront) {
    const std::string dir = Fresh("sizes");
    ExpectOneLineError(Ssaviz({"init-random", "--out", dir + "/a", "--embd", "1048576"}), 2, "of weights, more than");
    ExpectOneLineError(Ssaviz({"init-random", "--out", dir + "/b", "--layers", "2000"}), 2, "at most 1024");
    EXPECT_FALSE(fs::exists(dir + "/a"));
    ExpectOneLineError(Ssaviz({"export", "--model", Small(), "--text", "hi", "--out", dir + "/c", "--size", "16384"}), 2,
                       "--size must be a heatmap side of 16 to 8192 pixels");
}

}  // namespace
