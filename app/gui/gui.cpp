// The window: App, its shell (worker events in, the panes and menus drawn, the views' requests
// out), and RunGui, the platform loop (GLFW + OpenGL 3.3 + Dear ImGui), kept thin: the test and
// benchmark drivers it calls each frame are in drivers.cpp.
//
// Index of this file:
// [SECTION] Views and small helpers
// [SECTION] App: start-up and sessions
// [SECTION] App: worker events (Poll)
// [SECTION] App: one frame (Draw: the three panes, the dialogs)
// [SECTION] App: the views' requests (HandleRequests), latency and questions for the drivers
// [SECTION] App: menu bar and examples, session popup, start panel, status bar, shortcuts
// [SECTION] The platform loop (RunGui)

#include "app/gui/gui.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <functional>

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <imgui_internal.h>  // the layout table's column weights

#include "app/core/examples.h"
#include "app/core/exit_code.h"
#include "app/core/names.h"
#include "app/export/session.h"
#include "app/gui/drivers.h"
#include "app/gui/fonts.h"
#include "app/gui/views/view_checkpoint.h"
#include "app/gui/views/view_export.h"
#include "app/gui/views/view_finetune.h"
#include "app/gui/views/view_graph.h"
#include "app/gui/views/view_head_table.h"
#include "app/gui/views/view_heads.h"
#include "app/gui/views/view_heatmap.h"
#include "app/gui/views/view_interventions.h"
#include "app/gui/views/view_lens.h"
#include "app/gui/views/view_run.h"
#include "app/gui/views/view_matrix.h"
#include "app/gui/views/view_model.h"
#include "app/gui/views/view_open.h"
#include "app/gui/views/view_predictions.h"
#include "app/gui/views/view_sparsity.h"
#include "app/gui/views/view_temperature.h"
#include "app/gui/views/view_text.h"
#include "app/gui/window_state.h"
#include "app/gui/worker.h"
#include "model/io/files.h"
#include "model/nn/interventions.h"
#include "viz/imgui/demo.h"
#include "viz/imgui/widgets.h"

namespace app {
namespace {

//-------------------------------------------------------------------------------------------------
// [SECTION] Views and small helpers
//-------------------------------------------------------------------------------------------------

const char* kExampleText =
    "The old lighthouse keeper climbed the stairs every evening. He lit the lamp, watched the ships, "
    "and wrote in his journal: the sea was calm, the wind came from the west, and nobody visited.";

// Every view of the window, listed where the app builds them.
struct Views {
    TextView text;
    HeatmapView heatmap;
    HeadsView heads;
    HeadTableView table;
    HeadMatrixView matrix;
    TemperatureView temperature;
    SparsityView sparsity;
    PredictionView predictions;
    InterventionsView interventions;
    FineTuneView finetune;
    LensView lens;
    RunView run;
    ModelView model;
    HelpView help;
    GraphView graph;
    OpenDialog open;
    CheckpointDialog checkpoint;
    ExportDialog export_dialog;
};

class App : public DrivenWindow {
public:
    //---------------------------------------------------------------------------------------------
    // [SECTION] App: start-up and sessions
    //---------------------------------------------------------------------------------------------

    App(const LaunchOptions& options, const std::optional<Session>& session)
        : m_device(options.device), m_worker([] { glfwPostEmptyEvent(); }) {
        // The example text unless the flags or the session give one (a session without a text keeps it).
        m_state.text = options.text.empty() ? kExampleText : options.text;
        m_text_auto = options.text.empty();
        m_state.recent_models = LoadRecentModels();
        if (session) ApplySession(*session);
        m_scale_chosen = session.has_value();
        m_session_path = options.session_path.empty() ? "ssaviz-session.json" : options.session_path;
        std::string model_dir = options.model_dir;
        for (const Example& x : m_examples)
            if (x.id == options.example) {
                ApplyExample(x);
                model_dir = *std::exchange(m_state.open_model_request, std::nullopt);
                if (!options.text.empty()) m_state.text = options.text, m_example_query.clear();  // --text over the example's
            }
        m_state.hints = options.hints;
        m_state.truncate = m_state.truncate || options.truncate;
        m_dtype = options.dtype;
        m_state.open_model_request = model_dir;  // its ModelOpened event requests the first analysis
        m_start_continue = options.continue_tokens;
        m_start_rank_heads = options.rank_heads;
        m_start_global_pass = options.global_pass;
        m_start_lens = options.lens;
        m_state.timeline_lens = m_state.timeline_lens || options.lens;  // with --run, the timeline's lens curve too
        // --lens with a run shows the lens curve, unless a session chose one.
        if (options.lens && !options.run.empty() && !session) m_state.settings.run_curve = kRunLensCurve;
        m_state.big_model_parameters = options.big_model_parameters;
        m_worker.SetBigModelParameters(options.big_model_parameters);
        m_show_export = options.show == "export";
        m_state.show_help = options.show == "help";
        m_state.show_demo = options.show == "demo";
        if (options.show == "open") m_state.ShowOpenDialog(OpenPurpose::Model);
        if (options.show == "open-base") m_state.ShowOpenDialog(OpenPurpose::Base);
        if (options.show == "open-run") m_state.ShowOpenDialog(OpenPurpose::Run);
        if (!options.run.empty()) {  // a training run: the model is its last step, or a session's (ResolveLaunch)
            OpenRun(options.run, options.compare_run, model_dir, /*show_tab=*/!session);
            m_start_timeline = true;
        }
        bool tab_asked = false;
        for (const char* tab : LaunchOptions::kTabs)
            if (options.show == TabFlag(tab)) m_state.settings.right_tab = tab, tab_asked = true;
        // --layer, --head, --query, --map: where the window opens (checked once the model is open).
        if (options.layer) m_state.selected.layer = *options.layer;
        if (options.head) m_state.selected.head = *options.head;
        if (options.query) m_state.query = *options.query;
        if (options.layer || options.head || options.query) m_place_from = "--layer " + std::to_string(m_state.selected.layer) + " --head " +
                                                                            std::to_string(m_state.selected.head);
        if (options.query) m_query_from = "--query";
        if (options.compare) ApplyCompare(*options.compare);
        // A fine-tune against its base (--base, --compare base) opens on what fine-tuning changed, the
        // Fine-tune tab, as the fine-tune's example does; unless --tab, a session or a run says.
        if (options.compare && options.compare->kind == CompareKind::Base && !tab_asked && !session && options.run.empty())
            m_state.settings.right_tab = "Fine-tune";
        if (options.map == "all") {
            m_state.settings.split = true;
        } else if (options.map == "three-way") {  // the Fine-tune tab beside it unless --tab chose one; a base is asked for
            m_state.settings.three_way = true;
            if (!tab_asked) m_state.settings.right_tab = "Fine-tune";
            m_three_way_asked = true;
        } else if (auto mode = ParseMapMode(options.map)) {
            m_state.settings.split = m_state.settings.three_way = false;
            m_state.settings.map_mode = *mode;
        }
    }

    // A place asked for that the model or text does not have: one line on stderr and in the status bar.
    void SayAdjusted(const std::string& line) {
        std::fprintf(stderr, "ssaviz: %s\n", model::EscapeForMessage(line).c_str());
        // The head's, the pins' and the query's lines together while the bar still shows the earlier ones.
        const bool after = !m_state.notice.empty() && m_state.notice == m_adjusted_notice;
        m_state.notice = m_adjusted_notice = after ? m_state.notice + "; " + line : line;
    }

    // --layer / --head, or a session's head or pins, past the model's shape: one line, and the
    // nearest head is shown (pins past it are let go).
    void CheckStartPlace(const model::ModelConfig& c) {
        const std::string from = std::exchange(m_place_from, std::string());
        if (from.empty()) return;
        const std::string shape = "the model has " + std::to_string(c.n_layer) + " layers x " + std::to_string(c.n_head) + " heads";
        if (m_state.selected.layer >= c.n_layer || m_state.selected.head >= c.n_head) SayAdjusted(from + ": " + shape + "; showing the nearest head");
        const size_t past = std::count_if(m_state.pinned.begin(), m_state.pinned.end(), [&](const Pin& p) { return p.layer >= c.n_layer || p.head >= c.n_head; });
        if (past > 0)
            SayAdjusted("the session's pinned heads: " + std::to_string(past) + " past the model's " + std::to_string(c.n_layer) + " x " +
                        std::to_string(c.n_head) + " heads, unpinned");
    }

    // --query, or a session's query, past the text: one line, and the last token is the query (as
    // --layer's nearest head).
    void CheckStartQuery(int tokens) {
        const std::string from = std::exchange(m_query_from, std::string());
        if (from.empty() || m_state.query < tokens) return;
        SayAdjusted(from + " " + std::to_string(m_state.query) + ": the text has " + std::to_string(tokens) + " token" + (tokens == 1 ? "" : "s") +
                    "; showing the last");
    }

    // A temperature of position alone (the official checkpoints' one slope a layer: every head of
    // a layer and every token at a position alike) varies little within a head next to the
    // model's range: the token strip and the map's strips open on the shown head's own scale, so
    // their colours vary. A session's choice stands.
    void FitTemperatureScale(const model::ModelConfig& c) {
        if (m_scale_chosen) return;
        const model::TemperatureForm& q = c.query;
        m_state.settings.per_head_scale = q.position != model::PositionForm::None && q.token == model::TokenForm::None;
        m_views.export_dialog.Options().figures.temperature_per_head = m_state.settings.per_head_scale;  // its highlight as the strip
    }

    // Selections and settings now; the twin once the model is open.
    void ApplySession(const Session& s) {
        m_state.truncate = s.truncate;
        m_state.selected = s.selected;
        m_state.pinned = s.pinned;
        m_state.query = s.query;
        // Checked once the model is open and its text analysed (a session's model may have changed since).
        m_place_from = "the session's head L" + std::to_string(s.selected.layer) + " H" + std::to_string(s.selected.head);
        m_query_from = "the session's query";
        m_state.settings = s.settings;
        m_state.timeline_lens = IsRunLensCurve(s.settings.run_curve);  // the curve it showed needs the timeline's lens
        ++m_state.layout_generation;  // the panes take the session's sizes
        m_apply_tab = true;
        m_views.export_dialog.SetOptions(s.export_options);
        ApplyCompare(s.compare);
        if (!s.interventions.empty() || !m_state.interventions.empty()) m_state.interventions_request = s.interventions;
    }

