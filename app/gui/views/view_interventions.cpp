#include "app/gui/views/view_interventions.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include <imgui.h>

#include "app/core/head_impacts.h"
#include "app/core/names.h"
#include "app/gui/views/view_common.h"
#include "viz/imgui/widgets.h"

namespace app {
namespace {

using Kind = model::Intervention::Kind;

const char* const kKindNames[] = {"tau = 1 (no SSA)", "position term only", "token term only", "scale tau_q - 1"};
const char* const kKindHelp[] = {
    "tau_q = tau_v = 1: the head (or layer) as vanilla attention.",
    "tau_q keeps its position term 1 + s ln i; the token term is 0.",
    "tau_q keeps its token term; the position term is 1.",
    "tau_q = 1 + scale (tau_q - 1): 0 is tau = 1, 1 leaves it as learned, 2 doubles its distance from 1.",
};

void RequestList(AppState& state, std::vector<model::Intervention> list) { state.interventions_request = std::move(list); }

// The list the next request should start from: one already asked for, else the applied one.
std::vector<model::Intervention> Pending(const AppState& state) {
    return state.interventions_request ? *state.interventions_request : state.interventions;
}

// A part's row hovered: where on the text it acted, its loss token by token against `from`'s; only
// on the text it was measured on (another one's tokens would name the wrong places).
void WhereTooltip(const WindowState& state, const HeadImpacts& impacts, const LossByToken& from, const LossByToken& losses) {
    if (!ImGui::IsItemHovered()) return;
    if (!from || !losses || from->size() != losses->size()) return viz::Tooltip("not measured");
    if (!state.analysis || state.analysis->tokens.ids != impacts.ids)
        return viz::Tooltip("measured on another text: rank the heads again to see where on this one it acted");
    std::vector<float> part(from->size());
    for (size_t t = 0; t < part.size(); ++t) part[t] = (*from)[t] - (*losses)[t];
    viz::Tooltip("where on the text (token by token, as head_impacts_tokens.npy):\n%s",
                      WhereHeadline(TokenLabels(state.analysis->tokens), part.data(), static_cast<int>(part.size()), 3).c_str());
}

std::string Nats(float v) {
    char buf[48];
    if (!std::isfinite(v)) return "-";
    std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
}

}  // namespace

std::vector<model::Intervention> WithIntervention(std::vector<model::Intervention> list, const model::Intervention& x) {
    list.erase(std::remove_if(list.begin(), list.end(), [&](const model::Intervention& y) { return y.layer == x.layer && y.head == x.head; }),
               list.end());
    list.push_back(x);
    return list;
}

void DrawHeadWhatIfMenu(AppState& state, HeadRef head) {
    ImGui::TextDisabled("L%d H%d what-if", head.layer, head.head);
    if (state.model) {
        const std::string group = KvGroupNote(state.model->config, head.head);
        if (!group.empty()) ImGui::TextDisabled("%s", group.c_str());
    }
    auto add = [&](Kind kind) { RequestList(state, WithIntervention(Pending(state), {kind, head.layer, head.head, 0.0f})); };
    if (ImGui::MenuItem("Ablate this head (tau = 1)")) add(Kind::Ablate);
    if (ImGui::MenuItem("Keep only tau_q's position term")) add(Kind::PositionOnly);
    if (ImGui::MenuItem("Keep only tau_q's token term")) add(Kind::TokenOnly);
    if (ImGui::MenuItem("tau_q = 1 only (its value temperature kept)")) add(Kind::QueryOff);
    if (ImGui::MenuItem("tau_v = 1 only (its query temperature kept)")) add(Kind::ValueOff);
    std::vector<model::Intervention> list = Pending(state);
    const auto on_head = [&](const model::Intervention& y) { return y.layer == head.layer && y.head == head.head; };
    const bool has = std::any_of(list.begin(), list.end(), on_head);
    if (ImGui::MenuItem("Remove its what-if", nullptr, false, has)) {
        list.erase(std::remove_if(list.begin(), list.end(), on_head), list.end());
        RequestList(state, std::move(list));
    }
}

void InterventionsView::Draw(WindowState& state) {
    if (DrawNoAnalysisNote(state)) return;
    ImGui::TextUnformatted("What-ifs on the SSA side");
    ImGui::SameLine();
    viz::HelpMarker("Change the SSA model's temperatures on a head or a whole layer and watch the maps, metrics and loss change.\n"
                    "Tick 'compare with the unedited model' so that the comparison is the model as trained: the difference\n"
                    "map and the loss change then show the what-ifs' effect alone. Right-click a head in the Heads or Matrix\n"
                    "tab for the same what-ifs. Saved in sessions; `ssaviz export --ablate SPEC` does the same.");
    ImGui::BeginGroup();
    DrawAdd(state);
    DrawList(state);
    ImGui::EndGroup();
    const ImVec2 r_min = ImGui::GetItemRectMin(), r_max = ImGui::GetItemRectMax();
    state.regions["interventions"] = {r_min.x, r_min.y, r_max.x - r_min.x, r_max.y - r_min.y};
    ImGui::Separator();
    DrawHeadRanking(state);
}

void InterventionsView::DrawAdd(AppState& state) {
    const int L = state.Layers(), H = state.Heads();
    const float fs = ImGui::GetFontSize();
    m_layer = std::clamp(m_layer, 0, std::max(0, L - 1));
    m_head = std::clamp(m_head, -1, H - 1);
    ImGui::SetNextItemWidth(fs * 6.0f);
    ImGui::SliderInt("##wi_layer", &m_layer, 0, std::max(0, L - 1), "layer %d", ImGuiSliderFlags_AlwaysClamp);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(fs * 7.0f);
    char head_label[32];
    std::snprintf(head_label, sizeof head_label, m_head < 0 ? "all heads" : "head %d", m_head);
    if (ImGui::BeginCombo("##wi_head", head_label)) {
        if (ImGui::Selectable("all heads", m_head < 0)) m_head = -1;
        for (int h = 0; h < H; ++h) {
            std::snprintf(head_label, sizeof head_label, "head %d", h);
            if (ImGui::Selectable(head_label, m_head == h)) m_head = h;
        }
        ImGui::EndCombo();
    }
    SameLineIfFits(fs * 10.0f);
    ImGui::SetNextItemWidth(fs * 10.0f);
    if (ImGui::BeginCombo("##wi_kind", kKindNames[m_kind])) {
        for (int k = 0; k < IM_ARRAYSIZE(kKindNames); ++k) {
            if (ImGui::Selectable(kKindNames[k], m_kind == k)) m_kind = k;
            viz::ItemTooltip(kKindHelp[k]);
        }
        ImGui::EndCombo();
    }
    viz::ItemTooltip(kKindHelp[m_kind]);
    if (static_cast<Kind>(m_kind) == Kind::Scale) {
        SameLineIfFits(fs * 5.0f);
        ImGui::SetNextItemWidth(fs * 5.0f);
        ImGui::DragFloat("##wi_scale", &m_scale, 0.01f, -4.0f, 4.0f, "x %.2f");
        viz::ItemTooltip("tau_q = 1 + scale (tau_q - 1). Drag, or Ctrl+click to type.");
    }
    SameLineIfFits(ImGui::CalcTextSize("Add").x + 2 * ImGui::GetStyle().FramePadding.x);
    if (ImGui::Button("Add")) RequestList(state, WithIntervention(Pending(state), {static_cast<Kind>(m_kind), m_layer, m_head, m_scale}));
    viz::ItemTooltip("Apply this what-if (it replaces an earlier one on the same head or layer).");

    const HeadRef sel = state.selected;
    char ablate[64];
    std::snprintf(ablate, sizeof ablate, "Ablate the selected head (L%d H%d)", sel.layer, sel.head);
    if (ImGui::Button(ablate)) RequestList(state, WithIntervention(Pending(state), {Kind::Ablate, sel.layer, sel.head, 0.0f}));
    viz::ItemTooltip("Set the shown head's temperatures to 1. Also: right-click a head in the Heads or Matrix tab.");

    bool unedited = state.compare_unedited && !state.twin;
    if (ImGui::Checkbox("compare with the unedited model", &unedited)) state.unedited_request = unedited;
    viz::ItemTooltip("The comparison becomes the SSA model without these what-ifs (its temperatures as trained), so the\n"
                     "difference map and the loss change show the what-ifs alone. Off: the comparison chosen in the map's 'vs'.");
}

void InterventionsView::DrawList(AppState& state) {
    const std::vector<model::Intervention> list = Pending(state);
    if (list.empty()) {
        ImGui::TextDisabled("No what-ifs: the SSA model runs as trained.");
    } else {
        int remove = -1;
        ImGuiListClipper clipper;  // a session may hold thousands: only the rows in view are drawn
        clipper.Begin(static_cast<int>(list.size()));
        while (clipper.Step())
            for (int k = clipper.DisplayStart; k < clipper.DisplayEnd; ++k) {
                ImGui::PushID(k);
                if (ImGui::SmallButton("x")) remove = k;
                viz::ItemTooltip("Remove this what-if.");
                ImGui::PopID();
                ImGui::SameLine();
                ImGui::TextUnformatted(model::Describe(list[k]).c_str());
            }
        if (remove >= 0) {
            std::vector<model::Intervention> rest = list;
            rest.erase(rest.begin() + remove);
            RequestList(state, std::move(rest));
        }
        if (ImGui::SmallButton("Remove all")) RequestList(state, {});
        ImGui::SameLine();
        if (list.size() <= 40) ImGui::TextDisabled("--ablate %s", model::FormatInterventions(list).c_str());
        else ImGui::TextDisabled("%zu what-ifs", list.size());
        if (state.interventions_request || (state.analysis && state.analysis->interventions != state.interventions)) {
            ImGui::SameLine();
            ImGui::TextDisabled("(applying...)");
        }
    }
    if (!state.notice.empty()) ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.3f, 1.0f), "%s", state.notice.c_str());

    const model::Analysis& a = *state.analysis;
    const float loss = model::MeanLoss(a.loss), loss_compare = a.HasComparePredictions() ? model::MeanLoss(a.loss_compare) : NAN;
    // The sides by the names every other view gives them (with a base: tau = 1, and the base too).
    const std::string compare = CompareName(a);
    std::string losses = "mean loss in nats, SSA: " + Nats(loss) + ", " + compare + ": " + Nats(loss_compare);
    if (a.HasBase() && !a.loss_base.empty()) losses += ", base: " + Nats(model::MeanLoss(a.loss_base));
    WrappedLine(losses, ", ");  // at 1024 px it was cut at "base 5"
    if (std::isfinite(loss) && std::isfinite(loss_compare)) {
        const float delta = loss - loss_compare;
        char text[96];
        std::snprintf(text, sizeof text, "(SSA - %s: %+.4f)", compare.c_str(), delta);
        SameLineIfFits(ImGui::CalcTextSize(text).x);
        ImGui::TextColored(delta > 0 ? ImVec4(1.0f, 0.5f, 0.45f, 1.0f) : ImVec4(0.5f, 0.7f, 1.0f, 1.0f), "%s", text);
        viz::ItemTooltip(("SSA's mean loss minus " + compare + "'s, over tokens 2..T. Above 0: the SSA side predicts the text worse.").c_str());
    }
}

