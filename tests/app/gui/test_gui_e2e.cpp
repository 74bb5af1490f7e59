// End to end: the real ssaviz binary opens the default model in a window (under Xvfb), renders
// until the model has answered, writes a screenshot and the views' rectangles, and exits. The
// picture must not be blank, and the heatmap and token strip must hold real colour.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>
#include <stb_image.h>

namespace {
namespace fs = std::filesystem;

struct Picture {
    int width = 0, height = 0;
    std::vector<uint32_t> pixels;  // RGBA packed
};

Picture Load(const std::string& path) {
    Picture p;
    int channels = 0;
    unsigned char* data = stbi_load(path.c_str(), &p.width, &p.height, &channels, 4);
    if (!data) return p;
    p.pixels.resize(static_cast<size_t>(p.width) * p.height);
    std::memcpy(p.pixels.data(), data, p.pixels.size() * 4);
    stbi_image_free(data);
    return p;
}

size_t DistinctColours(const Picture& p, int x0, int y0, int w, int h) {
    std::set<uint32_t> colours;
    for (int y = std::max(0, y0); y < std::min(p.height, y0 + h); ++y)
        for (int x = std::max(0, x0); x < std::min(p.width, x0 + w); ++x) colours.insert(p.pixels[static_cast<size_t>(y) * p.width + x]);
    return colours.size();
}

TEST(EndToEnd, DefaultModelScreenshot) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e";
    fs::create_directories(dir);
    const std::string png = dir + "/ssaviz.png";
    fs::remove(png);
    const std::string cmd = std::string(SSAVIZ_BINARY) + " --screenshot " + png +
                            " --frames 8 --text 'The lighthouse keeper climbed the stairs. He lit the lamp, and the ships "
                            "passed safely: café, naïve, 你好.' >" + dir + "/log.txt 2>&1";
    const int status = std::system(cmd.c_str());
    std::ifstream log_file(dir + "/log.txt");
    std::string log((std::istreambuf_iterator<char>(log_file)), std::istreambuf_iterator<char>());
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd << "\n" << log;

    Picture p = Load(png);
    ASSERT_GT(p.width, 0) << "no PNG at " << png;
    EXPECT_GT(DistinctColours(p, 0, 0, p.width, p.height), 200u) << "the window looks blank";

    nlohmann::json meta = nlohmann::json::parse(std::ifstream(png + ".json"));
    for (const char* region : {"heatmap", "tokens", "heads"}) {
        ASSERT_TRUE(meta["regions"].contains(region)) << region << " not drawn";
        auto r = meta["regions"][region];
        const int x = r[0].get<int>(), y = r[1].get<int>(), w = r[2].get<int>(), h = r[3].get<int>();
        EXPECT_GT(w, 50) << region;
        EXPECT_GT(h, 20) << region;
        EXPECT_GT(DistinctColours(p, x, y, w, h), 12u) << region << " holds too few colours";
    }
}

// Examples > Graph: the bundled graph model with its twin, and the P* / SSA / vanilla window.
TEST(EndToEnd, GraphExampleShowsTargetAndLearnedMaps) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_graph";
    fs::create_directories(dir);
    const std::string png = dir + "/graph.png";
    fs::remove(png);
    const std::string cmd = std::string(SSAVIZ_BINARY) + " --example graph --screenshot " + png + " --frames 8 >" + dir + "/log.txt 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    Picture p = Load(png);
    nlohmann::json meta = nlohmann::json::parse(std::ifstream(png + ".json"));
    ASSERT_TRUE(meta["regions"].contains("graph")) << "the graph window was not drawn";
    auto r = meta["regions"]["graph"];
    EXPECT_GT(r[2].get<int>(), 300);
    EXPECT_GT(DistinctColours(p, r[0].get<int>(), r[1].get<int>(), r[2].get<int>(), r[3].get<int>()), 12u);
    EXPECT_EQ(meta["state"]["text"], "ABCDEFGHABCDEFGH");
}

