#include "app/gui/views/view_export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iterator>

#include <imgui.h>
#include <nlohmann/json.hpp>

#include "app/core/timeline.h"
#include "app/export/export_figures.h"
#include "app/export/flags.h"
#include "app/export/session.h"
#include "app/gui/views/view_common.h"
#include "model/io/files.h"
#include "model/text/tokenizer.h"
#include "viz/figure.h"
#include "viz/imgui/widgets.h"

namespace app {
namespace {

// A layers or heads field, in the flags' grammar ("all" or "0,2"); empty is all too. A list that does
// not parse becomes {-1}, so the preview names the field as out of range.
std::vector<int> ParseListField(const std::string& text, const char* flag) {
    if (text.empty()) return {};
    auto list = ParseIndexList(text, flag);
    return list ? *list : std::vector<int>{-1};
}

bool InputString(const char* label, std::string* s, ImGuiInputTextFlags flags = 0) {
    char buf[1024];
    std::snprintf(buf, sizeof buf, "%s", s->c_str());
    if (!ImGui::InputText(label, buf, sizeof buf, flags)) return false;
    *s = buf;
    return true;
}

bool IsFigure(const std::string& path) {
    const auto dot = path.rfind('.');
    return dot != std::string::npos && (path.substr(dot) == ".png" || path.substr(dot) == ".svg");
}

// Why an export cannot start now, in words; null when it can. A timeline running alone leaves the
// shown analysis as it is, and the export goes on beside it (it was refused for as long as the
// timeline ran, minutes, "the analysis ... is still running").
const char* NotNow(const WindowState& state) {
    if (state.generating) return "Continue is still writing the text";
    if (state.analysis_pending) return "the analysis of the current text is still running";
    if (!state.busy || state.timeline_alone) return nullptr;
    return state.lens_running ? "the lens is still running" : state.ranking_heads ? "the heads' ranking is still running"
                                                                                   : "the analysis of the current text is still running";
}

// Where the dialog writes until told otherwise: ./ssaviz-export.
std::string DefaultOutDir() { return (std::filesystem::current_path() / "ssaviz-export").string(); }

}  // namespace

ExportDialog::~ExportDialog() {
    m_cancel = true;
    Join();
}

void ExportDialog::Join() {
    if (m_thread.joinable()) m_thread.join();
}

void ExportDialog::SetOptions(const ExportOptions& options) {
    m_options = options;
    if (m_options.out_dir.empty()) m_options.out_dir = DefaultOutDir();  // a session without export.out (it showed '' and refused)
    m_out_edit = m_options.out_dir;  // the field shows the folder written
    m_layers_edit = FormatIndexList(options.layers);
    m_heads_edit = FormatIndexList(options.heads);
    m_initialized = true;
}

void ExportDialog::Show(const AppState& state) {
    EnsureOptions(state);
    m_open = true;
}

void ExportDialog::EnsureOptions(const AppState& state) {
    if (m_initialized) return;
    // First opening: the figures look like the views.
    ExportOptions o;
    o.out_dir = DefaultOutDir();
    o.png = o.svg = o.html = true;
    o.figures.colormap = state.settings.colormap == viz::Colormap::Diverging ? viz::Colormap::Viridis : state.settings.colormap;
    o.figures.log_scale = state.settings.log_scale;
    o.figures.highlight = state.settings.token_color;
    o.figures.highlight_scope = state.settings.token_scope;
    o.figures.highlight_head = state.selected;
    o.figures.temperature_per_head = state.settings.per_head_scale;
    o.sink_epsilon = state.settings.sink_epsilon;
    o.layers = {state.selected.layer};
    o.heads = {state.selected.head};
    SetOptions(o);
}

namespace {
// The settings against the shown model, as `ssaviz export` checks them: the heads ("all" resolved),
// a format chosen (or the lens's files), nothing only a base has without one, the highlight's head.
model::Status FitToModel(ExportOptions* options, const model::Analysis& a, bool with_lens) {
    if (auto s = ResolveExportHeads(options, a.n_layer, a.n_head); !s) return s;
    if (auto s = CheckExportSettings(*options, a.HasBase()); !s && !(with_lens && ExportFormats(*options).empty())) return s;
    if (auto s = CheckHighlightHeld(*options, a); !s) return s;
    return CheckHighlightScope(options->figures, a.n_layer, a.n_head);
}

// Figures too large to draw, as `ssaviz export` refuses them before writing (a long text's
// highlight at text scale 3 failed once written: --export-to exited 1, naming only --png-scale). It lays the
// highlight out: the dialog asks once its settings or the analysis change, not every frame.
model::Status FiguresFit(const ExportOptions& options, const model::Analysis& a) {
    if (auto s = CheckHeatmapsFit(options, a.n_tokens); !s) return s;
    return CheckHighlightFits(a.tokens.pieces, options.figures, options.png, options.svg);
}

// The lens runs the model as loaded: beside what-ifs its files would not be the shown analysis's
// (`export --lens` refuses --ablate).
const LensPair* ExportableLens(const WindowState& state) {
    return state.analysis && state.analysis->interventions.empty() ? CurrentLens(state) : nullptr;
}

// Whose logit the attribution figures split, as the Lens tab shows it: the selected query's
// position (`--dla-position`; none: the last that predicts a token) and, where the tab attributes
// another token than the next, its Attribute (`--dla-target`).
void AttributeAsShown(const WindowState& state, ExportOptions* options) {
    const LensTabAt tab = LensTabPosition(state);
    options->dla_target.reset();
    options->dla_position.reset();
    if (tab.target != LensTarget::Next) options->dla_target = tab.target;
    if (state.analysis && state.query >= 0 && state.query == tab.position) options->dla_position = tab.position;
}

// The Lens tab's attribution of another token than the next, as SidesAttribution (its one-position
// run's): what dla_bars and dla_layers draw then. None where it has not run for that position.
std::optional<SidesAttribution> ShownAttribution(const WindowState& state) {
    const LensTabAt tab = LensTabPosition(state);
    if (tab.target == LensTarget::Next || !tab.at) return std::nullopt;
    SidesAttribution out;
    out.position = tab.position;
    out.target = tab.at->target;
    out.versus = tab.at->versus;
    out.token = tab.at->ssa.target;
    out.sides.push_back(tab.at->ssa);
    if (tab.at->compare) out.sides.push_back(*tab.at->compare);
    if (tab.at->compare && tab.at->base) out.sides.push_back(*tab.at->base);
    return out;
}

// The heads' ranking (What-ifs > Which heads matter), when it is complete and of the shown analysis:
// its text's loss and its what-ifs.
const HeadImpacts* ShownRanking(const WindowState& state) {
    const HeadImpacts* ranked = state.head_impacts.get();
    if (!ranked || !ranked->done || !state.analysis || ranked->on_top != state.analysis->interventions) return nullptr;
    const float loss = model::MeanLoss(state.analysis->loss);
    return std::abs(ranked->baseline - loss) <= 1e-6f * std::max(1.0f, std::abs(loss)) ? ranked : nullptr;
}

// The Run tab's timeline of the shown text, where it is asked for (File > Export's "the run's timeline").
std::vector<const RunTimeline*> ExportableRuns(const WindowState& state) {
    const RunTrack* t = CurrentTimeline(state);
    if (!t) return {};
    std::vector<const RunTimeline*> runs = {&t->timeline};
    if (t->compare && !t->compare->steps.empty()) runs.push_back(&*t->compare);
    return runs;
}

}  // namespace

std::vector<ExportFile> ExportDialog::ExtraFiles(const WindowState& state, const ExportOptions& options) const {
    std::vector<ExportFile> files;
    if (const LensPair* lens = m_with_lens ? ExportableLens(state) : nullptr) {
        // [SSA, its comparison, a base], as `export --lens` runs them; each side kept alive by the pair.
        std::vector<std::shared_ptr<const model::Lens>> sides{std::shared_ptr<const model::Lens>(state.lens, &lens->ssa)};
        if (lens->compare) sides.emplace_back(state.lens, &*lens->compare);
        if (lens->compare && lens->base) sides.emplace_back(state.lens, &*lens->base);
        const auto piece = [vocab = state.vocab](int32_t id) {  // as the Lens tab names them (model::PredictedPieces)
            return vocab && id >= 0 && static_cast<size_t>(id) < vocab->size() ? model::PieceWithBytes((*vocab)[id]) : std::string();
        };
        ExportOptions at_query = options;
        AttributeAsShown(state, &at_query);
        const std::optional<SidesAttribution> attributed = ShownAttribution(state);
        if (at_query.dla_target && !attributed) at_query.dla_target.reset();  // not run yet for this position: the next token's, as dla.npy
        files = LensExportFiles(piece, *state.model, *state.analysis, sides, at_query, attributed ? &*attributed : nullptr);
    }
    // As `export --rank-heads` writes it (the window's ranking measures both temperatures together).
    if (const HeadImpacts* ranked = m_with_ranking ? ShownRanking(state) : nullptr)
        for (ExportFile& f : HeadImpactFiles(*ranked, *state.model, options, TokenLabels(state.analysis->tokens))) files.push_back(std::move(f));
    // The Run tab's timeline, as `export --run` writes it, in run/ (the shown text's own tau_q.npy and
    // figures keep their names): its numbers, its curves and the curve of the token it follows.
    if (const std::vector<const RunTimeline*> runs = m_with_run ? ExportableRuns(state) : std::vector<const RunTimeline*>{}; !runs.empty()) {
        for (ExportFile& f : RunDataFiles(runs, "run")) files.push_back(std::move(f));
        for (ExportFile& f : RunCurveFiles(runs, options, "run/curves", RunTabToken(state, *runs[0], /*piece=*/true))) files.push_back(std::move(f));
    }
    return files;
}

bool ExportDialog::Start(const WindowState& state) {
    m_error.clear();
    m_refused_for_now = false;
    m_error_exit = kExitFailure;
    m_done_message.clear();
    if (Busy()) return m_error = "an export is already running", false;
    if (!state.analysis || !state.model) return m_error = "nothing to export yet: waiting for the model", false;
    if (const char* why = NotNow(state)) return m_error = why, m_refused_for_now = true, false;
    ExportOptions options = m_options;
    if (options.out_dir.empty()) return m_error = "choose an output folder", false;
    if (std::string why = NonFiniteAnalysis(*state.analysis); !why.empty()) {  // as `ssaviz export` says it, exit 3
        m_error_exit = kExitBadInput;
        return m_error = why + "; nothing was written", false;
    }
    // Inside an open run it would become one of its steps (export --out and --export-to refuse it too;
    // ./ssaviz-export of a window started in the run's folder is).
    for (const std::string& run : {state.run_dir, state.compare_run_dir})
        if (auto outside = run.empty() ? model::Status(model::Ok{}) : CheckOutsideRun(options.out_dir, run, RunExportFolders::Window); !outside) {
            m_error_exit = kExitUsage;
            return m_error = outside.error(), false;
        }
    options.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) - 1);  // a core stays with the UI
    if (auto s = FitToModel(&options, *state.analysis, m_with_lens && ExportableLens(state)); !s) {
        m_error_exit = kExitUsage;
        return m_error = s.error(), false;
    }
    if (auto s = FiguresFit(options, *state.analysis); !s) {
        m_error_exit = kExitUsage;
        return m_error = s.error(), false;
    }
    std::vector<ExportFile> lens_files = ExtraFiles(state, options);
    // The run's timeline of fewer steps than the run has is said so (export --run says "1 of 2 steps").
    std::string run_note;
    m_left_out_steps = false;
    if (const RunTrack* t = m_with_run ? CurrentTimeline(state) : nullptr; t && (!t->done || !t->failed.empty())) {
        m_left_out_steps = t->done && !t->failed.empty();
        run_note = "; the run's timeline of the " + std::to_string(t->tried - t->failed.size()) + " of " + std::to_string(t->total) + " steps " +
                   (t->done ? "that opened (the Run tab says why the rest did not)" : "run so far");
    } else if (m_with_run && !state.run_dir.empty() && !t)  // an open run whose timeline is left out says why
        run_note = "; not the run's timeline: " + TimelineMismatch(state);
    Join();
    m_cancel = false;
    m_progress_done = 0;
    m_progress_total = 0;
    m_running = true;
    m_result_taken = false;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_result.clear();
        m_current.clear();
    }
    // The thread owns copies of what it writes: the analysis stays alive, the text and info are copied.
    m_thread = std::thread([this, analysis = state.analysis, info = *state.model, text = state.text, options, lens_files = std::move(lens_files),
                            run_note] {
        auto status = WriteExport(
            text, *analysis, info, options,
            [this](size_t done, size_t total, const std::string& path) {
                m_progress_done = done;
                m_progress_total = total;
                std::lock_guard<std::mutex> lock(m_mutex);
                m_current = path;
                return !m_cancel.load();
            },
            lens_files);
        std::lock_guard<std::mutex> lock(m_mutex);
        m_result = status ? "wrote " + std::to_string(m_progress_done.load()) + " files to " + model::EscapeForMessage(options.out_dir, 4096) + run_note
                          : status.error();
        if (!status) m_result = "!" + m_result;  // marks a failure for the UI thread
        m_running = false;
    });
    return true;
}

