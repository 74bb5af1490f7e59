// End to end: the real ssaviz binary opens the default model in a window (under Xvfb), renders
// until the model has answered, writes a screenshot and the views' rectangles, and exits. The
// picture must not be blank, and the heatmap and token strip must hold real colour.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <tuple>
#include <thread>

#include <nlohmann/json.hpp>
#include <stb_image.h>

#include "app/core/examples.h"
#include "app/core/head_impacts.h"
#include "app/core/timeline.h"
#include "app/export/export_figures.h"
#include "app/gui/worker.h"
#include "tests/npy_floats.h"
#include "viz/palette.h"

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

// Pixels of a region in exactly this colour (a chart's filled bars).
size_t PixelsOf(const Picture& p, const nlohmann::json& region, viz::Rgba8 colour) {
    const uint32_t want = colour.r | colour.g << 8 | colour.b << 16 | static_cast<uint32_t>(colour.a) << 24;  // RGBA in memory: R lowest
    const int x0 = region[0].get<int>(), y0 = region[1].get<int>(), w = region[2].get<int>(), h = region[3].get<int>();
    size_t n = 0;
    for (int y = std::max(0, y0); y < std::min(p.height, y0 + h); ++y)
        for (int x = std::max(0, x0); x < std::min(p.width, x0 + w); ++x) n += p.pixels[static_cast<size_t>(y) * p.width + x] == want;
    return n;
}

// Pixels of a region brighter than `level` (0-255, the mean of red, green and blue): text on the dark theme.
size_t BrightPixels(const Picture& p, int x0, int y0, int w, int h, int level) {
    size_t n = 0;
    for (int y = std::max(0, y0); y < std::min(p.height, y0 + h); ++y)
        for (int x = std::max(0, x0); x < std::min(p.width, x0 + w); ++x) {
            const uint32_t c = p.pixels[static_cast<size_t>(y) * p.width + x];  // RGBA in memory: R lowest
            n += static_cast<int>((c & 0xff) + ((c >> 8) & 0xff) + ((c >> 16) & 0xff)) > 3 * level;
        }
    return n;
}

// Under the sanitizers (.ci/sanitize) each start of the window costs ~6-10 s of CI's 2 cores: the
// runs that check that a base's flag without a base falls back to SSA's map (drawn by every other
// test there) are left to the Release suite, and so are the runs that draw SSA's own map or lens
// grid beside a base (the map in ThreeWayFromTheCommandLine, the grid in TheLensTabShowsWhatEachLayerWrites),
// and the second and third of a test's cases where its first runs the same code (each test says which).
#ifdef SSAVIZ_TEST_SANITIZED
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

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
    // The query's row: SSA's bars and the comparison's, no base's (there is none).
    ASSERT_TRUE(meta["regions"].contains("row_chart"));
    EXPECT_GT(PixelsOf(p, meta["regions"]["row_chart"], viz::kSsaColor), 50u);
    EXPECT_GT(PixelsOf(p, meta["regions"]["row_chart"], viz::kCompareColor), 50u);
    EXPECT_EQ(PixelsOf(p, meta["regions"]["row_chart"], viz::kBaseColor), 0u);
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

    // --text puts an example's model and twin on another text (before, the example's text won
    // silently).
    const std::string own = dir + "/own_text.png", text = "A short text of my own, to see.";
    const std::string own_cmd = std::string(SSAVIZ_BINARY) + " --example english --text '" + text + "' --screenshot " + own + " --frames 8 >" + dir + "/own.log 2>&1";
    ASSERT_EQ(std::system(own_cmd.c_str()), 0) << own_cmd;
    meta = nlohmann::json::parse(std::ifstream(own + ".json"));
    EXPECT_EQ(meta["state"]["text"], text);
    EXPECT_EQ(meta["state"]["comparison"], "twin");

    // The graph model opened by --model, without a text: the English example text is not in its
    // vocabulary of A..H (it opened on a tokenizing error, exit 3); it reads the task's text.
    const std::string plain = dir + "/plain.png";
    const std::string plain_cmd = std::string(SSAVIZ_BINARY) + " --model " + app::BundledModelsDir() + "/graph/ssa --screenshot " + plain +
                                  " --frames 8 >" + dir + "/plain.log 2>&1";
    ASSERT_EQ(std::system(plain_cmd.c_str()), 0) << plain_cmd;
    meta = nlohmann::json::parse(std::ifstream(plain + ".json"));
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

// The open dialog in the real window (--show open-run, open-base, as File > Open a training run...
// and Compare with a base model... show it), over the model's views, starting in the folder the
// window started in: a run's folder is offered as a run (the line saying it opens), a model folder
// as a base, and a folder that is neither offers nothing.
TEST(EndToEnd, TheOpenDialogOffersARunOrABase) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_open_dialog";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string models = app::BundledModelsDir(), graph = models + "/graph/ssa";
    struct Case {
        std::string name, cwd, show, region;
        bool opens;
    };
    for (const Case& c : {Case{"run", models + "/graph-run/ssa", "open-run", "open_dialog_run", true},
                          Case{"no_run", models + "/graph", "open-run", "open_dialog_run", false},
                          Case{"base", models + "/graph/vanilla", "open-base", "open_dialog_base", true},
                          Case{"no_base", models + "/graph", "open-base", "open_dialog_base", false}}) {
        if (kSanitized && (c.name == "no_run" || c.name == "base")) continue;  // the dialog's code again, by purpose
        const std::string shot = dir + "/" + c.name + ".png";
        ASSERT_EQ(RunCommand("cd " + c.cwd + " && " + SSAVIZ_BINARY + " --model " + graph + " --show " + c.show + " --screenshot " + shot +
                                 " --frames 6",
                             shot + ".log"),
                  0)
            << ReadFile(shot + ".log");
        const nlohmann::json meta = nlohmann::json::parse(std::ifstream(shot + ".json"));
        ASSERT_TRUE(meta["regions"].contains(c.region)) << meta["regions"].dump();
        EXPECT_TRUE(meta["regions"].contains("heatmap")) << "the model's views under it";
        EXPECT_EQ(meta["regions"].contains("open_dialog_opens"), c.opens) << c.name;
        const auto r = meta["regions"][c.region];
        EXPECT_GT(DistinctColours(Load(shot), r[0].get<int>(), r[1].get<int>(), r[2].get<int>(), r[3].get<int>()), 6u);
    }
}

// The window on a short text with `flags`, screenshot NAME.png in `dir`: what its description
// says the window showed ("state"; an empty object, and a failure, when there is none).
nlohmann::json ShownState(const std::string& dir, const std::string& name, const std::string& flags) {
    const std::string png = dir + "/" + name + ".png";
    const int code = RunCommand(std::string(SSAVIZ_BINARY) + " --text 'The keeper lit the lamp and watched the ships' --screenshot " + png +
                                    " --frames 3 " + flags,
                                dir + "/" + name + ".log");
    EXPECT_EQ(code, 0) << ReadFile(dir + "/" + name + ".log");
    const nlohmann::json meta = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
    if (!meta.is_object() || !meta.contains("state")) {
        ADD_FAILURE() << "no screenshot description at " << png << ".json";
        return nlohmann::json::object();
    }
    return meta["state"];
}

// Issue 34: the window opens where its flags say (--layer, --head, --query, --map, --tab), over
// the defaults (a query past the text is its last token, with a line saying so, as a head past the
// model's shape is), and a map it does not know is a usage error naming the choices.
TEST(EndToEnd, FlagsOpenTheWindowOnAHeadQueryMapAndTab) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_place";
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto shown = [&](const std::string& name, const std::string& flags) { return ShownState(dir, name, flags); };
    const nlohmann::json all = shown("all", "--layer 2 --head 1 --query 3 --map all --tab temperatures");
    EXPECT_EQ(all["selected"], nlohmann::json({2, 1}));
    EXPECT_EQ(all["query"], 3);
    EXPECT_EQ(all["split"], true);
    EXPECT_EQ(all["tab"], "Temperatures");
    const nlohmann::json diff = shown("diff", "--map diff --head 3 --query 99");  // past the text: its last token, said
    EXPECT_EQ(diff["selected"], nlohmann::json({0, 3}));
    EXPECT_EQ(diff["map"], "diff");
    EXPECT_EQ(diff["split"], false);
    const std::string said = ReadFile(dir + "/diff.log");
    const size_t at = said.find("ssaviz: --query 99: the text has ");
    ASSERT_NE(at, std::string::npos) << said;
    EXPECT_EQ(diff["query"], std::stoi(said.substr(at + 33)) - 1) << said;
    if (!kSanitized) {  // --map three-way without a base shows SSA, said (it was silent)
        EXPECT_EQ(shown("three", "--map three-way")["three_way"], true);
        EXPECT_NE(ReadFile(dir + "/three.log").find("ssaviz: --map three-way: no base to set SSA against"), std::string::npos)
            << ReadFile(dir + "/three.log");
    }
    // A session's head, pins and query past the model and text (the model changed since it was
    // saved) are taken as the flags' are, each with a line saying so (they changed silently).
    const nlohmann::json session = {{"ssaviz_session", 1}, {"model", ""}, {"selected", {9, 9}}, {"pinned", {{0, 0}, {9, 1}, {1, 99}}}, {"query", 500}};
    std::ofstream(dir + "/session.json") << session.dump();
    const nlohmann::json from_session = shown("session", "--session " + dir + "/session.json");
    EXPECT_EQ(from_session["pinned"].size(), 1u) << from_session["pinned"].dump();
    const std::string lines = ReadFile(dir + "/session.log");
    for (const char* line : {"ssaviz: the session's head L9 H9: the model has ", "; showing the nearest head",
                             "ssaviz: the session's pinned heads: 2 past the model's ", " heads, unpinned", "ssaviz: the session's query 500: the text has "})
        EXPECT_NE(lines.find(line), std::string::npos) << line << "\n" << lines;
    // A session without a text keeps the window's default text (it opened on an empty one, "no analysis").
    // (Not under the sanitizers, for CI's time: the same start-up as the session above, another text.)
    std::ofstream(dir + "/no_text.json") << nlohmann::json{{"ssaviz_session", 1}, {"selected", {1, 1}}}.dump();
    if (!kSanitized) {
        ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + dir + "/no_text.json --screenshot " + dir + "/no_text.png --frames 2",
                             dir + "/no_text.log"),
                  0)
            << ReadFile(dir + "/no_text.log");
        const nlohmann::json no_text = nlohmann::json::parse(ReadFile(dir + "/no_text.png.json"), nullptr, false);
        ASSERT_TRUE(no_text.is_object() && no_text.contains("state"));
        EXPECT_GT(no_text["state"]["text"].get<std::string>().size(), 20u);
        EXPECT_EQ(no_text["state"]["selected"], nlohmann::json({1, 1}));
    }
    const int code = RunCommand(std::string(SSAVIZ_BINARY) + " --map sideways", dir + "/bad.log");
    EXPECT_EQ(code, 2);
    EXPECT_NE(ReadFile(dir + "/bad.log").find("is not one of ssa, compare, diff, all, three-way, base, base_diff"), std::string::npos) << ReadFile(dir + "/bad.log");
}

// Issue 34: a fine-tune with a sibling base/ folder, opened from a session that asks for its
// base: the window runs the three sides (SSA, tau = 1, the base) and settles; the Model panel and
// the map chooser name it. (It waited forever for a twin once: a queued comparison read as one.)
TEST(EndToEnd, ASessionOpensAFineTuneAgainstItsBase) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_base";
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy(app::BundledModelsDir() + "/english/ssa", dir + "/ft", fs::copy_options::recursive);
    fs::copy(app::BundledModelsDir() + "/english/vanilla", dir + "/base", fs::copy_options::recursive);
    std::ofstream(dir + "/session.json") << nlohmann::json{{"ssaviz_session", 1}, {"model", dir + "/ft"}, {"compare", "base"},
                                                           {"text", "Once upon a time there was a girl."}}
                                                .dump();
    const std::string png = dir + "/shot.png";
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + dir + "/session.json --map all --screenshot " + png + " --frames 4",
                         dir + "/log.txt"),
              0)
        << ReadFile(dir + "/log.txt");
    const nlohmann::json meta = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
    ASSERT_TRUE(meta.is_object() && meta.contains("state")) << ReadFile(dir + "/log.txt");
    EXPECT_EQ(meta["state"]["comparison"], "base");
    EXPECT_EQ(meta["state"]["split"], true);
    ASSERT_TRUE(meta["regions"].contains("heatmap_diff") && meta["regions"].contains("heatmap_ssa")) << meta["regions"].dump();
    // All three in a 1600-pixel window: two maps a row, the difference under SSA, each map larger
    // than a third of the pane (it was 130 pixels, one row of three).
    const nlohmann::json ssa = meta["regions"]["heatmap_ssa"], diff = meta["regions"]["heatmap_diff"];
    EXPECT_GT(diff[1].get<float>(), ssa[1].get<float>() + ssa[3].get<float>());
    EXPECT_GT(ssa[2].get<float>(), 200.0f);
}

// An official-form fine-tune (tau_q of position alone, one slope a layer, lit-gpt's layout) and
// its base, `ft` and `base` in a fresh folder `name` under the tests' output: the next three
// tests' models (each test its own, as shards run side by side).
std::string FineTuneAndBase(const std::string& name) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/" + name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const auto& [model, form, seed] : {std::tuple<const char*, const char*, const char*>{"ft", "exp_exp,none", "1"}, {"base", "none", "2"}}) {
        const std::string cmd = std::string(SSAVIZ_BINARY) + " init-random --out " + dir + "/" + model +
                                " --family pythia --layout lit --layers 2 --heads 2 --embd 32 --query-form " + form + " --seed " + seed;
        EXPECT_EQ(RunCommand(cmd, dir + "/init.log"), 0) << ReadFile(dir + "/init.log");
    }
    return dir;
}

const std::string kFineTuneText = "One slope a layer: the fine-tune sharpens its attention with position.";

// Red and blue pixels of a region: a difference map's cells on the diverging scale.
std::pair<size_t, size_t> RedAndBlue(const Picture& g, const nlohmann::json& r) {
    // A pixel within 2 of a yellow one is left out: the selected column's yellow frame, antialiased
    // over dark cells, reads as red (the lens grid frames the attribution's column with no query chosen).
    auto yellow = [&](int x, int y) {
        if (x < 0 || y < 0 || x >= g.width || y >= g.height) return false;
        const uint32_t c = g.pixels[static_cast<size_t>(y) * g.width + x];
        return (c & 0xff) > 200 && ((c >> 8) & 0xff) > 170 && ((c >> 16) & 0xff) < 150;
    };
    auto near_yellow = [&](int x, int y) {
        for (int dy = -2; dy <= 2; ++dy)
            for (int dx = -2; dx <= 2; ++dx)
                if (yellow(x + dx, y + dy)) return true;
        return false;
    };
    size_t red = 0, blue = 0;
    for (int y = std::max(0, r[1].get<int>()); y < std::min(g.height, r[1].get<int>() + r[3].get<int>()); ++y)
        for (int x = std::max(0, r[0].get<int>()); x < std::min(g.width, r[0].get<int>() + r[2].get<int>()); ++x) {
            const uint32_t c = g.pixels[static_cast<size_t>(y) * g.width + x];  // RGBA in memory: R lowest
            const int cr = c & 0xff, cg = (c >> 8) & 0xff, cb = (c >> 16) & 0xff;
            red += cr > 150 && cb < 110 && cg < 130 && !near_yellow(x, y);
            blue += cb > 150 && cr < 110 && cb > cg + 40 && !near_yellow(x, y);  // not viridis' teal under the hover's white frame
        }
    return {red, blue};
}

