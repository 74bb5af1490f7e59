// The flag table, then what reads it: the parser, the keyword form, the command-line writer,
// sessions and the help.
//
// Index:
//   [SECTION] Numbers, lists and quoting
//   [SECTION] Helpers the rows share
//   [SECTION] The commands
//   [SECTION] The table
//   [SECTION] Parsing and applying
//   [SECTION] Writing a command line back
//   [SECTION] Sessions: the flags a session file keeps
//   [SECTION] Help
#include "app/export/flags.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "app/core/examples.h"
#include "model/arch/arch.h"
#include "model/io/files.h"
#include "model/nn/runtime.h"
#include "viz/figure.h"

namespace app {

//-----------------------------------------------------------------------------
// [SECTION] Numbers, lists and quoting
//-----------------------------------------------------------------------------

// Only an optional '-' and decimal digits: strtoll alone would also take leading spaces and '+'.
std::optional<long long> ParseInteger(const std::string& text, long long lo, long long hi) {
    const size_t digits = text.size() > 0 && text[0] == '-' ? 1 : 0;
    if (text.size() == digits || text.size() > 40 || text.find_first_not_of("0123456789", digits) != std::string::npos) return std::nullopt;
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (end != text.c_str() + text.size() || errno == ERANGE || v < lo || v > hi) return std::nullopt;
    return v;
}

std::optional<double> ParseReal(const std::string& text, double lo, double hi) {
    if (text.empty() || text.size() > 64 || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
    // Decimal only: strtod also takes hex floats ("0x10" is 16), "inf" and "nan".
    if (text.find_first_not_of("0123456789.eE+-") != std::string::npos) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || !std::isfinite(v) || v < lo || v > hi) return std::nullopt;
    return v;
}

std::string QuoteForMessage(const std::string& text) { return "'" + model::EscapeForMessage(text, 40) + "'"; }

std::optional<std::vector<std::string>> SplitList(const std::string& text) {
    std::vector<std::string> out;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');) {
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        out.push_back(std::move(item));
    }
    if (std::all_of(out.begin(), out.end(), [](const std::string& item) { return item.empty(); })) return std::nullopt;
    return out;
}

std::string TerminalText(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    auto escape = [&](unsigned char c) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02X", c);
        out += buf;
    };
    const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
    for (size_t i = 0; i < text.size();) {
        const unsigned char c = byte(i);
        if (c < 0x80) {
            if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) escape(c);
            else out += static_cast<char>(c);
            ++i;
            continue;
        }
        // A whole UTF-8 character is kept, save the C1 controls (U+0080..U+009F, CSI among them);
        // a byte of no character (which a byte-level decoder can leave) is escaped alone, since a
        // terminal that is not UTF-8 reads 0x9B as CSI.
        const size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        bool whole = n > 0 && i + n <= text.size();
        for (size_t k = 1; whole && k < n; ++k) whole = (byte(i + k) & 0xC0) == 0x80;
        if (!whole) {
            escape(c);
            ++i;
        } else if (c == 0xC2 && byte(i + 1) <= 0x9F) {
            escape(byte(i + 1));
            i += 2;
        } else if (const char32_t code = model::DecodeUtf8(text, i).code_point; model::IsHiddenControl(code)) {
            char buf[12];
            std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(code));  // a bidirectional control: reorders what follows
            out += buf;
            i += n;
        } else {
            out.append(text.substr(i, n));
            i += n;
        }
    }
    return out;
}

model::Result<std::vector<int>> ParseIndexList(const std::string& text, const std::string& flag) {
    std::vector<int> out;
    if (text == "all") return out;
    const auto items = SplitList(text);
    if (!items) return model::Fail(flag + " is empty (expected all or a list like 0,2)");
    std::set<int> seen;
    const std::string named = !flag.empty() && flag.back() == ':' ? flag : flag + ":";  // a session's key comes as "'export.layers':"
    for (const std::string& item : *items) {
        // Negative and too large indices pass: the check against the model names them.
        const auto v = ParseInteger(item, INT_MIN, INT_MAX);
        const bool digits = item.find_first_not_of("0123456789", item[0] == '-') == std::string::npos && item.size() > (item[0] == '-');
        if (!v && digits) return model::Fail(named + " " + QuoteForMessage(item) + " is out of range: no model has that many");
        if (!v) return model::Fail(named + " " + QuoteForMessage(item) + " is not a whole number (expected all or a list like 0,2)");
        // A repeat would write the same files again: each index counts once, in the order first given.
        if (seen.insert(static_cast<int>(*v)).second) out.push_back(static_cast<int>(*v));
    }
    return out;
}

std::string FormatIndexList(const std::vector<int>& list) {
    std::string out;
    for (size_t k = 0; k < list.size(); ++k) out += (k ? "," : "") + std::to_string(list[k]);
    return out.empty() ? "all" : out;
}

namespace {

std::string ShellQuote(const std::string& s) {
    if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=.,/:@%") == std::string::npos)
        return s;
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

// The shortest decimal that reads back as the same value: 0.3f is "0.3", not "0.30000001".
template <class T>
std::string Shortest(T v) {
    char buf[40];
    for (int digits = 6; digits <= 17; ++digits) {
        std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(v));
        if (static_cast<T>(std::strtod(buf, nullptr)) == v) break;
    }
    return buf;
}

std::string Join(const std::vector<std::string>& parts, const char* separator) {
    std::string out;
    for (size_t k = 0; k < parts.size(); ++k) out += (k ? separator : "") + parts[k];
    return out;
}

std::vector<std::string> Split(const std::string& text, char separator) {
    std::vector<std::string> out;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, separator);) out.push_back(item);
    return out;
}

//-----------------------------------------------------------------------------
// [SECTION] Helpers the rows share
//-----------------------------------------------------------------------------

// A bad value: thrown by a handler, returned as an error by ParseFlags and ApplyFlag.
struct FlagError {
    std::string message;
};
[[noreturn]] void Bad(std::string message) { throw FlagError{std::move(message)}; }

// A path a flag names: an empty one is an error (an empty --screenshot opened the window for good).
std::string PathOf(const FlagValue& v) {
    if (v.text.empty()) Bad(v.name + " is empty: give a path");
    return v.text;
}

// Every integer and real flag goes through these two, which check the range before narrowing and
// quote the value (bounded) when they refuse it.
long long Whole(const FlagValue& v, long long lo, long long hi) {
    const auto n = ParseInteger(v.text, lo, hi);
    if (!n) Bad(v.name + " " + QuoteForMessage(v.text) + " is not a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
    return *n;
}
double Number(const FlagValue& v, double lo, double hi) {
    const auto x = ParseReal(v.text, lo, hi);
    if (!x) Bad(v.name + " " + QuoteForMessage(v.text) + " is not a number from " + Shortest(lo) + " to " + Shortest(hi));
    return *x;
}

// train's numbers.
double TrainNumber(const FlagValue& v, double lo, double hi) {
    const auto x = ParseReal(v.text, lo, hi);
    if (!x) Bad(v.name + " must be a number from " + Shortest(lo) + " to " + Shortest(hi) + ", not " + QuoteForMessage(v.text));
    return *x;
}
int64_t TrainCount(const FlagValue& v, long long hi) {
    const auto n = ParseInteger(v.text, 0, hi);
    if (!n) Bad(v.name + " must be a whole number from 0 to " + std::to_string(hi) + ", not " + QuoteForMessage(v.text));
    return *n;
}

// Counts: widths, steps, sequences. Sizes that need memory are checked against the machine where
// they are used (init-random, train); these bounds only keep the values meaningful.
constexpr long long kMaxCount = 1 << 20;
int Positive(const FlagValue& v, long long hi = kMaxCount) { return static_cast<int>(Whole(v, 1, hi)); }
// Layers and heads: config.json's own limit.
constexpr long long kMaxLayersOrHeads = 1024;
// Threads: at most this many; train and eval also refuse more than the machine's cores.
constexpr long long kMaxThreads = 1024;
// The window's frame counts: a screenshot or benchmark that ends.
constexpr long long kMaxFrames = 100000;
// --big-model: a parameter count (10^13, far above any model a CPU opens).
constexpr long long kMaxBigModel = 10'000'000'000'000;

// A comma list flag's items; an empty list is refused the same way for every flag (a session's
// [] is a list of none).
std::vector<std::string> ListItems(const FlagValue& v) {
    auto items = SplitList(v.text);
    if (!items && v.from_session) return {};
    if (!items) Bad(v.name + " is empty");
    return std::move(*items);
}

model::TemperatureForm Form(const FlagValue& v) {
    auto form = model::ParseFormSpec(v.text);
    if (!form) Bad(v.name + ": " + form.error());
    return *form;
}

// Training asks for both terms, so a new model's form is spelled out in full (opening a checkpoint
// also takes "exp_exp" alone).
model::TemperatureForm TrainForm(const FlagValue& v) {
    const auto commas = std::count(v.text.begin(), v.text.end(), ',');
    if (commas < 1 || commas > 2) Bad(v.name + " " + QuoteForMessage(v.text) + " is not POSITION,TOKEN[,COMBINE]");
    return Form(v);
}

// --highlight-scope model | L (layer L's mean) | L,H (one head). The indices are checked against
// the model once it is open.
void HighlightScope(const FlagValue& v, FigureSettings* fig) {
    if (v.text == "model") {
        fig->highlight_scope = TokenScope::ModelMean;
        return;
    }
    std::vector<int> parts;
    for (const std::string& item : Split(v.text, ',')) {
        const auto n = ParseInteger(item, 0, 1 << 20);
        parts.push_back(n ? static_cast<int>(*n) : -1);
    }
    const bool shape_ok = (parts.size() == 1 || parts.size() == 2) && std::all_of(parts.begin(), parts.end(), [](int p) { return p >= 0; });
    if (!shape_ok) Bad(v.name + " " + QuoteForMessage(v.text) + " is not model, a layer (2) or a layer,head (2,1)");
    fig->highlight_scope = parts.size() == 1 ? TokenScope::LayerMean : TokenScope::Head;
    fig->highlight_head = {parts[0], parts.size() == 2 ? parts[1] : 0};
}

// Writers: a field's value, or none when it is unset or at its default.
std::optional<std::string> On(bool on) { return on ? std::optional<std::string>("") : std::nullopt; }
// A path flag's value: an empty one (an unset $VAR) is a usage error, never the flag left out.
std::string NonEmpty(const FlagValue& v, const char* what) {
    if (v.text.empty()) Bad(v.name + " needs " + what + ", not an empty path");
    return v.text;
}

std::optional<std::string> IfSet(const std::optional<std::string>& v) { return v; }
template <class T>
std::optional<std::string> IfSet(const std::optional<T>& v) {
    if (!v) return std::nullopt;
    if constexpr (std::is_floating_point_v<T>) return Shortest(*v);
    else return std::to_string(*v);
}
std::optional<std::string> IfSet(const std::optional<model::TemperatureForm>& form) {
    return form ? std::optional(model::FormSpec(*form)) : std::nullopt;
}
template <class T>
std::optional<std::string> Unless(const T& v, const T& fallback) {
    if (v == fallback) return std::nullopt;
    if constexpr (std::is_floating_point_v<T>) return Shortest(v);
    else if constexpr (std::is_same_v<T, std::string>) return v;
    else return std::to_string(v);
}

//-----------------------------------------------------------------------------
// [SECTION] The commands
//-----------------------------------------------------------------------------

struct CommandSpec {
    Command command;
    const char* name;
    const char* summary;  // under its usage line
};

const CommandSpec kCommands[] = {
    {Command::Window, "window", "opens the inspector window on the model and text (the default: no command)"},
    {Command::Info, "info", "prints the model's shape, temperature forms, tokenizer and weights"},
    {Command::Tokenize, "tokenize", "prints the text's tokens: index, id, byte range and piece"},
    {Command::Export, "export", "writes the analysis of a text to --out: JSON, .npy, per-head CSV, PNG / SVG figures, an HTML highlight"},
    {Command::Generate, "generate",
     "prints the continuation: greedy at --temperature 0 (the default), else sampled from softmax(logits / X) over the K most likely"},
    {Command::InitRandom, "init-random", "writes a model with random weights and the paper's temperature forms"},
    {Command::Train, "train", "trains an SSA model and its vanilla twin on the same batches: DIR/ssa, DIR/vanilla, DIR/checkpoint"},
    {Command::Eval, "eval", "re-scores a trained model on its task (from train.json)"},
};

const CommandSpec& Spec(Command command) {
    for (const CommandSpec& c : kCommands)
        if (c.command == command) return c;
    return kCommands[0];
}

}  // namespace

