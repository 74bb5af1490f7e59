// ssaviz._ssaviz, the extension under `import ssaviz` (SPEC section 8): the same runner as the window
// and the command line (app/core/run.h), the flags applied by their table (app/export/flags.h),
// arrays handed to numpy as views of the analysis's own memory, figures from the export's
// renderer. The package's __init__.py checks Python types and spells keyword arguments as flags;
// everything else is here.
//
// Index:
//   [SECTION] Errors: one-line messages as Python exceptions
//   [SECTION] Flags from keyword arguments
//   [SECTION] The model: one Runner, one lock
//   [SECTION] The analysis: numpy views, predictions
//   [SECTION] Figures
//   [SECTION] Exports, batches and generation
//   [SECTION] The module
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/core/examples.h"
#include "app/core/exit_code.h"
#include "app/core/names.h"
#include "app/core/run.h"
#include "app/core/timeline.h"
#include "app/export/batch.h"
#include "app/export/export.h"
#include "app/export/export_figures.h"
#include "app/export/flags.h"
#include "app/export/run_export.h"
#include "model/io/files.h"
#include "model/nn/analysis.h"
#include "viz/figure.h"

namespace py = pybind11;
namespace fs = std::filesystem;
using nlohmann::json;

namespace app::python {
namespace {

//-----------------------------------------------------------------------------
// [SECTION] Errors: one-line messages as Python exceptions
//-----------------------------------------------------------------------------

// The command line's message as Python says it: a leading flag becomes its keyword ("--sink-eps 2
// is not ..." reads "sink_eps 2 is not ..."; "--out: ..." reads "out: ..."), and the advice it gives
// in flags names the keywords (exact phrases of the engine's messages: tests/app/python/test_errors.py
// meets each).
std::string InPythonWords(std::string message) {
    if (message.rfind("--", 0) == 0) {
        size_t end = 2;
        while (end < message.size() && (std::islower(static_cast<unsigned char>(message[end])) ||
                                        std::isdigit(static_cast<unsigned char>(message[end])) || message[end] == '-'))
            ++end;
        if (end > 2) {
            std::string keyword = message.substr(2, end - 2);
            std::replace(keyword.begin(), keyword.end(), '-', '_');
            message = keyword + message.substr(end);
        }
    }
    static const std::pair<std::string_view, std::string_view> kWords[] = {
        {"pass --truncate to run it", "pass truncate=True to run it"},
        {"pass --heads N", "pass n_head=N"},
        {"pass --n-head N", "pass n_head=N"},
        {"pass --query-form POSITION,TOKEN[,COMBINE] (e.g. sigmoid,shared,sum)",
         "pass query_form=\"POSITION,TOKEN[,COMBINE]\" (e.g. \"sigmoid,shared,sum\")"},
        {"pass --value-form POSITION,TOKEN[,COMBINE] (e.g. sigmoid,shared,sum)",
         "pass value_form=\"POSITION,TOKEN[,COMBINE]\" (e.g. \"sigmoid,shared,sum\")"},
        {"(or --query-form / --value-form)", "(or query_form= / value_form=)"},
        {"or --config FILE", "or config=FILE"},
        {"the official fine-tune scripts write none beside their checkpoints: in export and the window, --base DIR reads its base's",
         "the official fine-tune scripts write none beside their checkpoints: a Run's base=DIR reads its base's for every step"},
        {"pass --tokenizer DIR, its base model's folder", "pass tokenizer=DIR, its base model's folder"},
        {", or in export and the window --base DIR, which reads the base's", ", or for a Run's steps base=DIR, which reads the base's"},
        {"name it with --base DIR", "name it with base=DIR"},
        {"name the fine-tune's own with --base DIR", "name the fine-tune's own with base=DIR"},
        {"it needs --lens", "it needs lens=True"},
        {"use --device cpu or auto", "use device=\"cpu\" or \"auto\""},
        {"compare with tau = 1 (--compare vanilla) or a twin", "compare with tau = 1 (compare=\"vanilla\") or a twin"},
        {"ssaviz does not write through links inside --out", "ssaviz does not write through links inside the out= folder"},
        {"needs a base (--base DIR, or --compare base)", "needs a base (base=DIR, or compare=\"base\")"},
        {"compare it with a twin (--compare DIR), or open the SSA fine-tune with this model as its --base",
         "compare it with a twin (compare=DIR), or analyse the SSA fine-tune with base= this model; compare=None analyses it alone"},
        {"set the SSA fine-tune against this one as its twin (--compare DIR)", "analyse the SSA fine-tune with compare= this model, as its twin"},
        {"give what-ifs (--ablate), or compare with tau = 1 (--compare vanilla)", "give what-ifs (ablate=), or compare with tau = 1 (compare=\"vanilla\")"},
        {" at --png-scale ", " at png_scale="},
        {" at --text-scale ", " at text_scale="},
        {" and --text-scale ", " and text_scale="},
        {"a smaller --text-scale, ", "a smaller text_scale=, "},
        {"a smaller --png-scale, ", "a smaller png_scale=, "},
        {"or no png/svg (--format json,npy,csv,html)", "or no png/svg (formats without them)"},
        {"--out is empty: name the folder to write", "it is empty: name the folder to write"},
        {"a smaller --size or --png-scale", "a smaller size= or png_scale="},
        {"a smaller --png-scale, or --size N for smaller maps", "a smaller png_scale=, or size=N for smaller maps"},
    };
    for (const auto& [cli, python] : kWords)
        for (size_t at = message.find(cli); at != std::string::npos; at = message.find(cli, at + python.size()))
            message.replace(at, cli.size(), python);
    return message;
}

// A message as Python gets it: in Python's words, control characters escaped as the command line
// prints them (a traceback printed to a terminal would run them), at most 4,096 characters. Escaped
// when thrown: what() is a C string, and a NUL in a name a user passed cut the message there.
std::string PythonMessage(const std::string& message) { return model::EscapeForMessage(InPythonWords(message), 4096); }

// Thrown with the GIL released; the translator registered in the module turns each into its
// Python exception. The messages are the command line's (without its "ssaviz: " prefix) in
// Python's words (PythonMessage).
struct BadArgument : std::runtime_error {  // ValueError: what the command line exits 2 or 3 for
    explicit BadArgument(const std::string& message) : std::runtime_error(PythonMessage(message)) {}
};
struct UnknownKeyword : BadArgument {  // ArgumentTypeError: a TypeError, as Python's own for a keyword a call does not take, and a ValueError
    using BadArgument::BadArgument;
};
struct MissingFile : std::runtime_error {  // FileNotFoundError: a path that is not there
    explicit MissingFile(const std::string& message) : std::runtime_error(PythonMessage(message)) {}
};
struct WriteFailed : std::runtime_error {  // OSError: an export that could not be written
    explicit WriteFailed(const std::string& message) : std::runtime_error(PythonMessage(message)) {}
};

bool Exists(const std::string& path) {
    std::error_code ec;
    return !path.empty() && fs::exists(fs::path(path), ec);
}

// A runner's answer, or its failure as the exception for what the command line exits 1 (RuntimeError)
// or 2 and 3 for (ValueError; FileNotFoundError for a model or twin whose path is not there).
template <class T>
T Must(RunResult<T> result) {
    if (result) return std::move(*result);
    const RunError& e = result.error();
    if (e.kind == RunError::Kind::Failure) throw std::runtime_error(PythonMessage(e.message));
    if (!e.path.empty() && !Exists(e.path)) throw MissingFile(e.message);
    throw BadArgument(e.message);
}

//-----------------------------------------------------------------------------
// [SECTION] Flags from keyword arguments
//-----------------------------------------------------------------------------

// Keyword arguments as (name, value) pairs, already strings (the package spells Python values).
using FlagList = std::vector<std::pair<std::string, std::string>>;

std::string Spelled(const std::string& name) {
    std::string spelled = name.rfind("--", 0) == 0 ? name : "--" + name;
    std::replace(spelled.begin(), spelled.end(), '_', '-');
    return spelled;
}

// What `where` takes: the command's flags that are not named arguments of their own.
std::vector<std::string> Allowed(Command command, const std::set<std::string>& excluded) {
    std::vector<std::string> names;
    for (const Flag* f : FlagsOf(command))
        if (!excluded.count(f->names[0])) names.push_back(f->names[0]);
    return names;
}

// Applies keyword flags with the table; `excluded` are flags `where` takes as arguments of its own
// (or not at all), so that passing them as flags is a mistake to name.
void ApplyFlags(Command command, const FlagList& flags, const std::set<std::string>& excluded, const std::string& where,
                CommandOptions* options) {
    for (const auto& [name, value] : flags) {
        const std::string spelled = Spelled(name);
        std::string keyword = spelled.substr(2);  // as Python spells it: "top_k" for --top-k
        std::replace(keyword.begin(), keyword.end(), '-', '_');
        if (excluded.count(spelled) || !FindFlag(command, spelled)) {
            std::string takes;
            for (const std::string& n : Allowed(command, excluded))  // --format is Python's formats= (a list)
                takes += (takes.empty() ? "" : ", ") + (n == "--format" ? std::string("formats") : n.substr(2));
            std::replace(takes.begin(), takes.end(), '-', '_');
            const char* examples = spelled == "--example" ? "; ssaviz.examples() gives each bundled example's model, twin or base and text" : "";
            throw UnknownKeyword(where + " takes no keyword " + keyword + " (its keywords: " + (takes.empty() ? "none" : takes) + ")" + examples);
        }
        if (auto s = ApplyFlag(command, spelled, value, options); !s) throw BadArgument(s.error());
    }
}

// Flags that are named arguments (or meaningless) in the Python API. An export's keywords are its
// figures' and files': how the model opens (config=, tokenizer=) is load()'s, and a run's
// (run=, compare_run=, steps=) load_run()'s and Run.export()'s; given to an export they were taken
// and ignored.
const std::set<std::string> kLoadExcluded = {"--help", "--json", "--model", "--device", "--text", "--text-file", "--truncate", "--example"};
const std::set<std::string> kExportExcluded = {"--help",     "--model",  "--device",      "--dtype", "--n-head",    "--query-form",
                                               "--value-form", "--activation", "--text", "--text-file", "--truncate", "--batch",
                                               "--out",      "--ablate", "--compare",     "--config", "--tokenizer", "--run",
                                               "--compare-run", "--steps", "--example"};

//-----------------------------------------------------------------------------
// [SECTION] The model: one Runner, one lock
//-----------------------------------------------------------------------------

// What a Python Model and every analysis it made share. The runner's engine is single-threaded and
// keeps what the last analysis left behind (the incremental path), so one lock guards it; close()
// drops it while analyses keep their own arrays and maps.
struct ModelCore {
    std::mutex mutex;
    std::unique_ptr<Runner> runner;  // null once closed
    model::ModelInfo info;
    std::string path, device;
    CommandOptions options;  // the load flags
    std::string base_dir;    // compare="base": the base's folder (Python's base=), "" for the one beside the model
    bool run_step = false;   // a step of a run (Run.analyze): "" is the run's base, not one inside the step's own folder
    std::shared_ptr<const std::vector<std::string>> vocab;  // [V] each id's bytes, kept once made (for a closed model's analyses)

