// ParseZip (the reader for torch.save archives) on arbitrary bytes. An accepted archive must name
// each entry once and place every entry's bytes inside the buffer; they are all read here, so ASan
// sees any range that is not.
#include <cstdint>
#include <string>

#include "model/io/zip.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto zip = model::ParseZip(data, size);
    if (!zip) {
        FUZZ_CHECK(!zip.error().empty());
        return 0;
    }
    volatile uint8_t sum = 0;
    for (const model::ZipEntry& entry : zip->entries) {
        FUZZ_CHECK(entry.offset <= size && entry.size <= size - entry.offset);
        FUZZ_CHECK(zip->Find(entry.name) == &entry);
        for (uint64_t i = 0; i < entry.size; ++i) sum = sum + data[entry.offset + i];
    }
    return 0;
}