const char* CommandName(Command command) { return Spec(command).name; }

std::optional<Command> FindCommand(const std::string& name) {
    for (const CommandSpec& c : kCommands)
        if (name == c.name) return c.command;
    return std::nullopt;
}

bool Flag::Takes(Command command) const { return std::find(commands.begin(), commands.end(), command) != commands.end(); }

CommandOptions::CommandOptions() { export_options.png = export_options.svg = export_options.html = true; }  // all but csv

//-----------------------------------------------------------------------------
// [SECTION] The table
//-----------------------------------------------------------------------------

namespace {

using C = Command;
using Handler = std::function<void(CommandOptions&, const FlagValue&)>;
using Writer = std::function<std::optional<std::string>(const CommandOptions&)>;

// A row, with the rarer fields set after it: Row(...).Required({...}).Group("text").
struct Row : Flag {
    Row(std::vector<std::string> names_, std::string hint_, std::vector<Command> commands_, std::string help_, Handler handler_,
        Writer write_ = nullptr) {
        names = std::move(names_);
        hint = std::move(hint_);
        commands = std::move(commands_);
        help = std::move(help_);
        handler = std::move(handler_);
        write = std::move(write_);
    }
    Row&& Required(std::vector<Command> c) && { required = std::move(c); return std::move(*this); }
    Row&& InGroup(std::string g) && { group = std::move(g); return std::move(*this); }
    Row&& StandsFor(std::string g) && { stands_for = std::move(g); return std::move(*this); }
    Row&& NotWith(std::vector<std::string> names, std::string why) && {
        not_with = std::move(names);
        not_with_why = std::move(why);
        return std::move(*this);
    }
    Row&& Detail() && { in_synopsis = false; return std::move(*this); }
    Row&& InSession(SessionKey key) && { session = std::move(key); return std::move(*this); }
};

// --layers and --heads of an export: which heads get per-head files.
Row HeadListRow(const char* name, const char* hint, const char* help, std::vector<int> ExportOptions::*list, const char* key) {
    return Row({name}, hint, {C::Export}, help,
               [list](CommandOptions& o, const FlagValue& v) {
                   auto parsed = ParseIndexList(v.text, v.name);
                   if (!parsed) Bad(parsed.error());
                   o.export_options.*list = std::move(*parsed);
               },
               [list](const CommandOptions& o) { return std::optional(FormatIndexList(o.export_options.*list)); })
        .InSession({key, Kept::Indices});
}

std::vector<std::string> MapNames(const std::vector<MapMode>& maps) {
    std::vector<std::string> names;
    for (MapMode m : maps) names.push_back(ToString(m));
    return names;
}

// A session keeps the maps as they are, none ticked too.
SessionKey ExactMaps() {
    SessionKey k("export.maps", Kept::Names);
    k.write = [](const CommandOptions& o) { return std::optional(Join(MapNames(o.export_options.maps), ",")); };
    return k;
}

SessionKey ScopeAndHead() {
    SessionKey k("export.highlight_scope", Kept::Scope);
    k.head_key = "export.highlight_head";
    return k;
}

// A window benchmark's count (of characters, frames or heads); 0: off.
Row BenchRow(const char* name, const char* help, int LaunchOptions::*count) {
    return Row({name}, "N", {C::Window}, help, [count](CommandOptions& o, const FlagValue& v) { o.window.*count = Positive(v, kMaxFrames); },
               [count](const CommandOptions& o) { return Unless(o.window.*count, 0); })
        .Detail();
}

// A count of a new model (init-random, train), unset until given: the command's default then.
Row CountRow(const char* name, std::vector<Command> commands, const char* help, std::optional<int> NewModelOptions::*count) {
    return Row({name}, "N", std::move(commands), help, [count](CommandOptions& o, const FlagValue& v) { o.new_model.*count = Positive(v); },
               [count](const CommandOptions& o) { return IfSet(o.new_model.*count); });
}

const std::vector<Command> kModel = {C::Window, C::Info, C::Tokenize, C::Export, C::Generate};
const std::vector<Command> kText = {C::Window, C::Tokenize, C::Export, C::Generate};

// init-random's families and layouts, from model/arch's tables: "pythia: GPT-NeoX: ...; llama: ...".
std::string FamilyHelp() {
    std::vector<std::string> rows;
    for (const model::Family& f : model::Families())
        if (f.preset) rows.push_back(std::string(f.name) + ": " + f.about);
    return Join(rows, "; ");
}
std::string LayoutHelp() {
    std::vector<std::string> rows;
    for (const model::LayoutInfo& l : model::Layouts()) rows.push_back(std::string(l.name) + ": " + l.about);
    return Join(rows, "; ");
}

std::vector<Flag> BuildTable() {
    std::vector<Flag> t;
    auto add = [&](Row&& row) { t.push_back(std::move(row)); };

    add(Row({"--help", "-h"}, "", {C::Window, C::Info, C::Tokenize, C::Export, C::Generate, C::InitRandom, C::Train, C::Eval},
            "prints this help", [](CommandOptions& o, const FlagValue&) { o.help = true; })
            .Detail());

    // The model.
    add(Row({"--model"}, "DIR", {C::Window, C::Info, C::Tokenize, C::Export, C::Generate, C::Eval},
            "a model folder (config.json + model.safetensors or pytorch_model.bin, or a lone checkpoint) or a torch.save "
            "checkpoint file (.pt / .pth / .bin / .ckpt); default: $SSAVIZ_MODEL, else the bundled model. eval: a folder ssaviz train wrote",
            [](CommandOptions& o, const FlagValue& v) { o.model_dir = v.text; }, [](const CommandOptions& o) { return IfSet(o.model_dir); })
            .Required({C::Eval})
            .InSession({"model"}));
    // The bundled examples' ids, as the synopsis spells them: english|licenses|... (none in a build without assets).
    std::string example_ids;
    for (const Example& x : BundledExamples()) example_ids += (example_ids.empty() ? "" : "|") + x.id;
    add(Row({"--example"}, example_ids.empty() ? "ID" : example_ids, kModel,
            "a bundled model with its twin (a fine-tune: its base) and its text, as the Examples menu opens them; export compares "
            "with that twin or base (a run's example: --run and --compare-run), the others take the model (a run's: its last step); "
            "--text or --text-file: on that text instead",
            [](CommandOptions& o, const FlagValue& v) {
                std::string ids;
                bool found = false;
                for (const Example& x : BundledExamples()) {
                    ids += (ids.empty() ? "" : ", ") + x.id;
                    found |= x.id == v.text;
                }
                if (!found) Bad(v.name + " " + QuoteForMessage(v.text) + " is not one of the bundled examples (" + (ids.empty() ? "none found" : ids) + ")");
                o.example = v.text;
            },
            [](const CommandOptions& o) { return Unless(o.example, std::string()); })
            .StandsFor("text")
            // A flag naming another model or comparison would be lost under the example's (--text is kept).
            .NotWith({"--model", "--run", "--compare-run", "--session", "--base", "--compare", "--config", "--tokenizer"},
                     "opens a bundled model with its twin or base"));
    add(Row({"--device"}, "auto|cpu|cuda[:N]", kModel, "where the model runs (auto: the GPU when there is one; cuda:N: GPU N, from 0)",
            [](CommandOptions& o, const FlagValue& v) {
                if (!model::ParseDeviceName(v.text)) Bad(v.name + " " + QuoteForMessage(v.text) + " is not one of " + model::kDeviceNames);
                o.device = v.text;
            },
            [](const CommandOptions& o) { return o.device && *o.device != "auto" ? o.device : std::nullopt; })
            .InSession({"device", Kept::Text, "auto"}));
    add(Row({"--dtype"}, "f32|bf16|f16", kModel,
            "what the forward pass computes in (default f32; f16 needs CUDA); maps are float32 either way",
            [](CommandOptions& o, const FlagValue& v) {
                // Spelt right here (load_run checks its flags at once); the engine checks it against the device.
                if (v.text != "f32" && v.text != "bf16" && v.text != "f16") Bad(v.name + " " + QuoteForMessage(v.text) + " is not one of f32, bf16, f16");
                o.dtype = v.text;
            },
            [](const CommandOptions& o) { return Unless(o.dtype, std::string("f32")); })
            .Detail());
    add(Row({"--n-head"}, "N", kModel, "a checkpoint without config.json: its number of heads",
            [](CommandOptions& o, const FlagValue& v) { o.hints.n_head = Positive(v, kMaxLayersOrHeads); },
            [](const CommandOptions& o) { return Unless(o.hints.n_head, 0); })
            .Detail());
    add(Row({"--query-form"}, "POSITION,TOKEN[,COMBINE]", kModel,
            "a checkpoint without config.json: its tau_q form (POSITION: sigmoid|exp_exp|linear|none, TOKEN: shared|feature|none, "
            "COMBINE: sum|product)",
            [](CommandOptions& o, const FlagValue& v) { o.hints.query = Form(v); },
            [](const CommandOptions& o) { return IfSet(o.hints.query); })
            .Detail());
    add(Row({"--value-form"}, "POSITION,TOKEN[,COMBINE]", kModel, "a checkpoint without config.json: its tau_v form",
            [](CommandOptions& o, const FlagValue& v) { o.hints.value = Form(v); },
            [](const CommandOptions& o) { return IfSet(o.hints.value); })
            .Detail());
    add(Row({"--activation"}, "gelu|gelu_new", kModel, "a checkpoint without config.json: its MLP activation",
            [](CommandOptions& o, const FlagValue& v) {
                if (v.text != "gelu" && v.text != "gelu_new") Bad(v.name + " " + QuoteForMessage(v.text) + " is not gelu or gelu_new");
                o.hints.activation = v.text == "gelu" ? model::Activation::Gelu : model::Activation::GeluNew;
            },
            [](const CommandOptions& o) {
                return o.hints.activation ? std::optional<std::string>(model::ToString(*o.hints.activation)) : std::nullopt;
            })
            .Detail());

    add(Row({"--config"}, "FILE", kModel,
            "a lit-gpt checkpoint's config (lit_config.json, or the official SSA code's partial configs/*.json; missing fields take "
            "lit-gpt's defaults) when it is not beside the weights; or a config.json",
            [](CommandOptions& o, const FlagValue& v) { o.hints.config_file = NonEmpty(v, "a file"); },
            [](const CommandOptions& o) { return Unless(o.hints.config_file, std::string()); }));
    add(Row({"--tokenizer"}, "DIR", kModel, "where the model's tokenizer files are, when they are not beside the weights",
            [](CommandOptions& o, const FlagValue& v) { o.hints.tokenizer_dir = NonEmpty(v, "a folder"); },
            [](const CommandOptions& o) { return Unless(o.hints.tokenizer_dir, std::string()); }));

    // The text.
    add(Row({"--text"}, "STR", kText, "the text to analyse",
            [](CommandOptions& o, const FlagValue& v) { o.text = v.text; }, [](const CommandOptions& o) { return IfSet(o.text); })
            .InGroup("text")
            .Required({C::Tokenize, C::Export, C::Generate})
            .InSession({"text"}));
    add(Row({"--text-file"}, "F", kText, "the text to analyse, from a UTF-8 file",
            [](CommandOptions& o, const FlagValue& v) { o.text_file = v.text; }, [](const CommandOptions& o) { return IfSet(o.text_file); })
            .InGroup("text")
            .Required({C::Tokenize, C::Export, C::Generate}));
    add(Row({"--truncate"}, "", kText, "a text longer than the model's context: keep its first tokens instead of refusing it",
            [](CommandOptions& o, const FlagValue&) { o.truncate = true; }, [](const CommandOptions& o) { return On(o.truncate); })
            .InSession({"truncate", Kept::Switch}));
    add(Row({"--run"}, "DIR", {C::Export, C::Window},
            "a training run: each checkpoint in DIR (iter-NNNNNN-ckpt.pth beside lit_config.json, or checkpoint-N/ folders) on the "
            "text, one at a time, in step order; --out gets run.json and run.csv (per step: the model's means and every head's "
            "entropy, JS to the comparison, sink mass and mean tau_q; each head's steps to sparsity) and with png/svg the curves "
            "(curves/*.png|svg); a step that fails is named and skipped. The window opens the run's last step and its Run tab: a "
            "step slider, Play, and the curves of the text over every step",
            [](CommandOptions& o, const FlagValue& v) { o.run = v.text; }, [](const CommandOptions& o) { return o.run; })
            .InSession({"run"}));
    add(Row({"--compare-run"}, "DIR", {C::Export, C::Window},
            "with --run: a second run to set beside it step by step (the vanilla run of the same schedule, or another seed); "
            "run.json gets compare_run, run.csv its rows (run = compare), the curves its mean; in the window the Run tab's "
            "curves and steps to sparsity",
            [](CommandOptions& o, const FlagValue& v) { o.compare_run = v.text; }, [](const CommandOptions& o) { return o.compare_run; })
            .InSession({"compare_run"}));
    add(Row({"--steps"}, "all|N,M", {C::Export},
            "with --run: these steps' whole exports too, each in OUT/step-NNNNNN/ (a --compare-run's of the same steps in "
            "OUT/compare-run/step-NNNNNN/; all is the run's steps), as `export --model` writes for that checkpoint alone",
            [](CommandOptions& o, const FlagValue& v) { o.steps = v.text; }, [](const CommandOptions& o) { return o.steps; }));
    add(Row({"--batch"}, "", {C::Export},
            "--text-file holds several texts, one per line, or JSON lines {\"name\": ..., \"text\": ...}; each gets a sub-folder of "
            "--out, and summary.csv / summary.json compare them",
            [](CommandOptions& o, const FlagValue&) { o.batch = true; }, [](const CommandOptions& o) { return On(o.batch); }));
    add(Row({"--out"}, "DIR", {C::Export, C::InitRandom, C::Train}, "the folder to write (made if missing)",
            [](CommandOptions& o, const FlagValue& v) { o.out = v.text; }, [](const CommandOptions& o) { return std::optional(o.out); })
            .Required({C::Export, C::InitRandom, C::Train})
            .InSession({"export.out"}));

    // export
    add(HeadListRow("--layers", "all|0,2", "the layers whose heads get per-head files (heatmaps, CSV)", &ExportOptions::layers, "export.layers"));
    add(HeadListRow("--heads", "all|1,3", "the heads of those layers that get them", &ExportOptions::heads, "export.heads"));
    add(Row({"--format"}, "json,npy,csv,png,svg,html", {C::Export}, "what to write (default: all but csv)",
            [](CommandOptions& o, const FlagValue& v) {
                ClearExportFormats(&o.export_options);
                for (const std::string& f : ListItems(v))
                    if (!EnableExportFormat(&o.export_options, f)) Bad(v.name + " " + QuoteForMessage(f) + " is not one of " + kExportFormatList);
            },
            [](const CommandOptions& o) { return std::optional(Join(ExportFormats(o.export_options), ",")); })
            .InSession({"export.formats", Kept::Names}));
    add(Row({"--maps"}, "ssa,compare,diff[,base,base_diff]", {C::Export},
            "which maps get heatmaps and grids: SSA, the comparison, their difference; with a base (--base DIR) also the base's and SSA - base",
            [](CommandOptions& o, const FlagValue& v) {
                o.export_options.maps.clear();
                for (const std::string& f : ListItems(v)) {
                    auto mode = ParseMapMode(f);
                    if (!mode)
                        Bad(v.name + " " + QuoteForMessage(f) + " is not one of ssa, compare, diff, base, base_diff" +
                            (f == "tau1" || f == "twin" ? " (the comparison's map is 'compare', tau = 1's or a twin's)" : ""));
                    if (std::find(o.export_options.maps.begin(), o.export_options.maps.end(), *mode) == o.export_options.maps.end())
                        o.export_options.maps.push_back(*mode);
                }
            },
            [](const CommandOptions& o) {
                const std::vector<std::string> maps = MapNames(o.export_options.maps);
                return std::optional(maps.empty() ? std::string("ssa") : Join(maps, ","));  // none ticked in the dialog: no --maps says that
            })
            .InSession(ExactMaps()));
    add(Row({"--colormap"}, "viridis|magma", {C::Export}, "the attention maps' colour map (a difference map is always blue-white-red around 0)",
            [](CommandOptions& o, const FlagValue& v) {
                auto map = v.from_session ? ParseSessionColormap(v.text) : ParseColormap(v.text);
                if (!map) Bad(v.name + " " + QuoteForMessage(v.text) + " is not one of viridis, magma");
                o.export_options.figures.colormap = *map;
            },
            [](const CommandOptions& o) { return std::optional<std::string>(viz::ColormapName(o.export_options.figures.colormap)); })
            .InSession({"export.colormap"}));
    add(Row({"--lens"}, "", {C::Export, C::Window},
            "the logit lens and direct logit attribution of SSA and its comparison, a forward pass of each side more: export "
            "writes lens_loss.npy, lens_top.json, dla.npy, dla_mlp.npy, dla_embed.npy, dla_const.npy, dla_logit.npy, dla_divisor.npy, "
            "dla_const_free.npy (and _compare; beside a base _tau1 and _base) and dla_at.json, whatever --format says, and with png / svg "
            "the lens, lens_diff*, dla_heads*, dla_bars and dla_layers figures; with --batch "
            "each text's loss by layer in the summary (lens_loss_0 ..), with --run each step's in run.json, run_lens.csv and the "
            "lens_loss curve (and the --steps exports' lens files); the window runs them once the first analysis is shown (the Lens "
            "tab), with --run each step's loss by layer in the Run tab's timeline too",
            [](CommandOptions& o, const FlagValue&) { o.export_options.lens = o.window.lens = true; },
            [](const CommandOptions& o) { return On(o.export_options.lens || o.window.lens); }));
    add(Row({"--dla-position"}, "N", {C::Export},
            "with --lens, the position whose next token's logit dla_bars and dla_layers split by head and by layer, counted as "
            "dla.npy's last axis and Python's plot(position=): 0 predicts token 1; negative from the end (default -1, the last)",
            [](CommandOptions& o, const FlagValue& v) {
                const auto n = ParseInteger(v.text, -(1LL << 62), 1LL << 62);  // past any text: out of range, said once tokenised
                const std::string unsigned_part = v.text.substr(!v.text.empty() && v.text[0] == '-');  // '+5': no number, as ParseInteger reads it
                const bool digits = !unsigned_part.empty() && unsigned_part.find_first_not_of("0123456789") == std::string::npos;
                if (!n && digits) Bad(v.name + " " + QuoteForMessage(v.text) + " is out of range: a position of the text, negative from the end");
                if (!n) Bad(v.name + " " + QuoteForMessage(v.text) + " is not a position: a whole number, negative from the end");
                o.export_options.dla_position = *n;
            },
            [](const CommandOptions& o) {
                const auto& p = o.export_options.dla_position;
                return p ? std::optional(std::to_string(*p)) : std::nullopt;
            }));
    add(Row({"--dla-target"}, "WHICH", {C::Export},
            "with --lens, whose logit dla_bars and dla_layers split, as the window's Lens tab > Attribute: next (the text's next token, "
            "dla.npy's; the default), top (SSA's top prediction, at the last token too: what comes after the text, the default position "
            "then), next-against-other (the next token's logit less SSA's most likely other token's: above 0 toward the text's); "
            "dla_at.json holds every side's parts of it (the default's too)",
            [](CommandOptions& o, const FlagValue& v) {
                const auto target = ParseLensTarget(v.text);
                if (!target) Bad(v.name + " " + QuoteForMessage(v.text) + " is not one of next, top, next-against-other");
                o.export_options.dla_target = *target;
            },
            [](const CommandOptions& o) {
                const auto& t = o.export_options.dla_target;
                return t ? std::optional(std::string(ToString(*t))) : std::nullopt;
            }));
    add(Row({"--log"}, "", {C::Export}, "heatmaps on a log scale",
            [](CommandOptions& o, const FlagValue&) { o.export_options.figures.log_scale = true; },
            [](const CommandOptions& o) { return On(o.export_options.figures.log_scale); })
            .InSession({"export.log_scale", Kept::Switch}));
    add(Row({"--size"}, "PX", {C::Export},
            "a heatmap's side in pixels, 16 to 8192 (default: 28 px per token for short texts down to 1 px per token from 720 tokens)",
            [](CommandOptions& o, const FlagValue& v) {
                const auto n = ParseInteger(v.text, 16, kMaxMapSize);
                if (!n) Bad(v.name + " " + QuoteForMessage(v.text) + " is not a heatmap side: a whole number of pixels, 16 to " + std::to_string(kMaxMapSize));
                o.export_options.figures.map_size = static_cast<int>(*n);
            },
            [](const CommandOptions& o) { return Unless(o.export_options.figures.map_size, 0); })
            .InSession({"export.size", Kept::Whole, "0"}));
    add(Row({"--png-scale"}, "N", {C::Export},
            "PNG pixels per figure pixel, 1 to 4: every PNG figure drawn N times larger, text and lines as sharp (2 or 3 for print)",
            [](CommandOptions& o, const FlagValue& v) {
                const auto n = ParseInteger(v.text, 1, viz::kMaxPngScale);
                if (!n) Bad(v.name + " " + QuoteForMessage(v.text) + " is not a PNG scale: a whole number, 1 to " + std::to_string(viz::kMaxPngScale));
                o.export_options.figures.png_scale = static_cast<int>(*n);
            },
            [](const CommandOptions& o) { return Unless(o.export_options.figures.png_scale, 1); })
            .InSession({"export.png_scale", Kept::Whole, "1"}));
    add(Row({"--no-titles"}, "", {C::Export},
            "figures without their titles, for a paper whose captions say what they show (each SVG's <title> and the data keep them)",
            [](CommandOptions& o, const FlagValue&) { o.export_options.figures.text.Titles = false; },
            [](const CommandOptions& o) { return On(!o.export_options.figures.text.Titles); })
            .InSession({"export.no_titles", Kept::Switch}));
    add(Row({"--text-scale"}, "X", {C::Export},
            "every figure's text X times its size, 0.5 to 3, the layout made room for it: 1.5 or 2 for a figure set in one column",
            [](CommandOptions& o, const FlagValue& v) {
                o.export_options.figures.text.Scale = static_cast<float>(Number(v, viz::kMinTextScale, viz::kMaxTextScale));
            },
            [](const CommandOptions& o) {
                const float s = o.export_options.figures.text.Scale;
                return s == 1.0f ? std::nullopt : std::optional(Shortest(s));
            })
            .InSession({"export.text_scale", Kept::Real, "1"}));
    add(Row({"--highlight"}, TokenColorKeys("|"), {C::Export},
            "what colours the tokens of the highlight figures (the paper's Figure 1 uses tau_q)",
            [](CommandOptions& o, const FlagValue& v) {
                auto color = ParseTokenColor(v.text);
                if (!color) Bad(v.name + " " + QuoteForMessage(v.text) + " is not one of " + TokenColorKeys());
                o.export_options.figures.highlight = *color;
            },
            [](const CommandOptions& o) { return std::optional<std::string>(ToString(o.export_options.figures.highlight)); })
            .InSession({"export.highlight"}));
    add(Row({"--highlight-scope"}, "model|L|L,H", {C::Export}, "the highlight's values: the model's mean, layer L's mean or one head",
            [](CommandOptions& o, const FlagValue& v) { HighlightScope(v, &o.export_options.figures); },
            [](const CommandOptions& o) {
                const FigureSettings& f = o.export_options.figures;
                switch (f.highlight_scope) {
                    case TokenScope::ModelMean: return std::optional<std::string>("model");
                    case TokenScope::LayerMean: return std::optional(std::to_string(f.highlight_head.layer));
                    case TokenScope::Head: break;
                }
                return std::optional(std::to_string(f.highlight_head.layer) + "," + std::to_string(f.highlight_head.head));
            })
            .InSession(ScopeAndHead()));
    add(Row({"--temperature-scale"}, "model|head", {C::Export},
            "a temperature highlight's colour scale, centred at 1: the same for every head of the model (the default), or "
            "the highlighted head's own (a mean's, its values'), as the window's View > Temperature scale per head",
            [](CommandOptions& o, const FlagValue& v) {
                if (v.text != "model" && v.text != "head") Bad(v.name + " " + QuoteForMessage(v.text) + " is not one of model, head");
                o.export_options.figures.temperature_per_head = v.text == "head";
            },
            [](const CommandOptions& o) { return std::optional<std::string>(o.export_options.figures.temperature_per_head ? "head" : "model"); })
            .InSession({"export.temperature_scale"}));
    add(Row({"--ablate"}, "L:H[,L:*,L:H=pos|tok|xS|q|v]", {C::Export, C::Generate},
            "what-ifs on the SSA side: L:H sets head H of layer L to tau = 1 (L:* every head of L); =pos keeps only tau_q's "
            "position term, =tok only its token term, =xS scales tau_q - 1 by S, =q sets tau_q alone to 1, =v tau_v alone",
            [](CommandOptions& o, const FlagValue& v) {
                ListItems(v);  // the items are read once the model's shape is known
                o.ablate = v.text;
            },
            [](const CommandOptions& o) { return IfSet(o.ablate); })
            .InSession({"interventions"}));
    add(Row({"--compare"}, CompareFlagHint(), {C::Export, C::Window}, CompareFlagHelp(),
            [](CommandOptions& o, const FlagValue& v) {
                // An empty one (an unset $TWIN) was tau = 1, silently.
                if (v.text.empty()) Bad(v.name + " is empty: give vanilla, local, unedited, base or a twin's folder");
                CompareSpec compare = ParseCompare(v.text);
                const bool base_named = o.compare.kind == CompareKind::Base && !o.compare.base_dir.empty();  // --base DIR before it
                if (base_named && compare.kind != CompareKind::Base && compare.kind != CompareKind::Global)
                    Bad(v.name + " " + QuoteForMessage(v.text) + " and --base exclude each other: --base DIR compares with the base (three sides)");
                if (compare.kind == CompareKind::Base && o.compare.kind == CompareKind::Base) compare.base_dir = o.compare.base_dir;
                if (base_named && compare.kind == CompareKind::Global) return;  // vanilla, the default: the base's three sides include tau = 1
                o.compare = compare;
            },
            [](const CommandOptions& o) { return o.compare.kind == CompareKind::Global ? std::nullopt : std::optional(SpellCompare(o.compare)); })
            .InSession({"compare", Kept::Text, SpellCompare({})}));
    add(Row({"--base"}, "DIR", {C::Export, C::Window},
            "a fine-tune's base model (its folder or checkpoint): compares three sides, SSA, its weights at tau = 1 and the base "
            "(--compare base without --base takes the base beside the model)",
            [](CommandOptions& o, const FlagValue& v) {
                // A base with the layer-local, unedited or a twin's comparison would drop one of them.
                if (o.compare.kind != CompareKind::Global && o.compare.kind != CompareKind::Base)
                    Bad("--base and --compare " + QuoteForMessage(SpellCompare(o.compare)) + " exclude each other: --base DIR compares with the base (three sides)");
                o.compare = CompareSpec::Base(PathOf(v));  // empty: it read as the base beside the model
            },
            [](const CommandOptions& o) {
                return o.compare.kind == CompareKind::Base && !o.compare.base_dir.empty() ? std::optional(o.compare.base_dir) : std::nullopt;
            })
            .InSession({"base", Kept::Text, ""}));
    add(Row({"--sink-eps"}, "EPS", {C::Export}, "a head is a sink head when its mean first-token mass is above EPS, in (0, 1) (default 0.3)",
            [](CommandOptions& o, const FlagValue& v) {
                const auto x = ParseReal(v.text, 0, 1);
                const float eps = x ? static_cast<float>(*x) : 0.0f;
                if (!(eps > 0 && eps < 1)) Bad(v.name + " must be a number in (0, 1)");
                o.export_options.sink_epsilon = eps;
            },
            [](const CommandOptions& o) { return std::optional(Shortest(o.export_options.sink_epsilon)); })
            .InSession({"export.sink_epsilon", Kept::Real}));

    // generate
    add(Row({"--tokens"}, "N", {C::Generate}, "how many tokens to append (it stops early when the context is full)",
            [](CommandOptions& o, const FlagValue& v) { o.generate.tokens = static_cast<int>(Whole(v, 1, 100000)); },
            [](const CommandOptions& o) { return Unless(o.generate.tokens, 0); })
            .Required({C::Generate}));
    add(Row({"--temperature"}, "X", {C::Generate}, "0 (the default): the most likely token; above: a draw from softmax(logits / X)",
            [](CommandOptions& o, const FlagValue& v) { o.generate.temperature = static_cast<float>(Number(v, 0, 1000)); },
            [](const CommandOptions& o) { return Unless(o.generate.temperature, 0.0f); }));
    add(Row({"--top-k"}, "K", {C::Generate}, "draw from the K most likely tokens (0, the default: all)",
            [](CommandOptions& o, const FlagValue& v) { o.generate.top_k = static_cast<int>(Whole(v, 0, 1000000000)); },
            [](const CommandOptions& o) { return Unless(o.generate.top_k, 0); }));
    add(Row({"--seed"}, "S", {C::Generate}, "the draws' seed (default 1234): a seed draws the same tokens on every machine",
            [](CommandOptions& o, const FlagValue& v) { o.generate.seed = static_cast<uint64_t>(Whole(v, 0, 1LL << 53)); },
            [](const CommandOptions& o) { return Unless(o.generate.seed, uint64_t{1234}); }));

    // init-random and train: a new model.
    add(Row({"--task"}, "text|graph|passkey", {C::Train},
            "text: UTF-8 files (--data); graph and passkey bring their data; each sets the defaults of the shape and schedule",
            [](CommandOptions& o, const FlagValue& v) {
                if (v.text != "text" && v.text != "graph" && v.text != "passkey") Bad(v.name + " " + QuoteForMessage(v.text) + " is not one of text, graph, passkey");
                o.new_model.task = v.text;
            },
            [](const CommandOptions& o) { return Unless(o.new_model.task, std::string("text")); }));
    add(Row({"--data"}, "PATH[,PATH]", {C::Train, C::Eval},
            "train: UTF-8 files or folders (--task text needs it); eval: data to score on instead of what train.json names",
            [](CommandOptions& o, const FlagValue& v) { o.data = PathOf(v); }, [](const CommandOptions& o) { return Unless(o.data, std::string()); }));
    add(Row({"--tokenizer"}, "DIR", {C::InitRandom, C::Train},
            "tokenizer files to copy into the model (init-random: default GPT-2's; train: default a new SentencePiece BPE of --vocab pieces)",
            [](CommandOptions& o, const FlagValue& v) { o.new_model.tokenizer = NonEmpty(v, "a folder"); },
            [](const CommandOptions& o) { return IfSet(o.new_model.tokenizer); })
            .InGroup("tokenizer"));
    add(Row({"--vocab"}, "N", {C::Train}, "the new tokenizer's pieces (default 4096)",
            // SentencePiece keeps 3 pieces of its own: below 4 no piece is left for the text.
            [](CommandOptions& o, const FlagValue& v) { o.new_model.vocab = static_cast<int>(Whole(v, 4, kMaxCount)); },
            [](const CommandOptions& o) { return IfSet(o.new_model.vocab); })
            .InGroup("tokenizer"));
    add(Row({"--seed"}, "N", {C::InitRandom, C::Train}, "the seed of the weights (train: and of the batches); init-random's default 1234, train's 1",
            [](CommandOptions& o, const FlagValue& v) { o.new_model.seed = static_cast<uint64_t>(Positive(v)); },
            [](const CommandOptions& o) { return IfSet(o.new_model.seed); }));
    // A new model's layers and heads: init-random and train say "at most 1024" themselves.
    add(CountRow("--layers", {C::InitRandom, C::Train}, "layers (init-random's default 4)", &NewModelOptions::layers));
    add(CountRow("--heads", {C::InitRandom, C::Train}, "heads per layer (init-random's default 4)", &NewModelOptions::heads));
    add(Row({"--embd"}, "N", {C::InitRandom}, "the residual width, a multiple of --heads (default 128)",
            [](CommandOptions& o, const FlagValue& v) { o.new_model.embd = Positive(v); },
            [](const CommandOptions& o) { return Unless(o.new_model.embd, 128); }));
    add(Row({"--positions"}, "N", {C::InitRandom}, "the context (default 1024)",
            [](CommandOptions& o, const FlagValue& v) { o.new_model.positions = Positive(v); },
            [](const CommandOptions& o) { return Unless(o.new_model.positions, 1024); }));
    add(Row({"--family"}, model::PresetFamilies("|"), {C::InitRandom}, "the architecture (default gpt2), a row of model/arch's family table: " + FamilyHelp(),
            [](CommandOptions& o, const FlagValue& v) {
                const model::Family* f = model::FindFamily(v.text);
                if (!f || !f->preset) Bad(v.name + " " + QuoteForMessage(v.text) + " is not one of " + model::PresetFamilies(", "));
                o.new_model.family = v.text;
            },
            [](const CommandOptions& o) { return Unless(o.new_model.family, std::string("gpt2")); }));
    add(CountRow("--kv-heads", {C::InitRandom}, "key/value heads (n_query_groups), dividing --heads (1: MQA); default: the family's", &NewModelOptions::kv_heads));
    add(CountRow("--mlp", {C::InitRandom}, "the MLP's width (intermediate size); default: 4 x --embd, or the family's", &NewModelOptions::mlp));
    add(Row({"--rotary"}, "F", {C::InitRandom}, "the fraction of each head RoPE turns, in (0, 1] (pythia's 0.25, the others' 1)",
            [](CommandOptions& o, const FlagValue& v) {
                const auto x = ParseReal(v.text, 0, 1);
                if (!x || !(*x > 0)) Bad(v.name + " must be a number in (0, 1]");
                o.new_model.rotary = *x;
            },
            [](const CommandOptions& o) { return o.new_model.rotary ? std::optional(std::to_string(*o.new_model.rotary)) : std::nullopt; }));
    add(Row({"--rope-base"}, "X", {C::InitRandom}, "RoPE's base (10000; llama3's 500000)",
            [](CommandOptions& o, const FlagValue& v) { o.new_model.rope_base = Number(v, 1, 1e12); },
            [](const CommandOptions& o) {
                return o.new_model.rope_base ? std::optional(std::to_string(*o.new_model.rope_base)) : std::nullopt;
            }));
    add(Row({"--query-form"}, "sigmoid,shared,sum", {C::InitRandom}, "tau_q's form, POSITION,TOKEN[,COMBINE] (default the paper's)",
            [](CommandOptions& o, const FlagValue& v) { o.new_model.random_query_form = Form(v); },
            [](const CommandOptions& o) { return IfSet(o.new_model.random_query_form); }));
    add(CountRow("--width", {C::Train}, "the residual width, a multiple of --heads", &NewModelOptions::width));
    add(CountRow("--context", {C::Train}, "the model's context", &NewModelOptions::context));
    add(Row({"--query-form"}, "sigmoid,shared,sum", {C::Train}, "tau_q's form, POSITION,TOKEN[,COMBINE] (the default is the paper's)",
            [](CommandOptions& o, const FlagValue& v) { o.new_model.query_form = TrainForm(v); },
            [](const CommandOptions& o) { return IfSet(o.new_model.query_form); }));
    add(Row({"--value-form"}, "none,feature,sum", {C::Train}, "tau_v's form, POSITION,TOKEN[,COMBINE]",
            [](CommandOptions& o, const FlagValue& v) { o.new_model.value_form = TrainForm(v); },
            [](const CommandOptions& o) { return IfSet(o.new_model.value_form); }));
    add(CountRow("--steps", {C::Train}, "optimiser steps", &NewModelOptions::steps));
    add(CountRow("--batch", {C::Train}, "sequences per step", &NewModelOptions::batch));
    add(CountRow("--seq-len", {C::Train}, "tokens per sequence (at most the context)", &NewModelOptions::seq_len));
    add(Row({"--lr"}, "X", {C::Train}, "the peak learning rate (AdamW; linear warm-up, then cosine decay to a tenth)",
            [](CommandOptions& o, const FlagValue& v) { o.new_model.lr = TrainNumber(v, 1e-6, 1.0); },
            [](const CommandOptions& o) { return IfSet(o.new_model.lr); }));
    add(Row({"--warmup"}, "N", {C::Train}, "warm-up steps", [](CommandOptions& o, const FlagValue& v) { o.new_model.warmup = TrainCount(v, 10000000); },
            [](const CommandOptions& o) { return IfSet(o.new_model.warmup); }));
    add(Row({"--weight-decay"}, "X", {C::Train}, "on matrices and embeddings",
            [](CommandOptions& o, const FlagValue& v) { o.new_model.weight_decay = TrainNumber(v, 0, 10); },
            [](const CommandOptions& o) { return IfSet(o.new_model.weight_decay); }));
    add(Row({"--eval-every"}, "N", {C::Train}, "steps between evaluations of both models (default: an eighth of --steps; 0: only at the end)",
            [](CommandOptions& o, const FlagValue& v) { o.new_model.eval_every = TrainCount(v, 10000000); },
            [](const CommandOptions& o) { return IfSet(o.new_model.eval_every); }));
    add(Row({"--checkpoint-every"}, "N", {C::Train}, "steps between checkpoints, DIR/checkpoint (default 500)",
            [](CommandOptions& o, const FlagValue& v) { o.new_model.checkpoint_every = Positive(v); },
            [](const CommandOptions& o) { return Unless(o.new_model.checkpoint_every, 500); }));
    add(Row({"--keep-checkpoints"}, "", {C::Train}, "keep each checkpoint's models as a run, DIR/run/ssa and DIR/run/vanilla (checkpoint-N/, from step 0)",
            [](CommandOptions& o, const FlagValue&) { o.new_model.keep_checkpoints = true; },
            [](const CommandOptions& o) { return On(o.new_model.keep_checkpoints); }));
    add(Row({"--resume"}, "", {C::Train}, "continue from DIR/checkpoint, bit for bit",
            [](CommandOptions& o, const FlagValue&) { o.new_model.resume = true; }, [](const CommandOptions& o) { return On(o.new_model.resume); }));
    add(Row({"--from"}, "DIR", {C::Train},
            "fine-tune: both models start from this vanilla GPT-2-shaped model (its shape, weights and tokenizer, or --tokenizer's; the SSA model "
            "adds temperatures), written beside them as DIR/base for --compare base",
            [](CommandOptions& o, const FlagValue& v) {
                o.new_model.from = NonEmpty(v, "a model folder");
            },
            [](const CommandOptions& o) { return Unless(o.new_model.from, std::string()); }));
    add(Row({"--no-twin"}, "", {C::Train}, "train the SSA model alone",
            [](CommandOptions& o, const FlagValue&) { o.new_model.no_twin = true; }, [](const CommandOptions& o) { return On(o.new_model.no_twin); }));
    add(Row({"--freeze-positions"}, "", {C::Train}, "keep the position embeddings at zero (passkey's default)",
            [](CommandOptions& o, const FlagValue&) { o.new_model.freeze_positions = true; },
            [](const CommandOptions& o) { return On(o.new_model.freeze_positions); })
            .InGroup("positions"));
    add(Row({"--learn-positions"}, "", {C::Train}, "learn them even for passkey",
            [](CommandOptions& o, const FlagValue&) { o.new_model.learn_positions = true; },
            [](const CommandOptions& o) { return On(o.new_model.learn_positions); })
            .InGroup("positions"));
    add(Row({"--save-dtype"}, "f32|f16", {C::Train}, "the dtype of the saved model files (default f32)",
            [](CommandOptions& o, const FlagValue& v) {
                if (v.text != "f32" && v.text != "f16") Bad(v.name + " " + QuoteForMessage(v.text) + " is not f32 or f16");
                o.new_model.save_dtype = v.text == "f16" ? model::Dtype::F16 : model::Dtype::F32;
            },
            [](const CommandOptions& o) { return o.new_model.save_dtype == model::Dtype::F16 ? std::optional<std::string>("f16") : std::nullopt; }));
    add(Row({"--save-dtype"}, "f32|f16|bf16", {C::InitRandom}, "the dtype of the weights on disk (default f32)",
            [](CommandOptions& o, const FlagValue& v) {
                if (v.text != "f32" && v.text != "f16" && v.text != "bf16") Bad(v.name + " " + QuoteForMessage(v.text) + " is not f32, f16 or bf16");
                o.new_model.save_dtype = v.text == "f16" ? model::Dtype::F16 : v.text == "bf16" ? model::Dtype::BF16 : model::Dtype::F32;
            },
            [](const CommandOptions& o) {
                const model::Dtype d = o.new_model.save_dtype;
                return d == model::Dtype::F32 ? std::nullopt : std::optional<std::string>(d == model::Dtype::F16 ? "f16" : "bf16");
            }));
    add(Row({"--layout"}, model::LayoutNames("|"), {C::InitRandom}, "how the model is written (default own): " + LayoutHelp(),
            [](CommandOptions& o, const FlagValue& v) {
                const model::LayoutInfo* l = model::FindLayout(v.text);
                if (!l) Bad(v.name + " " + QuoteForMessage(v.text) + " is not one of " + model::LayoutNames(", "));
                o.new_model.layout = l->layout;
            },
            [](const CommandOptions& o) {
                for (const model::LayoutInfo& l : model::Layouts())
                    if (l.layout == o.new_model.layout && l.layout != model::Layout::Own) return std::optional<std::string>(l.name);
                return std::optional<std::string>();
            }));
    add(Row({"--threads"}, "N", {C::Train, C::Eval}, "threads inside each op, at most the cores (train's default 1 per model, eval's 2)",
            [](CommandOptions& o, const FlagValue& v) { o.new_model.threads = Positive(v, kMaxThreads); },
            [](const CommandOptions& o) { return IfSet(o.new_model.threads); }));

    add(Row({"--json"}, "", {C::Info, C::Tokenize, C::Generate, C::Eval}, "prints JSON",
            [](CommandOptions& o, const FlagValue&) { o.json = true; }, [](const CommandOptions& o) { return On(o.json); }));

    // The window.
    add(Row({"--session"}, "FILE", {C::Window}, "reopen a saved session: model, text, selections, view and export settings "
                                                "(--model, --device, --text, --layer, --head, --query, --map and --tab given here win; "
                                                "a new --model keeps the session's comparison)",
            [](CommandOptions& o, const FlagValue& v) { o.window.session_path = NonEmpty(v, "a session file"); },
            [](const CommandOptions& o) { return Unless(o.window.session_path, std::string()); }));
    // The tabs, as --tab spells them: heads|matrix|...|fine-tune (LaunchOptions::kTabs).
    std::string tabs;
    for (const char* tab : LaunchOptions::kTabs) tabs += (tabs.empty() ? "" : "|") + TabFlag(tab);
    // A tab also as the bar spells it ("Next token", "Lens"): TabFlag reads it as --tab's spelling.
    // The open dialog too: for a model (open), a fine-tune's base (open-base) or a run (open-run).
    add(Row({"--show"}, "export|help|demo|open|open-base|open-run|" + tabs, {C::Window},
            "open a window (export, help, demo, the open dialog for a model, a base or a run) or a tab from the start",
            [=](CommandOptions& o, const FlagValue& v) {
                const bool window = v.text == "export" || v.text == "help" || v.text == "demo" || v.text == "open" || v.text == "open-base" ||
                                    v.text == "open-run";
                const std::string tab = window ? "" : FindTabFlag(v.text);
                if (!window && tab.empty())
                    Bad(v.name + " " + QuoteForMessage(v.text) + " is not one of export, help, demo, open, open-base, open-run (windows) or " + tabs +
                        " (tabs)" + (v.text == "all" || v.text == "three-way" || ParseMapMode(v.text) ? "; a map is --map " + v.text : ""));
                o.window.show = window ? v.text : tab;
            },
            [](const CommandOptions& o) { return Unless(o.window.show, std::string()); }));
    add(Row({"--tab"}, tabs, {C::Window}, "the tab the window opens on",
            [=](CommandOptions& o, const FlagValue& v) {
                const std::string tab = FindTabFlag(v.text);
                if (tab.empty()) Bad(v.name + " " + QuoteForMessage(v.text) + " is not one of " + tabs);
                o.window.show = tab;
            },
            [](const CommandOptions&) { return std::optional<std::string>(); }));  // --show spells it back
    auto where = [&](const char* name, std::optional<int> LaunchOptions::*field, const char* help) {
        add(Row({name}, "N", {C::Window}, help,
                [field](CommandOptions& o, const FlagValue& v) { o.window.*field = static_cast<int>(Whole(v, 0, 1 << 20)); },
                [field](const CommandOptions& o) {
                    const std::optional<int>& n = o.window.*field;
                    return n ? std::optional(std::to_string(*n)) : std::nullopt;
                }));
    };
    where("--layer", &LaunchOptions::layer, "open on layer N's head (with --head; from 0; over a session's selection)");
    where("--head", &LaunchOptions::head, "open on head N of the layer (from 0)");
    where("--query", &LaunchOptions::query, "open with query row N selected (from 0: the first token)");
    add(Row({"--map"}, "ssa|compare|diff|all|three-way|base|base_diff", {C::Window},
            "the map the window opens on: SSA, its comparison, their difference, all three side by side, or with a base (a "
            "fine-tune with its base, --compare base or --base DIR) SSA | tau = 1 | base with the Fine-tune tab, the base, or "
            "SSA - base",
            [](CommandOptions& o, const FlagValue& v) {
                if (v.text != "all" && v.text != "three-way" && !ParseMapMode(v.text))
                    Bad(v.name + " " + QuoteForMessage(v.text) + " is not one of ssa, compare, diff, all, three-way, base, base_diff");
                o.window.map = v.text;
            },
            [](const CommandOptions& o) { return Unless(o.window.map, std::string()); }));
    add(Row({"--continue"}, "N", {C::Window}, "append N tokens once the first analysis is shown, as Continue (Ctrl+G) does",
            [](CommandOptions& o, const FlagValue& v) { o.window.continue_tokens = Positive(v, 100000); },
            [](const CommandOptions& o) { return Unless(o.window.continue_tokens, 0); }));
    add(Row({"--rank-heads"}, "", {C::Window, C::Export},
            "rank the heads by their temperatures' part of the loss, each at tau = 1 in turn (and tau_q, tau_v alone), and beside "
            "a base by the drift's, each head's, layer's attention and MLP's weights from the base in turn: the window's once the "
            "first analysis is shown; export's to head_impacts.json / .csv / .png and head_impacts_tokens.npy / .png (beside a base "
            "head_impacts_drift.csv and head_impacts_drift_tokens.npy / .png too)",
            [](CommandOptions& o, const FlagValue&) { o.window.rank_heads = o.export_options.rank_heads = true; },
            [](const CommandOptions& o) { return On(o.window.rank_heads || o.export_options.rank_heads); }));
    add(Row({"--global-pass"}, "", {C::Window}, "run the global tau = 1 pass once the first analysis is shown, as Ctrl+T does",
            [](CommandOptions& o, const FlagValue&) { o.window.global_pass = true; }, [](const CommandOptions& o) { return On(o.window.global_pass); }));
    add(Row({"--big-model"}, "N", {C::Window},
            "a model on a CPU with N parameters or more is big: it opens with the layer-local comparison (default 400000000)",
            [](CommandOptions& o, const FlagValue& v) { o.window.big_model_parameters = Whole(v, 1, kMaxBigModel); },
            [](const CommandOptions& o) { return Unless<int64_t>(o.window.big_model_parameters, kBigModelParameters); })
            .Detail());
    add(Row({"--screenshot"}, "PNG", {C::Window}, "save a PNG of the window (and PNG.json, what it shows) once it settles, then exit",
            [](CommandOptions& o, const FlagValue& v) { o.window.screenshot = PathOf(v); },
            [](const CommandOptions& o) { return Unless(o.window.screenshot, std::string()); }));
    add(Row({"--frames"}, "N", {C::Window}, "settled frames before the screenshot (default 30)",
            [](CommandOptions& o, const FlagValue& v) { o.window.frames = Positive(v, kMaxFrames); },
            [](const CommandOptions& o) { return Unless(o.window.frames, 30); }));
    add(Row({"--window"}, "WxH", {C::Window}, "the window's size in pixels (default 1600x1000)",
            [](CommandOptions& o, const FlagValue& v) {
                const std::vector<std::string> parts = Split(v.text, 'x');
                const auto w = parts.size() == 2 ? ParseInteger(parts[0], 320, 16384) : std::nullopt;
                const auto h = parts.size() == 2 ? ParseInteger(parts[1], 240, 16384) : std::nullopt;
                if (!w || !h) Bad(v.name + " " + QuoteForMessage(v.text) + " must be WIDTHxHEIGHT in pixels, 320x240 to 16384x16384 (default 1600x1000)");
                o.window.width = static_cast<int>(*w);
                o.window.height = static_cast<int>(*h);
            },
            [](const CommandOptions& o) {
                if (o.window.width == 1600 && o.window.height == 1000) return std::optional<std::string>();
                return std::optional(std::to_string(o.window.width) + "x" + std::to_string(o.window.height));
            }));
    add(Row({"--export-to"}, "DIR", {C::Window}, "export with the session's export settings through the dialog's own path, then exit (tests)",
            [](CommandOptions& o, const FlagValue& v) { o.window.export_to = PathOf(v); },
            [](const CommandOptions& o) { return Unless(o.window.export_to, std::string()); })
            .Detail());
    add(Row({"--bench-open"}, "", {C::Window}, "benchmark: print how long the model took to open and answer, the frames' work meanwhile and the peak memory",
            [](CommandOptions& o, const FlagValue&) { o.window.bench_open = true; }, [](const CommandOptions& o) { return On(o.window.bench_open); })
            .Detail());
    add(BenchRow("--bench-typing", "benchmark: type N characters, then print frame times and keystroke-to-pixels latency", &LaunchOptions::bench_keys));
    add(Row({"--bench-at"}, "end|middle|start", {C::Window}, "where --bench-typing types (default end)",
            [](CommandOptions& o, const FlagValue& v) {
                if (v.text != "end" && v.text != "middle" && v.text != "start") Bad(v.name + " " + QuoteForMessage(v.text) + " is not one of end, middle, start");
                o.window.bench_at = v.text == "end" ? 1.0 : v.text == "middle" ? 0.5 : 0.0;
            },
            [](const CommandOptions& o) {
                const double at = o.window.bench_at;
                return at == 1.0 ? std::nullopt : std::optional<std::string>(at == 0.5 ? "middle" : "start");
            })
            .Detail());
    add(BenchRow("--bench-zoom", "benchmark: zoom and pan the attention map for N frames, then print frame times", &LaunchOptions::bench_zoom_frames));
    add(BenchRow("--bench-heads", "benchmark: select another head N times, then print the frames' work", &LaunchOptions::bench_heads));
    return t;
}

}  // namespace

