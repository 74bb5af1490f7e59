#include "model/nn/row_buffers.h"

#include <algorithm>

namespace model {

namespace {

// Room for about an eighth more rows, at least 64, in whole multiples of 64: typing at the end of
// 1,024 tokens moves to a larger buffer (one copy of every row) once in 128 tokens.
int64_t Capacity(int64_t rows, int64_t limit) {
    const int64_t spare = std::max<int64_t>(64, rows / 8);
    const int64_t rounded = (rows + spare + 63) / 64 * 64;
    return std::max(rows, std::min(rounded, limit));
}

bool Fits(const at::Tensor& data, int64_t dim, at::IntArrayRef shape, const at::TensorOptions& options) {
    if (data.dim() != static_cast<int64_t>(shape.size()) || data.scalar_type() != options.dtype() || data.device() != options.device())
        return false;
    for (int64_t d = 0; d < data.dim(); ++d)
        if (d == dim ? data.size(d) < shape[d] : data.size(d) != shape[d]) return false;
    return true;
}

}  // namespace

at::Tensor RowBuffers::Acquire(int slot, at::IntArrayRef shape, int64_t dim, const at::TensorOptions& options,
                               const at::Tensor& current, int64_t keep, int64_t limit) {
    if (m_slots.size() <= static_cast<size_t>(slot)) m_slots.resize(static_cast<size_t>(slot) + 1);
    std::vector<Buffer>& buffers = m_slots[static_cast<size_t>(slot)];
    // A buffer is free when this pool holds its only reference: no analysis, map or block of rows
    // views it. Of the free ones that fit, the one that shares the most rows with the cache.
    Buffer* best = nullptr;
    for (Buffer& b : buffers)
        if (!b.acquired && b.dim == dim && b.data.storage().use_count() == 1 && Fits(b.data, dim, shape, options) &&
            (!best || std::min(b.agree, keep) > std::min(best->agree, keep)))
            best = &b;
    if (!best) {
        std::vector<int64_t> sizes(shape.begin(), shape.end());
        sizes[static_cast<size_t>(dim)] = Capacity(shape[dim], limit);
        buffers.push_back({at::empty(sizes, options), dim, 0, false});
        best = &buffers.back();
    }
    const int64_t agree = std::min(best->agree, keep);
    if (agree < keep) best->data.narrow(dim, agree, keep - agree).copy_(current.narrow(dim, agree, keep - agree));
    best->agree = keep;
    best->acquired = true;
    return best->data;
}

bool RowBuffers::Reserve(const std::function<bool()>& stop) {
    for (std::vector<Buffer>& buffers : m_slots) {
        if (buffers.size() != 1) continue;  // none yet, or a second already
        if (stop()) return false;
        const Buffer& only = buffers.front();
        buffers.push_back({at::zeros(only.data.sizes(), only.data.options()), only.dim, 0, false});
    }
    return true;
}

void RowBuffers::Begin() {
    for (std::vector<Buffer>& buffers : m_slots)
        for (Buffer& b : buffers) b.acquired = false;
}

void RowBuffers::Commit(int64_t kept, int64_t rows) {
    for (std::vector<Buffer>& buffers : m_slots) {
        for (Buffer& b : buffers) {
            b.agree = b.acquired ? rows : std::min(b.agree, kept);
            b.acquired = false;
        }
        // Two a slot: the cache's and the one before it (which the window may still be drawing
        // from, and the next edit writes into once it is let go). A third, made while both were
        // in use, goes: the memory is freed when its last view is.
        std::stable_sort(buffers.begin(), buffers.end(), [](const Buffer& x, const Buffer& y) { return x.agree > y.agree; });
        if (buffers.size() > 2) buffers.resize(2);
    }
}

}  // namespace model