// Issue 34: the command line opens an official-form fine-tune against its base (--base DIR) on the
// three-way layout: SSA | tau = 1 | base, each map drawn, the Fine-tune tab open with its matrices
// drawn, and the temperature scale fitted to the shown head (its colours vary along the text).
TEST(EndToEnd, ThreeWayFromTheCommandLine) {
    const std::string dir = FineTuneAndBase("e2e_three_way");
    ASSERT_FALSE(HasFailure());
    const std::string png = dir + "/shot.png";
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --model " + dir + "/ft --base " + dir + "/base --map three-way --layer 1 --head 1" +
                             " --text '" + kFineTuneText + "' --screenshot " + png + " --frames 4",
                         dir + "/log.txt"),
              0)
        << ReadFile(dir + "/log.txt");
    const nlohmann::json meta = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
    ASSERT_TRUE(meta.is_object() && meta.contains("state")) << ReadFile(dir + "/log.txt");
    const nlohmann::json& state = meta["state"];
    EXPECT_EQ(state["comparison"], "base");
    EXPECT_EQ(state["three_way"], true);
    EXPECT_EQ(state["tab"], "Fine-tune");
    EXPECT_EQ(state["per_head_scale"], true);
    const Picture p = Load(png);
    for (const char* region : {"heatmap_ssa", "heatmap_compare", "heatmap_base", "finetune_matrix"}) {
        ASSERT_TRUE(meta["regions"].contains(region)) << region << " " << meta["regions"].dump();
        const nlohmann::json r = meta["regions"][region];
        EXPECT_GT(DistinctColours(p, r[0].get<int>(), r[1].get<int>(), r[2].get<int>(), r[3].get<int>()), 6u) << region;
    }
    EXPECT_FALSE(meta["regions"].contains("heatmap_diff")) << "three-way shows the base, not the difference";
    // The query's row as the three sides' bars, SSA | tau = 1 | base.
    ASSERT_TRUE(meta["regions"].contains("row_chart"));
    for (viz::Rgba8 colour : {viz::kSsaColor, viz::kCompareColor, viz::kBaseColor})
        EXPECT_GT(PixelsOf(p, meta["regions"]["row_chart"], colour), 50u) << int{colour.r} << "," << int{colour.g} << "," << int{colour.b};
    // Both matrices' head labels readable: the second's backing once covered the first's.
    for (const char* region : {"finetune_temperatures_labels", "finetune_drift_labels"}) {
        ASSERT_TRUE(meta["regions"].contains(region)) << region << " " << meta["regions"].dump();
        const nlohmann::json r = meta["regions"][region];
        EXPECT_GT(BrightPixels(p, r[0].get<int>(), r[1].get<int>(), r[2].get<int>(), r[3].get<int>(), 90), 10u) << region;
    }
    // --tab names the tab over three-way's Fine-tune (it was overridden); the plots there draw the base.
    if (kSanitized) return;  // the sparsity plots' base is drawn in-process by Views.ABaseIsAThirdSideInEveryView
    const std::string png_tab = dir + "/shot_tab.png";
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --model " + dir + "/ft --base " + dir + "/base --map three-way --tab sparsity" +
                             " --text 'One slope a layer.' --screenshot " + png_tab + " --frames 4",
                         dir + "/log_tab.txt"),
              0)
        << ReadFile(dir + "/log_tab.txt");
    const nlohmann::json meta_tab = nlohmann::json::parse(ReadFile(png_tab + ".json"), nullptr, false);
    ASSERT_TRUE(meta_tab.is_object() && meta_tab.contains("state")) << ReadFile(dir + "/log_tab.txt");
    EXPECT_EQ(meta_tab["state"]["tab"], "Sparsity");
    EXPECT_EQ(meta_tab["state"]["three_way"], true);
    ASSERT_TRUE(meta_tab["regions"].contains("sparsity"));
    EXPECT_GT(PixelsOf(Load(png_tab), meta_tab["regions"]["sparsity"], viz::kBaseColor), 20u) << "the base's curve and bars";
}

// Issue 34: the single map as the base and as SSA - base (--map base, base_diff; keys 6 and 7):
// the base's own map, and all that fine-tuning changed on the diverging scale; without a base the
// same flag shows SSA's map. The heads grid likewise.
TEST(EndToEnd, TheMapAndHeadsGridShowTheBaseAndWhatFineTuningChanged) {
    const std::string dir = FineTuneAndBase("e2e_base_maps");
    ASSERT_FALSE(HasFailure());
    const std::string& text = kFineTuneText;
    for (const auto& [map, base] : {std::pair<const char*, bool>{"base_diff", true}, {"base", true}, {"ssa", true}, {"base_diff", false}}) {
        if (kSanitized && (!base || std::string(map) != "base_diff")) continue;  // the base's own map: the same heatmap code on another array
        const std::string png_map = dir + "/map_" + map + (base ? "" : "_no_base") + ".png";
        ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --model " + dir + "/ft" + (base ? " --base " + dir + "/base" : "") + " --map " + map +
                                 " --layer 1 --head 1 --text '" + text + "' --screenshot " + png_map + " --frames 4",
                             dir + "/log_map.txt"),
                  0)
            << ReadFile(dir + "/log_map.txt");
        const nlohmann::json meta_map = nlohmann::json::parse(ReadFile(png_map + ".json"), nullptr, false);
        ASSERT_TRUE(meta_map.is_object() && meta_map.contains("regions")) << ReadFile(dir + "/log_map.txt");
        EXPECT_EQ(meta_map["state"]["map"], map) << "kept, shown as SSA without a base";
        const std::string shown = base ? std::string("heatmap_") + map : "heatmap_ssa";
        ASSERT_TRUE(meta_map["regions"].contains(shown)) << shown << " " << meta_map["regions"].dump();
        for (const char* other : {"heatmap_ssa", "heatmap_compare", "heatmap_diff", "heatmap_base", "heatmap_base_diff"})
            if (shown != other) {
                EXPECT_FALSE(meta_map["regions"].contains(other)) << other << " beside " << shown;
            }
        const Picture g = Load(png_map);
        const auto [red, blue] = RedAndBlue(g, meta_map["regions"][shown]);
        if (shown == "heatmap_base_diff") {
            EXPECT_GT(red, 30u) << "where the fine-tune attends more";
            EXPECT_GT(blue, 30u) << "where it attends less";
        } else {
            EXPECT_LT(red + blue, 30u) << shown << ": weights on the colour map, not a difference";
            EXPECT_GT(DistinctColours(g, meta_map["regions"][shown][0].get<int>(), meta_map["regions"][shown][1].get<int>(),
                                      meta_map["regions"][shown][2].get<int>(), meta_map["regions"][shown][3].get<int>()),
                      6u);
        }
        // The row chart reads the base's bars beside SSA's and tau = 1's in every mode with a base.
        if (base) {
            EXPECT_GT(PixelsOf(g, meta_map["regions"]["row_chart"], viz::kBaseColor), 50u) << map;
        }
    }
    // The heads grid as SSA - base (a session's grid map): every head's change from the base, on
    // the diverging scale (red and blue cells); the same session without a base shows SSA's maps.
    for (bool with_base : {true, false}) {
        if (kSanitized && !with_base) continue;
        nlohmann::json session = {{"ssaviz_session", 1}, {"model", dir + "/ft"}, {"text", text}, {"view", {{"tab", "Heads"}, {"grid_map", "base_diff"}}}};
        std::ofstream(dir + "/grid.json") << session.dump();
        const std::string png_grid = dir + (with_base ? "/grid_base.png" : "/grid_no_base.png");
        ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + dir + "/grid.json" + (with_base ? " --base " + dir + "/base" : "") +
                                 " --screenshot " + png_grid + " --frames 6",
                             dir + "/log_grid.txt"),
                  0)
            << ReadFile(dir + "/log_grid.txt");
        const nlohmann::json meta_grid = nlohmann::json::parse(ReadFile(png_grid + ".json"), nullptr, false);
        ASSERT_TRUE(meta_grid.is_object() && meta_grid.contains("regions")) << ReadFile(dir + "/log_grid.txt");
        EXPECT_EQ(meta_grid["state"]["tab"], "Heads");
        EXPECT_EQ(meta_grid["state"]["grid_map"], "base_diff") << "kept, shown as SSA without a base";
        ASSERT_TRUE(meta_grid["regions"].contains("heads")) << meta_grid["regions"].dump();
        const auto [red, blue] = RedAndBlue(Load(png_grid), meta_grid["regions"]["heads"]);
        if (with_base) {
            EXPECT_GT(red, 30u) << "where the fine-tune attends more";
            EXPECT_GT(blue, 30u) << "where it attends less";
        } else {
            EXPECT_LT(red + blue, 30u) << "SSA's own maps, not a difference";
        }
    }
}

// Issue 35 beside issue 34: the Lens tab of a fine-tune with its base, its attribution bars and
// its grid on the three sides.
TEST(EndToEnd, TheLensTabShowsTheBaseBesideAFineTune) {
    const std::string dir = FineTuneAndBase("e2e_base_lens");
    ASSERT_FALSE(HasFailure());
    const std::string& text = kFineTuneText;
    // The Lens tab beside a base: each head's part of the next token's logit on the three sides,
    // the base's bars violet beside SSA's and tau = 1's.
    {
        const std::string png_lens = dir + "/lens.png";
        ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --model " + dir + "/ft --base " + dir + "/base --lens --tab lens --query 5 --text '" +
                                 text + "' --screenshot " + png_lens + " --frames 4",
                             dir + "/log_lens.txt"),
                  0)
            << ReadFile(dir + "/log_lens.txt");
        const nlohmann::json meta_lens = nlohmann::json::parse(ReadFile(png_lens + ".json"), nullptr, false);
        ASSERT_TRUE(meta_lens.is_object() && meta_lens.contains("regions")) << ReadFile(dir + "/log_lens.txt");
        const Picture g = Load(png_lens);
        // The heads' rows, and each layer's attention and MLP totals below them: all three sides in both
        // (the layers' once showed SSA and the base only, with no tau = 1 to split their change by).
        for (const char* region : {"lens_attribution", "lens_layers"}) {
            ASSERT_TRUE(meta_lens["regions"].contains(region)) << region << " " << meta_lens["regions"].dump();
            for (viz::Rgba8 colour : {viz::kSsaColor, viz::kCompareColor, viz::kBaseColor})
                EXPECT_GT(PixelsOf(g, meta_lens["regions"][region], colour), 20u)
                    << region << " " << int{colour.r} << "," << int{colour.g} << "," << int{colour.b};
        }
    }
    // The Lens tab's grid (a session's lens_map): SSA - base colours each layer and position by how
    // much lower (blue) or higher (red) the fine-tune's loss of the next token is than its base's;
    // the base's own lens is another grid than SSA's on the same colour map; the drift (tau = 1 -
    // base) another difference than the whole change; without a base, base_diff shows SSA's.
    std::map<std::string, std::vector<uint32_t>> grids;  // the grid's pixels by run
    for (const auto& [lens_map, with_base] :
         {std::pair<const char*, bool>{"base_diff", true}, {"base", true}, {"ssa", true}, {"drift", true}, {"base_diff", false}}) {
        if (kSanitized && (!with_base || std::string(lens_map) != "base_diff")) continue;  // the base's grid: the same code on another array
        // No query selected: the attribution's column (the last) framed, which RedAndBlue passes over.
        nlohmann::json session = {{"ssaviz_session", 1}, {"model", dir + "/ft"}, {"text", text}, {"query", -1},
                                  {"view", {{"tab", "Lens"}, {"lens_map", lens_map}}}};
        std::ofstream(dir + "/lens_grid.json") << session.dump();
        const std::string run = std::string(lens_map) + (with_base ? "" : "_no_base"), png_grid = dir + "/lens_grid_" + run + ".png";
        ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + dir + "/lens_grid.json" + (with_base ? " --base " + dir + "/base" : "") +
                                 " --lens --screenshot " + png_grid + " --frames 6",
                             dir + "/log_lens_grid.txt"),
                  0)
            << ReadFile(dir + "/log_lens_grid.txt");
        const nlohmann::json meta_grid = nlohmann::json::parse(ReadFile(png_grid + ".json"), nullptr, false);
        ASSERT_TRUE(meta_grid.is_object() && meta_grid.contains("regions")) << ReadFile(dir + "/log_lens_grid.txt");
        EXPECT_EQ(meta_grid["state"]["lens_map"], lens_map) << "kept, shown as SSA without a base";
        ASSERT_TRUE(meta_grid["regions"].contains("lens_grid")) << run << " " << meta_grid["regions"].dump();
        const nlohmann::json r = meta_grid["regions"]["lens_grid"];
        const Picture g = Load(png_grid);
        const auto [red, blue] = RedAndBlue(g, r);
        if (run == "base_diff") {
            EXPECT_GT(blue, 30u) << "where the fine-tune predicts the next token better";
            EXPECT_GT(red, 30u) << "where it predicts it worse";
        } else if (run == "drift") {
            EXPECT_GT(red + blue, 30u) << "tau = 1's loss against the base's: a difference";
        } else {
            EXPECT_LT(red + blue, 30u) << run << ": p(next) on the colour map, not a difference";
        }
        std::vector<uint32_t>& pixels = grids[run];
        for (int y = std::max(0, r[1].get<int>()); y < std::min(g.height, r[1].get<int>() + r[3].get<int>()); ++y)
            for (int x = std::max(0, r[0].get<int>()); x < std::min(g.width, r[0].get<int>() + r[2].get<int>()); ++x)
                pixels.push_back(g.pixels[static_cast<size_t>(y) * g.width + x]);
    }
    auto differing = [](const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
        size_t n = a.size() == b.size() ? 0 : std::max(a.size(), b.size());
        for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] != b[i];
        return n;
    };
    if (!kSanitized) {
        EXPECT_GT(differing(grids["base"], grids["ssa"]), 200u) << "the base's lens is not SSA's";
        EXPECT_GT(differing(grids["drift"], grids["base_diff"]), 200u) << "the drift is a part of the whole change, not all of it";
        EXPECT_EQ(differing(grids["base_diff_no_base"], grids["ssa"]), 0u) << "without a base: SSA's grid";
    }
}

// The Temperatures tab beside a base that is an SSA model too draws the base's tau_q of the same
// head as pink rings; beside a vanilla base (tau = 1 throughout) it draws none.
TEST(EndToEnd, TheTemperaturesTabRingsAnSsaBasesTauQ) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_base_tau";
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const auto& [name, form, seed] : {std::tuple<const char*, const char*, const char*>{"ft", "sigmoid,shared", "1"},
                                           {"ssa_base", "sigmoid,shared", "2"}, {"vanilla_base", "none", "3"}}) {
        const std::string cmd = std::string(SSAVIZ_BINARY) + " init-random --out " + dir + "/" + name +
                                " --layers 2 --heads 2 --embd 32 --query-form " + form + " --seed " + seed;
        ASSERT_EQ(RunCommand(cmd, dir + "/init.log"), 0) << ReadFile(dir + "/init.log");
    }
    auto pink = [](const Picture& p, const nlohmann::json& r) {  // view_temperature.cpp's kOtherColor, antialiased
        size_t n = 0;
        for (int y = std::max(0, r[1].get<int>()); y < std::min(p.height, r[1].get<int>() + r[3].get<int>()); ++y)
            for (int x = std::max(0, r[0].get<int>()); x < std::min(p.width, r[0].get<int>() + r[2].get<int>()); ++x) {
                const uint32_t c = p.pixels[static_cast<size_t>(y) * p.width + x];
                const int red = c & 255, green = c >> 8 & 255, blue = c >> 16 & 255;
                n += std::abs(red - 235) < 40 && std::abs(green - 110) < 40 && std::abs(blue - 210) < 40;
            }
        return n;
    };
    for (const char* base : {"ssa_base", "vanilla_base"}) {
        const std::string png = dir + "/" + base + ".png";
        ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --model " + dir + "/ft --base " + dir + "/" + base + " --tab temperatures" +
                                 " --text 'The temperatures of a fine-tune and of its base, token by token, side by side.' --screenshot " + png +
                                 " --frames 4",
                             dir + "/log.txt"),
                  0)
            << ReadFile(dir + "/log.txt");
        const nlohmann::json meta = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
        ASSERT_TRUE(meta.is_object() && meta.contains("regions") && meta["regions"].contains("temperature")) << ReadFile(dir + "/log.txt");
        const size_t rings = pink(Load(png), meta["regions"]["temperature"]);
        if (std::string(base) == "ssa_base")
            EXPECT_GT(rings, 100u) << "the base's tau_q as rings";
        else
            EXPECT_EQ(rings, 0u) << "a vanilla base has no temperatures to draw";
    }
}

// Issue 35: --lens runs the logit lens and attribution once the text is shown, and the Lens tab
// draws its grid (each layer's prediction at each position) and the selected query's heads.
TEST(EndToEnd, TheLensTabShowsWhatEachLayerWrites) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_lens";
    fs::create_directories(dir);
    const std::string png = dir + "/shot.png";
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --model " + app::BundledModelsDir() + "/english/ssa --lens --tab lens --query 5" +
                             " --text 'Once upon a time there was a little girl who lived in a village.' --screenshot " + png + " --frames 4",
                         dir + "/log.txt"),
              0)
        << ReadFile(dir + "/log.txt");
    const nlohmann::json meta = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
    ASSERT_TRUE(meta.is_object() && meta.contains("regions")) << ReadFile(dir + "/log.txt");
    EXPECT_EQ(meta["state"]["tab"], "Lens");
    const Picture p = Load(png);
    for (const char* region : {"lens_grid", "lens_attribution", "lens_layers"}) {
        ASSERT_TRUE(meta["regions"].contains(region)) << region << " " << meta["regions"].dump();
        const nlohmann::json r = meta["regions"][region];
        EXPECT_GT(DistinctColours(p, r[0].get<int>(), r[1].get<int>(), r[2].get<int>(), r[3].get<int>()), 12u) << region;
    }
}