    // The comparison a session or --compare / --base asks for, requested once the model is open.
    void ApplyCompare(const CompareSpec& compare) {
        m_pending_twin = compare.kind == CompareKind::Twin ? compare.twin_dir : "";
        if (compare.kind == CompareKind::LayerLocal) m_state.layer_local_request = true;
        if (compare.kind == CompareKind::Unedited) m_state.unedited_request = true;
        if (compare.kind == CompareKind::Base) {
            m_state.base_request = true;
            m_state.base_dir = compare.base_dir;  // "": the base beside the model
        }
    }

    Session CurrentSession() {
        Session s;
        s.model_dir = m_state.model ? m_state.model->dir : "";
        s.run_dir = m_state.run_dir;
        s.compare_run_dir = m_state.compare_run_dir;
        s.compare = m_state.twin ? CompareSpec::Twin(m_state.twin->dir) : ShownComparison();
        s.interventions = m_state.interventions;
        s.device = m_device;
        s.text = m_state.text;
        s.truncate = m_state.truncate;
        s.selected = m_state.selected;
        s.pinned = m_state.pinned;
        s.query = m_state.query;
        s.settings = m_state.settings;
        m_views.export_dialog.EnsureOptions(m_state);  // its options' defaults from the view (it stays closed)
        s.export_options = m_views.export_dialog.Options();
        return s;
    }

    // What the shown analysis ran on, as `ssaviz export`'s flags: the export dialog's command line.
    CommandOptions CommandSource() const {
        CommandOptions o;
        if (m_state.model) o.model_dir = m_state.model->dir;
        o.device = m_device;
        o.dtype = m_dtype;
        o.hints = m_state.hints;
        o.text = m_state.text;
        o.truncate = m_state.truncate;
        o.compare = m_state.twin ? CompareSpec::Twin(m_state.twin->dir) : ShownComparison();
        if (!m_state.interventions.empty()) o.ablate = model::FormatInterventions(m_state.interventions);
        return o;
    }

    void OnDrop(int count, const char** paths) {
        if (count > 0) m_state.OpenAnotherModel(paths[0]);
    }

    // A paste, before ImGui's fields filter it: what they leave out, said once a paste.
    void OnPaste(const char* text) {
        if (std::string notice = PasteNotice(text); !notice.empty()) m_state.notice = std::move(notice);
    }

    //---------------------------------------------------------------------------------------------
    // [SECTION] App: worker events (Poll)
    //---------------------------------------------------------------------------------------------

    // Takes what the worker finished since the last frame.
    void Poll() {
        for (WorkerEvent& e : m_worker.TakeEvents()) {
            using Kind = WorkerEvent::Kind;
            switch (e.kind) {
                case Kind::ModelOpened: {
                    m_model_open_request = 0;
                    // A run opened at a step that does not open (a truncated last checkpoint): the
                    // latest before it that does, said once, as export --run skips such steps; once a
                    // step is shown, the slider's failures are said as they are.
                    if (e.passed_over > 0 && e.request == m_step_open_request) {
                        const auto opened = std::find_if(m_state.run_steps.begin(), m_state.run_steps.end(),
                                                         [&](const RunStep& s) { return s.path == e.opened_dir; });
                        if (opened != m_state.run_steps.end() && m_state.run_step >= 0 && m_state.run_step < static_cast<int>(m_state.run_steps.size())) {
                            const RunStep& bad = m_state.run_steps[m_state.run_step];
                            // The count before the error, which the line may cut.
                            SayAdjusted("step " + std::to_string(bad.step) + " (" + std::filesystem::path(bad.path).filename().string() + ")" +
                                        (e.passed_over > 1 ? " and the " + std::to_string(e.passed_over - 1) + " steps before it do not open"
                                                           : " does not open") +
                                        ", showing step " + std::to_string(opened->step) + ": " + e.passed_over_error);
                            m_state.run_step = static_cast<int>(opened - m_state.run_steps.begin());
                        }
                    }
                    m_state.model = e.info;
                    CheckStartPlace(e.info->config);
                    FitTemperatureScale(e.info->config);
                    m_state.twin_beside = e.twin_beside;
                    m_state.base_beside = e.base_beside;
                    m_state.vocab = e.vocab;
                    m_state.head_impacts.reset();  // another model's heads
                    m_state.twin.reset();
                    m_state.error.clear();
                    RememberRecentModel(e.info->dir, &m_state.recent_models);
                    // A graph model opens with its Figure 3 panel, unless it is a run's step: the panel
                    // would cover the Run tab's table and chart (View > Graph experiment opens it).
                    const std::string task = TrainedTask(e.info->dir);
                    if (task == "graph" && m_state.run_dir.empty()) m_state.show_graph = true;
                    // A synthetic task's model cannot read the English example text: while the text
                    // is one the window chose, it is the task's own (A..H for the graph, a passkey
                    // sequence), and the example text again for any other model.
                    if (m_text_auto) {
                        std::string text = TaskText(task, e.info->config.n_positions);
                        if (text.empty()) text = kExampleText;
                        if (text != m_state.text) m_state.text = std::move(text), m_glyphs_dirty = true;
                    }
                    // A twin the session or example named opens now; screenshots wait for it (and only
                    // for it: other requests queued meanwhile, a comparison, answer without a twin).
                    m_twin_expected = !m_pending_twin.empty();
                    if (m_twin_expected) m_worker.OpenTwin(std::exchange(m_pending_twin, std::string()));
                    m_state.global_pass_running = false;
                    SetComparisonShown(e.comparison);
                    break;
                }
                case Kind::TwinOpened: m_state.twin = e.info; m_state.error.clear(); m_twin_expected = false; ClearComparisonFailure(); break;
                case Kind::TwinClosed: m_state.twin.reset(); break;
                case Kind::ComparisonSet:
                    SetComparisonShown(e.comparison);
                    ClearComparisonFailure();
                    m_bases.Set(e.request);
                    break;
                case Kind::ComparisonFailed:
                    // The comparison stays what runs (e.comparison): said in the status bar until
                    // another is set, and a screenshot or export run ends with it (FailureExit).
                    m_twin_expected = false;
                    if (auto shown = m_bases.Failed(e.request)) m_state.base_dir = *shown;
                    SetComparisonShown(e.comparison);
                    m_comparison_failure = {e.error_kind, e.error};
                    m_state.notice = e.error;
                    break;
                case Kind::Analysis:
                    m_state.ShowAnalysis(e);
                    // The global pass is shown once its analysis arrives whole (with its predictions).
                    if (e.analysis->comparison == model::Comparison::Counterfactual && e.analysis->HasComparePredictions())
                        m_state.global_pass_running = false;
                    m_state.error.clear();
                    // --map three-way without a base asked for (flags or session): the map shows SSA alone, said.
                    if (std::exchange(m_three_way_asked, false) && !e.analysis->HasBase() && !m_state.compare_base)
                        SayAdjusted("--map three-way: no base to set SSA against (--base DIR, or --compare base for the one beside the model); "
                                    "showing SSA");
                    CheckStartQuery(e.analysis->n_tokens);
                    m_state.ClampSelection();
                    if (!m_twin_expected) SelectExampleQuery();
                    m_shown_request = std::max(m_shown_request, e.request);
                    m_glyphs_dirty = true;
                    break;
                case Kind::InterventionsSet:
                    m_state.interventions = e.interventions;
                    if (!e.error.empty()) m_state.notice = e.error;
                    m_dropped_what_ifs = e.error;  // a screenshot or export run ends with it (FailureExit)
                    break;
                case Kind::Generated:
                    if (e.request != m_generation_request) break;  // stopped by an edit: the text is the user's now
                    if (e.analysis) {
                        m_state.text = e.text;
                        m_text_auto = false;
                        m_state.generated_prefix = e.text;
                        m_state.ShowAnalysis(e);
                        m_state.error.clear();
                        m_state.ClampSelection();
                        m_shown_request = std::max(m_shown_request, e.request);
                        m_glyphs_dirty = true;
                    }
                    if (e.last) {
                        m_state.generating = false;
                        m_generation_request = 0;
                        if (!e.error.empty()) m_state.notice = e.error;
                    }
                    break;
                case Kind::Lens:
                    if (e.request != m_lens_request) break;
                    m_state.lens = e.lens;
                    m_state.lens_running = false;
                    break;
                case Kind::LensAt:
                    if (e.request != m_lens_at_request) break;
                    m_state.lens_at = e.lens_at;
                    m_lens_at_request = 0;
                    break;
                case Kind::Prefetched:  // the Run tab's next step, ready aside: nothing to show
                    break;
                case Kind::Timeline:
                    if (e.request != m_timeline_request) break;
                    m_state.timeline = e.timeline;
                    m_state.timeline_running = !e.timeline->done;
                    break;
                case Kind::HeadImpacts:
                    if (e.request != m_ranking_request) break;
                    m_state.head_impacts = e.impacts;
                    m_state.ranking_heads = !e.impacts->done && !e.impacts->cancelled;
                    break;
                case Kind::Error:
                    m_state.error = e.error;
                    if (e.request == m_step_open_request && e.passed_over > 0)  // a run none of whose steps up to this one opens
                        m_state.error += "; nor do the " + std::to_string(e.passed_over) + " steps before it";
                    // A model that did not open while another is shown: said in the status bar too, where the
                    // shown model's next analysis (its comparison changed for the open) does not clear it.
                    if (e.request == m_model_open_request && m_state.model) m_state.notice = "did not open: " + m_state.error;
                    if (e.request == m_model_open_request) m_model_open_request = 0;
                    m_twin_expected = false;
                    m_state.global_pass_running = false;
                    if (e.request == m_lens_request) m_state.lens_running = false;
                    if (e.request == m_lens_at_request) m_lens_at_request = 0, m_lens_at_failed = m_lens_at_asked;
                    if (e.request == m_timeline_request) m_state.timeline_running = false, m_timeline_wanted = false;  // not again every frame
                    break;
            }
            // A model or twin change makes the current result stale (without a model there is none:
            // a comparison set before a model that failed to open keeps the model's error shown).
            if ((e.kind == Kind::ModelOpened || e.kind == Kind::TwinOpened || e.kind == Kind::TwinClosed || e.kind == Kind::ComparisonSet ||
                 e.kind == Kind::InterventionsSet) &&
                m_state.model)
                RequestAnalysis();
        }
        const bool was_busy = m_state.busy;
        m_state.busy = m_worker.Busy();
        if (!m_state.busy) m_state.lens_running = m_state.timeline_running = false;  // a job stopped by a newer request says nothing
        if (m_state.busy && !was_busy) m_busy_since_ms = NowMs();
        m_state.busy_ms = m_state.busy ? NowMs() - m_busy_since_ms : 0.0;
        // A model about to open (a run's step from File > Open a training run...): the jobs wait
        // for its analysis, not the one still shown of the model before.
        const bool requests_pending = m_state.interventions_request || m_state.unedited_request || m_state.layer_local_request ||
                                      m_state.base_request || m_state.open_model_request.has_value() || m_views.checkpoint.Showing();
        m_state.analysis_pending = requests_pending || m_twin_expected;
        m_state.timeline_alone = m_state.busy && m_worker.OnlyTheTimeline();
        if (m_state.analysis && !m_state.busy && !m_twin_expected && !requests_pending) StartJobsAskedFor();
        m_state.progress = m_worker.Progress();
        m_worker.SetShownHead(m_state.selected.layer, m_state.selected.head);
    }

