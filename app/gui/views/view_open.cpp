#include "app/gui/views/view_open.h"

#include "app/core/timeline.h"
#include "model/io/files.h"
#include "viz/imgui/widgets.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include <imgui.h>
#include <imgui_stdlib.h>

namespace app {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxRecent = 10;
constexpr size_t kMaxListed = 20000;  // entries a folder's listing reads (about 0.5 s of stats)
const char* const kPopupId = "###open_dialog";  // one id whatever the title says

// A model folder holds config.json, or weights the loader finds without one; a checkpoint file
// (.pt, .pth, .bin, .ckpt, .safetensors) opens on its own.
bool IsModelFolder(const fs::path& dir) {
    std::error_code ec;
    for (const char* name : {"config.json", "model.safetensors", "pytorch_model.bin"})
        if (fs::is_regular_file(dir / name, ec)) return true;
    return false;
}

bool IsCheckpointFile(const fs::path& path) {
    const std::string ext = path.extension().string();
    return ext == ".pt" || ext == ".pth" || ext == ".bin" || ext == ".ckpt" || ext == ".safetensors";
}

// Absolute and lexically normal, no trailing separator, "~" expanded; the input when that fails.
std::string NormalizeDir(const std::string& dir) {
    fs::path p(dir);
    if (!dir.empty() && dir[0] == '~' && (dir.size() == 1 || dir[1] == '/')) {
        if (const char* home = std::getenv("HOME"); home && *home) p = fs::path(home) / dir.substr(std::min<size_t>(2, dir.size()));
    }
    std::error_code ec;
    fs::path abs = fs::absolute(p, ec);
    if (ec) return dir;
    abs = abs.lexically_normal();
    if (!abs.has_filename() && abs.has_relative_path()) abs = abs.parent_path();
    return abs.string();
}

bool LessNoCase(const std::string& a, const std::string& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
        return std::tolower(static_cast<unsigned char>(x)) < std::tolower(static_cast<unsigned char>(y));
    });
}

bool ContainsNoCase(const std::string& text, const std::string& needle) {
    if (needle.empty()) return true;
    auto it = std::search(text.begin(), text.end(), needle.begin(), needle.end(), [](char x, char y) {
        return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
    });
    return it != text.end();
}

// $XDG_CONFIG_HOME/ssaviz/recent.txt (only when absolute, as the XDG spec says), else
// ~/.config/ssaviz/recent.txt; empty when neither is known.
fs::path RecentFilePath() {
    if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && xdg[0] == '/') return fs::path(xdg) / "ssaviz" / "recent.txt";
    if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".config" / "ssaviz" / "recent.txt";
    return {};
}

const ImVec4 kModelColor(0.45f, 0.85f, 0.55f, 1.0f);
const ImVec4 kErrorColor(1.0f, 0.45f, 0.4f, 1.0f);

}  // namespace

std::vector<std::string> LoadRecentModels() {
    std::vector<std::string> recent;
    try {
        const fs::path path = RecentFilePath();
        if (path.empty()) return recent;
        // A list of paths: its first megabyte, a longer file's cut line dropped (a file over it was
        // read as empty, and the next model opened replaced the list with itself).
        constexpr size_t kHead = size_t{1} << 20;
        auto text = model::ReadFileHead(path.string(), kHead);
        if (!text) return recent;
        if (text->size() == kHead) text->erase(std::min(text->size(), text->rfind('\n') + 1));
        std::istringstream in(*text);
        std::string line;
        while (recent.size() < kMaxRecent && std::getline(in, line)) {
            while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
            if (line.empty() || std::find(recent.begin(), recent.end(), line) != recent.end()) continue;
            recent.push_back(line);
        }
    } catch (...) {  // a recent list is a convenience: never worth failing over
        recent.clear();
    }
    return recent;
}

void RememberRecentModel(const std::string& dir, std::vector<std::string>* recent) {
    if (!recent || dir.empty()) return;
    try {
        const std::string key = NormalizeDir(dir);
        recent->erase(std::remove_if(recent->begin(), recent->end(), [&](const std::string& d) { return d == key || NormalizeDir(d) == key; }),
                      recent->end());
        recent->insert(recent->begin(), key);
        if (recent->size() > kMaxRecent) recent->resize(kMaxRecent);

        const fs::path path = RecentFilePath();
        if (path.empty()) return;
        if (model::MakeFolders(path.parent_path().string())) return;
        std::string list;
        for (const std::string& d : *recent)
            if (d.find_first_of("\r\n") == std::string::npos) list += d + '\n';
        (void)model::WriteFileAtomically(path.string(), list);  // a convenience: a failure costs only the list
    } catch (...) {
    }
}

