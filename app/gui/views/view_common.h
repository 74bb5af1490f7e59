// Small pieces the views share: placeholders and layout, cache checks, numbers, and the head
// tooltip and clicks of the heads grid, the matrix and the pins.
#pragma once

#include <memory>
#include <string>

#include "app/core/state.h"
#include "app/export/head_summary.h"

namespace app {

// For views with nothing to show yet: draws why ("waiting for the model..." or a pointer to the
// error) and returns true when there is no analysis.
bool DrawNoAnalysisNote(const AppState& state);

// Continues on the same line when an item of `width` still fits there (else starts a new line).
void SameLineIfFits(float width);

// Whether a cache made for `cached` is still current for `now` (same analysis object; a weak
// pointer so a new analysis never passes for an old one at a reused address). Never for no
// analysis: that costs nothing to redo.
bool SameAnalysis(const std::weak_ptr<const model::Analysis>& cached, const std::shared_ptr<const model::Analysis>& now);

// Every head's summary of the shown analysis (SummarizeHeads), made again only when the analysis
// changes: the views that list or colour heads by their numbers keep one.
class HeadSummaries {
public:
    bool Update(const AppState& state);  // true when the analysis changed and the summaries were made again
    const std::vector<HeadSummary>& Get() const { return m_summary; }

private:
    std::weak_ptr<const model::Analysis> m_for;
    std::vector<HeadSummary> m_summary;
};

// A number in at most 4 significant characters ("1.23", "0.045", "12.3", "1.2e-4").
std::string FormatNumber(float v);

// The head's main numbers, SSA beside the comparison, as a tooltip (the grid, the matrix, pins).
void HeadTooltip(const AppState& state, const HeadSummary& s);
// Click selects, Ctrl+click pins, right-click offers what-ifs; on the item just submitted.
void HandleHeadClick(AppState& state, HeadRef ref);

}  // namespace app