    //---------------------------------------------------------------------------------------------
    // [SECTION] App: one frame (Draw: the three panes, the dialogs)
    //---------------------------------------------------------------------------------------------

    void Draw() {
        m_state.regions.clear();
        m_state.want_frame = false;
        const ImGuiViewport* viewport = ImGui::GetMainViewport();
        ImGui::SetNextWindowPos(viewport->WorkPos);
        ImGui::SetNextWindowSize(viewport->WorkSize);
        ImGui::PushStyleVar(ImGuiStyleVar_WindowRounding, 0.0f);
        ImGui::Begin("ssaviz", nullptr,
                     ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_MenuBar |
                         ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoSavedSettings);
        ImGui::PopStyleVar();
        DrawMenuBar();
        if (!m_state.error.empty()) {
            ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.45f, 0.4f, 1.0f));
            ImGui::TextWrapped("%s", m_state.error.c_str());
            ImGui::PopStyleColor();
        }
        const float status_height = ImGui::GetFrameHeightWithSpacing() + ImGui::GetStyle().ItemSpacing.y;
        const ImVec2 avail = ImGui::GetContentRegionAvail();
        const ImVec2 column(0.0f, avail.y - status_height);  // children fill the column, not the window
        // Drag the borders between the panes to resize them; the shares are kept in the session. A
        // new table id when a session (or View > Reset pane sizes) sets them, so they take effect.
        PaneLayout& layout = m_state.settings.layout;
        const std::string table_id = "##layout" + std::to_string(m_state.layout_generation);
        if (ImGui::BeginTable(table_id.c_str(), 3, ImGuiTableFlags_Resizable | ImGuiTableFlags_BordersInnerV,
                              ImVec2(avail.x, column.y))) {
            ImGui::TableSetupColumn("left", ImGuiTableColumnFlags_WidthStretch, layout.left);
            ImGui::TableSetupColumn("center", ImGuiTableColumnFlags_WidthStretch, layout.center);
            ImGui::TableSetupColumn("right", ImGuiTableColumnFlags_WidthStretch, layout.right);
            if (ImGuiTable* table = ImGui::GetCurrentTable()) {  // the user's drag, read back as shares
                const float sum = table->Columns[0].StretchWeight + table->Columns[1].StretchWeight + table->Columns[2].StretchWeight;
                if (table->Columns[0].StretchWeight > 0 && table->Columns[1].StretchWeight > 0 && table->Columns[2].StretchWeight > 0) {
                    layout.left = table->Columns[0].StretchWeight / sum;
                    layout.center = table->Columns[1].StretchWeight / sum;
                    layout.right = table->Columns[2].StretchWeight / sum;
                }
            }
            ImGui::TableNextColumn();
            if (ImGui::BeginChild("##left", column)) {
                m_views.text.Draw(m_state);
                if (ImGui::CollapsingHeader("Model", ImGuiTreeNodeFlags_DefaultOpen)) m_views.model.Draw(m_state);
            }
            ImGui::EndChild();
            ImGui::TableNextColumn();
            if (ImGui::BeginChild("##center", column)) {
                // Not while a model is on its way (an example's flashed "No model is open" before its
                // worker took the request).
                if (!m_state.model && !m_state.busy && !m_state.open_model_request && m_model_open_request == 0) DrawStartPanel();
                else m_views.heatmap.Draw(m_state);
            }
            ImGui::EndChild();
            ImGui::TableNextColumn();
            if (ImGui::BeginChild("##right", column)) {
                // Tabs keep their whole names: a pane too narrow for them all scrolls them (arrows at
                // the right; the selected tab scrolled into view), as cut names ("Fine-t...",
                // "Sparsi...") read as none. The list button at the left names them all, and
                // Ctrl+PageUp / PageDown step through them.
                constexpr size_t kTabs = std::size(LaunchOptions::kTabs);
                const ImGuiStyle& style = ImGui::GetStyle();
                float whole = ImGui::GetFrameHeight() + style.ItemInnerSpacing.x;  // the list button
                for (const char* name : LaunchOptions::kTabs) whole += ImGui::CalcTextSize(name).x + 2 * style.FramePadding.x + style.ItemInnerSpacing.x;
                const bool narrow = ImGui::GetContentRegionAvail().x < whole;
                if (ImGui::BeginTabBar("##right_tabs", ImGuiTabBarFlags_TabListPopupButton |
                                                           (narrow ? ImGuiTabBarFlags_FittingPolicyScroll : ImGuiTabBarFlags_FittingPolicyResizeDown))) {
                    // A session (or --show TAB) opens its tab once; after that the user's clicks rule.
                    const bool apply = std::exchange(m_apply_tab, false);
                    auto tab = [&](const char* name, const char* help, auto&& draw) {
                        const bool chosen = apply && m_state.settings.right_tab == name;
                        const bool open = ImGui::BeginTabItem(name, nullptr, chosen ? ImGuiTabItemFlags_SetSelected : 0);
                        if (ImGui::IsItemHovered()) viz::Tooltip("%s", help);  // what a tab holds, before it is opened
                        if (open) {
                            if (!apply) m_state.settings.right_tab = name;
                            draw();
                            ImGui::EndTabItem();
                        }
                    };
                    const char* const help[] = {
                        "Every head as a thumbnail with a metric badge; click selects a head, Ctrl+click pins it.",
                        "A head metric as a layer x head matrix of numbers.",
                        "The selected head's tau_q and tau_v against position, with the learned 1 + s ln i and its fitted trend.",
                        "Every head's metrics in a sortable table.",
                        "Plots: normalised entropy against position (dilution), the tau_q histogram, QK eigenvalue variance, sink mass.",
                        "The model's most likely next tokens after the query, each side's, and Continue (Ctrl+G).",
                        "Change a head's or a layer's temperatures and watch the loss; rank the heads by what theirs do.",
                        "Beside a base: what fine-tuning changed, split into the temperatures' part and the other weights' drift.",
                        "The logit lens (the loss read after each layer) and each head's part of the next token's logit.",
                        "A training run's checkpoints: step through them; the text's curves over training."};
                    static_assert(sizeof(help) / sizeof(help[0]) == kTabs, "a line for every tab");
                    // Each tab's view, in LaunchOptions::kTabs's order (the names --tab takes).
                    const std::function<void()> views[] = {
                        [&] { m_views.heads.Draw(m_state); },         [&] { m_views.matrix.Draw(m_state); },
                        [&] { m_views.temperature.Draw(m_state); },   [&] { m_views.table.Draw(m_state); },
                        [&] { m_views.sparsity.Draw(m_state); },      [&] { m_views.predictions.Draw(m_state); },
                        [&] { m_views.interventions.Draw(m_state); }, [&] { m_views.finetune.Draw(m_state); },
                        [&] { m_views.lens.Draw(m_state); },          [&] { m_views.run.Draw(m_state); }};
                    static_assert(sizeof(views) / sizeof(views[0]) == kTabs, "a view for every tab");
                    for (size_t i = 0; i < kTabs; ++i) tab(LaunchOptions::kTabs[i], help[i], views[i]);
                    ImGui::EndTabBar();
                }
            }
            ImGui::EndChild();
            ImGui::EndTable();
        }
        DrawStatusBar();
        ImGui::End();

        m_views.help.Draw(m_state);
        m_views.graph.Draw(m_state);
        m_views.open.Draw(m_state);
        m_views.checkpoint.Draw(m_state);
        if (std::exchange(m_show_export, false)) m_views.export_dialog.Show(m_state);
        if (m_views.export_dialog.IsOpen()) m_views.export_dialog.SetSource(CommandSource());
        m_views.export_dialog.Draw(m_state);
        DrawSessionPopup();
        if (m_state.show_demo) viz::ShowDemoWindow(&m_state.show_demo);
        HandleShortcuts();
    }

    //---------------------------------------------------------------------------------------------
    // [SECTION] App: the views' requests (HandleRequests), latency and questions for the drivers
    //---------------------------------------------------------------------------------------------