const std::vector<Flag>& FlagTable() {
    static const std::vector<Flag> table = BuildTable();
    return table;
}

std::vector<const Flag*> FlagsOf(Command command) {
    std::vector<const Flag*> out;
    for (const Flag& f : FlagTable())
        if (f.Takes(command)) out.push_back(&f);
    return out;
}

const Flag* FindFlag(Command command, const std::string& name) {
    for (const Flag& f : FlagTable())
        if (f.Takes(command) && std::find(f.names.begin(), f.names.end(), name) != f.names.end()) return &f;
    return nullptr;
}

//-----------------------------------------------------------------------------
// [SECTION] Parsing and applying
//-----------------------------------------------------------------------------

namespace {

model::Status Apply(const Flag& flag, const std::string& value, CommandOptions* options) {
    try {
        flag.handler(*options, FlagValue{flag.names[0], value});
    } catch (const FlagError& e) {
        return model::Fail(e.message);
    }
    return model::Ok{};
}

// "--out DIR", "--text STR or --text-file F": what a usage line and a missing flag show.
std::string Spelled(const Flag& f) { return f.names[0] + (f.Switch() ? "" : " " + f.hint); }

}  // namespace

model::Status ParseFlags(Command command, const std::vector<std::string>& args, size_t first, CommandOptions* options) {
    std::set<const Flag*> given;
    for (size_t i = first; i < args.size(); ++i) {
        const Flag* flag = FindFlag(command, args[i]);
        // --flag=value, as getopt's long options take it ("unknown argument '--dla-position=5'").
        const size_t equals = args[i].rfind("--", 0) == 0 ? args[i].find('=') : std::string::npos;
        if (!flag && equals != std::string::npos) {
            const Flag* named = FindFlag(command, args[i].substr(0, equals));
            if (named && named->Switch()) return model::Fail(args[i].substr(0, equals) + " takes no value (" + QuoteForMessage(args[i]) + ")");
            if (named) {
                if (auto s = Apply(*named, args[i].substr(equals + 1), options); !s) return s;
                given.insert(named);
                continue;
            }
        }
        if (!flag) return model::Fail("unknown argument " + QuoteForMessage(args[i]));
        if (!flag->Switch() && i + 1 >= args.size()) return model::Fail(args[i] + " needs a value");
        if (auto s = Apply(*flag, flag->Switch() ? "" : args[++i], options); !s) return s;
        given.insert(flag);
    }
    if (options->help) return model::Ok{};
    const std::vector<const Flag*> flags = FlagsOf(command);
    for (const Flag* f : flags)  // flags that exclude others, in the table's order
        for (const Flag* g : flags)
            if (given.count(f) && given.count(g) && std::count(f->not_with.begin(), f->not_with.end(), g->names[0]))
                return model::Fail(f->names[0] + " " + f->not_with_why + ": not with " + g->names[0]);
    // Required flags; a required group needs one of its flags.
    for (const Flag* f : flags) {
        if (given.count(f) || std::find(f->required.begin(), f->required.end(), command) == f->required.end()) continue;
        std::vector<std::string> alternatives;
        bool one_given = false;
        for (const Flag* g : flags) {
            if (g == f || (!f->group.empty() && g->group == f->group)) {
                alternatives.push_back(Spelled(*g));
                one_given |= given.count(g) != 0;
            }
            one_given |= !f->group.empty() && g->stands_for == f->group && given.count(g) != 0;
        }
        if (!one_given) return model::Fail(std::string(CommandName(command)) + " needs " + Join(alternatives, " or "));
    }
    return model::Ok{};
}