    Runner& Run() {
        if (!runner) throw BadArgument("the model is closed");
        return *runner;
    }
    // Under the lock.
    std::shared_ptr<const std::vector<std::string>> Vocab() {
        if (!vocab) vocab = Must(Run().Vocabulary());
        return vocab;
    }
};

// The model the package asks for by default: $SSAVIZ_MODEL, the bundled English model, else the
// build's random one (DefaultModelDir looks for that beside the executable, which here is Python).
std::string DefaultModel() {
    if (std::string dir = DefaultModelDir(); !dir.empty()) return dir;
#ifdef SSAVIZ_BUILD_MODELS
    if (Exists(SSAVIZ_BUILD_MODELS "/default/config.json")) return SSAVIZ_BUILD_MODELS "/default";
#endif
    throw MissingFile("no model given and no bundled default model found (set SSAVIZ_MODEL)");
}

// A Dask worker's share of its machine (its threads_per_worker), set by ssaviz._batch before the
// worker opens a model; unset, a model computes on every usable core (or $SSAVIZ_THREADS).
std::optional<model::ComputeThreads> g_worker_threads;

std::shared_ptr<ModelCore> OpenModel(std::string path, const std::string& device, const FlagList& flags) {
    auto core = std::make_shared<ModelCore>();
    ApplyFlags(Command::Info, flags, kLoadExcluded, "load()", &core->options);
    if (auto s = ApplyFlag(Command::Info, "--device", device, &core->options); !s) throw BadArgument(s.error());
    if (path.empty()) path = DefaultModel();
    py::gil_scoped_release release;
    model::UseComputeThreads(g_worker_threads ? *g_worker_threads : model::ResolveComputeThreads());
    core->runner = Must(Runner::Open({path, device, core->options.dtype, core->options.hints}));
    core->info = core->runner->Info();
    core->path = path;
    core->device = device;
    return core;
}

// What an analysis runs: `compare` a keyword, or a twin's folder opened with `twin_flags` (another
// Model's load flags; the model's own when none, as --compare DIR takes the command's).
RunSpec RunOf(const ModelCore& core, const std::string& compare, const std::optional<FlagList>& twin_flags, const std::string& ablate) {
    RunSpec run{ParseCompare(compare, /*python=*/true), ablate};
    if (run.compare.kind == CompareKind::Base) run.compare.base_dir = core.base_dir;
    run.compare.base_of_the_run = core.run_step;       // as export --run takes it, every step alike
    run.compare.base_may_be_the_model = core.run_step;  // a run's first step is often its base
    if (run.compare.kind == CompareKind::Twin && twin_flags) {
        CommandOptions o;
        ApplyFlags(Command::Info, *twin_flags, kLoadExcluded, "the twin's load()", &o);
        run.compare.twin_hints = o.hints;
    }
    return run;
}

// The tokens of a text, or of ids given as they are (their pieces decoded one after another, as
// generation appends them). Under the lock.
model::Tokenization Tokens(ModelCore& core, const std::string* text, const std::vector<int64_t>* ids, bool truncate,
                           std::string* text_out) {
    Runner& runner = core.Run();
    if (text) {
        *text_out = *text;
        return Must(runner.Tokenize(*text, truncate));  // its advice in Python's words (InPythonWords)
    }
    const model::Tokenizer& tokenizer = runner.engine().tokenizer();
    const size_t context = static_cast<size_t>(core.info.config.n_positions), vocab = tokenizer.VocabSize();
    if (ids->empty()) throw BadArgument("ids are empty");
    if (ids->size() > context && !truncate)
        throw BadArgument("ids are " + std::to_string(ids->size()) + " tokens, longer than the model's context of " + std::to_string(context) +
                          " (truncating keeps the first " + std::to_string(context) + "); pass truncate=True to run it");
    model::Tokenization tokens;
    text_out->clear();
    for (size_t i = 0; i < std::min(ids->size(), context); ++i) {
        const int64_t id = (*ids)[i];
        if (id < 0 || static_cast<size_t>(id) >= vocab)
            throw BadArgument("id " + std::to_string(id) + " at position " + std::to_string(i) + " is not in the vocabulary (" +
                              std::to_string(vocab) + " tokens)");
        auto piece = model::AppendToken(tokenizer, static_cast<int32_t>(id), &tokens);
        if (!piece) throw BadArgument(piece.error());
        *text_out += *piece;
    }
    return tokens;
}

//-----------------------------------------------------------------------------
// [SECTION] The analysis: numpy views, predictions
//-----------------------------------------------------------------------------

struct AnalysisHandle {
    std::shared_ptr<const model::Analysis> a;
    std::shared_ptr<ModelCore> core;  // the model's info; its engine unless closed
    std::string text;
    std::string compare;  // vanilla, local, unedited, none, twin
    RunSpec run;          // the comparison, twin or base and what-ifs it was made with, for passes it runs again
    double engine_ms = 0;  // the engine's calls: tokenizing and Analyze
    // rank_heads()'s measures once complete (set with the GIL held), for its figures and an export's
    // rank_heads=True: a ranking costs a forward pass or more a head.
    mutable std::shared_ptr<const HeadImpacts> ranked;
    // Each side's lens once run (RunLensSide, under the model's lock): its figures and arrays after
    // the model is closed, as the maps are.
    mutable std::shared_ptr<model::Lens> lenses[model::kMapSides];

    const model::Analysis& A() const { return *a; }
    bool HasCompare() const { return compare != "none"; }
    void CheckCompare(const std::string& what) const {
        if (!HasCompare()) throw BadArgument(what + ": the analysis has no comparison (it was made with compare=None)");
    }
    void CheckHead(int layer, int head) const {
        if (layer < 0 || layer >= a->n_layer)
            throw BadArgument("layer " + std::to_string(layer) + " is out of range (the model has " + std::to_string(a->n_layer) + ")");
        if (head < 0 || head >= a->n_head)
            throw BadArgument("head " + std::to_string(head) + " is out of range (the model has " + std::to_string(a->n_head) + ")");
    }
};

// A read-only numpy array over memory that `owner` keeps alive: no copy.
template <class T>
py::array View(std::shared_ptr<const void> owner, const T* data, std::vector<py::ssize_t> shape) {
    auto* keep = new std::shared_ptr<const void>(std::move(owner));
    py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); });
    py::array out(py::dtype::of<T>(), std::move(shape), {}, data, base);
    py::detail::array_proxy(out.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
    return out;
}