// The last token has no next token in the text: the Lens tab shows what each layer predicts after
// it and splits the logit of SSA's top prediction there, on every side (it showed the position
// before, unsaid). The target is `export --lens`'s lens_top.json's top token after the last layer,
// and the parts add up to the logit.
TEST(EndToEnd, TheLastTokenAttributesTheTopPrediction) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_lens_last", model = app::BundledModelsDir() + "/english/ssa";
    const std::string text = "Once upon a time there was a little girl who lived in a";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string png = dir + "/shot.png";
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --model " + model + " --tab lens --query 999 --text '" + text + "' --screenshot " + png +
                             " --frames 4",
                         dir + "/log.txt"),
              0)
        << ReadFile(dir + "/log.txt");
    const nlohmann::json meta = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
    ASSERT_TRUE(meta.is_object() && meta.contains("regions")) << ReadFile(dir + "/log.txt");
    const int T = meta["state"]["tokens"].get<int>();
    const nlohmann::json& at = meta["state"]["lens_at"];
    ASSERT_TRUE(at.is_object()) << meta["state"].dump();
    EXPECT_EQ(at["position"], T - 1);
    EXPECT_EQ(at["target"], "top");
    for (const char* region : {"lens_column", "lens_attribution", "lens_layers"}) EXPECT_TRUE(meta["regions"].contains(region)) << region;
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " export --model " + model + " --text '" + text + "' --lens --format json --out " + dir + "/export",
                         dir + "/export.txt"),
              0)
        << ReadFile(dir + "/export.txt");
    const nlohmann::json top = nlohmann::json::parse(ReadFile(dir + "/export/lens_top.json"), nullptr, false);
    ASSERT_TRUE(top.is_object()) << ReadFile(dir + "/export.txt");
    const int layers = top["layers"].get<int>();
    const int predicted = top["top"][layers - 1][T - 1][0]["id"].get<int>();
    // A session's Attribute choice at another position: the logit difference against SSA's other.
    std::ofstream(dir + "/session.json") << nlohmann::json{{"ssaviz_session", 1}, {"model", model}, {"text", text}, {"query", 3},
                                                           {"view", {{"tab", "Lens"}, {"lens_target", "next-against-other"}}}}
                                                .dump();
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + dir + "/session.json --screenshot " + dir + "/against.png --frames 4",
                         dir + "/log_against.txt"),
              0)
        << ReadFile(dir + "/log_against.txt");
    const nlohmann::json against = nlohmann::json::parse(ReadFile(dir + "/against.png.json"), nullptr, false);
    ASSERT_TRUE(against.is_object()) << ReadFile(dir + "/log_against.txt");
    EXPECT_EQ(against["state"]["lens_target"], "next-against-other");
    EXPECT_EQ(against["state"]["lens_at"]["target"], "next-against-other") << against["state"]["lens_at"].dump();
    EXPECT_GE(against["state"]["lens_at"]["versus"].get<int>(), 0);
    EXPECT_TRUE(against["regions"].contains("lens_attribution"));
    for (const char* side : {"ssa", "compare"}) {
        SCOPED_TRACE(side);
        ASSERT_TRUE(at[side].is_object()) << at.dump();
        EXPECT_EQ(at[side]["target"], predicted) << "SSA's top prediction, on every side";
        double sum = 0;
        for (const auto& part : at[side]["parts"]) sum += part.get<double>();
        EXPECT_NEAR(sum, at[side]["logit"].get<double>(), 2e-3) << "the parts add up to the logit";
    }
}

using tests::NpyFloats;

// Issue 35: before the lens is run, the Lens tab shows the selected query's column and attribution
// from the worker's kept residual stream; each layer's loss is what `export --lens` writes there.
TEST(EndToEnd, TheLensTabShowsTheSelectedQueryAtOnce) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_lens_at", model = app::BundledModelsDir() + "/english/ssa";
    const std::string text = "Once upon a time there was a little girl who lived in a village.";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string png = dir + "/shot.png";
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --model " + model + " --tab lens --query 5 --text '" + text + "' --screenshot " + png +
                             " --frames 4",
                         dir + "/log.txt"),
              0)
        << ReadFile(dir + "/log.txt");
    const nlohmann::json meta = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
    ASSERT_TRUE(meta.is_object() && meta.contains("regions")) << ReadFile(dir + "/log.txt");
    const nlohmann::json& at = meta["state"]["lens_at"];
    ASSERT_TRUE(at.is_object()) << meta["state"].dump();
    EXPECT_EQ(at["position"], 5);
    EXPECT_FALSE(meta["regions"].contains("lens_grid"));  // the whole lens was not run
    const Picture p = Load(png);
    for (const char* region : {"lens_column", "lens_attribution", "lens_layers"}) {
        ASSERT_TRUE(meta["regions"].contains(region)) << region << " " << meta["regions"].dump();
        const nlohmann::json r = meta["regions"][region];
        EXPECT_GT(DistinctColours(p, r[0].get<int>(), r[1].get<int>(), r[2].get<int>(), r[3].get<int>()), 12u) << region;
    }
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " export --model " + model + " --text '" + text + "' --lens --format npy --out " + dir + "/export",
                         dir + "/export.txt"),
              0)
        << ReadFile(dir + "/export.txt");
    for (const auto& [side, suffix] : {std::pair{"ssa", ""}, std::pair{"compare", "_compare"}}) {
        SCOPED_TRACE(side);
        const std::vector<float> lens = NpyFloats(dir + "/export/lens_loss" + suffix + ".npy");  // [L + 1, T - 1]
        const nlohmann::json loss = at[side]["loss"];
        ASSERT_TRUE(loss.is_array() && loss.size() > 1) << at.dump();
        ASSERT_EQ(lens.size() % loss.size(), 0u);
        const size_t n = lens.size() / loss.size();
        for (size_t l = 0; l < loss.size(); ++l) EXPECT_NEAR(loss[l].get<double>(), lens[l * n + 5], 1e-4) << "layer row " << l;
    }
}

// The Lens tab's grid over more positions than its pane shows scrolls to the selected query: its
// column's yellow frame is in view (it showed the first positions whatever the query).
TEST(EndToEnd, TheLensGridScrollsToTheQuery) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_lens_scroll", model = app::BundledModelsDir() + "/english/ssa";
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::string text;
    for (int i = 0; i < 12; ++i) text += "Once upon a time there was a little girl. ";
    const std::string png = dir + "/shot.png";
    for (const int query : {8, 100}) {
        ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --model " + model + " --tab lens --lens --query " + std::to_string(query) + " --text '" +
                                 text + "' --screenshot " + png + " --frames 6",
                             dir + "/log.txt"),
                  0)
            << ReadFile(dir + "/log.txt");
        const nlohmann::json meta = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
        ASSERT_TRUE(meta.is_object() && meta["regions"].contains("lens_grid")) << ReadFile(dir + "/log.txt");
        ASSERT_GT(meta["state"]["tokens"].get<int>(), 110) << "more positions than the pane shows";
        const nlohmann::json& r = meta["regions"]["lens_grid"];
        const Picture p = Load(png);
        size_t frame = 0;  // the query's column frame, IM_COL32(255, 220, 90)
        for (int y = std::max(0, r[1].get<int>() - 1); y < std::min(p.height, r[1].get<int>() + r[3].get<int>() + 1); ++y)
            for (int x = std::max(0, r[0].get<int>()); x < std::min(p.width, r[0].get<int>() + r[2].get<int>()); ++x) {
                const uint32_t c = p.pixels[static_cast<size_t>(y) * p.width + x];
                frame += std::abs(static_cast<int>(c & 255) - 255) < 20 && std::abs(static_cast<int>(c >> 8 & 255) - 220) < 20 &&
                         std::abs(static_cast<int>(c >> 16 & 255) - 90) < 30;
            }
        EXPECT_GT(frame, 40u) << "query " << query << ": its column in view";
    }
}

// The official fine-tune scripts' run folder: iter-*.pth alone, their lit_config.json and tokenizer
// in the base's folder. `--run RUN --base BASE` opens its last step and runs its timeline with the
// base's (the window asked the model before the comparison that set the base, and every step was
// refused for want of a lit_config.json); the Model panel's notes say where they came from.
TEST(EndToEnd, AnOfficialRunBesideItsBaseReadsTheBasesConfigAndTokenizer) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_official_run", run = dir + "/run";
    fs::remove_all(dir);
    fs::create_directories(run);
    for (const auto& [name, form, seed] : {std::tuple{"a", "exp_exp,none", "1"}, {"b", "exp_exp,none", "2"}, {"base", "none", "3"}}) {
        const std::string cmd = std::string(SSAVIZ_BINARY) + " init-random --out " + dir + "/" + name +
                                " --family pythia --layout lit --layers 2 --heads 2 --embd 32 --query-form " + form + " --seed " + seed;
        ASSERT_EQ(RunCommand(cmd, dir + "/init.log"), 0) << ReadFile(dir + "/init.log");
    }
    fs::copy_file(dir + "/a/lit_model.pth", run + "/iter-000100-ckpt.pth");
    fs::copy_file(dir + "/b/lit_model.pth", run + "/iter-000200-ckpt.pth");
    const std::string png = dir + "/shot.png";
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --run " + run + " --base " + dir + "/base" +
                             " --text 'The cat sat on the mat and looked at the dog.' --screenshot " + png + " --frames 4",
                         dir + "/log.txt"),
              0)
        << ReadFile(dir + "/log.txt");
    const nlohmann::json meta = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
    ASSERT_TRUE(meta.is_object() && meta.contains("state")) << ReadFile(dir + "/log.txt");
    const nlohmann::json& state = meta["state"];
    EXPECT_EQ(state["model"], run + "/iter-000200-ckpt.pth");
    EXPECT_EQ(state["timeline_steps"], nlohmann::json({100, 200})) << state["timeline_failed"].dump();
    EXPECT_TRUE(state["timeline_failed"].empty()) << state["timeline_failed"].dump();
    EXPECT_EQ(state["comparison"], "base") << state.dump();
}