// A checkpoint whose SSA position form the tensors cannot tell: the window asks (the "Open
// checkpoint" dialog) instead of guessing; given the form by flag it opens straight away.
TEST(EndToEnd, CheckpointWithoutConfigAsksForTheForm) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_checkpoint";
    fs::create_directories(dir);
    const std::string ckpt = std::string(SSAVIZ_TEST_OUT) + "/cli/checkpoint/ckpt.pt";
    const std::string asked = dir + "/asked.png", told = dir + "/told.png";
    std::string cmd = std::string(SSAVIZ_BINARY) + " --model " + ckpt + " --screenshot " + asked + " --frames 6 >" + dir + "/log.txt 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    nlohmann::json meta = nlohmann::json::parse(std::ifstream(asked + ".json"));
    ASSERT_TRUE(meta["regions"].contains("checkpoint")) << "no dialog: " << meta["regions"].dump();
    EXPECT_FALSE(meta["regions"].contains("heatmap")) << "a model opened without its form";
    auto r = meta["regions"]["checkpoint"];
    Picture p = Load(asked);
    EXPECT_GT(DistinctColours(p, r[0].get<int>(), r[1].get<int>(), r[2].get<int>(), r[3].get<int>()), 6u);

    cmd = std::string(SSAVIZ_BINARY) + " --model " + ckpt + " --query-form sigmoid,shared,sum --text 'The cat sat' --screenshot " + told +
          " --frames 6 >" + dir + "/log2.txt 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    meta = nlohmann::json::parse(std::ifstream(told + ".json"));
    EXPECT_FALSE(meta["regions"].contains("checkpoint"));
    EXPECT_TRUE(meta["regions"].contains("heatmap")) << meta["regions"].dump();
}

std::string ReadFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int RunCommand(const std::string& cmd, const std::string& log) {
    const int status = std::system((cmd + " >" + log + " 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<std::string> FilesUnder(const std::string& dir) {
    std::vector<std::string> out;
    if (!fs::exists(dir)) return out;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
    std::sort(out.begin(), out.end());
    return out;
}

const std::string kSessionText = "The keeper lit the lamp; ships passed safely: caf\xC3\xA9, na\xC3\xAFve.";

// A session with everything set away from the defaults.
std::string WriteSession(const std::string& dir, const std::string& compare = "vanilla") {
    const std::string model = (fs::path(SSAVIZ_BINARY).parent_path() / "models" / "default").string();
    nlohmann::json session = {
        {"ssaviz_session", 1},
        {"model", model},
        {"compare", compare},
        {"text", kSessionText},
        {"selected", {2, 3}},
        {"pinned", {{0, 1, "diff"}, {3, 2}}},  // a pin keeps its own map; [layer, head] is an SSA pin
        {"query", 5},
        {"view", {{"colormap", "magma"}, {"log_scale", true}, {"map", "diff"}, {"token_color", "entropy"}, {"token_scope", "layer"},
                  {"map_zoom", 1.5}, {"map_pan", {2.0, 3.0}}, {"split", true},
                  {"layout", {{"columns", {0.2, 0.5, 0.3}}, {"editor", 0.3}}}}},
        {"export",
         {{"formats", {"json", "npy", "csv", "png", "svg", "html"}},
          {"maps", {"ssa", "vanilla", "diff"}},
          {"layers", {1}},
          {"heads", {0, 2}},
          {"colormap", "magma"},
          {"log_scale", true},
          {"size", 256},
          {"highlight", "tau_q"},
          {"highlight_scope", "head"},
          {"highlight_head", {1, 2}},
          {"sink_epsilon", 0.35}}}};
    const std::string path = dir + "/session.json";
    std::ofstream(path) << session.dump(1);
    return path;
}

// The session reopens exactly: the window shows its model, text, selections and settings.
TEST(EndToEnd, SessionReopensExactly) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_session";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string session = WriteSession(dir), png = dir + "/shot.png";
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + session + " --screenshot " + png + " --frames 4", dir + "/log.txt"), 0)
        << ReadFile(dir + "/log.txt");
    const nlohmann::json shown = nlohmann::json::parse(ReadFile(png + ".json"))["state"];
    EXPECT_EQ(shown["text"], kSessionText);
    EXPECT_EQ(shown["selected"], nlohmann::json({2, 3}));
    EXPECT_EQ(shown["pinned"], nlohmann::json({{0, 1, "diff"}, {3, 2, "ssa"}}));
    EXPECT_EQ(shown["split"], true);
    ASSERT_EQ(shown["layout"].size(), 3u);  // the panes as the session sized them
    EXPECT_NEAR(shown["layout"][0].get<float>(), 0.2f, 0.01f);
    EXPECT_NEAR(shown["layout"][1].get<float>(), 0.5f, 0.01f);
    EXPECT_EQ(shown["query"], 5);
    EXPECT_EQ(shown["colormap"], "magma");
    EXPECT_EQ(shown["log_scale"], true);
    EXPECT_EQ(shown["map"], "diff");
    EXPECT_EQ(shown["token_color"], "entropy");
    EXPECT_EQ(shown["token_scope"], "layer");
    EXPECT_FLOAT_EQ(shown["map_zoom"].get<float>(), 1.5f);  // the heatmap's zoom and pan, as saved
    EXPECT_EQ(shown["map_pan"], nlohmann::json({2.0, 3.0}));
    EXPECT_GT(shown["tokens"].get<int>(), 10);

    // A broken session is a one-line error, before any window opens.
    std::ofstream(dir + "/bad.json") << R"({"ssaviz_session": 1, "view": {"map": "sideways"}})";
    EXPECT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + dir + "/bad.json", dir + "/bad.log"), 3);
    EXPECT_NE(ReadFile(dir + "/bad.log").find("'view.map': 'sideways'"), std::string::npos) << ReadFile(dir + "/bad.log");
}

