// File > Open: an ImGui-drawn browser that opens a model folder (config.json, model.safetensors or
// pytorch_model.bin) or a checkpoint file as the model, its comparison twin or the base it was
// fine-tuned from (state.open_dialog_for), or a training run's folder of checkpoints (FindRunSteps);
// plus the recent models remembered in the user's config folder ($XDG_CONFIG_HOME/ssaviz/recent.txt,
// else ~/.config/ssaviz/recent.txt). Enter opens the selection.
#pragma once

#include <string>
#include <vector>

#include "app/gui/window_state.h"

namespace app {

class OpenDialog {
public:
    void Draw(WindowState& state);  // a modal window while state.show_open_dialog
    void NavigateTo(const std::string& dir);  // as the path field's Enter: the folder shown (tests)

private:
    struct Entry {
        std::string name;
        bool is_model = false;  // a model folder, or a checkpoint file
        bool is_file = false;   // a checkpoint file
    };

    void Start(const WindowState& state);
    void Navigate(const std::string& dir);
    void List();  // re-reads m_dir into m_entries; failures go to m_error
    void ListEntries(bool run);  // its sub-folders and checkpoint files (a run's only listed)
    void Open(WindowState& state, const std::string& dir);

    std::string m_dir;      // folder being browsed
    std::string m_filter;
    std::string m_error;
    std::string m_path_edit;  // the path field, applied on Enter
    std::string m_selected;   // full path of the chosen model folder, empty for none
    std::vector<Entry> m_entries;  // sub-folders of m_dir, sorted
    OpenPurpose m_purpose = OpenPurpose::Model;  // what it opens, taken when it appears
    bool m_dir_is_model = false;  // m_dir itself opens: a model, or a run's folder where a run is opened
    std::string m_run_note;       // a run's folder: how many checkpoints, which steps
    bool m_show_hidden = false;
};

std::vector<std::string> LoadRecentModels();
void RememberRecentModel(const std::string& dir, std::vector<std::string>* recent);  // moves it first, keeps 10, saves

}  // namespace app
