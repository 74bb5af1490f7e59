// The bundled models (assets/models) and the Examples menu: each opens a model with its vanilla
// twin (or a fine-tune with its base) and a text that shows what it learned.
#pragma once

#include <string>
#include <vector>

namespace app {

struct Example {
    std::string id;        // "english", "graph", "passkey": `ssaviz --example ID`
    std::string title;
    std::string hint;      // one line under the menu item
    std::string model_dir;
    std::string twin_dir;  // empty: compare with the tau = 1 counterfactual
    std::string base_dir;  // a fine-tune's example ("base"): the base it started from, the three sides and the Fine-tune tab
    std::string text;
    bool graph_panel = false;  // open the P* / SSA / vanilla window (the paper's Figure 3)
    std::string query_piece;   // select the last token with these bytes as the query (e.g. " ?")
    int layer = 0, head = 0;   // the head selected at first
    std::string run_dir;          // a run example ("run"): the window opens its last step and the Run tab
    std::string compare_run_dir;  // and sets this run beside it ("compare_run")
};

// assets/models: next to the executable's parent (build/../assets/models), else the source tree's.
std::string BundledModelsDir();
// GPT-2's tokenizer files shipped beside the bundled models (init-random's default tokenizer).
std::string BundledGpt2TokenizerDir();

// Read from assets/models/examples.json; examples whose model folder is missing are left out.
// A passkey example's text ("passkey_tokens": N) is generated with the task's own generator.
std::vector<Example> BundledExamples();

// The task a model was trained on ("text", "graph", "passkey"), from its train.json; "" if none.
std::string TrainedTask(const std::string& model_dir);
// A text in the vocabulary of a model trained on a synthetic task (TrainedTask): the graph's nodes
// then its queries, or a passkey sequence of min(context, 256) tokens; "" for any other task.
std::string TaskText(const std::string& task, int64_t context);

// The default model: $SSAVIZ_MODEL, else the bundled English SSA model (english/ssa where
// BundledModelsDir finds the bundled models, as --example and Python do), else the build's random
// model (models/default next to the executable). Empty if none.
std::string DefaultModelDir();

// The comparison that matters, found beside a model: a vanilla twin shipped with it (the folder's
// sibling "vanilla" holding a config.json, as assets/models/X/ssa and X/vanilla; none for a folder
// "base", whose "vanilla" beside it is a fine-tune of it), or, for a
// lit-gpt fine-tuning, the base model it started from (a lit_model.pth beside the fine-tuned
// checkpoint the model was opened from, or in a folder "base" inside or beside its folder). Empty if none. It reads
// the file system: the window's worker asks once per model it opens (WorkerEvent::twin_beside),
// never a view while it draws.
std::string TwinBeside(const std::string& model_dir);
// The base a fine-tune started from, for the three-way comparison (CompareKind::Base): a
// lit_model.pth beside the checkpoint the model was opened from, or a folder "base" inside the
// fine-tune's folder or beside it (its lit_model.pth, or a model folder), or, for a step of a run
// train --from kept (OUT/run/ssa/checkpoint-N), the base beside the run (OUT/base). Empty if none.
// `run_step`: the model is one step of a run, whose steps share a base: a checkpoint folder's own
// insides are not looked in (a base/ inside one step set another base for that step alone).
std::string BaseBeside(const std::string& model_dir, bool run_step = false);
// Where BaseBeside found none, why what is in its places was not taken: a lit_model.pth that is
// the model itself, a FIFO, a link loop or a link to nothing; a folder "base" likewise, or the
// model's own, or without a model. As a clause to end a message: "; 'ft/base' is a loop of
// symbolic links". Empty where nothing is there. `run_step` as BaseBeside's: a base inside the
// step's own folder is said to be, and why it was passed over.
std::string WhyNoBaseBeside(const std::string& model_dir, bool run_step = false);
// What TwinBeside found, for buttons and menus: "its base model (lit_model.pth)" or "its twin".
std::string TwinBesideLabel(const std::string& twin);

}  // namespace app
