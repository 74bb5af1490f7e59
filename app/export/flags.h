// The flags of every ssaviz command in one table (after llama.cpp's common/arg.h): each flag once,
// with its names, value hint, help, the commands it belongs to, the handler that applies its value,
// the writer that spells it back and its key in session files. The table parses argv (app/cli),
// prints --help, writes an equivalent command line (the export dialog's), applies a flag by name
// with a string value (keyword arguments of a scripting front end), and reads and writes the
// flags a session file keeps, with the same handlers and so the same bounds.
//
// It lives in app/export, not app/core, because its handlers fill ExportOptions, which belongs with
// the export plan it describes (with FigureSettings and the format names). app/export is the lowest
// layer that sees every option struct: ExportOptions here, LaunchOptions in app/core, the model's
// ConfigHints and forms below. Every front end (app/cli, app/gui) sits above it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "app/core/launch.h"
#include "app/core/run.h"
#include "app/export/export.h"
#include "model/io/result.h"
#include "model/io/safetensors.h"

namespace app {

enum class Command { Window, Info, Tokenize, Export, Generate, InitRandom, Train, Eval };

const char* CommandName(Command command);  // "info", "init-random"; "window" for the window
std::optional<Command> FindCommand(const std::string& name);  // a subcommand's name ("window" too)

// A new model: `ssaviz init-random` writes one with random weights, `ssaviz train` trains one (and
// its twin). Unset fields take the command's default; train's come from the --task's recipe.
struct NewModelOptions {
    std::optional<int> layers, heads;      // --layers N, --heads N
    std::optional<uint64_t> seed;          // --seed N
    std::optional<std::string> tokenizer;  // --tokenizer DIR
    int embd = 128, positions = 1024;      // init-random: --embd, --positions
    // init-random's family (SPEC section 7) and its shape; unset: the family's preset.
    std::string family = "gpt2";           // --family: a preset of model/arch's family table
    std::optional<int> kv_heads, mlp;      // --kv-heads N (n_query_groups), --mlp N (intermediate size)
    std::optional<double> rotary, rope_base;  // --rotary F (fraction of the head rotated), --rope-base X
    std::optional<model::TemperatureForm> random_query_form;  // --query-form (init-random): default the paper's
    model::Layout layout = model::Layout::Own;  // --layout own|lit|hf (model/arch)
    // train
    std::string task = "text";  // --task text|graph|passkey
    std::optional<int> width, context, seq_len, batch, steps, threads;
    std::optional<int64_t> warmup, eval_every;
    std::optional<double> lr, weight_decay;
    std::optional<int> vocab;   // --vocab N: the new tokenizer's pieces (default 4096)
    std::string from;           // --from DIR: fine-tune from this vanilla base (its shape, tokenizer and weights)
    int checkpoint_every = 500;
    std::optional<model::TemperatureForm> query_form, value_form;  // spelled out in full: POSITION,TOKEN[,COMBINE]
    bool resume = false, keep_checkpoints = false, no_twin = false, freeze_positions = false, learn_positions = false;
    model::Dtype save_dtype = model::Dtype::F32;
};

// What the flags set. Each command reads the parts it takes; values are checked as far as they can
// be without the model (indices against the model's layers and heads are checked once it is open).
struct CommandOptions {
    CommandOptions();

    bool help = false;  // -h, --help
    bool json = false;  // --json

    // The model: info, tokenize, export, generate, eval and the window.
    std::optional<std::string> model_dir;  // --model; unset: a session's, else the bundled default
    std::optional<std::string> device;     // --device auto|cpu|cuda[:N]; unset: a session's, else auto
    std::string dtype = "f32";             // --dtype
    model::ConfigHints hints;              // --n-head, --query-form, --value-form, --activation
    std::string example;                   // --example ID: a bundled model, its twin or base and its text

    // The text: tokenize, export, generate and the window.
    std::optional<std::string> text;       // --text
    std::optional<std::string> text_file;  // --text-file (the command reads it)
    bool truncate = false;                 // --truncate
    std::optional<std::string> ablate;     // --ablate: what-ifs, parsed once the model's shape is known

    std::string out;                  // --out: export, init-random, train
    ExportOptions export_options;     // the export's flags; its formats default to all but csv
    CompareSpec compare;              // --compare vanilla|local|unedited|DIR (app/core/run.h)
    bool batch = false;               // --batch (export)
    std::optional<std::string> run;   // --run DIR (export): a training run's checkpoints, step by step
    std::optional<std::string> compare_run;  // --compare-run DIR (export --run): a second run beside it
    std::optional<std::string> steps;        // --steps all|N,M (export --run): steps exported whole

    GenerationSpec generate;  // generate's --tokens, --temperature, --top-k, --seed
    NewModelOptions new_model;
    std::string data;  // --data: train's PATH[,PATH], eval's override of train.json's

