#include "model/nn/model_folder_torch.h"

#include <filesystem>
#include <set>
#include <utility>
#include <vector>

#include <unistd.h>

#include "model/io/files.h"
#include "model/nn/analysis_plan_torch.h"

namespace model {
namespace fs = std::filesystem;
namespace {

// The weights of the model at `path`, and where its files are: the only call of FindModelFiles
// on the way from a path to a model.
struct FoundModel {
    ModelFiles files;
    SsaGpt gpt;
};

// The official code's one query parameter a layer, `beta` under layer 0's attention module in
// `format` ("h.0.attn.", "layers.0.self_attn.", ...): exp_exp unless --query-form or the config says.
void ReadOfficialBeta(const WeightFile& weights, Format format, const ConfigHints& hints, InferredConfig* config) {
    TemperatureForm& query = config->config.query;
    if (hints.query) query = *hints.query;
    const std::string attn = LayerName(GetFormat(format).attention, 0) + ".";
    if (weights.Find(attn + kOfficialBeta) && !weights.Find(attn + SsaName(Role::QPos))) {
        if (!query.Active()) query.position = PositionForm::ExpExp;
        // The official GPT-2's own file (nanoGPT's names), else lit-gpt's families'.
        const std::string official = format == Format::NanoGpt ? "gpt_2_PTS.py" : "model_finetune_att.py";
        if (query.position == PositionForm::ExpExp)
            config->notes.push_back("attn.beta read as exp_exp: tau_q(i) = 1 + exp(-exp(beta)) ln i, as " + official +
                                    " computes it (--query-form linear reads 1 + beta ln i, the _no_func files)");
        else if (query.position == PositionForm::Linear)
            config->notes.push_back("attn.beta read as linear: tau_q(i) = 1 + beta ln i, as model_finetune_att_no_func.py computes it");
    }
}

// A file holding two layouts' token embeddings (a converted copy kept beside the original, e.g.
// lit-gpt's transformer.wte.weight and HF's gpt_neox.embed_in.weight): the config beside it says
// which to read, lit_config.json lit-gpt's names, config.json (or --config) its model_type's.
// The shape flags for checkpoints without a config, given beside a config that names the shape:
// unused, and said so rather than ignored in silence.
void NoteUnusedShapeFlags(const ConfigHints& hints, bool query_used, const std::string& file, InferredConfig* config) {
    std::vector<std::string> unused;
    if (hints.n_head > 0) unused.push_back("--n-head");
    if (hints.query && !query_used) unused.push_back("--query-form");
    if (hints.value) unused.push_back("--value-form");
    if (hints.activation) unused.push_back("--activation");
    if (unused.empty()) return;
    std::string names;
    for (size_t i = 0; i < unused.size(); ++i) names += (i == 0 ? "" : i + 1 == unused.size() ? " and " : ", ") + unused[i];
    config->notes.push_back(names + (unused.size() > 1 ? " are" : " is") + " not used: " + EscapeForMessage(file) +
                            " names the model's shape and SSA forms");
}

Status ChooseLayout(const ModelFiles& files, const ConfigHints& hints, WeightFile* w) {
    if (w->embeddings.size() < 2) return Ok{};
    std::string names;
    for (const std::string& e : w->embeddings) names += (names.empty() ? "'" : ", '") + EscapeForMessage(e) + "'";
    const std::string config = !hints.config_file.empty() ? hints.config_file : !files.lit_config.empty() ? files.lit_config : files.config;
    std::string root;
    if (config == files.lit_config && !config.empty()) {
        root = GetFormat(Format::Lit).root;
    } else if (!config.empty()) {
        if (auto parsed = LoadConfig(config); parsed && !parsed->hf_model_type.empty()) root = GetFormat(FormatOf(*parsed)).root;
        else if (auto lit = LoadLitConfig(config)) root = GetFormat(Format::Lit).root;
    }
    if (!root.empty() && w->UseRoot(root)) return Ok{};
    return Fail(files.weights + ": holds the token embeddings of two layouts (" + names + ") and " +
                (config.empty() ? "no config says which to read: put lit_config.json (lit-gpt) or config.json (HF) beside it, or keep one layout"
                                : "'" + EscapeForMessage(config) + "' names neither: keep one layout, or give the config of the one to read"));
}

// A lit-gpt checkpoint's config: its lit_config.json (or --config), with attn.beta read as the
// official code computes it.
Result<InferredConfig> LitConfigFor(const ModelFiles& files, const WeightFile& weights, const ConfigHints& hints) {
    const std::string file = !hints.config_file.empty() ? hints.config_file : files.lit_config;
    if (file.empty())
        return Fail(EscapeForMessage(files.weights) + ": a lit-gpt checkpoint (lit-gpt's tensor names) needs its lit_config.json beside it, "
                    "or --config FILE (its base's lit_config.json, or the official code's configs/*.json it was trained with); " +
                    (hints.beside_gives_none.empty()
                         ? std::string("the official fine-tune scripts write none beside their checkpoints: in export and the window, --base DIR reads its base's")
                         : hints.beside_gives_none));
    auto parsed = LoadLitConfig(file);
    if (!parsed) return Fail(parsed.error());
    InferredConfig config;
    config.config = *parsed;
    config.notes.push_back(config.config.family + " (lit-gpt) from " + file);
    if (!files.choice.empty()) config.notes.push_back(files.choice);
    ReadOfficialBeta(weights, Format::Lit, hints, &config);
    return config;
}

Result<FoundModel> LoadWeights(const std::string& path, at::Device device, const ConfigHints& hints, at::ScalarType compute,
                               bool keep_bf16 = false, const AdmitConfig& admit = {}) {
    auto files = FindModelFiles(path);
    if (!files) return Fail(files.error());
    // Named, so never ignored: a tokenizer folder that is there, a config that is a file, else a
    // one-line error naming the flag (not GPT-2's tokenizer, not a bare path).
    if (Status s = CheckHintFiles(hints); !s) return Fail(s.error());
    if (!hints.tokenizer_dir.empty()) files->dir = hints.tokenizer_dir;
    auto weights = OpenWeights(files->weights);
    if (!weights) return Fail(weights.error());
    if (Status layout = ChooseLayout(*files, hints, &*weights); !layout) return Fail(layout.error());
    InferredConfig config;
    const ShapeSource source = ShapeSourceOf(*files, *weights, hints);
    if (source == ShapeSource::LitConfig) {
        auto lit = LitConfigFor(*files, *weights, hints);
        if (!lit) return Fail(lit.error());
        config = std::move(*lit);
    } else if (source == ShapeSource::ConfigJson) {
        // A lit_config.json beside nanoGPT's names: the official GPT-2 code's (nanoGPT's GPTConfig,
        // which its fine-tune scripts require beside lit_model.pth).
        const std::string file = !hints.config_file.empty() ? hints.config_file : !files->config.empty() ? files->config : files->lit_config;
        if (file == files->lit_config) config.notes.push_back("lit_config.json read as nanoGPT's GPTConfig (the official GPT-2's)");
        auto parsed = LoadConfig(file);
        if (!parsed) return Fail(parsed.error());
        config.config = *parsed;
        bool beta_read = true;  // --query-form says how an official attn.beta reads
        if (!parsed->hf_model_type.empty()) {  // an HF folder of a RoPE family
            config.notes.push_back(parsed->family + " (HF model_type " + parsed->hf_model_type + ") from " + file);
            ReadOfficialBeta(*weights, FormatOf(*parsed), hints, &config);
        } else if (weights->Find(LayerName(GetFormat(Format::NanoGpt).attention, 0) + "." + kOfficialBeta)) {
            // The official GPT-2 (lit_gpt/gpt_2_PTS.py): nanoGPT's names with attn.beta a layer.
            config.notes.push_back("GPT-2 from " + file);
            ReadOfficialBeta(*weights, Format::NanoGpt, hints, &config);
        } else {
            beta_read = false;
        }
        NoteUnusedShapeFlags(hints, beta_read, file, &config);
    } else {
        auto inferred = InferConfig(*weights, hints);
        if (!inferred) return Fail(files->weights + ": " + inferred.error());
        config = std::move(*inferred);
        config.notes.insert(config.notes.begin(), "no config.json: shape inferred from the tensors");
    }
    if (hints.without_temperatures && config.config.IsSsa()) {
        config.config.query = config.config.value = TemperatureForm{};
        config.notes.push_back("read without temperatures (tau = 1): the base of a fine-tune whose config names them");
    }
    if (admit)
        if (Status s = admit(config.config); !s) return Fail(s.error());
    auto gpt = LoadSsaGpt(config.config, *weights, device, compute, keep_bf16);
    if (!gpt) return Fail(files->weights + ": " + gpt.error());
    if (!hints.without_temperatures)
        for (const std::string& name : gpt->unused_tensors)
            if (IsTemperatureTensor(name))
                return Fail(EscapeForMessage(files->weights) + ": holds temperature tensors its config does not read (" + Quoted(name) +
                            "); the config's \"ssa\" block (or --query-form / --value-form) names their forms");
    gpt->weights_path = files->weights;
    gpt->weights_format = weights->format;
    std::set<std::string> dtypes;
    for (const auto& t : weights->tensors) dtypes.insert(ToString(t.dtype));
    for (const auto& d : dtypes) gpt->stored_dtype += (gpt->stored_dtype.empty() ? "" : "+") + d;
    if (!weights->state_dict_path.empty() && weights->state_dict_path != "the top level")
        config.notes.push_back("state dict found at " + weights->state_dict_path);
    config.notes.insert(config.notes.begin(), hints.notes.begin(), hints.notes.end());
    gpt->notes.insert(gpt->notes.begin(), config.notes.begin(), config.notes.end());
    return FoundModel{std::move(*files), std::move(*gpt)};
}

// GPT-2's own vocabulary ships with ssaviz; a GPT-2 checkpoint without tokenizer files whose
// vocabulary has GPT-2's size (nanoGPT pads it to 50,304) gets it.
// The folder's own tokenizer files, whatever state they are in (broken is an error naming the
// file); only a GPT-2 folder with none at all and GPT-2's vocab_size gets GPT-2's bundled tokenizer
// (lit-gpt pads Pythia's 50,254 to 50,304 too: GPT-NeoX's tokenizer has other ids, so another
// family's is never GPT-2's). `source` says which, for `info` and the Model panel.
Result<std::unique_ptr<Tokenizer>> LoadTokenizerFor(const std::string& dir, const ModelConfig& config, std::string* source,
                                                    std::vector<std::string>* notes, const std::string& beside_gives_none) {
    *source = TokenizerFilesIn(dir);
    if (source->empty() && config.family != "gpt2")
        return Fail("model folder '" + EscapeForMessage(dir) + "' has no tokenizer files, and a " + EscapeForMessage(config.family) +
                    " model's tokenizer is its own: pass --tokenizer DIR, its base model's folder (the official fine-tune scripts keep "
                    "the tokenizer there)" +
                    (beside_gives_none.empty() ? std::string(", or in export and the window --base DIR, which reads the base's")
                                               : "; " + beside_gives_none));
    if (!source->empty() || (config.vocab_size != 50257 && config.vocab_size != 50304)) return LoadTokenizer(dir);
    const fs::path exe = ExecutableDir();
    for (const fs::path& candidate : {exe / ".." / "assets" / "tokenizers" / "gpt2", exe / "models" / "default"}) {
        if (!fs::exists(candidate / "vocab.json")) continue;
        auto gpt2 = LoadGpt2Tokenizer((candidate / "vocab.json").string(), (candidate / "merges.txt").string());
        if (gpt2) notes->push_back("no tokenizer files: GPT-2's (vocab_size " + std::to_string(config.vocab_size) + ")");
        *source = "GPT-2's, bundled: the folder has no tokenizer files";
        return gpt2;
    }
    return LoadTokenizer(dir);
}

}  // namespace

ConfigHints HintsBeside(const ConfigHints& given, const std::string& path, const std::string& model) {
    ConfigHints hints = given;
    hints.notes.clear();  // the fine-tune's own (what it read from this base)
    hints.beside_gives_none.clear();
    auto files = FindModelFiles(path);
    if (!files) return hints;  // its loading says what is wrong with it
    if (!files->lit_config.empty() || !files->config.empty()) hints.config_file.clear();
    if (!TokenizerFilesIn(files->dir).empty()) {
        hints.tokenizer_dir.clear();
    } else if (hints.tokenizer_dir.empty() && !model.empty()) {  // the fine-tune's, which the comparison needs anyway
        auto theirs = FindModelFiles(model);
        if (theirs && !TokenizerFilesIn(theirs->dir).empty()) {
            hints.tokenizer_dir = theirs->dir;
            hints.notes.push_back("tokenizer: the fine-tune's, from '" + EscapeForMessage(theirs->dir) + "' (this folder has none)");
        } else {
            hints.beside_gives_none = "the fine-tune beside it has none either";
        }
    }
    return hints;
}

ConfigHints HintsFromBase(const ConfigHints& given, const std::string& path, const std::string& base) {
    ConfigHints hints = given;
    if (base.empty()) return hints;
    auto mine = FindModelFiles(path);
    if (!mine) return hints;  // its loading says what is wrong with it
    const bool lacks_tokenizer = hints.tokenizer_dir.empty() && TokenizerFilesIn(mine->dir).empty();
    const bool lacks_config = hints.config_file.empty() && mine->config.empty() && mine->lit_config.empty();
    if (!lacks_tokenizer && !lacks_config) return hints;
    // A base that gives none of what the model lacks is said in the model's refusal, with why (the
    // model opens before its base, so the base's own error would never come).
    const std::string named = "the base " + Quoted(base);
    auto theirs = FindModelFiles(base);
    if (!theirs) {
        hints.beside_gives_none = named + " gives none: " + theirs.error();
        return hints;
    }
    std::vector<std::string> none;
    if (lacks_tokenizer) {
        if (!TokenizerFilesIn(theirs->dir).empty()) {
            hints.tokenizer_dir = theirs->dir;
            hints.notes.push_back("tokenizer: the base's, from '" + EscapeForMessage(theirs->dir) + "' (the model's folder has none)");
        } else {
            none.push_back("no tokenizer files");
        }
    }
    if (lacks_config) {
        if (!theirs->lit_config.empty()) {
            hints.config_file = theirs->lit_config;
            hints.notes.push_back("config: the base's, '" + EscapeForMessage(theirs->lit_config) + "' (the model's folder has none)");
        } else {
            none.push_back("no lit_config.json");
        }
    }
    if (!none.empty())
        hints.beside_gives_none = named + " has " + (none.size() == 2 ? none[0] + " and " + none[1] : none[0]) + " either" +
                                  (lacks_config && theirs->lit_config.empty() && !theirs->config.empty()
                                       ? " (its config.json is Hugging Face's, not a lit-gpt checkpoint's)"
                                       : "");
    return hints;
}

bool IsTemperatureTensor(const std::string& name) {
    return name.find(".ssa_") != std::string::npos || (name.size() > 5 && name.compare(name.size() - 5, 5, ".beta") == 0);
}

Result<SsaGpt> LoadSsaGptFolder(const std::string& path, at::Device device, const ConfigHints& hints, at::ScalarType compute) {
    auto found = LoadWeights(path, device, hints, compute);
    if (!found) return Fail(found.error());
    return std::move(found->gpt);
}

// tau_q's position term per layer, read from the weights (see TemperatureSlope).
static std::vector<TemperatureSlope> QuerySlopes(const SsaGpt& gpt) {
    std::vector<TemperatureSlope> out;
    const PositionForm form = gpt.config.query.position;
    if (form == PositionForm::None) return out;
    for (const LayerWeights& layer : gpt.layers) {
        if (!layer.q.pos.defined()) return {};
        const at::Tensor beta = layer.q.pos.detach().to(at::kCPU, at::kFloat).reshape({-1}).contiguous();
        const at::Tensor s = form == PositionForm::Sigmoid ? at::sigmoid(beta) : form == PositionForm::ExpExp ? at::exp(-at::exp(beta)) : beta;
        TemperatureSlope slope;
        slope.beta.assign(beta.data_ptr<float>(), beta.data_ptr<float>() + beta.numel());
        slope.s.assign(s.data_ptr<float>(), s.data_ptr<float>() + s.numel());
        out.push_back(std::move(slope));
    }
    return out;
}

Result<LoadedModel> LoadModel(const std::string& path, at::Device device, const ConfigHints& hints, at::ScalarType compute,
                              bool keep_bf16, const AdmitConfig& admit) {
    auto found = LoadWeights(path, device, hints, compute, keep_bf16, admit);
    if (!found) return Fail(found.error());
    const ModelConfig& config = found->gpt.config;
    // Named, so never replaced by GPT-2's, and said as the flag (it was called a "model folder").
    if (!hints.tokenizer_dir.empty() && TokenizerFilesIn(hints.tokenizer_dir).empty())
        return Fail("--tokenizer '" + EscapeForMessage(hints.tokenizer_dir) +
                    "' holds no tokenizer files (tokenizer.json, tokenizer.model, or vocab.json and merges.txt)");
    std::string tokenizer_source;
    auto tokenizer = LoadTokenizerFor(found->files.dir, config, &tokenizer_source, &found->gpt.notes, hints.beside_gives_none);
    if (!tokenizer) return Fail(tokenizer.error());
    // Another folder's (--tokenizer, or a base's read beside it): whose, in `info` and the Model panel.
    if (!hints.tokenizer_dir.empty()) tokenizer_source += " in '" + EscapeForMessage(hints.tokenizer_dir) + "'";
    if ((*tokenizer)->VocabSize() > static_cast<size_t>(config.vocab_size))
        return Fail(path + ": tokenizer has " + std::to_string((*tokenizer)->VocabSize()) + " tokens but the model's vocab_size is " +
                    std::to_string(config.vocab_size));

    LoadedModel m;
    m.gpt = std::move(found->gpt);
    m.tokenizer = std::move(*tokenizer);
    m.info.dir = path;
    m.info.config = m.gpt.config;
    m.info.parameters = m.gpt.ParameterCount();
    m.info.layout = m.gpt.layout;
    m.info.device = device.str();
    m.info.compute_dtype = compute == at::kFloat ? "f32" : compute == at::kBFloat16 ? "bf16" : "f16";
    m.info.tokenizer_kind = m.tokenizer->Kind();
    m.info.tokenizer_vocab = m.tokenizer->VocabSize();
    m.info.tokenizer_source = tokenizer_source;
    m.info.unused_tensors = m.gpt.unused_tensors;
    m.info.weights_path = m.gpt.weights_path;
    m.info.weights_format = m.gpt.weights_format;
    m.info.stored_dtype = m.gpt.stored_dtype;
    m.info.notes = m.gpt.notes;
    m.info.settings = ComputeSettings(device);
    m.info.query_slopes = QuerySlopes(m.gpt);
    return m;
}

Status WriteRandomModel(const ModelConfig& config, uint64_t seed, const std::string& tokenizer_dir, const std::string& out_dir, Dtype storage,
                        Layout layout) {
    // The model first: nothing is written into out_dir unless it was built.
    auto tokenizer = LoadTokenizer(tokenizer_dir);
    if (!tokenizer) return Fail(tokenizer.error());
    ModelConfig c = config;
    c.vocab_size = static_cast<int>((*tokenizer)->VocabSize());
    SsaGpt gpt;
    try {
        gpt = RandomSsaGpt(c, seed);
    } catch (const std::exception& e) {  // LibTorch's allocation failed: the model does not fit in memory
        return Fail("cannot make a random model of " + std::to_string(c.n_layer) + " layers, width " + std::to_string(c.n_embd) +
                    " and " + std::to_string(c.vocab_size) + " tokens: " + EscapeForMessage(e.what()).substr(0, 120));
    }
    // The tokenizer's files, read whole first (bounded, regular files only): the model's folder gets
    // the ones the tokenizer was read from (GPT-2's pair, a tokenizer.json or a tokenizer.model).
    std::vector<std::pair<std::string, std::string>> files;
    std::error_code ec;
    for (const char* name : {"vocab.json", "merges.txt", "tokenizer.json", "tokenizer.model", "tokenizer_config.json"}) {
        const fs::path from = fs::path(tokenizer_dir) / name;
        if (!fs::exists(from, ec)) continue;  // a link to nothing, as absent
        auto bytes = ReadFile(from.string(), kMaxTokenizerFileBytes);
        if (!bytes) return Fail(bytes.error());
        files.emplace_back(name, std::move(*bytes));
    }
    const bool existed = fs::exists(fs::symlink_status(out_dir, ec));
    if ((ec = MakeFolders(out_dir))) return Fail(out_dir + ": cannot create (" + ec.message() + ")");
    // Each file to a new name, renamed over its place: a link there is replaced, never written through.
    Status s = Ok{};
    for (const auto& [name, bytes] : files)
        if (s) s = WriteFileAtomically((fs::path(out_dir) / name).string(), bytes);
    if (s) s = SaveModelFolder(gpt, out_dir, storage, layout);
    if (!s && !existed) ::rmdir(out_dir.c_str());  // --out as it was: a folder made here goes again (when nothing else is in it)
    return s;
}

}  // namespace model
