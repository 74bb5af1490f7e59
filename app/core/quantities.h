// The catalogue of what ssaviz shows: one entry per quantity (its key, label, help, unit, scope,
// where an analysis keeps it for each side, how a head reads it, its number format, and which
// files and tables list it). The window's tables, combos, matrix, badges and token colourings,
// the flags, sessions, batch columns, metrics.json and the Python docs all list from it (the shape
// of ImPlot's colormap registry): adding a metric is one entry in Quantities() plus its
// computation in model/nn.
//
// Index of this file:
// [SECTION] Sides and readings: SSA, the comparison, their difference
// [SECTION] A quantity
// [SECTION] The catalogue and its readers
// [SECTION] Head values: one number per head (the matrix, badges, Table tab, tooltips)
// [SECTION] Token colourings (the token strip, --highlight, sessions)
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/nn/analysis.h"

namespace app {

//-------------------------------------------------------------------------------------------------
// [SECTION] Sides and readings: SSA, the comparison, their difference
//-------------------------------------------------------------------------------------------------

// The sides of an analysis a quantity can be held for: the SSA model, what it is compared with
// (tau = 1, the layer-local comparison, a twin, the unedited model), and a fine-tune's base model
// (issue 34; held only by an analysis with a base). Each quantity says which sides it has (Sides),
// so a two-sided one stays two-sided.
enum class Side { Ssa, Compare, Base };
constexpr int kSides = 3;
constexpr Side kAllSides[kSides] = {Side::Ssa, Side::Compare, Side::Base};

// A set of sides, as bits.
enum Sides : unsigned {
    kNoSide = 0,
    kSsaSide = 1u << 0,
    kCompareSide = 1u << 1,
    kBaseSide = 1u << 2,
    kBothSides = kSsaSide | kCompareSide,  // SSA and its comparison
    kModelSides = kBothSides | kBaseSide,  // every side a model's maps have
};
constexpr bool Has(Sides sides, Side side) { return (sides >> static_cast<unsigned>(side)) & 1u; }
const char* JsonName(Side side);  // metrics.json's side objects: "ssa", "comparison", "base"
const char* Suffix(Side side);    // batch columns and Python's keys: "", "_compare", "_base"
// Whether an analysis has a side at all: the base only with a base.
bool HasSide(const model::Analysis& a, Side side);

// What a view reads of a quantity (or a map): one side, or the difference SSA - another side (the
// comparison; with a base, the base: the fine-tune's whole change).
enum class MapMode { Ssa, Compare, Difference, Base, BaseDifference };
constexpr MapMode kAllMapModes[] = {MapMode::Ssa, MapMode::Compare, MapMode::Difference, MapMode::Base, MapMode::BaseDifference};
const char* ToString(MapMode mode);                            // "ssa", "compare", "diff", "base", "base_diff": flags, sessions, file names
std::optional<MapMode> ParseMapMode(const std::string& name);  // those names (or the older "vanilla" for compare)
const char* MapModeLabel(MapMode mode);  // "SSA", "comparison", "SSA - comparison", "base", "SSA - base"
bool IsDifference(MapMode mode);         // Difference and BaseDifference: SSA minus ReadSide(mode)
Side ReadSide(MapMode mode);             // the side a mode shows, or the side its difference subtracts from SSA's
inline bool IsBaseMode(MapMode mode) { return ReadSide(mode) == Side::Base; }  // needs an analysis with a base
model::ThumbnailKind ThumbnailKindOf(MapMode mode);  // what a mode's heads grid shows

//-------------------------------------------------------------------------------------------------
// [SECTION] A quantity
//-------------------------------------------------------------------------------------------------

// The shape of one side's values.
enum class Scope {
    Token,  // one per token, no head: [T - 1], entry t - 1 is token t's (the first token has none)
    Row,    // one per head and query row, [L, H, T] (entropy, tau_q): colours tokens, read per head
    Head,   // one per head, [L, H] (the QK spectrum)
};

// How a head reads a Row quantity as numbers (a Head quantity is its own number).
enum class Reading {
    None,        // not per head (a token colouring only)
    RowMean,     // the mean over query rows 2..T: row 1 has one key, so a row metric is trivial there
    TokenStats,  // the mean, smallest and largest over all T tokens (temperatures): three head values
};

// How its colours are scaled.
enum class Scale {
    Range,      // the shown values' smallest..largest
    AroundOne,  // a temperature: diverging, centred at tau = 1 (vanilla attention)
    FromZero,   // a loss or a divergence: 0..the largest (a loss: the larger side's, one scale for both sides)
};

// Where metrics.json reports it: in each head's entry (two-sided: inside "ssa" and "comparison"),
// and as [layer][head][query] arrays under "rows".
enum JsonPlaces : unsigned { kNotInJson = 0, kJsonHeads = 1u << 0, kJsonRows = 1u << 1 };

struct Quantity {
    std::string key;          // the one name: sessions, flags, metrics.json, batch columns, Python
    std::string label;        // combos, legends, tooltips: "sink mass"
    std::string short_label;  // table headers: "norm. entropy"
    std::string help;         // one line: what it is and how to read it
    std::string unit;         // "nats"; "" for a plain number
    Scope scope = Scope::Row;
    Sides sides = kSsaSide;   // the sides an analysis holds it for
    // Where an analysis keeps it: a row of its MapMetrics by name (metrics, metrics_compare), or an
    // array of the analysis per side (null: that side is not held), [L, H, T] for a Row quantity.
    std::string metric;
    const model::RowArray model::Analysis::*rows_member[kSides] = {};
    const std::vector<float> model::Analysis::*member[kSides] = {};
    Reading reading = Reading::None;
    Scale scale = Scale::Range;
    float offset = 0;            // added to the stored values before they are shown (tau_q_token: 1 + tanh)
    const char* format = "%.3f"; // one value in tables
    bool larger_first = false;   // tables sort it largest first on the first click (a divergence, a sink)
    // Where else it is listed.
    unsigned json = kNotInJson;  // JsonPlaces
    std::string json_key;        // metrics.json's name when it is not the key ("l1_distance")
    std::string python;          // its key in Python's Analysis.metrics; "" when not there
    std::string decomposition;   // against a base, its name in metrics.json's decomposition ("js_temperature"); "" if none
    Sides batch = kNoSide;       // the sides whose model-wide mean a batch summary has (column key + Suffix)
    Sides shown = kNoSide;       // the sides the Table tab shows at first (the others on request) and the head tooltip lists
    bool sink = false;           // the sink-head rule reads it (IsSinkHead): tables, metrics.json and batches show the rule beside it
    bool base_only = false;      // an analysis holds it only against a fine-tune's base (js_total, js_drift)
    int index = 0;               // its place in Quantities()