void OpenDialog::Start(const WindowState& state) {
    m_purpose = state.open_dialog_for;
    m_filter.clear();
    m_error.clear();
    m_selected.clear();
    std::string start;
    if (m_purpose == OpenPurpose::Run && !state.run_dir.empty()) start = fs::path(NormalizeDir(state.run_dir)).parent_path().string();
    else if (state.model && !state.model->dir.empty()) start = fs::path(NormalizeDir(state.model->dir)).parent_path().string();
    std::error_code ec;
    if (start.empty() || !fs::is_directory(start, ec)) start = fs::current_path(ec).string();
    if (start.empty()) start = "/";
    Navigate(start);
}

void OpenDialog::Navigate(const std::string& dir) {
    std::string target = NormalizeDir(dir);
    std::error_code ec;
    if (fs::is_regular_file(target, ec)) target = fs::path(target).parent_path().string();  // a pasted .../config.json
    if (!fs::is_directory(target, ec)) {
        m_error = "Not a folder: " + model::EscapeForMessage(target, 4096);
        m_path_edit = m_dir;
        return;
    }
    m_dir = target;
    m_path_edit = m_dir;
    m_selected.clear();
    List();
    if (m_dir_is_model) m_selected = m_dir;
}

void OpenDialog::NavigateTo(const std::string& dir) { Navigate(dir); }

void OpenDialog::List() {
    m_entries.clear();
    m_error.clear();
    m_run_note.clear();
    const bool run = m_purpose == OpenPurpose::Run;
    m_dir_is_model = !run && IsModelFolder(m_dir);
    ListEntries(run);
    if (!run) return;
    // A run's folder holds its checkpoints, the steps the Run tab shows; why a folder that looks
    // like one is not (too many entries, a step named twice, unreadable, empty) is said.
    auto steps = FindRunSteps(m_dir);
    m_dir_is_model = steps.ok();
    if (steps) {
        m_run_note = "This folder is a training run: " + std::to_string(steps->size()) + (steps->size() == 1 ? " checkpoint" : " checkpoints") +
                     ", steps " + std::to_string(steps->front().step) + " to " + std::to_string(steps->back().step) + ".";
    } else if (m_error.empty() && (m_entries.empty() || std::any_of(m_entries.begin(), m_entries.end(), [](const Entry& e) {
                                       return e.name.rfind("iter-", 0) == 0 || e.name.rfind("checkpoint-", 0) == 0;
                                   }))) {
        m_error = steps.error();
    }
}

void OpenDialog::ListEntries(bool run) {
    std::error_code ec;
    fs::directory_iterator it(m_dir, ec);  // an unreadable folder says so (skipping it looked empty)
    if (ec) {
        m_error = "Cannot read " + model::EscapeForMessage(m_dir, 4096) + ": " + ec.message();
        return;
    }
    for (const fs::directory_iterator end; it != end; it.increment(ec)) {
        if (ec) {
            m_error = "Stopped reading " + model::EscapeForMessage(m_dir, 4096) + ": " + ec.message();
            break;
        }
        if (m_entries.size() >= kMaxListed) {  // each sub-folder costs a few stats, on the UI thread
            m_error = "Showing the first " + std::to_string(kMaxListed) + " entries of this folder: type a path, or filter.";
            break;
        }
        std::error_code entry_ec;
        if (it->is_regular_file(entry_ec) && IsCheckpointFile(it->path())) {
            m_entries.push_back({it->path().filename().string(), !run, true});  // a run opens as its folder
            continue;
        }
        if (!it->is_directory(entry_ec)) continue;  // follows links; unreadable entries are skipped
        m_entries.push_back({it->path().filename().string(), !run && IsModelFolder(it->path()), false});
    }
    std::sort(m_entries.begin(), m_entries.end(), [](const Entry& a, const Entry& b) { return LessNoCase(a.name, b.name); });
}

void OpenDialog::Open(WindowState& state, const std::string& dir) {
    switch (m_purpose) {
        case OpenPurpose::Model: state.OpenAnotherModel(dir); break;
        case OpenPurpose::Twin: state.open_twin_request = dir; break;
        case OpenPurpose::Base: state.open_base_request = dir; break;
        case OpenPurpose::Run: state.open_run_request = dir; break;
    }
    state.show_open_dialog = false;
    ImGui::CloseCurrentPopup();
}