model::Status ApplyFlag(Command command, const std::string& name, const std::string& value, CommandOptions* options) {
    std::string spelled = name.rfind("--", 0) == 0 ? name : "--" + name;
    std::replace(spelled.begin(), spelled.end(), '_', '-');
    const Flag* flag = FindFlag(command, spelled);
    if (!flag) return model::Fail(std::string(CommandName(command)) + " takes no " + model::EscapeForMessage(spelled, 40));
    if (!flag->Switch()) return Apply(*flag, value, options);
    if (value == "false" || value == "0") return model::Ok{};
    // Python's keywords: an empty value ([], "") is no "on" (a switch on the command line takes no value, and never comes here).
    if (value != "true" && value != "1") return model::Fail(model::EscapeForMessage(spelled, 40) + " is a switch: " + QuoteForMessage(value) + " is not true or false");
    return Apply(*flag, "", options);
}

//-----------------------------------------------------------------------------
// [SECTION] Writing a command line back
//-----------------------------------------------------------------------------

std::string FormatCommandLine(Command command, const CommandOptions& options) {
    std::string out = "ssaviz";
    if (command != Command::Window) out += std::string(" ") + CommandName(command);
    for (const Flag* f : FlagsOf(command)) {
        if (!f->write) continue;
        const std::optional<std::string> value = f->write(options);
        if (!value) continue;
        out += " " + f->names[0];
        if (!f->Switch()) out += " " + ShellQuote(*value);
    }
    return out;
}

