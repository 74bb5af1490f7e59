// NumPy .npy files (format version 1.0, little-endian float32, C order), readable by numpy.load.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/io/result.h"

namespace model {

Status WriteNpy(const std::string& path, const float* data, const std::vector<int64_t>& shape);
// The same written in `parts` equal consecutive pieces, part(k) giving the k-th (null: an error
// that `part` has described in *error), so an array larger than memory streams to disk.
Status WriteNpyParts(const std::string& path, const std::vector<int64_t>& shape, int64_t parts,
                     const std::function<const float*(int64_t part, std::string* error)>& part);

}  // namespace model