    // After the frame: act on what the views asked for.
    void HandleRequests() {
        if (m_state.open_model_request) {
            const std::string path = *std::exchange(m_state.open_model_request, std::nullopt);
            if (std::exchange(m_state.forget_base, false) && !m_state.base_dir.empty()) {
                m_state.base_dir.clear();  // the model before's base; one beside this model is still offered
                if (m_state.compare_base) {  // set before the open, so the model opens without it
                    m_state.compare_base = false;
                    m_worker.SetComparison(ShownComparison());
                }
            }
            // A checkpoint whose tensors leave its shape or SSA forms open: ask before loading.
            const auto step = std::find_if(m_state.run_steps.begin(), m_state.run_steps.end(), [&](const RunStep& s) { return s.path == path; });
            const bool run_step = step != m_state.run_steps.end();
            // A run's step while none is shown (a run just opened at its last): the steps before it,
            // latest first, in case it does not open (truncated last checkpoints): the worker shows
            // the latest that does, in one request.
            std::vector<std::string> fallbacks;
            if (run_step && !m_state.model)
                for (auto it = std::make_reverse_iterator(step); it != m_state.run_steps.rend(); ++it) fallbacks.push_back(it->path);
            // The base it opens beside, asked for with it (--base, a session's) or shown: what its folder
            // lacks (lit_config.json, the tokenizer: the official fine-tunes') is read from the base's.
            std::optional<CompareSpec> beside;
            if (m_state.base_request.value_or(false) || m_state.compare_base) {
                beside = CompareSpec::Base(m_state.base_dir);
                beside->base_of_the_run = run_step;  // a run's step: the run's base
            }
            // Its shape asked for only where neither its folder nor the base's config gives it.
            if (!m_views.checkpoint.Ask(path, beside ? HintsWithBase(m_state.hints, path, *beside) : m_state.hints)) {
                const uint64_t id = m_worker.OpenModel(path, m_device, m_state.hints, m_dtype, run_step, std::move(fallbacks), beside);
                m_model_open_request = id;
                if (run_step) m_step_open_request = id;
            }
        }
        if (m_state.open_twin_request) {
            m_worker.OpenTwin(*m_state.open_twin_request);
            m_state.open_twin_request.reset();
        }
        if (m_state.open_base_request) {  // the comparison below takes it; one that fails leaves the last that opened
            m_state.base_dir = *std::exchange(m_state.open_base_request, std::nullopt);
            m_state.base_request = true;
        }
        if (m_state.open_run_request) {  // its last step, and its timeline once that step is shown
            const std::string dir = *std::exchange(m_state.open_run_request, std::nullopt);
            if (dir == m_state.run_dir && !m_state.run_steps.empty()) {  // the run open: its tab, its timeline kept
                m_state.settings.right_tab = "Run", m_apply_tab = true;
            } else if (std::string why = OpenRun(dir, ""); !why.empty()) {
                m_state.notice = why;  // the run open stays
            } else {
                m_state.open_model_request = m_state.run_steps.back().path;
                m_start_timeline = true;
            }
        }
        if (m_state.close_twin_request) {
            m_worker.CloseTwin();
            m_state.close_twin_request = false;
        }
        if (m_state.layer_local_request || m_state.unedited_request || m_state.base_request) {
            if (m_state.layer_local_request) {
                m_state.layer_local = *m_state.layer_local_request;
                m_state.compare_unedited = false;
            }
            if (m_state.unedited_request) m_state.compare_unedited = *m_state.unedited_request;
            // The base is the comparison chosen last; any other choice leaves it.
            m_state.compare_base = m_state.base_request.value_or(false);
            m_state.layer_local_request.reset();
            m_state.unedited_request.reset();
            m_state.base_request.reset();
            const CompareSpec spec = ShownComparison();  // a base with its folder (a session's "base")
            const uint64_t id = m_worker.SetComparison(spec);
            if (spec.kind == CompareKind::Base) m_bases.Asked(id, spec.base_dir);
            if (m_state.twin) m_worker.CloseTwin();
        }
        if (m_state.interventions_request) {
            m_worker.SetInterventions(*std::exchange(m_state.interventions_request, std::nullopt));
            m_state.notice.clear();
        }
        if (m_state.text_changed) {
            m_state.text_changed = false;
            m_text_auto = false;  // the user's text now
            m_state.generating = false;  // an edit stops Continue: results still on their way are dropped
            m_generation_request = 0;
            m_state.ForgetGeneratedIfEdited();
            RequestAnalysis();
            m_glyphs_dirty = true;
        }
        // Stopping a ranking or Continue leaves a timeline they held back to go on; the timeline
        // itself is stopped on its own (where it is: "Go on with the timeline" resumes it).
        if (std::exchange(m_state.cancel_job_request, false)) m_worker.Cancel();
        if (std::exchange(m_state.stop_timeline_request, false) && (m_state.timeline_running || m_timeline_wanted)) {
            if (m_state.timeline_running) m_worker.Cancel();
            m_timeline_wanted = false;
        }
        if (std::exchange(m_state.lens_request, false) && m_state.analysis && !m_state.generating) {
            const model::Analysis& a = *m_state.analysis;
            m_lens_request = m_worker.RunLens(a.tokens.ids, !a.compare_label.empty() && a.comparison != model::Comparison::Unedited, LensKey(a));
            m_state.lens_running = true;
        }
        // The Lens tab's selected query, once the worker is idle (never stopping a job: the worker
        // is asked again, as a lens posted just above is not in m_state.busy yet), each position
        // asked once: one that failed is not asked again until the text or model changes.
        if (const int t = std::exchange(m_state.lens_at_wanted, -1);
            t >= 0 && m_state.analysis && !m_worker.Busy() && !m_state.lens_running && !m_state.generating && m_lens_at_request == 0 &&
            m_state.model) {
            const model::Analysis& a = *m_state.analysis;
            const std::string asked = m_state.model->dir + '\n' + LensKey(a) + '\n' + std::to_string(t) + " " + std::to_string(static_cast<int>(m_state.settings.lens_target)) +
                                      '\n' + std::to_string(std::hash<std::string>{}(m_state.text));
            if (asked != m_lens_at_failed) {
                m_lens_at_asked = asked;
                m_lens_at_request =
                    m_worker.RunLensAt(a.tokens.ids, t, !a.compare_label.empty() && a.comparison != model::Comparison::Unedited, LensKey(a),
                                       m_state.settings.lens_target);
            }
        }
        if (std::exchange(m_state.timeline_request, false) && !m_state.run_dir.empty() && !m_state.generating) {
            const bool same = m_state.timeline && m_state.timeline->text == m_state.text;
            m_timeline_request = m_worker.RunTimelineOf(m_state.run_dir, m_state.compare_run_dir, m_state.text, m_state.truncate,
                                                        m_state.timeline_lens, same ? m_state.timeline : nullptr);
            m_state.timeline_running = true;
            m_timeline_wanted = true;
        }
        // A timeline stopped by another request (a step opened, the comparison changed) goes on once
        // the window is idle, while the text is the one it ran; one stopped before its first step
        // (--rank-heads or --global-pass asked for in the same frame) starts again.
        if (TimelineToResume() && !m_state.busy && !m_worker.Readying()) m_state.timeline_request = true;
        // Play: the next step once this one's analysis has been shown for kPlayStepMs.
        if (m_state.run_playing) {
            const int k = m_state.run_step;
            const bool shown = m_state.analysis && !m_state.busy && m_state.model && k >= 0 && k < static_cast<int>(m_state.run_steps.size()) &&
                               m_state.model->dir == m_state.run_steps[k].path;
            if (!shown) m_step_shown_ms = NowMs();
            else if (NowMs() - m_step_shown_ms > kPlayStepMs) {
                if (k + 1 < static_cast<int>(m_state.run_steps.size())) m_state.run_step_request = k + 1;
                else m_state.run_playing = false;
                m_step_shown_ms = NowMs();
            }
            m_state.want_frame = true;
        }
        if (m_state.run_step_request) {  // the Run tab's slider or Play: open that step's checkpoint
            const int k = *std::exchange(m_state.run_step_request, std::nullopt);
            if (k >= 0 && k < static_cast<int>(m_state.run_steps.size()) && k != m_state.run_step) {
                m_state.run_step = k;
                m_state.open_model_request = m_state.run_steps[k].path;
            }
        }
        // Once a step is shown, the next one is opened aside, so that Play or the slider's next
        // step opens at once (the worker does it when idle, one model aside).
        if (const int k = m_state.run_step; m_state.model && k >= 0 && k + 1 < static_cast<int>(m_state.run_steps.size()) &&
                                            m_state.model->dir == m_state.run_steps[k].path && m_prefetch_asked != m_state.run_steps[k + 1].path) {
            m_prefetch_asked = m_state.run_steps[k + 1].path;
            m_worker.Prefetch(m_prefetch_asked, m_device, m_state.hints, m_dtype);
        }
        if (!m_state.tab_request.empty()) m_state.settings.right_tab = std::exchange(m_state.tab_request, ""), m_apply_tab = true;
        if (std::exchange(m_state.rank_heads_request, false) && m_state.model && !m_state.generating) {
            m_ranking_request = m_worker.RankHeads(m_state.text, m_state.truncate);
            m_state.ranking_heads = true;
            m_state.head_impacts.reset();
        }
        if (std::exchange(m_state.continue_request, false) && m_state.analysis && !m_state.generating) {
            // The editor shows its own copy of the text while it has the keyboard: let go of it so the
            // generated tokens show as they arrive.
            ImGui::ClearActiveID();
            if (m_state.generated_prefix.empty() || m_state.text != m_state.generated_prefix) m_state.generated_begin = m_state.text.size();
            m_state.ranking_heads = false;  // Continue stops a ranking
            m_state.generating = true;
            m_state.notice.clear();
            m_generation_request = m_worker.Continue(m_state.text, m_state.truncate, m_state.generate);
        }
    }

    // After a frame reached the screen: every request it answers (its own, and older ones it
    // superseded) has its keystroke-to-pixels latency.
    void AfterPresent() {
        const double now = NowMs();
        m_shown_latencies.clear();
        while (!m_waiting.empty() && m_waiting.front().first <= m_shown_request) {
            m_state.last_latency_ms = now - m_waiting.front().second;
            m_shown_latencies.push_back(m_state.last_latency_ms);
            m_waiting.pop_front();
        }
    }

