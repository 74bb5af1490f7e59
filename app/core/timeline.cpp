#include "app/core/timeline.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>

#include "model/io/files.h"

namespace app {
namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxStepDigits = 12;  // leading zeros aside

// The step a name holds between `prefix` and `suffix`: digits and nothing else, at most
// kMaxStepDigits of them past leading zeros (a longer one is returned as -1, for the caller to name).
std::optional<int64_t> StepIn(const std::string& name, const std::string& prefix, const std::string& suffix) {
    if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        return std::nullopt;
    std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); })) return std::nullopt;
    digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
    if (digits.size() > kMaxStepDigits) return -1;
    return std::stoll(digits);
}

}  // namespace

model::Result<std::vector<RunStep>> FindRunSteps(const std::string& dir) {
    const std::string shown = "run folder '" + model::EscapeForMessage(dir) + "'";
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(dir, ec)) && !fs::is_directory(dir, ec))
        return model::Fail(shown + (ec ? model::WhyNotThere(ec.value()) : std::string(" is not a folder")));
    std::map<int64_t, std::string> steps;
    int64_t entries = 0;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (++entries > kMaxRunEntries) return model::Fail(shown + " holds more than " + std::to_string(kMaxRunEntries) + " entries");
        const fs::directory_entry& e = *it;
        const std::string name = e.path().filename().string();
        // Named as a step, it is one, whatever it is: a link opens what it points to, as --model
        // does; a broken link or anything but a file or folder fails when its step opens (the model
        // loaders read regular files only), named there, and the rest of the run goes on. The
        // names alone decide: the listing itself follows no link.
        std::optional<int64_t> step = StepIn(name, "iter-", "-ckpt.pth");
        if (!step) step = StepIn(name, "checkpoint-", "");
        if (!step) continue;
        if (*step < 0)
            return model::Fail(shown + ": " + model::Quoted(name) + " names a step of more than " + std::to_string(kMaxStepDigits) + " digits");
        if (auto [at, added] = steps.emplace(*step, e.path().string()); !added)
            return model::Fail(shown + ": step " + std::to_string(*step) + " is both '" + model::EscapeForMessage(fs::path(at->second).filename().string()) +
                               "' and '" + model::EscapeForMessage(name) + "'");
        if (static_cast<int64_t>(steps.size()) > kMaxRunSteps)
            return model::Fail(shown + " holds more than " + std::to_string(kMaxRunSteps) + " checkpoints");
    }
    if (ec) return model::Fail(shown + ": cannot list it (" + ec.message() + ")");
    if (steps.empty()) return model::Fail(shown + " holds no checkpoints (iter-NNNNNN-ckpt.pth files or checkpoint-N/ folders)");
    std::vector<RunStep> out;
    for (const auto& [step, path] : steps) out.push_back({step, path});
    return out;
}

model::Status CheckCompareRun(const std::string& run, const std::string& compare_run) {
    std::error_code ec;
    if (fs::equivalent(run, compare_run, ec))
        return model::Fail(model::Quoted(compare_run) + " is the run itself: a compare run is a second run (its vanilla twin's, say)");
    return model::Ok{};
}

model::Status CheckOutsideRun(const std::string& out, const std::string& run, RunExportFolders folders) {
    if (model::IsWithin(out, run))  // a run that cannot be resolved: FindRunSteps names what is wrong with it
        return model::Fail(model::Quoted(out) + " is inside the run folder " + model::Quoted(run) +
                           ": an export there would become one of its steps; write it elsewhere");
    // The run inside one of the folders the export writes below `out` (OUT/curves as the run, or
    // train's OUT/run/ssa under the window's OUT/run/curves): its files would land in the run, or
    // beside it where train keeps only its runs.
    std::error_code ec;
    const fs::path outer = model::ResolvedPath(out, ec), inner = model::ResolvedPath(run, ec);
    if (ec || !model::IsWithin(run, out)) return model::Ok{};
    const fs::path below = inner.lexically_relative(outer);
    if (below.empty() || below == ".") return model::Ok{};
    const std::string first = below.begin()->string();
    const bool written = first == "heatmaps" || first == "plots" || first == "csv" ||
                         (folders == RunExportFolders::Run ? first == "curves" || first == "compare-run" || StepIn(first, "step-", "")
                                                           : first == "run");
    if (written)
        return model::Fail("the run folder " + model::Quoted(run) + " is inside " + model::Quoted((fs::path(out) / first).string()) +
                           ", a folder the export writes: its files would land in or beside the run; write it elsewhere");
    return model::Ok{};
}

model::Status CheckNotANewRunStep(const std::string& out) {
    std::error_code ec;
    // The path as it resolves (lnk/../R/checkpoint-999, lnk a link elsewhere, is not ./R's step).
    const fs::path resolved = model::ResolvedPath(out, ec);
    for (fs::path at = ec ? fs::path(out).lexically_normal() : resolved; at.has_relative_path() && at.filename() != ".." && at.filename() != ".";
         at = at.parent_path()) {
        if (at.filename().empty()) at = at.parent_path();  // "x/checkpoint-5/"
        if (fs::exists(fs::symlink_status(at, ec))) break;  // there already: nothing new from here up
        const std::string name = at.filename().string();
        if (!StepIn(name, "iter-", "-ckpt.pth") && !StepIn(name, "checkpoint-", "")) continue;
        const fs::path run = at.has_parent_path() ? at.parent_path() : fs::path(".");
        if (FindRunSteps(run.string()))
            return model::Fail(model::Quoted(at.string()) + " would become a step of the run " + model::Quoted(run.string()) +
                               " (its name is a checkpoint's), one without weights; write the export elsewhere");
    }
    return model::Ok{};
}

}  // namespace app
