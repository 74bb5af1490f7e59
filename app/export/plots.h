// The plots of an analysis, each written once as a figure description (viz/plot.h): the window
// draws them (viz::DrawPlot, the Sparsity tab) and the exports write them (viz::PlotFigure: `ssaviz
// export`, the export dialog, Python's plot()), so the tab and the files show the same figures.
// A plot is a row of a table; adding a row adds it to the tab, to every export and to Python.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/core/state.h"
#include "app/export/head_summary.h"
#include "model/nn/analysis.h"
#include "viz/plot.h"

namespace app {

// What a plot is drawn from and for. A file shows the whole model and no selection; the window
// adds its selection.
struct PlotInput {
    PlotInput(const model::Analysis& a, const std::vector<HeadSummary>& h, std::string name, float eps)
        : analysis(a), heads(h), model_name(std::move(name)), sink_epsilon(eps) {}
    const model::Analysis& analysis;
    const std::vector<HeadSummary>& heads;  // SummarizeHeads(analysis), [L * H]
    std::string model_name;                 // for titles
    float sink_epsilon;
    std::optional<HeadRef> selected;  // the window's selected head: highlighted among the heads
    bool head_scope = false;          // per-position plots show the selected head alone, not the model
    int query = -1;                   // the window's selected query: marked on per-position plots
};

// What clicking a plot's point or bar selects in the window.
enum class PlotPick { None, Query, Head };

struct AnalysisPlot {
    const char* key;     // "dilution": plots/dilution.png and .svg, Python's plot("dilution")
    const char* header;  // the window's section header over the plot
    const char* help;    // its tooltip
    PlotPick pick;
    viz::Plot (*build)(const PlotInput& in);
    // One line of numbers the window shows with the plot (means, the sink ratio); null: none.
    std::string (*note)(const PlotInput& in, const viz::Plot& plot) = nullptr;
    bool sink_threshold = false;  // the window puts the sink threshold (eps) slider above it, the note beside it
};

// The Sparsity tab's plots, in its order: normalised entropy by position (attention dilution), the
// tau_q histogram, QK eigenvalue variance against entropy per head, first-token (sink) mass per
// head with the eps line.
const std::vector<AnalysisPlot>& SparsityPlots();
const AnalysisPlot* FindSparsityPlot(const std::string& key);  // null for an unknown key

}  // namespace app