// Issue 36: --run opens a training run's last step and the Run tab, runs the timeline of the text
// over every step (a truncated checkpoint named and skipped) and draws its curves and each head's
// steps to sparsity.
TEST(EndToEnd, ARunOpensAtItsLastStepWithItsCurves) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_run", run = dir + "/run";
    fs::remove_all(dir);
    fs::create_directories(run);
    for (const char* seed : {"1", "2", "3"}) {
        const std::string cmd = std::string(SSAVIZ_BINARY) + " init-random --out " + dir + "/m" + seed +
                                " --family pythia --layout lit --layers 2 --heads 2 --embd 32 --query-form exp_exp,none --seed " + seed;
        ASSERT_EQ(RunCommand(cmd, dir + "/init.log"), 0) << ReadFile(dir + "/init.log");
    }
    for (const char* f : {"lit_config.json", "vocab.json", "merges.txt"}) fs::copy_file(dir + "/m1/" + f, run + "/" + f);
    fs::copy_file(dir + "/m1/lit_model.pth", run + "/iter-000100-ckpt.pth");
    fs::copy_file(dir + "/m2/lit_model.pth", run + "/iter-000200-ckpt.pth");
    fs::copy_file(dir + "/m3/lit_model.pth", run + "/iter-000400-ckpt.pth");
    std::ofstream(run + "/iter-000300-ckpt.pth") << ReadFile(dir + "/m2/lit_model.pth").substr(0, 4000);
    const std::string png = dir + "/shot.png";
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --run " + run + " --text 'The cat sat on the mat and looked at the dog.'" +
                             " --screenshot " + png + " --frames 4",
                         dir + "/log.txt"),
              0)
        << ReadFile(dir + "/log.txt");
    const nlohmann::json meta = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
    ASSERT_TRUE(meta.is_object() && meta.contains("state")) << ReadFile(dir + "/log.txt");
    const nlohmann::json& state = meta["state"];
    EXPECT_EQ(state["tab"], "Run");
    EXPECT_EQ(state["run_step"], 400);
    EXPECT_EQ(state["model"], run + "/iter-000400-ckpt.pth");
    EXPECT_EQ(state["timeline_steps"], nlohmann::json({100, 200, 400}));
    ASSERT_EQ(state["timeline_failed"].size(), 1u);
    EXPECT_NE(state["timeline_failed"][0].get<std::string>().find("step 300 (iter-000300-ckpt.pth)"), std::string::npos);
    const Picture p = Load(png);
    for (const char* region : {"run_curves", "run_sparsity"}) {
        ASSERT_TRUE(meta["regions"].contains(region)) << region << " " << meta["regions"].dump();
        const nlohmann::json r = meta["regions"][region];
        EXPECT_GT(DistinctColours(p, r[0].get<int>(), r[1].get<int>(), r[2].get<int>(), r[3].get<int>()), 6u) << region;
    }
    EXPECT_EQ(state["run_curves"], nlohmann::json({"entropy", "js_divergence", "sink_mass", "tau_q_mean", "tau_v_mean", "loss", "tau_q_token"}))
        << "no base: none of the base's curves";
    // Against a fine-tune's base (--base DIR) the curves add JS to base and JS drift: a session's
    // run_curve js_total draws all that fine-tuning had changed by each step.
    {
        ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " init-random --out " + dir + "/base --family pythia --layout lit --layers 2 --heads 2" +
                                 " --embd 32 --query-form none --seed 4",
                             dir + "/init.log"),
                  0)
            << ReadFile(dir + "/init.log");
        std::ofstream(dir + "/base_session.json") << nlohmann::json{{"ssaviz_session", 1}, {"run", run}, {"text", "The cat sat on the mat."},
                                                                    {"view", {{"tab", "Run"}, {"run_curve", "js_total"}}}}
                                                         .dump();
        const std::string png_base = dir + "/shot_base.png";
        ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + dir + "/base_session.json --base " + dir + "/base --screenshot " +
                                 png_base + " --frames 4",
                             dir + "/base_log.txt"),
                  0)
            << ReadFile(dir + "/base_log.txt");
        const nlohmann::json meta_base = nlohmann::json::parse(ReadFile(png_base + ".json"), nullptr, false);
        ASSERT_TRUE(meta_base.is_object() && meta_base.contains("state")) << ReadFile(dir + "/base_log.txt");
        EXPECT_EQ(meta_base["state"]["comparison"], "base");
        EXPECT_EQ(meta_base["state"]["timeline_steps"], nlohmann::json({100, 200, 400}));
        EXPECT_EQ(meta_base["state"]["run_curve"], "js_total");
        EXPECT_EQ(meta_base["state"]["run_curves"],
                  nlohmann::json({"entropy", "js_divergence", "sink_mass", "tau_q_mean", "tau_v_mean", "js_total", "js_drift", "loss", "tau_q_token"}));
        ASSERT_TRUE(meta_base["regions"].contains("run_curves")) << meta_base["regions"].dump();
        const nlohmann::json r = meta_base["regions"]["run_curves"];
        EXPECT_GT(DistinctColours(Load(png_base), r[0].get<int>(), r[1].get<int>(), r[2].get<int>(), r[3].get<int>()), 6u);
    }
    // The lens curve: each step's loss read after each layer too (the Run tab's Lens, --lens, or a
    // session showing that curve); the numbers are `export --run --lens`'s.
    {
        std::ofstream(dir + "/lens_session.json") << nlohmann::json{{"ssaviz_session", 1}, {"run", run}, {"text", "The cat sat on the mat."},
                                                                    {"view", {{"tab", "Run"}, {"run_curve", "lens_loss"}}}}
                                                         .dump();
        const std::string png_lens = dir + "/shot_lens.png";
        // The session's lens curve runs the timeline with the lens, --lens or not.
        ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + dir + "/lens_session.json --screenshot " + png_lens + " --frames 4",
                             dir + "/lens_log.txt"),
                  0)
            << ReadFile(dir + "/lens_log.txt");
        const nlohmann::json meta_lens = nlohmann::json::parse(ReadFile(png_lens + ".json"), nullptr, false);
        ASSERT_TRUE(meta_lens.is_object() && meta_lens.contains("state")) << ReadFile(dir + "/lens_log.txt");
        const nlohmann::json& s = meta_lens["state"];
        EXPECT_EQ(s["timeline_lens"], true);
        EXPECT_EQ(s["timeline_steps"], nlohmann::json({100, 200, 400}));
        EXPECT_EQ(s["run_curve"], "lens_loss");
        EXPECT_EQ(s["run_curves"],
                  nlohmann::json({"entropy", "js_divergence", "sink_mass", "tau_q_mean", "tau_v_mean", "loss", "tau_q_token", "lens_loss", "lens_loss_diff"}));
        ASSERT_TRUE(meta_lens["regions"].contains("run_curves")) << meta_lens["regions"].dump();
        const nlohmann::json r = meta_lens["regions"]["run_curves"];
        EXPECT_GT(DistinctColours(Load(png_lens), r[0].get<int>(), r[1].get<int>(), r[2].get<int>(), r[3].get<int>()), 6u);
        ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " export --run " + run + " --lens --text 'The cat sat on the mat.' --out " + dir +
                                 "/lens_export --format json",
                             dir + "/lens_export_log.txt"),
                  3)  // the truncated step
            << ReadFile(dir + "/lens_export_log.txt");
        const nlohmann::json exported = nlohmann::json::parse(ReadFile(dir + "/lens_export/run.json"), nullptr, false);
        ASSERT_TRUE(exported.is_object() && exported["steps"].size() == 3u) << ReadFile(dir + "/lens_export_log.txt");
        ASSERT_EQ(s["timeline_lens_loss"].size(), 3u);
        for (size_t k = 0; k < 3; ++k) {
            ASSERT_EQ(s["timeline_lens_loss"][k].size(), 3u) << k;  // the embeddings and 2 layers
            for (size_t l = 0; l < 3; ++l)
                EXPECT_NEAR(s["timeline_lens_loss"][k][l].get<double>(), exported["steps"][k]["lens_loss"][l].get<double>(), 1e-6) << k << " " << l;
        }
        // When each layer came to predict the text, as run.json says it (-1 there: null).
        ASSERT_EQ(s["timeline_lens_halfway"].size(), 3u);
        for (size_t l = 0; l < 3; ++l) {
            const nlohmann::json& want = exported["steps_to_lens_halfway"][l];
            EXPECT_EQ(s["timeline_lens_halfway"][l].get<int64_t>(), want.is_null() ? -1 : want.get<int64_t>()) << l;
        }
        // --lens with a run shows that curve at once (no session needed).
        ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --run " + run + " --lens --text 'The cat sat on the mat.' --screenshot " + png_lens +
                                 " --frames 4",
                             dir + "/lens_flag_log.txt"),
                  0)
            << ReadFile(dir + "/lens_flag_log.txt");
        const nlohmann::json flag = nlohmann::json::parse(ReadFile(png_lens + ".json"), nullptr, false);
        ASSERT_TRUE(flag.is_object() && flag.contains("state")) << ReadFile(dir + "/lens_flag_log.txt");
        EXPECT_EQ(flag["state"]["run_curve"], "lens_loss");
        EXPECT_EQ(flag["state"]["timeline_lens"], true);
    }
    // File > Export, once the timeline ran, writes the run's curves in run/curves/: the same bytes as
    // `export --run` draws on the same text and comparison, and the Run tab's token curve, its token
    // and head named (the window saved no curve: only `export --run` did, without that one).
    {
        const std::string gui = dir + "/gui_export", cli = dir + "/cli_export";
        fs::remove_all(gui), fs::remove_all(cli);
        // One compute thread each (the window keeps a core to itself): the same sums, the same bytes.
        const std::string one = "SSAVIZ_THREADS=1 ";
        std::ofstream(dir + "/export_session.json") << nlohmann::json{{"ssaviz_session", 1}, {"run", run}, {"text", "The cat sat on the mat."},
                                                                      {"export", {{"formats", {"png", "svg"}}}}}
                                                           .dump();
        ASSERT_EQ(RunCommand(one + SSAVIZ_BINARY + " --session " + dir + "/export_session.json --export-to " + gui, dir + "/gui_export.txt"),
                  3)  // the truncated step left out of the timeline, as export --run's exit code says it
            << ReadFile(dir + "/gui_export.txt");
        ASSERT_EQ(RunCommand(one + SSAVIZ_BINARY + " export --run " + run + " --text 'The cat sat on the mat.' --format png,svg --out " + cli,
                             dir + "/cli_export.txt"),
                  3)  // the truncated step
            << ReadFile(dir + "/cli_export.txt");
        for (const char* key : {"entropy", "js_divergence", "sink_mass", "tau_q_mean", "tau_v_mean", "loss"})
            for (const char* ext : {".png", ".svg"}) {
                const std::string mine = ReadFile(gui + "/run/curves/" + key + ext);
                EXPECT_FALSE(mine.empty()) << key << ext;
                EXPECT_TRUE(mine == ReadFile(cli + "/curves/" + key + ext)) << key << ext;
            }
        const std::string token = ReadFile(gui + "/run/curves/tau_q_token.svg");
        EXPECT_NE(token.find("tau_q of token "), std::string::npos) << token.substr(0, 2000);
        EXPECT_NE(token.find(" in L0 H0 against training step"), std::string::npos) << token.substr(0, 2000);
        EXPECT_TRUE(fs::is_regular_file(gui + "/run/curves/tau_q_token.png"));
        EXPECT_FALSE(fs::exists(cli + "/curves/tau_q_token.svg")) << "the command line follows no token";
        EXPECT_TRUE(fs::is_regular_file(gui + "/highlight.svg")) << "the shown step's own figures beside";
        // And its numbers, export --run's bytes (the window wrote only the curves); run.json is
        // export --run's alone (its rows are each step's whole summary).
        for (const char* name : {"run.csv", "tau_q.npy"}) {
            const std::string mine = ReadFile(gui + "/run/" + name);
            EXPECT_GT(mine.size(), 100u) << name;
            EXPECT_TRUE(mine == ReadFile(cli + "/" + name)) << name;
        }
        EXPECT_FALSE(fs::exists(gui + "/run/run_lens.csv")) << "no lens ran";
        // With the lens, run_lens.csv too; without PNG or SVG, the numbers alone.
        fs::remove_all(gui), fs::remove_all(cli + "_lens");
        std::ofstream(dir + "/export_lens_session.json") << nlohmann::json{{"ssaviz_session", 1}, {"run", run}, {"text", "The cat sat on the mat."},
                                                                           {"view", {{"tab", "Run"}, {"run_curve", "lens_loss"}}},
                                                                           {"export", {{"formats", {"csv"}}}}}
                                                                .dump();
        ASSERT_EQ(RunCommand(one + SSAVIZ_BINARY + " --session " + dir + "/export_lens_session.json --export-to " + gui, dir + "/gui_export.txt"), 3)
            << ReadFile(dir + "/gui_export.txt");  // the truncated step left out, as export --run's exit code says
        ASSERT_EQ(RunCommand(one + SSAVIZ_BINARY + " export --run " + run + " --lens --text 'The cat sat on the mat.' --format csv --out " + cli + "_lens",
                             dir + "/cli_export.txt"),
                  3)
            << ReadFile(dir + "/cli_export.txt");
        for (const char* name : {"run.csv", "run_lens.csv", "tau_q.npy"}) {
            const std::string mine = ReadFile(gui + "/run/" + name);
            EXPECT_GT(mine.size(), 100u) << name << ": " << ReadFile(dir + "/gui_export.txt");
            EXPECT_TRUE(mine == ReadFile(cli + "_lens/" + name)) << name;
        }
        EXPECT_FALSE(fs::exists(gui + "/run/curves")) << "no figure format asked for";
        // Beside --rank-heads, and beside --global-pass from the layer-local comparison, the timeline
        // runs too (it was stopped before its first step, and never run again), against the
        // comparison shown: the curves are export --run's with tau = 1.
        for (const std::string& flags : {std::string(" --rank-heads"), std::string(" --compare local --global-pass")}) {
            SCOPED_TRACE(flags);
            fs::remove_all(gui);
            ASSERT_EQ(RunCommand(one + SSAVIZ_BINARY + " --session " + dir + "/export_session.json" + flags + " --export-to " + gui, dir + "/gui_export.txt"), 3)
                << ReadFile(dir + "/gui_export.txt");
            const std::string mine = ReadFile(gui + "/run/curves/js_divergence.svg");
            EXPECT_FALSE(mine.empty()) << ReadFile(dir + "/gui_export.txt");
            EXPECT_TRUE(mine == ReadFile(cli + "/curves/js_divergence.svg"));
        }
        // Beside a twin, the timeline's steps compare with the twin, as export --run --compare DIR does
        // (they ran against tau = 1, and the curves were never offered).
        ASSERT_EQ(RunCommand(one + SSAVIZ_BINARY + " export --run " + run + " --compare " + dir + "/m2 --text 'The cat sat on the mat.' --format svg --out " +
                                 cli + "_twin",
                             dir + "/cli_twin.txt"),
                  3)
            << ReadFile(dir + "/cli_twin.txt");
        fs::remove_all(gui);
        ASSERT_EQ(RunCommand(one + SSAVIZ_BINARY + " --session " + dir + "/export_session.json --compare " + dir + "/m2 --export-to " + gui, dir + "/gui_export.txt"), 3)
            << ReadFile(dir + "/gui_export.txt");
        EXPECT_FALSE(ReadFile(gui + "/run/curves/js_divergence.svg").empty()) << ReadFile(dir + "/gui_export.txt");
        EXPECT_TRUE(ReadFile(gui + "/run/curves/js_divergence.svg") == ReadFile(cli + "_twin/curves/js_divergence.svg"));
        // After Continue the shown tokens are not the text's tokenised anew: no curves, and the export says why.
        fs::remove_all(gui);
        const int continued = RunCommand(one + SSAVIZ_BINARY + " --session " + dir + "/export_session.json --continue 3 --export-to " + gui, dir + "/gui_export.txt");
        EXPECT_EQ(continued, fs::exists(gui + "/run/curves/entropy.svg") ? 3 : 0) << ReadFile(dir + "/gui_export.txt");  // 3: the timeline's left-out step
        if (!fs::exists(gui + "/run/curves/entropy.svg")) {
            EXPECT_NE(ReadFile(dir + "/gui_export.txt").find("not the run's timeline: it ran on the text tokenised anew"), std::string::npos)
                << ReadFile(dir + "/gui_export.txt");
        }
        // Without a session, the dialog's first settings (it was refused: "--export-to needs --session").
        fs::remove_all(gui);
        ASSERT_EQ(RunCommand(one + SSAVIZ_BINARY + " --run " + run + " --text 'The cat sat on the mat.' --export-to " + gui, dir + "/gui_export.txt"), 3)
            << ReadFile(dir + "/gui_export.txt");
        for (const char* f : {"/run/curves/entropy.svg", "/run/curves/tau_q_token.png", "/highlight.html", "/heatmaps/L0_H0.svg"})
            EXPECT_TRUE(fs::is_regular_file(gui + f)) << f;
        EXPECT_TRUE(ReadFile(gui + "/run/curves/entropy.svg") == ReadFile(cli + "/curves/entropy.svg"));
    }
    // Train keeps its runs in OUT/run/: the window's run/curves/ there made train --resume refuse the
    // folder, so --export-to OUT with OUT/run/ssa open is refused before the window opens.
    fs::create_directories(dir + "/train/run");
    fs::copy(run, dir + "/train/run/ssa", fs::copy_options::recursive);
    EXPECT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --run " + dir + "/train/run/ssa --text 'The cat' --export-to " + dir + "/train",
                         dir + "/train_log.txt"),
              2);
    EXPECT_NE(ReadFile(dir + "/train_log.txt").find("', a folder the export writes"), std::string::npos) << ReadFile(dir + "/train_log.txt");
    EXPECT_FALSE(fs::exists(dir + "/train/run/curves"));
    // A link at run/, or a FIFO where a curve goes, is refused before the window opens, exit 2, as a
    // link at heatmaps/ is (it was exit 1 once the whole timeline had run).
    fs::create_directories(dir + "/linked"), fs::create_directories(dir + "/fifo/run/curves"), fs::create_directories(dir + "/target");
    fs::create_directory_symlink(dir + "/target", dir + "/linked/run");
    ASSERT_EQ(mkfifo((dir + "/fifo/run/curves/loss.png").c_str(), 0600), 0);
    // A run's example opens its run too: checked the same (it was not: found after the timeline).
    for (const std::string& opens : {" --run " + run + " --text 'The cat'", std::string(" --example graph-run")})
        for (const char* out : {"/linked", "/fifo"}) {
            EXPECT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + opens + " --export-to " + dir + out, dir + "/place_log.txt"), 2)
                << opens << out << ": " << ReadFile(dir + "/place_log.txt");
            EXPECT_NE(ReadFile(dir + "/place_log.txt").find("--export-to: "), std::string::npos) << ReadFile(dir + "/place_log.txt");
        }
    EXPECT_TRUE(fs::is_empty(dir + "/target"));
    // A session keeps the run and the step shown: it opens there again, on the session's tab.
    std::ofstream(dir + "/session.json") << nlohmann::json{{"ssaviz_session", 1}, {"run", run}, {"model", run + "/iter-000200-ckpt.pth"},
                                                           {"text", "The cat sat on the mat."}, {"view", {{"tab", "Matrix"}}}}
                                                .dump();
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + dir + "/session.json --screenshot " + png + " --frames 4",
                         dir + "/session_log.txt"),
              0)
        << ReadFile(dir + "/session_log.txt");
    const nlohmann::json again = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
    ASSERT_TRUE(again.is_object() && again.contains("state")) << ReadFile(dir + "/session_log.txt");
    EXPECT_EQ(again["state"]["run_step"], 200);
    EXPECT_EQ(again["state"]["model"], run + "/iter-000200-ckpt.pth");
    EXPECT_EQ(again["state"]["tab"], "Matrix");
    EXPECT_EQ(again["state"]["timeline_steps"], nlohmann::json({100, 200, 400}));
    // A text of one token has no curve: the Run tab says so, in export --run's words, where the
    // curves were empty.
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --run " + run + " --text 'The' --screenshot " + png + " --frames 4",
                         dir + "/one_log.txt"),
              0)
        << ReadFile(dir + "/one_log.txt");
    const nlohmann::json one = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
    ASSERT_TRUE(one.is_object() && one.contains("state")) << ReadFile(dir + "/one_log.txt");
    EXPECT_EQ(one["state"]["tokens"].size(), 1u);
    EXPECT_TRUE(one["state"]["timeline_steps"].empty()) << one["state"]["timeline_steps"];
    EXPECT_EQ(one["state"]["timeline_failed"], nlohmann::json({app::kRunNeedsTwoTokens}));
    // Not a run: one line, before any window.
    EXPECT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --run " + dir + "/m1 --frames 2", dir + "/bad.txt"), 3);
    EXPECT_NE(ReadFile(dir + "/bad.txt").find("holds no checkpoints"), std::string::npos) << ReadFile(dir + "/bad.txt");
}

// A step whose analysis overflows (a run that diverged: finite weights, tau_q past float range) is
// named and left out of the timeline, as `export --run` leaves it out; shown, File > Export refuses
// it with exit 3 as `ssaviz export` does (it went into the curves, a finite JS beside a NaN entropy,
// and the export said exit 1).
TEST(EndToEnd, ARunStepThatOverflowsIsNamedAndLeftOut) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_run_overflow", run = dir + "/run";
    fs::remove_all(dir);
    fs::create_directories(run);
    for (const char* step : {"100", "200", "300"}) {
        const std::string cmd = std::string(SSAVIZ_BINARY) + " init-random --out " + run + "/checkpoint-" + step +
                                " --family pythia --layers 2 --heads 2 --embd 16 --query-form linear,none --seed " + step;
        ASSERT_EQ(RunCommand(cmd, dir + "/init.log"), 0) << ReadFile(dir + "/init.log");
    }
    // Each layer's beta (read as linear) at 3e38: tau_q overflows.
    const std::string path = run + "/checkpoint-200/model.safetensors";
    std::string bytes = ReadFile(path);
    ASSERT_GT(bytes.size(), 8u);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
    size_t patched = 0;
    for (const auto& [name, meta] : header.items())
        if (name.size() > 9 && name.compare(name.size() - 9, 9, "attn.beta") == 0) {
            const float huge = 3e38f;
            std::memcpy(&bytes[8 + n + meta["data_offsets"][0].get<size_t>()], &huge, 4);
            ++patched;
        }
    ASSERT_EQ(patched, 2u);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    const std::string png = dir + "/shot.png", text = " --text 'one two three four five six seven eight'";
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --run " + run + " --query-form linear,none" + text + " --screenshot " + png + " --frames 4",
                         dir + "/log.txt"),
              0)
        << ReadFile(dir + "/log.txt");
    const nlohmann::json meta = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
    ASSERT_TRUE(meta.is_object() && meta.contains("state")) << ReadFile(dir + "/log.txt");
    EXPECT_EQ(meta["state"]["timeline_steps"], nlohmann::json({100, 300}));
    ASSERT_EQ(meta["state"]["timeline_failed"].size(), 1u);
    const std::string failed = meta["state"]["timeline_failed"][0];
    EXPECT_NE(failed.find("step 200 (checkpoint-200)"), std::string::npos) << failed;
    EXPECT_NE(failed.find("not finite"), std::string::npos) << failed;
    // That step shown: File > Export refuses it, exit 3, nothing written.
    std::ofstream(dir + "/session.json") << nlohmann::json{{"ssaviz_session", 1}, {"run", run}, {"model", run + "/checkpoint-200"},
                                                           {"text", "one two three four five six seven eight"}}
                                                .dump();
    EXPECT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + dir + "/session.json --query-form linear,none --export-to " + dir + "/out",
                         dir + "/export_log.txt"),
              3)
        << ReadFile(dir + "/export_log.txt");
    EXPECT_NE(ReadFile(dir + "/export_log.txt").find("not finite"), std::string::npos) << ReadFile(dir + "/export_log.txt");
    EXPECT_FALSE(fs::exists(dir + "/out/metrics.json"));
    // Opened alone, its screenshot is taken and the window says it as export does, exit 3 (a base
    // that overflows read "base: -nan" beside "ready", exit 0).
    EXPECT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --model " + run + "/checkpoint-200 --query-form linear,none" + text + " --screenshot " + dir +
                             "/alone.png --frames 4",
                         dir + "/alone_log.txt"),
              3)
        << ReadFile(dir + "/alone_log.txt");
    EXPECT_NE(ReadFile(dir + "/alone_log.txt").find("ssaviz: the analysis is not finite ("), std::string::npos) << ReadFile(dir + "/alone_log.txt");
    EXPECT_TRUE(fs::exists(dir + "/alone.png"));
}

// Examples > Graph training run: the shipped run opens at its last step with the vanilla run
// beside it, both timelines run to the end, and the curves and the steps-to-sparsity table are drawn.
TEST(EndToEnd, TheGraphRunExampleShowsBothRuns) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_graph_run";
    fs::create_directories(dir);
    const std::string png = dir + "/shot.png";
    fs::remove(png);
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --example graph-run --screenshot " + png + " --frames 4", dir + "/log.txt"), 0)
        << ReadFile(dir + "/log.txt");
    const nlohmann::json meta = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
    ASSERT_TRUE(meta.is_object() && meta.contains("state")) << ReadFile(dir + "/log.txt");
    const nlohmann::json& state = meta["state"];
    EXPECT_EQ(state["tab"], "Run");
    EXPECT_EQ(state["run_step"], 300);
    EXPECT_NE(state["model"].get<std::string>().find("graph-run/ssa/checkpoint-300"), std::string::npos) << state["model"];
    ASSERT_EQ(state["timeline_steps"].size(), 61u);
    EXPECT_EQ(state["compare_timeline_steps"], state["timeline_steps"]) << "the vanilla run's steps are the SSA run's";
    EXPECT_TRUE(state["timeline_failed"].empty()) << state["timeline_failed"];
    const Picture p = Load(png);
    for (const char* region : {"run_curves", "run_sparsity"}) {
        ASSERT_TRUE(meta["regions"].contains(region)) << region << " " << meta["regions"].dump();
        const nlohmann::json r = meta["regions"][region];
        EXPECT_GT(DistinctColours(p, r[0].get<int>(), r[1].get<int>(), r[2].get<int>(), r[3].get<int>()), 6u) << region;
    }
}