void ExportDialog::Draw(WindowState& state) {
    if (!m_result_taken && !Busy()) {  // a finished export: report once
        std::lock_guard<std::mutex> lock(m_mutex);
        m_result_taken = true;
        if (!m_result.empty() && m_result[0] == '!') m_error = m_result.substr(1);
        else m_done_message = m_result;
    }
    if (Busy()) state.want_frame = true;  // keep the progress bar moving
    if (!m_open) return;
    // At most the window's size, inside it (at 1000 x 700 it ran past the right and bottom edges,
    // its close button and Export out of reach); its settings and preview scroll.
    const ImGuiViewport* view = ImGui::GetMainViewport();
    const ImVec2 size(std::min(980.0f, view->WorkSize.x - 40.0f), std::min(720.0f, view->WorkSize.y - 40.0f));
    ImGui::SetNextWindowSize(size, ImGuiCond_FirstUseEver);
    ImGui::SetNextWindowPos(ImVec2(view->WorkPos.x + (view->WorkSize.x - size.x) * 0.5f, view->WorkPos.y + (view->WorkSize.y - size.y) * 0.5f),
                            ImGuiCond_FirstUseEver);
    ImGui::SetNextWindowSizeConstraints(ImVec2(320, 240), ImVec2(view->WorkSize.x, view->WorkSize.y));
    ImGui::SetNextWindowBgAlpha(1.0f);  // a dialog over the views: they should not show through
    if (!ImGui::Begin("Export figures and data", &m_open)) {
        ImGui::End();
        return;
    }
    if (EscapeClosesWindow(state)) m_open = false;  // as the Open dialog; its settings stay for the next Ctrl+E
    if (ImGui::BeginTable("##export_layout", 2, ImGuiTableFlags_Resizable | ImGuiTableFlags_BordersInnerV)) {
        ImGui::TableSetupColumn("settings", ImGuiTableColumnFlags_WidthStretch, 0.42f);
        ImGui::TableSetupColumn("preview", ImGuiTableColumnFlags_WidthStretch, 0.58f);
        ImGui::TableNextColumn();
        DrawSettings(state);
        ImGui::TableNextColumn();
        DrawPreview(state);
        ImGui::EndTable();
    }
    ImGui::End();
}

