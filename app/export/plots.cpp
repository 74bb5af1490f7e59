#include "app/export/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/core/names.h"

namespace app {
namespace {

const char* const kDot = " \xC2\xB7 ";  // " · " between the parts of a title

std::string Format(const char* format, double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, value);
    return buf;
}

// One head's row of a [L, H, T] array, or NaNs when the analysis lacks it.
std::vector<float> HeadRow(const model::RowArray* rows, const model::Analysis& a, HeadRef h) {
    const int64_t row = static_cast<int64_t>(h.layer) * a.n_head + h.head;
    if (!rows || row >= rows->rows() || rows->tokens() != a.n_tokens) return std::vector<float>(a.n_tokens, NAN);
    return rows->Row(row);
}

float Mean(const std::vector<float>& v, size_t begin = 0) {
    double sum = 0;
    int n = 0;
    for (size_t i = begin; i < v.size(); ++i)
        if (std::isfinite(v[i])) sum += v[i], ++n;
    return n ? static_cast<float>(sum / n) : NAN;
}

// A plot of the sides, each named and in its colour: SSA's series, its comparison's and, beside a
// fine-tune's base, the base's (series 2).
viz::Plot SidesPlot(const model::Analysis& a, viz::SeriesKind kind) {
    viz::Plot p;
    p.Series.resize(a.HasBase() ? 3 : 2);
    p.Series[0].Name = SsaSideName(a);
    p.Series[0].Color = viz::kSsaColor;
    p.Series[1].Name = CompareName(a);
    p.Series[1].Color = viz::kCompareColor;
    if (a.HasBase()) {
        p.Series[2].Name = "base";
        p.Series[2].Color = viz::kBaseColor;
    }
    for (viz::PlotSeries& s : p.Series) s.Kind = kind;
    return p;
}

// Each side's row metrics, in SidesPlot's order.
const model::MapMetrics& SideMetrics(const model::Analysis& a, size_t side) {
    return side == 0 ? a.metrics : side == 1 ? a.metrics_compare : a.metrics_base;
}

// Whether temperatures vary: a tau = 1 side or a vanilla base has none to count.
bool HasTemperatures(const model::RowArray& tau) {
    for (float v : tau.Flat())
        if (std::isfinite(v) && v != 1.0f) return true;
    return false;
}

// The heads in the order of in.heads, and the selected one's index there.
int SelectedIndex(const PlotInput& in) {
    if (!in.selected) return -1;
    for (size_t k = 0; k < in.heads.size(); ++k)
        if (in.heads[k].ref == *in.selected) return static_cast<int>(k);
    return -1;
}

bool HeadScope(const PlotInput& in) { return in.head_scope && in.selected; }

//-------------------------------------------------------------------------------------------------
// The Sparsity plots

viz::Plot Dilution(const PlotInput& in) {
    const model::Analysis& a = in.analysis;
    viz::Plot p = SidesPlot(a, viz::SeriesKind::Line);
    std::vector<float> x;
    for (int i = 0; i < a.n_tokens; ++i) x.push_back(static_cast<float>(i + 1));
    for (size_t k = 0; k < p.Series.size(); ++k) {
        const model::RowArray* rows = SideMetrics(a, k).Find("normalized_entropy");
        viz::PlotSeries& side = p.Series[k];
        if (HeadScope(in)) {
            side.Y = HeadRow(rows, a, *in.selected);
            if (a.n_tokens > 0) side.Y[0] = NAN;  // one key: trivially 0
        } else {
            side.Y = RowMeanOverHeads(rows, a);
        }
        side.X = x;
    }
    p.Options.YLabel = HeadScope(in) ? "H_i / ln i" : "H_i / ln i, mean over heads";
    p.Options.Title = in.model_name + kDot + "attention dilution: normalised entropy by position" + (HeadScope(in) ? kDot + HeadName(*in.selected) : "");
    p.Options.XLabel = "query position i, from 1 (i keys)";  // the paper's i: ln i of i keys, where the views count from 0
    p.Options.YRange = viz::Range{0.0f, 1.05f};
    if (in.query >= 0) p.Options.XMarker = static_cast<float>(in.query + 1);
    return p;
}

std::string DilutionNote(const PlotInput& in, const viz::Plot& p) {
    std::string note = "mean over rows 2..T:";
    for (size_t k = 0; k < p.Series.size(); ++k) note += (k ? ", " : " ") + p.Series[k].Name + ": " + Format("%.3f", Mean(p.Series[k].Y, 1));
    return note;
}

viz::Plot TauQHistogram(const PlotInput& in) {
    const model::Analysis& a = in.analysis;
    viz::Plot p = SidesPlot(a, viz::SeriesKind::Histogram);
    auto values = [&](const model::RowArray& tau) { return HeadScope(in) ? HeadRow(&tau, a, *in.selected) : tau.Flat(); };
    // Only sides with temperatures of their own: SSA, a twin, a base that is itself an SSA model.
    p.Series[0].Y = values(a.tau_q);
    if (HasTwin(a)) p.Series[1].Y = values(a.tau_q_compare);
    if (a.HasBase() && HasTemperatures(a.tau_q_base)) p.Series[2].Y = values(a.tau_q_base);
    p.Series.erase(std::remove_if(p.Series.begin() + 1, p.Series.end(), [](const viz::PlotSeries& s) { return s.Y.empty(); }), p.Series.end());
    p.Options.Title = in.model_name + kDot + "query inverse temperature tau_q " + (HeadScope(in) ? "(" + HeadName(*in.selected) + ")" : "(all heads)");
    p.Options.XLabel = "tau_q";
    p.Options.YLabel = HeadScope(in) ? "tokens" : "tokens x heads";
    p.Options.XMarker = 1.0f;  // vanilla attention
    return p;
}

std::string TauQNote(const PlotInput& in, const viz::Plot& p) {
    const std::vector<float>& values = p.Series[0].Y;
    float lo = INFINITY, hi = -INFINITY;
    for (float v : values)
        if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    if (!(lo <= hi)) return "";
    return "SSA mean " + Format("%.3f", Mean(values)) + ", min " + Format("%.3f", lo) + ", max " + Format("%.3f", hi) + " over " +
           std::to_string(values.size()) + " values";
}

viz::Plot QkSpectrum(const PlotInput& in) {
    viz::Plot p;
    viz::PlotSeries points;
    points.Name = "heads";
    points.Kind = viz::SeriesKind::Points;
    points.Color = viz::kSsaColor;
    for (const HeadSummary& s : in.heads) {
        points.X.push_back(s.Get("qk_eig_var"));
        points.Y.push_back(s.Get("entropy"));
        points.Labels.push_back(HeadName(s.ref));
    }
    p.Series = {std::move(points)};
    p.Options.Title = in.model_name + kDot + "QK eigenvalue variance vs entropy";
    p.Options.XLabel = "variance of eig(W_k^T W_q / sqrt(d_h))";
    p.Options.YLabel = "mean attention entropy (nats)";
    p.Options.Highlighted = SelectedIndex(in);
    return p;
}

viz::Plot SinkMass(const PlotInput& in) {
    const model::Analysis& a = in.analysis;
    viz::Plot p = SidesPlot(a, viz::SeriesKind::Bars);
    for (const HeadSummary& s : in.heads) {
        p.Series[0].Y.push_back(s.Get("sink_mass"));
        p.Series[1].Y.push_back(s.Get("sink_mass", Side::Compare));
        if (a.HasBase()) p.Series[2].Y.push_back(HeadMean(a.metrics_base.Find("sink_mass"), a, s.ref.layer, s.ref.head));
        p.Options.XCategories.push_back(HeadName(s.ref));
    }
    p.Options.CategoryGroup = a.n_head;
    for (int l = 0; l < a.n_layer; ++l) p.Options.GroupLabels.push_back("L" + std::to_string(l));
    // Its name says what it is ("eps 0.30" was cryptic), to three digits (--sink-eps 0.001 read "eps 0.00").
    p.Options.YLine = viz::PlotLine{in.sink_epsilon, Format("sink threshold %.3g", in.sink_epsilon)};
    p.Options.Title = in.model_name + kDot + "first-token mass per head";
    p.Options.YLabel = "first-token (sink) mass";
    p.Options.XRange = viz::Range{-0.7f, static_cast<float>(in.heads.size()) - 0.3f};
    p.Options.Highlighted = SelectedIndex(in);
    return p;
}

std::string SinkNote(const PlotInput& in, const viz::Plot& p) {
    const int heads = static_cast<int>(in.heads.size());
    std::string note = "sink ratio:";
    for (size_t k = 0; k < p.Series.size(); ++k) {  // each side's heads above eps, as IsSinkHead rules
        int sinks = 0;
        for (float mass : p.Series[k].Y) sinks += IsSinkHead(mass, in.sink_epsilon) ? 1 : 0;
        note += (k ? ", " : " ") + p.Series[k].Name + " " + Format("%.2f", heads ? static_cast<float>(sinks) / heads : 0.0f) + " (" +
                std::to_string(sinks) + " of " + std::to_string(heads) + (k ? ")" : " heads)");
    }
    return note;
}

}  // namespace