// Issue 38: no display is one line (GLFW's reason inside ssaviz's), not GLFW's line and then ours.
TEST(EndToEnd, NoDisplayIsOneLine) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_no_display";
    fs::create_directories(dir);
    const int code = RunCommand("env -u DISPLAY -u WAYLAND_DISPLAY " + std::string(SSAVIZ_BINARY) + " --frames 2", dir + "/log.txt");
    const std::string log = ReadFile(dir + "/log.txt");
    EXPECT_EQ(code, 1) << log;
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
    EXPECT_EQ(log.rfind("ssaviz: cannot open a window (GLFW error", 0), 0u) << log;
}

// --device cuda on a machine without CUDA: the window exits with the command line's code for it
// (2, a usage error) and its one-line message, not 3 (a bad model).
TEST(EndToEnd, CudaWithoutAGpuExitsAsTheCommandLineDoes) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_cuda";
    fs::create_directories(dir);
    const std::string log = dir + "/log.txt";
    const int code = RunCommand(std::string(SSAVIZ_BINARY) + " --device cuda --screenshot " + dir + "/shot.png --frames 4", log);
    if (code == 0) GTEST_SKIP() << "this machine has a CUDA device";
    EXPECT_EQ(code, 2) << ReadFile(log);
    EXPECT_NE(ReadFile(log).find("no CUDA device"), std::string::npos) << ReadFile(log);
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
std::string WriteSession(const std::string& dir, const std::string& compare = "vanilla", const std::string& interventions = "",
                         const std::string& highlight = "tau_q") {
    const std::string model = (fs::path(SSAVIZ_BINARY).parent_path() / "models" / "default").string();
    nlohmann::json session = {
        {"ssaviz_session", 1},
        {"model", model},
        {"compare", compare},
        {"interventions", interventions},
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
          {"highlight", highlight},
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
void ExpectGuiExportEqualsCommandLine(const std::string& name, const std::string& compare, const std::string& ablate = "",
                                      const std::string& highlight = "tau_q", const std::string& lens = "") {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/" + name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string session = WriteSession(dir, compare, ablate, highlight), gui_out = dir + "/gui", cli_out = dir + "/cli";
    // Both on one compute thread: OpenBLAS's sums depend on its thread count (by ~2e-6 on a
    // 2-core AMD EPYC with its Haswell kernels), and the window leaves a core to the UI.
    struct OneThread {
        OneThread() { setenv("SSAVIZ_THREADS", "1", 1); }
        ~OneThread() { unsetenv("SSAVIZ_THREADS"); }
    } one_thread;
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + session + lens + " --export-to " + gui_out, dir + "/gui.log"), 0)
        << ReadFile(dir + "/gui.log");
    std::ofstream(dir + "/text.txt") << kSessionText;
    const std::string model = (fs::path(SSAVIZ_BINARY).parent_path() / "models" / "default").string();
    const std::string cli = std::string(SSAVIZ_BINARY) + " export --model " + model + " --text-file " + dir + "/text.txt --out " + cli_out +
                            " --format json,npy,csv,png,svg,html --maps ssa,vanilla,diff --layers 1 --heads 0,2 --colormap magma --log"
                            " --size 256 --highlight " + highlight + " --highlight-scope 1,2 --sink-eps 0.35 --compare " + compare +
                            (ablate.empty() ? "" : " --ablate " + ablate) + lens +
                            (lens.empty() ? "" : " --dla-position 5");  // the session's query: the Lens tab's attribution
    ASSERT_EQ(RunCommand(cli, dir + "/cli.log"), 0) << ReadFile(dir + "/cli.log");
    const std::vector<std::string> files = FilesUnder(gui_out);
    EXPECT_EQ(files, FilesUnder(cli_out));
    EXPECT_GT(files.size(), 30u);
    for (const std::string& f : files)
        EXPECT_TRUE(ReadFile(gui_out + "/" + f) == ReadFile(cli_out + "/" + f)) << f << " differs between the GUI and the command line";
    const nlohmann::json metrics = nlohmann::json::parse(ReadFile(gui_out + "/metrics.json"), nullptr, false);
    EXPECT_EQ(metrics.value("comparison_kind", ""), compare == "local" ? "local" : compare == "unedited" ? "unedited" : "tau1");
}

TEST(EndToEnd, GuiExportEqualsCommandLineExport) { ExpectGuiExportEqualsCommandLine("e2e_export", "vanilla"); }

// With the heads ranked (What-ifs, here --rank-heads), the window's export writes the ranking's files
// too, each head's part the one `export --rank-heads` measures (it dropped --rank-heads silently).
TEST(EndToEnd, GuiExportWithTheRankingWritesItsFiles) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_export_ranked";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string session = WriteSession(dir);
    struct OneThread {
        OneThread() { setenv("SSAVIZ_THREADS", "1", 1); }
        ~OneThread() { unsetenv("SSAVIZ_THREADS"); }
    } one_thread;
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + session + " --rank-heads --export-to " + dir + "/gui", dir + "/gui.log"), 0)
        << ReadFile(dir + "/gui.log");
    std::ofstream(dir + "/text.txt") << kSessionText;
    const std::string model = (fs::path(SSAVIZ_BINARY).parent_path() / "models" / "default").string();
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " export --model " + model + " --text-file " + dir + "/text.txt --out " + dir +
                             "/cli --format json --rank-heads",
                         dir + "/cli.log"),
              0)
        << ReadFile(dir + "/cli.log");
    const auto gui = nlohmann::json::parse(ReadFile(dir + "/gui/head_impacts.json"), nullptr, false),
               cli = nlohmann::json::parse(ReadFile(dir + "/cli/head_impacts.json"), nullptr, false);
    ASSERT_TRUE(gui.is_object() && cli.is_object()) << ReadFile(dir + "/gui.log");
    EXPECT_TRUE(fs::exists(dir + "/gui/head_impacts.png"));
    EXPECT_NEAR(gui["baseline"].get<double>(), cli["baseline"].get<double>(), 1e-6);
    ASSERT_EQ(gui["part"].size(), cli["part"].size());
    // The window's ranking splits each head's part into tau_q's and tau_v's as the command line's does
    // (it left them null).
    for (const char* key : {"part", "part_tau_q", "part_tau_v"})
        for (size_t l = 0; l < cli[key].size(); ++l)
            for (size_t h = 0; h < cli[key][l].size(); ++h)
                EXPECT_NEAR(gui[key][l][h].get<double>(), cli[key][l][h].get<double>(), 1e-6) << key << " " << l << " " << h;
}

// Beside a base (the licenses example's), the window's ranking measures the drift part by part too,
// the numbers `export --rank-heads` writes.
TEST(EndToEnd, GuiRankingBesideABaseHoldsTheDrift) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_ranked_drift";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string models = app::BundledModelsDir(), text = "Permission is granted to copy and distribute this license.";
    std::ofstream(dir + "/session.json") << nlohmann::json{{"ssaviz_session", 1}, {"model", models + "/licenses/ssa"}, {"compare", "base"},
                                                           {"text", text}, {"export", {{"formats", {"json"}}}}}
                                                .dump();
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + dir + "/session.json --rank-heads --export-to " + dir + "/gui", dir + "/gui.log"), 0)
        << ReadFile(dir + "/gui.log");
    std::ofstream(dir + "/text.txt") << text;
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " export --model " + models + "/licenses/ssa --compare base --text-file " + dir +
                             "/text.txt --out " + dir + "/cli --format json --rank-heads",
                         dir + "/cli.log"),
              0)
        << ReadFile(dir + "/cli.log");
    const auto gui = nlohmann::json::parse(ReadFile(dir + "/gui/head_impacts.json"), nullptr, false),
               cli = nlohmann::json::parse(ReadFile(dir + "/cli/head_impacts.json"), nullptr, false);
    ASSERT_TRUE(gui.is_object() && cli.is_object()) << ReadFile(dir + "/gui.log");
    ASSERT_TRUE(gui["drift"].is_object() && cli["drift"].is_object());
    EXPECT_NEAR(gui["drift"]["all"].get<double>(), cli["drift"]["all"].get<double>(), 1e-6);
    for (size_t l = 0; l < cli["drift"]["heads"].size(); ++l) {
        EXPECT_NEAR(gui["drift"]["mlp"][l].get<double>(), cli["drift"]["mlp"][l].get<double>(), 1e-6) << l;
        for (size_t h = 0; h < cli["drift"]["heads"][l].size(); ++h)
            EXPECT_NEAR(gui["drift"]["heads"][l][h].get<double>(), cli["drift"]["heads"][l][h].get<double>(), 1e-6) << l << " " << h;
    }

    // The What-ifs tab's grids of the same parts token by token (a session's "ranking"): each head's
    // temperatures' part of each token's loss, and the drift's along its path from the embeddings up
    // then every weight's, or each part's alone. Every cell well off 0 on the scale is blue where head_impacts_tokens.npy
    // and head_impacts_drift_tokens.npy (the command line's) say the part lowered the loss, red where it raised it.
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " export --model " + models + "/licenses/ssa --compare base --text-file " + dir +
                             "/text.txt --out " + dir + "/npy --format npy --rank-heads",
                         dir + "/npy.log"),
              0)
        << ReadFile(dir + "/npy.log");
    const int L = static_cast<int>(cli["part"].size()), H = static_cast<int>(cli["part"][0].size());
    for (const char* view : {"tokens", "drift", "drift-parts"}) {
        const bool heads = std::string(view) == "tokens";
        // [3, L, H, n]: the first slab both temperatures'; [rows, n]: none, the heads', each layer's
        // attention and MLP, the embeddings', every weight's, then the path's 1 + 2 L up and 1 + 2 L down.
        const std::vector<float> all = NpyFloats(dir + "/npy/" + (heads ? "head_impacts_tokens.npy" : "head_impacts_drift_tokens.npy"));
        const int n = static_cast<int>(all.size() / (heads ? 3 * L * H : 1 + L * H + 2 * L + 2 + 2 * (1 + 2 * L)));
        ASSERT_GT(n, 5) << view;
        std::vector<float> cells;  // the grid's rows, as the window draws them
        if (heads) {
            cells.assign(all.begin(), all.begin() + static_cast<size_t>(L) * H * n);
        } else if (std::string(view) == "drift-parts") {  // each part alone: the rows after "none", up to every weight's
            cells.assign(all.begin() + n, all.begin() + static_cast<size_t>(1 + L * H + 2 * L + 2) * n);
        } else {
            const size_t path = static_cast<size_t>(1 + L * H + 2 * L + 2) * n, every = static_cast<size_t>(1 + L * H + 2 * L + 1) * n;
            cells.assign(all.begin() + path, all.begin() + path + static_cast<size_t>(1 + 2 * L) * n);
            cells.insert(cells.end(), all.begin() + every, all.begin() + every + n);
        }
        const int rows = static_cast<int>(cells.size() / n);
        const float most = app::DivergingScaleOf(cells).most;
        std::ofstream(dir + "/grid.json") << nlohmann::json{{"ssaviz_session", 1}, {"model", models + "/licenses/ssa"}, {"compare", "base"},
                                                            {"text", text}, {"query", -1}, {"view", {{"tab", "What-ifs"}, {"ranking", view}}}}
                                                 .dump();
        const std::string png = dir + "/grid_" + view + ".png";
        ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + dir + "/grid.json --rank-heads --screenshot " + png + " --frames 6",
                             dir + "/grid.log"),
                  0)
            << ReadFile(dir + "/grid.log");
        const nlohmann::json meta = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
        ASSERT_TRUE(meta.is_object() && meta["regions"].contains("ranking_grid")) << ReadFile(dir + "/grid.log");
        EXPECT_EQ(meta["state"]["ranking"], view);
        const nlohmann::json& r = meta["regions"]["ranking_grid"];
        const Picture g = Load(png);
        const double x0 = r[0].get<double>(), y0 = r[1].get<double>(), w = r[2].get<double>() / n, h = r[3].get<double>() / rows;
        size_t checked = 0;
        for (int row = 0; row < rows; ++row)
            for (int t = 0; t < n; ++t) {
                const float v = cells[static_cast<size_t>(row) * n + t];
                if (!(std::abs(v) > 0.4f * most)) continue;
                const int x = static_cast<int>(x0 + (t + 0.4) * w), y = static_cast<int>(y0 + (row + 0.4) * h);
                ASSERT_TRUE(x >= 0 && y >= 0 && x < g.width && y < g.height) << view;
                const uint32_t c = g.pixels[static_cast<size_t>(y) * g.width + x];
                const int red = c & 255, blue = c >> 16 & 255;
                EXPECT_TRUE(v < 0 ? blue > red + 40 : red > blue + 40) << view << " row " << row << " token " << t + 1 << ": " << v << " drawn " << red << "," << blue;
                ++checked;
            }
        EXPECT_GT(checked, heads ? 20u : 5u) << view;  // 16 rows and 10 of ~12 tokens
    }
}

// --continue N beside --rank-heads: the heads are ranked on the text Continue leaves, once it is done
// (Continue stopped the ranking after its first head, which was of the text before it, and the
// table went on showing that text's baseline).
TEST(EndToEnd, ContinueThenTheRankingOfTheTextItLeaves) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_continue_ranked";
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir + "/session.json") << nlohmann::json{{"ssaviz_session", 1}, {"model", app::BundledModelsDir() + "/licenses/ssa"},
                                                           {"compare", "base"}, {"text", "Permission is granted to copy"},
                                                           {"export", {{"formats", {"json"}}}}}
                                                .dump();
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + dir + "/session.json --continue 3 --rank-heads --export-to " + dir + "/out",
                         dir + "/log.txt"),
              0)
        << ReadFile(dir + "/log.txt");
    const auto impacts = nlohmann::json::parse(ReadFile(dir + "/out/head_impacts.json"), nullptr, false),
               metrics = nlohmann::json::parse(ReadFile(dir + "/out/metrics.json"), nullptr, false),
               tokens = nlohmann::json::parse(ReadFile(dir + "/out/tokens.json"), nullptr, false);
    ASSERT_TRUE(impacts.is_object() && metrics.is_object() && tokens.is_object()) << ReadFile(dir + "/log.txt");
    EXPECT_EQ(impacts["complete"], true) << "every head measured";
    EXPECT_NEAR(impacts["baseline"].get<double>(), metrics["loss"]["ssa"].get<double>(), 1e-6) << "the loss of the text shown";
    EXPECT_GE(tokens["n_tokens"].get<int>(), 8) << "the session's 5 or so tokens and Continue's 3";
}

// With the lens run (the Lens tab's, here --lens), the window's export writes its files and figures
// too, the same bytes as `export --lens` (it wrote none: the lens was only the command line's).
TEST(EndToEnd, GuiExportWithTheLensEqualsCommandLineExport) {
    ExpectGuiExportEqualsCommandLine("e2e_export_lens", "vanilla", "", "tau_q", " --lens");
    for (const char* f : {"lens_loss.npy", "lens_top_compare.json", "dla.npy", "lens_diff.png", "dla_bars.svg"})
        EXPECT_TRUE(fs::is_regular_file(std::string(SSAVIZ_TEST_OUT) + "/e2e_export_lens/gui/" + f)) << f;
    // The attribution figures at the selected query (5: the token after it, 6), as the Lens tab shows it.
    EXPECT_NE(ReadFile(std::string(SSAVIZ_TEST_OUT) + "/e2e_export_lens/gui/dla_bars.svg").find("token 6 "), std::string::npos);
}

// The layer-local tau = 1 comparison chosen in a session reaches the window's engine.
TEST(EndToEnd, GuiExportEqualsCommandLineExportLayerLocal) { ExpectGuiExportEqualsCommandLine("e2e_export_local", "local"); }

// A big model (--big-model lowers the line to the default model's size, so that the test stays
// small) opens with the layer-local comparison, and the window says so; --global-pass (Ctrl+T's
// request, once the first analysis is shown) then runs the global tau = 1 pass, whose analysis
// the window shows with the comparison's own predictions. Under the line the default is global.
TEST(EndToEnd, ABigModelOpensLayerLocalAndRunsTheGlobalPassOnRequest) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_big_model";
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto shown = [&](const std::string& name, const std::string& flags) { return ShownState(dir, name, flags); };
    const nlohmann::json big = shown("big", "--big-model 1");
    EXPECT_EQ(big["big_model"], true);
    EXPECT_EQ(big["comparison"], "local");
    const nlohmann::json global = shown("global", "--big-model 1 --global-pass");
    EXPECT_EQ(global["big_model"], true);
    EXPECT_EQ(global["comparison"], "tau1");
    const nlohmann::json small = shown("small", "");
    EXPECT_EQ(small["big_model"], false);
    EXPECT_EQ(small["comparison"], "tau1");
}