    LaunchOptions window;  // the window's own flags; its model and text come from the fields above
};

// One row of the table.
struct FlagValue {
    const std::string& name;  // as the table spells it (an alias is reported by its first name); a session's "'key':"
    const std::string& text;  // the value; "" for a switch
    bool from_session = false;  // a session's list may be empty ([]: none of its items)
};

// How a flag is kept in session files (app/export/session.h): sessions and flags are one schema,
// so a session's value goes through the flag's own handler, with the flag's bounds.
enum class Kept {
    Text,     // a string: the flag's value as typed
    Switch,   // true or false
    Whole,    // an integer
    Real,     // a number (kept as the float it sets)
    Indices,  // [0, 2] for "0,2"; [] for "all"
    Names,    // ["npy", "png"] for "npy,png"; [] for none
    Scope,    // --highlight-scope: "model", "layer" or "head", and the head beside it under head_key
};
struct SessionKey {
    SessionKey(std::string key_, Kept kept_ = Kept::Text, std::optional<std::string> unset_ = std::nullopt)
        : key(std::move(key_)), kept(kept_), unset(std::move(unset_)) {}
    std::string key;  // "compare"; "export.size" is the key size of the object export
    Kept kept;
    // What a session holds when the flag's writer leaves it out (its default), where that is not
    // "" or false; read back, it applies nothing.
    std::optional<std::string> unset;
    std::string head_key;  // Kept::Scope
    // The value a session keeps, where the command line's writer cannot say it exactly (--maps
    // with none ticked); none: the writer's.
    std::function<std::optional<std::string>(const CommandOptions&)> write;
};

struct Flag {
    std::vector<std::string> names;   // "--help", then aliases ("-h")
    std::string hint;                 // the value's shape in usage ("DIR", "all|0,2"); empty: a switch
    std::string help;
    std::vector<Command> commands;    // the commands that take it
    std::vector<Command> required;    // the commands that need it (or, with a group, one of the group)
    std::string group;                // flags of one group are alternatives: (--text STR | --text-file F)
    std::string stands_for;           // a group this flag stands in for where required (--example gives a text)
    // Flags it cannot go with, and why: "--example opens a bundled model with its twin: not with --model".
    std::vector<std::string> not_with;
    std::string not_with_why;
    bool in_synopsis = true;          // false: only in a command's full help, not its usage line
    // Applies a value; a bad value throws (ParseFlags and ApplyFlag return it as an error).
    std::function<void(CommandOptions&, const FlagValue&)> handler;
    // The value that reproduces `options` ("" for a switch that is on); none: left out.
    std::function<std::optional<std::string>(const CommandOptions&)> write;
    std::optional<SessionKey> session;  // none: not kept in sessions

    bool Takes(Command command) const;
    bool Switch() const { return hint.empty(); }
};

const std::vector<Flag>& FlagTable();
std::vector<const Flag*> FlagsOf(Command command);  // in table order
const Flag* FindFlag(Command command, const std::string& name);  // "--name" or an alias

// Applies argv[first...] for a command: "--flag value" pairs and switches, in order; later ones
// win. Then, unless --help was given, checks that the command's required flags are there.
model::Status ParseFlags(Command command, const std::vector<std::string>& args, size_t first, CommandOptions* options);

// One flag by name, as a keyword argument gives it: "sink_eps" or "--sink-eps", a string value
// (a switch takes "", "true" or "1" for on, "false" or "0" to leave it off).
model::Status ApplyFlag(Command command, const std::string& name, const std::string& value, CommandOptions* options);

// A session file's flags (every flag with a session key, defaults too), and the flags a session
// file sets, each key that is there through its flag's handler. Keys the table does not know are
// left to the session's own reader (app/export/session.cpp).
nlohmann::json FlagsToSession(const CommandOptions& options);
model::Status FlagsFromSession(const nlohmann::json& session, CommandOptions* options);

// "ssaviz export --model DIR ...": the command that reproduces `options` (shell-quoted), every flag
// of the command that has a writer and a value, in table order.
std::string FormatCommandLine(Command command, const CommandOptions& options);

// Usage: every command's usage line and the notes they share (ssaviz --help); one command's usage
// line, what it does and each of its flags (ssaviz COMMAND --help).
std::string UsageText();
std::string CommandHelp(Command command);

// Numbers as flags spell them. ParseInteger takes a whole decimal number (an optional '-', then
// digits: no spaces, '+', fractions or exponents) and checks it against [lo, hi] before it is
// narrowed; ParseReal a finite one. Both refuse what they cannot read whole.
std::optional<long long> ParseInteger(const std::string& text, long long lo, long long hi);
std::optional<double> ParseReal(const std::string& text, double lo, double hi);

// A value as a message quotes it: escaped and cut to 40 characters ("'abc...'").
std::string QuoteForMessage(const std::string& text);
// Text a model wrote (generate's continuation) made safe to print on a terminal: line breaks, tabs
// and whole UTF-8 characters kept, every other control character (C0, DEL, C1) and every byte of no
// UTF-8 character written as \xNN, so a vocabulary's piece cannot clear or recolour the screen.
std::string TerminalText(std::string_view text);
// A comma list's items, each trimmed of spaces; none when the list has no item that is not blank
// ("", " ", ","), which every list flag reports the same way: "--NAME is empty".
std::optional<std::vector<std::string>> SplitList(const std::string& text);

// "all" or a comma list like "0, 2" (spaces allowed): layers or heads. "all" is the empty list;
// a repeated index counts once (in the order first given); the indices are checked against a
// model later (ResolveExportHeads). Errors name `flag`.
model::Result<std::vector<int>> ParseIndexList(const std::string& text, const std::string& flag);
std::string FormatIndexList(const std::vector<int>& list);  // "all" for the empty list

// The `ssaviz export` command that writes what `options` describe for `source`'s model, text,
// comparison, what-ifs and how the model is opened (its device, dtype, --config, --tokenizer and
// the other hints), so a GUI export can be repeated from a script, byte for byte.
std::string ExportCommandLine(const ExportOptions& options, CommandOptions source);

}  // namespace app
