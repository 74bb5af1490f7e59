// Tensors that grow along their positions (the keys, values and queries of every position so far),
// kept with room to spare so an edit writes only the rows it changed instead of copying all of
// them into a fresh tensor (at 1,024 tokens of GPT-2 small that copy was a fifth of an edit).
//
// An analysis's tensors are views of these buffers, and nothing an analysis was given changes
// afterwards: a buffer is written only while no view of it exists outside this pool (the engine's
// own cache counts, so a cancelled analysis leaves the last one whole, and so does the map a window
// is still drawing from). Typing therefore alternates between two buffers a slot: the one the
// shown analysis reads, and the one before it, into which only the rows that differ are copied.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/ATen.h>

namespace model {

class RowBuffers {
public:
    // A buffer for `slot` (any small number the caller chooses, one per tensor it keeps) shaped
    // `shape` with dimension `dim` at least shape[dim] rows (the positions), nobody else's view,
    // whose rows below `keep` are those of `current` (the cache's tensor of this slot, which
    // has at least `keep` rows; undefined when keep is 0). `limit`: the most rows it will ever
    // need (the model's context), so the room to spare stops there.
    at::Tensor Acquire(int slot, at::IntArrayRef shape, int64_t dim, const at::TensorOptions& options, const at::Tensor& current,
                       int64_t keep, int64_t limit);
    // The analysis that acquired buffers became the cache: its buffers hold every row of its `rows`;
    // the others hold the rows below `kept` of it at most (it kept `kept` rows of the one before).
    void Commit(int64_t kept, int64_t rows);
    // An analysis starts: what the last one acquired and did not commit (it failed or was
    // cancelled) holds the cache's rows below the `keep` it was acquired with, and is free again.
    void Begin();
    // Makes sure each slot has a buffer besides the one the cache views, as large, its memory
    // touched: the first edit after a long analysis otherwise pays for mapping it (GPT-2 small at
    // 1,024 tokens: ~250 MB, 0.6 s of page faults under a software rasteriser). Slot by slot, until
    // `stop` says so; true when done.
    bool Reserve(const std::function<bool()>& stop);

private:
    struct Buffer {
        at::Tensor data;        // the whole capacity
        int64_t dim = 0;
        int64_t agree = 0;      // its rows below this are the cache's
        bool acquired = false;  // by the analysis under way
    };
    std::vector<std::vector<Buffer>> m_slots;
};

}  // namespace model