std::string ExportCommandLine(const ExportOptions& options, CommandOptions source) {
    source.out = options.out_dir;
    source.export_options = options;
    source.window.rank_heads = false;  // --rank-heads is the export's when its options say so, not the window's launch
    return FormatCommandLine(Command::Export, source);
}

//-----------------------------------------------------------------------------
// [SECTION] Sessions: the flags a session file keeps
//-----------------------------------------------------------------------------

namespace {

using nlohmann::json;

// "export.size" -> {"export", "size"}.
std::vector<std::string> KeyPath(const std::string& key) { return Split(key, '.'); }

// The value at a key, or null when it (or an object on its way) is not there; an object on the way
// that is something else is a mistake to name.
const json* Find(const json& root, const std::string& key) {
    const json* at = &root;
    std::string where;
    for (const std::string& part : KeyPath(key)) {
        if (!at->is_object()) Bad(where.empty() ? std::string("the session must be a JSON object") : "'" + where + "' must be an object");
        if (!at->contains(part) || at->at(part).is_null()) return nullptr;
        at = &at->at(part);
        where += (where.empty() ? "" : ".") + part;
    }
    return at;
}

json& Place(json& root, const std::string& key) {
    json* at = &root;
    for (const std::string& part : KeyPath(key)) at = &(*at)[part];
    return *at;
}

// A session's value as the flag's text, its JSON type checked (messages name the key).
std::string SessionText(const json& v, Kept kept, const std::string& name) {
    switch (kept) {
        case Kept::Text:
            if (!v.is_string()) Bad(name + " must be a string");
            return v.get<std::string>();
        case Kept::Switch:
            if (!v.is_boolean()) Bad(name + " must be true or false");
            return v.get<bool>() ? "true" : "false";
        case Kept::Whole:
            if (!v.is_number_integer()) Bad(name + " must be an integer, not " + model::DescribeJson(v));
            return v.dump();
        case Kept::Real:
            if (!v.is_number()) Bad(name + " must be a number, not " + model::DescribeJson(v));
            return Shortest(v.get<double>());
        case Kept::Indices: {
            if (!v.is_array()) Bad(name + " must be an array of integers");
            std::vector<std::string> items;
            for (const json& x : v) {
                if (!x.is_number_integer() || (!x.is_number_unsigned() && x.get<int64_t>() < 0))
                    Bad(name + " must hold non-negative integers");
                items.push_back(x.dump());
            }
            return items.empty() ? "all" : Join(items, ",");
        }
        case Kept::Names: {
            if (!v.is_array()) Bad(name + " must be an array of strings");
            std::vector<std::string> items;
            for (const json& x : v) {
                if (!x.is_string()) Bad(name + " must hold strings");
                items.push_back(x.get<std::string>());
            }
            return Join(items, ",");
        }
        case Kept::Scope: break;  // two keys: see ReadScope
    }
    return "";
}

// The flag's text as a session keeps it.
json SessionJson(const std::string& text, Kept kept) {
    switch (kept) {
        case Kept::Text: return text;
        case Kept::Switch: return text == "true";
        case Kept::Whole: return std::stoll(text);
        case Kept::Real: return static_cast<float>(std::stod(text));  // the float the flag sets, as a session always kept it
        case Kept::Indices: {
            json list = json::array();
            if (text != "all")
                for (const std::string& item : Split(text, ',')) list.push_back(std::stoll(item));
            return list;
        }
        case Kept::Names: {
            json list = json::array();
            if (!text.empty())
                for (const std::string& item : Split(text, ',')) list.push_back(item);
            return list;
        }
        case Kept::Scope: break;
    }
    return nullptr;
}

// --highlight-scope is kept as two keys: the scope's name and the head beside it (kept whatever
// the scope, as the export dialog keeps it). The indices go through the flag's handler as "L,H".
void ReadScope(const Flag& flag, const SessionKey& k, const json& root, CommandOptions* o) {
    FigureSettings& f = o->export_options.figures;
    TokenScope scope = f.highlight_scope;
    if (const json* v = Find(root, k.key)) {
        const std::string name = SessionText(*v, Kept::Text, "'" + k.key + "'");
        const auto parsed = ParseTokenScope(name);
        if (!parsed) Bad("'" + k.key + "': " + QuoteForMessage(name) + " is not one of head, layer, model");
        scope = *parsed;
    }
    if (const json* v = Find(root, k.head_key)) {
        if (!v->is_array() || v->size() != 2) Bad("'" + k.head_key + "' must be [layer, head] with non-negative integers");
        const std::string pair = SessionText(*v, Kept::Indices, "'" + k.head_key + "'"), name = "'" + k.head_key + "':";
        flag.handler(*o, FlagValue{name, pair, true});
    }
    f.highlight_scope = scope;
}

}  // namespace

