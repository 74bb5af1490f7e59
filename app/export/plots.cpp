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

// A plot of the two sides, each named and in its colour: SSA's series, then its comparison's.
viz::Plot SidesPlot(const model::Analysis& a, viz::SeriesKind kind) {
    viz::Plot p;
    p.Series.resize(2);
    p.Series[0].Name = "SSA";
    p.Series[0].Color = viz::kSsaColor;
    p.Series[1].Name = CompareName(a);
    p.Series[1].Color = viz::kCompareColor;
    for (viz::PlotSeries& s : p.Series) s.Kind = kind;
    return p;
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
    viz::PlotSeries &ssa = p.Series[0], &other = p.Series[1];
    if (HeadScope(in)) {
        ssa.Y = HeadRow(a.metrics.Find("normalized_entropy"), a, *in.selected);
        other.Y = HeadRow(a.metrics_compare.Find("normalized_entropy"), a, *in.selected);
        if (a.n_tokens > 0) ssa.Y[0] = other.Y[0] = NAN;  // one key: trivially 0
        p.Options.YLabel = "H_i / ln i";
    } else {
        ssa.Y = RowMeanOverHeads(a.metrics.Find("normalized_entropy"), a);
        other.Y = RowMeanOverHeads(a.metrics_compare.Find("normalized_entropy"), a);
        p.Options.YLabel = "H_i / ln i, mean over heads";
    }
    for (int i = 0; i < a.n_tokens; ++i) ssa.X.push_back(static_cast<float>(i + 1));
    other.X = ssa.X;
    p.Options.Title = in.model_name + kDot + "attention dilution" + (HeadScope(in) ? kDot + HeadName(*in.selected) : "");
    p.Options.XLabel = "query position i";
    p.Options.YRange = viz::Range{0.0f, 1.05f};
    if (in.query >= 0) p.Options.XMarker = static_cast<float>(in.query + 1);
    return p;
}

std::string DilutionNote(const PlotInput& in, const viz::Plot& p) {
    return "mean over rows 2..T: SSA " + Format("%.3f", Mean(p.Series[0].Y, 1)) + ", " + p.Series[1].Name + " " +
           Format("%.3f", Mean(p.Series[1].Y, 1));
}

viz::Plot TauQHistogram(const PlotInput& in) {
    const model::Analysis& a = in.analysis;
    viz::Plot p = SidesPlot(a, viz::SeriesKind::Histogram);
    auto values = [&](const model::RowArray& tau) { return HeadScope(in) ? HeadRow(&tau, a, *in.selected) : tau.Flat(); };
    p.Series[0].Y = values(a.tau_q);
    if (HasTwin(a)) p.Series[1].Y = values(a.tau_q_compare);
    else p.Series.pop_back();  // only a twin has temperatures of its own; tau = 1 has none to count
    p.Options.Title = in.model_name + kDot + "query temperature tau_q " + (HeadScope(in) ? "(" + HeadName(*in.selected) + ")" : "(all heads)");
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
        p.Options.XCategories.push_back(HeadName(s.ref));
    }
    p.Options.CategoryGroup = a.n_head;
    for (int l = 0; l < a.n_layer; ++l) p.Options.GroupLabels.push_back("L" + std::to_string(l));
    p.Options.YLine = viz::PlotLine{in.sink_epsilon, Format("eps %.2f", in.sink_epsilon)};
    p.Options.Title = in.model_name + kDot + "first-token mass per head";
    p.Options.YLabel = "first-token (sink) mass";
    p.Options.XRange = viz::Range{-0.7f, static_cast<float>(in.heads.size()) - 0.3f};
    p.Options.Highlighted = SelectedIndex(in);
    return p;
}

std::string SinkNote(const PlotInput& in, const viz::Plot&) {
    const int heads = static_cast<int>(in.heads.size());
    int sinks = 0, sinks_compare = 0;
    for (const HeadSummary& s : in.heads) {
        sinks += IsSinkHead(s, Side::Ssa, in.sink_epsilon) ? 1 : 0;
        sinks_compare += IsSinkHead(s, Side::Compare, in.sink_epsilon) ? 1 : 0;
    }
    auto ratio = [&](int n) { return Format("%.2f", heads ? static_cast<float>(n) / heads : 0.0f); };
    return "sink ratio: SSA " + ratio(sinks) + " (" + std::to_string(sinks) + " of " + std::to_string(heads) + " heads), " +
           CompareName(in.analysis) + " " + ratio(sinks_compare) + " (" + std::to_string(sinks_compare) + " of " + std::to_string(heads) + ")";
}

}  // namespace

const std::vector<AnalysisPlot>& SparsityPlots() {
    static const std::vector<AnalysisPlot> plots = {
        {"dilution", "Attention dilution: normalised entropy by position",
         "Normalised entropy H_i / ln i of each query row i (1 = uniform over the i visible keys). Vanilla attention dilutes: its "
         "curve rises towards 1 as the context grows. SSA's temperatures should keep it flat and low. Click to select that query token.",
         PlotPick::Query, Dilution, DilutionNote},
        {"tau_q_histogram", "Query temperature tau_q",
         "Distribution of the query temperatures tau_q(i). tau_q > 1 sharpens a row's attention, < 1 flattens it; vanilla "
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
