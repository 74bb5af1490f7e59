// The temperatures of the selected head against position: tau_q(i) for every query and tau_v(j)
// for every key as points, tau = 1 (vanilla) as a line, and the position trend a + s ln i fitted
// to tau_q (with its r, since the position term often dominates); beside a base or a twin that
// has temperatures of its own (another SSA model), its tau_q as rings. Click a point to make the
// token the query.
#pragma once

#include "app/gui/window_state.h"

namespace app {

class TemperatureView {
public:
    void Draw(WindowState& state);

private:
    bool m_log_x = true;  // 1 + s ln i is a straight line on a log axis
    bool m_show_tau_v = true;
    bool m_every_layer = true;  // every layer's learned 1 + s ln i (the model's slopes) over the selected head's points
    bool m_show_other = true;   // the base's or twin's tau_q, where it has temperatures
};

}  // namespace app
