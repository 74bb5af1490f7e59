#include "app/export/batch.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/export/head_summary.h"
#include "model/io/files.h"

namespace app {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string Format(const char* format, double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, value);
    return buf;
}

// A model-wide column of the summary: a quantity's side (its head values' mean over the heads, or
// for a per-token quantity its mean over the tokens), or the share of sink heads beside the
// quantity the sink-head rule reads.
struct Column {
    std::string name;
    const Quantity* quantity;
    Side side;
    bool sink_ratio;
};

// The catalogue's batch columns, in its order, after the text's name and length.
const std::vector<Column>& MetricColumns() {
    static const std::vector<Column> columns = [] {
        std::vector<Column> out;
        for (const Quantity& q : Quantities()) {
            const HeadValue* v = HeadValueOf(q);
            const std::string name = v ? v->key : q.key;  // tau_q's column: its mean, tau_q_mean
            for (Side side : kAllSides)
                if (Has(q.batch, side)) out.push_back({name + Suffix(side), &q, side, false});
            if (q.sink)
                for (Side side : kAllSides)
                    if (Has(q.batch, side)) out.push_back({std::string("sink_ratio") + Suffix(side), &q, side, true});
        }
        return out;
    }();
    return columns;
}

// The summary's columns for these rows: the base's only where a row has them (a batch against a base).
std::vector<std::string> SummaryColumns(const json& rows) {
    std::vector<std::string> columns = {"name", "n_tokens"};
    for (const Column& c : MetricColumns()) {
        const bool held = c.side != Side::Base || std::any_of(rows.begin(), rows.end(), [&](const json& r) { return r.contains(c.name); });
        if (held) columns.push_back(c.name);
    }
    return columns;
}

}  // namespace

std::set<std::string> BatchReservedNames() { return {"summary.json", "summary.csv"}; }

model::Status CheckBatchFolder(const std::string& out, const std::string& name) {
    return model::CheckFoldersBelow(out, (fs::path(out) / name).string());
}

std::string BatchFolderName(const std::string& name, int index, std::set<std::string>* used) {
    std::string out;
    for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
    if (out.size() > 64) out.resize(64);
    if (out.empty() || out == "." || out == "..") {
        char buf[32];
        std::snprintf(buf, sizeof buf, "text_%04d", index + 1);
        out = buf;
    }
    if (out[0] == '.') out[0] = '_';  // never hidden, nor one of ssaviz's own staging folders (".export.ssaviz-*")
    std::string unique = out;
    for (int k = 2; used->count(unique); ++k) unique = out + "_" + std::to_string(k);
    used->insert(unique);
    return unique;
}

// The summary's columns of a batch against a fine-tune's base, after the catalogue's (which have the
// base's side then): the mean over heads of the per-head decomposition.
constexpr const char* kBaseColumns[] = {"js_total", "js_temperature", "js_drift"};

json BatchSummaryRow(const std::string& name, int line, const model::Analysis& a, float eps) {
    const std::vector<HeadSummary> heads = SummarizeHeads(a);
    json row = {{"name", name}, {"line", line}, {"n_tokens", a.n_tokens}};
    for (const Column& c : MetricColumns()) {
        if (!HasSide(a, c.side)) continue;  // the base's columns: only against a base
        const Quantity& q = *c.quantity;
        if (q.scope == Scope::Token) {
            const std::vector<float>* values = TokenArray(q, a, c.side);
            row[c.name] = model::MeanLoss(values ? *values : std::vector<float>{});
            continue;
        }
        if (c.sink_ratio) {
            int sinks = 0;
            for (const HeadSummary& h : heads) sinks += IsSinkHead(h, c.side, eps);
            row[c.name] = sinks / (heads.empty() ? 1.0 : static_cast<double>(heads.size()));
            continue;
        }
        const HeadValue& v = *HeadValueOf(q);
        double sum = 0;
        int n = 0;
        for (const HeadSummary& h : heads)
            if (std::isfinite(h.Get(v, c.side))) sum += h.Get(v, c.side), ++n;
        row[c.name] = n ? sum / n : NAN;
    }
    // A fine-tune against its base: what changed, the mean over heads of each part (SPEC section 9).
    if (const model::Decomposition d = model::Decompose(a); !d.empty()) {
        auto mean = [](const std::vector<float>& v) {
            double sum = 0;
            int n = 0;
            for (float x : v)
                if (std::isfinite(x)) sum += x, ++n;
            return n ? sum / n : NAN;
        };
        row["js_total"] = mean(d.js_total);
        row["js_temperature"] = mean(d.js_temperature);
        row["js_drift"] = mean(d.js_drift);
    }
    return row;
}

