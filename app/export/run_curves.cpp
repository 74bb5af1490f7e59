#include "app/export/run_curves.h"

namespace app {

viz::Plot RunCurvesPlot(const std::string& title, const std::string& y_label, const std::vector<RunCurve>& runs) {
    viz::Plot plot;
    plot.Options.Title = title;
    plot.Options.XLabel = "training step";
    plot.Options.YLabel = y_label;
    plot.Options.Width = 720;
    plot.Options.Height = 440;
    if (runs.empty()) return plot;
    const RunCurve& first = runs[0];
    for (size_t l = 0; l < first.layers.size(); ++l) {
        viz::PlotSeries s;
        s.Name = "layer " + std::to_string(l);
        s.X = first.steps;
        s.Y = first.layers[l];
        s.Color = viz::SeriesColor(static_cast<int>(l));
        s.Color.a = 150;  // the layers behind the means
        plot.Series.push_back(std::move(s));
    }
    // The means on top: the run's in black, a second run's in grey, each with dots at its steps.
    const viz::Rgba8 kMeanColors[] = {{20, 20, 20, 255}, {128, 128, 128, 255}};
    for (size_t r = 0; r < runs.size() && r < 2; ++r) {
        const std::string name = runs[r].label + (runs[r].layers.empty() ? "" : ", every head");
        for (viz::SeriesKind kind : {viz::SeriesKind::Line, viz::SeriesKind::Points}) {
            viz::PlotSeries s;
            s.Kind = kind;
            s.Name = kind == viz::SeriesKind::Line ? name : "";
            s.X = runs[r].steps;
            s.Y = runs[r].all;
            s.Color = kMeanColors[r];
            plot.Series.push_back(std::move(s));
        }
    }
    return plot;
}

}  // namespace app
