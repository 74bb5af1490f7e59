// One run of the engine, whichever front end asks for it: what to analyse against what, the
// what-ifs, and generation. The command line, `import ssaviz` and the window's worker fill these
// specifications and hand them to one Runner, which owns the Engine; what a comparison value
// means ("vanilla", "local", a twin's folder) is known here and nowhere else.
//
// Index:
//   [SECTION] Comparisons: the one vocabulary
//   [SECTION] Run specifications
//   [SECTION] Errors, as each front end reports them
//   [SECTION] The runner
#pragma once

#include <cassert>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/nn/analysis.h"

namespace app {

//-----------------------------------------------------------------------------
// [SECTION] Comparisons: the one vocabulary
//-----------------------------------------------------------------------------

// What the SSA model is compared with. Global: tau = 1 in every layer (the counterfactual, a second
// forward pass); LayerLocal: tau = 1 in each layer alone, on the SSA model's own q and k; Unedited:
// the model without its what-ifs; Twin: a separately trained model; Base: a fine-tune against the
// model it started from, three sides (SSA, its weights at tau = 1, the base; SPEC section 9);
// None: nothing shown (the cheapest run, for generation and Python's compare=None).
enum class CompareKind { Global, LayerLocal, Unedited, Twin, Base, None };

// One row per kind: its key (as --compare, sessions and Python's `compare` spell it), what the
// engine runs for it, its short name and its help. A new kind of comparison is a row here (plus
// what runs it).
struct CompareKindInfo {
    CompareKind kind;
    const char* key;          // "vanilla"; a twin's is "twin", though a twin is spelled by its folder
    model::Comparison runs;   // what the engine runs
    bool keyword;             // a --compare value (false: the twin, spelled DIR; none, Python's alone)
    const char* label;        // the one short name of views, legends and files' titles: "tau = 1"
    const char* help;         // after the key in --compare's help
};
const std::vector<CompareKindInfo>& CompareKinds();
const CompareKindInfo& CompareKindOf(CompareKind kind);
const CompareKindInfo& CompareKindRunning(model::Comparison runs);  // the kind an analysis ran

struct CompareSpec {
    CompareSpec(CompareKind kind_ = CompareKind::Global) : kind(kind_) {}
    static CompareSpec Twin(std::string dir, std::optional<model::ConfigHints> hints = std::nullopt) {
        CompareSpec twin(CompareKind::Twin);
        twin.twin_dir = std::move(dir);
        twin.twin_hints = std::move(hints);
        return twin;
    }

    // A fine-tune's base: its folder or checkpoint; "" for the one beside the model (BaseBeside).
    static CompareSpec Base(std::string dir = "") {
        CompareSpec base(CompareKind::Base);
        base.base_dir = std::move(dir);
        return base;
    }