model::Status WriteBatchSummary(const std::string& out_dir, const json& rows, const json& failures) {
    std::vector<std::string> columns = SummaryColumns(rows);
    // Batches against a base add the decomposition's columns (kBaseColumns) after the others.
    for (const json& r : rows)
        if (r.contains(kBaseColumns[0])) {
            columns.insert(columns.end(), std::begin(kBaseColumns), std::end(kBaseColumns));
            break;
        }
    // With --lens, each text's loss read after each layer (lens_loss: [L + 1], the comparison's, the base's):
    // one column a layer, lens_loss_0 (the embeddings) .. lens_loss_L (the model's own).
    std::vector<std::pair<std::string, size_t>> layer_columns;  // "lens_loss_3" -> index 3 of "lens_loss"
    for (const char* key : {"lens_loss", "lens_loss_compare", "lens_loss_base"}) {
        size_t layers = 0;
        for (const json& r : rows)
            if (r.contains(key) && r[key].is_array()) layers = std::max(layers, r[key].size());
        for (size_t l = 0; l < layers; ++l) {
            columns.push_back(std::string(key) + "_" + std::to_string(l));
            layer_columns.emplace_back(columns.back(), l);
        }
    }
    auto cell = [&](const json& r, const std::string& column) -> json {
        for (const auto& [name, l] : layer_columns)
            if (name == column) {
                const std::string key = column.substr(0, column.rfind('_'));
                return r.contains(key) && r[key].is_array() && l < r[key].size() ? r[key][l] : json();
            }
        return r.contains(column) ? r[column] : json();
    };
    std::ostringstream csv;
    for (size_t k = 0; k < columns.size(); ++k) csv << (k ? "," : "") << columns[k];
    csv << "\n";
    for (const json& r : rows) {
        for (size_t k = 0; k < columns.size(); ++k) {
            const json v = cell(r, columns[k]);
            csv << (k ? "," : "");
            if (v.is_string()) csv << v.get<std::string>();
            else if (v.is_number_float()) csv << (std::isfinite(v.get<double>()) ? Format("%.9g", v.get<double>()) : "");  // a float32 exactly, as the heads' CSVs; empty as summary.json's null
            else if (!v.is_null()) csv << model::JsonText(v);
        }
        csv << "\n";
    }
    const fs::path out(out_dir);
    const std::string summary = model::JsonText(json{{"texts", rows}, {"failed", failures}}, 1) + "\n";
    if (auto s = model::WriteFileAtomically((out / "summary.json").string(), summary); !s) return s;
    return model::WriteFileAtomically((out / "summary.csv").string(), csv.str());
}

std::string BatchSummaryTable(const json& rows) {
    // Against a base, the base's entropy and all that fine-tuning changed (JS to the base) too.
    const bool base = std::any_of(rows.begin(), rows.end(), [](const json& r) { return r.contains("entropy_base"); });
    char line[256];
    std::snprintf(line, sizeof line, "%-24s %6s %9s %9s %9s %9s %9s %9s", "text", "tokens", "H ssa", "H cmp", "Hn ssa", "Hn cmp", "sink", "JS");
    std::string out = line;
    if (base) std::snprintf(line, sizeof line, " %9s %9s", "H base", "JS total"), out += line;
    out += "\n";
    for (const json& r : rows) {
        auto num = [&](const char* key) { return r.contains(key) && r[key].is_number() ? r[key].get<double>() : NAN; };
        std::snprintf(line, sizeof line, "%-24s %6d %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f", r["name"].get<std::string>().substr(0, 24).c_str(),
                      r["n_tokens"].get<int>(), num("entropy"), num("entropy_compare"), num("normalized_entropy"),
                      num("normalized_entropy_compare"), num("sink_mass"), num("js_divergence"));
        out += line;
        if (base) std::snprintf(line, sizeof line, " %9.4f %9.4f", num("entropy_base"), num("js_total")), out += line;
        out += "\n";
    }
    return out;
}

}  // namespace app
