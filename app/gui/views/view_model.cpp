#include "app/gui/views/view_model.h"

#include "app/core/examples.h"
#include "app/core/model_scale.h"
#include "app/gui/views/view_common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <imgui.h>

#include "model/io/config.h"
#include "viz/imgui/widgets.h"

namespace app {
namespace {

// One row of the summary table; the value wraps so long folders stay inside the column.
void Row(const char* key, const std::string& value, const char* tooltip = nullptr) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextDisabled("%s", key);
    ImGui::TableNextColumn();
    WrappedLine(value);  // between words, "tau = 1" whole
    if (tooltip && ImGui::IsItemHovered()) viz::Tooltip("%s", tooltip);
}

// "3.214 nats, perplexity 24.9"
std::string LossText(float loss) {
    if (!std::isfinite(loss)) return "-";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f nats, perplexity %.1f", loss, std::exp(loss));
    return buf;
}

bool BeginSummaryTable(const char* id) {
    ImGui::PushStyleVar(ImGuiStyleVar_CellPadding, ImVec2(ImGui::GetStyle().CellPadding.x, 1.0f));
    const bool open = ImGui::BeginTable(id, 2, ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg);
    if (open) {
        ImGui::TableSetupColumn("key", ImGuiTableColumnFlags_WidthFixed, ImGui::GetFontSize() * 6.5f);
        ImGui::TableSetupColumn("value", ImGuiTableColumnFlags_WidthStretch);
    }
    ImGui::PopStyleVar();
    return open;
}

}  // namespace