// An [L, H, T] array of the analysis, gathered from its bands into an array of its own (read-only,
// as the views are).
py::array Gathered(const model::RowArray& values, std::vector<py::ssize_t> shape) {
    auto* flat = new std::vector<float>(values.Flat());
    py::capsule base(flat, [](void* p) { delete static_cast<std::vector<float>*>(p); });
    py::array out(py::dtype::of<float>(), std::move(shape), {}, flat->data(), base);
    py::detail::array_proxy(out.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
    return out;
}

py::ssize_t Size(size_t n) { return static_cast<py::ssize_t>(n); }

// One of the analysis's arrays by name, with its shape; None for an array the analysis lacks
// (the comparison's predictions without a comparison forward pass, anything compared without one).
py::object Array(const AnalysisHandle& h, const std::string& name) {
    const model::Analysis& a = h.A();
    const py::ssize_t L = a.n_layer, H = a.n_head, T = a.n_tokens;
    const std::vector<py::ssize_t> lht = {L, H, T};
    auto floats = [&](const std::vector<float>& v, std::vector<py::ssize_t> shape) -> py::object {
        return View<float>(h.a, v.data(), std::move(shape));
    };
    auto rows = [&](const model::RowArray& v) -> py::object { return Gathered(v, lht); };
    auto ints = [&](const std::vector<int32_t>& v, std::vector<py::ssize_t> shape) -> py::object {
        return View<int32_t>(h.a, v.data(), std::move(shape));
    };
    const bool compare = h.HasCompare(), predictions = compare && a.HasComparePredictions();
    if (name == "tau_q") return rows(a.tau_q);
    if (name == "tau_v") return rows(a.tau_v);
    if (name == "tau_q_position") return rows(a.tau_q_position);
    if (name == "tau_q_token") return rows(a.tau_q_token);
    if (name == "tau_q_compare") return compare ? rows(a.tau_q_compare) : py::none();
    if (name == "tau_v_compare") return compare ? rows(a.tau_v_compare) : py::none();
    if (name == "loss") return floats(a.loss, {Size(a.loss.size())});
    if (name == "loss_compare") return predictions ? floats(a.loss_compare, {Size(a.loss_compare.size())}) : py::none();
    if (name == "rank") return ints(a.rank, {Size(a.rank.size())});
    if (name == "rank_compare") return predictions ? ints(a.rank_compare, {Size(a.rank_compare.size())}) : py::none();
    const py::ssize_t K = a.TopK();
    if (name == "top_ids") return ints(a.top_ids, {Size(a.top_ids.size()) / K, K});
    if (name == "top_probs") return floats(a.top_probs, {Size(a.top_probs.size()) / K, K});
    if (name == "top_ids_compare") return predictions ? ints(a.top_ids_compare, {Size(a.top_ids_compare.size()) / K, K}) : py::none();
    if (name == "top_probs_compare") return predictions ? floats(a.top_probs_compare, {Size(a.top_probs_compare.size()) / K, K}) : py::none();
    if (name == "next_logits") return floats(a.next_logits, {Size(a.next_logits.size())});
    // A fine-tune's base (compare="base"); None otherwise.
    const bool base = a.HasBase();
    if (name == "tau_q_base") return base ? rows(a.tau_q_base) : py::none();
    if (name == "tau_v_base") return base ? rows(a.tau_v_base) : py::none();
    if (name == "loss_base") return base ? floats(a.loss_base, {Size(a.loss_base.size())}) : py::none();
    if (name == "rank_base") return base ? ints(a.rank_base, {Size(a.rank_base.size())}) : py::none();
    if (name == "top_ids_base") return base ? ints(a.top_ids_base, {Size(a.top_ids_base.size()) / K, K}) : py::none();
    if (name == "top_probs_base") return base ? floats(a.top_probs_base, {Size(a.top_probs_base.size()) / K, K}) : py::none();
    throw BadArgument("no array named '" + name + "'");
}

// Every [L, H, T] metric: the row metrics of SPEC section 2, the comparison's with "_compare",
// js, l1 and effective_qk_norm; and the [L, H] QK spectrum.
py::dict Metrics(const AnalysisHandle& h) {
    const model::Analysis& a = h.A();
    const std::vector<py::ssize_t> lht = {a.n_layer, a.n_head, a.n_tokens}, lh = {a.n_layer, a.n_head};
    py::dict out;
    for (const model::NamedArray& r : a.metrics.rows) out[py::str(r.name)] = Gathered(r.values, lht);
    if (h.HasCompare()) {
        for (const model::NamedArray& r : a.metrics_compare.rows) out[py::str(r.name + "_compare")] = Gathered(r.values, lht);
        out["js"] = Gathered(a.js, lht);
        out["l1"] = Gathered(a.l1, lht);
    }
    if (a.HasBase()) {  // the base's rows, and each row's total change and the weights' drift
        for (const model::NamedArray& r : a.metrics_base.rows) out[py::str(r.name + "_base")] = Gathered(r.values, lht);
        for (auto [key, values] : {std::pair{"js_total", &a.js_total}, std::pair{"l1_total", &a.l1_total},
                                   std::pair{"js_drift", &a.js_drift}, std::pair{"l1_drift", &a.l1_drift}})
            out[key] = Gathered(*values, lht);
        // [L, H]: the base's QK spectrum, and how far each head's weights moved from the base's.
        for (auto [key, values] : {std::pair{"qk_opnorm_base", &a.qk_opnorm_base}, std::pair{"qk_eig_mean_base", &a.qk_eig_mean_base},
                                   std::pair{"qk_eig_var_base", &a.qk_eig_var_base}, std::pair{"weights_q", &a.weights_q},
                                   std::pair{"weights_k", &a.weights_k}, std::pair{"weights_v", &a.weights_v}, std::pair{"weights_o", &a.weights_o}})
            if (values->size() == static_cast<size_t>(a.n_layer) * a.n_head) out[key] = View<float>(h.a, values->data(), lh);
    }
    out["effective_qk_norm"] = Gathered(a.effective_qk_norm, lht);
    out["qk_opnorm"] = View<float>(h.a, a.qk_opnorm.data(), lh);
    out["qk_eig_mean"] = View<float>(h.a, a.qk_eig_mean.data(), lh);
    out["qk_eig_var"] = View<float>(h.a, a.qk_eig_var.data(), lh);
    return out;
}

// "tau1" names the comparison where it is the model's own weights at tau = 1 (comparison_kind
// tau1, or a base's middle side: its files end in _tau1), for sides and maps alike.
bool ComparesWithTau1(const AnalysisHandle& h) {
    return h.HasCompare() && (h.A().HasBase() || h.A().comparison == model::Comparison::Counterfactual);
}

model::MapSide Side(const AnalysisHandle& h, const std::string& side) {
    if (side == "ssa") return model::MapSide::Ssa;
    const bool tau1 = ComparesWithTau1(h);
    if (side == "compare" || side == "vanilla" || (side == "tau1" && tau1)) {
        h.CheckCompare("side '" + side + "'");
        return model::MapSide::Compare;
    }
    if (side == "base") {
        if (!h.A().HasBase()) throw BadArgument("side 'base': the analysis has no base (analyze with compare=\"base\")");
        return model::MapSide::Base;
    }
    throw BadArgument("side " + QuoteForMessage(side) + " is not one of ssa, compare" + std::string(tau1 ? ", tau1" : "") +
                      std::string(h.A().HasBase() ? ", base" : ""));
}

// [SECTION] The logit lens and attribution (SPEC section 10), on request: the lens of the
// analysis's ids on one side (its own forward pass, on the model as loaded: no what-ifs; the
// engine keeps the last of each side, so asking again is cheap).
std::shared_ptr<model::Lens> RunLensSide(const AnalysisHandle& h, model::MapSide side) {
    if (!h.A().interventions.empty()) throw BadArgument("the lens runs the model as loaded: analyze without ablate= for it");
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(h.core->mutex);
    std::shared_ptr<model::Lens>& kept = h.lenses[static_cast<int>(side)];
    if (kept) return kept;
    if (!h.core->runner)
        throw BadArgument("the model is closed, and this analysis's lens was not run before: read it (a.lens_loss, or analyze with "
                          "lens=True) before close(), or load the model again");
    model::Engine& engine = h.core->Run().engine();
    if (side != model::MapSide::Ssa)
        if (auto matched = MatchLensComparison(engine, h.A()); !matched) throw BadArgument(matched.error());
    model::LensOptions options;
    options.whole = true;  // as an export's lens: the arrays a.lens() reads are the files a.export(lens=True) writes
    auto result = engine.RunLens(h.A().tokens.ids, side, options);
    if (!result) throw BadArgument(result.error());
    kept = std::make_shared<model::Lens>(std::move(*result));
    return kept;
}

// That lens as numpy arrays: loss [L + 1, T - 1], top_ids / top_probs [L + 1, T, k], dla [L, H,
// T - 1], dla_mlp [L, T - 1], dla_embed, dla_const, logit, dla_divisor, dla_const_free [T - 1].
py::dict Lens(const AnalysisHandle& h, const std::string& side_name) {
    const std::shared_ptr<model::Lens> lens = RunLensSide(h, Side(h, side_name));
    const py::ssize_t L = lens->n_layer, H = lens->n_head, T = lens->n_tokens, k = lens->top_k;
    py::dict out;
    out["loss"] = View(lens, lens->loss.data(), {L + 1, T - 1});
    out["top_ids"] = View(lens, lens->top_ids.data(), {L + 1, T, k});
    out["top_probs"] = View(lens, lens->top_probs.data(), {L + 1, T, k});
    out["dla"] = View(lens, lens->dla.data(), {L, H, T - 1});
    out["dla_mlp"] = View(lens, lens->dla_mlp.data(), {L, T - 1});
    out["dla_embed"] = View(lens, lens->dla_embed.data(), {T - 1});
    out["dla_const"] = View(lens, lens->dla_const.data(), {T - 1});
    out["logit"] = View(lens, lens->logit.data(), {T - 1});
    out["dla_divisor"] = View(lens, lens->dla_divisor.data(), {T - 1});
    out["dla_const_free"] = View(lens, lens->dla_free.data(), {T - 1});
    return out;
}

// Each id's piece as the predictions name them (the model's vocabulary).
py::list IdPieces(const AnalysisHandle& h, const std::vector<int64_t>& ids) {
    std::shared_ptr<const std::vector<std::string>> vocab;
    {
        py::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(h.core->mutex);
        if (!h.core->vocab && !h.core->runner) throw BadArgument("the model is closed, so its tokenizer cannot name ids");
        vocab = h.core->Vocab();
    }
    py::list out;
    for (int64_t id : ids) out.append(py::str(model::PieceWithBytes(id >= 0 && static_cast<size_t>(id) < vocab->size() ? (*vocab)[id] : "")));
    return out;
}

// The ids whose piece, as id_pieces names it, is `piece` ("." can be a piece and a <0x2E> byte's).
// The ids whose piece shows as `piece` (PieceToDisplay), or with `raw`, whose piece's bytes are
// `piece` (a stray byte as `tokenize` and the window write it, "\xC2", read back).
std::vector<int64_t> PieceIds(const AnalysisHandle& h, const std::string& piece, bool raw) {
    py::gil_scoped_release release;
    std::shared_ptr<const std::vector<std::string>> vocab;
    {
        std::lock_guard<std::mutex> lock(h.core->mutex);
        if (!h.core->vocab && !h.core->runner) throw BadArgument("the model is closed, so its tokenizer cannot name ids");
        vocab = h.core->Vocab();
    }
    std::vector<int64_t> ids;
    for (size_t id = 0; id < vocab->size(); ++id)
        // A piece's display is never shorter than its bytes (a stray byte shows as U+FFFD).
        if (raw ? (*vocab)[id] == piece : (*vocab)[id].size() <= piece.size() && model::PieceToDisplay((*vocab)[id]) == piece)
            ids.push_back(static_cast<int64_t>(id));
    return ids;
}

// Position `position`'s parts for the logit of `token`: [L H + L + 2] (heads layer-major, MLPs,
// embeddings, constants), as Engine::Attribute's, then the logit they sum to, the final norm's
// divisor and the constants' share outside it (dla_at.json's). With `through_ssa`, the parts read
// through SSA's divisor at that position (model::PartsThroughDivisor), then that divisor and what
// the side's own adds (its "final norm" part): [parts, logit, divisor, free, ssa's divisor, final norm].
py::array Attribute(const AnalysisHandle& h, int64_t position, int64_t token, const std::string& side_name, bool through_ssa) {
    const model::MapSide side = Side(h, side_name);
    if (position < 0 || position >= h.A().n_tokens)
        throw BadArgument("position " + std::to_string(position) + " is out of range (the text has " + std::to_string(h.A().n_tokens) + " tokens)");
    if (token < 0 || token > INT32_MAX) throw BadArgument("attribute(): token " + std::to_string(token) + " is not a token id");
    std::shared_ptr<std::vector<float>> parts;
    {
        py::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(h.core->mutex);
        if (!h.core->runner)
            throw BadArgument("attribute(): the model is closed, and attributing a token runs it: attribute before close(), or load the "
                              "model again (a.dla and the lens arrays read before close() stay)");
        // From the residual stream the engine keeps for this text and side: a second position or
        // target of the same analysis costs its own products, not another forward pass.
        model::Engine& engine = h.core->Run().engine();
        if (side != model::MapSide::Ssa)
            if (auto matched = MatchLensComparison(engine, h.A()); !matched) throw BadArgument(matched.error());
        auto result = engine.RunLensAt(h.A().tokens.ids, side, position, static_cast<int32_t>(token));
        if (!result) throw BadArgument(result.error());
        parts = std::make_shared<std::vector<float>>(std::move(result->parts));
        float to = result->divisor;
        if (through_ssa && side != model::MapSide::Ssa) {
            auto ssa = engine.RunLensAt(h.A().tokens.ids, model::MapSide::Ssa, position, static_cast<int32_t>(token));
            if (!ssa) throw BadArgument(ssa.error());
            to = ssa->divisor;
            *parts = model::PartsThroughDivisor(*parts, result->divisor, result->free, to);
        }
        double sum = 0;
        for (float v : *parts) sum += v;
        // After the parts: the logit they sum to (dla_at.json's "logit"), the side's divisor and free
        // constants, and with through_ssa SSA's divisor and what the side's own adds.
        parts->insert(parts->end(), {result->logit, result->divisor, result->free});
        // SSA through its own divisor adds nothing: 0, not float32's residue of the sum.
        if (through_ssa) parts->insert(parts->end(), {to, to == result->divisor ? 0.0f : static_cast<float>(result->logit - sum)});
    }
    return View(parts, parts->data(), {Size(parts->size())});
}

// Head (layer, head)'s [T, T] map: the analysis's own host copy, rebuilt on demand and kept by
// its map cache (and by this array while it lives).
py::array Attention(const AnalysisHandle& h, int layer, int head, const std::string& side_name) {
    h.CheckHead(layer, head);
    const model::MapSide side = Side(h, side_name);
    model::HeadMap map;
    {
        py::gil_scoped_release release;
        map = h.A().Map(side, layer, head);
    }
    if (!map) throw BadArgument("the analysis has no map for layer " + std::to_string(layer) + ", head " + std::to_string(head));
    const py::ssize_t T = h.A().n_tokens;
    return View<float>(map, map->data(), {T, T});
}

// Position's most likely next tokens as (piece, probability), best first.
py::list Predictions(const AnalysisHandle& h, int position, int k, const std::string& side) {
    const model::Analysis& a = h.A();
    const int T = a.n_tokens;
    if (position < 0 || position >= T)  // a negative one counted from the end already (Python's _position)
        throw BadArgument("position " + std::to_string(position) + " is out of range (the text has " + std::to_string(T) + " tokens)");
    const int K = a.TopK();
    if (k < 1 || k > K) throw BadArgument("k must be from 1 to " + std::to_string(K));
    const model::MapSide which = Side(h, side);
    if (which == model::MapSide::Compare && !a.HasComparePredictions())
        throw BadArgument("the layer-local comparison has no predictions of its own (no forward pass)");
    const std::vector<int32_t>& ids = which == model::MapSide::Compare ? a.top_ids_compare : which == model::MapSide::Base ? a.top_ids_base : a.top_ids;
    const std::vector<float>& probs =
        which == model::MapSide::Compare ? a.top_probs_compare : which == model::MapSide::Base ? a.top_probs_base : a.top_probs;
    if (ids.size() < static_cast<size_t>(T) * K)
        throw BadArgument("side '" + side + "' has no predictions in this analysis");
    std::shared_ptr<const std::vector<std::string>> vocab;
    {
        py::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(h.core->mutex);
        if (!h.core->vocab && !h.core->runner)
            throw BadArgument("the model is closed, so its tokenizer cannot name the predicted ids (top_ids and top_probs still hold them)");
        vocab = h.core->Vocab();
    }
    py::list out;
    for (int j = 0; j < k; ++j) {
        const size_t at = static_cast<size_t>(position) * K + j;
        const int32_t id = ids[at];
        const std::string piece = id >= 0 && static_cast<size_t>(id) < vocab->size() ? (*vocab)[id] : "";
        out.append(py::make_tuple(py::str(model::PieceWithBytes(piece)), probs[at]));  // a split character's byte as \xNN, as tokenize spells it
    }
    return out;
}

//-----------------------------------------------------------------------------
// [SECTION] Figures
//-----------------------------------------------------------------------------

struct FigureHandle {
    viz::Figure figure;
    std::string html;  // the highlight's page (hover values); "" for other figures
};

void LoadFonts() {
    std::string error;
    if (!viz::LoadFigureFonts(&error)) throw WriteFailed(error);
}

// `scale`: PNG pixels per figure pixel, as export's png_scale.
py::bytes Png(const FigureHandle& f, int scale) {
    if (scale < 1 || scale > viz::kMaxPngScale)
        throw BadArgument("png(): scale " + std::to_string(scale) + " is not a PNG scale: a whole number, 1 to " + std::to_string(viz::kMaxPngScale));
    if (!viz::FigureFits(f.figure, scale))
        throw BadArgument("png(): at scale " + std::to_string(scale) + " the figure would be " + std::to_string(int64_t{f.figure.Width} * scale) +
                          " x " + std::to_string(int64_t{f.figure.Height} * scale) + " pixels, more than a figure may be: a smaller scale");
    std::vector<uint8_t> png;
    {
        py::gil_scoped_release release;
        LoadFonts();
        png = viz::EncodePng(viz::RasterizeFigure(f.figure, scale), viz::FigurePixelsPerInch(scale));
    }
    return py::bytes(reinterpret_cast<const char*>(png.data()), png.size());
}

std::string Svg(const FigureHandle& f) {
    py::gil_scoped_release release;
    LoadFonts();
    return viz::FigureToSvg(f.figure);
}

// Figure settings from keyword flags (colormap, log, size, highlight, highlight_scope, sink_eps):
// the export's own, so a notebook figure is the file `ssaviz export` writes with those flags.
CommandOptions FigureOptions(const AnalysisHandle& h, const FlagList& flags, const std::string& where) {
    // No figure of numbers that overflowed: it would look like a normal one (export refuses it too).
    if (const std::string why = NonFiniteAnalysis(h.A()); !why.empty()) throw BadArgument(where + ": " + why);
    LoadFonts();  // before the figure is laid out: measured with the fonts, it is the export's bytes (the first one was not)
    CommandOptions o;
    // A figure's keywords are its looks: which files, heads, maps and lens an export writes are not
    // (format=, layers= were taken and ignored).
    static const std::set<std::string> excluded = [] {
        std::set<std::string> all = kExportExcluded;
        all.insert({"--format", "--layers", "--heads", "--maps", "--lens", "--base"});
        return all;
    }();
    ApplyFlags(Command::Export, flags, excluded, where, &o);
    if (auto s = CheckHighlightScope(o.export_options.figures, h.A().n_layer, h.A().n_head); !s) throw BadArgument(s.error());
    return o;
}

MapMode Mode(const AnalysisHandle& h, const std::string& name, bool drift_too = false) {
    if (name == "compare" || (name == "tau1" && ComparesWithTau1(h))) return h.CheckCompare("map '" + name + "'"), MapMode::Compare;
    auto mode = ParseMapMode(name == "difference" ? "diff" : name);
    if (!mode)
        throw BadArgument("map " + QuoteForMessage(name) + " is not one of ssa, compare" + std::string(ComparesWithTau1(h) ? " (or tau1)" : "") +
                          ", diff, base, base_diff" + (drift_too ? ", drift" : ""));
    if (IsBaseMode(*mode) && !h.A().HasBase()) throw BadArgument("map '" + name + "': the analysis has no base (analyze with compare=\"base\")");
    if (*mode != MapMode::Ssa) h.CheckCompare("map '" + name + "'");
    return *mode;
}

// The titles name the model and the what-ifs, as the export's do.
std::string TitleName(const AnalysisHandle& h) {
    std::string name = ModelName(h.core->info);
    const auto& edits = h.A().interventions;
    for (size_t k = 0; k < edits.size(); ++k) name += (k == 0 ? " \xC2\xB7 what-if " : "; ") + model::Describe(edits[k]);
    return name;
}

FigureHandle Heatmap(const AnalysisHandle& h, int layer, int head, const std::string& map, const FlagList& flags) {
    h.CheckHead(layer, head);
    const MapMode mode = Mode(h, map);
    const CommandOptions o = FigureOptions(h, flags, "heatmap()");
    py::gil_scoped_release release;
    return {MapFigure(h.A(), TitleName(h), HeadRef{layer, head}, mode, o.export_options.figures), ""};
}

FigureHandle Grid(const AnalysisHandle& h, const std::string& map, const FlagList& flags) {
    const MapMode mode = Mode(h, map);
    const CommandOptions o = FigureOptions(h, flags, "heads_grid()");
    py::gil_scoped_release release;
    return {HeadsGrid(h.A(), TitleName(h), mode, o.export_options.figures), ""};
}

// The logit lens as --lens's figures draw it: a side's lens, or SSA's minus another side's.
// A fine-tune's three sides (a base beside: the comparison is tau = 1): "drift" (tau = 1's loss
// minus the base's, lens_diff_drift.png) too, and its differences on one scale (FineTuneLensScale).
FigureHandle LensGrid(const AnalysisHandle& h, const std::string& map, const FlagList& flags) {
    const bool drift = map == "drift";
    if (drift && !(h.A().HasBase() && ComparesWithTau1(h)))
        throw BadArgument("map 'drift' is tau = 1's loss minus the base's: the analysis has no base (analyze with compare=\"base\")");
    const MapMode mode = drift ? MapMode::BaseDifference : Mode(h, map, /*drift_too=*/true);
    const CommandOptions o = FigureOptions(h, flags, "lens_grid()");
    if (h.A().n_tokens < 2) throw BadArgument("lens_grid(): the lens needs 2 tokens or more");
    const app::Side side = ReadSide(mode);
    const std::shared_ptr<model::Lens> ssa = side == app::Side::Ssa || IsDifference(mode) ? RunLensSide(h, model::MapSide::Ssa) : nullptr;
    const std::shared_ptr<model::Lens> other =
        side == app::Side::Ssa ? nullptr : RunLensSide(h, side == app::Side::Base ? model::MapSide::Base : model::MapSide::Compare);
    std::optional<DivergingScale> shared;
    std::shared_ptr<model::Lens> tau1;
    if (IsDifference(mode) && h.A().HasBase() && ComparesWithTau1(h)) {
        tau1 = RunLensSide(h, model::MapSide::Compare);
        const std::shared_ptr<model::Lens> base = RunLensSide(h, model::MapSide::Base);
        shared = FineTuneLensScale(*ssa, *tau1, *base);
    }
    py::gil_scoped_release release;
    if (drift)
        return {LensDiffFigure(*tau1, *other, ModelName(h.core->info), LensSideName(h.A(), 1), LensSideTitle(h.A(), 2), TokenLabels(h.A().tokens),
                               o.export_options.figures.text, &*shared),
                ""};
    return {LensModeFigure(h.A(), h.core->info, mode, ssa.get(), other.get(), o.export_options.figures.text, shared ? &*shared : nullptr), ""};
}

FigureHandle HighlightFigure(const AnalysisHandle& h, const FlagList& flags) {
    const CommandOptions o = FigureOptions(h, flags, "highlight()");
    const TokenColor by = o.export_options.figures.highlight;
    if (!h.HasCompare() && (by == TokenColor::LossCompare || by == TokenColor::LossDelta)) h.CheckCompare("highlight by " + std::string(ToString(by)));
    if (NeedsBase(by) && !h.A().HasBase())
        throw BadArgument("highlight by " + std::string(ToString(by)) + ": the analysis has no base (analyze with compare=\"base\")");
    py::gil_scoped_release release;
    const std::string name = TitleName(h);
    return {Highlight(h.A(), name, o.export_options.figures), HighlightHtmlPage(h.A(), name, o.export_options.figures)};
}

// The Sparsity tab's plots, and beside a base what fine-tuning changed ("finetune",
// "finetune_loss": export's finetune.png and finetune_loss.png; "fine-tune" too, as the tab is spelt).
FigureHandle Plot(const AnalysisHandle& h, const std::string& asked, const FlagList& flags) {
    const std::string name = asked == "fine-tune" || asked == "fine_tune"           ? "finetune"
                             : asked == "fine-tune-loss" || asked == "fine_tune_loss" ? "finetune_loss"
                                                                                      : asked;
    const bool finetune = name == "finetune" || name == "finetune_loss";
    const auto& names = SparsityFigureNames();
    if (!finetune && std::find(names.begin(), names.end(), name) == names.end()) {
        std::string list;
        for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
        throw BadArgument("plot " + QuoteForMessage(name) + " is not one of " + list + ", finetune, finetune_loss, dla_bars, dla_layers, dla_heads, dla_heads_change, head_impacts, head_impacts_tokens, head_impacts_drift_tokens");
    }
    if (finetune && !h.A().HasBase()) throw BadArgument("plot '" + name + "': the analysis has no base (analyze with compare=\"base\")");
    if (finetune && h.A().n_tokens < 2)  // no next token: no loss to split, every part NaN
        throw BadArgument("plot '" + name + "': what fine-tuning changed needs 2 tokens or more (the loss is of a next token)");
    const CommandOptions o = FigureOptions(h, flags, "plot()");
    py::gil_scoped_release release;
    if (finetune)
        return {name == "finetune" ? FineTuneFigure(h.A(), TitleName(h), o.export_options.figures.log_scale, o.export_options.figures.text)
                                   : FineTuneLossFigure(h.A(), TitleName(h), o.export_options.figures.text),
                ""};
    return {SparsityFigure(h.A(), TitleName(h), name, o.export_options.sink_epsilon, o.export_options.figures.text), ""};
}

// The attribution's figures (`export --lens`'s dla_heads, dla_bars, dla_layers): dla_heads of one
// side; the bars of position `position`'s prediction (0 .. T - 2; 0 .. T - 1 for "top") on every
// side the analysis has, of the logit `target` names (next, top, next-against-other: as
// `--dla-target`, resolved on SSA's side by AttributeAt).
FigureHandle DlaFigure(const AnalysisHandle& h, const std::string& name, const std::string& side_name, int64_t position,
                       const std::string& target_name, const FlagList& flags) {
    const model::Analysis& a = h.A();
    const viz::FigureText text = FigureOptions(h, flags, "plot()").export_options.figures.text;  // refuses a non-finite analysis
    const auto target = ParseLensTarget(target_name);
    if (!target) throw BadArgument("plot(" + QuoteForMessage(name) + "): target " + QuoteForMessage(target_name) + " is not one of next, top, next-against-other");
    const int64_t columns = *target == LensTarget::Top ? a.n_tokens : a.n_tokens - 1;
    if (columns < 1) throw BadArgument("plot('" + name + "'): the attribution needs 2 tokens or more (a next token's logit)");
    LoadFonts();
    const model::MapSide asked = name == "dla_heads" ? Side(h, side_name) : model::MapSide::Ssa;
    if (name != "dla_heads" && name != "dla_heads_change" && (position < 0 || position >= columns))
        throw BadArgument("plot('" + name + "'): position " + std::to_string(position) + " is out of range: 0 to " + std::to_string(columns - 1) +
                          ", or negative from the end");
    std::vector<LensSideFiles> sides;  // every side the analysis has: dla_heads' one scale is theirs, as export's
    sides.push_back({RunLensSide(h, model::MapSide::Ssa), "", LensSideName(a, 0), LensSideTitle(a, 0)});
    if (h.HasCompare()) sides.push_back({RunLensSide(h, model::MapSide::Compare), "", LensSideName(a, 1), LensSideTitle(a, 1)});
    if (a.HasBase()) sides.push_back({RunLensSide(h, model::MapSide::Base), "", LensSideName(a, 2), LensSideTitle(a, 2)});
    const std::vector<std::string> labels = TokenLabels(a.tokens);
    py::gil_scoped_release release;
    const std::string model_name = ModelName(h.core->info);
    if (name == "dla_heads_change") return {DlaHeadsChangeFigure(sides, model_name, text), ""};
    if (name == "dla_heads") {
        const size_t k = asked == model::MapSide::Ssa ? 0 : asked == model::MapSide::Compare ? 1 : sides.size() - 1;
        return {DlaHeadsFigure(sides[k], model_name, DlaHeadsMost(sides), text, sides[0].lens.get()), ""};
    }
    DlaShown shown;
    if (*target == LensTarget::Next) {
        shown = DlaOfLens(sides, labels, position);
    } else {
        std::lock_guard<std::mutex> lock(h.core->mutex);
        model::Engine& engine = h.core->Run().engine();
        const model::MapSide order[] = {model::MapSide::Ssa, model::MapSide::Compare, model::MapSide::Base};
        auto attributed = AttributeAt(engine, a.tokens.ids, std::vector<model::MapSide>(order, order + sides.size()), position, *target);
        if (!attributed) throw BadArgument("plot('" + name + "'): " + attributed.error());
        std::vector<std::string> names;
        for (const LensSideFiles& side : sides) names.push_back(side.name);
        const std::shared_ptr<const std::vector<std::string>> vocab = h.core->Vocab();
        shown = DlaOfAttribution(*attributed, names, a.n_layer, a.n_head, labels, [&](int32_t id) {
            return model::PieceWithBytes(id >= 0 && static_cast<size_t>(id) < vocab->size() ? (*vocab)[id] : "");
        });
    }
    return {name == "dla_bars" ? DlaBarsFigure(shown, model_name, text) : DlaLayersFigure(shown, model_name, text), ""};
}

// rank_heads()'s figures, as `export --rank-heads` draws them: "head_impacts" (each head's part, and
// beside a base the drift's parts and path), "head_impacts_tokens" (each head's part token by token),
// "head_impacts_drift_tokens" (beside a base, the drift's path token by token). Python measures first.
FigureHandle RankFigure(const AnalysisHandle& h, const std::string& name, const FlagList& flags) {
    const std::shared_ptr<const HeadImpacts> kept = h.ranked;  // read with the GIL held
    if (!kept) throw BadArgument("plot('" + name + "'): rank_heads() measures what it draws");
    const HeadImpacts& ranked = *kept;
    const int L = h.A().n_layer, H = h.A().n_head;
    if (name == "head_impacts_drift_tokens" && !ranked.drift)
        throw BadArgument("plot('" + name + "'): the drift's parts need a base (analyze with compare=\"base\")");
    const viz::FigureText text = FigureOptions(h, flags, "plot('" + name + "')").export_options.figures.text;  // fonts loaded
    const std::string model_name = ModelName(h.core->info);
    py::gil_scoped_release release;
    viz::Figure figure = name == "head_impacts"        ? HeadImpactsFigure(ranked, L, H, model_name, text)
                         : name == "head_impacts_tokens" ? HeadImpactsTokensFigure(ranked, L, H, model_name, TokenLabels(h.A().tokens), text)
                                                         : HeadImpactsDriftTokensFigure(ranked, L, H, model_name, TokenLabels(h.A().tokens), text);
    if (figure.Items.empty())
        throw BadArgument("plot('" + name + "'): nothing to draw (every head is at tau = 1 by the what-ifs already: no temperatures' part)");
    return {std::move(figure), ""};
}

//-----------------------------------------------------------------------------
// [SECTION] Exports, batches and generation
//-----------------------------------------------------------------------------

// An export's options from keyword flags, checked against the model as `ssaviz export` checks them.
ExportOptions ExportSettings(const model::ModelInfo& info, const std::string& out, const FlagList& flags, const std::string& where) {
    CommandOptions o;
    // An analysis exports the sides it was made with: its export() takes no base= (export_batch's does).
    static const std::set<std::string> kAnalysisExcluded = [] {
        std::set<std::string> all = kExportExcluded;
        all.insert("--base");
        return all;
    }();
    ApplyFlags(Command::Export, flags, where == "export()" ? kAnalysisExcluded : kExportExcluded, where, &o);
    ExportOptions options = o.export_options;
    options.out_dir = out;
    if (auto s = CheckExportFolder(out); !s) throw BadArgument("--out: " + s.error());
    if (auto s = CheckExportPlaces(out, out, options); !s) throw WriteFailed(s.error());  // as a batch's and a run's
    if (auto s = ResolveExportHeads(&options, info.config.n_layer, info.config.n_head); !s) throw BadArgument(s.error());
    if (auto s = CheckHighlightScope(options.figures, info.config.n_layer, info.config.n_head); !s) throw BadArgument(s.error());
    if ((options.dla_position || options.dla_target) && !options.lens)
        if (auto s = CheckExportSettings(options, true); !s) throw BadArgument(s.error());  // dla_position= or dla_target= without lens=True
    return options;
}

// lens=True: the lens of `a` on both sides, run on the core's engine, and its files (as `ssaviz
// export --lens` writes them); nothing for a text of one token.
struct LensRun {
    std::vector<std::shared_ptr<const model::Lens>> sides;
    std::vector<ExportFile> files;
};
LensRun LensOf(ModelCore& core, const model::Analysis& a, const ExportOptions& options) {
    if (!options.lens) return {};  // one token too: its lens_top.json reads the next token's predictions, its arrays are empty
    model::Engine& engine = core.Run().engine();
    auto sides = RunLensSides(engine, a);
    if (!sides) throw BadArgument("lens=True: " + sides.error());
    auto files = LensExportFiles(engine, core.info, a, *sides, options);
    if (!files) throw BadArgument("lens=True: " + files.error());
    return {std::move(*sides), std::move(*files)};
}

// The heads' temperatures' parts of the loss (HeadImpacts) for the analysis's text, on its what-ifs
// (and the drift's parts where it was analysed beside a base), on the core's engine set up as the
// analysis was made (another analysis since may have opened another base, or none: the drift was
// measured against that one); its what-ifs as they were afterwards. The core's lock held by the caller.
// `each`: told of every head measured; false from it stops (the measures so far returned).
HeadImpacts MeasureHeads(const AnalysisHandle& h, const std::function<bool(const HeadImpacts&)>& each = {}) {
    ModelCore& core = *h.core;
    const model::Analysis& a = h.A();
    Must(core.Run().Configure(h.run));
    model::Engine& engine = core.Run().engine();
    const std::vector<model::Intervention> before = engine.interventions();
    if (auto s = engine.SetInterventions(a.interventions); !s) throw BadArgument(s.error());
    HeadImpacts impacts;
    const model::Status measured = MeasureHeadImpacts(engine, a.tokens, {}, &impacts, each, RankOptions{/*split=*/true, /*drift=*/a.HasBase()});
    (void)engine.SetInterventions(before);
    if (!measured) throw BadArgument("rank_heads: " + measured.error());
    return impacts;
}

// rank_heads(): baseline (the mean loss), what_ifs, and mean_loss / delta as [L, H] arrays.
// `progress`: a line on Python's sys.stderr redrawn after each head (a notebook shows it); Ctrl+C
// (KeyboardInterrupt) stops between heads, the model's what-ifs as they were.
py::dict RankHeads(const AnalysisHandle& h, bool progress) {
    HeadImpacts impacts;
    std::optional<py::error_already_set> stopped;
    {
        py::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(h.core->mutex);
        impacts = MeasureHeads(h, [&](const HeadImpacts& so_far) {
            py::gil_scoped_acquire acquire;
            try {
                if (PyErr_CheckSignals() != 0) throw py::error_already_set();
                if (progress) {
                    const HeadImpact& last = so_far.heads.back();
                    py::module_::import("sys").attr("stderr").attr("write")(
                        "\rrank_heads: " + std::to_string(so_far.heads.size()) + "/" + std::to_string(so_far.total) + " heads, L" +
                        std::to_string(last.layer) + " H" + std::to_string(last.head) + "   " +
                        (static_cast<int>(so_far.heads.size()) == so_far.total ? "\n" : ""));
                }
                return true;
            } catch (py::error_already_set& e) {
                stopped = std::move(e);
                return false;
            }
        });
    }
    if (stopped) throw std::move(*stopped);
    if (impacts.done) h.ranked = std::make_shared<const HeadImpacts>(impacts);
    const py::ssize_t L = h.A().n_layer, H = h.A().n_head;
    py::array_t<float> mean_loss({L, H}), part({L, H});
    const std::vector<float> parts = TemperatureParts(impacts, static_cast<int>(L), static_cast<int>(H));
    std::copy(parts.begin(), parts.end(), part.mutable_data());
    std::fill(mean_loss.mutable_data(), mean_loss.mutable_data() + L * H, NAN);
    for (const HeadImpact& i : impacts.heads)
        if (i.layer < L && i.head < H) mean_loss.mutable_at(i.layer, i.head) = i.mean_loss;
    py::dict out;
    out["baseline"] = impacts.baseline;
    out["what_ifs"] = model::FormatInterventions(impacts.on_top);
    out["mean_loss"] = mean_loss;
    out["part"] = part;
    for (auto [key, which] : {std::pair{"part_tau_q", TemperaturePart::TauQ}, std::pair{"part_tau_v", TemperaturePart::TauV}}) {
        py::array_t<float> one({L, H});
        const std::vector<float> values = TemperatureParts(impacts, static_cast<int>(L), static_cast<int>(H), which);
        std::copy(values.begin(), values.end(), one.mutable_data());
        out[key] = one;
    }
    // Token by token, a last axis of T - 1 (token t's at t - 1, as loss): where on the text each part acted.
    const py::ssize_t n = impacts.baseline_tokens ? static_cast<py::ssize_t>(impacts.baseline_tokens->size()) : 0;
    auto array = [n](std::vector<py::ssize_t> shape, const std::vector<float>& values) {
        shape.push_back(n);
        py::array_t<float> a(shape);
        if (static_cast<py::ssize_t>(values.size()) == a.size()) std::copy(values.begin(), values.end(), a.mutable_data());
        else std::fill(a.mutable_data(), a.mutable_data() + a.size(), NAN);
        return a;
    };
    for (auto [key, which] : {std::pair{"part_tokens", TemperaturePart::Both}, std::pair{"part_tau_q_tokens", TemperaturePart::TauQ},
                              std::pair{"part_tau_v_tokens", TemperaturePart::TauV}})
        out[key] = array({L, H}, TemperaturePartsByToken(impacts, static_cast<int>(L), static_cast<int>(H), which));
    // Beside a base, the drift's: each head's weights, each layer's MLP, the embeddings, every weight from the base.
    for (const char* key : {"part_drift", "part_drift_attention", "part_drift_mlp", "part_drift_embeddings", "part_drift_all", "drift_baseline",
                            "part_drift_path", "part_drift_path_names", "part_drift_path_tokens", "part_drift_path_top_down",
                            "part_drift_path_top_down_tokens"})
        out[key] = py::none();
    for (const char* key : {"part_drift_tokens", "part_drift_attention_tokens", "part_drift_mlp_tokens", "part_drift_embeddings_tokens",
                            "part_drift_all_tokens"})
        out[key] = py::none();
    if (impacts.drift) {
        const DriftParts d = MeasuredDriftParts(impacts, static_cast<int>(L), static_cast<int>(H));
        py::array_t<float> heads({L, H}), mlp(L), attention(L);
        std::copy(d.heads.begin(), d.heads.end(), heads.mutable_data());
        std::copy(d.mlp.begin(), d.mlp.end(), mlp.mutable_data());
        std::copy(d.attention.begin(), d.attention.end(), attention.mutable_data());
        out["part_drift"] = heads;
        out["part_drift_attention"] = attention;
        out["part_drift_mlp"] = mlp;
        out["drift_baseline"] = impacts.drift_baseline;
        out["part_drift_embeddings"] = d.embeddings;
        out["part_drift_all"] = d.all;
        const DriftTokenParts t = MeasuredDriftPartsByToken(impacts, static_cast<int>(L), static_cast<int>(H));
        out["part_drift_tokens"] = array({L, H}, t.heads);
        out["part_drift_attention_tokens"] = array({L}, t.attention);
        out["part_drift_mlp_tokens"] = array({L}, t.mlp);
        out["part_drift_embeddings_tokens"] = array({}, t.embeddings);
        out["part_drift_all_tokens"] = array({}, t.all);
        py::array_t<float> path(static_cast<py::ssize_t>(d.path.size())), down(static_cast<py::ssize_t>(d.path_down.size()));
        std::copy(d.path.begin(), d.path.end(), path.mutable_data());
        std::copy(d.path_down.begin(), d.path_down.end(), down.mutable_data());
        py::list names;
        for (size_t k = 0; k < d.path.size(); ++k) names.append(PathPartName(static_cast<int>(k)));
        out["part_drift_path"] = path;
        out["part_drift_path_names"] = names;
        out["part_drift_path_tokens"] = array({static_cast<py::ssize_t>(d.path.size())}, t.path);
        out["part_drift_path_top_down"] = down;  // the same parts, in the same order, taken from the top down
        out["part_drift_path_top_down_tokens"] = array({static_cast<py::ssize_t>(d.path_down.size())}, t.path_down);
    }
    return out;
}

void Export(const AnalysisHandle& h, const std::string& out, const FlagList& flags) {
    // The export's files hold a comparison beside SSA, as `ssaviz export` writes them.
    if (!h.HasCompare())
        throw BadArgument("export(): the analysis has no comparison (compare=None): an export writes a comparison beside SSA, as "
                          "`ssaviz export` does; compare=\"local\" (tau = 1 in each layer) costs no second forward pass");
    const ExportOptions options = ExportSettings(h.core->info, out, flags, "export()");
    if (options.lens && !h.A().interventions.empty())
        throw BadArgument("export(lens=True) runs the model as loaded: analyze without ablate= for it");
    if (auto s = CheckDlaPosition(options, h.A().n_tokens); !s) throw BadArgument(s.error());
    if (auto s = CheckHeatmapsFit(options, h.A().n_tokens); !s) throw BadArgument(s.error());  // a value, not a failed write (it was an OSError)
    if (auto s = CheckHighlightFits(h.A().tokens.pieces, options.figures, options.png, options.svg); !s) throw BadArgument(s.error());
    const std::shared_ptr<const HeadImpacts> ranked = h.ranked;  // read with the GIL held, as rank_heads() sets it
    py::gil_scoped_release release;
    LensRun lens;
    if (options.lens) {
        std::lock_guard<std::mutex> lock(h.core->mutex);
        lens = LensOf(*h.core, h.A(), options);
    }
    if (options.rank_heads && ranked) {  // measured by rank_heads() already: the same measures
        for (ExportFile& f : HeadImpactFiles(*ranked, h.core->info, options, TokenLabels(h.A().tokens))) lens.files.push_back(std::move(f));
    } else if (options.rank_heads) {
        // Ctrl+C stops between heads, as rank_heads() does (the export went on to the last head).
        std::optional<py::error_already_set> stopped;
        HeadImpacts impacts;
        {
            std::lock_guard<std::mutex> lock(h.core->mutex);
            impacts = MeasureHeads(h, [&](const HeadImpacts&) {
                py::gil_scoped_acquire acquire;
                if (PyErr_CheckSignals() == 0) return true;
                stopped.emplace();  // takes the raised KeyboardInterrupt
                return false;
            });
        }
        if (stopped) {
            py::gil_scoped_acquire acquire;
            throw std::move(*stopped);
        }
        for (ExportFile& f : HeadImpactFiles(impacts, h.core->info, options, TokenLabels(h.A().tokens))) lens.files.push_back(std::move(f));
    }
    if (auto s = WriteExport(h.text, h.A(), h.core->info, options, nullptr, std::move(lens.files)); !s) throw WriteFailed(s.error());
}

AnalysisHandle Analyze(const std::shared_ptr<ModelCore>& core, const std::string* text, const std::vector<int64_t>* ids,
                       const std::string& compare, const std::optional<FlagList>& twin_flags, const std::string& ablate, bool truncate) {
    const RunSpec run = RunOf(*core, compare, twin_flags, ablate);
    AnalysisHandle h;
    h.core = core;
    h.compare = CompareKindOf(run.compare.kind).key;
    h.run = run;
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(core->mutex);
    Must(core->Run().Configure(run));
    const auto start = std::chrono::steady_clock::now();
    const model::Tokenization tokens = Tokens(*core, text, ids, truncate, &h.text);
    h.a = std::make_shared<const model::Analysis>(Must(core->Run().Analyze(tokens)));
    h.engine_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return h;
}

// One text of a batch into out/name, as `ssaviz export --batch` writes it: its summary row (JSON),
// or the error that skipped it.
std::pair<std::string, std::string> ExportText(const std::shared_ptr<ModelCore>& core, const std::string& name, int line,
                                               const std::string& text, const std::string& out, const FlagList& flags,
                                               const std::string& compare, const std::optional<FlagList>& twin_flags,
                                               const std::string& ablate, bool truncate) {
    ExportOptions options = ExportSettings(core->info, out, flags, "export_batch()");
    if (options.lens && !ablate.empty()) throw BadArgument("export_batch(lens=True) runs the model as loaded: not with ablate=");
    options.out_dir = (fs::path(out) / name).string();
    const RunSpec run = RunOf(*core, compare, twin_flags, ablate);
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(core->mutex);
    Runner& runner = core->Run();
    Must(runner.Configure(run));
    auto tokens = runner.engine().Tokenize(text, truncate);  // a failure is the text's row: the engine's own words
    if (!tokens) return {"", tokens.error()};
    // A highlight too large to draw is that text's failure before the model runs, as the command
    // line's batch has it (it stopped the batch after the analysis: the texts after it unwritten).
    if (auto s = CheckHighlightFits(tokens->pieces, options.figures, options.png, options.svg); !s) return {"", InPythonWords(s.error())};
    auto analysis = runner.Analyze(*tokens);
    if (!analysis) return {"", analysis.error().message};
    if (auto s = CheckDlaPosition(options, analysis->n_tokens); !s) return {"", s.error()};  // as the command line's batch: that text's
    json row = BatchSummaryRow(name, line, *analysis, options.sink_epsilon);
    LensRun lens = LensOf(*core, *analysis, options);  // each text's loss by layer in the summary, as the command line's
    if (!lens.sides.empty()) row["lens_loss"] = LensLossByLayer(*lens.sides[0]);
    if (lens.sides.size() > 1) row["lens_loss_compare"] = LensLossByLayer(*lens.sides[1]);
    if (lens.sides.size() > 2) row["lens_loss_base"] = LensLossByLayer(*lens.sides[2]);
    if (auto s = CheckBatchFolder(out, name); !s) throw WriteFailed(s.error());  // a link made there meanwhile: refused, not written through
    if (auto s = WriteExport(text, *analysis, core->info, options, nullptr, std::move(lens.files)); !s) throw WriteFailed(s.error());
    return {model::JsonText(row), ""};
}

// One step of a run on a text (Run.export, here or on a Dask worker), as `ssaviz export --run`
// analyses it: its RunStepResult as JSON. `full_out` non-empty: the step's whole export there too.
std::string AnalyseStep(int64_t step, const std::string& path, const std::string& device, const FlagList& load_flags, const std::string& text,
                    const std::string& compare, const std::string& base_dir, const std::string& ablate, bool truncate,
                    const FlagList& export_flags, const std::string& full_out) {
    CommandOptions load, exported;
    ApplyFlags(Command::Info, load_flags, kLoadExcluded, "load_run()", &load);
    if (auto s = ApplyFlag(Command::Info, "--device", device, &load); !s) throw BadArgument(s.error());
    ApplyFlags(Command::Export, export_flags, kExportExcluded, "Run.export()", &exported);
    RunStepSpec spec;
    spec.device = device;
    spec.dtype = load.dtype;
    spec.hints = load.hints;
    spec.run = {ParseCompare(compare, /*python=*/true), ablate};
    if (spec.run.compare.kind == CompareKind::Base) spec.run.compare.base_dir = base_dir;  // "": the base beside each checkpoint
    spec.truncate = truncate;
    spec.options = exported.export_options;
    py::gil_scoped_release release;
    model::UseComputeThreads(g_worker_threads ? *g_worker_threads : model::ResolveComputeThreads());
    const RunStepResult r = AnalyseRunStep({step, path}, spec, text, nullptr, full_out);
    if (r.fatal == kExitUsage || r.fatal == kExitBadInput) throw BadArgument(r.error);  // the request's fault, not the step's
    if (r.fatal) throw WriteFailed(r.error);
    return model::JsonText(RunStepToJson(r));
}

// A run's steps gathered in step order (RunStep's results) and, with `write`, run.json, run.csv,
// tau_q.npy and the curves written to `out`: the failed steps ("step N (file): why", the run's
// then the compare run's) and the steps analysed ({"run": [...], "compare": [...]}).
py::dict WriteRun(const std::string& out, const std::string& run_dir, const std::vector<std::string>& results,
                  const std::optional<std::string>& compare_dir, const std::vector<std::string>& compare_results, const FlagList& export_flags,
                  bool write) {
    CommandOptions exported;
    ApplyFlags(Command::Export, export_flags, kExportExcluded, "Run.export()", &exported);
    ExportOptions options = exported.export_options;
    options.out_dir = out;
    std::vector<std::string> failed, reasons;
    auto gather = [&](const std::string& dir, const std::string& label, const std::vector<std::string>& steps) {
        RunResults run;
        run.t.dir = dir;
        run.t.label = label;
        run.t.name = RunLegendName(dir, dir == run_dir ? compare_dir.value_or("") : run_dir, label);
        for (const std::string& text : steps) {
            auto step = RunStepFromJson(text);
            if (!step) throw BadArgument(step.error());
            const std::string name = step->checkpoint;
            const int64_t number = step->step;
            if (const std::string error = AddRunStep(&run, std::move(*step)); !error.empty()) {
                failed.push_back((label == "run" ? "" : label + ": ") + "step " + std::to_string(number) + " (" + model::EscapeForMessage(name) +
                                 "): " + model::EscapeForMessage(error, 4096));  // as the command line says it
                reasons.push_back(label + "\n" + RunStepReason(error, name));
            }
        }
        return run;
    };
    const RunResults run = gather(run_dir, "run", results);
    std::optional<RunResults> compare;
    if (compare_dir) compare = gather(*compare_dir, "compare run", compare_results);
    if (run.rows.empty())  // with the first one's reason, as Run.analyze's (the command line has said each)
        throw BadArgument("Run.export(): no checkpoint of the run could be analysed (" + std::to_string(run.failures.size()) + " failed" +
                          (failed.empty() ? std::string(")") : "; " + InPythonWords(failed.front()) + ")"));
    if (compare && !compare->t.steps.empty())
        if (const std::string why = run.t.CompareRunMisfit(compare->t.n_layer, compare->t.n_head, compare->t.ids); !why.empty())
            throw BadArgument("Run.export(): compare_run " + model::Quoted(*compare_dir) + " " + why);
    if (write) {
        py::gil_scoped_release release;
        if (auto s = WriteRunFiles(options, run, compare ? &*compare : nullptr); !s) throw WriteFailed(s.error());
    }
    py::dict d;
    d["failed"] = failed;
    d["reasons"] = reasons;
    d["run"] = run.t.steps;
    d["compare"] = compare ? compare->t.steps : std::vector<int64_t>{};
    return d;
}

// summary.json and summary.csv from every text's row (JSON strings, in the batch's order).
void WriteSummary(const std::string& out, const std::vector<std::string>& rows, const std::vector<std::string>& failures) {
    json r = json::array(), f = json::array();
    for (const std::string& row : rows) r.push_back(json::parse(row));
    for (const std::string& failure : failures) f.push_back(json::parse(failure));
    py::gil_scoped_release release;
    if (auto s = WriteBatchSummary(out, r, f); !s) throw WriteFailed(s.error());
}

std::string Generate(const std::shared_ptr<ModelCore>& core, const std::string& text, const FlagList& flags, const std::string& ablate,
                     bool truncate) {
    CommandOptions o;
    ApplyFlags(Command::Generate, flags, {"--help", "--json", "--model", "--device", "--dtype", "--n-head", "--query-form", "--value-form",
                                          "--activation", "--text", "--text-file", "--truncate", "--ablate", "--example"},
               "generate()", &o);
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(core->mutex);
    Runner& runner = core->Run();
    Must(runner.Configure({CompareKind::None, ablate}));  // only the SSA side is needed
    model::Tokenization tokens = Must(runner.Tokenize(text, truncate));
    return Must(runner.Generate(&tokens, o.generate)).text;  // as appended to the text (a SentencePiece token's space kept)
}

// The window's command line for a model and its own flags (show="heads", ...), spelled back by
// the table's writers; the package adds the text.
std::vector<std::string> WindowArgs(const ModelCore& core, const FlagList& flags) {
    CommandOptions o = core.options;
    ApplyFlags(Command::Window, flags, kLoadExcluded, "show()", &o);
    o.model_dir = core.path;
    o.device = core.device;
    std::vector<std::string> args;
    for (const Flag* f : FlagsOf(Command::Window)) {
        if (!f->write || f->names[0] == "--text" || f->names[0] == "--text-file") continue;
        const std::optional<std::string> value = f->write(o);
        if (!value) continue;
        args.push_back(f->names[0]);
        if (!f->Switch()) args.push_back(*value);
    }
    return args;
}

py::bytes Bytes(const std::string& s) { return py::bytes(s.data(), s.size()); }

}  // namespace
}  // namespace app::python

