// Writes a state dict as torch.save does (the ZIP format of PyTorch >= 1.6): what lit-gpt's
// lit_model.pth is, so `ssaviz init-random --layout lit` makes checkpoints in the official SSA
// code's own format for tests and benchmarks. Our own reader (weights.h) and torch.load both read
// it. No LibTorch: the tensors are raw little-endian bytes.
#pragma once

#include <string>
#include <vector>

#include "model/io/result.h"
#include "model/io/safetensors.h"

namespace model {

// An OrderedDict of `tensors` (F32, F16 or BF16, row-major), in order, pickled with protocol 2
// into `path`'s ZIP under the folder `archive` (torch.save names it after the file: "lit_model").
// Written to a temporary name beside `path` and renamed; never through a link. At most 4 GB.
Status WriteTorchSave(const std::string& path, const std::string& archive, const std::vector<TensorToWrite>& tensors);

}  // namespace model
