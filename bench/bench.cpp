// ssaviz_bench: long-context figures (issue 7, SPEC section 6), each beside the same work done in
// PyTorch (bench/pytorch_baseline.py, python3-torch) measured in the same run on the same machine.
// Not a test: it prints a Markdown table.
//
// For each token count, in a fresh child process (so peak memory is that count's alone):
//   analyse   Engine::Analyze, the whole call: the SSA forward pass and its comparison (tau = 1)
//             run layer by layer, every layer's maps measured, pooled into thumbnails and
//             dropped, and both sides' predictions (logits, per-token loss and rank, top 10);
//             baseline: the same work in plain PyTorch, the two passes as one batch capturing
//             [L, H, T, T] a side, the logits and predictions, then the same metrics in torch ops
//   head map  one head's full [T, T] map rebuilt from q and k for display (uncached)
//   bake      that map max-pooled and colour-mapped to at most 1024 x 1024 pixels
//   peak RSS  of the process after all of the above
//   keystroke Engine::Analyze after one token changed at the end, in the middle or at the start,
//             reusing the previous analysis's rows (issue 15), against the full analysis; and the
//             shown head's map after an edit at the end, which keeps its earlier rows
//
//   usage: ssaviz_bench --model DIR [--tokens 128,256,512,1024,2048] [--device cpu|cuda]
//                       [--threads N] [--repeats 3] [--no-baseline] [--python /usr/bin/python3]
//          ssaviz_bench --model DIR --only full|end|middle|start [--tokens 1024] [--repeats 20] [--compare local|vanilla]
//                       [--twin DIR | --base DIR] [--no-maps]
//                       one thing in this process, each time printed: full analyses, or after one
//                       full analysis, edits of one token there, each followed by a head's map and
//                       the window's head view unless --no-maps (for a profiler: perf record -g);
//                       against a twin, or with a fine-tune's base (three sides); with
//                       SSAVIZ_BENCH_TRACE=FILE the last one (its head map too) is traced by
//                       LibTorch's profiler into FILE (bench/trace_summary.py ranks its kernels);
//                       SSAVIZ_BENCH_OPS=1 counts the host's ATen ops in it, by ssaviz's scope
//                       (=order: also each scope's first 300 as dispatched)
//          ssaviz_bench --model DIR --only lens [--tokens 128,512,1024] [--repeats 3] [--no-baseline]
//                       the logit lens and attribution of the SSA side (Engine::RunLens: a forward
//                       pass keeping the residual stream, every layer's rows through the final norm
//                       and head in blocks of 256, every position's attribution; Engine::Attribute:
//                       one position's parts for another token), beside the same products in PyTorch
//                       (bench/lens_baseline.py) on the same ids
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/core/state.h"
#include "bench/trace.h"
#include "model/nn/analysis.h"
#include "model/nn/analysis_plan_torch.h"
#include "model/nn/runtime_torch.h"
#include "viz/heatmap.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

[[noreturn]] void Die(const std::string& message) {
    std::fprintf(stderr, "ssaviz_bench: %s\n", message.c_str());
    std::exit(1);
}

double Median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? NAN : v[v.size() / 2];
}

double TimeMs(const std::function<void()>& fn) {
    const auto start = Clock::now();
    fn();
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double PeakRssMb() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss / 1024.0;  // Linux reports KiB
}

// On a GPU: the analysis's blocks of rows, how a layer's weight products ran (SSAVIZ_LAYER_PRODUCTS)
// and the device's memory in use (LibTorch's caching allocator keeps what the runs took, so about
// their peak, with CUDA's own context and any other process's); nothing on the CPU.
std::string DeviceReport(const std::string& name) {
    const auto device = model::ResolveDevice(name);
    if (!device || device->is_cpu()) return "";
    const model::DeviceMemoryBytes memory = model::DeviceMemory(*device);
    bool unreadable = false;
    const bool blocks = model::LayerProductsSetting(std::getenv("SSAVIZ_LAYER_PRODUCTS"), &unreadable) ==
                        model::AnalyzeOptions::LayerProducts::Blocks;
    return "; blocks of " + std::to_string(model::BlockBytes(*device) >> 20) + " MB, " +
           (blocks ? "each the whole layer" : "a layer's products whole") + "; device memory in use " + std::to_string(memory.used >> 20) +
           " MB of " + std::to_string(memory.total >> 20);
}