void InterventionsView::DrawHeadRanking(WindowState& state) {
    ImGui::TextUnformatted("Which heads matter");
    ImGui::SameLine();
    viz::HelpMarker("Each head in turn set to tau = 1 (on top of the what-ifs above), on the current text: the mean loss\n"
                    "it gives, and its temperatures' part of the loss, the baseline minus that loss (below 0, blue: they\n"
                    "lowered it, as export --rank-heads writes it). Then tau_q alone and tau_v alone at 1 (three loss passes\n"
                    "a head: SSA's side alone, no maps), and beside a base the head's weights (q, k, v, o; never its temperatures) from the base:\n"
                    "the fine-tune's drift in that head (each layer's attention and MLP too, in the export and Fine-tune).\n"
                    "Any edit or new request stops it. Click a row to show that head; hover a part for where on the text it acted.");
    const int total = state.Layers() * state.Heads();
    if (state.ranking_heads) {
        const int done = state.head_impacts ? static_cast<int>(state.head_impacts->heads.size()) : 0;
        char label[48];
        std::snprintf(label, sizeof label, "%d / %d heads", done, total);
        // The bar by passes (a head is three and more, and beside a base the layers' parts): it moved a head at a time.
        ImGui::ProgressBar(std::clamp(state.progress, 0.0f, 1.0f), ImVec2(ImGui::GetFontSize() * 12.0f, 0), label);
        ImGui::SameLine();
        if (ImGui::Button("Cancel")) state.cancel_job_request = true;
    } else {
        char label[64];
        // The baseline, three loss passes a head (one of a model of one temperature), and beside a base
        // a pass a head, six a layer and two more.
        const bool both = !state.model || (state.model->config.query.Active() && state.model->config.value.Active());
        const int passes = RankPasses(state.Layers(), state.Heads(), RankOptions{true, true}, state.analysis && state.analysis->HasBase(), both);
        std::snprintf(label, sizeof label, "Rank the heads (%d passes)", passes);
        ImGui::BeginDisabled(state.generating);
        if (ImGui::Button(label)) state.rank_heads_request = true;
        ImGui::EndDisabled();
    }
    const HeadImpacts* impacts = state.head_impacts.get();
    if (!impacts) return;
    // An earlier text's baseline read as the shown one's beside the shown loss: said whose, dimmed.
    if (state.analysis && impacts->ids != state.analysis->tokens.ids)
        ImGui::TextDisabled("baseline mean loss %s nats, of the text it measured (not the shown one)", Nats(impacts->baseline).c_str());
    else
        ImGui::Text("baseline mean loss %s nats", Nats(impacts->baseline).c_str());
    if (impacts->cancelled) {  // below where the pane has no room (it was cut at "cancelled a")
        char cancelled[64];
        std::snprintf(cancelled, sizeof cancelled, "cancelled after %zu of %d heads", impacts->heads.size(), impacts->total);
        SameLineIfFits(ImGui::CalcTextSize(cancelled).x);
        ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.3f, 1.0f), "%s", cancelled);
    }
    if (impacts->on_top != state.interventions) {
        SameLineIfFits(ImGui::CalcTextSize("(measured with other what-ifs)").x);
        ImGui::TextDisabled("(measured with other what-ifs)");
    }

    // The table, or where on the text the parts acted (a drift grid asked for without a base shows
    // the temperatures', as a session's lens_map shows SSA without a base).
    const RankingView asked = state.settings.ranking;
    const RankingView view = (asked == RankingView::Drift || asked == RankingView::DriftParts) && !impacts->drift ? RankingView::Tokens : asked;
    struct Choice {
        RankingView view;
        const char* label;
        bool shown;
    } const choices[] = {{RankingView::Table, "table", true},
                         {RankingView::Tokens, "temperatures by token", true},
                         {RankingView::Drift, "drift along the layers", impacts->drift},
                         {RankingView::DriftParts, "drift, each part alone", impacts->drift}};
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("Show");
    const float radio = ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x;
    for (const Choice& c : choices) {
        if (!c.shown) continue;
        SameLineIfFits(radio + ImGui::CalcTextSize(c.label).x);
        if (ImGui::RadioButton((std::string(c.label) + "##ranking_view").c_str(), view == c.view)) state.settings.ranking = c.view;
    }
    SameLineIfFits(ImGui::CalcTextSize("(?)").x);
    viz::HelpMarker("table: the heads ranked by their parts of the mean loss.\n"
                    "temperatures by token: a row a head, a column a token, each cell the head's temperatures' part of that\n"
                    "token's loss (its loss given the tokens before it), as head_impacts_tokens.png draws it: blue where they\n"
                    "lowered it. Beside a base, drift along the layers: the fine-tune's weights taken back from the base part\n"
                    "by part from the embeddings up, each on top of the rows above it, and every weight's, which those add up\n"
                    "to (head_impacts_drift_tokens.png); drift, each part alone: each head's weights, each layer's attention\n"
                    "and MLP, and the embeddings taken back from the base one at a time (the table's drift column token by\n"
                    "token; head_impacts_drift_tokens.npy's rows). Hover a cell for its value; click a head's cell to show\n"
                    "the head with the query that predicts that token.");
    if (view == RankingView::Table)
        DrawRankingTable(state, *impacts);
    else
        DrawPartsGrid(state, view);
}