json FlagsToSession(const CommandOptions& options) {
    json root = json::object();
    for (const Flag& flag : FlagTable()) {
        if (!flag.session) continue;
        const SessionKey& k = *flag.session;
        if (k.kept == Kept::Scope) {
            const FigureSettings& f = options.export_options.figures;
            Place(root, k.key) = ToString(f.highlight_scope);
            Place(root, k.head_key) = json::array({f.highlight_head.layer, f.highlight_head.head});
            continue;
        }
        std::optional<std::string> text = k.write ? k.write(options) : flag.write(options);
        if (flag.Switch()) text = text ? "true" : "false";
        Place(root, k.key) = SessionJson(text ? *text : k.unset.value_or(""), k.kept);
    }
    return root;
}

model::Status FlagsFromSession(const json& session, CommandOptions* options) {
    try {
        for (const Flag& flag : FlagTable()) {
            if (!flag.session) continue;
            const SessionKey& k = *flag.session;
            if (k.kept == Kept::Scope) {
                ReadScope(flag, k, session, options);
                continue;
            }
            const json* v = Find(session, k.key);
            if (!v) continue;
            const std::string text = SessionText(*v, k.kept, "'" + k.key + "'"), name = "'" + k.key + "':";
            // No path nor value holds one (the system's calls would read up to it, a path cut short);
            // the text's own message, with where, is SessionFromJson's.
            if (k.key != "text" && text.find('\0') != std::string::npos) return model::Fail("'" + k.key + "' holds a NUL character");
            if (flag.Switch() ? text != "true" : text == k.unset) continue;  // the default: nothing to apply
            flag.handler(*options, FlagValue{name, flag.Switch() ? std::string() : text, true});
        }
    } catch (const FlagError& e) {
        return model::Fail(e.message);
    }
    return model::Ok{};
}

