// A training run's curves (SPEC section 11): one quantity against step, a line for each layer (the
// mean over its heads) and one for every head together, and the same mean of a second run (the
// vanilla run of the same schedule, another seed) on the same axes. Written once as a plot
// description (viz/plot.h), so a file and the window draw the same curves.
#pragma once

#include <string>
#include <vector>

#include "viz/plot.h"

namespace app {

// One run's values of one quantity over its steps.
struct RunCurve {
    std::string label;                        // "run", "compare run": the legend's
    std::vector<float> steps;                 // [S]
    std::vector<std::vector<float>> layers;   // [L][S]: the mean over each layer's heads; empty: none
    std::vector<float> all;                   // [S]: the mean over every head (or the quantity itself, a loss)
};

// The first run's layers and both runs' means against step.
viz::Plot RunCurvesPlot(const std::string& title, const std::string& y_label, const std::vector<RunCurve>& runs);

}  // namespace app
