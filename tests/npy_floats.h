// A float32 .npy's values (version 1 header, little-endian, C order), as the exports write them;
// empty for a file that is not one. Shared by the command line's and the window's tests.
#pragma once

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace tests {

inline std::vector<float> NpyFloats(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return {};
    const size_t start = 10 + static_cast<unsigned char>(bytes[8]) + 256u * static_cast<unsigned char>(bytes[9]);
    if (start > bytes.size()) return {};
    std::vector<float> v((bytes.size() - start) / sizeof(float));
    std::memcpy(v.data(), bytes.data() + start, v.size() * sizeof(float));
    return v;
}

}  // namespace tests