// The export dialog and `ssaviz export` write the same files, byte for byte, for the same settings.
// The window's export (the dialog's own path, with the session's settings) writes the same bytes
// as `ssaviz export` with the same settings; `compare` is the session's and --compare's.
void ExpectGuiExportEqualsCommandLine(const std::string& name, const std::string& compare) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/" + name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string session = WriteSession(dir, compare), gui_out = dir + "/gui", cli_out = dir + "/cli";
    // Both on one compute thread: OpenBLAS's sums depend on its thread count (by ~2e-6 on a
    // 2-core AMD EPYC with its Haswell kernels), and the window leaves a core to the UI.
    struct OneThread {
        OneThread() { setenv("SSAVIZ_THREADS", "1", 1); }
        ~OneThread() { unsetenv("SSAVIZ_THREADS"); }
    } one_thread;
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + session + " --export-to " + gui_out, dir + "/gui.log"), 0)
        << ReadFile(dir + "/gui.log");
    std::ofstream(dir + "/text.txt") << kSessionText;
    const std::string model = (fs::path(SSAVIZ_BINARY).parent_path() / "models" / "default").string();
    const std::string cli = std::string(SSAVIZ_BINARY) + " export --model " + model + " --text-file " + dir + "/text.txt --out " + cli_out +
                            " --format json,npy,csv,png,svg,html --maps ssa,vanilla,diff --layers 1 --heads 0,2 --colormap magma --log"
                            " --size 256 --highlight tau_q --highlight-scope 1,2 --sink-eps 0.35 --compare " + compare;
    ASSERT_EQ(RunCommand(cli, dir + "/cli.log"), 0) << ReadFile(dir + "/cli.log");
    const std::vector<std::string> files = FilesUnder(gui_out);
    EXPECT_EQ(files, FilesUnder(cli_out));
    EXPECT_GT(files.size(), 30u);
    for (const std::string& f : files)
        EXPECT_TRUE(ReadFile(gui_out + "/" + f) == ReadFile(cli_out + "/" + f)) << f << " differs between the GUI and the command line";
    const nlohmann::json metrics = nlohmann::json::parse(ReadFile(gui_out + "/metrics.json"), nullptr, false);
    EXPECT_EQ(metrics.value("comparison_kind", ""), compare == "local" ? "local" : "counterfactual");
}

TEST(EndToEnd, GuiExportEqualsCommandLineExport) { ExpectGuiExportEqualsCommandLine("e2e_export", "vanilla"); }

// The layer-local tau = 1 comparison chosen in a session reaches the window's engine.
TEST(EndToEnd, GuiExportEqualsCommandLineExportLayerLocal) { ExpectGuiExportEqualsCommandLine("e2e_export_local", "local"); }

}  // namespace

namespace {

// A session whose model is missing, or a --model that is not a model: the window shows the error
// and, with --screenshot, exits at once with it (it used to wait 120 s for a model to settle).
TEST(EndToEnd, AMissingModelEndsAScreenshotRunAtOnce) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_missing_model";
    fs::remove_all(dir);
    fs::create_directories(dir);
    nlohmann::json session = {{"ssaviz_session", 1}, {"model", dir + "/no-such-model"}, {"text", "hello"}};
    std::ofstream(dir + "/session.json") << session.dump(1);
    for (const std::string& args : {" --session " + dir + "/session.json", std::string(" --model /dev/zero")}) {
        const auto start = std::chrono::steady_clock::now();
        const int code = RunCommand(std::string(SSAVIZ_BINARY) + args + " --screenshot " + dir + "/shot.png --frames 2", dir + "/log.txt");
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const std::string log = ReadFile(dir + "/log.txt");
        EXPECT_EQ(code, 3) << args << ": " << log;
        EXPECT_LT(seconds, 60.0) << args << ": waited for a model that will not come";  // generous: a hang took 120 s
        EXPECT_NE(log.find(args.find("dev/zero") != std::string::npos ? "/dev/zero" : "no-such-model"), std::string::npos) << log;
        EXPECT_TRUE(fs::exists(dir + "/shot.png"));  // the window as the user would see it, error included
    }
}

}  // namespace