// Continue in the window (--continue N at start, as Ctrl+G) appends the tokens `ssaviz generate`
// prints for the same text: greedy, one incremental analysis a token. The window's export then
// holds the continued text.
TEST(EndToEnd, ContinueInTheWindowEqualsGenerate) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_continue";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string session = WriteSession(dir), out = dir + "/gui";
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --session " + session + " --continue 6 --export-to " + out, dir + "/gui.log"), 0)
        << ReadFile(dir + "/gui.log");
    const nlohmann::json tokens = nlohmann::json::parse(ReadFile(out + "/tokens.json"), nullptr, false);
    ASSERT_TRUE(tokens.is_object()) << ReadFile(dir + "/gui.log");
    std::ofstream(dir + "/text.txt") << kSessionText;
    const std::string model = (fs::path(SSAVIZ_BINARY).parent_path() / "models" / "default").string();
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " generate --model " + model + " --text-file " + dir + "/text.txt --tokens 6 --json",
                         dir + "/generate.log"),
              0)
        << ReadFile(dir + "/generate.log");
    // The log holds stdout (the JSON line) and stderr (a progress bar).
    const std::string log = ReadFile(dir + "/generate.log");
    const size_t line = log.find("{\"");
    ASSERT_NE(line, std::string::npos) << log;
    const nlohmann::json generated = nlohmann::json::parse(log.substr(line, log.find('\n', line) - line), nullptr, false);
    ASSERT_TRUE(generated.is_object()) << log;
    const std::vector<int> ids = tokens["ids"].get<std::vector<int>>();
    const size_t prompt = generated["prompt_tokens"].get<size_t>();
    ASSERT_EQ(ids.size(), prompt + 6);
    EXPECT_EQ(std::vector<int>(ids.begin() + static_cast<std::ptrdiff_t>(prompt), ids.end()), generated["ids"].get<std::vector<int>>());
}

// What-ifs from a session (a head set to tau = 1, a layer with only tau_q's position term, a
// scaled head) against the unedited model reach the window's engine: its export equals
// `ssaviz export --ablate ... --compare unedited`, titles and losses included; the highlight is
// the what-ifs' loss change (a loss colouring in a session once reached the dialog as nothing).
TEST(EndToEnd, GuiExportEqualsCommandLineExportWithWhatIfs) {
    ExpectGuiExportEqualsCommandLine("e2e_export_ablate", "unedited", "1:2,0:*=pos,3:0=x0.5", "loss_delta");
}

}  // namespace

namespace {

// A session whose model is missing, or a --model that is not a model: the window shows the error
// and, with --screenshot, exits at once with it (it used to wait 120 s for a model to settle), also
// with jobs asked for at start that need a model (`--lens` waited for ever) and with a comparison
// asked for (`--compare local` replaced the model's error with "no model is open").
TEST(EndToEnd, AMissingModelEndsAScreenshotRunAtOnce) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_missing_model";
    fs::remove_all(dir);
    fs::create_directories(dir);
    nlohmann::json session = {{"ssaviz_session", 1}, {"model", dir + "/no-such-model"}, {"text", "hello"}};
    std::ofstream(dir + "/session.json") << session.dump(1);
    for (const std::string& args : {" --session " + dir + "/session.json", std::string(" --model /dev/zero"),
                                    std::string(" --model /dev/zero --lens --tab lens"), std::string(" --model /dev/zero --compare local")}) {
        if (kSanitized && (args == " --model /dev/zero" || args.find("local") != std::string::npos)) continue;  // the same failure, other jobs waiting
        const auto start = std::chrono::steady_clock::now();
        const int code = RunCommand(std::string(SSAVIZ_BINARY) + args + " --screenshot " + dir + "/shot.png --frames 2", dir + "/log.txt");
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const std::string log = ReadFile(dir + "/log.txt");
        EXPECT_EQ(code, 3) << args << ": " << log;
        EXPECT_LT(seconds, 60.0) << args << ": waited for a model that will not come";  // generous: a hang took 120 s
        EXPECT_NE(log.find(args.find("dev/zero") != std::string::npos ? "/dev/zero" : "no-such-model"), std::string::npos) << log;
        EXPECT_EQ(log.find("no model is open"), std::string::npos) << args << ": the model's own error was replaced: " << log;
        EXPECT_TRUE(fs::exists(dir + "/shot.png"));  // the window as the user would see it, error included
    }
}

// A twin or base asked for at start that does not open (gone since the session was saved, a typo
// in --base) ends a screenshot or export run with the command line's error and exit code, as
// `ssaviz export` does: it used to be dropped without a word, the window comparing with tau = 1
// and the run exiting 0. The screenshot shows the window as the user sees it, the error in the
// status bar.
TEST(EndToEnd, ATwinOrBaseThatDoesNotOpenEndsAScreenshotRun) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_missing_compare";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string model = " --text 'The keeper lit the lamp'";  // the default model
    nlohmann::json session = {{"ssaviz_session", 1}, {"model", ""}, {"text", "The keeper lit the lamp"}, {"base", dir + "/no-such-base"}};
    std::ofstream(dir + "/session.json") << session.dump(1);
    // What-ifs a session asks for that the model cannot take end an export as `export --ablate`
    // does (it exported without all of them and exited 0); the window keeps those that fit.
    session = {{"ssaviz_session", 1}, {"model", ""}, {"text", "The keeper lit the lamp"}, {"interventions", "0:0,9:9"}};
    std::ofstream(dir + "/what_ifs.json") << session.dump(1);
    // So do export settings past the model, as `export` refuses --layers 9 (the highlight's head was
    // clamped to the model's last, its figure titled "L9 H9", and the run exited 0).
    session = {{"ssaviz_session", 1}, {"model", ""}, {"text", "The keeper lit the lamp"}, {"export", {{"layers", {9}}}}};
    std::ofstream(dir + "/layers.json") << session.dump(1);
    session["export"] = {{"formats", {"png"}}, {"highlight_scope", "head"}, {"highlight_head", {9, 9}}};
    std::ofstream(dir + "/highlight.json") << session.dump(1);
    // Settings with nothing to write, or what only a base has without one, likewise (they exited 1).
    session["export"] = {{"formats", nlohmann::json::array()}};
    std::ofstream(dir + "/no_format.json") << session.dump(1);
    session["export"] = {{"formats", {"png"}}, {"maps", {"base"}}};
    std::ofstream(dir + "/base_maps.json") << session.dump(1);
    // A highlight too large to draw, as `export` refuses it before writing (it failed once written, exit 1).
    std::string lines;
    for (int i = 0; i < 300; ++i) lines += "x\n";
    nlohmann::json tall = {{"ssaviz_session", 1}, {"model", ""}, {"text", lines}, {"truncate", true},
                           {"export", {{"formats", {"png"}}, {"png_scale", 4}, {"text_scale", 3}}}};
    std::ofstream(dir + "/tall.json") << tall.dump(1);
    struct Case {
        std::string args, named;
        int code;
    };
    for (const Case& c : {Case{model + " --base " + dir + "/no-such-base --screenshot " + dir + "/shot.png --frames 2", "no-such-base", 3},
                          Case{model + " --compare " + dir + "/no-such-twin --screenshot " + dir + "/shot.png --frames 2", "no-such-twin", 3},
                          Case{model + " --compare base --screenshot " + dir + "/shot.png --frames 2", "name it with --base DIR", 2},
                          Case{" --session " + dir + "/session.json --export-to " + dir + "/out", "no-such-base", 3},
                          Case{" --session " + dir + "/what_ifs.json --export-to " + dir + "/out", "dropped the what-ifs 9:9: past the model's 4 layers", 2},
                          Case{" --session " + dir + "/layers.json --export-to " + dir + "/out", "export: --layers: layer 9 is out of range", 2},
                          Case{" --session " + dir + "/highlight.json --export-to " + dir + "/out", "export: --highlight-scope: layer 9 is out of range", 2},
                          Case{" --session " + dir + "/no_format.json --export-to " + dir + "/out", "export: nothing to write: no format is chosen", 2},
                          Case{" --session " + dir + "/base_maps.json --export-to " + dir + "/out", "export: --maps base needs a base", 2},
                          Case{" --session " + dir + "/tall.json --export-to " + dir + "/out", "--text-scale 3 draws a highlight", 2}}) {
        if (kSanitized && (c.named == "no-such-twin" || c.code == 2)) continue;  // a twin's path is the base's; a usage error is the flags'
        fs::remove(dir + "/shot.png");
        const int code = RunCommand(std::string(SSAVIZ_BINARY) + c.args, dir + "/log.txt");
        const std::string log = ReadFile(dir + "/log.txt");
        EXPECT_EQ(code, c.code) << c.args << ": " << log;
        EXPECT_NE(log.find(c.named), std::string::npos) << c.args << ": " << log;
        if (c.args.find("--screenshot") != std::string::npos) {
            EXPECT_TRUE(fs::exists(dir + "/shot.png")) << c.args;
        }
    }
    EXPECT_FALSE(fs::exists(dir + "/out")) << "nothing exported against a comparison that was not asked for";
}

// A run whose last checkpoint does not open (a truncated file: a run still being written) opens at
// the step before, with a line saying so, as export --run skips such a step (it ended the window).
// Many such steps are passed over in one request with one line (a request each took a frame each
// and a line each: minutes for thousands), and --export-to exits 3 for the steps its timeline left
// out, as export --run does (it exited 0).
TEST(EndToEnd, ARunWhoseLastStepIsBrokenOpensTheStepBefore) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_broken_step", run = dir + "/run";
    fs::remove_all(dir);
    fs::create_directories(run);
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " init-random --out " + run + "/checkpoint-10 --layers 2 --heads 2 --embd 32 --seed 3",
                         dir + "/init.log"),
              0)
        << ReadFile(dir + "/init.log");
    fs::copy(run + "/checkpoint-10", run + "/checkpoint-20", fs::copy_options::recursive);
    fs::resize_file(run + "/checkpoint-20/model.safetensors", 3000);
    for (int step = 30; step < 30 + 400; ++step) fs::create_directories(run + "/checkpoint-" + std::to_string(step));  // empty: no weights
    const std::string png = dir + "/shot.png";
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --run " + run + " --text 'The keeper lit the lamp' --screenshot " + png + " --frames 3",
                         dir + "/log.txt"),
              0)
        << ReadFile(dir + "/log.txt");
    const std::string log = ReadFile(dir + "/log.txt");
    EXPECT_NE(log.find("ssaviz: step 429 (checkpoint-429) and the 400 steps before it do not open, showing step 10: "), std::string::npos) << log;
    size_t lines = 0;
    for (size_t at = log.find("not open"); at != std::string::npos; at = log.find("not open", at + 1)) ++lines;
    EXPECT_EQ(lines, 1u) << "one line for the steps passed over";
    const nlohmann::json meta = nlohmann::json::parse(ReadFile(png + ".json"), nullptr, false);
    ASSERT_TRUE(meta.is_object() && meta.contains("state")) << log;
    EXPECT_EQ(meta["state"]["run_step"], 10);
    EXPECT_EQ(meta["state"]["model"], run + "/checkpoint-10");
    // Only the truncated one: its own error.
    fs::remove_all(dir + "/empty");
    for (int step = 30; step < 30 + 400; ++step) fs::remove_all(run + "/checkpoint-" + std::to_string(step));
    ASSERT_EQ(RunCommand(std::string(SSAVIZ_BINARY) + " --run " + run + " --text 'The keeper lit the lamp' --screenshot " + png + " --frames 3",
                         dir + "/log.txt"),
              0);
    EXPECT_NE(ReadFile(dir + "/log.txt").find("ssaviz: step 20 (checkpoint-20) does not open, showing step 10: "), std::string::npos);
    EXPECT_NE(ReadFile(dir + "/log.txt").find("header length"), std::string::npos);
    // --export-to of the run with the timeline: the step left out is exit 3, as export --run's.
    const int code = RunCommand(std::string(SSAVIZ_BINARY) + " --run " + run + " --text 'The keeper lit the lamp' --export-to " + dir + "/out",
                                dir + "/export.txt");
    EXPECT_EQ(code, 3) << ReadFile(dir + "/export.txt");
    EXPECT_NE(ReadFile(dir + "/export.txt").find("of the 1 of 2 steps that opened"), std::string::npos) << ReadFile(dir + "/export.txt");
}

// A model that opens but a text it cannot tokenize: the jobs asked for at start (a run's timeline,
// the lens, Continue, the heads ranking) wait for an analysis that will not come until the text is
// edited. A screenshot run ends at once with the text's error and export's exit code; so does a
// session's --export-to, which said "waiting for the model" and exited 1.
TEST(EndToEnd, ATextTheModelCannotReadEndsAScreenshotRunAtOnce) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e_bad_text";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string run = app::BundledModelsDir() + "/graph-run/ssa";
    for (const std::string& args : {" --run " + run + " --tab run", " --model " + run + "/checkpoint-300 --lens --tab lens --continue 3 --rank-heads"}) {
        const auto start = std::chrono::steady_clock::now();
        const int code = RunCommand(std::string(SSAVIZ_BINARY) + args + " --text 'The old' --screenshot " + dir + "/shot.png --frames 2",
                                    dir + "/log.txt");
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const std::string log = ReadFile(dir + "/log.txt");
        EXPECT_EQ(code, 3) << args << ": " << log;
        EXPECT_LT(seconds, 60.0) << args << ": waited for an analysis that will not come";  // a hang took 120 s
        EXPECT_NE(log.find("piece 'T' (at byte 0 of the word) is not in the vocabulary"), std::string::npos) << args << ": " << log;
        EXPECT_TRUE(fs::exists(dir + "/shot.png"));
    }
    nlohmann::json session = {{"ssaviz_session", 1}, {"model", run + "/checkpoint-300"}, {"text", "The old"}};
    std::ofstream(dir + "/session.json") << session.dump(1);
    const int code = RunCommand(std::string(SSAVIZ_BINARY) + " --session " + dir + "/session.json --export-to " + dir + "/out", dir + "/log.txt");
    const std::string log = ReadFile(dir + "/log.txt");
    EXPECT_EQ(code, 3) << log;
    EXPECT_NE(log.find("piece 'T' (at byte 0 of the word) is not in the vocabulary"), std::string::npos) << log;
    EXPECT_FALSE(fs::exists(dir + "/out"));
    // A text of one token, which has no loss to rank the heads by: the ranking ends with its reason,
    // so the run does too (it waited forever for a ranking that had stopped).
    const auto start = std::chrono::steady_clock::now();
    const int one = RunCommand(std::string(SSAVIZ_BINARY) + " --model " + run + "/checkpoint-300 --text A --rank-heads --screenshot " + dir +
                                   "/one.png --frames 2",
                               dir + "/log.txt");
    EXPECT_EQ(one, 0) << ReadFile(dir + "/log.txt");
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 60.0) << "waited for a ranking that had stopped";
}

}  // namespace

