// Asks for what a checkpoint without config.json cannot tell about itself: n_head where the
// shapes leave it open, the SSA forms of tau_q and tau_v, the activation. A modal window that
// re-infers the config as the user types and shows the shape it would open with, or why not.
// Whether to ask is model::ShapeSourceOf's answer, the loader's own; the files are opened once,
// when a model is asked for, never while drawing.
#pragma once

#include <string>

#include "app/gui/window_state.h"
#include "model/io/weights.h"

namespace app {

class CheckpointDialog {
public:
    // Before the worker loads `path`: whether its shape must come from the tensors and they, with
    // `hints`, leave something open. Then the dialog shows (true) with the weights it opened here;
    // else (false: a config says the shape, the tensors tell it all, or the path is not a model,
    // which the worker reports) nothing is kept.
    bool Ask(const std::string& path, const model::ConfigHints& hints);
    void Draw(WindowState& state);  // on Open: state.hints and state.open_model_request
    bool Showing() const { return m_show; }

private:
    model::ConfigHints Hints() const;  // from the fields
    void Check();                      // re-infers into m_preview / m_error, from m_weights (no file work)

    std::string m_path;
    model::WeightFile m_weights;
    bool m_show = false;
    int m_n_head = 0;                    // 0: infer
    std::string m_query, m_value;        // form specs ("sigmoid,shared,sum"); empty: infer
    int m_activation = 0;                // 0 infer, 1 gelu_new, 2 gelu
    std::string m_preview, m_error;
};

}  // namespace app