    const std::string& JsonKey() const { return json_key.empty() ? key : json_key; }
    bool TwoSided() const { return Has(sides, Side::Ssa) && Has(sides, Side::Compare); }
    // The side a view reads for `mode`: a one-sided quantity reads its SSA side whatever is asked.
    MapMode ShownMode(MapMode mode) const { return TwoSided() ? mode : MapMode::Ssa; }

    // Builders, for the catalogue's entries: Quantity("entropy", ...).Unit("nats").Metric("entropy").
    Quantity(std::string key, std::string label, std::string short_label, std::string help, Scope scope);
    Quantity& Unit(std::string u) { unit = std::move(u); return *this; }
    Quantity& Metric(std::string name) { metric = std::move(name); sides = kModelSides; return *this; }
    Quantity& Members(const model::RowArray model::Analysis::*ssa, const model::RowArray model::Analysis::*compare = nullptr,
                      const model::RowArray model::Analysis::*base = nullptr);
    Quantity& Members(const std::vector<float> model::Analysis::*ssa, const std::vector<float> model::Analysis::*compare = nullptr,
                      const std::vector<float> model::Analysis::*base = nullptr);
    Quantity& Read(Reading r) { reading = r; return *this; }
    Quantity& Scaled(Scale s) { scale = s; return *this; }
    Quantity& Offset(float o) { offset = o; return *this; }
    Quantity& Format(const char* f) { format = f; return *this; }
    Quantity& LargerFirst() { larger_first = true; return *this; }
    Quantity& Json(unsigned places, std::string name = "") { json = places; json_key = std::move(name); return *this; }
    Quantity& Python(std::string name) { python = std::move(name); return *this; }
    Quantity& Decomposition(std::string name) { decomposition = std::move(name); return *this; }
    Quantity& Batch(Sides s) { batch = s; return *this; }
    Quantity& Shown(Sides s) { shown = s; return *this; }
    Quantity& SinkRule() { sink = true; return *this; }
    Quantity& BaseOnly() { base_only = true; return *this; }
};

//-------------------------------------------------------------------------------------------------
// [SECTION] The catalogue and its readers
//-------------------------------------------------------------------------------------------------

// Every quantity, in the order the combos, tables, batch columns and docs list them.
const std::vector<Quantity>& Quantities();
const Quantity* FindQuantity(std::string_view key);  // null for an unknown key
const Quantity& GetQuantity(std::string_view key);   // asserts the key names one

// A Row quantity's [L, H, T] values on one side; null when the analysis lacks them (or their
// shape is off).
const model::RowArray* RowValues(const Quantity& q, const model::Analysis& a, Side side);
// A Head quantity's [L, H] values; null when the analysis lacks them.
const std::vector<float>* HeadArray(const Quantity& q, const model::Analysis& a, Side side);
// A Token quantity's raw [T - 1] values on one side; null when the analysis lacks them.
const std::vector<float>* TokenArray(const Quantity& q, const model::Analysis& a, Side side);
// A Token quantity for every token, [T]: token t's value (NaN for the first token, which nothing
// predicts, and where a side lacks it); Difference is SSA's minus the comparison's. NaN for other scopes.
std::vector<float> TokenValues(const Quantity& q, const model::Analysis& a, MapMode mode);
// Whether the analysis holds a side of it, or what a reading needs (Difference: both sides).
bool Holds(const Quantity& q, const model::Analysis& a, Side side);
bool Holds(const Quantity& q, const model::Analysis& a, MapMode mode);

//-------------------------------------------------------------------------------------------------
// [SECTION] Head values: one number per head (the matrix, badges, Table tab, tooltips)
//-------------------------------------------------------------------------------------------------

// A Row quantity's per-head statistic (Reading::TokenStats); Mean for every other head value.
enum class Stat { Mean, Min, Max };

// One number a head has, on each side its quantity has: a Head quantity, a Row quantity's mean over
// rows 2..T, or one of its token statistics ("tau_q_min").
struct HeadValue {
    const Quantity* quantity = nullptr;
    Stat stat = Stat::Mean;
    std::string key;          // the quantity's key, or key_mean / key_min / key_max
    std::string label, short_label, help;
    int index = 0;            // its place in HeadValues() (and in HeadSummary::values)
    bool Primary() const { return stat == Stat::Mean; }  // what stands for the quantity (batch means, the table at first)
};
// In the catalogue's order; a token statistic's mean, min and max are consecutive.
const std::vector<HeadValue>& HeadValues();
// What stands for a quantity per head (its mean); null when a head does not read it.
const HeadValue* HeadValueOf(const Quantity& q);
// By key; a TokenStats quantity's own key reads its mean ("tau_q" is tau_q_mean, as older sessions
// saved the heads grid's badge). Null for an unknown key.
const HeadValue* FindHeadValue(std::string_view key);
std::string HeadValueKeys();  // "entropy, normalized_entropy, ...", for messages

//-------------------------------------------------------------------------------------------------
// [SECTION] Token colourings (the token strip, --highlight, sessions)
//-------------------------------------------------------------------------------------------------

// What colours the token strip and the exported highlight: one reading of a Row quantity (its SSA
// side) or of a Token quantity (a side, or the difference). TauQPosition is tau_q's position term
// alone (1 + s ln i); TauQToken its token term alone, shown as 1 + tanh(...), what tau_q would be
// with the position term at 1 (for either combine). Loss, LossCompare and LossDelta (loss - the
// comparison's loss), and with a base LossBase and LossDeltaBase (loss - the base's: where
// fine-tuning helped), are per token, not per head. The enumerators name TokenColorings()' rows.
enum class TokenColor {
    TauQ, TauV, Entropy, Spikiness, SinkMass, TauQPosition, TauQToken, Loss, LossCompare, LossDelta, LossBase, LossDeltaBase,
    JsDivergence, JsTotal, JsDrift  // each query's row: SSA against the comparison; with a base against the base, tau = 1 against it
};

struct TokenColoring {
    TokenColor id;
    const Quantity* quantity;
    MapMode mode;
    std::string key;    // --highlight, sessions: the quantity's key, with "_compare" or "_delta"
    std::string label;  // "comparison loss"
    std::string help;
};
const std::vector<TokenColoring>& TokenColorings();  // in TokenColor order: the combos' order
const TokenColoring& Coloring(TokenColor color);
std::string TokenColorKeys(const char* separator = ", ");  // "tau_q, tau_v, ...": messages, flag hints

const char* ToString(TokenColor color);
std::optional<TokenColor> ParseTokenColor(const std::string& name);
// Whether the analysis can colour tokens this way (the position and token terms need those forms,
// the loss colourings predictions).
bool Holds(const model::Analysis& a, TokenColor color);
// The [L, H, T] array behind a token colouring; null for a per-token colouring or when the analysis lacks it.
const model::RowArray* TokenQuantity(const model::Analysis& a, TokenColor color);
// Row metrics (entropy, ...) are trivial on row 1 (one key); temperatures are not.
bool IsRowMetric(TokenColor color);
// Added to a token colouring's stored values before they are shown: 1 for TauQToken (see above).
float TokenColorOffset(TokenColor color);
// Whether a token colouring is a temperature (drawn on the diverging scale around 1).
bool IsTemperature(TokenColor color);
// Whether it is a loss (per token: no scope), and the values: [T], NaN for the first token (no
// loss) and for a comparison without predictions (the layer-local one).
bool IsLoss(TokenColor color);
// Whether it is a difference of two sides (LossDelta, LossDeltaBase): drawn on a symmetric
// diverging scale around 0.
bool IsDelta(TokenColor color);
// Whether only an analysis against a fine-tune's base has it (the base's loss, JS to base, the drift).
bool NeedsBase(TokenColor color);
std::vector<float> TokenLosses(const model::Analysis& a, TokenColor color);

}  // namespace app