// The inference worker on the real default model (no window): Continue, the heads ranking and
// what-ifs across models, as the window drives them.
namespace {

using app::WorkerEvent;

const std::string kWorkerText = "The keeper lit the lamp and watched the ships";

std::string DefaultModel() { return (fs::path(SSAVIZ_BINARY).parent_path() / "models" / "default").string(); }

// Collects the worker's events until `done` says so (or 120 s pass: a failure).
template <class Done>
std::vector<WorkerEvent> WaitFor(app::InferenceWorker& worker, Done&& done) {
    std::vector<WorkerEvent> events;
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(120)) {
        for (WorkerEvent& e : worker.TakeEvents()) {
            events.push_back(std::move(e));
            if (done(events.back())) return events;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ADD_FAILURE() << "the worker did not answer within 120 s";
    return events;
}

bool Is(const WorkerEvent& e, WorkerEvent::Kind kind) { return e.kind == kind; }

std::shared_ptr<const model::Analysis> OpenAndAnalyze(app::InferenceWorker& worker, const std::string& model, const std::string& text) {
    worker.OpenModel(model, "cpu");
    for (const WorkerEvent& e : WaitFor(worker, [](const WorkerEvent& e) { return e.kind != WorkerEvent::Kind::InterventionsSet; })) {
        EXPECT_EQ(e.kind == WorkerEvent::Kind::Error ? e.error : "", "");
        if (e.kind == WorkerEvent::Kind::ModelOpened) {
            EXPECT_TRUE(e.vocab && !e.vocab->empty());
        }
    }
    const uint64_t id = worker.Analyze(text, false);
    auto events = WaitFor(worker, [&](const WorkerEvent& e) { return e.request == id; });
    EXPECT_TRUE(Is(events.back(), WorkerEvent::Kind::Analysis)) << events.back().error;
    return events.back().analysis;
}

// Greedy Continue appends, one event per token, the most likely next token of the analysis before
// it, decoded onto the text; each step reuses every row before the new token.
TEST(Worker, ContinueAppendsTheGreedyTokensOneAtATime) {
    app::InferenceWorker worker;
    auto first = OpenAndAnalyze(worker, DefaultModel(), kWorkerText);
    ASSERT_TRUE(first);
    const int T0 = first->n_tokens;
    app::GenerateSettings greedy;
    greedy.tokens = 6;
    greedy.temperature = 0.0f;
    const uint64_t id = worker.Continue(kWorkerText, false, greedy);
    const auto events = WaitFor(worker, [&](const WorkerEvent& e) { return e.request == id && e.last; });
    ASSERT_EQ(events.size(), 6u);
    std::shared_ptr<const model::Analysis> before = first;
    std::string text = kWorkerText;
    for (size_t k = 0; k < events.size(); ++k) {
        const WorkerEvent& e = events[k];
        ASSERT_EQ(e.kind, WorkerEvent::Kind::Generated) << e.error;
        ASSERT_TRUE(e.analysis);
        const model::Analysis& a = *e.analysis;
        ASSERT_EQ(a.n_tokens, T0 + static_cast<int>(k) + 1);
        const std::vector<float>& logits = before->next_logits;
        const size_t vocab = std::min<size_t>(logits.size(), 50257);
        const int32_t expected = static_cast<int32_t>(std::max_element(logits.begin(), logits.begin() + vocab) - logits.begin());
        EXPECT_EQ(a.tokens.ids.back(), expected) << "step " << k;
        text += a.tokens.pieces.back();
        EXPECT_EQ(e.text, text) << "step " << k;
        EXPECT_EQ(a.tokens.offsets.back().second, text.size());
        EXPECT_GE(a.reused_rows, T0 + static_cast<int>(k)) << "step " << k << " recomputed rows it had";
        EXPECT_EQ(e.last, k + 1 == events.size());
        before = e.analysis;
    }
    EXPECT_EQ(before->loss.size(), static_cast<size_t>(T0 + 5));  // every appended token has its loss
}

// The Lens tab's Attribute: at a position, each side's parts of the token SSA predicts there (its
// lens after the last layer), not of the text's next token, adding up to that token's logit, which
// at the last position is the analysis' own logit of it; or the logit difference, the next
// token's parts less those of SSA's most likely other token.
TEST(Worker, TheLensAttributesSsasTopPredictionOnAsking) {
    using app::LensTarget;
    app::InferenceWorker worker;
    auto a = OpenAndAnalyze(worker, DefaultModel(), kWorkerText);
    ASSERT_TRUE(a);
    const int T = a->n_tokens;
    auto lens_at = [&](int position, LensTarget target) {
        const uint64_t id = worker.RunLensAt(a->tokens.ids, position, false, "", target);
        const WorkerEvent e = WaitFor(worker, [&](const WorkerEvent& e) { return e.request == id; }).back();
        EXPECT_TRUE(e.lens_at) << e.error;
        return e.lens_at;
    };
    auto sum = [](const model::LensAt& s) { return std::accumulate(s.parts.begin(), s.parts.end(), 0.0); };
    for (const int position : {3, T - 1}) {
        SCOPED_TRACE(position);
        const auto top = lens_at(position, LensTarget::Top);
        ASSERT_TRUE(top);
        const model::LensAt& s = top->ssa;
        EXPECT_EQ(top->target, LensTarget::Top);
        ASSERT_GT(s.top_k, 1);
        const int32_t predicted = s.top_ids[s.top_ids.size() - s.top_k];
        EXPECT_EQ(s.target, predicted) << "the top token after the last layer";
        EXPECT_NEAR(sum(s), s.logit, 2e-3);
        if (position == T - 1) {
            EXPECT_NEAR(s.logit, a->next_logits[s.target], 2e-3) << "the model's own logit of it after the text";
            continue;
        }
        const auto next = lens_at(position, LensTarget::Next);
        ASSERT_TRUE(next);
        EXPECT_EQ(next->target, LensTarget::Next);
        EXPECT_EQ(next->ssa.target, a->tokens.ids[position + 1]) << "by default, the text's next token";
        const auto against = lens_at(position, LensTarget::NextAgainstOther);
        ASSERT_TRUE(against);
        const int32_t other = predicted != next->ssa.target ? predicted : s.top_ids[s.top_ids.size() - s.top_k + 1];
        EXPECT_EQ(against->versus, other) << "SSA's most likely token other than the next";
        // Where the model's guess is not the text's token (position 3 here), the difference is the
        // next token's parts less the top prediction's, part by part.
        ASSERT_NE(other, next->ssa.target);
        if (position == 3) {
            ASSERT_EQ(other, predicted) << "the text's token is not the guess here";
            ASSERT_EQ(against->ssa.parts.size(), next->ssa.parts.size());
            for (size_t i = 0; i < next->ssa.parts.size(); ++i)
                EXPECT_NEAR(against->ssa.parts[i], next->ssa.parts[i] - s.parts[i], 1e-4) << "part " << i;
            EXPECT_NEAR(against->ssa.logit, next->ssa.logit - s.logit, 1e-3);
        }
    }
}

// A text longer than the context names the window's remedy, its "truncate to context" box (and
// --truncate for a screenshot run); ticked, the same text is analysed, cut to the context.
TEST(Worker, ATextPastTheContextNamesTheTruncateBox) {
    app::InferenceWorker worker;
    ASSERT_TRUE(OpenAndAnalyze(worker, DefaultModel(), kWorkerText));
    std::string text;
    while (text.size() < 20000) text += kWorkerText + std::string(". ");  // some 4,000 tokens
    const uint64_t id = worker.Analyze(text, false);
    auto events = WaitFor(worker, [&](const WorkerEvent& e) { return e.request == id; });
    ASSERT_TRUE(Is(events.back(), WorkerEvent::Kind::Error));
    EXPECT_NE(events.back().error.find("longer than the model's context of"), std::string::npos) << events.back().error;
    EXPECT_NE(events.back().error.find("; tick 'truncate to context' under the text (--truncate) to run it"), std::string::npos) << events.back().error;
    const uint64_t cut = worker.Analyze(text, true);
    events = WaitFor(worker, [&](const WorkerEvent& e) { return e.request == cut; });
    ASSERT_TRUE(Is(events.back(), WorkerEvent::Kind::Analysis)) << events.back().error;
    EXPECT_GT(events.back().analysis->n_tokens, 100);
}

// On a SentencePiece model the appended text keeps each piece's leading space: it reads as the
// tokenizer decodes all the ids at once.
TEST(Worker, ContinueKeepsSentencePieceSpaces) {
    const std::string english = app::BundledModelsDir() + "/english/ssa";
    app::InferenceWorker worker;
    ASSERT_TRUE(OpenAndAnalyze(worker, english, kWorkerText));
    app::GenerateSettings greedy;
    greedy.tokens = 10;
    const uint64_t id = worker.Continue(kWorkerText, false, greedy);
    const WorkerEvent last = WaitFor(worker, [&](const WorkerEvent& e) { return e.request == id && e.last; }).back();
    ASSERT_TRUE(last.analysis) << last.error;
    auto engine = model::Engine::Open(english, "cpu");
    ASSERT_TRUE(engine) << engine.error();
    auto decoded = (*engine)->tokenizer().Decode(last.analysis->tokens.ids);
    ASSERT_TRUE(decoded) << decoded.error();
    EXPECT_EQ(last.text, *decoded);
    EXPECT_GT(last.text.size(), kWorkerText.size());
}

// Sampling with a seed draws the same tokens twice; a keystroke (a new analysis request) stops a
// long Continue at once and its analysis follows.
TEST(Worker, SeededContinueRepeatsAndAnEditStopsIt) {
    app::InferenceWorker worker;
    ASSERT_TRUE(OpenAndAnalyze(worker, DefaultModel(), kWorkerText));
    app::GenerateSettings sample;
    sample.tokens = 5;
    sample.temperature = 1.0f;
    sample.top_k = 50;
    sample.seed = 7;
    std::string texts[2];
    for (std::string& out : texts) {
        const uint64_t id = worker.Continue(kWorkerText, false, sample);
        out = WaitFor(worker, [&](const WorkerEvent& e) { return e.request == id && e.last; }).back().text;
    }
    EXPECT_GT(texts[0].size(), kWorkerText.size());
    EXPECT_EQ(texts[0], texts[1]);

    sample.tokens = 500;
    const uint64_t id = worker.Continue(kWorkerText, false, sample);
    WaitFor(worker, [&](const WorkerEvent& e) { return e.request == id; });  // the first token arrived
    const uint64_t edit = worker.Analyze(kWorkerText + " and", false);
    int generated = 1;
    bool stopped = false;
    const auto events = WaitFor(worker, [&](const WorkerEvent& e) { return e.request == edit; });
    for (const WorkerEvent& e : events) {
        if (e.request != id) continue;
        generated += e.analysis ? 1 : 0;
        stopped |= e.last;
    }
    EXPECT_TRUE(stopped) << "Continue did not report that it stopped";
    EXPECT_LT(generated, 500);
    ASSERT_EQ(events.back().kind, WorkerEvent::Kind::Analysis);
    EXPECT_EQ(events.back().analysis->interventions.size(), 0u);
}

// A long analysis (its predictions [rows, V] logits a side) comes back twice: its maps,
// temperatures and metrics first, without predictions, then the same with them.
TEST(Worker, ALongAnalysisShowsItsMapsBeforeItsPredictions) {
    app::InferenceWorker worker;
    ASSERT_TRUE(OpenAndAnalyze(worker, DefaultModel(), kWorkerText));
    std::string text;
    while (text.size() < 1200) text += kWorkerText + ". ";  // ~250 tokens: 250 x 50,257 logits a side
    const uint64_t id = worker.Analyze(text, false);
    std::vector<std::shared_ptr<const model::Analysis>> shown;
    WaitFor(worker, [&](const WorkerEvent& e) {
        if (e.request == id && e.kind == WorkerEvent::Kind::Analysis) shown.push_back(e.analysis);
        return e.request == id && (e.kind != WorkerEvent::Kind::Analysis || !e.analysis->loss.empty());
    });
    ASSERT_EQ(shown.size(), 2u);
    const model::Analysis &first = *shown[0], &whole = *shown[1];
    EXPECT_GT(first.n_tokens, 200);
    EXPECT_TRUE(first.loss.empty() && first.top_ids.empty() && first.next_logits.empty());
    EXPECT_EQ(whole.loss.size(), static_cast<size_t>(whole.n_tokens - 1));
    EXPECT_EQ(first.tau_q, whole.tau_q);
    EXPECT_EQ(first.js, whole.js);
    EXPECT_EQ(first.maps, whole.maps) << "the same maps, not recomputed";
}

// What ships beside a model (the bundled English model's vanilla twin) is looked for once, by the
// worker, and comes with the model: the views read it instead of the file system each frame.
TEST(Worker, AModelComesWithTheTwinShippedBesideIt) {
    app::InferenceWorker worker;
    auto beside = [&](const std::string& model) {
        worker.OpenModel(model, "cpu");
        for (const WorkerEvent& e : WaitFor(worker, [](const WorkerEvent& e) { return e.kind != WorkerEvent::Kind::InterventionsSet; }))
            if (e.kind == WorkerEvent::Kind::ModelOpened) return e.twin_beside;
        ADD_FAILURE() << "no ModelOpened event for " << model;
        return std::string("?");
    };
    const std::string english = app::BundledModelsDir() + "/english/ssa";
    EXPECT_EQ(beside(english), app::TwinBeside(english));
    EXPECT_EQ(fs::path(app::TwinBeside(english)).lexically_normal(), fs::path(app::BundledModelsDir() + "/english/vanilla").lexically_normal());
    EXPECT_EQ(beside(DefaultModel()), "");  // the build's random model has none
}

// The worker applies the big-model rule when a model opens: layer-local (no predictions of its
// own), then the global pass on request (SetComparison, as Ctrl+T asks), with the comparison's
// predictions; a model under the line opens with the global pass.
TEST(Worker, ABigModelOpensWithTheLayerLocalComparison) {
    app::InferenceWorker worker;
    worker.SetBigModelParameters(1);
    auto opened = [&] {
        for (const WorkerEvent& e : WaitFor(worker, [](const WorkerEvent& e) { return e.kind != WorkerEvent::Kind::InterventionsSet; }))
            if (e.kind == WorkerEvent::Kind::ModelOpened) return e.comparison;
        ADD_FAILURE() << "no ModelOpened event";
        return model::Comparison::Twin;
    };
    auto analyse = [&] {
        const uint64_t id = worker.Analyze(kWorkerText, false);
        return WaitFor(worker, [&](const WorkerEvent& e) { return e.request == id; }).back().analysis;
    };
    worker.OpenModel(DefaultModel(), "cpu");
    EXPECT_EQ(opened(), model::Comparison::LayerLocal);
    auto local = analyse();
    ASSERT_TRUE(local);
    EXPECT_EQ(local->comparison, model::Comparison::LayerLocal);
    EXPECT_FALSE(local->HasComparePredictions());

    const uint64_t set = worker.SetComparison(app::CompareKind::Global);  // the counterfactual
    const WorkerEvent e = WaitFor(worker, [&](const WorkerEvent& e) { return e.request == set; }).back();
    ASSERT_EQ(e.kind, WorkerEvent::Kind::ComparisonSet) << e.error;
    EXPECT_EQ(e.comparison, model::Comparison::Counterfactual);
    auto global = analyse();
    ASSERT_TRUE(global);
    EXPECT_EQ(global->comparison, model::Comparison::Counterfactual);
    EXPECT_TRUE(global->HasComparePredictions());
    ASSERT_EQ(global->tau_q.size(), local->tau_q.size());
    float worst = 0;  // the global pass runs the two sides as one batch: the same sums, maybe in another order
    for (size_t i = 0; i < local->tau_q.size(); ++i) worst = std::max(worst, std::abs(global->tau_q[i] - local->tau_q[i]));
    EXPECT_LE(worst, 1e-4f) << "the SSA side does not depend on the comparison";

    worker.SetBigModelParameters(app::kBigModelParameters);  // the default model is far under the line
    worker.OpenModel(DefaultModel(), "cpu");
    EXPECT_EQ(opened(), model::Comparison::Counterfactual);
}

// A twin or base that does not open is said (ComparisonFailed: why, the command line's kind of it,
// and what runs instead) and changes nothing: asked for before the model opened (a session's base
// gone since), after it, or as a twin. It used to be dropped without a word (before the model) or
// said as an analysis error that the next analysis cleared.
TEST(Worker, ATwinOrBaseThatDoesNotOpenIsSaidAndChangesNothing) {
    app::InferenceWorker worker;
    auto failed = [&](uint64_t id) {
        const WorkerEvent e = WaitFor(worker, [&](const WorkerEvent& e) { return e.request == id && e.kind != WorkerEvent::Kind::ModelOpened; }).back();
        EXPECT_EQ(e.kind, WorkerEvent::Kind::ComparisonFailed) << e.error;
        return e;
    };
    worker.SetComparison(app::CompareSpec::Base("/no-such-base"));  // no model yet: kept for it
    WorkerEvent e = failed(worker.OpenModel(DefaultModel(), "cpu"));
    EXPECT_NE(e.error.find("/no-such-base"), std::string::npos) << e.error;
    EXPECT_EQ(e.error_kind, app::RunError::Kind::BadInput);
    EXPECT_EQ(e.comparison, model::Comparison::Counterfactual);

    const uint64_t set = worker.SetComparison(app::CompareKind::LayerLocal);
    EXPECT_EQ(WaitFor(worker, [&](const WorkerEvent& e) { return e.request == set; }).back().kind, WorkerEvent::Kind::ComparisonSet);
    e = failed(worker.SetComparison(app::CompareSpec::Base("/no-such-base")));
    EXPECT_EQ(e.comparison, model::Comparison::LayerLocal) << "the comparison before stays";
    e = failed(worker.SetComparison(app::CompareSpec::Base()));  // the build's random model has no base beside it
    EXPECT_EQ(e.error_kind, app::RunError::Kind::Usage) << e.error;
    EXPECT_NE(e.error.find("--base"), std::string::npos) << e.error;
    e = failed(worker.OpenTwin("/no-such-twin"));
    EXPECT_NE(e.error.find("/no-such-twin"), std::string::npos) << e.error;
    EXPECT_EQ(e.comparison, model::Comparison::LayerLocal);
    const uint64_t id = worker.Analyze(kWorkerText, false);
    const WorkerEvent analysed = WaitFor(worker, [&](const WorkerEvent& e) { return e.request == id; }).back();
    ASSERT_TRUE(analysed.analysis) << analysed.error;
    EXPECT_EQ(analysed.analysis->comparison, model::Comparison::LayerLocal);

    // The model opened again keeps the comparison that ran, not the base that failed.
    const uint64_t reopened = worker.OpenModel(DefaultModel(), "cpu");
    for (const WorkerEvent& o : WaitFor(worker, [&](const WorkerEvent& e) { return e.request == reopened && e.kind == WorkerEvent::Kind::ModelOpened; })) {
        EXPECT_NE(o.kind, WorkerEvent::Kind::ComparisonFailed) << o.error;
        if (o.kind == WorkerEvent::Kind::ModelOpened) {
            EXPECT_EQ(o.comparison, model::Comparison::LayerLocal);
        }
    }
}

// The heads ranking: one mean loss per head, the baseline the shown text's, and a head's number
// the same as an analysis with that head ablated by hand; the engine runs unablated afterwards.
TEST(Worker, RankHeadsAblatesEachHeadInTurn) {
    app::InferenceWorker worker;
    auto shown = OpenAndAnalyze(worker, DefaultModel(), kWorkerText);
    ASSERT_TRUE(shown);
    const uint64_t id = worker.RankHeads(kWorkerText, false);
    size_t progress_events = 0;
    const auto events = WaitFor(worker, [&](const WorkerEvent& e) {
        progress_events += e.request == id;
        return e.request == id && (e.impacts->done || e.impacts->cancelled);
    });
    const app::HeadImpacts& r = *events.back().impacts;
    ASSERT_TRUE(r.done);
    ASSERT_EQ(r.total, shown->n_layer * shown->n_head);
    ASSERT_EQ(static_cast<int>(r.heads.size()), r.total);
    EXPECT_GE(progress_events, r.heads.size());  // a result per head as it finished
    EXPECT_NEAR(r.baseline, model::MeanLoss(shown->loss), 1e-5);
    const app::HeadImpact& h = r.heads[6];
    EXPECT_NEAR(h.delta, h.mean_loss - r.baseline, 1e-6);

    worker.SetInterventions({{model::Intervention::Kind::Ablate, h.layer, h.head, 0.0f}});
    WaitFor(worker, [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::InterventionsSet; });
    uint64_t again = worker.Analyze(kWorkerText, false);
    auto ablated = WaitFor(worker, [&](const WorkerEvent& e) { return e.request == again; }).back().analysis;
    ASSERT_TRUE(ablated);
    EXPECT_NEAR(model::MeanLoss(ablated->loss), h.mean_loss, 1e-4) << "L" << h.layer << " H" << h.head;
    EXPECT_NE(model::MeanLoss(ablated->loss), r.baseline);

    worker.SetInterventions({});
    WaitFor(worker, [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::InterventionsSet; });
    again = worker.Analyze(kWorkerText, false);
    auto plain = WaitFor(worker, [&](const WorkerEvent& e) { return e.request == again; }).back().analysis;
    EXPECT_NEAR(model::MeanLoss(plain->loss), r.baseline, 1e-5);
}

// The ranking's drift parts are the engine's loss with that part from the base on the what-ifs it
// was asked on alone (model/nn/from_base: test_base.cpp checks those against a model mixed by hand):
// each head's read its own tau_v at 1 too, and each MLP its layer's last head's, left set by the
// head's split (and MLPs' read as some heads' tau_v). Token by token too, as a head's temperatures'
// part is the analysis's loss with that head at tau = 1.
// The window's bar moves pass by pass (it moved a head at a time: "0 / 144 heads" for seconds
// beside a base): after the last head every pass RankPasses counts has run, and it never goes back.
TEST(RankHeads, ProgressCountsEveryPass) {
    auto opened = model::Engine::Open(app::BundledModelsDir() + "/licenses/ssa", "cpu");
    ASSERT_TRUE(opened) << opened.error();
    model::Engine& engine = **opened;
    auto tokens = engine.Tokenize("Permission is granted to copy.", false);
    ASSERT_TRUE(tokens);
    const int L = engine.Info().config.n_layer, H = engine.Info().config.n_head;
    for (bool base : {false, true}) {
        SCOPED_TRACE(base ? "beside a base" : "alone");
        if (base) {
            ASSERT_TRUE(engine.OpenBase(app::BundledModelsDir() + "/english/vanilla").ok());
        }
        std::atomic<float> progress{0.0f};
        app::RankOptions what{true, true};
        what.progress = &progress;
        std::vector<float> seen;
        app::HeadImpacts impacts;
        ASSERT_TRUE(app::MeasureHeadImpacts(engine, *tokens, {}, &impacts, [&](const app::HeadImpacts&) {
                        seen.push_back(progress.load());
                        return true;
                    }, what).ok());
        ASSERT_EQ(seen.size(), static_cast<size_t>(L * H));
        EXPECT_EQ(seen.back(), 1.0f) << "RankPasses " << app::RankPasses(L, H, what, base);
        EXPECT_LT(seen.front(), 0.2f) << "moving from the first head on";
        for (size_t k = 1; k < seen.size(); ++k) EXPECT_GT(seen[k], seen[k - 1]) << k;
    }
}

TEST(RankHeads, TheDriftsPartsAreTheEnginesOnTheWhatIfsAlone) {
    auto opened = model::Engine::Open(app::BundledModelsDir() + "/licenses/ssa", "cpu");
    ASSERT_TRUE(opened) << opened.error();
    model::Engine& engine = **opened;
    ASSERT_TRUE(engine.OpenBase(app::BundledModelsDir() + "/english/vanilla").ok());
    const std::vector<model::Intervention> on_top = {{model::Intervention::Kind::Ablate, 1, 2, 0.0f}};
    ASSERT_TRUE(engine.SetInterventions(on_top).ok());
    auto tokens = engine.Tokenize("Permission is granted to copy and distribute verbatim copies of this license.", false);
    ASSERT_TRUE(tokens);
    app::HeadImpacts impacts;
    ASSERT_TRUE(app::MeasureHeadImpacts(engine, *tokens, {}, &impacts, {}, app::RankOptions{true, true}).ok());
    ASSERT_TRUE(impacts.done && impacts.drift);
    EXPECT_EQ(engine.interventions(), on_top) << "as they were";
    const int L = engine.Info().config.n_layer, H = engine.Info().config.n_head;
    const app::DriftParts d = app::MeasuredDriftParts(impacts, L, H);
    const app::DriftTokenParts by_token = app::MeasuredDriftPartsByToken(impacts, L, H);
    auto none = engine.LossFromBase(tokens->ids, {});
    ASSERT_TRUE(none);
    const size_t n = none->size();
    ASSERT_EQ(by_token.tokens, static_cast<int>(n));
    const float baseline = model::MeanLoss(*none);
    EXPECT_NEAR(impacts.drift_baseline, baseline, 1e-6);
    // A part's mean against the engine's, and its row of `by_token_parts` token by token.
    using Part = model::BasePart::Kind;
    auto expect_part = [&](model::BasePart part, float measured, const std::vector<float>& by_token_parts, size_t row) {
        auto loss = engine.LossFromBase(tokens->ids, {part});
        ASSERT_TRUE(loss) << loss.error();
        EXPECT_NEAR(measured, baseline - model::MeanLoss(*loss), 1e-6) << model::Describe(part);
        for (size_t t = 0; t < n; ++t) EXPECT_NEAR(by_token_parts[row * n + t], (*none)[t] - (*loss)[t], 1e-6) << model::Describe(part) << " token " << t + 1;
    };
    for (int l = 0; l < L; ++l) {
        for (int h = 0; h < H; ++h) expect_part({Part::Head, l, h}, d.heads[l * H + h], by_token.heads, l * H + h);
        expect_part({Part::Mlp, l}, d.mlp[l], by_token.mlp, l);
        expect_part({Part::Attention, l}, d.attention[l], by_token.attention, l);
    }
    expect_part({Part::Embeddings}, d.embeddings, by_token.embeddings, 0);
    expect_part({Part::All}, d.all, by_token.all, 0);
    // Along the layers: the embeddings and L0's attention taken together, then what L0's MLP adds on
    // top; every part so taken is every weight, so the path adds up to all.
    auto first_two = engine.LossFromBase(tokens->ids, {{Part::Embeddings}, {Part::Attention, 0}});
    auto first_three = engine.LossFromBase(tokens->ids, {{Part::Embeddings}, {Part::Attention, 0}, {Part::Mlp, 0}});
    ASSERT_TRUE(first_two && first_three);
    ASSERT_EQ(d.path.size(), static_cast<size_t>(1 + 2 * L));
    EXPECT_EQ(app::PathPartName(2), "L0 MLP");
    EXPECT_NEAR(d.path[2], model::MeanLoss(*first_two) - model::MeanLoss(*first_three), 1e-6);
    for (size_t t = 0; t < n; ++t) EXPECT_NEAR(by_token.path[2 * n + t], (*first_two)[t] - (*first_three)[t], 1e-6) << "token " << t + 1;
    double sum = 0;
    for (float part : d.path) sum += part;
    EXPECT_NEAR(sum, d.all, 1e-5);
    EXPECT_EQ(impacts.path_from_base.back(), impacts.all_from_base) << "every part of the path is every weight";
    // From the top down: the last layer's attention on top of its MLP, and the embeddings last, on
    // top of every layer's attention and MLP; the same parts, so they add up to all too.
    std::vector<model::BasePart> layers;
    for (int l = 0; l < L; ++l) layers.push_back({Part::Attention, l}), layers.push_back({Part::Mlp, l});
    auto top_mlp = engine.LossFromBase(tokens->ids, {{Part::Mlp, L - 1}});
    auto top_layer = engine.LossFromBase(tokens->ids, {{Part::Mlp, L - 1}, {Part::Attention, L - 1}});
    auto every_layer = engine.LossFromBase(tokens->ids, layers);
    auto all = engine.LossFromBase(tokens->ids, {{Part::All}});
    ASSERT_TRUE(top_mlp && top_layer && every_layer && all);
    ASSERT_EQ(d.path_down.size(), d.path.size());
    const size_t top_attention = 2 * L - 1;  // PathPartName's place of L(L-1) attention
    EXPECT_EQ(app::PathPartName(static_cast<int>(top_attention)), "L" + std::to_string(L - 1) + " attention");
    EXPECT_NEAR(d.path_down[top_attention], model::MeanLoss(*top_mlp) - model::MeanLoss(*top_layer), 1e-6);
    EXPECT_NEAR(d.path_down[0], model::MeanLoss(*every_layer) - model::MeanLoss(*all), 1e-6);
    for (size_t t = 0; t < n; ++t) {
        EXPECT_NEAR(by_token.path_down[top_attention * n + t], (*top_mlp)[t] - (*top_layer)[t], 1e-6) << "token " << t + 1;
        EXPECT_NEAR(by_token.path_down[t], (*every_layer)[t] - (*all)[t], 1e-6) << "token " << t + 1;
    }
    double down = 0;
    for (float part : d.path_down) down += part;
    EXPECT_NEAR(down, d.all, 1e-5);
    EXPECT_NE(d.path_down, d.path) << "the two orders split the whole alike to the bit: the second is not measured";
    // L0 H1's temperatures token by token: the engine's loss pass against the same with that head at
    // tau = 1, to the bit (the ranking's own pass), and the analyses' losses within float32's
    // rounding of two losses of a few nats (the ranking ran whole analyses before 2026-12-08).
    auto plain = engine.Analyze(*tokens);
    auto plain_pass = engine.LossFromBase(tokens->ids, {});
    ASSERT_TRUE(plain && plain_pass);
    std::vector<model::Intervention> with = on_top;
    with.push_back({model::Intervention::Kind::Ablate, 0, 1, 0.0f});
    ASSERT_TRUE(engine.SetInterventions(with).ok());
    auto at_tau1 = engine.Analyze(*tokens);
    auto at_tau1_pass = engine.LossFromBase(tokens->ids, {});
    ASSERT_TRUE(at_tau1 && at_tau1_pass);
    const std::vector<float> temperatures = app::TemperaturePartsByToken(impacts, L, H);
    ASSERT_EQ(temperatures.size(), static_cast<size_t>(L * H) * n);
    for (size_t t = 0; t < n; ++t) {
        EXPECT_EQ(temperatures[1 * n + t], (*plain_pass)[t] - (*at_tau1_pass)[t]) << "token " << t + 1;
        EXPECT_NEAR(temperatures[1 * n + t], plain->loss[t] - at_tau1->loss[t], 1e-5) << "token " << t + 1;
    }
    for (size_t t = 0; t < n; ++t) EXPECT_TRUE(std::isnan(temperatures[(1 * H + 2) * n + t])) << "L1 H2 is at tau = 1 already";

    // A temperature the what-ifs already set to 1 has no part: =q and =v stacked are L:H (they read 0.0).
    using Kind = model::Intervention::Kind;
    ASSERT_TRUE(engine.SetInterventions({{Kind::QueryOff, 0, 0, 0.0f}, {Kind::ValueOff, 0, 0, 0.0f}, {Kind::QueryOff, 0, 1, 0.0f}}).ok());
    ASSERT_TRUE(app::MeasureHeadImpacts(engine, *tokens, {}, &impacts, {}, app::RankOptions{true, false}).ok());
    for (app::TemperaturePart which : {app::TemperaturePart::Both, app::TemperaturePart::TauQ, app::TemperaturePart::TauV})
        EXPECT_TRUE(std::isnan(app::TemperatureParts(impacts, L, H, which)[0])) << static_cast<int>(which);
    EXPECT_TRUE(std::isnan(app::TemperatureParts(impacts, L, H, app::TemperaturePart::TauQ)[1]));
    EXPECT_TRUE(std::isfinite(app::TemperatureParts(impacts, L, H, app::TemperaturePart::TauV)[1]));
    EXPECT_TRUE(std::isfinite(app::TemperatureParts(impacts, L, H, app::TemperaturePart::Both)[1]));
}

// What-ifs outlive a model change when they fit the new model, and are dropped with a note when
// they do not (the graph example has one layer and one head).
// Issue 36: the Run tab's next step, opened aside while the worker is idle, is what OpenModel then
// takes (no second read), and it analyses exactly as the same checkpoint opened directly; an
// OpenModel of another step lets the kept one go and reads its own.
TEST(Worker, ARunsNextStepIsOpenedAheadAndTakenAtOnce) {
    const std::string run = app::BundledModelsDir() + "/graph-run/ssa/";
    const std::string text = "ABCDEFGH";
    app::InferenceWorker direct;
    const auto want = OpenAndAnalyze(direct, run + "checkpoint-5", text);
    ASSERT_TRUE(want);

    app::InferenceWorker worker;
    ASSERT_TRUE(OpenAndAnalyze(worker, run + "checkpoint-0", text));
    worker.Prefetch(run + "checkpoint-5", "cpu");
    const WorkerEvent kept = WaitFor(worker, [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::Prefetched; }).back();
    ASSERT_EQ(kept.error, "");
    ASSERT_TRUE(kept.info);
    EXPECT_EQ(kept.info->dir, run + "checkpoint-5");
    worker.OpenModel(run + "checkpoint-5", "cpu");
    const WorkerEvent opened = WaitFor(worker, [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::ModelOpened; }).back();
    EXPECT_TRUE(opened.prefetched);
    const uint64_t id = worker.Analyze(text, false);
    const WorkerEvent got = WaitFor(worker, [&](const WorkerEvent& e) { return e.request == id; }).back();
    ASSERT_TRUE(got.analysis) << got.error;
    EXPECT_EQ(got.analysis->tau_q, want->tau_q);
    EXPECT_EQ(got.analysis->metrics.Get("entropy"), want->metrics.Get("entropy"));
    EXPECT_EQ(got.analysis->loss, want->loss);

    // A run step's analysis is kept: shown again (same text, comparison and what-ifs), it is the
    // same analysis at once, not run again; another text runs.
    app::InferenceWorker steps;
    auto open_step = [&](const std::string& dir) {
        steps.OpenModel(dir, "cpu", {}, "f32", /*run_step=*/true);
        WaitFor(steps, [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::ModelOpened; });
    };
    auto analyze = [&](const std::string& t) {
        const uint64_t request = steps.Analyze(t, false);
        return WaitFor(steps, [&](const WorkerEvent& e) { return e.request == request; }).back();
    };
    open_step(run + "checkpoint-5");
    const WorkerEvent first = analyze(text);
    ASSERT_TRUE(first.analysis) << first.error;
    EXPECT_FALSE(first.kept);
    open_step(run + "checkpoint-10");
    EXPECT_FALSE(analyze(text).kept);
    open_step(run + "checkpoint-5");
    const WorkerEvent again = analyze(text);
    EXPECT_TRUE(again.kept);
    EXPECT_EQ(again.analysis.get(), first.analysis.get());
    EXPECT_FALSE(analyze("ABCDEFGHA").kept);

    // Another step than the one kept: read on its own (and the kept one let go).
    worker.Prefetch(run + "checkpoint-10", "cpu");
    WaitFor(worker, [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::Prefetched; });
    worker.OpenModel(run + "checkpoint-15", "cpu");
    const WorkerEvent other = WaitFor(worker, [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::ModelOpened; }).back();
    EXPECT_FALSE(other.prefetched);
    EXPECT_EQ(other.info->dir, run + "checkpoint-15");
}

TEST(Worker, WhatIfsAreKeptAcrossModelsOnlyIfTheyFit) {
    app::InferenceWorker worker;
    ASSERT_TRUE(OpenAndAnalyze(worker, DefaultModel(), kWorkerText));
    worker.SetInterventions({{model::Intervention::Kind::PositionOnly, 3, 3, 0.0f}});
    auto set = WaitFor(worker, [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::InterventionsSet; }).back();
    EXPECT_EQ(model::FormatInterventions(set.interventions), "3:3=pos");
    EXPECT_EQ(set.error, "");

    const std::string assets = app::BundledModelsDir() + "/";
    worker.OpenModel(assets + "english/ssa", "cpu");
    set = WaitFor(worker, [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::InterventionsSet; }).back();
    EXPECT_EQ(model::FormatInterventions(set.interventions), "3:3=pos") << set.error;

    worker.OpenModel(assets + "graph/ssa", "cpu");
    set = WaitFor(worker, [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::InterventionsSet; }).back();
    EXPECT_TRUE(set.interventions.empty());
    EXPECT_NE(set.error.find("3:3=pos"), std::string::npos) << set.error;

    worker.SetInterventions({{model::Intervention::Kind::Ablate, 1, 0, 0.0f}});  // layer 1 of a 1-layer model
    set = WaitFor(worker, [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::InterventionsSet; }).back();
    EXPECT_TRUE(set.interventions.empty());
    EXPECT_NE(set.error, "");
    // Of a list, those that fit are kept and the rest named (one that did not fit dropped them all).
    worker.SetInterventions({{model::Intervention::Kind::Ablate, 0, 0, 0.0f}, {model::Intervention::Kind::Ablate, 1, 0, 0.0f}});
    set = WaitFor(worker, [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::InterventionsSet; }).back();
    EXPECT_EQ(model::FormatInterventions(set.interventions), "0:0");
    EXPECT_NE(set.error.find("dropped the what-ifs 1:0: past the model's 1 layers x "), std::string::npos) << set.error;
}

}  // namespace
