#include "app/core/names.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "app/core/run.h"
#include "model/io/files.h"

namespace app {

std::string HeadName(HeadRef h) { return "L" + std::to_string(h.layer) + " H" + std::to_string(h.head); }

const char* ComparisonKindName(model::Comparison c) {
    switch (c) {
        case model::Comparison::Counterfactual: return "tau1";
        case model::Comparison::LayerLocal: return "local";
        case model::Comparison::Twin: return "twin";
        case model::Comparison::Unedited: return "unedited";
        case model::Comparison::Base: return "base";
    }
    return "tau1";
}

bool HasTwin(const model::Analysis& a) {
    return a.comparison == model::Comparison::Twin || (!a.compare_label.empty() && a.compare_label != "vanilla");
}

std::string CompareName(const model::Analysis& a) {
    if (a.compare_label.empty()) return CompareKindOf(CompareKind::None).label;
    // With a base, the comparison side is the SSA weights at tau = 1 (the base is a third side).
    if (a.HasBase()) return CompareKindOf(CompareKind::Global).label;
    return CompareKindOf(HasTwin(a) ? CompareKind::Twin : CompareKindRunning(a.comparison).kind).label;
}

std::string ComparedWith(const model::Analysis& a) { return CompareName(a) + (a.HasBase() ? " + base" : ""); }

std::string LensKey(const model::Analysis& a) { return a.compare_label + '\n' + ComparisonKindName(a.comparison) + '\n' + a.base_label; }

std::string TwinFolderName(const model::Analysis& a) {
    if (!HasTwin(a)) return "";
    std::string name = a.compare_label;
    while (name.size() > 1 && name.back() == '/') name.pop_back();
    const size_t slash = name.find_last_of('/');
    if (slash != std::string::npos) name = name.substr(slash + 1);
    if (name.size() > 18) name = name.substr(0, 16) + "..";
    return name;
}

std::string BaseFolderName(const model::Analysis& a) { return a.HasBase() ? FolderAndParent(a.base_label) : ""; }

std::string FolderAndParent(std::string path) {
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    const size_t slash = path.find_last_of('/');
    const size_t above = slash == std::string::npos || slash == 0 ? std::string::npos : path.find_last_of('/', slash - 1);
    return above == std::string::npos ? path : path.substr(above + 1);
}

std::string TopHeads(const std::vector<float>& values, int heads, int n, float floor) {
    std::vector<int> order(values.size());
    std::iota(order.begin(), order.end(), 0);
    auto key = [&](int k) { return std::isfinite(values[k]) ? values[k] : -INFINITY; };
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return key(x) > key(y); });
    std::string text;
    for (int k = 0; k < std::min<int>(n, static_cast<int>(order.size())) && heads > 0; ++k) {
        const int i = order[k];
        if (!std::isfinite(values[i]) || values[i] < floor) break;
        char value[32];
        std::snprintf(value, sizeof value, "%.3g", values[i]);  // a drift of 6.8e-05, not 0.000
        text += (k ? ", " : "") + HeadName({i / heads, i % heads}) + " " + value;
    }
    if (text.empty() && std::isfinite(floor)) {
        char none[48];
        std::snprintf(none, sizeof none, "none above %.0e (float32 rounding)", floor);
        return none;
    }
    return text;
}

namespace {

// Every tau_q and tau_v exactly 1: a model without temperatures (a vanilla base or twin opened
// alone, a vanilla run's step), or every head at tau = 1 by the what-ifs.
bool EveryTemperatureIsOne(const model::Analysis& a) {
    for (const model::RowArray* tau : {&a.tau_q, &a.tau_v})
        for (int64_t row = 0; row < tau->rows(); ++row)
            if (const model::RowArray::Running f = tau->Figures(row); f.min != 1.0f || f.max != 1.0f) return false;
    return true;
}

}  // namespace

std::string SsaSideName(const model::Analysis& a) {
    if (!a.interventions.empty()) return "SSA with what-ifs";
    return EveryTemperatureIsOne(a) ? "vanilla" : "SSA";  // a vanilla run's step was titled "SSA"
}

std::string ComparisonWeightsTitle(const model::Analysis& a) { return "tau = 1 (" + (SsaSideName(a) == "vanilla" ? std::string("its") : "SSA's") + " weights)"; }

std::string TemperaturePartName(const model::Analysis& a) { return a.interventions.empty() ? "temperatures" : "temperatures and what-ifs"; }

std::string FineTuneHeadline(const model::Analysis& a, const model::Decomposition& d) {
    char line[240];
    std::snprintf(line, sizeof line, "mean loss %.4f (base) to %.4f (%s), %+.4f nats = %s %+.4f + drift %+.4f", d.loss_mean_base,
                  d.loss_mean, SsaSideName(a).c_str(), d.loss_mean - d.loss_mean_base, TemperaturePartName(a).c_str(),
                  d.loss_mean - d.loss_mean_tau1, d.loss_mean_tau1 - d.loss_mean_base);
    return line;
}