struct Options {
    std::string model, device = "cpu", python = "/usr/bin/python3", self;
    std::vector<int> tokens = {128, 256, 512, 1024, 2048};
    int threads = 0, repeats = 3, child = 0;
    bool baseline = true;
    bool maps = true;  // --only: after each analysis, a head's map and the window's head view (--no-maps: the analysis alone, for a profiler)
    std::string only;  // "full", "end", "middle" or "start": that alone, in this process
    bool local = false;  // --only with --compare local: the layer-local comparison (a big model's default)
    std::string twin, base;  // --only against a twin, or with a base
};

// A real text, repeated until it has `count` tokens: the GPL (every Debian system has it).
std::vector<int32_t> TokenIds(const model::Engine& engine, int count) {
    std::ifstream in("/usr/share/common-licenses/GPL-3");
    std::stringstream text;
    text << in.rdbuf();
    std::string source = text.str();
    if (source.empty()) source = "Attention is all you need, they said, and then the temperatures arrived. ";
    std::string body = source;
    while (true) {
        auto tokens = engine.Tokenize(body, /*truncate=*/true);
        if (!tokens) Die(tokens.error());
        if (static_cast<int>(tokens->ids.size()) >= count) return std::vector<int32_t>(tokens->ids.begin(), tokens->ids.begin() + count);
        if (body.size() > (size_t{64} << 20)) Die("cannot make " + std::to_string(count) + " tokens");
        body += "\n" + source;
    }
}

model::Tokenization BenchTokens(const model::Engine& engine, int count) {
    if (count > engine.Info().config.n_positions)
        Die(std::to_string(count) + " tokens exceed the model's context of " + std::to_string(engine.Info().config.n_positions));
    model::Tokenization tokens;
    tokens.ids = TokenIds(engine, count);
    tokens.pieces.assign(count, "x");
    tokens.offsets.assign(count, {0, 0});
    return tokens;
}