void ModelView::Draw(WindowState& state) {
    if (!state.model) {
        // Not busy and no error: a checkpoint's settings are being asked for, nothing is loading yet.
        ImGui::TextDisabled(!state.error.empty() ? "No model is open." : state.busy ? "Opening the model..." : "No model is open yet.");
        if (ImGui::Button("Open model...")) state.ShowOpenDialog(OpenPurpose::Model);
        return;
    }
    const model::ModelInfo& m = *state.model;
    const model::ModelConfig& c = m.config;
    // What the maps are compared with, and why, first: for a big model it is the cheap comparison.
    if (BeginSummaryTable("##model_compare")) {
        if (state.twin) {
            Row("twin", state.twin->dir, "The comparison maps come from this separately trained model.");
            Row("twin params", CountName(state.twin->parameters));
        } else if (state.compare_base) {
            Row("compare with", "tau = 1 and the base model (three-way)",
                "A fine-tune against the model it started from: the maps compare SSA with its own weights at tau = 1 (what the\n"
                "temperatures did); 'JS to base' and 'JS drift' in the Matrix and Table tabs give each head's whole change\n"
                "and the other weights' drift.");
            if (state.analysis && state.analysis->HasBase()) Row("base", state.analysis->base_label, state.analysis->base_label.c_str());  // a path cut at the pane: whole on hover
        } else if (state.compare_unedited) {
            Row("compare with", "the unedited model (the SSA model without the what-ifs)",
                "The difference views and the loss change show the what-ifs' effect alone.");
        } else {
            Row("compare with",
                state.layer_local ? "tau = 1, layer by layer (layer-local)"
                                  : std::string("tau = 1, global (a second forward pass)") + (state.global_pass_running ? ", running..." : ""),
                state.layer_local ? "At each layer, the SSA model's own q and k with tau = 1: what that layer's temperatures do, with\n"
                                    "nothing below it changed. No second forward pass, so no predictions of its own."
                                  : "The vanilla counterfactual: a whole second forward pass, so from layer 1 on its heads read a\n"
                                    "different residual stream.");
            Row("why", ScaleOf(m, state.big_model_parameters).reason, "The rule: app/core/model_scale.h (ssaviz --big-model N moves the line).");
        }
        ImGui::EndTable();
    }
    if (!state.twin && !state.compare_unedited && !state.compare_base) {
        const bool global = !state.layer_local;
        if (global && state.global_pass_running) ImGui::BeginDisabled();
        if (ImGui::Button(global ? "Back to layer by layer (Ctrl+T)" : "Run the global tau = 1 pass (Ctrl+T)")) state.RequestGlobalPass(!global);
        if (global && state.global_pass_running) ImGui::EndDisabled();
        if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
            viz::Tooltip(global ? "Compare each layer with its own tau = 1 attention instead: no second forward pass, the cheap one."
                                     : "Compare with the same weights at tau = 1 in every layer: a whole second forward pass, in the\n"
                                       "background with its progress in the status bar. The maps shown stay until it is done; typing\n"
                                       "then costs both passes. Ctrl+T again goes back.");
    }
    if (BeginSummaryTable("##model_summary")) {
        Row("folder", m.dir, m.dir.c_str());
        Row("layers", std::to_string(c.n_layer));
        Row("heads", std::to_string(c.n_head) + " (head size " + std::to_string(c.n_head > 0 ? c.HeadSize() : 0) + ")");
        Row("width", std::to_string(c.n_embd));
        Row("context", std::to_string(c.n_positions) + " tokens");
        std::string vocab = std::to_string(c.vocab_size);
        if (m.tokenizer_vocab != 0 && m.tokenizer_vocab != static_cast<size_t>(c.vocab_size))
            vocab += " (tokenizer " + std::to_string(m.tokenizer_vocab) + ")";
        Row("vocabulary", vocab);
        Row("parameters", CountName(m.parameters));
        Row("family", model::DescribeArchitecture(c), "The architecture: norm, positions, attention grouping, MLP, residual and head.");
        Row("activation", model::ActivationName(c));
        Row("tau_q form", model::Describe(c.query), "Per-query inverse temperature: scales the logits of row i.");
        Row("tau_v form", model::Describe(c.value), "Per-key value temperature: scales value vector j.");
        // tau_q's position term per layer, 1 + s ln i (the official checkpoints' attn.beta).
        for (size_t l = 0; l < m.query_slopes.size(); ++l) {
            const std::vector<float>& slope = m.query_slopes[l].s;
            const auto [lo, hi] = std::minmax_element(slope.begin(), slope.end());
            char text[96], lo_text[32], hi_text[32];
            const double at = std::log(static_cast<double>(c.n_positions));
            // Three significant digits ("s 0.0006..0.0006" said one, twice, of two slopes).
            std::snprintf(lo_text, sizeof lo_text, "%.3g", static_cast<double>(*lo));
            std::snprintf(hi_text, sizeof hi_text, "%.3g", static_cast<double>(*hi));
            if (slope.size() == 1) std::snprintf(text, sizeof text, "s %s: tau_q %.3f at %d tokens", lo_text, 1.0 + *lo * at, c.n_positions);
            else if (std::string(lo_text) == hi_text) std::snprintf(text, sizeof text, "s %s, every head", lo_text);
            else std::snprintf(text, sizeof text, "s %s..%s a head", lo_text, hi_text);
            Row(l == 0 ? "tau_q slope" : "", "L" + std::to_string(l) + "  " + text,
                "tau_q's position term in this layer, 1 + s ln i at query position i: s = exp(-exp(beta)) for the official\n"
                "attn.beta (exp_exp), sigmoid(beta) or beta (linear). `ssaviz info` lists beta, s and tau_q at 256 to 4,096\n"
                "tokens and at the context.");
        }
        Row("layout", m.layout.empty() ? "-" : m.layout);
        if (!m.weights_path.empty())
            Row("weights", m.weights_format + ", stored " + m.stored_dtype, m.weights_path.c_str());
        for (const std::string& note : m.notes) Row("note", note, "What the loader inferred or assumed while opening the model.");
        Row("tokenizer", m.tokenizer_kind.empty() ? "-" : m.tokenizer_kind + ", from " + m.tokenizer_source);
        Row("device", m.device.empty() ? "-" : m.device + ", computing in " + m.compute_dtype,
            "Change with --device cpu|cuda[:N] and --dtype f32|bf16|f16 on the command line.");
        for (const std::string& setting : m.settings)
            Row("setting", setting, "An environment variable that changes how this device computes (README's device settings); exports\n"
                                    "record it in metrics.json's model.settings.");
        if (!m.unused_tensors.empty()) {
            std::string list;
            for (const std::string& t : m.unused_tensors) list += t + "\n";
            Row("unused", std::to_string(m.unused_tensors.size()) + " tensors in the file were not used", list.c_str());
        }
        if (!state.interventions.empty())
            Row("what-ifs", model::FormatInterventions(state.interventions), "Interventions on the SSA side (What-ifs tab); --ablate syntax.");
        if (state.analysis) {
            const model::Analysis& a = *state.analysis;
            const char* help = "Mean of -ln p(token | the tokens before it) over tokens 2..T, and its exp, the perplexity.";
            Row("loss (SSA)", LossText(model::MeanLoss(a.loss)), help);
            if (a.HasComparePredictions()) Row("loss (vs)", LossText(model::MeanLoss(a.loss_compare)), help);
            else Row("loss (vs)", "-", "The layer-local comparison runs no forward pass of its own: it has no predictions.");
        }
        ImGui::EndTable();
    }
    const std::string& beside = state.twin_beside;  // offered only while no twin is open
    if (state.twin) {
        if (ImGui::Button("Compare with tau = 1 instead")) state.close_twin_request = true;
    } else {
        if (!beside.empty() && beside == state.base_beside) {  // a fine-tune's base: the three sides
            ImGui::BeginDisabled(state.compare_base);
            if (ImGui::Button("Compare with its base (three-way)")) state.base_request = true;
            ImGui::EndDisabled();
            if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
                viz::Tooltip("SSA, its own weights at tau = 1 and the base it was fine-tuned from (%s): what the temperatures "
                                  "did and what the other weights' drift did.", state.BaseShown().c_str());
            ImGui::SameLine();
        } else if (!beside.empty()) {  // the bundled models ship with a vanilla twin trained on the same data
            if (ImGui::Button("Compare with its twin")) state.open_twin_request = beside;
            if (ImGui::IsItemHovered())
                viz::Tooltip("Compare with %s:\n%s", beside.c_str(),
                                  "a vanilla model of the same shape and tokenizer, so the difference is what SSA's training changed");
            ImGui::SameLine();
        }
        if (ImGui::Button("Open twin...")) state.ShowOpenDialog(OpenPurpose::Twin);
        if (ImGui::IsItemHovered())
            viz::Tooltip("Compare against a separately trained model with the same layers, heads and tokenizer.");
        ImGui::SameLine();
        if (ImGui::Button("Open base...")) state.ShowOpenDialog(OpenPurpose::Base);
        if (ImGui::IsItemHovered())
            viz::Tooltip("The model this fine-tune started from, wherever it lies (same architecture): the three-way\n"
                              "comparison, SSA | its own weights at tau = 1 | the base.");
    }
}

