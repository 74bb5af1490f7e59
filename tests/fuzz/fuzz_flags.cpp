// The flag table (app/export/flags.cpp) on arbitrary arguments: the first byte picks a command, the
// rest is its argv split at NUL bytes. Then the whole input as one value for the parsers every
// integer and list flag goes through, and for --ablate's.
//   ParseFlags: refused with one bounded line; accepted, the command line FormatCommandLine writes
//   back parses to the same options (the export dialog's promise), and index lists hold each index
//   once.
//   ParseInteger / ParseReal: a value only for text that spells it (an optional '-' and digits for
//   integers), inside [lo, hi]. ParseIndexList: unique indices. ParseInterventions: a list within
//   its combined bound that FormatInterventions writes back to the same list.
// --example reads the bundled models' list from disk: this build has none (examples.cpp needs
// LibTorch), so fuzz_app_stubs.cpp gives an empty one and the flag is always refused here.
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "app/export/flags.h"
#include "model/nn/interventions.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/shell_words.h"

namespace {

void CheckOneLine(const std::string& error) {
    FUZZ_CHECK(!error.empty());
    FUZZ_CHECK(error.find_first_of("\n\r") == std::string::npos);
    FUZZ_CHECK(error.size() < 1000);
}

constexpr app::Command kCommands[] = {app::Command::Window,   app::Command::Info,       app::Command::Tokenize, app::Command::Export,
                                      app::Command::Generate, app::Command::InitRandom, app::Command::Train,    app::Command::Eval};

void FuzzCommandLine(app::Command command, std::string_view rest) {
    std::vector<std::string> args = {"ssaviz"};
    const size_t first = command == app::Command::Window ? 1 : 2;
    if (command != app::Command::Window) args.push_back(app::CommandName(command));
    for (size_t start = 0; start <= rest.size();) {
        const size_t end = std::min(rest.find('\0', start), rest.size());
        if (end > start || end < rest.size()) args.emplace_back(rest.substr(start, end - start));
        start = end + 1;
    }
    app::CommandOptions o;
    const model::Status parsed = app::ParseFlags(command, args, first, &o);
    if (!parsed) return CheckOneLine(parsed.error());
    for (const std::vector<int>* list : {&o.export_options.layers, &o.export_options.heads})
        FUZZ_CHECK(std::set<int>(list->begin(), list->end()).size() == list->size());
    if (o.help) return;  // --help skips the required flags, and is not written back
    const std::string line = app::FormatCommandLine(command, o);
    app::CommandOptions again;
    const model::Status reparsed = app::ParseFlags(command, tests::ShellWords(line), first, &again);
    FUZZ_CHECK(reparsed.ok());
    FUZZ_CHECK(app::FormatCommandLine(command, again) == line);
}

void FuzzValues(const std::string& text) {
    const auto n = app::ParseInteger(text, -1000, 1000000);
    if (n) {
        FUZZ_CHECK(*n >= -1000 && *n <= 1000000);
        const size_t digits = text[0] == '-' ? 1 : 0;
        FUZZ_CHECK(text.size() > digits && text.find_first_not_of("0123456789", digits) == std::string::npos);
    }
    const auto x = app::ParseReal(text, -1e6, 1e6);
    if (x) FUZZ_CHECK(*x >= -1e6 && *x <= 1e6 && text.find_first_not_of("0123456789.eE+-") == std::string::npos);
    const auto list = app::ParseIndexList(text, "--layers");
    if (list) FUZZ_CHECK(std::set<int>(list->begin(), list->end()).size() == list->size());
    else CheckOneLine(list.error());
    const auto items = app::SplitList(text);
    if (items) FUZZ_CHECK(std::any_of(items->begin(), items->end(), [](const std::string& i) { return !i.empty(); }));

    const auto edits = model::ParseInterventions(text, 4, 4);
    if (!edits) return CheckOneLine(edits.error());
    FUZZ_CHECK(model::CheckCombinedScales(*edits).ok());
    const auto back = model::ParseInterventions(model::FormatInterventions(*edits), 4, 4);
    FUZZ_CHECK(back.ok() && *back == *edits);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    FuzzCommandLine(kCommands[data[0] % 8], rest);
    FuzzValues(std::string(rest));
    return 0;
}