//-----------------------------------------------------------------------------
// [SECTION] Help
//-----------------------------------------------------------------------------

namespace {

constexpr size_t kWidth = 118;  // columns of the help text

// Words (or usage items) after `lead`, wrapped at kWidth; continuation lines start at `indent`.
// Nothing separates the lead from the first word: a lead ends with its own space.
std::string Wrap(const std::string& lead, const std::vector<std::string>& words, size_t indent) {
    std::string out = lead;
    size_t column = lead.size();
    bool line_empty = true;
    for (const std::string& w : words) {
        if (!line_empty && column + 1 + w.size() > kWidth) {
            out += "\n" + std::string(indent, ' ');
            column = indent;
            line_empty = true;
        }
        if (!line_empty) out += " ", ++column;
        out += w;
        column += w.size();
        line_empty = false;
    }
    return out + "\n";
}

std::vector<std::string> Words(const std::string& text) {
    std::vector<std::string> out;
    for (const std::string& w : Split(text, ' '))
        if (!w.empty()) out.push_back(w);
    return out;
}

// "usage: ssaviz export [--model DIR] (--text STR | --text-file F) --out DIR ...", wrapped under itself.
std::string UsageLine(Command command, const std::string& lead) {
    std::vector<std::string> items;
    const std::vector<const Flag*> flags = FlagsOf(command);
    for (size_t k = 0; k < flags.size(); ++k) {
        const Flag* f = flags[k];
        if (!f->in_synopsis) continue;
        const bool required = std::find(f->required.begin(), f->required.end(), command) != f->required.end();
        std::string item = Spelled(*f);
        while (!f->group.empty() && k + 1 < flags.size() && flags[k + 1]->group == f->group) item += " | " + Spelled(*flags[++k]);
        items.push_back(required ? (f->group.empty() ? item : "(" + item + ")") : "[" + item + "]");
    }
    std::string head = lead + "ssaviz" + (command == Command::Window ? "" : std::string(" ") + CommandName(command));
    return Wrap(head + " ", items, head.size() + 1);
}

// "  --model DIR     a model folder ...": a flag and its help, the help wrapped in its column.
std::string FlagLine(const Flag& f) {
    constexpr size_t kColumn = 32;
    std::string names = "  ";
    for (size_t k = f.names.size(); k-- > 1;) names += f.names[k] + ", ";  // "-h, --help"
    names += Spelled(f);
    std::string out;
    if (names.size() + 2 > kColumn) {
        out = names + "\n";
        names.clear();
    }
    return out + Wrap(names + std::string(kColumn - names.size(), ' '), Words(f.help), kColumn);
}

const char* kModelNote =
    "--model takes a folder (config.json + model.safetensors or pytorch_model.bin, or a lone checkpoint) or a torch.save checkpoint "
    "file (.pt / .pth / .bin / .ckpt); without config.json the shape comes from the tensors. Every command that opens a model, and "
    "the window, also takes:";
const char* kExitCodes = "exit codes: 0 ok, 1 failure, 2 usage error, 3 bad model or input file\n";

}  // namespace

std::string UsageText() {
    std::string out;
    for (const CommandSpec& c : kCommands) {
        out += UsageLine(c.command, c.command == Command::Window ? "usage: " : "       ");
        out += Wrap("         ", Words(c.summary), 9);
    }
    out += Wrap("", Words(kModelNote), 0);
    for (const Flag* f : FlagsOf(Command::Info))
        if (!f->in_synopsis && f->names[0] != "--help") out += FlagLine(*f);  // --dtype and the checkpoint's hints
    out += Wrap("", Words("ssaviz COMMAND --help lists a command's flags and what each does (ssaviz help window: the window's)."), 0);
    return out + kExitCodes;
}

std::string CommandHelp(Command command) {
    std::string out = UsageLine(command, "usage: ");
    out += Wrap("", Words(Spec(command).summary), 0) + "\n";
    for (const Flag* f : FlagsOf(command)) out += FlagLine(*f);
    return out + "\n" + kExitCodes;
}

}  // namespace app