// --only: `repeats` full analyses, or one full analysis and then `repeats` edits of one token at
// one place, alternating between two texts; each Engine::Analyze time printed.
int RunOnly(const Options& o) {
    // As the table's runs: a thread a core unless --threads says (LibTorch's own default can be 1).
    const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
    model::SetComputeThreads(threads);
    auto engine = model::Engine::Open(o.model, o.device);
    if (!engine) Die(engine.error());
    if (o.local)
        if (auto s = (*engine)->SetComparison(model::Comparison::LayerLocal); !s) Die(s.error());
    if (!o.twin.empty())
        if (auto s = (*engine)->OpenTwin(o.twin); !s) Die(s.error());
    if (!o.base.empty())
        if (auto s = (*engine)->OpenBase(o.base); !s) Die(s.error());
    const int T = o.tokens.empty() ? 1024 : o.tokens[0];
    const model::Tokenization tokens = BenchTokens(**engine, T);
    const bool full = o.only == "full";
    const int at = full ? 0 : o.only == "end" ? T - 1 : o.only == "middle" ? T / 2 : o.only == "start" ? 0 : -1;
    if (at < 0) Die("--only '" + o.only + "' is not one of full, end, middle, start");
    model::Tokenization edited = tokens;
    edited.ids[at] = (edited.ids[at] + 1) % (*engine)->Info().config.vocab_size;
    std::vector<double> times, engine_ms;
    const double full_ms = TimeMs([&] {
        if (auto a = (*engine)->Analyze(tokens); !a) Die(a.error());
    });
    // What the window's worker does once idle after an analysis: ready the memory edits write into.
    const double reserve_ms = TimeMs([&] { (*engine)->ReserveForEdits([] { return false; }); });
    std::printf("full analysis of %d tokens (%d threads): %.1f ms; memory for edits readied in %.1f ms\n", T, threads, full_ms, reserve_ms);
    std::fflush(stdout);
    model::AnalyzeOptions options;
    options.reuse = !full;
    const char* trace = std::getenv("SSAVIZ_BENCH_TRACE");
    const char* ops = std::getenv("SSAVIZ_BENCH_OPS");
    for (int r = 0; r < o.repeats; ++r) {
        const model::Tokenization& now = r % 2 ? tokens : edited;
        const bool traced = trace && *trace && r == o.repeats - 1 && bench::StartTrace();
        const bool order = ops && std::strcmp(ops, "order") == 0;
        const bool counted = ops && (*ops == '1' || order) && r == o.repeats - 1;
        if (counted) bench::StartOpCount(order);
        model::Result<model::Analysis> a = model::Fail("not run");
        const double ms = TimeMs([&] { a = (*engine)->Analyze(now, options); });
        if (!a) Die(a.error());
        if (counted) bench::StopOpCount(25, "the analysis");
        // What the window reads of a head: the map kept where it was built, its extent, and the
        // whole level of at most 1,024 cells a side baked into a texture's pixels (on a GPU coloured
        // there, app::BakeMapWindow). First the head shown while typing (layer 0,
        // head 0: the last analysis built it, so it keeps that map's bands above the edit), then a
        // head switch (a head no analysis has built), then the shown head copied whole to the host
        // as an export reads it.
        int level = 0;
        while (((T + (1 << level) - 1) >> level) > 1024) ++level;
        const int n = (T + (1 << level) - 1) >> level;
        viz::HeatmapStyle style;
        style.log_scale = true;  // the window's default
        auto view = [&](int layer, int head) {
            const model::MapCellsPtr cells = a->Cells(model::MapSide::Ssa, layer, head);
            const model::MapExtent extent = cells->Extent();
            app::BakeMapWindow(*cells, style, app::SharedMapRange({&extent}, style.log_scale), level, 0, 0, n, n);
        };
        if (counted) bench::StartOpCount();
        const double view_ms = !o.maps ? NAN : TimeMs([&] { view(0, 0); });
        if (counted) bench::StopOpCount(8, "the window's head view");
        const model::MapCellsPtr cells = o.maps ? a->Cells(model::MapSide::Ssa, 0, 0) : nullptr;
        if (cells && cells->OnDevice()) {  // the level's texels coloured there, against its cells baked on the host
            const model::MapExtent extent = cells->Extent();
            const viz::Range range = app::SharedMapRange({&extent}, style.log_scale);
            const double texels_ms = TimeMs([&] { app::BakeMapWindow(*cells, style, range, level, 0, 0, n, n); });
            const double host_ms = TimeMs([&] {
                const std::vector<float> values = cells->Cells(level, 0, 0, n, n);
                viz::BakeHeatmapWindow(values.data(), 0, 0, n, n, n, n, style, range);
            });
            std::printf("  level %d (%d x %d cells): texels coloured on the device %.2f ms; its cells baked on the host %.2f ms\n", level, n, n,
                        texels_ms, host_ms);
        }
        const int other = 1 + r % std::max(1, a->n_layer * a->n_head - 1);
        if (counted) bench::StartOpCount();
        const double switch_ms = !o.maps ? NAN : TimeMs([&] { view(other / a->n_head, other % a->n_head); });
        if (counted) bench::StopOpCount(8, "a head switch");
        const double map_ms = !o.maps ? NAN : TimeMs([&] { a->Map(model::MapSide::Ssa, 0, 0); });
        if (traced && bench::StopTrace(trace)) std::printf("traced into %s\n", trace);
        std::printf("%s %2d at %d: %.2f ms (forward %.2f, metrics %.2f, %d rows reused); the window's head view %.2f ms, a head switch %.2f "
                    "ms; the head's map to the host %.2f ms\n",
                    o.only.c_str(), r, at, ms, a->forward_ms, a->metrics_ms, a->reused_rows, view_ms, switch_ms, map_ms);
        std::fflush(stdout);
        times.push_back(ms);
    }
    std::printf("median %s: %.2f ms; peak RSS %.0f MB; BLAS: %s%s\n", o.only.c_str(), Median(times), PeakRssMb(), model::DescribeBlas().c_str(),
                DeviceReport(o.device).c_str());
    return 0;
}

