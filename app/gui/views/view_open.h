// File > Open: an ImGui-drawn browser that opens a model folder (config.json, model.safetensors or
// pytorch_model.bin) or a checkpoint file
// as the model or as its comparison twin, plus the recent models remembered in the user's config
// folder ($XDG_CONFIG_HOME/ssaviz/recent.txt, else ~/.config/ssaviz/recent.txt).
#pragma once

#include <string>
#include <vector>

#include "app/gui/window_state.h"

namespace app {

class OpenDialog {
public:
    void Draw(WindowState& state);  // a modal window while state.show_open_dialog

private:
    struct Entry {
        std::string name;
        bool is_model = false;  // a model folder, or a checkpoint file
        bool is_file = false;   // a checkpoint file
    };

    void Start(const AppState& state);
    void Navigate(const std::string& dir);
    void List();  // re-reads m_dir into m_entries; failures go to m_error
    void Open(WindowState& state, const std::string& dir);

    std::string m_dir;      // folder being browsed
    std::string m_filter;
    std::string m_error;
    std::string m_path_edit;  // the path field, applied on Enter
    std::string m_selected;   // full path of the chosen model folder, empty for none
    std::vector<Entry> m_entries;  // sub-folders of m_dir, sorted
    bool m_dir_is_model = false;
    bool m_show_hidden = false;
};

std::vector<std::string> LoadRecentModels();
void RememberRecentModel(const std::string& dir, std::vector<std::string>* recent);  // moves it first, keeps 10, saves

}  // namespace app