//-----------------------------------------------------------------------------
// [SECTION] The module
//-----------------------------------------------------------------------------

PYBIND11_MODULE(_ssaviz, m) {
    using namespace app::python;
    m.doc() = "The ssaviz engine (C++). Use the ssaviz package, which checks arguments and documents the API.";

    // The package's ArgumentTypeError (an argument of the wrong type, a keyword not taken): a
    // TypeError and a ValueError, so that either except clause holds it.
    static const py::handle argument_type_error = PyErr_NewExceptionWithDoc(
        "ssaviz.ArgumentTypeError", "An argument of the wrong type: both a TypeError and a ValueError, so either except clause holds it.",
        py::make_tuple(py::handle(PyExc_TypeError), py::handle(PyExc_ValueError)).ptr(), nullptr);
    m.attr("ArgumentTypeError") = argument_type_error;
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const UnknownKeyword& e) {
            PyErr_SetString(argument_type_error.ptr(), e.what());
        } catch (const MissingFile& e) {
            PyErr_SetString(PyExc_FileNotFoundError, e.what());
        } catch (const BadArgument& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        } catch (const WriteFailed& e) {
            PyErr_SetString(PyExc_OSError, e.what());
        } catch (const std::exception& e) {  // a failed allocation, LibTorch's or the process's, in the command line's words
            if (!app::IsOutOfMemory(e)) throw;  // the rest as pybind11 translates it
            PyErr_SetString(PyExc_MemoryError, app::ExceptionMessage(e).c_str());
        }
    });

    py::class_<ModelCore, std::shared_ptr<ModelCore>>(m, "Model")
        .def(py::init(&OpenModel), py::arg("path"), py::arg("device"), py::arg("flags"))
        .def_property_readonly("path", [](const ModelCore& c) { return py::bytes(c.path); })  // bytes: os.fsdecode'd in Python
        .def_property_readonly("device", [](const ModelCore& c) { return c.device; })
        .def_property_readonly("device_in_use", [](const ModelCore& c) { return c.info.device; })
        .def_property_readonly("closed", [](ModelCore& c) {
            py::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(c.mutex);
            return !c.runner;
        })
        .def_property_readonly("info_json",
                               [](const ModelCore& c) {
                                   json info = app::InfoCommandJson(c.info);
                                   for (json& note : info["notes"]) note = InPythonWords(note.get<std::string>());  // pass n_head=N
                                   return model::JsonText(info);
                               })
        .def_property_readonly("n_layer", [](const ModelCore& c) { return c.info.config.n_layer; })
        .def_property_readonly("n_head", [](const ModelCore& c) { return c.info.config.n_head; })
        .def_property_readonly("n_positions", [](const ModelCore& c) { return c.info.config.n_positions; })
        .def("window_args", &WindowArgs)
        .def("close", [](ModelCore& c) {
            py::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(c.mutex);
            if (!c.runner) return;
            (void)c.Vocab();  // analyses may still name their predictions
            c.runner.reset();
        })
        .def("set_base",
             [](ModelCore& c, const std::string& dir) {
                 py::gil_scoped_release release;
                 std::lock_guard<std::mutex> lock(c.mutex);
                 c.base_dir = dir;
             })
        .def("set_run_step",
             [](ModelCore& c) {
                 py::gil_scoped_release release;
                 std::lock_guard<std::mutex> lock(c.mutex);
                 c.run_step = true;
             })
        .def_property_readonly("run_step", [](const ModelCore& c) { return c.run_step; })
        .def("analyze_text",
             [](const std::shared_ptr<ModelCore>& c, const std::string& text, const std::string& compare,
                const std::optional<FlagList>& twin_flags, const std::string& ablate, bool truncate) {
                 return Analyze(c, &text, nullptr, compare, twin_flags, ablate, truncate);
             })
        .def("analyze_ids",
             [](const std::shared_ptr<ModelCore>& c, const std::vector<int64_t>& ids, const std::string& compare,
                const std::optional<FlagList>& twin_flags, const std::string& ablate, bool truncate) {
                 return Analyze(c, nullptr, &ids, compare, twin_flags, ablate, truncate);
             })
        .def("tokenize",
             [](const std::shared_ptr<ModelCore>& c, const std::string& text, bool truncate) {
                 model::Tokenization t;
                 {
                     py::gil_scoped_release release;
                     std::lock_guard<std::mutex> lock(c->mutex);
                     std::string ignored;
                     t = Tokens(*c, &text, nullptr, truncate, &ignored);
                 }
                 py::list pieces;
                 for (const std::string& p : t.pieces) pieces.append(py::str(model::PieceToDisplay(p)));
                 return py::make_tuple(t.ids, pieces);
             })
        .def("generate", &Generate)
        .def("export_text", &ExportText);

    py::class_<AnalysisHandle>(m, "Analysis")
        .def_property_readonly("n_layer", [](const AnalysisHandle& h) { return h.A().n_layer; })
        .def_property_readonly("n_head", [](const AnalysisHandle& h) { return h.A().n_head; })
        .def_property_readonly("n_tokens", [](const AnalysisHandle& h) { return h.A().n_tokens; })
        .def_property_readonly("self_comparison_note", [](const AnalysisHandle& h) {
            return h.HasCompare() ? InPythonWords(app::SelfComparisonNote(h.A())) : std::string();  // compare=None: no comparison to be itself
        })
        .def_property_readonly("text", [](const AnalysisHandle& h) { return py::str(model::PieceToDisplay(h.text)); })
        .def_property_readonly("ids", [](const AnalysisHandle& h) { return h.A().tokens.ids; })
        .def_property_readonly("pieces",
                               [](const AnalysisHandle& h) {
                                   py::list out;
                                   for (const std::string& p : h.A().tokens.pieces) out.append(py::str(model::PieceToDisplay(p)));
                                   return out;
                               })
        .def_property_readonly("piece_bytes",
                               [](const AnalysisHandle& h) {
                                   py::list out;
                                   for (const std::string& p : h.A().tokens.pieces) out.append(Bytes(p));
                                   return out;
                               })
        .def_property_readonly("offsets", [](const AnalysisHandle& h) { return h.A().tokens.offsets; })
        .def_property_readonly("compare", [](const AnalysisHandle& h) { return h.compare; })
        .def_property_readonly("comparison_kind",
                               [](const AnalysisHandle& h) { return h.HasCompare() ? std::string(app::ComparisonKindName(h.A().comparison)) : "none"; })
        .def_property_readonly("base_label", [](const AnalysisHandle& h) { return h.A().base_label; })
        .def_property_readonly("decomposition_json", [](const AnalysisHandle& h) { return model::JsonText(app::DecompositionToJson(h.A())); })
        .def_property_readonly("compare_label", [](const AnalysisHandle& h) { return h.A().compare_label; })
        .def_property_readonly("interventions", [](const AnalysisHandle& h) { return model::FormatInterventions(h.A().interventions); })
        .def_property_readonly("device", [](const AnalysisHandle& h) { return h.A().device; })
        .def_property_readonly("forward_ms", [](const AnalysisHandle& h) { return h.A().forward_ms; })
        .def_property_readonly("metrics_ms", [](const AnalysisHandle& h) { return h.A().metrics_ms; })
        .def_property_readonly("engine_ms", [](const AnalysisHandle& h) { return h.engine_ms; })
        .def_property_readonly("reused_rows", [](const AnalysisHandle& h) { return h.A().reused_rows; })
        .def_property_readonly("not_finite", [](const AnalysisHandle& h) { return app::NonFiniteAnalysis(h.A()); })  // "": finite
        .def("array", &Array)
        .def("metrics", &Metrics)
        .def("attention", &Attention)
        .def("predictions", &Predictions)
        .def("heatmap", &Heatmap)
        .def("heads_grid", &Grid)
        .def("lens_grid", &LensGrid)
        .def("highlight", &HighlightFigure)
        .def("plot", &Plot)
        .def("dla_figure", &DlaFigure)
        .def("rank_figure", &RankFigure)
        .def("export", &Export)
        .def("lens", &Lens, py::arg("side") = "ssa")
        .def("id_pieces", &IdPieces)
        .def("piece_ids", &PieceIds, py::arg("piece"), py::arg("raw") = false)
        .def("rank_heads", &RankHeads, py::arg("progress") = true)
        .def("attribute", &Attribute, py::arg("position"), py::arg("token"), py::arg("side") = "ssa", py::arg("through_ssa") = false);

    py::class_<FigureHandle>(m, "Figure")
        .def_property_readonly("width", [](const FigureHandle& f) { return f.figure.Width; })
        .def_property_readonly("height", [](const FigureHandle& f) { return f.figure.Height; })
        .def_property_readonly("title", [](const FigureHandle& f) { return f.figure.Title; })
        .def_property_readonly("html", [](const FigureHandle& f) { return f.html; })
        .def("png", &Png, py::arg("scale") = 1)
        .def("svg", &Svg);

    m.def("write_summary", &WriteSummary);
    // An engine's message that reaches Python as a string (a step's or a text's failure, warned of)
    // in the words its exceptions use.
    m.def("python_words", &InPythonWords);
    // What export_batch checks before any text runs: the flags' values and the folder (the heads
    // against the model where the texts run).
    // `folders`: the texts' sub-folders (export_batch), where a link or a file is refused. `runs`:
    // the run folders Run.export reads, which `out` must be outside of (asked first, as the command
    // line asks: out RUN/checkpoint-999 is inside the run before it is a new step of it).
    m.def(
        "check_export",
        [](const std::string& out, const FlagList& flags, const std::string& where, const std::vector<std::string>& folders,
           const std::vector<std::string>& runs) {
            app::CommandOptions o;
            ApplyFlags(app::Command::Export, flags, kExportExcluded, where, &o);
            if (o.export_options.rank_heads)  // as the command line refuses --rank-heads with --batch and --run
                throw BadArgument(where + ": not with rank_heads=, which analyses one text once a head (a text's: "
                                  "Model.analyze(text).export(out, rank_heads=True))");
            const app::ExportOptions& e = o.export_options;
            if ((e.dla_position || e.dla_target) && !e.lens)  // taken and ignored, where the command line refuses it
                if (auto s = app::CheckExportSettings(e, true); !s) throw BadArgument(where + ": " + InPythonWords(s.error()));
            for (const std::string& run : runs)
                if (auto s = app::CheckOutsideRun(out, run); !s) throw BadArgument(where + ": out " + s.error());
            if (auto s = app::CheckExportFolder(out); !s) throw BadArgument("--out: " + s.error());
            for (const std::string& name : folders)
                if (auto s = app::CheckExportPlaces(out, (fs::path(out) / name).string(), o.export_options); !s) throw WriteFailed(s.error());
        },
        py::arg("out"), py::arg("flags"), py::arg("where"), py::arg("folders") = std::vector<std::string>{},
        py::arg("runs") = std::vector<std::string>{});
    // Run.export's files go into a folder of their own inside `out`, moved into place at the end
    // (move_tree) as the command line's: the folders they go to (`folders`, relative: the chosen
    // steps', and the curves' with PNG / SVG) are checked first, before any checkpoint is opened.
    // The folder is held (model::HeldTempFolder) while the Stage lives, so that a later run's export
    // removes it only if this process was killed.
    py::class_<model::HeldTempFolder, std::unique_ptr<model::HeldTempFolder>>(m, "Stage")
        .def_property_readonly("path", [](const model::HeldTempFolder& f) { return py::bytes(f.path()); });  // bytes: --out's name need not be UTF-8
    m.def("stage_run", [](const std::string& out, const std::vector<std::string>& folders, const FlagList& flags) {
        app::CommandOptions o;
        ApplyFlags(app::Command::Export, flags, kExportExcluded, "Run.export()", &o);
        std::vector<std::string> all = folders;
        if (o.export_options.png || o.export_options.svg) all.push_back("curves");
        for (const std::string& folder : all) {  // a step's export's folder, and the folders that export makes
            const std::string at = (fs::path(out) / folder).string();
            const bool step = fs::path(folder).filename().string().rfind("step-", 0) == 0;
            if (auto s = step ? app::CheckExportPlaces(out, at, o.export_options) : model::CheckFoldersBelow(out, at); !s) throw WriteFailed(s.error());
        }
        if (std::error_code ec = model::MakeFolders(out)) throw WriteFailed(model::Quoted(out) + ": cannot create (" + ec.message() + ")");
        auto staged = model::HeldTempFolder::Create((fs::path(out) / "run").string());
        if (!staged) throw WriteFailed(staged.error());
        return std::make_unique<model::HeldTempFolder>(std::move(*staged));
    });
    // A compare run that is the run itself (its folder, a link to it), refused as the command line's.
    m.def("check_compare_run", [](const std::string& run, const std::string& compare_run, const std::string& where) {
        if (auto s = app::CheckCompareRun(run, compare_run); !s) throw BadArgument(where + ": compare_run " + s.error());
    });
    m.def("move_tree", [](const std::string& staged, const std::string& out) {
        py::gil_scoped_release release;
        if (auto s = model::MoveTreeInto(staged, out); !s) throw WriteFailed(s.error());
    });
    // A device name as load() takes it, checked for its spelling only: the workers that open the
    // model may have GPUs this process has not.
    m.def("check_device", [](const std::string& device) {
        app::CommandOptions o;
        if (auto s = ApplyFlag(app::Command::Info, "--device", device, &o); !s) throw BadArgument(s.error());
    });
    // load()'s flags and device checked as load() checks them, without opening anything (load_run:
    // every checkpoint opens with them, so a misspelt one is the call's error, not each step's).
    m.def("check_load_flags", [](const std::string& device, const FlagList& flags, const std::string& where) {
        app::CommandOptions o;
        ApplyFlags(app::Command::Info, flags, kLoadExcluded, where, &o);
        if (auto s = ApplyFlag(app::Command::Info, "--device", device, &o); !s) throw BadArgument(s.error());
    });
    // What every step opening here shares, checked before the first opens (app::CheckOpenSettings):
    // the device and dtype this process has, the files config= and tokenizer= name. Not for a Dask
    // client's steps: its workers may have GPUs and files this process has not.
    m.def("check_open_here", [](const std::string& device, const FlagList& flags, const std::string& where) {
        app::CommandOptions o;
        ApplyFlags(app::Command::Info, flags, kLoadExcluded, where, &o);
        if (auto s = app::CheckOpenSettings({"", device, o.dtype, o.hints}); !s) throw BadArgument(where + ": " + InPythonWords(s.error().message));
    });
    // A figure's bytes as an export writes them: to a temporary name, renamed, never through a link.
    m.def("write_file", [](const std::string& path, const py::bytes& data) {
        if (auto s = model::WriteFileAtomically(path, std::string(data)); !s) throw WriteFailed(s.error());
    });
    m.def("default_model", &DefaultModel);
    // A Dask worker's share: its threads_per_worker, for every model it opens and has open
    // ($SSAVIZ_THREADS still wins). Threads are process-wide in LibTorch.
    m.def("use_worker_threads", [](int threads) {
        if (threads < 1 || threads > 1024) throw BadArgument("a worker's threads must be from 1 to 1024, not " + std::to_string(threads));
        g_worker_threads = model::ComputeThreadsFromEnvironment(0) ? model::ResolveComputeThreads()
                                                                   : model::ComputeThreads{threads, "a Dask worker's " + std::to_string(threads) +
                                                                                                        " threads (threads_per_worker)"};
        model::UseComputeThreads(*g_worker_threads);
    });
    m.def("faster_blas_kernels", &model::FasterBlasKernels);
    m.def("runtime_json", [] { return model::JsonText(app::RuntimeToJson()); });
    // The comparison keywords (app/core/run.h's table): compare="vanilla", "local", ...
    m.def("compare_keywords", [] {
        std::vector<std::string> keys;
        for (const app::CompareKindInfo& k : app::CompareKinds())
            if (k.keyword) keys.push_back(k.key);
        return keys;
    });
    m.def("examples", [] {
        py::list out;
        for (const app::Example& x : app::BundledExamples()) {
            py::dict d;
            d["id"] = x.id;
            d["title"] = x.title;
            d["hint"] = x.hint;
            d["model"] = x.model_dir;
            d["twin"] = x.twin_dir;
            d["base"] = x.base_dir;  // a fine-tune's example: its base (analyze(compare="base", base=...)); "" otherwise
            d["text"] = x.text;
            d["run"] = x.run_dir;  // a run example's run and compare run ("" otherwise): ssaviz.load_run(...)
            d["compare_run"] = x.compare_run_dir;
            out.append(d);
        }
        return out;
    });
    // What a run's step lacks and its base holds (app::HintsWithBase, as `export --run --base`
    // reads every step): {"config": FILE, "tokenizer": DIR}, each only where the base gives it.
    m.def("hints_from_base", [](const std::string& path, const std::string& base) {
        app::CompareSpec compare = app::CompareSpec::Base(base);
        compare.base_of_the_run = true;
        const model::ConfigHints h = app::HintsWithBase({}, path, compare);
        py::dict out;
        if (!h.config_file.empty()) out["config"] = py::bytes(h.config_file);
        if (!h.tokenizer_dir.empty()) out["tokenizer"] = py::bytes(h.tokenizer_dir);
        return out;
    });
    // A training run's checkpoints in step order ([(step, path)]), as `export --run` finds them.
    m.def("run_step", &AnalyseStep);
    m.def("run_step_reason", &app::RunStepReason);
    m.def("write_run", &WriteRun);
    m.def("run_steps", [](const std::string& dir) {
        auto steps = app::FindRunSteps(dir);
        if (!steps) throw BadArgument(steps.error());
        std::vector<std::pair<int64_t, py::bytes>> out;  // bytes: a name need not be UTF-8 (os.fsdecode'd in Python)
        for (const app::RunStep& s : *steps) out.emplace_back(s.step, py::bytes(s.path));
        return out;
    });
    // The catalogue of quantities (app/core/quantities.h), for the package's documentation.
    m.def("catalogue_json", [] { return model::JsonText(app::CatalogueToJson()); });
    // A batch's sub-folders, named as `ssaviz export --batch` names them ("" -> text_0001, ...).
    m.def("folder_names", [](const std::vector<std::string>& names) {
        std::set<std::string> used = app::BatchReservedNames();
        std::vector<std::string> out;
        for (const std::string& name : names) out.push_back(app::BatchFolderName(name, static_cast<int>(out.size()), &used));
        return out;
    });
#ifdef SSAVIZ_BINARY
    m.attr("binary") = SSAVIZ_BINARY;
#else
    m.attr("binary") = "";
#endif
}