void ExportDialog::DrawSettings(WindowState& state) {
    ExportOptions& o = m_options;
    ImGui::TextUnformatted("Output folder");
    ImGui::SetNextItemWidth(-1);
    if (InputString("##out", &m_out_edit)) o.out_dir = m_out_edit;
    viz::ItemTooltip("Files go here, in sub-folders heatmaps/, plots/ and csv/. Existing files of the same name are replaced.");

    ImGui::Separator();
    ImGui::TextUnformatted("Formats");
    const struct {
        const char* label;
        bool* on;
        const char* help;
    } formats[] = {
        {"PNG", &o.png, "Raster figures: heatmaps per head, the heads grid, the highlighted text, the sparsity plots."},
        {"SVG", &o.svg, "The same figures as vector graphics. Maps above 65,536 cells embed their cells as an image."},
        {"HTML", &o.html, "highlight.html: the text coloured by the token quantity, one self-contained file."},
        {"JSON", &o.json, "tokens.json (ids, pieces, byte offsets) and metrics.json (every metric per layer, head and row)."},
        {"NPY", &o.npy, "attention.npy, attention_compare.npy (with a base: attention_tau1.npy, attention_base.npy) [L, H, T, T]; tau_q.npy, tau_v.npy [L, H, T]; loss_*.npy (float32, numpy.load)."},
        {"CSV", &o.csv, "csv/L{l}_H{h}.csv: one head's map, a row per query; heads.csv: every head's values, a row per head."},
    };
    for (size_t i = 0; i < std::size(formats); ++i) {  // figures on one line, data on the next
        if (i % 3 != 0) ImGui::SameLine();
        ImGui::Checkbox(formats[i].label, formats[i].on);
        viz::ItemTooltip(formats[i].help);
    }
    const bool lens = ExportableLens(state) != nullptr;
    ImGui::BeginDisabled(!lens);
    bool with_lens = m_with_lens && lens;
    const char* lens_label = lens                                       ? "the logit lens and attribution"
                             : state.analysis && !state.analysis->interventions.empty() ? "the logit lens (the model as loaded: not beside what-ifs)"
                                                                        : "the logit lens (run it in the Lens tab first)";
    if (ImGui::Checkbox(lens_label, &with_lens) && lens) m_with_lens = with_lens;
    ImGui::EndDisabled();
    viz::ItemTooltip("The Lens tab's lens of this text, as `ssaviz export --lens` writes it: lens_loss.npy, lens_top.json, dla*.npy "
                     "(each side's) and, with PNG or SVG, the lens grids, their differences and the attribution figures "
                     "(dla_bars and dla_layers at the selected query, as the Lens tab shows it: --dla-position).");
    const bool ranked = ShownRanking(state) != nullptr;
    ImGui::BeginDisabled(!ranked);
    bool with_ranking = m_with_ranking && ranked;
    if (ImGui::Checkbox(ranked ? "the heads' ranking by their loss" : "the heads' ranking (What-ifs > Rank the heads first)", &with_ranking) && ranked)
        m_with_ranking = with_ranking;
    ImGui::EndDisabled();
    viz::ItemTooltip("What-ifs > Which heads matter on this text, as `ssaviz export --rank-heads` writes it: head_impacts.json, .csv "
                     "and, with PNG or SVG, head_impacts (each head's temperatures' part of the loss).");
    const std::vector<const RunTimeline*> runs = ExportableRuns(state);
    ImGui::BeginDisabled(runs.empty());
    bool with_run = m_with_run && !runs.empty();
    const std::string run_label = !runs.empty() ? "the run's timeline (" + std::to_string(runs[0]->steps.size()) + (state.timeline_running ? " steps so far)" : " steps)")
                                  : state.run_dir.empty() ? "the run's timeline (open a training run)"
                                                          : "the run's timeline (" + TimelineMismatch(state) + ")";
    if (ImGui::Checkbox(run_label.c_str(), &with_run) && !runs.empty()) m_with_run = with_run;
    ImGui::EndDisabled();
    viz::ItemTooltip("The Run tab's timeline of this text in run/, as `ssaviz export --run DIR --out OUT/run` writes it with the same "
                     "comparison: run.csv (every step's head values and losses), run_lens.csv where the steps ran the lens, "
                     "tau_q.npy [step, layer, head, token] and, with PNG or SVG, curves/ (entropy, JS, the loss, the lens's ...; the "
                     "compare run's beside) and tau_q_token, the Run tab's token in the selected head. Only `export --run` writes "
                     "run.json (each step's whole summary).");

    ImGui::Separator();
    ImGui::TextUnformatted("Maps");
    const bool base = state.analysis && state.analysis->HasBase();
    if (!base)  // the base's maps only beside a base (a session may have asked for them)
        o.maps.erase(std::remove_if(o.maps.begin(), o.maps.end(), IsBaseMode), o.maps.end());
    for (MapMode mode : kAllMapModes) {
        if (IsBaseMode(mode) && !base) continue;
        bool on = std::find(o.maps.begin(), o.maps.end(), mode) != o.maps.end();
        const char* label = mode == MapMode::Difference ? "difference" : MapModeLabel(mode);
        // On the next line where the column has no room (a 1000 px window cut "SSA - base" to "SSA -").
        if (mode != MapMode::Ssa) SameLineIfFits(ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(label).x);
        if (ImGui::Checkbox(label, &on)) {
            o.maps.erase(std::remove(o.maps.begin(), o.maps.end(), mode), o.maps.end());
            if (on) o.maps.push_back(mode);
            std::sort(o.maps.begin(), o.maps.end(), [](MapMode a, MapMode b) { return static_cast<int>(a) < static_cast<int>(b); });
        }
    }
    ImGui::SetNextItemWidth(120);
    if (InputString("layers", &m_layers_edit)) o.layers = ParseListField(m_layers_edit, "--layers");
    viz::ItemTooltip("Heads that get heatmaps and CSV: \"all\" or a list like 0,2.");
    const ImGuiStyle& style = ImGui::GetStyle();
    SameLineIfFits(120 + style.ItemInnerSpacing.x + ImGui::CalcTextSize("heads").x);
    ImGui::SetNextItemWidth(120);
    if (InputString("heads", &m_heads_edit)) o.heads = ParseListField(m_heads_edit, "--heads");
    SameLineIfFits(ImGui::CalcTextSize("selected").x + 2 * style.FramePadding.x);
    if (ImGui::SmallButton("selected")) {
        o.layers = {state.selected.layer};
        o.heads = {state.selected.head};
        m_layers_edit = FormatIndexList(o.layers);
        m_heads_edit = FormatIndexList(o.heads);
    }
    viz::ItemTooltip("Only the head selected in the main window.");

    ImGui::Separator();
    ImGui::TextUnformatted("Figures");
    FigureSettings& f = o.figures;
    int cmap = f.colormap == viz::Colormap::Magma ? 1 : 0;
    ImGui::SetNextItemWidth(140);
    if (ImGui::Combo("colour map", &cmap, "viridis\0magma\0")) f.colormap = cmap == 1 ? viz::Colormap::Magma : viz::Colormap::Viridis;
    ImGui::SameLine();
    ImGui::Checkbox("log scale", &f.log_scale);
    ImGui::SetNextItemWidth(140);
    ImGui::InputInt("map size (px)", &f.map_size, 64, 256);
    f.map_size = f.map_size <= 0 ? 0 : std::clamp(f.map_size, 16, kMaxMapSize);
    viz::ItemTooltip("Side of a heatmap's map area. 0: automatic (28 px per token for short texts, 1 px per token at 720+).");
    SameLineIfFits(90 + style.ItemInnerSpacing.x + ImGui::CalcTextSize("PNG scale").x);
    ImGui::SetNextItemWidth(90);
    ImGui::SliderInt("PNG scale", &f.png_scale, 1, viz::kMaxPngScale, "%dx", ImGuiSliderFlags_AlwaysClamp);
    viz::ItemTooltip("PNG pixels per figure pixel: every PNG drawn this many times larger, text and lines as sharp (2 or 3 for print; "
                     "--png-scale). SVGs are the same at any size.");
    ImGui::Checkbox("titles", &f.text.Titles);
    viz::ItemTooltip("Off: no figure draws its title (--no-titles), for a paper whose captions say what the figures show. Each SVG's <title> "
                     "and the data files keep it.");
    SameLineIfFits(90 + style.ItemInnerSpacing.x + ImGui::CalcTextSize("text size").x);
    ImGui::SetNextItemWidth(90);
    ImGui::SliderFloat("text size", &f.text.Scale, viz::kMinTextScale, viz::kMaxTextScale, "%.2gx", ImGuiSliderFlags_AlwaysClamp);
    viz::ItemTooltip("Every figure's text this many times its size, the layout making room for it (--text-scale): 1.5 or 2 for a figure "
                     "set in one column of a paper, where it is shrunk.");
    ImGui::SetNextItemWidth(140);
    TokenColorCombo("highlight", &f.highlight, state.analysis.get());
    viz::ItemTooltip("What colours the tokens of highlight.png / .svg / .html (the paper's Figure 1 uses tau_q).");
    int scope = static_cast<int>(f.highlight_scope);
    ImGui::SetNextItemWidth(140);
    if (ImGui::Combo("of", &scope, "one head\0a layer's mean\0mean over heads\0")) f.highlight_scope = static_cast<TokenScope>(scope);
    if (f.highlight_scope != TokenScope::ModelMean) {
        ImGui::SameLine();
        if (ImGui::SmallButton("use selected head")) f.highlight_head = state.selected;
        ImGui::SameLine();
        ImGui::TextDisabled("%s", f.highlight_scope == TokenScope::Head ? ("L" + std::to_string(f.highlight_head.layer) + " H" + std::to_string(f.highlight_head.head)).c_str()
                                                                       : ("layer " + std::to_string(f.highlight_head.layer)).c_str());
    }
    if (IsTemperature(f.highlight)) {
        ImGui::Checkbox("its own temperature scale", &f.temperature_per_head);
        viz::ItemTooltip("On: the highlighted head's own scale (a mean's, its values'), as View > Temperature scale per head. "
                         "Off: one scale for every head of the model, so a colour is one temperature in every figure.");
    }
    ImGui::SetNextItemWidth(140);
    ImGui::SliderFloat("sink eps", &o.sink_epsilon, 0.05f, 0.95f, "%.2f");

    ImGui::Separator();
    const bool running = Busy();
    const char* not_now = NotNow(state);
    if (!not_now && m_refused_for_now) m_error.clear(), m_refused_for_now = false;  // said while it was so; it no longer is
    ImGui::BeginDisabled(running || not_now || !state.analysis);
    if (ImGui::Button("Export", ImVec2(120, 0))) Start(state);
    ImGui::EndDisabled();
    viz::ItemTooltip("Writes every file in the list on the right (Ctrl+Enter).");
    if (!running && ImGui::IsWindowFocused(ImGuiFocusedFlags_RootAndChildWindows) && ImGui::GetIO().KeyCtrl &&
        ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Enter), false))
        Start(state);
    if (running) {
        ImGui::SameLine();
        if (ImGui::Button("Cancel")) m_cancel = true;
        const size_t done = m_progress_done, total = std::max<size_t>(1, m_progress_total);
        std::string current;
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            current = m_current;
        }
        char overlay[96];
        std::snprintf(overlay, sizeof overlay, "%zu / %zu", done, static_cast<size_t>(m_progress_total));
        ImGui::ProgressBar(static_cast<float>(done) / total, ImVec2(-1, 0), overlay);
        ImGui::TextDisabled("%s", current.c_str());
    } else if (not_now) {
        ImGui::SameLine();
        ImGui::TextDisabled("waiting: %s...", not_now);
    }
    if (!m_error.empty()) ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "%s", m_error.c_str());
    if (!m_done_message.empty()) ImGui::TextWrapped("%s", m_done_message.c_str());

    // The same export from a script.
    if (state.model) {
        ExportOptions with = o;
        with.lens = m_with_lens && ExportableLens(state);  // the lens's files are in the plan: --lens writes them
        if (with.lens) AttributeAsShown(state, &with);
        with.rank_heads = m_with_ranking && ShownRanking(state);  // and the ranking's: --rank-heads
        const std::string cmd = ExportCommandLine(with, m_source);
        ImGui::Separator();
        ImGui::TextUnformatted("Command line");
        ImGui::SameLine();
        if (ImGui::SmallButton("copy")) ImGui::SetClipboardText(cmd.c_str());
        const bool with_run = m_with_run && CurrentTimeline(state);
        viz::ItemTooltip(with_run ? "`ssaviz export` with these settings writes the same files, byte for byte, but run/: "
                                    "`ssaviz export --run` on the run's folder writes those (with --compare-run, --lens and the same "
                                    "comparison), the token's tau_q curve aside."
                                  : "`ssaviz export` with these settings writes the same files, byte for byte.");
        const std::string shown = cmd.size() > 600 ? cmd.substr(0, 600) + " ..." : cmd;
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled("%s", shown.c_str());
        ImGui::PopTextWrapPos();
    }
}

