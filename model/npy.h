// NumPy .npy files (format version 1.0, little-endian float32, C order), readable by numpy.load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/result.h"

namespace model {

Status WriteNpy(const std::string& path, const float* data, const std::vector<int64_t>& shape);

}  // namespace model