const std::vector<AnalysisPlot>& SparsityPlots() {
    static const std::vector<AnalysisPlot> plots = {
        {"dilution", "Attention dilution: normalised entropy by position",
         "Normalised entropy H_i / ln i of each query row i (1 = uniform over the i visible keys). Vanilla attention dilutes: its "
         "curve rises towards 1 as the context grows. SSA's temperatures should keep it flat and low. Click to select that query token.",
         PlotPick::Query, Dilution, DilutionNote},
        {"tau_q_histogram", "Query inverse temperature tau_q",
         "Distribution of the query inverse temperatures tau_q(i). tau_q > 1 sharpens a row's attention, < 1 flattens it; vanilla "
         "attention is tau = 1 (the vertical line).", PlotPick::None, TauQHistogram, TauQNote},
        {"qk_spectrum", "QK eigenvalue variance vs entropy (all heads)",
         "Each point is a head: the variance of the real parts of the eigenvalues of W_k^T W_q / sqrt(d_h) against its mean "
         "attention entropy. Bao et al. link small variance to localized (low-entropy) attention. Click a point to select the head.",
         PlotPick::Head, QkSpectrum},
        {"sink_mass", "Attention sinks: first-token mass per head",
         "Mean weight each head puts on the first token (rows 2..T). Heads above eps are sink heads (Gu et al.); the sink ratio "
         "is their share. Dim bars are below eps. Click a bar to select the head.", PlotPick::Head, SinkMass, SinkNote, true},
    };
    return plots;
}

const AnalysisPlot* FindSparsityPlot(const std::string& key) {
    for (const AnalysisPlot& p : SparsityPlots())
        if (key == p.key) return &p;
    return nullptr;
}

}  // namespace app
