#include "app/gui/views/view_run.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iterator>

#include <imgui.h>

#include "app/gui/views/view_common.h"
#include "model/io/files.h"
#include "viz/imgui/plot.h"
#include "viz/imgui/widgets.h"

namespace app {
namespace {

// The curve `key` of one run (RunCurveKeys): a head value's or the loss's, or the token's tau_q in the head.
RunCurve Curve(const RunTimeline& t, const std::string& key, HeadRef head, int token) {
    return key == kRunTokenCurve ? TokenTauQCurve(t, head.layer, head.head, token) : CurveOf(t, key, head);
}

std::string FileName(const std::string& path) { return std::filesystem::path(path).filename().string(); }

}  // namespace

void RunView::Draw(WindowState& state) {
    if (state.run_dir.empty()) {
        ImGui::TextWrapped("No training run is open: a folder of iter-NNNNNN-ckpt.pth files beside their lit_config.json (as the "
                           "official code saves them) or Hugging Face checkpoint-N/ folders (ssaviz --run DIR). The window opens the "
                           "last step; here a slider moves through the steps, and the curves show how the attention and "
                           "temperatures on the text grew over training.");
        if (ImGui::Button("Open a training run...")) state.ShowOpenDialog(OpenPurpose::Run);  // as File > Open a training run...
        return;
    }
    if (state.run_steps.empty()) {
        ImGui::TextWrapped("The run '%s' holds no checkpoints this ssaviz can find.", model::EscapeForMessage(state.run_dir).c_str());
        return;
    }
    DrawSteps(state);
    ImGui::Separator();
    DrawTimeline(state);
}

void RunView::DrawSteps(WindowState& state) {
    const int S = static_cast<int>(state.run_steps.size());
    ImGui::Text("%s: %d checkpoints, steps %lld .. %lld", model::EscapeForMessage(FileName(state.run_dir), 60).c_str(), S,
                static_cast<long long>(state.run_steps.front().step), static_cast<long long>(state.run_steps.back().step));
    int k = std::clamp(state.run_step, 0, S - 1);
    ImGui::BeginDisabled(k <= 0);
    if (ImGui::ArrowButton("##previous", ImGuiDir_Left)) state.run_step_request = k - 1;
    ImGui::EndDisabled();
    viz::ItemTooltip("[ : the previous step's checkpoint.");
    ImGui::SameLine();
    ImGui::BeginDisabled(k + 1 >= S);
    if (ImGui::ArrowButton("##next", ImGuiDir_Right)) state.run_step_request = k + 1;
    ImGui::EndDisabled();
    viz::ItemTooltip("] : the next step's checkpoint.");
    ImGui::SameLine();
    if (ImGui::Button(state.run_playing ? "Pause" : "Play")) {
        state.run_playing = !state.run_playing;
        if (state.run_playing && k + 1 >= S) state.run_step_request = 0;  // from the start again
    }
    viz::ItemTooltip("Steps through the run, each checkpoint's analysis shown in every view for a moment.");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(-1);
    const std::string shown = "step " + std::to_string(state.run_steps[k].step);
    int dragged = k;
    ImGui::SliderInt("##step", &dragged, 0, S - 1, shown.c_str(), ImGuiSliderFlags_AlwaysClamp);
    if (ImGui::IsItemDeactivatedAfterEdit()) state.run_step_request = dragged;  // on release: one checkpoint opened
    viz::ItemTooltip("Drag to a step and let go: that checkpoint opens, and every view shows its analysis of the text.");
    const std::string& path = state.run_steps[k].path;
    const bool open = state.model && state.model->dir == path;
    ImGui::TextDisabled("%s %s", open ? "showing" : "opening", model::EscapeForMessage(FileName(path), 80).c_str());
}

void RunView::DrawTimeline(WindowState& state) {
    const RunTrack* t = state.timeline.get();
    const bool current = t && t->text == state.text && t->lens == state.timeline_lens;
    const bool one_token = state.analysis && state.analysis->n_tokens < 2 && !state.busy;  // no curve to draw
    if (state.timeline_running) {
        if (ImGui::Button("Stop the timeline")) state.stop_timeline_request = true;
        viz::ItemTooltip("Stops it (Esc too); the steps run so far stay, and 'Go on with the timeline' "
                         "runs the rest.");
    } else {
        ImGui::BeginDisabled(one_token);
        if (ImGui::Button(t && current && !t->done ? "Go on with the timeline" : t ? "Run the timeline again" : "Run the timeline"))
            state.timeline_request = true;
        ImGui::EndDisabled();
        viz::ItemTooltip(one_token ? kRunNeedsTwoTokens
                                   : "Every checkpoint of the run on the shown text, one opened at a time beside the shown model (`ssaviz "
                                     "export --run` writes the same numbers).");
    }
    ImGui::SameLine();
    ImGui::BeginDisabled(state.timeline_running);
    ImGui::Checkbox("Lens", &state.timeline_lens);
    ImGui::EndDisabled();
    viz::ItemTooltip("Each step's loss on the text read after each layer (the logit lens) too, on every side: the curves 'loss "
                     "by layer' (when each layer came to predict the text) and 'SSA - comparison, by layer'. A lens pass a side and "
                     "step more (`ssaviz export --run --lens`). Run the timeline again to add it.");
    ImGui::SameLine();
    if (one_token) ImGui::TextDisabled("the text is one token: give it two or more");
    else if (state.timeline_running && t) ImGui::TextDisabled("%zu of %zu steps...", t->tried, t->total);
    else if (state.timeline_running) ImGui::TextDisabled("opening the first step...");
    else if (!t) ImGui::TextDisabled("the curves of the text over training: not run yet");
    else if (t->text != state.text) ImGui::TextDisabled("the text changed since it ran");
    else if (t->done && state.analysis && !state.analysis_pending && !CurrentTimeline(state)) {
        ImGui::PushTextWrapPos(0.0f);  // a long reason wraps rather than losing its end past the pane
        ImGui::TextDisabled("%s", TimelineMismatch(state).c_str());
        ImGui::PopTextWrapPos();
    }
    else if (!current) ImGui::TextDisabled(state.timeline_lens ? "it ran without the lens" : "it ran with the lens");
    else if (!t->done) ImGui::TextDisabled("stopped at %zu of %zu steps", t->tried, t->total);
    ImGui::SameLine();
    viz::HelpMarker("Each checkpoint runs the text with the shown comparison. A curve is a head value's mean over each layer's "
                    "heads (coloured) and over every head (white) against the training step; the shown step is marked.\n"
                    "Steps to sparsity: the first step at which a head's mean entropy on the text is below half of its entropy "
                    "at the run's first step ('-': never). A head that gets there sooner found its distinct, sparse attention sooner.\n"
                    "The loss is the next-token loss on the shown text: a run trained for another task need not lower it (the "
                    "graph experiment trains its attention rows against the target maps, not the next token).\n"
                    "With Lens ticked (or --lens), the loss read after each layer: each layer's but the last as coloured lines, "
                    "the model's own (after its last layer) on top. Where a layer's line falls, that layer came to predict the "
                    "text's next tokens. 'SSA - comparison, by layer' is SSA's less its comparison's (tau = 1: the temperatures' "
                    "part, layer by layer), 'SSA - base' less the base's.\n"
                    "File > Export (Ctrl+E) writes the timeline in run/: run.csv, tau_q.npy and every curve, this token's too, in "
                    "run/curves/ as PNG and SVG.");
    if (!t || t->timeline.steps.empty()) {
        for (const std::string& f : t ? t->failed : std::vector<std::string>{})
            if (!(one_token && f == kRunNeedsTwoTokens)) ImGui::TextWrapped("failed: %s", f.c_str());  // said beside the button
        return;
    }
    // The curves this timeline offers (against a base also JS to base and the drift); a session's
    // curve it lacks shows entropy, and is kept.
    const std::vector<std::string> keys = RunCurveKeys(t->timeline);
    std::string& asked = state.settings.run_curve;
    const std::string key = std::find(keys.begin(), keys.end(), asked) != keys.end() ? asked : keys.front();
    const std::string& compared = t->timeline.compare_name;  // "tau = 1": the combo names it as the curve's title does
    float widest = 0;  // as wide as its longest name, within the pane ("SSA - comparison, by layer (le" was cut)
    for (const std::string& k : keys) widest = std::max(widest, ImGui::CalcTextSize(RunCurveLabel(k, compared).c_str()).x);
    const ImGuiStyle& style = ImGui::GetStyle();
    ImGui::SetNextItemWidth(std::min(widest + ImGui::GetFrameHeight() + 2 * style.FramePadding.x + style.ItemInnerSpacing.x,
                                     ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize("curve").x - style.ItemInnerSpacing.x));
    if (ImGui::BeginCombo("curve", RunCurveLabel(key, compared).c_str())) {
        for (const std::string& k : keys)
            if (ImGui::Selectable(RunCurveLabel(k, compared).c_str(), k == key)) asked = k;
        ImGui::EndCombo();
    }
    viz::ItemTooltip("What the curves show against step. The selected token's tau_q: the query selected in the map (the last "
                     "token if none) in the selected head, over the run; the compare run's beside it. Against a base (--base "
                     "DIR): JS to base, all that fine-tuning had changed by each step, and JS drift, the other weights' part "
                     "(JS to the comparison, tau = 1, is then the temperatures' part).");
    const int token = RunTabToken(state, t->timeline).token;
    if (key == kRunTokenCurve) {
        ImGui::SameLine();
        ImGui::TextDisabled("token %d, layer %d head %d", token, state.selected.layer, state.selected.head);
    }
    // The token's curve follows the selected token and head; a head value's the selected head's line.
    const bool token_moved = (key == kRunTokenCurve && m_token != token) || !(m_head == state.selected);
    if (m_for != state.timeline || m_plot_key != key || token_moved) {
        m_for = state.timeline;
        m_plot_key = key;
        m_token = token;
        m_head = state.selected;
        std::vector<RunCurve> curves = {Curve(t->timeline, key, m_head, token)};
        if (t->compare && !t->compare->steps.empty()) curves.push_back(Curve(*t->compare, key, m_head, token));
        m_plot = RunCurvesPlot(key, curves, /*points=*/false);
        m_sparse = StepsToSparsity(t->timeline);
        m_halfway = StepsToLensHalfway(t->timeline);
        m_sparse_compare.clear();
        if (t->compare && t->compare->n_layer == t->timeline.n_layer && t->compare->n_head == t->timeline.n_head)
            m_sparse_compare = StepsToSparsity(*t->compare);
    }
    if (state.run_step >= 0 && state.run_step < static_cast<int>(state.run_steps.size()))
        m_plot.Options.XMarker = static_cast<float>(state.run_steps[state.run_step].step);
    const ImVec2 at = ImGui::GetCursorScreenPos();
    const float plot_h = std::max(160.0f, ImGui::GetContentRegionAvail().y * 0.55f);
    viz::DrawPlot("##run_curves", ImVec2(0, plot_h), m_plot);
    state.regions["run_curves"] = Rect{at.x, at.y, ImGui::GetItemRectSize().x, plot_h};
    // When each layer came to predict the text: SSA's own lens loss, under its curve alone (under a
    // difference's, which need not fall, it read as the difference's).
    if (key == kRunLensCurve && t->timeline.HasLens()) {
        std::string line = "Half of the fall:";
        for (size_t l = 1; l < m_halfway.size(); ++l)
            line += (l == 1 ? " " : ", ") + (l + 1 == m_halfway.size() ? std::string("its loss ") : "after L" + std::to_string(l - 1) + " ") +
                    (m_halfway[l] < 0 ? std::string("never") : "at step " + std::to_string(m_halfway[l]));
        WrappedLine(line);  // "its loss -" read as cut off
        viz::ItemTooltip("The first step at which the loss read after each layer had fallen half of the way from the run's first "
                         "step's to its last's ('never': it did not fall): when that layer came to predict the text. run.json's "
                         "steps_to_lens_halfway.");
    }

    const RunTimeline& tl = t->timeline;
    WrappedLine(m_sparse_compare.empty() ? "Steps to sparsity (layer x head)"  // wrapped: a narrow pane cut the second run's name
                                         : "Steps to sparsity (layer x head): " + tl.name + " / " + t->compare->name);
    // What the grid counts, where a reader looks for it (it was in the Lens checkbox's help alone).
    const std::string sparsity_help = "The first step at which a head's mean entropy on the text is below half of its entropy at the "
                                      "run's first step ('-': never). A head that gets there sooner found its distinct, sparse "
                                      "attention sooner.";
    if (!m_sparse_compare.empty())
        viz::ItemTooltip(("Run: " + model::EscapeForMessage(FileName(tl.dir), 60) + "\nCompare run: " +
                                model::EscapeForMessage(FileName(t->compare->dir), 60) + "\n" + sparsity_help).c_str());
    else
        viz::ItemTooltip(sparsity_help.c_str());
    const ImVec2 grid_at = ImGui::GetCursorScreenPos();
    if (ImGui::BeginTable("##sparsity", tl.n_head + 1, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
        ImGui::TableSetupColumn("");
        for (int h = 0; h < tl.n_head; ++h) ImGui::TableSetupColumn(("H" + std::to_string(h)).c_str());
        ImGui::TableHeadersRow();
        for (int l = 0; l < tl.n_layer; ++l) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::Text("L%d", l);
            for (int h = 0; h < tl.n_head; ++h) {
                ImGui::TableNextColumn();
                const size_t i = static_cast<size_t>(l) * tl.n_head + h;
                auto shown = [](int64_t step) { return step < 0 ? std::string("-") : std::to_string(step); };
                if (m_sparse_compare.empty() && m_sparse[i] < 0) ImGui::TextDisabled("-");
                else if (m_sparse_compare.empty()) ImGui::TextUnformatted(shown(m_sparse[i]).c_str());
                else ImGui::TextUnformatted((shown(m_sparse[i]) + " / " + shown(m_sparse_compare[i])).c_str());
            }
        }
        ImGui::EndTable();
    }
    state.regions["run_sparsity"] = Rect{grid_at.x, grid_at.y, ImGui::GetItemRectSize().x, ImGui::GetCursorScreenPos().y - grid_at.y};
    if (!t->failed.empty() && ImGui::CollapsingHeader(("Steps that failed (" + std::to_string(t->failed.size()) + ")").c_str()))
        for (const std::string& f : t->failed) ImGui::TextWrapped("%s", f.c_str());
}

}  // namespace app