// One token count, in this (child) process: prints one JSON line.
int RunChild(const Options& o) {
    if (o.threads > 0) model::SetComputeThreads(o.threads);
    auto engine = model::Engine::Open(o.model, o.device);
    if (!engine) Die(engine.error());
    const int T = o.child;
    const model::Tokenization tokens = BenchTokens(**engine, T);

    std::vector<double> forward, metrics, head_map, bake, whole;
    std::shared_ptr<const model::Analysis> analysis;
    model::AnalyzeOptions full;
    full.reuse = false;  // every time from the first token
    for (int r = 0; r <= o.repeats; ++r) {  // the first is a warm-up
        model::Result<model::Analysis> result = model::Fail("not run");
        const double whole_ms = TimeMs([&] { result = (*engine)->Analyze(tokens, full); });
        if (!result) Die(result.error());
        const auto a = std::make_shared<const model::Analysis>(std::move(*result));
        model::HeadMap map;
        const double map_ms = TimeMs([&] { map = a->Map(model::MapSide::Ssa, 0, 0); });
        viz::HeatmapStyle style;
        style.range = viz::Range{0.0f, 1.0f};
        const int pixels = std::min(T, 1024);
        const double bake_ms = TimeMs([&] { viz::BakeHeatmap(map->data(), T, T, style, pixels); });
        if (r == 0) continue;
        whole.push_back(whole_ms);
        forward.push_back(a->forward_ms);
        metrics.push_back(a->metrics_ms);
        head_map.push_back(map_ms);
        bake.push_back(bake_ms);
        analysis = a;
    }
    // On a device the host queues the kernels ahead, so the split of the time into forward and
    // metrics comes from one more analysis that waits for each block (AnalyzeOptions::phase_timings).
    if (analysis->device != "cpu") {
        model::AnalyzeOptions timed = full;
        timed.phase_timings = true;
        auto a = (*engine)->Analyze(tokens, timed);
        if (!a) Die(a.error());
        forward = {a->forward_ms};
        metrics = {a->metrics_ms};
    }
    // What the check compares with PyTorch, then the analysis let go: the keystrokes below measure
    // the engine's memory, not this program's.
    double entropy_sum = 0, js_sum = 0, loss_sum = 0;
    for (float v : analysis->metrics.Get("entropy")) entropy_sum += v;
    for (float v : analysis->js) js_sum += v;
    for (float v : analysis->loss) loss_sum += v;
    const std::string device = analysis->device;
    analysis.reset();

    // Keystrokes: the text alternates between two versions that differ in one token at `at`, so
    // each analysis reuses the other's rows before `at`.
    const int vocab = (*engine)->Info().config.vocab_size;
    auto keystroke = [&](int at, std::vector<double>* map_ms) {
        model::Tokenization edited = tokens;
        edited.ids[at] = (edited.ids[at] + 1) % vocab;
        std::vector<double> times;
        for (int r = 0; r <= o.repeats + 1; ++r) {
            const model::Tokenization& now = r % 2 ? edited : tokens;
            std::shared_ptr<const model::Analysis> a;
            const double ms = TimeMs([&] {
                auto result = (*engine)->Analyze(now);
                if (!result) Die(result.error());
                a = std::make_shared<const model::Analysis>(std::move(*result));
            });
            const double m = TimeMs([&] { a->Map(model::MapSide::Ssa, 0, 0); });
            if (r < 2) continue;  // the first two set the state up
            times.push_back(ms);
            if (map_ms) map_ms->push_back(m);
        }
        return Median(times);
    };
    std::vector<double> seeded_map;
    if (auto first = (*engine)->Analyze(tokens); !first) Die(first.error());
    const double end_ms = keystroke(T - 1, &seeded_map), middle_ms = keystroke(T / 2, nullptr), start_ms = keystroke(0, nullptr);

    const std::string ids_file = "/tmp/ssaviz_bench_ids_" + std::to_string(getpid()) + ".txt";
    if (o.baseline) {  // the baseline runs the very same ids
        std::ofstream ids(ids_file);
        for (int32_t id : tokens.ids) ids << id << ' ';
    }
    const json line = {{"tokens", T},          {"forward_ms", Median(forward)}, {"metrics_ms", Median(metrics)},
                       {"head_map_ms", Median(head_map)}, {"bake_ms", Median(bake)},
                       {"peak_rss_mb", PeakRssMb()}, {"entropy_sum", entropy_sum},   {"js_sum", js_sum}, {"loss_sum", loss_sum},
                       {"edit_end_ms", end_ms}, {"edit_middle_ms", middle_ms}, {"edit_start_ms", start_ms},
                       {"edit_end_map_ms", Median(seeded_map)}, {"full_ms", Median(whole)},
                       {"ids_file", o.baseline ? ids_file : ""},
                       {"device", device}, {"device_report", DeviceReport(o.device)}};
    std::printf("%s\n", line.dump().c_str());
    return 0;
}

json RunCommand(const std::string& command);
std::string Quote(const std::string& s);
std::string Fixed(double v, int digits);
std::string Ratio(double ours, double theirs);

