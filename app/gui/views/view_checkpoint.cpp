#include "app/gui/views/view_checkpoint.h"
#include "viz/imgui/widgets.h"

#include <imgui.h>
#include <imgui_stdlib.h>

namespace app {
namespace {

const char* const kPopupId = "Open checkpoint###checkpoint_dialog";
const ImVec4 kErrorColor(1.0f, 0.45f, 0.4f, 1.0f);
const ImVec4 kOkColor(0.45f, 0.85f, 0.55f, 1.0f);
const char* const kFormHelp =
    "POSITION,TOKEN[,COMBINE]\n"
    "  POSITION: sigmoid | exp_exp | linear | none\n"
    "  TOKEN:    shared (w . q_head) | feature (w . x) | none\n"
    "  COMBINE:  sum | product (how position and token terms join)\n"
    "e.g. sigmoid,shared,sum. Empty: read from the tensors where they tell.";

}  // namespace

bool CheckpointDialog::Ask(const std::string& path, const model::ConfigHints& hints) {
    auto files = model::FindModelFiles(path);
    if (!files) return false;  // the worker reports a missing folder itself
    auto weights = model::OpenWeights(files->weights);
    if (!weights) return false;  // likewise a bad file
    // A config.json or a lit-gpt checkpoint's lit_config.json says the shape (or the loader says it lacks one).
    if (model::ShapeSourceOf(*files, *weights, hints) != model::ShapeSource::Tensors) return false;
    if (model::InferConfig(*weights, hints)) return false;
    m_path = path;
    m_n_head = hints.n_head;
    m_query = hints.query ? model::FormSpec(*hints.query) : "";
    m_value = hints.value ? model::FormSpec(*hints.value) : "";
    m_activation = !hints.activation ? 0 : *hints.activation == model::Activation::GeluNew ? 1 : 2;
    m_weights = std::move(*weights);
    m_show = true;
    Check();
    return true;
}

model::ConfigHints CheckpointDialog::Hints() const {
    model::ConfigHints h;
    h.n_head = m_n_head;
    if (!m_query.empty())
        if (auto f = model::ParseFormSpec(m_query)) h.query = *f;
    if (!m_value.empty())
        if (auto f = model::ParseFormSpec(m_value)) h.value = *f;
    if (m_activation) h.activation = m_activation == 1 ? model::Activation::GeluNew : model::Activation::Gelu;
    return h;
}

void CheckpointDialog::Check() {
    m_preview.clear();
    m_error.clear();
    for (auto [spec, side] : {std::pair<const std::string*, const char*>{&m_query, "tau_q"}, {&m_value, "tau_v"}})
        if (!spec->empty())
            if (auto f = model::ParseFormSpec(*spec); !f) {
                m_error = std::string(side) + ": " + f.error();
                return;
            }
    auto inferred = model::InferConfig(m_weights, Hints());
    if (!inferred) {
        m_error = inferred.error();
        return;
    }
    const model::ModelConfig& c = inferred->config;
    m_preview = std::to_string(c.n_layer) + " layers x " + std::to_string(c.n_head) + " heads, width " + std::to_string(c.n_embd) +
                ", context " + std::to_string(c.n_positions) + ", vocabulary " + std::to_string(c.vocab_size) + "\ntau_q: " +
                model::Describe(c.query) + "\ntau_v: " + model::Describe(c.value) + "\nactivation: " + model::ToString(c.activation);
}

void CheckpointDialog::Draw(WindowState& state) {
    if (m_show && !ImGui::IsPopupOpen(kPopupId)) {
        ImGui::OpenPopup(kPopupId);  // drawn from the next frame on, as the open dialog
        return;
    }
    if (!ImGui::IsPopupOpen(kPopupId)) return;
    const float font = ImGui::GetFontSize();
    const ImGuiViewport* viewport = ImGui::GetMainViewport();
    ImGui::SetNextWindowSize(ImVec2(std::min(font * 44.0f, viewport->WorkSize.x * 0.9f), 0), ImGuiCond_Appearing);
    ImGui::SetNextWindowPos(ImVec2(viewport->WorkPos.x + viewport->WorkSize.x * 0.5f, viewport->WorkPos.y + viewport->WorkSize.y * 0.5f),
                            ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
    bool keep_open = true;
    if (!ImGui::BeginPopupModal(kPopupId, &keep_open, ImGuiWindowFlags_NoSavedSettings)) {
        if (!keep_open) m_show = false;
        return;
    }
    auto close = [&] {
        m_show = false;
        ImGui::CloseCurrentPopup();
    };
    ImGui::TextWrapped("%s", m_path.c_str());
    ImGui::TextDisabled("No config.json: the shape comes from the tensors. Say what they cannot tell:");
    ImGui::Spacing();

    bool changed = false;
    ImGui::SetNextItemWidth(font * 8);
    changed |= ImGui::InputInt("n_head (0: infer)", &m_n_head);
    if (m_n_head < 0) m_n_head = 0;
    if (ImGui::IsItemHovered()) viz::Tooltip("Heads per layer. 0 takes it from nanoGPT's model_args, a per-head SSA\nparameter, or GPT-2's head size of 64.");
    for (auto [field, label] : {std::pair<std::string*, const char*>{&m_query, "tau_q form"}, {&m_value, "tau_v form"}}) {
        ImGui::SetNextItemWidth(font * 16);
        changed |= ImGui::InputTextWithHint(label, "infer", field);
        if (ImGui::IsItemHovered()) viz::Tooltip("%s", kFormHelp);
    }
    ImGui::SetNextItemWidth(font * 16);
    changed |= ImGui::Combo("activation", &m_activation, "infer from the layout\0gelu_new (tanh, HF GPT-2)\0gelu (exact, nanoGPT)\0");
    if (changed) Check();

    ImGui::Separator();
    ImGui::PushTextWrapPos(0.0f);
    if (!m_error.empty()) ImGui::TextColored(kErrorColor, "%s", m_error.c_str());
    else ImGui::TextColored(kOkColor, "%s", m_preview.c_str());
    ImGui::PopTextWrapPos();
    ImGui::Spacing();
    const bool can_open = m_error.empty();
    if (!can_open) ImGui::BeginDisabled();
    if (ImGui::Button("Open", ImVec2(font * 6, 0)) || (can_open && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Enter), false))) {
        state.hints = Hints();
        state.open_model_request = m_path;
        close();
    }
    if (!can_open) ImGui::EndDisabled();
    ImGui::SameLine();
    if (ImGui::Button("Cancel", ImVec2(font * 6, 0)) || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape), false)) close();
    const ImVec2 pos = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
    state.regions["checkpoint"] = Rect{pos.x, pos.y, size.x, size.y};
    ImGui::EndPopup();
}

}  // namespace app