std::string BaseTemperatures(const model::Analysis& a) {
    if (!a.HasBase()) return "";
    auto any_not_one = [](const model::RowArray& tau) {
        for (int64_t row = 0; row < tau.rows(); ++row)
            if (const model::RowArray::Running f = tau.Figures(row); f.min != 1.0f || f.max != 1.0f) return true;
        return false;
    };
    const bool q = any_not_one(a.tau_q_base), v = any_not_one(a.tau_v_base);
    return q && v ? "tau_q and tau_v" : q ? "tau_q" : v ? "tau_v" : "";
}

std::string BaseTemperaturesNote(const model::Analysis& a) {
    const std::string which = BaseTemperatures(a);
    if (which.empty()) return "";
    return "the base has temperatures of its own (" + which + "): 'temperatures' is all of SSA's, not what fine-tuning changed in them, "
           "and 'drift' holds the base's going away as well as the other weights' change";
}

std::string BaseDifferenceNote(const model::Analysis& a) {
    if (a.base_difference.empty()) return "";
    return "the base also differs in what is no weight (the fine-tune's against the base's: " + model::EscapeForMessage(a.base_difference, 4096) +
           "): the drift and the loss against the base hold its effect beside the weights' change, and no weight taken back undoes it";
}

std::string SelfComparisonNote(const model::Analysis& a) {
    if (a.comparison == model::Comparison::Unedited && a.interventions.empty())
        return "the comparison is the model without its what-ifs, and there are none, so it is itself and every difference is 0: "
               "give what-ifs (--ablate), or compare with tau = 1 (--compare vanilla)";
    if (a.comparison != model::Comparison::Counterfactual && a.comparison != model::Comparison::LayerLocal && !a.HasBase()) return "";
    // One token: a position term is 1 there (1 + s ln 1) whatever the model learned, so its
    // temperatures being 1 says nothing of the model (it was told it "has none").
    if (a.n_tokens < 2) return "";
    if (!EveryTemperatureIsOne(a)) return "";
    if (a.HasBase())
        return "every temperature of the fine-tune is 1 (a model without temperatures, or every head at tau = 1 by the what-ifs), so its "
               "'temperatures' part is 0 and its whole change is the drift: to see what training with temperatures gave, set the SSA "
               "fine-tune against this one as its twin (--compare DIR)";
    return "every temperature of the SSA side is 1 (a model without temperatures, or every head at tau = 1 by the what-ifs), so its "
           "tau = 1 comparison is itself and every difference is 0: compare it with a twin (--compare DIR), or open the SSA fine-tune "
           "with this model as its --base";
}

std::string CompareExplanation(const model::Analysis& a) {
    if (const std::string self = SelfComparisonNote(a); !self.empty()) return "Here " + self + ".";
    if (a.HasBase())
        return "tau = 1, with the base beside: the fine-tune's own weights with tau_q = tau_v = 1 everywhere, and its base model (" +
               a.base_label + ") as a third side. SSA against tau = 1 is what the temperatures did; tau = 1 against the base is what "
               "fine-tuning did to the other weights (their drift); SSA against the base is the whole change.";
    if (HasTwin(a))
        return "twin: a separately trained model (" + a.compare_label +
               ") on the same tokens. Its heads learned on their own, so head h of the twin need not do what head h of SSA does.";
    if (a.comparison == model::Comparison::Unedited)
        return "unedited: the SSA model as trained, without the what-ifs (" + model::FormatInterventions(a.interventions) +
               ") applied to the SSA side, so a difference is the what-ifs' effect alone.";
    if (a.comparison == model::Comparison::LayerLocal)
        return "tau = 1 local: at each layer, the SSA model's own q and k (the same input as SSA) with tau = 1. "
               "It shows what that layer's temperatures do, with nothing below it changed.";
    return "tau = 1: the same weights with tau_q = tau_v = 1 everywhere (the vanilla counterfactual). It is a whole second "
           "forward pass, so from layer 1 on its heads read a different residual stream: a later layer's difference mixes its "
           "own temperatures with everything that changed below it.";
}

std::string KvGroupNote(const model::ModelConfig& c, int head) {
    const int groups = c.KvHeads();
    if (groups == c.n_head || groups <= 0) return "";
    const int per = c.n_head / groups, g = head / per;
    return "reads kv head " + std::to_string(g) + " with H" + std::to_string(g * per) + "-H" + std::to_string(g * per + per - 1) +
           (c.value.Active() ? " (their value temperature is the group's; a what-if here sets it to 1 for this head alone)" : "");
}

}  // namespace app