    bool GlyphsDirty() { return std::exchange(m_glyphs_dirty, false); }
    std::string GlyphText() const {
        std::string s = m_state.text;
        if (m_state.model) s += m_state.model->dir;
        return s;
    }
    // A timeline asked for, stopped by another request, that goes on once the window is idle.
    bool TimelineToResume() const {
        const RunTrack* t = m_state.timeline.get();
        return m_timeline_wanted && !m_state.timeline_running && !m_state.run_dir.empty() && (!t || (!t->done && t->text == m_state.text && t->lens == m_state.timeline_lens));
    }

    bool Settled() const override {
        if (m_views.checkpoint.Showing()) return true;  // waiting for the user, not the model
        if (ModelFailed()) return true;  // nothing more will come: the jobs asked for at start need a model
        if (m_state.busy || m_worker.Readying() || m_twin_expected || m_state.generating || m_state.ranking_heads || m_state.lens_running ||
            m_state.lens_request || m_lens_at_request != 0 || m_state.timeline_running || m_state.timeline_request || TimelineToResume())
            return false;
        if (m_state.continue_request || m_state.rank_heads_request) return false;
        // The jobs asked for at start wait for the text's first analysis; one that failed (a piece
        // not in the vocabulary) brings none until the text is edited.
        const bool text_failed = !m_state.analysis && !m_state.error.empty();
        if (!text_failed && (m_start_lens || m_start_timeline || m_start_continue > 0 || m_start_rank_heads || m_start_global_pass)) return false;
        if (m_state.layer_local_request || m_state.global_pass_running) return false;
        if (!m_state.model) return ModelFailed();  // nothing more will come
        return m_state.analysis || !m_state.error.empty();
    }
    bool ModelFailed() const override { return !m_state.busy && !m_state.model && !m_state.error.empty(); }
    std::optional<RunError> ComparisonFailure() const override { return m_comparison_failure; }
    const std::string& DroppedWhatIfs() const override { return m_dropped_what_ifs; }
    ExportDialog& Exporter() override { return m_views.export_dialog; }
    WindowState& State() override { return m_state; }
    const std::vector<double>& ShownLatencies() const override { return m_shown_latencies; }
    void SetFrameMs(float ms) { m_state.frame_ms = ms; }

private:
    void RequestAnalysis() {
        const double now = NowMs();
        m_waiting.emplace_back(m_worker.Analyze(m_state.text, m_state.truncate), now);
    }

    // --continue N, --rank-heads, --lens, ...: once, on the first analysis that is the text's own;
    // beside --continue, the others once it is done, on the text it leaves (Continue stopped a
    // ranking at its first head, and a lens of the text before it is not of the one shown).
    void StartJobsAskedFor() {
        if (m_start_continue > 0) {
            m_state.generate.tokens = std::exchange(m_start_continue, 0);
            m_state.continue_request = true;
            return;
        }
        if (m_state.continue_request || m_state.generating) return;
        if (std::exchange(m_start_rank_heads, false)) m_state.rank_heads_request = true;
        if (std::exchange(m_start_global_pass, false)) m_state.RequestGlobalPass(true);
        if (std::exchange(m_start_lens, false)) m_state.lens_request = true;
        if (std::exchange(m_start_timeline, false)) m_state.timeline_request = true;
    }

    void ClearComparisonFailure() {
        if (!m_comparison_failure) return;
        if (m_state.notice == m_comparison_failure->message) m_state.notice.clear();
        m_comparison_failure.reset();
    }

    // Which comparison the menu, the model panel and Ctrl+T show, without a twin.
    CompareSpec ShownComparison() const {
        if (m_state.compare_base) return CompareSpec::Base(m_state.base_dir);
        return m_state.compare_unedited ? CompareKind::Unedited : m_state.layer_local ? CompareKind::LayerLocal : CompareKind::Global;
    }

    // What the worker runs now, as the menu, the model panel and Ctrl+T show it.
    void SetComparisonShown(model::Comparison c) {
        if (c == model::Comparison::Twin) return;
        m_state.layer_local = c == model::Comparison::LayerLocal;
        m_state.compare_unedited = c == model::Comparison::Unedited;
        m_state.compare_base = c == model::Comparison::Base;
        if (c != model::Comparison::Counterfactual) m_state.global_pass_running = false;
    }

    //---------------------------------------------------------------------------------------------
    // [SECTION] App: menu bar and examples, session popup, start panel, status bar, shortcuts
    //---------------------------------------------------------------------------------------------

    void DrawMenuBar() {
        if (!ImGui::BeginMenuBar()) return;
        if (ImGui::BeginMenu("File")) {
            if (ImGui::MenuItem("Open model...", "Ctrl+O")) m_state.ShowOpenDialog(OpenPurpose::Model);
            if (ImGui::MenuItem("Open a training run...")) m_state.ShowOpenDialog(OpenPurpose::Run);
            if (ImGui::IsItemHovered())
                viz::Tooltip("A folder of a run's checkpoints (lit-gpt's iter-NNNNNN-ckpt.pth, Hugging Face's checkpoint-N/):\n"
                                  "the Run tab steps through them and draws the text's timeline over the run (ssaviz --run DIR).");
            ImGui::Separator();
            // Ctrl+T switches between the two tau = 1 comparisons: it is shown beside the one it goes to
            // (as the key decides: RequestGlobalPass(layer_local || compare_unedited), a twin open or not).
            const bool global_shown = !m_state.twin && !m_state.layer_local && !m_state.compare_unedited && !m_state.compare_base;
            const bool key_goes_global = m_state.layer_local || m_state.compare_unedited, key_switches = !m_state.compare_base;
            if (ImGui::MenuItem("Compare with tau = 1, whole pass", key_goes_global && key_switches ? "Ctrl+T" : nullptr, global_shown))
                m_state.RequestGlobalPass(true);
            if (ImGui::IsItemHovered())
                viz::Tooltip("Ctrl+T. The same weights with tau_q = tau_v = 1 everywhere. A whole second forward pass: from layer 1 on\n"
                                  "its heads read a different residual stream, so a later layer's difference is not its temperatures alone.");
            if (ImGui::MenuItem("Compare with tau = 1, layer by layer", key_goes_global || !key_switches ? nullptr : "Ctrl+T",
                                !m_state.twin && m_state.layer_local && !m_state.compare_unedited))
                m_state.RequestGlobalPass(false);
            if (ImGui::IsItemHovered())
                viz::Tooltip("At each layer, the SSA model's own q and k with tau = 1: what that layer's temperatures do,\n"
                                  "with nothing below it changed.");
            if (ImGui::MenuItem("Compare with the unedited model", nullptr, !m_state.twin && m_state.compare_unedited))
                m_state.unedited_request = !m_state.compare_unedited;
            if (ImGui::IsItemHovered())
                viz::Tooltip("The SSA model without the what-ifs (What-ifs tab): the difference map and the loss change show\n"
                                  "the what-ifs' effect alone.");
            const std::string beside = m_state.model && !m_state.twin ? m_state.twin_beside : "";
            const std::string& base = m_state.BaseShown();
            if (!base.empty() && ImGui::MenuItem("Compare with its base model (three-way)", nullptr, !m_state.twin && m_state.compare_base))
                m_state.base_request = true;
            if (!base.empty() && ImGui::IsItemHovered())
                viz::Tooltip("SSA, its own weights at tau = 1 and the base it was fine-tuned from (%s):\n"
                                  "what the temperatures did and what the other weights' drift did.", base.c_str());
            if (ImGui::MenuItem(base.empty() ? "Compare with a base model..." : "Choose another base model...", nullptr, false, m_state.model.has_value()))
                m_state.ShowOpenDialog(OpenPurpose::Base);
            if (ImGui::IsItemHovered())
                viz::Tooltip("The model a fine-tune started from, in a folder of its own (same architecture): the three-way\n"
                                  "comparison (ssaviz --base DIR). One beside the fine-tune (base/, lit_model.pth) is found by itself.");
            if (!beside.empty() && beside != m_state.base_beside && ImGui::MenuItem(("Compare with " + TwinBesideLabel(beside)).c_str()))
                m_state.open_twin_request = beside;
            if (!beside.empty() && beside != m_state.base_beside && ImGui::IsItemHovered()) viz::Tooltip("%s", beside.c_str());
            if (ImGui::MenuItem("Compare with a twin model...", nullptr, false, m_state.model.has_value())) m_state.ShowOpenDialog(OpenPurpose::Twin);
            if (ImGui::IsItemHovered()) viz::Tooltip("A separately trained model (same layers, heads and tokenizer) on the same tokens.");
            if (ImGui::BeginMenu("Recent models", !m_state.recent_models.empty())) {
                for (size_t i = 0; i < m_state.recent_models.size(); ++i) {
                    ImGui::PushID(static_cast<int>(i));
                    const std::string& dir = m_state.recent_models[i];
                    if (viz::SelectableText(model::EscapeForMessage(dir, 1024), false)) m_state.OpenAnotherModel(dir);  // as it is, "##" too
                    ImGui::PopID();
                }
                ImGui::EndMenu();
            }
            ImGui::Separator();
            if (ImGui::MenuItem("Export figures and data...", "Ctrl+E")) m_views.export_dialog.Show(m_state);
            if (ImGui::MenuItem("Save session...", "Ctrl+S")) OpenSessionPopup(true);
            if (ImGui::MenuItem("Open session...")) OpenSessionPopup(false);
            ImGui::Separator();
            if (ImGui::MenuItem("Quit", "Ctrl+Q")) m_quit = true;
            ImGui::EndMenu();
        }
        if (ImGui::BeginMenu("Examples", !m_examples.empty())) {
            for (const Example& x : m_examples) {
                if (ImGui::MenuItem(x.title.c_str())) ApplyExample(x);
                if (!x.hint.empty() && ImGui::IsItemHovered()) viz::Tooltip("%s", x.hint.c_str());
            }
            ImGui::EndMenu();
        }
        if (ImGui::BeginMenu("View")) {
            ViewSettings& s = m_state.settings;
            for (viz::Colormap map : {viz::Colormap::Viridis, viz::Colormap::Magma})
                if (ImGui::MenuItem(viz::ColormapName(map), nullptr, s.colormap == map)) s.colormap = map;
            ImGui::MenuItem("Log scale", "L", &s.log_scale);
            ImGui::Separator();
            if (ImGui::MenuItem("SSA map", "1", s.map_mode == MapMode::Ssa)) s.map_mode = MapMode::Ssa;
            if (ImGui::MenuItem("Comparison map", "2", s.map_mode == MapMode::Compare)) s.map_mode = MapMode::Compare;
            if (ImGui::MenuItem("Difference map", "3", s.map_mode == MapMode::Difference)) s.map_mode = MapMode::Difference;
            if (ImGui::MenuItem("All three side by side", "4", s.split && !s.three_way)) s.split = true, s.three_way = false;
            const bool base = m_state.analysis && m_state.analysis->HasBase();
            if (ImGui::MenuItem("SSA | tau = 1 | base (three-way)", "5", s.three_way, base)) s.three_way = !s.three_way;
            if (ImGui::MenuItem("Base map", "6", s.map_mode == MapMode::Base && !s.split && !s.three_way, base))
                s.map_mode = MapMode::Base, s.split = s.three_way = false;
            if (ImGui::MenuItem("SSA - base map", "7", s.map_mode == MapMode::BaseDifference && !s.split && !s.three_way, base))
                s.map_mode = MapMode::BaseDifference, s.split = s.three_way = false;
            ImGui::MenuItem("Temperature scale per head", nullptr, &s.per_head_scale);
            if (ImGui::IsItemHovered())
                viz::Tooltip("Off: one scale centred at tau = 1 over every head, so a colour is the same tau everywhere.\n"
                                  "On: each head's own range, for heads whose temperatures vary little (a model whose tau_q is of\n"
                                  "position alone, as the official checkpoints' one slope a layer, opens with it on).\n"
                                  "Exports: --temperature-scale head, the export dialog's 'its own temperature scale'.");
            ImGui::MenuItem("Text editor", nullptr, &s.layout.editor_open);
            ImGui::MenuItem("Graph experiment (paper Figure 3)", nullptr, &m_state.show_graph);
            if (ImGui::IsItemHovered())
                viz::Tooltip("A graph model's learned attention over the graph's nodes against the target (the paper's Figure 3),\n"
                                  "beside its vanilla twin's. It opens with a graph model, not with a run's step.");
            if (ImGui::MenuItem("Reset pane sizes")) {
                s.layout = PaneLayout{};
                ++m_state.layout_generation;
            }
            ImGui::Separator();
            ImGui::MenuItem("Truncate long text to the context", nullptr, &m_state.truncate);
            ImGui::MenuItem("Widget demo (synthetic data)", nullptr, &m_state.show_demo);
            ImGui::MenuItem("Timings in the status bar", nullptr, &m_state.show_timings);
            ImGui::EndMenu();
        }
        if (ImGui::BeginMenu("Help")) {
            ImGui::MenuItem("Keyboard shortcuts", "F1", &m_state.show_help);
            ImGui::EndMenu();
        }
        ImGui::EndMenuBar();
    }

