// File > Export (Ctrl+E): choose formats, maps, heads and figure settings, see a preview of any
// figure that will be written and the list of files, then write them in the background with a
// progress bar. It calls the same PlanExport / WriteExport as `ssaviz export`, and shows the
// equivalent command line, which writes the same bytes.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "app/core/exit_code.h"
#include "app/export/export.h"
#include "app/export/flags.h"
#include "app/export/run_export.h"
#include "app/gui/window_state.h"
#include "viz/imgui/texture.h"

namespace app {

class ExportDialog {
public:
    ~ExportDialog();

    // Opens the window with figure settings taken from the current view (first time only).
    void Show(const AppState& state);
    // The settings' first-time defaults from the view, without opening the window (a session saved).
    void EnsureOptions(const AppState& state);
    bool IsOpen() const { return m_open; }
    // What the shown analysis ran on (model, text, comparison, what-ifs, how the model was opened),
    // for the command line that repeats the export.
    void SetSource(CommandOptions source) { m_source = std::move(source); }
    void Draw(WindowState& state);

    // Starts writing in the background (the Export button); false with Error() when it cannot.
    // With the Lens tab's lens of the shown text, its files and figures too (`export --lens`'s).
    bool Start(const WindowState& state);
    bool Busy() const { return m_running.load(); }
    const std::string& Error() const { return m_error; }
    // The exit code a run that exports and ends (--export-to) gives for Error(): 2 where the settings
    // do not fit the model (a head or highlight past it, as `export` refuses), else 1.
    int ErrorExit() const { return m_error_exit; }
    const std::string& Done() const { return m_done_message; }  // after a finished export
    // The run's timeline it wrote left out steps that did not open: --export-to then exits 3, as
    // `export --run` does (it exited 0, and a script took the run for whole).
    bool LeftOutSteps() const { return m_left_out_steps; }

    ExportOptions& Options() { return m_options; }  // what a session saves and restores
    void SetOptions(const ExportOptions& options);

private:
    void DrawSettings(WindowState& state);
    // The files beside PlanExport's, each where it is asked for: the lens's (LensExportFiles) where
    // the Lens tab ran it on the shown analysis, the heads' ranking's (HeadImpactFiles) where
    // What-ifs ranked them on it, the run's timeline (RunDataFiles, RunCurveFiles) where the Run tab's timeline ran
    // on the shown text.
    std::vector<ExportFile> ExtraFiles(const WindowState& state, const ExportOptions& options) const;
    void DrawPreview(const WindowState& state);
    void Join();

    ExportOptions m_options;
    CommandOptions m_source;
    bool m_open = false;
    bool m_initialized = false;
    std::string m_out_edit;
    std::string m_layers_edit, m_heads_edit;  // "all" or "0,2"
    std::string m_error;
    bool m_refused_for_now = false;  // m_error says a job was running (NotNow): cleared once none is
    int m_error_exit = kExitFailure;
    bool m_left_out_steps = false;
    std::string m_done_message;

    // The preview: one planned figure, rasterised as it will be written.
    int m_preview_index = 0;
    std::vector<ExportFile> m_plan;  // what the current settings write, for the list and the preview
    std::string m_plan_key;          // the settings it was planned for
    std::string m_plan_refused;      // why those settings' figures cannot be drawn (FiguresFit); empty: they can
    std::shared_ptr<const model::Analysis> m_plan_analysis;  // and the analysis (the plan refers into it)
    std::shared_ptr<const LensPair> m_plan_lens;             // and the lens whose files it holds
    const HeadImpacts* m_plan_ranking = nullptr;             // and the ranking whose files it holds
    std::shared_ptr<const RunTrack> m_plan_run;              // and the timeline whose curves it holds
    RunTokenPick m_plan_token;                               // and the token its tau_q_token curve follows
    bool m_with_lens = true;  // the lens's files too, when the Lens tab ran it on the shown text
    bool m_with_ranking = true;  // the heads' ranking's files too, when What-ifs ranked them on the shown text
    bool m_with_run = true;      // the run's timeline too, when the Run tab's timeline ran on the shown text
    std::string m_preview_path;      // the planned file the preview shows; empty: redraw
    viz::Texture m_preview;

    // The background export.
    std::thread m_thread;
    std::atomic<bool> m_running{false};
    std::atomic<bool> m_cancel{false};
    std::atomic<size_t> m_progress_done{0}, m_progress_total{0};
    std::mutex m_mutex;       // guards m_result and m_current
    std::string m_current;    // the file being written
    std::string m_result;     // "" while running; the outcome after
    bool m_result_taken = true;
};

}  // namespace app