    CompareKind kind;
    std::string twin_dir;                          // Twin: its folder or checkpoint
    std::optional<model::ConfigHints> twin_hints;  // Twin: how to open it; none: as the model was opened
    std::string base_dir;                          // Base: its folder or checkpoint; "": the one beside the model
    // Base: the model may be the base itself (a run's steps against its base: the first step is
    // often the base, no change yet); otherwise that is a usage error.
    bool base_may_be_the_model = false;
    // Base: the model is a run's step, whose base is the run's (BaseBeside's `run_step`): a base/
    // inside one step's own folder set a base of its own for that step.
    bool base_of_the_run = false;
};

// A --compare value, a session's "compare" or Python's `compare`: a keyword, else a twin's folder
// (./local for a folder of that name). `python`: "none" is a keyword too (compare=None).
CompareSpec ParseCompare(const std::string& value, bool python = false);
// The inverse: the keyword, or the twin's folder.
std::string SpellCompare(const CompareSpec& compare);
// Why a twin's folder is more likely a mistyped comparison (a bare word that names nothing here:
// locl, Vanilla, drift), as a message; empty where it is none.
std::string MistypedComparison(const CompareSpec& compare);
// --compare's value hint ("vanilla|local|unedited|DIR") and help, from the table.
std::string CompareFlagHint();
std::string CompareFlagHelp();

//-----------------------------------------------------------------------------
// [SECTION] Run specifications
//-----------------------------------------------------------------------------

// A model to open: --model, --device, --dtype and the checkpoint hints.
struct ModelSpec {
    std::string path;  // a folder or checkpoint file
    std::string device = "auto";
    std::string dtype = "f32";
    model::ConfigHints hints;
};

// How generation chooses each token: greedy at temperature 0, else drawn from softmax(logits / X)
// over the top_k most likely (0: all) with a seed (the same tokens on every machine).
struct GenerationSpec {
    int tokens = 0;  // how many to append; fewer when the context fills
    float temperature = 0;
    int top_k = 0;
    uint64_t seed = 1234;
};

// What one analysis runs: the comparison and the what-ifs on the SSA side.
struct RunSpec {
    CompareSpec compare;
    std::string ablate;  // --ablate's syntax ("1:0,0:*=pos"); checked against the model's shape
};

//-----------------------------------------------------------------------------
// [SECTION] Errors, as each front end reports them
//-----------------------------------------------------------------------------

// Why a run could not go on. The command line exits with 2 (Usage), 3 (BadInput) or 1 (Failure);
// Python raises ValueError (FileNotFoundError where `path` is not there) or RuntimeError; the
// window shows the message.
struct RunError {
    enum class Kind { Usage, BadInput, Failure };
    RunError() = default;
    RunError(Kind kind_, std::string message_, std::string path_ = "")
        : kind(kind_), message(std::move(message_)), path(std::move(path_)) {}
    Kind kind = Kind::Failure;
    std::string message;
    std::string path;  // a model or twin that did not open
};

template <class T>
class [[nodiscard]] RunResult {
public:
    RunResult(T value) : m_value(std::move(value)) {}
    RunResult(RunError error) : m_error(std::move(error)) {}
    explicit operator bool() const { return m_value.has_value(); }
    const RunError& error() const {
        assert(!m_value);
        return m_error;
    }
    T& operator*() & { return *m_value; }
    const T& operator*() const& { return *m_value; }
    T* operator->() { return &*m_value; }
    const T* operator->() const { return &*m_value; }

private:
    std::optional<T> m_value;
    RunError m_error;
};
using RunStatus = RunResult<model::Ok>;
// What every model a run opens shares, checked before the first opens: the device and dtype (the
// build and machine have them: Usage) and the files --config and --tokenizer name (BadInput). A
// run's steps had failed one by one on them, each saying the same.
RunStatus CheckOpenSettings(const ModelSpec& spec);

// Why a model did not open, from the engine's message: Usage for a device or dtype this build or
// machine lacks (--device cuda without CUDA), BadInput for the model's own faults. The command line
// and the window exit with the same code for it (ExitCodeOf).
RunError::Kind OpenErrorKind(const std::string& error);
int ExitCodeOf(RunError::Kind kind);  // 2, 3 or 1 (app/core/exit_code.h)

// An exception that escaped the engine (c10::Error and friends) as the one line the command line,
// the window and Python say: "out of memory: ..." where an allocation failed (std::bad_alloc, or
// LibTorch's allocators: "DefaultCPUAllocator: ...", "CUDA out of memory"),
// otherwise "internal error: " and its message's first line, escaped and bounded.
std::string ExceptionMessage(const std::exception& e);
bool IsOutOfMemory(const std::exception& e);  // the allocation failures above

//-----------------------------------------------------------------------------
// [SECTION] The runner
//-----------------------------------------------------------------------------

// One step of generation, handed to GenerationHooks::on_step.
struct GenerationStep {
    int index = 0;  // 0 for the first token appended
    int32_t id = 0;
    std::string piece;  // its bytes, as appended to the text
    std::optional<model::Analysis> analysis;  // the tokens with it, with GenerationHooks::analyse_each_step
};

struct GenerationHooks {
    model::AnalyzeOptions options;              // every analysis's (cancel, progress)
    std::function<bool()> stop;                 // asked before each step: true stops it
    std::function<void(GenerationStep&)> on_step;
    bool analyse_each_step = false;             // analyse the text with each new token (the window shows each)
};

struct Generation {
    enum class End { Done, ContextFull, Stopped };
    std::vector<int32_t> ids;  // appended
    std::string text;          // their pieces, one after another
    End end = End::Done;
};

// The hints to open a fine-tune at `model_path` with where `compare` sets a base beside it (the one
// it names, else the one beside the model, or beside the run of a step): what the fine-tune's folder
// lacks and no flag names, its tokenizer or lit-gpt config, read from the base's (model::HintsFromBase).
// `given` itself otherwise.
model::ConfigHints HintsWithBase(const model::ConfigHints& given, const std::string& model_path, const CompareSpec& compare);

// Owns an Engine and what it was asked to run. Not thread-safe: one thread (the command line's,
// the window's worker, Python's under its lock) uses it.
class Runner {
public:
    // Opens the model (on SSAVIZ_THREADS threads where that is set).
    static RunResult<std::unique_ptr<Runner>> Open(const ModelSpec& spec);

    model::Engine& engine() { return *m_engine; }
    const model::ModelInfo& Info() const { return m_engine->Info(); }

    // The comparison and the what-ifs for the next analyses. A setting that did not change leaves
    // the engine's kept rows alone, so the next analysis can take the incremental path.
    RunStatus Configure(const RunSpec& run);
    RunStatus SetCompare(const CompareSpec& compare);
    RunStatus SetWhatIfs(const std::string& ablate);  // --ablate's syntax; "" for none
    void CloseTwin();  // the comparison before the twin runs again
    void CloseBase();
    const std::string& BasePath() const { return m_base; }  // the open base's path; "" when none

    // A text's tokens; a text longer than the context says how to run it (--truncate).
    RunResult<model::Tokenization> Tokenize(const std::string& text, bool truncate) const;
    RunResult<model::Analysis> Analyze(const model::Tokenization& tokens, const model::AnalyzeOptions& options = {});

    // Appends up to spec.tokens tokens to `tokens`, each chosen from the logits of an analysis of
    // the tokens before it (which reuses every earlier row: one new row a step). Stops early when
    // the context is full or hooks.stop says so.
    RunResult<Generation> Generate(model::Tokenization* tokens, const GenerationSpec& spec, const GenerationHooks& hooks = {});

    // [V] each id's bytes, made once per model.
    RunResult<std::shared_ptr<const std::vector<std::string>>> Vocabulary();

private:
    explicit Runner(std::unique_ptr<model::Engine> engine, ModelSpec spec) : m_engine(std::move(engine)), m_spec(std::move(spec)) {}
    std::unique_ptr<model::Engine> m_engine;
    ModelSpec m_spec;
    std::string m_twin;  // the open twin's path; "" when none
    std::string m_base;  // the open base's path; "" when none
    std::shared_ptr<const std::vector<std::string>> m_vocabulary;
};

}  // namespace app
