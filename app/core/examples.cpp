#include "app/core/examples.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "model/io/files.h"
#include "model/io/weights.h"
#include "model/train/tasks.h"

namespace app {
namespace fs = std::filesystem;

std::string BundledModelsDir() {
    const fs::path exe_dir = model::ExecutableDir();
    if (!exe_dir.empty() && fs::exists(exe_dir / ".." / "assets" / "models" / "examples.json"))
        return (exe_dir / ".." / "assets" / "models").lexically_normal().string();
#ifdef SSAVIZ_SOURCE_ASSETS
    if (fs::exists(fs::path(SSAVIZ_SOURCE_ASSETS) / "models" / "examples.json")) return SSAVIZ_SOURCE_ASSETS "/models";
#endif
    return "";
}

std::string BundledGpt2TokenizerDir() {
    const std::string models = BundledModelsDir();
    if (!models.empty()) return (fs::path(models) / ".." / "tokenizers" / "gpt2").lexically_normal().string();
    return "assets/tokenizers/gpt2";  // from the source tree's root
}

std::vector<Example> BundledExamples() {
    std::vector<Example> out;
    const std::string root = BundledModelsDir();
    if (root.empty()) return out;
    auto list = model::ParseJsonFile(root + "/examples.json");
    if (!list) return {};
    try {
        for (const auto& e : *list) {
            Example x;
            x.id = e.at("id");
            x.title = e.at("title");
            x.hint = e.value("hint", "");
            if (!e.contains("run")) x.model_dir = root + "/" + e.at("model").get<std::string>();  // a run's: its last step
            if (e.contains("twin")) x.twin_dir = root + "/" + e["twin"].get<std::string>();
            if (e.contains("base")) x.base_dir = root + "/" + e["base"].get<std::string>();
            x.text = e.value("text", "");
            if (e.contains("passkey_tokens")) x.text = model::TaskExampleText("passkey", e["passkey_tokens"].get<int>(), 3);
            x.graph_panel = e.value("graph_panel", false);
            x.query_piece = e.value("query_piece", "");
            x.layer = e.value("layer", 0);
            x.head = e.value("head", 0);
            if (e.contains("run")) x.run_dir = root + "/" + e["run"].get<std::string>();
            if (e.contains("compare_run")) x.compare_run_dir = root + "/" + e["compare_run"].get<std::string>();
            if (x.run_dir.empty() ? fs::exists(x.model_dir + "/config.json") : fs::is_directory(x.run_dir)) out.push_back(std::move(x));
        }
    } catch (const std::exception&) {
        return {};  // a broken examples.json (or a bad entry) only hides the menu's entries
    }
    return out;
}

std::string TrainedTask(const std::string& model_dir) {
    auto record = model::ParseJsonFile(model_dir + "/train.json");
    if (!record) return "";
    try {
        return record->at("task").value("task", "");
    } catch (const std::exception&) {
        return "";
    }
}

std::string TaskText(const std::string& task, int64_t context) {
    if (task == "graph") return model::TaskExampleText(task, 0, 0);
    if (task == "passkey") return model::TaskExampleText(task, std::min<int64_t>(context, 256), 3);  // train's seq_len >= 24
    return "";
}

std::string DefaultModelDir() {
    if (const char* env = std::getenv("SSAVIZ_MODEL"); env && *env) return env;
    // The bundled English SSA model where --example finds the bundled models (a binary copied
    // elsewhere opened the random one while Python and --example found the source tree's); else
    // the build's random model (long context, for tests).
    if (const std::string bundled = BundledModelsDir(); !bundled.empty() && fs::exists(fs::path(bundled) / "english" / "ssa" / "config.json"))
        return (fs::path(bundled) / "english" / "ssa").lexically_normal().string();
    const fs::path exe_dir = model::ExecutableDir();
    if (!exe_dir.empty() && fs::exists(exe_dir / "models" / "default" / "config.json")) return (exe_dir / "models" / "default").lexically_normal().string();
    return "";
}

namespace {

// The weights file a model was opened from (empty where it has none BaseBeside can use).
fs::path OpenedWeights(const std::string& model_dir) {
    std::error_code ec;
    fs::path dir = fs::path(model_dir);
    if (model_dir.empty()) return {};
    if (fs::is_regular_file(dir, ec)) return dir.extension() == ".pth" ? dir : fs::path();
    if (!fs::is_directory(dir, ec)) return {};
    if (!dir.has_filename()) dir = dir.parent_path();  // "x/ssa/"
    auto files = model::FindModelFiles(dir.string());
    return files ? fs::path(files->weights) : fs::path();
}

fs::path FolderOf(const fs::path& opened) { return opened.parent_path().empty() ? fs::path(".") : opened.parent_path(); }

// The folders "base" BaseBeside looks in: inside the model's folder, beside it, and, for a step
// train --from kept (OUT/run/ROLE/checkpoint-N), the one it wrote beside the run (OUT/base).
std::vector<fs::path> BaseFolders(const fs::path& folder) {
    std::vector<fs::path> places = {folder / "base", folder.parent_path() / "base"};
    const fs::path run = fs::absolute(folder).lexically_normal().parent_path().parent_path();
    if (run.filename() == "run") places.push_back(run.parent_path() / "base");
    return places;
}

}  // namespace

std::string BaseBeside(const std::string& model_dir, bool run_step) {
    // A lit-gpt fine-tuning: the base it started from beside the checkpoint that was opened, or a
    // folder "base" inside the fine-tune's folder or beside it (its lit_model.pth, or a model
    // folder of its own).
    const fs::path opened = OpenedWeights(model_dir);
    if (opened.empty()) return "";
    std::error_code ec;
    const fs::path folder = FolderOf(opened);
    // A step that is a folder of its own (an HF checkpoint-N): only what is beside it.
    const bool outside_only = run_step && fs::is_directory(model_dir, ec);
    auto inside = [&](const fs::path& p) {
        const fs::path below = p.lexically_normal().lexically_relative(folder.lexically_normal());
        return outside_only && !below.empty() && *below.begin() != "..";
    };
    for (const fs::path& base : {folder / "lit_model.pth", folder / "base" / "lit_model.pth", folder.parent_path() / "base" / "lit_model.pth"})
        if (!inside(base) && fs::is_regular_file(base, ec) && !fs::equivalent(base, opened, ec)) return base.lexically_normal().string();
    // A run's step may be the run's base itself (a link to it: its first step, or any): compared with
    // itself, as with --base (it stopped the whole run, late, saying there was no base).
    for (const fs::path& base : BaseFolders(folder))
        if (!inside(base) && fs::is_directory(base, ec) && (run_step || !fs::equivalent(base, folder, ec)) && model::FindModelFiles(base.string()))
            return base.lexically_normal().string();
    return "";
}

std::string WhyNoBaseBeside(const std::string& model_dir, bool run_step) {
    const fs::path opened = OpenedWeights(model_dir);
    if (opened.empty()) return "";
    const fs::path folder = FolderOf(opened);
    std::error_code step_ec;
    const bool outside_only = run_step && fs::is_directory(model_dir, step_ec);  // as BaseBeside's
    // Why one of BaseBeside's places holds nothing it takes; "" where nothing is there.
    auto why_not = [&](const fs::path& base, bool want_folder) -> std::string {
        std::error_code ec;
        if (!fs::exists(fs::symlink_status(base, ec))) return "";
        struct stat st;
        if (::stat(base.c_str(), &st) != 0) return errno == ENOENT ? " is a symbolic link to nothing" : model::WhyNotThere(errno);
        if (S_ISFIFO(st.st_mode)) return want_folder ? " is a FIFO, not a folder" : " is a FIFO, not a file";
        if (!want_folder) {  // a lit_model.pth
            if (S_ISDIR(st.st_mode)) return "";
            if (!S_ISREG(st.st_mode)) return " is not a file";
            return fs::equivalent(base, opened, ec) ? " is the model itself" : "";
        }
        if (!S_ISDIR(st.st_mode)) return " is not a folder";
        if (fs::equivalent(base, folder, ec)) return " is the model's own folder";
        auto files = model::FindModelFiles(base.string());
        if (files) return "";
        std::string error = files.error();  // "DIR: no weights (...)"
        if (const std::string own = base.string() + ": "; error.rfind(own, 0) == 0) error.erase(0, own.size());
        return " holds no model: " + error;
    };
    std::vector<std::pair<fs::path, bool>> places = {
        {folder / "lit_model.pth", false}, {folder / "base" / "lit_model.pth", false}, {folder.parent_path() / "base" / "lit_model.pth", false}};
    for (const fs::path& base : BaseFolders(folder)) places.push_back({base, true});
    std::string why;
    bool inside_said = false;
    const std::string no_model = " holds no model: ";
    for (const auto& [base, want_folder] : places) {
        const std::string reason = why_not(base, want_folder);
        const fs::path below = base.lexically_normal().lexically_relative(folder.lexically_normal());
        if (outside_only && !below.empty() && *below.begin() != "..") {
            // A base inside one step's folder: that step's alone, passed over (a run's steps share one);
            // said once (a lit folder base/ and its lit_model.pth are one base).
            if (!inside_said && reason.empty() && fs::exists(fs::symlink_status(base, step_ec)) && (want_folder || !fs::is_directory(base, step_ec))) {
                why += "; " + model::Quoted((want_folder || base.parent_path() == folder ? base : base.parent_path()).lexically_normal().string()) + " inside this step's own folder is passed over";
                inside_said = true;
            }
            continue;
        }
        if (reason.empty()) continue;
        // A folder that holds no model for a file already said (its FIFO lit_model.pth): said once.
        if (reason.rfind(no_model, 0) == 0 && why.find(reason.substr(no_model.size())) != std::string::npos) continue;
        why += "; " + model::Quoted(base.lexically_normal().string()) + reason;
    }
    return why;
}

std::string TwinBeside(const std::string& model_dir) {
    if (model_dir.empty()) return "";
    std::error_code ec;
    fs::path dir = fs::path(model_dir);
    if (fs::is_regular_file(dir, ec) || !fs::is_directory(dir, ec)) return BaseBeside(model_dir);
    if (!dir.has_filename()) dir = dir.parent_path();  // "x/ssa/"
    if (auto files = model::FindModelFiles(dir.string()); files && fs::path(files->weights).extension() == ".pth")
        if (std::string base = BaseBeside(model_dir); !base.empty()) return base;
    // A folder "base" is the start of the fine-tunes beside it: a "vanilla" there is one of them
    // (fine-tuned without temperatures), not a twin of the base, which has none either.
    if (dir.filename() == "base") return "";
    const fs::path twin = dir.parent_path() / "vanilla";
    if (!fs::exists(twin / "config.json", ec) || fs::equivalent(twin, dir, ec)) return "";
    return twin.lexically_normal().string();
}

std::string TwinBesideLabel(const std::string& twin) {
    return fs::path(twin).filename() == "lit_model.pth" ? "its base model (" + twin + ": the fine-tuning started from it)" : "its twin";
}

}  // namespace app