void InterventionsView::DrawRankingTable(WindowState& state, const HeadImpacts& impacts) {
    std::vector<HeadImpact> rows = impacts.heads;
    // Columns share the pane while each keeps its number whole ("+0.0000"); a narrower pane scrolls
    // sideways instead (its numbers were cut to "+0.00", its headers to "t..").
    const float number_w = ImGui::CalcTextSize("+0.0000").x + 2.0f * ImGui::GetStyle().CellPadding.x + 2.0f;
    const bool narrow = ImGui::GetContentRegionAvail().x < (impacts.drift ? 7 : 6) * number_w;
    const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV |
                                  (narrow ? ImGuiTableFlags_ScrollX | ImGuiTableFlags_SizingFixedFit : ImGuiTableFlags_SizingStretchProp);
    // The parts' columns, each the baseline minus the loss without that part, below 0 (blue) where
    // the part lowered the loss, as the export and the fine-tune's split read: the head at tau = 1,
    // tau_q alone, tau_v alone, and beside a base its weights from the base.
    const int columns = impacts.drift ? 7 : 6;
    const float drift_baseline = impacts.drift_baseline;
    if (!ImGui::BeginTable("##head_ranking", columns, flags, ImVec2(0, std::max(ImGui::GetContentRegionAvail().y, 6 * ImGui::GetFrameHeight()))))
        return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("layer");
    ImGui::TableSetupColumn("head");
    ImGui::TableSetupColumn("loss at tau = 1");
    ImGui::TableSetupColumn("part", ImGuiTableColumnFlags_DefaultSort | ImGuiTableColumnFlags_PreferSortAscending);
    ImGui::TableSetupColumn("tau_q");
    ImGui::TableSetupColumn("tau_v");
    if (impacts.drift) ImGui::TableSetupColumn("drift");
    static const char* const kColumnHelp[] = {
        "The head's layer.", "The head.", "The mean loss with this head at tau = 1 (tau_q and tau_v), on top of the what-ifs.",
        "Its temperatures' part of the loss: the baseline minus the loss at tau = 1. Below 0 (blue), they lowered the loss, as "
        "head_impacts.csv's part and the fine-tune's 'temperatures -0.03' read.",
        "The part of tau_q alone (tau_q at 1, tau_v kept).", "The part of tau_v alone (tau_v at 1, tau_q kept): tau_v never moves the attention rows.",
        "The drift's part in this head: the loss minus the loss with its weights (q, k, v, o; with grouped queries its kv head's) "
        "taken back from the base, its temperatures kept. Below 0, the fine-tune's change there lowered the loss."};
    ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
    for (int c = 0; c < columns; ++c) {
        ImGui::TableSetColumnIndex(c);
        ImGui::TableHeader(ImGui::TableGetColumnName(c));
        viz::ItemTooltip(kColumnHelp[c]);
    }
    if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && specs->SpecsCount > 0) {
        m_sort_column = specs->Specs[0].ColumnIndex;
        m_sort_ascending = specs->Specs[0].SortDirection == ImGuiSortDirection_Ascending;
    }
    // The temperatures' parts as the files give them: none (-) for a temperature the what-ifs set to
    // 1 already, which the ranking left as it was (it read +0.0000).
    const int H = state.Heads();
    const std::vector<float> parts[3] = {TemperatureParts(impacts, state.Layers(), H), TemperatureParts(impacts, state.Layers(), H, TemperaturePart::TauQ),
                                         TemperatureParts(impacts, state.Layers(), H, TemperaturePart::TauV)};
    auto part_at = [&](int which, const HeadImpact& r) {
        const size_t k = static_cast<size_t>(r.layer) * H + r.head;
        return r.head < H && k < parts[which].size() ? parts[which][k] : NAN;
    };
    auto key = [&](const HeadImpact& r) -> float {
        switch (m_sort_column) {
            case 0: return static_cast<float>(r.layer * 1000 + r.head);
            case 1: return static_cast<float>(r.head * 1000 + r.layer);
            case 2: return r.mean_loss;
            case 4: return part_at(1, r);
            case 5: return part_at(2, r);
            case 6: return drift_baseline - r.mean_loss_from_base;
            default: return part_at(0, r);
        }
    };
    std::stable_sort(rows.begin(), rows.end(), [&](const HeadImpact& x, const HeadImpact& y) {
        const float a = key(x), b = key(y);
        if (std::isnan(a) || std::isnan(b)) return !std::isnan(a) && std::isnan(b);  // none measured: last either way
        return m_sort_ascending ? a < b : a > b;
    });
    float largest = 1e-6f;
    for (const HeadImpact& r : rows)
        if (std::isfinite(r.delta)) largest = std::max(largest, std::abs(r.delta));
    for (const HeadImpact& r : rows) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        char id[32];
        std::snprintf(id, sizeof id, "%d##rank_%d_%d", r.layer, r.layer, r.head);
        const bool selected = state.selected == HeadRef{r.layer, r.head};
        if (ImGui::Selectable(id, selected, ImGuiSelectableFlags_SpanAllColumns)) state.selected = {r.layer, r.head};
        if (ImGui::BeginPopupContextItem()) {
            DrawHeadWhatIfMenu(state, {r.layer, r.head});
            ImGui::EndPopup();
        }
        ImGui::TableNextColumn();
        ImGui::Text("%d", r.head);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(Nats(r.mean_loss).c_str());
        ImGui::TableNextColumn();
        // A bar from the cell's left edge: blue where the temperatures lowered the loss, red where they raised it.
        const float part = part_at(0, r);
        const ImVec2 p = ImGui::GetCursorScreenPos();
        const float w = ImGui::GetContentRegionAvail().x, h = ImGui::GetTextLineHeight();
        const float share = std::isfinite(part) ? std::abs(part) / largest : 0.0f;
        ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + w * share, p.y + h), part < 0 ? IM_COL32(60, 110, 210, 110) : IM_COL32(200, 70, 60, 110));
        auto show = [&](float v, const LossByToken& from_tokens, const LossByToken& tokens, const char* why_none) {
            if (std::isfinite(v)) {
                ImGui::Text("%+.4f", v);
                WhereTooltip(state, impacts, from_tokens, tokens);
            } else {
                ImGui::TextDisabled("-");
                viz::ItemTooltip(why_none);
            }
        };
        const char* const off = "not measured: already at 1 by the what-ifs it was ranked on (null in head_impacts.json)";
        show(part, impacts.baseline_tokens, r.tokens, off);
        ImGui::TableNextColumn();
        show(part_at(1, r), impacts.baseline_tokens, r.tokens_tau_q, off);
        ImGui::TableNextColumn();
        show(part_at(2, r), impacts.baseline_tokens, r.tokens_tau_v, off);
        if (impacts.drift) {
            ImGui::TableNextColumn();
            show(drift_baseline - r.mean_loss_from_base, impacts.drift_baseline_tokens, r.tokens_from_base,
                 "not measured: the base could not give this head's weights (head_impacts.json's not_measured says why)");
        }
    }
    ImGui::EndTable();
    const ImVec2 r_min = ImGui::GetItemRectMin(), r_max = ImGui::GetItemRectMax();
    state.regions["head_ranking"] = {r_min.x, r_min.y, r_max.x - r_min.x, r_max.y - r_min.y};
}