    // A training run (--run, a run example, a session, File > Open a training run...): its steps,
    // the one whose checkpoint is `shown` (else the last), and the Run tab unless a session chose
    // another. Returns why the folder is no run ("" when it is one); then the run open stays.
    std::string OpenRun(const std::string& dir, const std::string& compare_dir, const std::string& shown = "", bool show_tab = true) {
        auto steps = FindRunSteps(dir);
        if (!steps) return steps.error();
        m_state.run_dir = dir;
        m_state.compare_run_dir = compare_dir;
        m_state.run_steps = std::move(*steps);
        m_state.run_step = static_cast<int>(m_state.run_steps.size()) - 1;
        for (size_t i = 0; i < m_state.run_steps.size(); ++i)
            if (m_state.run_steps[i].path == shown) m_state.run_step = static_cast<int>(i);
        m_state.run_playing = false;
        m_state.timeline.reset();
        m_timeline_request = 0;  // the run before's timeline, still on its way, is not this run's
        m_timeline_wanted = false;
        m_state.timeline_running = false;
        if (show_tab) m_state.settings.right_tab = "Run", m_apply_tab = true;  // opened, not only named (a run example from the menu did not)
        return "";
    }

    // No run shown (another example, a session without one, a run that did not open).
    void CloseRun() {
        m_state.run_dir.clear();
        m_state.compare_run_dir.clear();
        m_state.run_steps.clear();
        m_state.run_step = -1;
        m_state.timeline.reset();
        m_timeline_request = 0;
        m_timeline_wanted = false;
        m_state.timeline_running = false;
    }

    // Opens a bundled model with its twin and suggested text; a run example its run's last step.
    void ApplyExample(const Example& x) {
        std::string why = x.run_dir.empty() ? "" : OpenRun(x.run_dir, x.compare_run_dir);
        if (!x.run_dir.empty() && why.empty()) {
            m_start_timeline = true;  // once its first analysis is shown
        } else {  // another example: the run is no longer what is shown
            CloseRun();
            if (!why.empty()) m_state.notice = why;
        }
        m_state.text = x.text;
        m_text_auto = false;
        m_state.query = -1;
        m_pending_twin = x.twin_dir;
        m_state.OpenAnotherModel(x.run_dir.empty() || m_state.run_steps.empty() ? x.model_dir : m_state.run_steps.back().path);
        m_state.settings.three_way = !x.base_dir.empty();  // a fine-tune's example: its three sides and the Fine-tune tab
        if (!x.base_dir.empty()) {
            m_state.open_base_request = x.base_dir;  // taken after the model, as File > Compare with a base model... does
            m_state.settings.right_tab = "Fine-tune";
            m_apply_tab = true;
        }
        m_state.show_graph = x.graph_panel;
        m_state.selected = HeadRef{x.layer, x.head};
        m_example_query = x.query_piece;
        m_glyphs_dirty = true;
    }

    // Once an example's analysis arrives: its query is the last token with the example's bytes.
    void SelectExampleQuery() {
        if (m_example_query.empty() || !m_state.analysis) return;
        const auto& pieces = m_state.analysis->tokens.pieces;
        for (int i = static_cast<int>(pieces.size()) - 1; i >= 0; --i)
            if (pieces[i] == m_example_query) {
                m_state.query = i;
                break;
            }
        m_example_query.clear();
    }

    void OpenSessionPopup(bool save) {
        m_session_popup = true;
        m_session_save = save;
        m_session_message.clear();
    }

    // A small window with the session file's path: Save writes it, Open restores it.
    void DrawSessionPopup() {
        if (!m_session_popup) return;
        ImGui::SetNextWindowSize(ImVec2(560, 0), ImGuiCond_Always);  // its height fits every frame: "saved ..." below the button was hidden
        if (ImGui::Begin(m_session_save ? "Save session" : "Open session", &m_session_popup, ImGuiWindowFlags_NoCollapse)) {
            if (EscapeClosesWindow(m_state)) m_session_popup = false;
            ImGui::TextWrapped("A session holds the model, the text, the selected head and query, pinned heads, view and export "
                               "settings. Reopen it with File > Open session or `ssaviz --session FILE`.");
            char buf[1024];
            std::snprintf(buf, sizeof buf, "%s", m_session_path.c_str());
            ImGui::SetNextItemWidth(-1);
            bool go = ImGui::InputText("##session_path", buf, sizeof buf, ImGuiInputTextFlags_EnterReturnsTrue);
            m_session_path = buf;
            go |= ImGui::Button(m_session_save ? "Save" : "Open", ImVec2(100, 0));
            if (go && m_session_save) {
                auto s = SaveSession(m_session_path, CurrentSession());
                std::error_code ec;  // where it went, in full: a bare name lands in the folder ssaviz started in
                const std::filesystem::path where = std::filesystem::absolute(m_session_path, ec);
                m_session_message = s ? "saved " + (ec ? m_session_path : where.lexically_normal().string()) : s.error();
            } else if (go) {
                auto session = LoadSession(m_session_path);
                if (!session) {
                    m_session_message = session.error();
                } else {
                    if (!session->text.empty()) {  // a session without one keeps the text shown
                        m_state.text = session->text;
                        m_text_auto = false;
                    }
                    ApplySession(*session);
                    m_state.open_model_request = session->model_dir.empty() ? DefaultModelDir() : session->model_dir;
                    // Its run, at the step it showed, and the run's timeline again.
                    const std::string why = session->run_dir.empty() ? "" : OpenRun(session->run_dir, session->compare_run_dir, session->model_dir,
                                                                                     /*show_tab=*/false);
                    if (!session->run_dir.empty() && why.empty()) m_start_timeline = true;  // once its first analysis is shown
                    else CloseRun();
                    m_session_message = "opened " + m_session_path + (why.empty() ? "" : "\n" + why);
                    for (const std::string& w : session->warnings) m_session_message += "\n" + w;
                }
            }
            if (!m_session_message.empty()) ImGui::TextWrapped("%s", m_session_message.c_str());
        }
        ImGui::End();
    }

