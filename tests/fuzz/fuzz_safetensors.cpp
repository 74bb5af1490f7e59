// ParseSafetensorsHeader on arbitrary bytes (the input is a whole file). Besides not crashing, an
// accepted header must keep what safetensors.h promises: tensors sorted, contiguous, inside the
// file and each exactly shape x dtype size bytes.
#include <cstdint>
#include <cstring>

#include "model/io/safetensors.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto header = model::ParseSafetensorsHeader(data, size);
    if (!header) {
        FUZZ_CHECK(!header.error().empty());
        return 0;
    }
    FUZZ_CHECK(header->data_offset >= 8 + 2 && header->data_offset <= size);
    const uint64_t data_size = size - header->data_offset;
    uint64_t expected = 0;
    for (const model::TensorInfo& t : header->tensors) {
        FUZZ_CHECK(t.begin == expected && t.begin <= t.end && t.end <= data_size);
        FUZZ_CHECK(std::strcmp(model::ToString(t.dtype), "?") != 0);
        FUZZ_CHECK(t.NumElements() * model::DtypeSize(t.dtype) == t.end - t.begin);
        FUZZ_CHECK(header->Find(t.name) == &t);
        expected = t.end;
    }
    FUZZ_CHECK(expected == data_size);
    return 0;
}