// --only lens: a Markdown table, a row per token count.
int RunLensBench(const Options& o) {
    const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
    model::SetComputeThreads(threads);
    auto engine = model::Engine::Open(o.model, o.device);
    if (!engine) Die(engine.error());
    const std::string baseline = std::string(SSAVIZ_SOURCE_DIR) + "/bench/lens_baseline.py";
    std::printf("ssaviz_bench --only lens: model %s, device %s, %d threads, median of %d after a warm-up\nBLAS: %s\n\n", o.model.c_str(),
                o.device.c_str(), threads, o.repeats, model::DescribeBlas().c_str());
    std::printf("| tokens | ssaviz lens + attribution ms | PyTorch, the same products ms | ratio | one position's attribution to "
                "another token ms | one position from the kept stream ms: first (with its forward pass), then another | "
                "after an edit at the end ms | peak RSS MB so far (PyTorch) | lens loss sums |\n|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (int T : o.tokens) {
        const model::Tokenization tokens = BenchTokens(**engine, T);
        const int vocab = (*engine)->Info().config.vocab_size;
        // The engine starts a lens from the last one's stream where the texts share a prefix, so the
        // whole lens is timed on texts that alternate at their first token.
        std::vector<int32_t> other_first = tokens.ids;
        other_first[0] = (other_first[0] + 1) % vocab;
        std::vector<double> lens_ms, attribute_ms;
        double loss_sum = 0;
        for (int r = 0; r <= o.repeats; ++r) {  // the first is a warm-up
            if (auto other = (*engine)->RunLens(other_first, model::MapSide::Ssa); !other) Die(other.error());
            model::Result<model::Lens> lens = model::Fail("not run");
            const double ms = TimeMs([&] { lens = (*engine)->RunLens(tokens.ids, model::MapSide::Ssa); });
            if (!lens) Die(lens.error());
            const double one = TimeMs([&] {
                if (auto parts = (*engine)->Attribute(tokens.ids, model::MapSide::Ssa, T - 1, tokens.ids[0]); !parts) Die(parts.error());
            });
            if (r == 0) continue;
            lens_ms.push_back(ms);
            attribute_ms.push_back(one);
            loss_sum = 0;
            for (float v : lens->loss) loss_sum += v;
        }
        // The selected position (Engine::RunLensAt): the first call for the text runs its forward
        // pass and keeps the residual stream; other positions then cost their own products alone.
        // (On the other text: this one's stream is the whole lens's, kept.)
        const double first_at = TimeMs([&] {
            if (auto at = (*engine)->RunLensAt(other_first, model::MapSide::Ssa, T / 2); !at) Die(at.error());
        });
        std::vector<double> at_ms;
        for (int r = 0; r < std::max(5, o.repeats); ++r)
            at_ms.push_back(TimeMs([&] {
                if (auto at = (*engine)->RunLensAt(other_first, model::MapSide::Ssa, (T / 3 + 7 * r) % (T - 1)); !at) Die(at.error());
            }));
        // An edit at the end after a whole lens: the rows of the last position alone (LensCache).
        std::vector<int32_t> other_last = tokens.ids;
        other_last.back() = (other_last.back() + 1) % vocab;
        if (auto whole = (*engine)->RunLens(tokens.ids, model::MapSide::Ssa); !whole) Die(whole.error());
        std::vector<double> edit_ms;
        for (int r = 0; r < std::max(3, o.repeats); ++r)
            edit_ms.push_back(TimeMs([&] {
                if (auto lens = (*engine)->RunLens(r % 2 ? tokens.ids : other_last, model::MapSide::Ssa); !lens) Die(lens.error());
            }));
        const std::string kept = Fixed(first_at, 1) + ", " + Fixed(Median(at_ms), 1) + " | " + Fixed(Median(edit_ms), 1);
        std::string row = "| " + std::to_string(T) + " | " + Fixed(Median(lens_ms), 1) + " | ";
        json theirs = json::object();
        if (o.baseline) {
            const std::string ids_file = "/tmp/ssaviz_bench_lens_ids_" + std::to_string(getpid()) + ".txt";
            {
                std::ofstream ids(ids_file);
                for (int32_t id : tokens.ids) ids << id << ' ';
            }
            theirs = RunCommand(Quote(o.python) + " " + Quote(baseline) + " --model " + Quote(o.model) + " --ids " + Quote(ids_file) +
                                " --tokens " + std::to_string(T) + " --threads " + std::to_string(threads) + " --repeats " +
                                std::to_string(o.repeats));
            std::remove(ids_file.c_str());
            const double d = std::abs(loss_sum - double(theirs["loss_sum"])) / std::max(1e-9, std::abs(double(theirs["loss_sum"])));
            row += Fixed(theirs["total_ms"], 1) + " | " + Ratio(Median(lens_ms), theirs["total_ms"]) + " | " + Fixed(Median(attribute_ms), 1) +
                   " | " + kept + " | " + Fixed(PeakRssMb(), 0) + " (" + Fixed(theirs["peak_rss_mb"], 0) + ") | " + (d < 1e-4 ? "agree" : "DIFFER") + " (" +
                   Fixed(d * 1e6, 2) + " ppm) |";
        } else {
            row += "- | - | " + Fixed(Median(attribute_ms), 1) + " | " + kept + " | " + Fixed(PeakRssMb(), 0) + " | - |";
        }
        std::printf("%s\n", row.c_str());
        std::fflush(stdout);
    }
    return 0;
}