void HelpView::Draw(WindowState& state) {
    if (!state.show_help) return;
    const ImGuiViewport* viewport = ImGui::GetMainViewport();
    ImGui::SetNextWindowPos(ImVec2(viewport->WorkPos.x + viewport->WorkSize.x * 0.5f, viewport->WorkPos.y + viewport->WorkSize.y * 0.5f),
                            ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
    if (!ImGui::Begin("Keyboard shortcuts", &state.show_help, ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings)) {
        ImGui::End();
        return;
    }
    struct Shortcut {
        const char* keys;
        const char* action;
    };
    const Shortcut shortcuts[] = {
        {"Ctrl+O", "open a model folder (in the dialog: Enter opens the selection)"},
        {"Ctrl+E", "export figures and data (with a preview)"},
        {"Ctrl+Enter", "in the export window: write the files"},
        {"Ctrl+S", "save the session (reopen with ssaviz --session FILE)"},
        {"Ctrl+F", "go to a token position, or find a token by its text"},
        {"Ctrl+G", "Continue: append generated tokens to the text (again: stop)"},
        {"Ctrl+T", "compare with tau = 1: the global pass (a second forward pass) or layer by layer (beside a base: the global pass, the base kept)"},
        {"Ctrl+PgUp / PgDn", "previous / next tab of the right pane (the list button at its left names them all)"},
        {"F1", "show or hide this help"},
        {"Ctrl+Q", "quit"},
        {"\xE2\x86\x91 \xE2\x86\x93", "previous / next layer"},
        {"\xE2\x86\x90 \xE2\x86\x92", "previous / next head"},
        {"Esc", "stop Continue, the heads ranking or the lens (a timeline they held back goes on), else the Run tab's timeline; else clear the selected query token"},
        {"1 / 2 / 3", "map mode: SSA / comparison / difference"},
        {"4 / 5", "all three side by side / SSA | tau = 1 | base (beside a base)"},
        {"6 / 7", "map mode beside a base: the base / SSA - base (all that fine-tuning changed)"},
        {"L", "log colour scale"},
        {"[ / ]", "a training run's previous / next checkpoint (Run tab)"},
        {"P", "pin the selected head (shown side by side)"},
        {"Ctrl+click", "pin a head in the heads grid"},
        {"right-click a head", "what-ifs: ablate it, keep one term of tau_q"},
        {"click a token", "select it as the query"},
        {"wheel / drag", "zoom / pan the attention map"},
        {"double-click", "reset the map's zoom"},
    };
    const float wrap = ImGui::GetFontSize() * 30.0f;
    if (ImGui::BeginTable("##shortcuts", 2, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg)) {
        for (const Shortcut& s : shortcuts) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(s.keys);
            ImGui::TableNextColumn();
            ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + wrap);  // Esc's line made the window wider than a 1000 px one
            ImGui::TextUnformatted(s.action);
            ImGui::PopTextWrapPos();
        }
        ImGui::EndTable();
    }
    ImGui::TextDisabled("Arrows and letters act when the text editor does not have the focus.");
    ImGui::Separator();
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + wrap);
    ImGui::TextColored(ImVec4(1.0f, 0.85f, 0.4f, 1.0f), "What tau_q and tau_v mean");
    ImGui::TextUnformatted(
        "Selective Self-Attention gives every token learned inverse temperatures. tau_q(i) multiplies the "
        "logits of query row i before the softmax: larger tau_q = sharper, more selective attention; smaller = flatter. "
        "tau_v(j) scales the value vector of key j, so it weighs how much token j contributes once attended to. Each is "
        "built from a position term 1 + s ln(i) and a token term tanh(w . z + b). The comparison map is the same weights "
        "with tau = 1 everywhere (the vanilla counterfactual), or a separately trained twin model when one is open. Beside "
        "a fine-tune's base the base is a third side: SSA against tau = 1 is what the temperatures did, tau = 1 against the "
        "base what fine-tuning did to the other weights (their drift).");
    // The words the views use, from the catalogue that names them everywhere (app/core/quantities.cpp).
    ImGui::TextColored(ImVec4(1.0f, 0.85f, 0.4f, 1.0f), "Words the views use");
    for (const char* key : {"entropy", "spikiness", "sink_mass", "js_divergence", "js_total", "js_drift"}) {
        const Quantity& q = GetQuantity(key);
        ImGui::Bullet();
        ImGui::TextWrapped("%s: %s", q.label.c_str(), q.help.c_str());
    }
    ImGui::Bullet();
    ImGui::TextWrapped("dilution: how a row's normalised entropy grows with the query's position (Sparsity tab): attention spread "
                       "thinner over more keys; SSA's position term counters it.");
    ImGui::Bullet();
    ImGui::TextWrapped("logit lens (Lens tab): the loss of the next token read after each layer through the final norm and the "
                       "output head; direct logit attribution: each head's, MLP's, the embeddings' and the biases' part of that "
                       "token's logit, which sum to it.");
    ImGui::PopTextWrapPos();
    ImGui::End();
}

}  // namespace app