    // No model is open (a bad --model, a moved folder): ways forward instead of an empty window.
    void DrawStartPanel() {
        ImGui::PushTextWrapPos(0.0f);
        if (!m_state.error.empty()) {
            ImGui::TextColored(ImVec4(1.0f, 0.55f, 0.45f, 1.0f), "The model did not open:");
            ImGui::TextWrapped("%s", m_state.error.c_str());
        } else {
            ImGui::TextUnformatted("No model is open.");
        }
        ImGui::Spacing();
        ImGui::Separator();
        ImGui::TextUnformatted("Open one:");
        const std::string bundled = DefaultModelDir();
        if (!bundled.empty() && ImGui::Button("The bundled model")) m_state.OpenAnotherModel(bundled);
        if (!bundled.empty()) {
            ImGui::SameLine();
            ImGui::TextDisabled("%s", bundled.c_str());
        }
        if (ImGui::Button("A model folder or checkpoint... (Ctrl+O)")) m_state.ShowOpenDialog(OpenPurpose::Model);
        if (ImGui::Button("A training run's folder of checkpoints...")) m_state.ShowOpenDialog(OpenPurpose::Run);
        if (!m_examples.empty()) {
            ImGui::Spacing();
            ImGui::TextUnformatted("Examples (each with its twin and a text that shows what it learned):");
            for (const Example& x : m_examples) {
                if (ImGui::Button(x.title.c_str())) ApplyExample(x);
                if (!x.hint.empty() && ImGui::IsItemHovered()) viz::Tooltip("%s", x.hint.c_str());
            }
        }
        if (!m_state.recent_models.empty()) {
            ImGui::Spacing();
            ImGui::TextUnformatted("Recent models:");
            for (const std::string& dir : m_state.recent_models)
                if (ImGui::Selectable(dir.c_str())) m_state.OpenAnotherModel(dir);
        }
        ImGui::Spacing();
        ImGui::TextDisabled("Or drop a model folder on the window.");
        ImGui::PopTextWrapPos();
    }

    void DrawStatusBar() {
        ImGui::Separator();
        const WindowState& s = m_state;
        if (s.busy) {  // a spinner: three dots chasing each other
            ImDrawList* draw = ImGui::GetWindowDrawList();
            ImVec2 p = ImGui::GetCursorScreenPos();
            const float r = ImGui::GetTextLineHeight() * 0.4f, t = static_cast<float>(ImGui::GetTime());
            for (int i = 0; i < 8; ++i) {
                float a = t * 6.0f + i * 0.785f;
                float alpha = 0.25f + 0.75f * (i / 7.0f);
                draw->AddCircleFilled(ImVec2(p.x + r + r * std::cos(a), p.y + ImGui::GetTextLineHeight() * 0.5f + r * std::sin(a)), r * 0.28f,
                                      ImGui::GetColorU32(ImGuiCol_Text, alpha));
            }
            ImGui::Dummy(ImVec2(2.5f * r, ImGui::GetTextLineHeight()));
            ImGui::SameLine();
            if (s.progress > 0.0f && s.progress < 1.0f) {  // a long text: layers done so far
                // What runs: the lens and the heads ranking are jobs of their own, not an analysis.
                const bool global = s.global_pass_running, lens = s.lens_running && !global, ranking = s.ranking_heads && !global;
                ImGui::ProgressBar(s.progress, ImVec2(ImGui::GetFontSize() * (global ? 11.0f : 8.0f), ImGui::GetTextLineHeight()),
                                   global ? "global tau = 1 pass..." : lens ? "the lens..." : ranking ? "ranking..." : "analysing...");
                if (ImGui::IsItemHovered())
                    viz::Tooltip("%s", global ? "The global tau = 1 pass: both sides, layer by layer. The maps shown stay the layer-local\n"
                                                "comparison's until it is done. Ctrl+T goes back to layer by layer."
                                       : lens    ? "The logit lens of every side (Lens tab; Esc stops it)."
                                       : ranking ? "The heads ranked by their loss (What-ifs tab; Esc stops it)."
                                                 : "Layers run and measured so far; the maps appear when all are done.");
            } else {
                ImGui::TextUnformatted("running...");
            }
        } else if (!s.not_finite.empty()) {
            ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "not finite (?)");
            viz::ItemTooltip((s.not_finite + "; an export refuses it").c_str());
        } else {
            ImGui::TextUnformatted("ready");
        }
        if (s.generating) {
            ImGui::SameLine(0, 20);
            ImGui::TextColored(ImVec4(0.45f, 0.85f, 0.95f, 1.0f), "continuing... (Esc or Ctrl+G stops)");
        }
        if (!s.notice.empty()) {
            ImGui::SameLine(0, 20);
            ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.3f, 1.0f), "%s", s.notice.c_str());
        }
        ImGui::SameLine(0, 20);
        // What a reader needs; the developer's timings behind a tooltip (or View > Timings).
        char timings[192];
        std::snprintf(timings, sizeof timings, "forward %.1f ms, metrics %.1f ms | keystroke to pixels %.0f ms | frame %.1f ms",
                      s.analysis ? s.analysis->forward_ms : 0.0, s.analysis ? s.analysis->metrics_ms : 0.0, s.last_latency_ms, s.frame_ms);
        // The environment's settings that change how the device computes (the Model panel lists them).
        const size_t settings = s.model ? s.model->settings.size() : 0;
        std::string settings_text;
        for (size_t i = 0; i < settings; ++i) settings_text += "\n" + s.model->settings[i];
        if (s.analysis) {
            const float loss = model::MeanLoss(s.analysis->loss);
            char loss_text[32] = "-";  // one token predicts nothing: no loss, as the Model panel says ("nan" before)
            if (std::isfinite(loss)) std::snprintf(loss_text, sizeof loss_text, "%.3f", loss);
            const std::string marked = settings == 0 ? "" : " | " + std::to_string(settings) + (settings == 1 ? " setting" : " settings");
            ImGui::Text("%d tokens | %s, L%d H%d | vs %s | loss %s | %s%s%s", s.analysis->n_tokens,
                        s.model ? FolderAndParent(s.model->dir).c_str() : "", s.selected.layer, s.selected.head, ComparedWith(*s.analysis).c_str(),
                        loss_text, s.analysis->device.c_str(), marked.c_str(), s.analysis->interventions.empty() ? "" : " | what-ifs on");
        } else {
            ImGui::TextUnformatted(s.model ? "no analysis yet" : "no model open");
        }
        if (ImGui::IsItemHovered())
            viz::Tooltip("%s\n%s%s", timings, s.analysis ? CompareExplanation(*s.analysis).c_str() : "", settings_text.c_str());
        if (s.show_timings) {
            ImGui::SameLine(0, 20);
            ImGui::TextDisabled("%s", timings);
        }
    }

    void HandleShortcuts() {
        ImGuiIO& io = ImGui::GetIO();
        WindowState& s = m_state;
        const bool escape_taken = std::exchange(s.escape_taken, false);  // by a dialog it closed
        if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_O, false)) m_state.ShowOpenDialog(OpenPurpose::Model);
        if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_Q, false)) m_quit = true;
        if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_E, false)) m_views.export_dialog.Show(m_state);
        if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_S, false)) OpenSessionPopup(true);
        if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_F, false)) s.focus_goto = true;
        if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_G, false)) {
            if (s.generating) s.cancel_job_request = true;
            else s.continue_request = true;
        }
        if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_T, false)) {
            // Beside a base the comparison is its whole tau = 1 pass, and layer by layer has no room
            // beside the base: the key keeps the base (it closed it, the fine-tune's views with it).
            if (s.compare_base)
                s.notice = "Ctrl+T keeps the base (beside it tau = 1 is the whole pass; File > layer by layer closes it)";
            else s.RequestGlobalPass(s.layer_local || s.compare_unedited);
        }
        if (ImGui::IsKeyPressed(GLFW_KEY_F1, false)) s.show_help = !s.show_help;
        if (const int step = ImGui::IsKeyPressed(GLFW_KEY_PAGE_DOWN) - ImGui::IsKeyPressed(GLFW_KEY_PAGE_UP); io.KeyCtrl && step) {
            s.settings.right_tab = StepTab(s.settings.right_tab, step);
            m_apply_tab = true;
        }
        // Keys belong to an open dialog, or to the editor while it has focus.
        if (io.WantTextInput || ImGui::IsPopupOpen("", ImGuiPopupFlags_AnyPopupId)) return;  // arrows and letters belong to the editor while it has focus
        const int L = s.Layers(), H = s.Heads();
        if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape), false) && !escape_taken) {
            if (s.generating || s.ranking_heads || s.lens_running) s.cancel_job_request = true;  // Esc stops a job first, the one shown running
            else if (s.timeline_running) s.stop_timeline_request = true;
            else s.query = -1;
        }
        if (L > 0) {
            if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow))) s.selected.head = (s.selected.head + H - 1) % H;
            if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow))) s.selected.head = (s.selected.head + 1) % H;
            if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_UpArrow))) s.selected.layer = (s.selected.layer + L - 1) % L;
            if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_DownArrow))) s.selected.layer = (s.selected.layer + 1) % L;
            if (ImGui::IsKeyPressed(GLFW_KEY_P, false)) s.TogglePin(s.selected);
        }
        ViewSettings& v = s.settings;
        if (ImGui::IsKeyPressed(GLFW_KEY_1, false)) v.map_mode = MapMode::Ssa, v.split = v.three_way = false;
        if (ImGui::IsKeyPressed(GLFW_KEY_2, false)) v.map_mode = MapMode::Compare, v.split = v.three_way = false;
        if (ImGui::IsKeyPressed(GLFW_KEY_3, false)) v.map_mode = MapMode::Difference, v.split = v.three_way = false;
        if (ImGui::IsKeyPressed(GLFW_KEY_4, false)) v.split = !v.split || v.three_way, v.three_way = false;
        const bool base = s.analysis && s.analysis->HasBase();
        if (ImGui::IsKeyPressed(GLFW_KEY_5, false) && base) v.three_way = !v.three_way;
        if (ImGui::IsKeyPressed(GLFW_KEY_6, false) && base) v.map_mode = MapMode::Base, v.split = v.three_way = false;
        if (ImGui::IsKeyPressed(GLFW_KEY_7, false) && base) v.map_mode = MapMode::BaseDifference, v.split = v.three_way = false;
        if (ImGui::IsKeyPressed(GLFW_KEY_L, false)) s.settings.log_scale = !s.settings.log_scale;
        // A run's previous / next checkpoint, as the Run tab's arrows (the arrow keys are the layer's and head's).
        if (const int S = static_cast<int>(s.run_steps.size()); S > 0) {
            const int k = std::clamp(s.run_step, 0, S - 1);
            if (ImGui::IsKeyPressed(GLFW_KEY_LEFT_BRACKET, false) && k > 0) s.run_step_request = k - 1;
            if (ImGui::IsKeyPressed(GLFW_KEY_RIGHT_BRACKET, false) && k + 1 < S) s.run_step_request = k + 1;
        }
    }

