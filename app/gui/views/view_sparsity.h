// Sparsity plots: normalised entropy against query position for SSA and the comparison
// (attention dilution), a histogram of tau_q, a scatter of QK eigenvalue variance against mean
// entropy over heads (Bao et al.), and first-token (sink) mass per head with the sink ratio.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "app/gui/window_state.h"
#include "app/export/head_summary.h"

namespace app {

class SparsityView {
public:
    void Draw(WindowState& state);

private:
    void Prepare(const model::Analysis& a);  // per-analysis arrays, rebuilt when the analysis changes

    bool m_whole_model = false;  // scope of the dilution plot and the tau_q histogram
    std::weak_ptr<const model::Analysis> m_for;
    std::vector<HeadSummary> m_summary;                  // [L * H]
    std::vector<float> m_positions;                      // [T] 1..T
    std::vector<float> m_norm_mean, m_norm_mean_compare; // [T] normalised entropy, mean over heads
    std::vector<float> m_eig_var, m_entropy;             // [L * H]
    std::vector<float> m_sink, m_sink_compare;           // [L * H]
    std::vector<std::string> m_head_labels;              // [L * H] "L0 H0"
    std::vector<std::string> m_layer_labels;             // [L] "L0"
};

}  // namespace app
