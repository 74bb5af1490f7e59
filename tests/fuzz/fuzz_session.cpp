// Session files (app/export/session.cpp) on arbitrary JSON text: SessionFromJson after the bounded
// JSON reader, as `ssaviz --session FILE` and File > Open session read them.
//   refused: one line, and bounded (a megabyte value is never echoed whole);
//   accepted: at most kMaxPins pins, none twice, the what-ifs within their combined bound, and the
//   file the window would save again (SessionToJson) reads back to the same session.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "app/export/session.h"
#include "model/io/files.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

void CheckOneLine(const std::string& error) {
    FUZZ_CHECK(!error.empty());
    FUZZ_CHECK(error.find_first_of("\n\r\x1b") == std::string::npos);
    FUZZ_CHECK(error.size() < 2000);
}

// A session as the window writes it, without the pane shares (normalised again on every read, so
// their last bits may move).
nlohmann::json Comparable(const app::Session& s) {
    nlohmann::json j = app::SessionToJson(s);
    j["view"]["layout"].erase("columns");
    return j;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto parsed = model::ParseJsonText(std::string_view(reinterpret_cast<const char*>(data), size));
    if (!parsed) return 0;
    auto session = app::SessionFromJson(*parsed);
    if (!session) {
        CheckOneLine(session.error());
        return 0;
    }
    FUZZ_CHECK(session->pinned.size() <= app::kMaxPins);
    std::set<std::pair<int, int>> pins;
    for (const app::Pin& p : session->pinned) FUZZ_CHECK(pins.insert({p.layer, p.head}).second);
    FUZZ_CHECK(model::CheckCombinedScales(session->interventions).ok());

    const nlohmann::json first = Comparable(*session);
    auto again = app::SessionFromJson(app::SessionToJson(*session));
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(Comparable(*again) == first);
    return 0;
}