public:
    bool m_quit = false;

private:
    double m_busy_since_ms = 0;
    std::string m_device;
    std::string m_dtype = "f32";  // --dtype: the compute dtype
    std::vector<Example> m_examples = BundledExamples();
    std::string m_pending_twin;    // a session's or example's twin, opened once its model is
    std::string m_example_query;   // an example's query token, selected when its analysis arrives
    bool m_text_auto = false;      // the text is one the window chose (no --text, session or edit): a model's task may change it
    bool m_twin_expected = false;  // a twin is being opened (screenshots and tests wait for it)
    std::string m_session_path;
    std::string m_session_message;
    bool m_session_popup = false, m_session_save = true;
    bool m_show_export = false;
    bool m_apply_tab = true;  // open settings.right_tab on the next frame
    int m_start_continue = 0;         // --continue N, until the first analysis
    bool m_start_rank_heads = false;  // --rank-heads, likewise
    bool m_start_global_pass = false; // --global-pass, likewise
    bool m_start_lens = false;         // --lens: run the lens once the first analysis is shown
    bool m_start_timeline = false;     // --run: run the timeline once the first analysis is shown
    BaseRequests m_bases;  // base comparisons on their way, and the one running
    std::optional<RunError> m_comparison_failure;  // the twin or base last asked for did not open
    std::string m_place_from;  // the flags or session that chose the head and pins, checked once the model is open ("" none)
    bool m_three_way_asked = false;  // --map three-way: checked against the first analysis (a base asked for?)
    std::string m_query_from;  // the flag or session that chose the query, checked against the first analysis's tokens
    std::string m_adjusted_notice;  // the status bar's notice SayAdjusted last set
    std::string m_dropped_what_ifs;  // what-ifs a model opened with that did not fit it (drivers end with it)
    uint64_t m_step_open_request = 0;  // the worker's request that opens the run's shown step
    uint64_t m_model_open_request = 0;  // a model on its way (the worker may not have taken it yet: not busy)
    bool m_scale_chosen = false;      // a session set the temperature scale (FitTemperatureScale leaves it)
    WindowState m_state;
    Views m_views;
    std::deque<std::pair<uint64_t, double>> m_waiting;  // analysis requests not yet on screen, oldest first
    uint64_t m_shown_request = 0;                       // the newest request whose result was drawn
    uint64_t m_generation_request = 0;                  // the running Continue, 0 when none
    uint64_t m_ranking_request = 0;                     // the last heads ranking
    uint64_t m_lens_request = 0;                        // the last lens asked for
    std::string m_prefetch_asked;                       // the run step last asked to be opened aside
    uint64_t m_lens_at_request = 0;                     // the selected query's lens asked for and not yet answered
    std::string m_lens_at_asked, m_lens_at_failed;      // what it was asked for (model, comparison, position, text); the last that failed
    uint64_t m_timeline_request = 0;                    // the last timeline asked for
    bool m_timeline_wanted = false;                     // asked for and not cancelled: resumed when idle
    double m_step_shown_ms = 0;                         // Play: when the shown step's analysis arrived
    static constexpr double kPlayStepMs = 700;
    bool m_glyphs_dirty = true;
    std::vector<double> m_shown_latencies;  // of the requests the last frame shown answered
    InferenceWorker m_worker;  // last: stops (joins) before the state it reports into goes away
};

}  // namespace

//-------------------------------------------------------------------------------------------------
// [SECTION] The platform loop (RunGui)
//-------------------------------------------------------------------------------------------------

// GLFW's last error until the window is open: a window that cannot open says why in ssaviz's one
// line instead of GLFW's line and then its own.
namespace {
std::string g_glfw_error;
}  // namespace

int RunGui(const LaunchOptions& run, const std::optional<Session>& session) {
    glfwSetErrorCallback([](int code, const char* message) { g_glfw_error = "GLFW error " + std::to_string(code) + ": " + message; });
    // The model computes on every core but one (InferenceWorker::Loop); the UI thread has that one.
    // A software rasteriser (Mesa's llvmpipe, where there is no GPU) would add threads of its own
    // on the model's cores, and on 2 cores they slowed a TinyLlama-sized edit from ~140 ms to
    // ~190 ms: it draws on the UI thread instead. GPU drivers ignore the variable; a value the
    // user set is kept.
    setenv("LP_NUM_THREADS", "0", /*overwrite=*/0);
    if (!glfwInit()) {
        std::fprintf(stderr, "ssaviz: cannot open a window (%s); the command line works without one: ssaviz export --help\n",
                     g_glfw_error.empty() ? "no display?" : model::EscapeForMessage(g_glfw_error).c_str());
        return kExitFailure;
    }
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
    GLFWwindow* window = glfwCreateWindow(run.width, run.height, "ssaviz", nullptr, nullptr);
    if (!window) {
        std::fprintf(stderr, "ssaviz: cannot create an OpenGL 3.3 window (%s)\n", model::EscapeForMessage(g_glfw_error).c_str());
        glfwTerminate();
        return kExitFailure;
    }
    glfwSetErrorCallback([](int code, const char* message) { std::fprintf(stderr, "ssaviz: GLFW error %d: %s\n", code, message); });
    glfwMakeContextCurrent(window);

    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;  // the layout is computed, nothing to remember
    float xscale = 1.0f, yscale = 1.0f;
    glfwGetWindowContentScale(window, &xscale, &yscale);
    const float scale = std::max(1.0f, xscale);
    ImGui::StyleColorsDark();
    ImGui::GetStyle().ScaleAllSizes(scale);
    LoadFonts(std::round(15.0f * scale));
    ImGui_ImplGlfw_InitForOpenGL(window, true);
    ImGui_ImplOpenGL3_Init("#version 330");

    int exit_code = kExitOk;
    {
        App app(run, session);
        glfwSetWindowUserPointer(window, &app);
        // The GLFW backend's clipboard read (its user data is the window), told to the app first.
        io.GetClipboardTextFn = [](void* user) -> const char* {
            GLFWwindow* w = static_cast<GLFWwindow*>(user);
            const char* text = glfwGetClipboardString(w);
            if (auto* a = static_cast<App*>(glfwGetWindowUserPointer(w)); a && text) a->OnPaste(text);
            return text;
        };
        glfwSetDropCallback(window, [](GLFWwindow* w, int count, const char** paths) {
            if (auto* a = static_cast<App*>(glfwGetWindowUserPointer(w))) a->OnDrop(count, paths);
        });
        // Drivers run as fast as frames can be drawn (no vsync, no waiting for events).
        const std::vector<std::unique_ptr<Driver>> drivers = MakeDrivers(run);
        const bool measuring = !drivers.empty();
        glfwSwapInterval(measuring ? 0 : 1);

        double last_frame_ms = NowMs();
        while (!glfwWindowShouldClose(window) && !app.m_quit) {
            // While the model runs, the spinner and progress need a few frames a second, not every
            // one the display can show: each costs a core's milliseconds (a software rasteriser's
            // tens) that the model's thread, on 2 cores, wants; none at all in its first kQuietMs.
            // The worker's events wake the loop at once, so nothing it answers waits for a tick.
            const WindowState& s = app.State();
            double wait_ms = s.want_frame ? 0.0 : !s.busy ? 500.0 : s.busy_ms < kQuietMs ? kQuietMs - s.busy_ms : 1000.0 / 15.0;
            for (const auto& d : drivers) wait_ms = std::min(wait_ms, d->WakeInMs(NowMs()));
            if (wait_ms <= 0.0) glfwPollEvents();
            else glfwWaitEventsTimeout(wait_ms / 1000.0);
            FrameTimes times;
            times.start_ms = NowMs();
            app.SetFrameMs(static_cast<float>(times.start_ms - last_frame_ms));
            last_frame_ms = times.start_ms;
            for (const auto& d : drivers) d->BeforeFrame(app, times.start_ms);

            app.Poll();
            if (app.GlyphsDirty() && EnsureGlyphs(app.GlyphText())) {
                ImGui_ImplOpenGL3_DestroyFontsTexture();
                ImGui_ImplOpenGL3_CreateFontsTexture();
            }
            ImGui_ImplOpenGL3_NewFrame();
            ImGui_ImplGlfw_NewFrame();
            if (std::any_of(drivers.begin(), drivers.end(), [](const auto& d) { return d->HidesPointer(); }))
                ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
            ImGui::NewFrame();
            app.Draw();
            ImGui::Render();
            times.ui_done_ms = NowMs();
            int fb_w = 0, fb_h = 0;
            glfwGetFramebufferSize(window, &fb_w, &fb_h);
            glViewport(0, 0, fb_w, fb_h);
            glClearColor(0.09f, 0.09f, 0.10f, 1.0f);
            glClear(GL_COLOR_BUFFER_BIT);
            ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());

            std::optional<int> code;
            for (const auto& d : drivers)
                if ((code = d->AfterRender(app, fb_w, fb_h, io.DisplayFramebufferScale.x))) break;
            if (code) {
                exit_code = *code;
                break;
            }
            glfwSwapBuffers(window);
            app.AfterPresent();
            app.HandleRequests();

            times.end_ms = NowMs();
            if (std::any_of(drivers.begin(), drivers.end(), [&](const auto& d) { return d->AfterFrame(app, times); })) break;
        }
        for (const auto& d : drivers) d->Report(app);
        glfwSetWindowUserPointer(window, nullptr);  // the clipboard's and the drop's callbacks outlive the app
    }  // views free their textures here, while the context is alive

    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(window);
    glfwTerminate();
    return exit_code;
}

}  // namespace app
