// The comparison table, then the runner.
#include "app/core/run.h"

#include "app/core/examples.h"
#include "app/core/exit_code.h"
#include "model/io/files.h"
#include "model/io/weights.h"
#include "model/nn/runtime.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <filesystem>
#include <new>
#include <string_view>

namespace app {

//-----------------------------------------------------------------------------
// [SECTION] Comparisons: the one vocabulary
//-----------------------------------------------------------------------------

const std::vector<CompareKindInfo>& CompareKinds() {
    using C = model::Comparison;
    static const std::vector<CompareKindInfo> kinds = {
        {CompareKind::Global, "vanilla", C::Counterfactual, true, "tau = 1", "(the default) sets tau = 1 in every layer (a second forward pass)"},
        {CompareKind::LayerLocal, "local", C::LayerLocal, true, "tau = 1 local", "tau = 1 in each layer alone, on the SSA model's own q and k"},
        {CompareKind::Unedited, "unedited", C::Unedited, true, "unedited", "the model without the --ablate what-ifs"},
        {CompareKind::Twin, "twin", C::Twin, false, "twin", "a trained twin"},
        {CompareKind::Base, "base", C::Base, true, "base",
         "a fine-tune against its base model, three sides: SSA, its weights at tau = 1 and the base (--base DIR, else the base beside "
         "the model: lit_model.pth beside the fine-tuned checkpoint, or a folder base/ inside or beside the fine-tune's)"},
        // Nothing shown: the layer-local comparison costs no forward pass of its own.
        {CompareKind::None, "none", C::LayerLocal, false, "comparison", ""},
    };
    return kinds;
}

const CompareKindInfo& CompareKindOf(CompareKind kind) {
    for (const CompareKindInfo& k : CompareKinds())
        if (k.kind == kind) return k;
    assert(false);
    return CompareKinds()[0];
}

const CompareKindInfo& CompareKindRunning(model::Comparison runs) {
    for (const CompareKindInfo& k : CompareKinds())  // the first row that runs it: None only borrows LayerLocal
        if (k.runs == runs) return k;
    assert(false);
    return CompareKinds()[0];
}

std::string MistypedComparison(const CompareSpec& compare) {
    // A word that is no comparison and names nothing here (--compare locl, Vanilla, tau=1): a
    // mistyped comparison more likely than a twin's missing folder.
    std::error_code ec;
    if (compare.kind != CompareKind::Twin || compare.twin_dir.find('/') != std::string::npos ||
        std::filesystem::exists(std::filesystem::symlink_status(compare.twin_dir, ec)))
        return "";
    std::string kinds;
    for (const CompareKindInfo& k : CompareKinds())
        if (k.keyword) kinds += (kinds.empty() ? "" : ", ") + std::string(k.key);
    return "the comparison '" + model::EscapeForMessage(compare.twin_dir) + "' is none of " + kinds + ", tau1, and no twin's folder of that name exists";
}

CompareSpec ParseCompare(const std::string& value, bool python) {
    if (value == "tau1") return CompareKind::Global;  // what metrics.json's comparison_kind calls it
    for (const CompareKindInfo& k : CompareKinds())
        if (value == k.key && (k.keyword || (python && k.kind == CompareKind::None))) return k.kind;
    return CompareSpec::Twin(value);
}

std::string SpellCompare(const CompareSpec& compare) {
    return compare.kind == CompareKind::Twin ? compare.twin_dir : CompareKindOf(compare.kind).key;
}

std::string CompareFlagHint() {
    std::string hint;
    for (const CompareKindInfo& k : CompareKinds())
        if (k.keyword) hint += std::string(k.key) + "|";
    return hint + "DIR";
}

std::string CompareFlagHelp() {
    std::string help = "the comparison:";
    for (const CompareKindInfo& k : CompareKinds())
        if (k.keyword) help += std::string(" ") + k.key + " " + k.help + ";";
    return help + " DIR " + CompareKindOf(CompareKind::Twin).help;
}

//-----------------------------------------------------------------------------
// [SECTION] The runner
//-----------------------------------------------------------------------------

RunError::Kind OpenErrorKind(const std::string& error) {
    // A device or dtype this build or machine lacks is the caller's mistake; the rest is the model's.
    const bool asked_wrong = error.rfind("--device", 0) == 0 || error.rfind("--dtype", 0) == 0;
    return asked_wrong ? RunError::Kind::Usage : RunError::Kind::BadInput;
}

namespace {
// LibTorch's allocators' own words (c10/core/impl/alloc_cpu.cpp: "DefaultCPUAllocator: can't
// allocate memory: you tried to allocate N bytes", or "not enough memory: ..."; c10/cuda's caching
// allocator: "CUDA out of memory. Tried to allocate ...").
constexpr std::string_view kCpuOom = "DefaultCPUAllocator", kCpuAsked = "you tried to allocate ", kCudaOom = "CUDA out of memory";

std::string FirstLine(const std::exception& e) {
    const std::string what = e.what();
    return what.substr(0, what.find('\n'));
}
}  // namespace

bool IsOutOfMemory(const std::exception& e) {
    if (dynamic_cast<const std::bad_alloc*>(&e)) return true;
    const std::string line = FirstLine(e);
    return line.find(kCpuOom) != std::string::npos || line.find(kCudaOom) != std::string::npos;
}

std::string ExceptionMessage(const std::exception& e) {
    const std::string line = FirstLine(e);
    if (dynamic_cast<const std::bad_alloc*>(&e)) return "out of memory (a size or text too large for this machine)";
    if (const size_t at = line.find(kCpuOom); at != std::string::npos) {
        // "... you tried to allocate 4503599627370496 bytes. Error code 12 (Cannot allocate memory)"
        const size_t n = line.find(kCpuAsked, at);
        const unsigned long long bytes = n == std::string::npos ? 0 : std::strtoull(line.c_str() + n + kCpuAsked.size(), nullptr, 10);
        return "out of memory: LibTorch asked for " + (bytes > 0 ? model::FormatBytes(bytes) : std::string("more")) +
               " at once and this machine could not give it (a model or text too large for its memory)";
    }
    if (const size_t at = line.find(kCudaOom); at != std::string::npos)
        return "out of GPU memory: " + model::EscapeForMessage(line.substr(at), 400);
    return "internal error: " + model::EscapeForMessage(line, 400);
}

int ExitCodeOf(RunError::Kind kind) { return kind == RunError::Kind::Usage ? kExitUsage : kind == RunError::Kind::BadInput ? kExitBadInput : kExitFailure; }

RunStatus CheckOpenSettings(const ModelSpec& spec) {
    if (auto s = model::CheckDeviceAndDtype(spec.device, spec.dtype); !s) return RunError{RunError::Kind::Usage, s.error()};
    if (auto s = model::CheckHintFiles(spec.hints); !s) return RunError{RunError::Kind::BadInput, s.error()};
    return model::Ok{};
}

model::ConfigHints HintsWithBase(const model::ConfigHints& given, const std::string& model_path, const CompareSpec& compare) {
    if (compare.kind != CompareKind::Base) return given;
    const std::string base = compare.base_dir.empty() ? BaseBeside(model_path, compare.base_of_the_run) : compare.base_dir;
    return model::HintsFromBase(given, model_path, base);
}

RunResult<std::unique_ptr<Runner>> Runner::Open(const ModelSpec& spec) {
    if (const int threads = model::ComputeThreadsFromEnvironment(0)) model::SetComputeThreads(threads);
    auto engine = model::Engine::Open(spec.path, spec.device, spec.hints, spec.dtype);
    if (!engine) return RunError{OpenErrorKind(engine.error()), engine.error(), spec.path};
    return std::unique_ptr<Runner>(new Runner(std::move(*engine), spec));
}

RunStatus Runner::Configure(const RunSpec& run) {
    if (auto s = SetCompare(run.compare); !s) return s;
    return SetWhatIfs(run.ablate);
}

RunStatus Runner::SetCompare(const CompareSpec& compare) {
    if (compare.kind == CompareKind::Base) {
        const std::string dir = compare.base_dir.empty() ? BaseBeside(Info().dir, compare.base_of_the_run) : compare.base_dir;
        if (dir.empty())
            return RunError{RunError::Kind::Usage,
                            "no base model beside '" + model::EscapeForMessage(Info().dir) +
                                (compare.base_of_the_run ? "' (a run's steps share one base: lit_model.pth or a folder base/ beside the steps, or beside the run train kept"
                                                         : "' (lit_model.pth beside the fine-tuned checkpoint, or a folder base/ inside or beside its folder, or beside the run of a step train kept") +
                                WhyNoBaseBeside(Info().dir, compare.base_of_the_run) + "): name it with --base DIR"};
        if (dir == m_base) return model::Ok{};
        // The model itself as its base: every SSA - base difference would be 0, and js_drift too.
        std::error_code ec;
        if (auto files = model::FindModelFiles(dir); !compare.base_may_be_the_model && files && !Info().weights_path.empty() &&
                                                     std::filesystem::equivalent(files->weights, Info().weights_path, ec))
            return RunError{RunError::Kind::Usage, "the base '" + model::EscapeForMessage(dir) + "' is the model itself (" +
                                                       model::EscapeForMessage(std::filesystem::path(files->weights).filename().string()) +
                                                       "): a fine-tune's base is the model it was fine-tuned from"};
        // A base that does not open leaves the engine as it was. One found beside the model is said
        // to be (it may be another experiment's base/), with the flag that names the right one.
        if (auto s = m_engine->OpenBase(dir, model::HintsBeside(m_spec.hints, dir, m_spec.path)); !s)
            return RunError{RunError::Kind::BadInput,
                            compare.base_dir.empty() ? s.error() + " (found beside the model: name the fine-tune's own with --base DIR)" : s.error(), dir};
        m_twin.clear();  // the engine keeps one model beside the SSA one
        m_base = dir;
        return model::Ok{};
    }
    CloseBase();
    if (compare.kind == CompareKind::Twin) {
        if (compare.twin_dir == m_twin) return model::Ok{};
        if (const std::string why = MistypedComparison(compare); !why.empty()) return RunError{RunError::Kind::Usage, why};
        std::error_code ec;
        // The model itself as its twin: every difference would be 0, unsaid.
        if (auto files = model::FindModelFiles(compare.twin_dir); files && !Info().weights_path.empty() &&
                                                                   std::filesystem::equivalent(files->weights, Info().weights_path, ec))
            return RunError{RunError::Kind::Usage, "the twin '" + model::EscapeForMessage(compare.twin_dir) + "' is the model itself (" +
                                                       model::EscapeForMessage(std::filesystem::path(files->weights).filename().string()) +
                                                       "): a twin is another model, trained apart (without temperatures)"};
        // A twin that does not open leaves the engine as it was (with the twin before, if any).
        // The twin's own load flags as given (Python's compare=Model); else the model's, where the
        // twin's folder lacks what they name.
        const model::ConfigHints hints = compare.twin_hints ? *compare.twin_hints : model::HintsBeside(m_spec.hints, compare.twin_dir, m_spec.path);
        if (auto s = m_engine->OpenTwin(compare.twin_dir, hints); !s)
            return RunError{RunError::Kind::BadInput, s.error(), compare.twin_dir};
        m_twin = compare.twin_dir;
        return model::Ok{};
    }
    CloseTwin();
    if (auto s = m_engine->SetComparison(CompareKindOf(compare.kind).runs); !s) return RunError{RunError::Kind::Failure, s.error()};
    return model::Ok{};
}

RunStatus Runner::SetWhatIfs(const std::string& ablate) {
    std::vector<model::Intervention> edits;
    if (!ablate.empty()) {
        const model::ModelConfig& c = Info().config;
        auto parsed = model::ParseInterventions(ablate, c.n_layer, c.n_head);
        if (!parsed) return RunError{RunError::Kind::Usage, parsed.error()};
        edits = std::move(*parsed);
    }
    if (auto s = m_engine->SetInterventions(std::move(edits)); !s) return RunError{RunError::Kind::Usage, s.error()};
    return model::Ok{};
}

void Runner::CloseTwin() {
    if (m_twin.empty()) return;
    m_engine->CloseTwin();
    m_twin.clear();
}

void Runner::CloseBase() {
    if (m_base.empty()) return;
    m_engine->CloseBase();
    m_base.clear();
}

RunResult<model::Tokenization> Runner::Tokenize(const std::string& text, bool truncate) const {
    auto tokens = m_engine->Tokenize(text, truncate);
    if (!tokens) {
        const bool too_long = tokens.error().find("(truncating keeps the first ") != std::string::npos;  // the model's context, or a shorter twin's or base's
        return RunError{RunError::Kind::BadInput, tokens.error() + (too_long ? "; pass --truncate to run it" : "")};
    }
    return std::move(*tokens);
}

RunResult<model::Analysis> Runner::Analyze(const model::Tokenization& tokens, const model::AnalyzeOptions& options) {
    auto analysis = m_engine->Analyze(tokens, options);
    if (!analysis) return RunError{RunError::Kind::Failure, analysis.error()};
    return std::move(*analysis);
}

RunResult<Generation> Runner::Generate(model::Tokenization* tokens, const GenerationSpec& spec, const GenerationHooks& hooks) {
    Generation out;
    const int context = Info().config.n_positions;
    const size_t vocab = m_engine->tokenizer().VocabSize();
    uint64_t rng = spec.seed;
    std::vector<float> logits;  // after the last token, once the tokens are analysed
    bool analysed = false;
    for (int n = 0; n < spec.tokens; ++n) {
        if (static_cast<int>(tokens->ids.size()) >= context) {
            out.end = Generation::End::ContextFull;
            break;
        }
        if (hooks.stop && hooks.stop()) {
            out.end = Generation::End::Stopped;
            break;
        }
        if (!analysed) {  // the prompt; usually the caller's last analysis, reused whole
            auto a = Analyze(*tokens, hooks.options);
            if (!a) return a.error();
            logits = std::move(a->next_logits);
        }
        // A model that overflows predicts from NaN: greedy took id 0 ("!!!!!"), sampling any id, exit 0
        // (a logit of -inf is a token ruled out, and stays one).
        for (size_t k = 0; k < logits.size() && k < vocab; ++k)
            if (std::isnan(logits[k]) || logits[k] == std::numeric_limits<float>::infinity())
                return RunError{RunError::Kind::BadInput, "the prediction after token " + std::to_string(tokens->ids.size() - 1) +
                                                              " is not finite (a logit is " + (std::isnan(logits[k]) ? "NaN" : "+inf") +
                                                              "): the model overflows float range on this text"};
        GenerationStep step;
        step.index = n;
        step.id = model::NextToken(logits, vocab, spec.temperature, spec.top_k, &rng);
        auto piece = model::AppendToken(m_engine->tokenizer(), step.id, tokens);
        if (!piece) return RunError{RunError::Kind::BadInput, piece.error()};
        step.piece = std::move(*piece);
        out.ids.push_back(step.id);
        out.text += step.piece;
        analysed = hooks.analyse_each_step;
        if (analysed) {  // incremental: only the new row is computed
            auto a = Analyze(*tokens, hooks.options);
            if (!a) return a.error();
            logits = a->next_logits;  // a copy: the step hands the analysis on
            step.analysis = std::move(*a);
        }
        if (hooks.on_step) hooks.on_step(step);
    }
    return out;
}

RunResult<std::shared_ptr<const std::vector<std::string>>> Runner::Vocabulary() {
    if (!m_vocabulary) {
        const model::Tokenizer& t = m_engine->tokenizer();
        auto v = std::make_shared<std::vector<std::string>>(t.VocabSize());
        // Each id's bytes as they follow an ordinary token, as a prediction continues a text: alone,
        // SentencePiece's decoder drops a leading "▁" (' to' would read 'to', unlike a.pieces).
        const model::PredictedPieces piece(t);
        for (size_t id = 0; id < v->size(); ++id) {
            auto text = piece(static_cast<int32_t>(id));  // a hostile decoder can fail (its budget)
            if (!text) return RunError{RunError::Kind::BadInput, text.error()};
            (*v)[id] = std::move(*text);
        }
        m_vocabulary = std::move(v);
    }
    return m_vocabulary;
}

}  // namespace app
