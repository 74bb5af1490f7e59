// Small pieces the views share: placeholders and layout, cache checks, numbers, the head tooltip
// and clicks of the heads grid, the matrix and the pins, and the token colourings' combo.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <imgui.h>

#include "app/core/state.h"
#include "app/export/head_summary.h"
#include "app/export/run_export.h"
#include "app/gui/window_state.h"
#include "viz/colormap.h"

namespace app {

// For views with nothing to show yet: draws why ("waiting for the model..." or a pointer to the
// error) and returns true when there is no analysis.
bool DrawNoAnalysisNote(const AppState& state);
// The Lens tab's last run where it is of the shown analysis (its text, model and comparison); null
// where none ran or it is stale.
const LensPair* CurrentLens(const WindowState& state);
// What the Lens tab attributes: the selected query's prediction, or with none the last position
// that has a next token; SSA's top prediction at the last token (none in the text), else as the
// tab's Attribute says. `at`: its one-position run, where it is of that position and target
// (null where none is, or it is stale).
struct LensTabAt {
    int64_t position = 0;
    LensTarget target = LensTarget::Next;
    const LensAtPair* at = nullptr;
};
LensTabAt LensTabPosition(const WindowState& state);
// The Run tab's timeline where it ran on the shown text (a stopped one too: the steps it ran), its
// tokens and comparison the shown analysis's; null where none ran, it has no step, or the text, its
// tokens (Continue's) or the comparison changed since.
const RunTrack* CurrentTimeline(const WindowState& state);
// Why the open run's timeline is not CurrentTimeline, in words ("" where it is, or no run is open).
std::string TimelineMismatch(const WindowState& state);
// Whose tau_q the Run tab's token curve follows: the query selected in the map (the last token if
// none) in the selected head; with `piece`, its piece as the token strip names it (TokenLabels).
RunTokenPick RunTabToken(const WindowState& state, const RunTimeline& t, bool piece = false);

// The next token after `after` (-1: from the start) that holds `what`, going round past the end: in
// the text, in its order, within a token or across tokens ("WITHOUT" over W|IT|H|OU|T: the token
// where it starts); else in a label's form (`labels`: "\n", "你 1/3"). -1 where none does.
int FindToken(const std::vector<std::string>& pieces, const std::vector<std::string>& labels, int T, const std::string& what, int after);

// What a paste of `text` loses in ImGui's text fields, which drop the C0 controls but tab and
// newline (a carriage return too), as one line for the status bar ("the paste left out 2 control
// characters (U+0001, U+001B): ..."); empty where it loses nothing.
std::string PasteNotice(std::string_view text);

// Whether Esc closes the window being drawn: it (or a child) has the focus, no text field takes
// the key (there Esc leaves the field first), and Esc was pressed on this frame. Sets
// state.escape_taken when it does, so that the same key does not also clear the query.
bool EscapeClosesWindow(WindowState& state);

// Continues on the same line, `spacing` after the last item (negative: the style's), when an item
// of `width` still fits there (else starts a new line).
void SameLineIfFits(float width, float spacing = -1.0f);

// Text on a dark plate (kLabelPlate), readable over any colour: labels over maps, bars and points.
constexpr ImU32 kLabelPlate = IM_COL32(20, 20, 24, 215);
void AddLabel(ImDrawList* draw, ImVec2 pos, ImU32 color, const char* text);

// A caption in the dimmed text colour, wrapped at the pane's edge rather than cut there, its lines
// broken only where `breaks` occurs (the break's spaces dropped there): ImGui's own wrapping also
// breaks after '.' and ',', inside numbers ("0.\n016"). A piece wider than the pane breaks between
// words, never before a number or after a layer ("L1 H2 -0.147" stays whole). One item: a tooltip
// after it covers it all.
void Caption(const std::string& text, const std::string& breaks = " ");
// Caption's pieces for a line `line` wide (each drawn whole, on the line while it fits).
std::vector<std::string> CaptionPieces(const std::string& text, const std::string& breaks, float line);
// The same in the text colour: a line of numbers that must not be cut ("mean loss: SSA 3.02, ...").
void WrappedLine(const std::string& text, const std::string& breaks = " ");

// A title, with its help as a "(?)" beside it where the line has room; else wrapped, the help on
// the title's hover.
void TitleWithHelp(const char* title, const char* help);

// What a map's colour bar reads, named on hover: "attention weight", or for a difference map
// "weight difference".
inline const char* BarQuantity(MapMode mode) { return IsDifference(mode) ? "weight difference" : "attention weight"; }

// Whether a cache made for `cached` is still current for `now` (same analysis object; a weak
// pointer so a new analysis never passes for an old one at a reused address). Never for no
// analysis: that costs nothing to redo.
bool SameAnalysis(const std::weak_ptr<const model::Analysis>& cached, const std::shared_ptr<const model::Analysis>& now);

// Every head's summary of the shown analysis (SummarizeHeads): the worker's, taken again only when
// the analysis changes (made here for one that came without). The views that list or colour heads
// by their numbers keep one.
class HeadSummaries {
public:
    bool Update(const WindowState& state);  // true when the analysis changed and the summaries with it
    const std::vector<HeadSummary>& Get() const;

private:
    std::weak_ptr<const model::Analysis> m_for;
    std::shared_ptr<const std::vector<HeadSummary>> m_summary;
};

// A number to three significant digits ("1.23", "0.0453", "0.00153", "12.3", "4.40e-04"; 100 and
// up whole).
std::string FormatNumber(float v);
// Two significant digits without the leading zero (".19", "1.2", "12", "-.05", ".0012"; below 0.001
// "4.1e-5", as FormatNumber turns to powers of ten there): small cells and thumbnails.
std::string FormatCompact(float v);
// Two significant digits in powers of ten ("1.1e-3", "9.1e-5", "-2.0e1"; "0" for 0, "-" where not
// finite): a grid whose numbers span thousandths and less, every cell alike.
std::string FormatPowerOfTen(float v);
// 1, 2, 5, 10, 20, 50, ... at least `raw`: how many tokens apart an axis's labels are.
int NiceStride(float raw);

// A grid of coloured cells over the text's positions (the Lens tab's logit lens, the What-ifs tab's
// parts token by token), in a child region that scrolls sideways: `rows` named rows, `columns` cells
// of `cell_w` x `cell_h` right of the names (named every few rows where rows are thinner than a
// line), and under the columns each one's piece where it has room for one, else its number every few
// columns; the query's column framed. Returns the hovered cell and where the cells were drawn.
struct CellGrid {
    const char* id = "##grid";
    int rows = 0, columns = 0;
    float cell_w = 8, cell_h = 8;
    float width = 0;      // the grid's width on screen, scrolling inside it (0: the rest of the line)
    int query = -1;       // the column framed (-1: none)
    bool follow_query = false;  // scroll to the query's column where it is out of view (a new query)
    int marked_row = -1;  // a row named in the query's colour (the selected head's)
    std::function<viz::Rgba8(int row, int column)> colour;
    std::function<std::string(int row)> row_name;
    std::function<std::string(int column)> piece;  // a column's label where it has room
    std::function<int(int column)> number = [](int column) { return column; };  // ... where it has not
    const char* axis = "position";            // under the row names: what the columns are
    const char* axis_with_pieces = "token";   // ... when they show pieces
    // Over a cell once it is filled (the lens writes its predicted piece there); may be empty.
    std::function<void(ImDrawList* draw, ImVec2 p0, ImVec2 p1, int row, int column)> over_cell;
};
struct CellGridHit {
    int row = -1, column = -1;  // -1: none hovered
    Rect cells;                 // on screen, the cells in view
};
float CellGridNameWidth(const CellGrid& grid);  // the row names' column
CellGridHit DrawCellGrid(const CellGrid& grid);

// The head's main numbers, SSA beside the comparison, as a tooltip (the grid, the matrix, pins).
void HeadTooltip(const AppState& state, const HeadSummary& s);
// The token colourings as a combo (the text view's "Colour by", the export dialog's highlight): the
// catalogue's, those the analysis holds (all before there is one), each with its help on hover;
// the one chosen is shown by its label whether offered or not.
std::vector<TokenColor> OfferedColorings(const model::Analysis* analysis);
bool TokenColorCombo(const char* id, TokenColor* color, const model::Analysis* analysis);
// Click selects, Ctrl+click pins, right-click offers what-ifs; on the item just submitted.
void HandleHeadClick(AppState& state, HeadRef ref);

// The layer x head grids' labels (the heads grid, the matrix), drawn last inside their scrolling
// child: the row labels L0.. stay at its visible left edge and the column labels H0.. at its top,
// over a backing, while the cells scroll under them (a 22 x 32 model's grid is larger than the
// pane). A cell (l, h) lies at origin + (label_w + h * pitch.x, header + l * pitch.y), cell_size
// wide. Every k-th label when the cells are narrower than a label, the selected head's always
// (bright), and none that would overlap it.
struct GridGeometry {
    ImVec2 origin;      // the grid's top-left, scrolled with it
    float label_w = 0;  // the row labels' column
    float header = 0;   // the column labels' row
    ImVec2 pitch;       // from one cell to the next
    ImVec2 cell_size;
};
void DrawGridLabels(ImDrawList* draw, const GridGeometry& g, int layers, int heads, HeadRef selected);

}  // namespace app
