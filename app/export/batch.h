// A batch export's own parts, for `ssaviz export --batch` and `ssaviz.export_batch` (serial or on a
// Dask cluster): each text's sub-folder name, its row of the summary, and summary.json /
// summary.csv written from the rows. The rows are JSON so that workers elsewhere can send theirs
// back to the one process that writes the summary.
#pragma once

#include <set>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "model/nn/analysis.h"

namespace app {

// The names a batch writes itself: a text named so gets "_2".
std::set<std::string> BatchReservedNames();

// A text's sub-folder from its name: letters, digits, '.', '-', '_' kept, others '_' (a leading '.'
// too), at most 64 characters; "text_0001" (index 0) when the name is empty; unique among `used`,
// which it joins.
std::string BatchFolderName(const std::string& name, int index, std::set<std::string>* used);
// Whether a text's sub-folder `name` of `out` can be written: a link there (or a file) is refused,
// never written through. Asked of every text before the model runs, and again before each writes.
model::Status CheckBatchFolder(const std::string& out, const std::string& name);

// One row of the summary: the model-wide means a reader compares across texts. `line`: where the
// text came from (its line in the --batch file, its 1-based place in a list).
nlohmann::json BatchSummaryRow(const std::string& name, int line, const model::Analysis& a, float sink_epsilon);

// summary.json ({"texts": rows, "failed": failures}) and summary.csv (one row per text, the
// columns in one order), each written whole or not at all.
model::Status WriteBatchSummary(const std::string& out_dir, const nlohmann::json& rows, const nlohmann::json& failures);

// The rows as the table `ssaviz export --batch` prints.
std::string BatchSummaryTable(const nlohmann::json& rows);

}  // namespace app