void ExportDialog::DrawPreview(const WindowState& state) {
    if (!state.analysis || !state.model) {
        ImGui::TextDisabled("waiting for the model...");
        return;
    }
    // The plan is rebuilt only when the settings or the analysis change, not every frame.
    ExportOptions options = m_options;
    if (auto fits = FitToModel(&options, *state.analysis, m_with_lens && ExportableLens(state)); !fits) {
        ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.45f, 0.4f, 1.0f));
        ImGui::TextWrapped("%s", fits.error().c_str());  // the whole of it: a line past the pane's edge was cut
        ImGui::PopStyleColor();
        return;
    }
    const std::string plan_key = model::JsonText(ExportOptionsToJson(options));
    const std::shared_ptr<const LensPair> lens = m_with_lens && ExportableLens(state) ? state.lens : nullptr;
    const HeadImpacts* ranking = m_with_ranking ? ShownRanking(state) : nullptr;
    const std::shared_ptr<const RunTrack> run = m_with_run && CurrentTimeline(state) ? state.timeline : nullptr;
    const RunTokenPick token = run ? RunTabToken(state, run->timeline) : RunTokenPick{};
    const bool token_moved = token.token != m_plan_token.token || !(token.head == m_plan_token.head);
    if (plan_key != m_plan_key || state.analysis != m_plan_analysis || lens != m_plan_lens || ranking != m_plan_ranking || run != m_plan_run ||
        (run && token_moved)) {
        m_plan_key = plan_key;
        m_plan_analysis = state.analysis;  // the plan refers into it
        m_plan_lens = lens;
        m_plan_ranking = ranking;
        m_plan_run = run;
        m_plan_token = token;
        m_plan = PlanExport(state.text, *state.analysis, *state.model, options);
        for (ExportFile& f : ExtraFiles(state, options)) m_plan.push_back(std::move(f));
        m_preview_path.clear();
        const model::Status fits = FiguresFit(options, *state.analysis);
        m_plan_refused = fits ? std::string() : fits.error();
    }
    if (!m_plan_refused.empty()) {
        ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.45f, 0.4f, 1.0f));
        ImGui::TextWrapped("%s", m_plan_refused.c_str());
        ImGui::PopStyleColor();
        return;
    }
    const std::vector<ExportFile>& plan = m_plan;
    std::vector<int> figures;
    for (size_t k = 0; k < plan.size(); ++k)
        if (IsFigure(plan[k].path)) figures.push_back(static_cast<int>(k));
    ImGui::Text("%zu files", plan.size());
    viz::ItemTooltip("Everything the export writes; click a figure to preview it.");
    ImGui::SameLine();
    ImGui::TextDisabled("(%zu figures)", figures.size());
    if (ImGui::BeginChild("##files", ImVec2(0, ImGui::GetTextLineHeightWithSpacing() * 6.5f), true)) {
        for (size_t k = 0; k < plan.size(); ++k) {
            const bool figure = IsFigure(plan[k].path);
            if (!figure) ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
            if (ImGui::Selectable(plan[k].path.c_str(), figure && static_cast<int>(k) == m_preview_index) && figure)
                m_preview_index = static_cast<int>(k);
            if (!figure) ImGui::PopStyleColor();
        }
    }
    ImGui::EndChild();
    if (figures.empty()) {
        ImGui::TextDisabled("no figures: tick PNG or SVG to preview them");
        return;
    }
    if (std::find(figures.begin(), figures.end(), m_preview_index) == figures.end()) m_preview_index = figures.front();

    // Re-rasterise only when the figure or its inputs (the plan) change.
    const ExportFile& file = plan[m_preview_index];
    if (file.path != m_preview_path) {
        m_preview_path = file.path;
        std::string error;
        if (!viz::LoadFigureFonts(&error)) {
            m_error = error;
            return;
        }
        // The figure the file will hold, rasterised as the PNG export draws it.
        m_preview.Upload(viz::RasterizeFigure(file.figure()), true);
    }
    if (!m_preview.Valid()) return;
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float scale = std::min({1.0f, avail.x / m_preview.Width(), std::max(80.0f, avail.y - 4) / m_preview.Height()});
    ImGui::Image(m_preview.Id(), ImVec2(m_preview.Width() * scale, m_preview.Height() * scale));
    if (ImGui::IsItemHovered()) viz::Tooltip("%s: %d x %d px (shown at %.0f%%)", file.path.c_str(), m_preview.Width(), m_preview.Height(), scale * 100);
}

}  // namespace app