void OpenDialog::Draw(WindowState& state) {
    if (state.show_open_dialog && !ImGui::IsPopupOpen(kPopupId)) {
        // Drawn from the next frame on: ImGui 1.86 asserts (imgui.cpp, FindBlockingModal) when a
        // window appears later in the frame in which a modal is first submitted.
        Start(state);
        ImGui::OpenPopup(kPopupId);
        return;
    }
    if (!ImGui::IsPopupOpen(kPopupId)) return;

    const float font = ImGui::GetFontSize();
    const ImGuiViewport* viewport = ImGui::GetMainViewport();
    const ImVec2 size(std::min(font * 48.0f, viewport->WorkSize.x * 0.9f), std::min(font * 36.0f, viewport->WorkSize.y * 0.9f));
    ImGui::SetNextWindowSize(size, ImGuiCond_Appearing);
    ImGui::SetNextWindowPos(ImVec2(viewport->WorkPos.x + viewport->WorkSize.x * 0.5f, viewport->WorkPos.y + viewport->WorkSize.y * 0.5f),
                            ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
    const char* const titles[] = {"Open model", "Open comparison twin", "Open the base model (what the fine-tune started from)",
                                  "Open a training run"};
    const std::string title = std::string(titles[static_cast<int>(m_purpose)]) + kPopupId;
    bool keep_open = true;
    ImVec4 background = ImGui::GetStyleColorVec4(ImGuiCol_PopupBg);
    background.w = 1.0f;  // the views behind would show through the folder list
    ImGui::PushStyleColor(ImGuiCol_PopupBg, background);
    const bool visible = ImGui::BeginPopupModal(title.c_str(), &keep_open, ImGuiWindowFlags_NoSavedSettings);
    ImGui::PopStyleColor();
    if (!visible) {
        if (!keep_open) state.show_open_dialog = false;  // closed with the title bar's button
        return;
    }
    if (!state.show_open_dialog || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape), false)) {
        state.show_open_dialog = false;
        ImGui::CloseCurrentPopup();
        ImGui::EndPopup();
        return;
    }
    const char* const hints[] = {nullptr, "A twin must have the same layers, heads and tokenizer as the open model.",
                                 "The model the open fine-tune started from, of the same architecture: the maps then compare three ways, "
                                 "SSA | tau = 1 | base.",
                                 "A folder of checkpoints: iter-NNNNNN-ckpt.pth files (lit-gpt) or checkpoint-N/ folders (Hugging Face)."};
    if (const char* hint = hints[static_cast<int>(m_purpose)]) {
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("%s", hint);
        ImGui::PopTextWrapPos();
    }

    // Path, Up, Home.
    if (ImGui::Button("Up")) Navigate(fs::path(m_dir).parent_path().string());
    ImGui::SameLine();
    if (ImGui::Button("Home")) {
        if (const char* home = std::getenv("HOME"); home && *home) Navigate(home);
    }
    ImGui::SameLine();
    ImGui::SetNextItemWidth(-FLT_MIN);
    if (ImGui::InputText("##path", &m_path_edit, ImGuiInputTextFlags_EnterReturnsTrue | ImGuiInputTextFlags_AutoSelectAll)) Navigate(m_path_edit);
    if (ImGui::IsItemHovered()) viz::Tooltip("Type a folder and press Enter (a click selects the whole path).");

    ImGui::SetNextItemWidth(font * 14.0f);
    ImGui::InputTextWithHint("##filter", "filter", &m_filter);
    ImGui::SameLine();
    ImGui::Checkbox("show hidden folders", &m_show_hidden);
    ImGui::SameLine();
    if (ImGui::Button("Refresh")) List();
    if (!m_error.empty()) ImGui::TextColored(kErrorColor, "%s", m_error.c_str());
    if (m_dir_is_model) {
        ImGui::TextColored(kModelColor, "%s", m_run_note.empty() ? "This folder is a model." : m_run_note.c_str());
        const ImVec2 at = ImGui::GetItemRectMin(), size = ImGui::GetItemRectSize();
        state.regions["open_dialog_opens"] = Rect{at.x, at.y, size.x, size.y};  // the folder shown opens (tests)
        ImGui::SameLine();
        if (ImGui::SmallButton("Open it")) Open(state, m_dir);
    }

    // Sub-folders, models marked; double-click opens a model or enters a folder.
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const size_t recent_rows = m_purpose == OpenPurpose::Run ? 0 : std::min<size_t>(state.recent_models.size(), 5);
    const float footer = ImGui::GetFrameHeightWithSpacing() * 2 + ImGui::GetStyle().ItemSpacing.y +
                         (recent_rows > 0 ? line * (recent_rows + 1) + ImGui::GetStyle().WindowPadding.y * 2 : 0.0f);
    std::vector<int> shown;
    shown.reserve(m_entries.size());
    for (int i = 0; i < static_cast<int>(m_entries.size()); ++i) {
        const Entry& e = m_entries[i];
        if (!m_show_hidden && !e.name.empty() && e.name[0] == '.') continue;
        if (ContainsNoCase(e.name, m_filter)) shown.push_back(i);
    }
    std::string open_now;  // set by a double-click, acted on after the lists
    std::string enter_now;
    if (ImGui::BeginChild("##entries", ImVec2(0, std::max(line * 4, ImGui::GetContentRegionAvail().y - footer)), true)) {
        if (shown.empty()) ImGui::TextDisabled(m_entries.empty() ? "(no sub-folders or checkpoints)" : "(nothing matches)");
        ImGuiListClipper clipper;
        clipper.Begin(static_cast<int>(shown.size()));
        while (clipper.Step()) {
            for (int k = clipper.DisplayStart; k < clipper.DisplayEnd; ++k) {
                const Entry& e = m_entries[shown[k]];
                const std::string full = (fs::path(m_dir) / e.name).string();
                ImGui::PushID(shown[k]);
                if (e.is_model || e.is_file) ImGui::PushStyleColor(ImGuiCol_Text, e.is_model ? kModelColor : ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
                // Names as the command line shows them: a newline or escape sequence in one is not drawn raw.
                const std::string shown_name = model::EscapeForMessage(e.name, 1024);
                const std::string label = e.is_model || e.is_file ? shown_name : shown_name + "/";
                if (viz::SelectableText(label, e.is_model && m_selected == full, ImGuiSelectableFlags_AllowDoubleClick)) {
                    if (e.is_model) m_selected = full;
                    if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left) && (e.is_model || !e.is_file)) (e.is_model ? open_now : enter_now) = full;
                }
                if (e.is_model || e.is_file) ImGui::PopStyleColor();
                if (ImGui::IsItemHovered())
                    viz::Tooltip(e.is_model ? "Double-click to open this model."
                                      : e.is_file ? "A checkpoint: a run opens as its folder (Open it, above)."
                                                  : "Double-click to enter this folder.");
                if (e.is_model) {
                    ImGui::SameLine(ImGui::GetContentRegionAvail().x - font * 3.0f);
                    ImGui::TextDisabled(e.is_file ? "file" : "model");
                }
                ImGui::PopID();
            }
        }
    }
    ImGui::EndChild();

    // Recent models (not where a run is chosen: they are models).
    if (!state.recent_models.empty() && m_purpose != OpenPurpose::Run) {
        ImGui::TextDisabled("Recent models");
        if (ImGui::BeginChild("##recent", ImVec2(0, line * recent_rows + ImGui::GetStyle().WindowPadding.y * 2), true)) {
            for (size_t i = 0; i < state.recent_models.size(); ++i) {
                const std::string& dir = state.recent_models[i];
                std::error_code ec;
                const bool exists = IsModelFolder(dir) || (IsCheckpointFile(dir) && fs::is_regular_file(dir, ec));
                ImGui::PushID(static_cast<int>(i));
                if (!exists) ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
                if (viz::SelectableText(model::EscapeForMessage(dir, 1024), m_selected == dir, ImGuiSelectableFlags_AllowDoubleClick) && exists) {
                    m_selected = dir;
                    if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) open_now = dir;
                }
                if (!exists) {
                    ImGui::PopStyleColor();
                    if (ImGui::IsItemHovered()) viz::Tooltip("No model there any more (no config.json).");
                }
                ImGui::PopID();
            }
        }
        ImGui::EndChild();
    }

    // Footer: what Open would open.
    ImGui::Separator();
    const bool can_open = !m_selected.empty();
    if (can_open) ImGui::Text("Selected: %s", model::EscapeForMessage(m_selected, 4096).c_str());
    else if (m_purpose == OpenPurpose::Run) ImGui::TextDisabled("Go into a run's folder (the one holding its checkpoints).");
    else ImGui::TextDisabled("Select a model folder (marked green) or a checkpoint file (.pt, .pth, .bin, .ckpt, .safetensors).");
    if (!can_open) ImGui::BeginDisabled();
    if (ImGui::Button("Open", ImVec2(font * 6, 0))) open_now = m_selected;
    if (!can_open) ImGui::EndDisabled();
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) viz::Tooltip("Enter opens the selection; Escape closes.");
    // Enter opens what is selected, unless a text field has the keyboard (the path field's Enter goes there).
    if (can_open && !ImGui::GetIO().WantTextInput && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Enter), false)) open_now = m_selected;
    ImGui::SameLine();
    if (ImGui::Button("Cancel", ImVec2(font * 6, 0))) {
        state.show_open_dialog = false;
        ImGui::CloseCurrentPopup();
    }

    const ImVec2 pos = ImGui::GetWindowPos(), window = ImGui::GetWindowSize();
    const char* const names[] = {"open_dialog_model", "open_dialog_twin", "open_dialog_base", "open_dialog_run"};
    state.regions[names[static_cast<int>(m_purpose)]] = Rect{pos.x, pos.y, window.x, window.y};  // for tests, by what it opens
    if (!open_now.empty()) Open(state, open_now);
    else if (!enter_now.empty()) Navigate(enter_now);
    ImGui::EndPopup();
}

}  // namespace app
