// safetensors: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the raw little-endian data. ParseSafetensorsHeader is a pure
// function over bytes that validates everything before anyone touches tensor data; the torch
// adapter lives with the model (model/nn/model_weights.cpp) so this file stays free of LibTorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/io/result.h"

namespace model {

enum class Dtype { Bool, U8, I8, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64, F8_E4M3, F8_E5M2 };

const char* ToString(Dtype dtype);
size_t DtypeSize(Dtype dtype);
std::string ShapeString(const std::vector<int64_t>& shape);  // "[3, 4]", for error messages

struct TensorInfo {
    std::string name;
    Dtype dtype = Dtype::F32;
    std::vector<int64_t> shape;
    uint64_t begin = 0;  // byte range [begin, end) relative to the start of the data section
    uint64_t end = 0;

    uint64_t NumElements() const;  // the parser has checked this cannot overflow
};

// The most tensors one header may name. Real models have a few thousand; the cap bounds the
// parsed header's memory (a 100 MB header could otherwise name ~14 million empty tensors).
constexpr size_t kMaxSafetensorsTensors = 1'000'000;

struct SafetensorsHeader {
    uint64_t data_offset = 0;                     // 8 + header length: where the data section starts
    std::vector<TensorInfo> tensors;              // sorted by begin offset
    std::map<std::string, std::string> metadata;  // "__metadata__", string values only
    std::unordered_map<std::string, size_t> index;  // name -> position in tensors

    const TensorInfo* Find(const std::string& name) const;
};

// Validates the header length against the buffer, the JSON (object root, nesting at most
// kMaxJsonDepth, at most kMaxSafetensorsTensors names, no duplicates, known dtypes, non-negative
// shapes), each tensor's byte size (shape x dtype size, overflow checked) and the layout (offsets
// in bounds, sorted, contiguous, covering the data section). Linear in the header's size.
// `size` is the whole file's size. Errors name the tensor (escaped) and the numbers.
Result<SafetensorsHeader> ParseSafetensorsHeader(const uint8_t* data, size_t size);

// A read-only memory map of a whole file (a regular file only: anything else is refused before it
// is read).
class MappedFile {
public:
    static Result<std::shared_ptr<MappedFile>> Open(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return m_data; }
    size_t size() const { return m_size; }
    const std::string& path() const { return m_path; }
    // Unmaps the whole pages inside [begin, begin + bytes) from this process (madvise DONTNEED),
    // clamped to the mapping: its resident memory drops by them, while the mapping stays valid and
    // a later read faults the file's bytes in again. Pages shared with bytes outside the range stay.
    void DropPages(const uint8_t* begin, size_t bytes) const;

private:
    MappedFile() = default;
    const uint8_t* m_data = nullptr;
    size_t m_size = 0;
    std::string m_path;
};

// An opened, validated safetensors file. Tensor bytes stay in the mapping.
struct SafetensorsFile {
    std::shared_ptr<MappedFile> file;
    SafetensorsHeader header;

    static Result<SafetensorsFile> Open(const std::string& path);
    const uint8_t* Data(const TensorInfo& info) const { return file->data() + header.data_offset + info.begin; }
};

// One tensor to write: raw little-endian bytes of `dtype`, row-major.
struct TensorToWrite {
    std::string name;
    Dtype dtype = Dtype::F32;
    std::vector<int64_t> shape;
    const void* data = nullptr;
};
Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

}  // namespace model
