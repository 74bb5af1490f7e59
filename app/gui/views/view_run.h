// The Run tab (SPEC section 11): a training run as a timeline. A step slider, previous / next and
// Play over the run's checkpoints (the open model is the chosen step's); the curves of the text
// over every step (each head value's mean per layer and over every head, or the loss, against
// step, the shown step marked), computed in the background one checkpoint at a time; each head's
// steps to sparsity; a compare run's (--compare-run) beside them. `ssaviz export --run` writes the
// same numbers and curves.
#pragma once

#include <memory>
#include <string>

#include "app/gui/window_state.h"
#include "viz/plot.h"

namespace app {

class RunView {
public:
    void Draw(WindowState& state);

private:
    void DrawSteps(WindowState& state);
    void DrawTimeline(WindowState& state);

    std::shared_ptr<const RunTrack> m_for;  // what m_plot and m_sparse were made for
    std::string m_plot_key;                 // the curve m_plot draws (state.settings.run_curve, or entropy where it lacks that)
    int m_token = -1;   // the token and head m_plot's token curve follows
    HeadRef m_head;
    viz::Plot m_plot;
    std::vector<int64_t> m_sparse, m_sparse_compare;  // the compare run's: empty without one
    std::vector<int64_t> m_halfway;                   // StepsToLensHalfway of the run (with the lens)
};

}  // namespace app