json RunCommand(const std::string& command) {
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) Die("cannot run: " + command);
    std::string out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
    const int status = pclose(pipe);
    const size_t line = out.rfind('{');
    if (status != 0 || line == std::string::npos) Die("failed (" + std::to_string(status) + "): " + command);
    return json::parse(out.substr(line));
}

std::string Quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::string Fixed(double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

std::string Ratio(double ours, double theirs) { return theirs > 0 ? Fixed(ours / theirs, 2) + "x" : "n/a"; }

Options Parse(int argc, char** argv) {
    Options o;
    o.self = argv[0];
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) Die(flag + " needs a value");
            return argv[++i];
        };
        auto number = [&]() {
            const std::string v = value();
            char* end = nullptr;
            const long n = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end || n < 0 || n > 1 << 20) Die(flag + " '" + v + "' is not a count");
            return static_cast<int>(n);
        };
        if (flag == "--model") o.model = value();
        else if (flag == "--device") o.device = value();
        else if (flag == "--python") o.python = value();
        else if (flag == "--threads") o.threads = number();
        else if (flag == "--repeats") o.repeats = std::max(1, number());
        else if (flag == "--child") o.child = number();
        else if (flag == "--no-baseline") o.baseline = false;
        else if (flag == "--no-maps") o.maps = false;
        else if (flag == "--only") o.only = value();
        else if (flag == "--twin") o.twin = value();
        else if (flag == "--base") o.base = value();
        else if (flag == "--compare") {
            const std::string c = value();
            if (c != "local" && c != "vanilla") Die("--compare '" + c + "' is not one of local, vanilla");
            o.local = c == "local";
        }
        else if (flag == "--tokens") {
            o.tokens.clear();
            std::stringstream list(value());
            for (std::string item; std::getline(list, item, ',');) {
                const int n = std::atoi(item.c_str());
                if (n <= 0) Die("--tokens '" + item + "' is not a positive count");
                o.tokens.push_back(n);
            }
        } else {
            Die("unknown flag " + flag + " (see the usage at the top of bench/bench.cpp)");
        }
    }
    if (o.model.empty()) Die("--model DIR is required");
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    model::RestartWithFasterBlasKernels(argv);  // as the app does; the PyTorch baseline inherits the kernels
    const Options o = Parse(argc, argv);
    if (o.child > 0) return RunChild(o);
    if (o.only == "lens") return RunLensBench(o);
    if (!o.only.empty()) return RunOnly(o);

    const unsigned cores = std::thread::hardware_concurrency();
    const int threads = o.threads > 0 ? o.threads : static_cast<int>(cores);
    const std::string baseline = std::string(SSAVIZ_SOURCE_DIR) + "/bench/pytorch_baseline.py";
    model::SetComputeThreads(threads);
    std::printf("ssaviz_bench: model %s, device %s, %d threads (%u cores), median of %d after a warm-up\nBLAS: %s\n", o.model.c_str(),
                o.device.c_str(), threads, cores, o.repeats, model::DescribeBlas().c_str());
    std::printf("\n| tokens | ssaviz analysis ms (forward and predictions + metrics) | PyTorch, the same work ms (forward + "
                "predictions + metrics) | ratio | head map ms | bake ms (PyTorch) | peak RSS MB (PyTorch) | checks |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|---|\n");
    std::vector<std::string> keystrokes, on_device;
    for (int T : o.tokens) {
        const std::string common = " --model " + Quote(o.model) + " --threads " + std::to_string(threads);
        const json ours = RunCommand(Quote(o.self) + common + " --device " + Quote(o.device) + " --repeats " +
                                     std::to_string(o.repeats) + " --child " + std::to_string(T) + (o.baseline ? "" : " --no-baseline"));
        const std::string ids_file = ours.value("ids_file", "");
        json theirs = json::object();
        if (o.baseline)
            theirs = RunCommand(Quote(o.python) + " " + Quote(baseline) + common + " --ids " + Quote(ids_file) + " --tokens " +
                                std::to_string(T) + " --repeats " + std::to_string(o.repeats) +
                                (o.device == "cuda" ? " --device cuda" : ""));
        if (!ids_file.empty()) std::remove(ids_file.c_str());
        const double whole = ours["full_ms"], f = ours["forward_ms"], m = ours["metrics_ms"];
        std::string row = "| " + std::to_string(T) + " | " + Fixed(whole, 1) + " (" + Fixed(f, 1) + " + " + Fixed(m, 1) + ") | ";
        if (o.baseline) {
            const double total = theirs["total_ms"], bf = theirs["forward_ms"], bp = theirs["predictions_ms"], bm = theirs["metrics_ms"];
            // The same numbers? Relative agreement of the sums of every row's entropy, JS divergence and
            // loss. A deep random model's sharp attention amplifies float32 rounding: on GPT-2 small's
            // shape at 1,024 tokens each side's per-head mean entropies are up to 4% off a float64
            // run's, and the two float32 sums differ by ~170 ppm; hence 1,000 ppm for the entropies.
            auto agree = [&](const char* key) {
                return std::abs(double(ours[key]) - double(theirs[key])) / std::max(1e-9, std::abs(double(theirs[key])));
            };
            const double de = agree("entropy_sum"), dj = agree("js_sum"), dl = agree("loss_sum");
            row += Fixed(total, 1) + " (" + Fixed(bf, 1) + " + " + Fixed(bp, 1) + " + " + Fixed(bm, 1) + ") | " + Ratio(whole, total) +
                   " | " + Fixed(ours["head_map_ms"], 2) + " | " + Fixed(ours["bake_ms"], 2) + " (" + Fixed(theirs["bake_ms"], 2) + ") | " +
                   Fixed(ours["peak_rss_mb"], 0) + " (" + Fixed(theirs["peak_rss_mb"], 0) + ") | entropy sums " +
                   (de < 1e-3 ? "agree" : "DIFFER") + " (" + Fixed(de * 1e6, 2) + " ppm), JS " + (dj < 1e-3 ? "agree" : "DIFFER") +
                   " (" + Fixed(dj * 1e6, 1) + " ppm), loss " + (dl < 1e-4 ? "agree" : "DIFFER") + " (" + Fixed(dl * 1e6, 2) + " ppm) |";
        } else {
            row += "- | - | " + Fixed(ours["head_map_ms"], 2) + " | " + Fixed(ours["bake_ms"], 2) + " | " + Fixed(ours["peak_rss_mb"], 0) +
                   " | - |";
        }
        std::printf("%s\n", row.c_str());
        std::fflush(stdout);
        const double full = ours["full_ms"];
        keystrokes.push_back("| " + std::to_string(T) + " | " + Fixed(full, 1) + " | " + Fixed(ours["edit_end_ms"], 2) + " (" +
                             Ratio(full, ours["edit_end_ms"]) + " faster) | " + Fixed(ours["edit_middle_ms"], 1) + " | " +
                             Fixed(ours["edit_start_ms"], 1) + " | " + Fixed(ours["head_map_ms"], 2) + " | " +
                             Fixed(ours["edit_end_map_ms"], 2) + " |");
        if (const std::string report = ours.value("device_report", ""); !report.empty())
            on_device.push_back(std::to_string(T) + " tokens" + report);
    }
    std::printf("\nAn edit of one token, reusing the previous analysis (Engine::Analyze, whole call):\n\n");
    std::printf("| tokens | full analysis ms | edit at the end ms | in the middle ms | at the start ms | head map ms (new) | head map ms after an edit at the end |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const std::string& row : keystrokes) std::printf("%s\n", row.c_str());
    if (!on_device.empty()) std::printf("\nOn the device, after each count's runs:\n");
    for (const std::string& line : on_device) std::printf("- %s\n", line.c_str());
    return 0;
}
