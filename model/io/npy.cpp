#include "model/io/npy.h"

#include <fstream>

namespace model {

Status WriteNpy(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
    return WriteNpyParts(path, shape, 1, [data](int64_t, std::string*) { return data; });
}

Status WriteNpyParts(const std::string& path, const std::vector<int64_t>& shape, int64_t parts,
                     const std::function<const float*(int64_t part, std::string* error)>& part) {
    std::string dims;
    uint64_t count = 1;
    for (int64_t d : shape) {
        dims += (dims.empty() ? "" : ", ") + std::to_string(d);
        count *= static_cast<uint64_t>(d);
    }
    if (shape.size() == 1) dims += ',';  // numpy's spelling: (3,) for one dimension, (2, 3) for two
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
    // Magic (6) + version (2) + length (2) + header, padded with spaces to a multiple of 64, ending in '\n'.
    size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';

    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) return Fail(path + ": cannot write");
    const char magic[] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
    out.write(magic, sizeof magic);
    const uint16_t len = static_cast<uint16_t>(header.size());
    const char len_bytes[] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
    out.write(len_bytes, 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    const uint64_t part_count = parts > 0 ? count / static_cast<uint64_t>(parts) : 0;
    // A zero-length array (one token has no loss) is a header alone: its data may be null.
    for (int64_t k = 0; k < parts && part_count > 0 && out; ++k) {
        std::string error;
        const float* data = part(k, &error);
        if (!data) return Fail(path + ": " + (error.empty() ? std::string("no data for part ") + std::to_string(k) : error));
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(part_count * sizeof(float)));
    }
    out.close();  // a full disk may only show when the buffer is flushed
    if (!out) return Fail(path + ": write failed");
    return Ok{};
}

}  // namespace model