void InterventionsView::DrawPartsGrid(WindowState& state, RankingView view) {
    const std::shared_ptr<const HeadImpacts>& impacts = state.head_impacts;
    const model::Analysis* a = state.analysis.get();
    if (!a || a->tokens.ids != impacts->ids) {
        ImGui::TextDisabled("measured on another text: rank the heads again to see where on this one they acted");
        return;
    }
    const int L = state.Layers(), H = state.Heads();
    if (m_grid_for != impacts || m_grid_view != view) {  // a new measure (each head's arrives as one) or view
        m_grid_for = impacts, m_grid_view = view;
        m_grid = view == RankingView::Drift        ? DriftPathGrid(*impacts, L, H)
                 : view == RankingView::DriftParts ? DriftPartsGrid(*impacts, L, H)
                                                   : HeadTemperatureGrid(*impacts, L, H);
        m_grid_scale = DivergingScaleOf(m_grid.values);
        m_grid_labels = TokenLabels(a->tokens);  // the ranking's text (its ids are the shown analysis's)
    }
    const int rows = static_cast<int>(m_grid.rows.size()), n = m_grid.tokens;
    if (m_grid.Empty() || static_cast<size_t>(n) + 1 != a->tokens.pieces.size()) {
        ImGui::TextDisabled(view == RankingView::Drift        ? "the drift's path is not measured yet"
                            : view == RankingView::DriftParts ? "the drift's parts are not measured yet"
                                                              : "no head's temperatures measured yet (or every head at tau = 1)");
        return;
    }
    const bool heads = view == RankingView::Tokens, alone = view == RankingView::DriftParts;
    const int head_rows = heads || alone ? L * H : 0;  // the rows that are heads, a click on one shows it
    const float most = m_grid_scale.most;
    char scale[160];  // broken between words only: "+3." / "6" split a number
    std::snprintf(scale, sizeof scale, "-%.3g (blue: lowered it) to +%.3g (red) nats%s", most, most, m_grid_scale.Clips() ? "*" : "");
    Caption(std::string("colour: ") + (heads ? "each head's temperatures'" : "the drift's") + " part of each token's loss, " + scale +
            (heads ? "" : alone ? "; each part alone" : "; each row on top of those above it"));
    if (ImGui::IsItemHovered())
        viz::Tooltip("The scale ends at the 99th percentile of the parts' magnitudes, %.3g nats%s (hover a cell for its value).\n"
                          "Column t is token t's loss given the tokens before it: the query at position t - 1 predicts it (framed).%s",
                          m_grid_scale.most,
                          m_grid_scale.Clips() ? (", the largest " + FormatNumber(m_grid_scale.largest) + " and the others beyond it in its end colours").c_str() : "",
                          heads ? ""
                          : alone ? "\nEach row's weights are taken back from the base alone (the table's drift column, token by token), so\n"
                                    "the rows need not add up to the last, every weight's: Show drift along the layers for parts that do."
                                  : "\nEach row's weights are taken back from the base on top of the rows above it (not one at a time, as the\n"
                                    "table's drift column), so the rows add up to the last, every weight's.");

    const std::vector<std::string>& labels = m_grid_labels;
    CellGrid grid;
    grid.id = "##ranking_grid";
    grid.rows = rows, grid.columns = n, grid.query = state.query;
    grid.follow_query = std::exchange(m_grid_query, state.query) != state.query;
    if (head_rows > 0) grid.marked_row = state.selected.layer * H + state.selected.head;
    grid.colour = [&](int r, int t) {
        const float v = m_grid.values[static_cast<size_t>(r) * n + t];
        return std::isfinite(v) ? viz::SampleColormap(viz::Colormap::Diverging, 0.5f + 0.5f * std::clamp(v / most, -1.0f, 1.0f)) : viz::Rgba8{90, 90, 90, 255};
    };
    grid.row_name = [&](int r) { return m_grid.rows[r]; };
    grid.piece = [&](int t) { return labels[t + 1]; };  // column t: token t + 1's loss
    grid.number = [](int t) { return t + 1; };
    grid.axis = grid.axis_with_pieces = "token";
    const float line = ImGui::GetTextLineHeight(), label_w = CellGridNameWidth(grid);
    grid.cell_w = std::max(4.0f, std::min(line * 4.0f, std::floor((ImGui::GetContentRegionAvail().x - label_w) / std::max(n, 1))));
    const float room = ImGui::GetContentRegionAvail().y - line - 6.0f - ImGui::GetStyle().ScrollbarSize;  // the labels' line under it
    // A line a row while there are few enough to name each (the pane scrolls), else fitted to it and
    // named every few (a GPT-2 small's 144 heads).
    grid.cell_h = std::clamp(std::floor(room / rows), rows <= 48 ? line : 2.0f, line + 2.0f);
    const CellGridHit hit = DrawCellGrid(grid);
    const int hovered_row = hit.row, hovered_t = hit.column;
    if (hovered_t >= 0) {
        const float v = m_grid.values[static_cast<size_t>(hovered_row) * n + hovered_t];
        char value[48] = "not measured";
        if (std::isfinite(v)) std::snprintf(value, sizeof value, "%+.4f nats", v);
        const std::string& row = m_grid.rows[hovered_row];
        const std::string where = "token " + std::to_string(hovered_t + 1) + " '" + labels[hovered_t + 1] + "' (its loss given the tokens before it)";
        if (hovered_row < head_rows) {
            if (heads)
                viz::Tooltip("%s's temperatures' part of %s: %s\n(the baseline's loss of it minus its loss with %s at tau = 1)\n"
                                  "click: show %s, the query at position %d (which predicts it)",
                                  row.c_str(), where.c_str(), value, row.c_str(), row.c_str(), hovered_t);
            else
                viz::Tooltip("%s's drift: its part of %s: %s\n(the loss minus the loss with %s's weights, q, k, v and o, taken back from "
                                  "the base alone, its temperatures kept)\nclick: show %s, the query at position %d (which predicts it)",
                                  row.c_str(), where.c_str(), value, row.c_str(), row.c_str(), hovered_t);
            if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
                state.selected = {hovered_row / std::max(H, 1), hovered_row % std::max(H, 1)};
                state.query = hovered_t;
            }
        } else if (alone) {
            const std::string what = hovered_row + 1 == rows ? "every weight taken back from the base (SSA's temperatures kept)"
                                                             : row + "'s weights taken back from the base alone";
            viz::Tooltip("%s: %s of %s\n(the loss minus the loss without that drift)\nclick: the query at position %d (which predicts it)",
                              what.c_str(), value, where.c_str(), hovered_t);
            if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) state.query = hovered_t;
        } else {
            const std::string what = hovered_row + 1 == rows ? "every weight taken back from the base (SSA's temperatures kept)"
                                                             : row + "'s weights taken back from the base, on top of the rows above it";
            viz::Tooltip("%s: %s of %s\n(the loss minus the loss without that drift; the rows above the last add up to it)\n"
                              "click: the query at position %d (which predicts it)",
                              what.c_str(), value, where.c_str(), hovered_t);
            if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) state.query = hovered_t;
        }
    }
    state.regions["ranking_grid"] = hit.cells;
}

}  // namespace app
