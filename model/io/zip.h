// A reader for the ZIP archives torch.save writes (PyTorch >= 1.6): entries are stored, not
// compressed, so each entry's bytes are a range of the mapped file. ParseZip is a pure function
// over bytes that checks every offset and size against the buffer before anything reads it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/io/result.h"

namespace model {

struct ZipEntry {
    std::string name;
    uint64_t offset = 0;  // where the entry's bytes start in the buffer
    uint64_t size = 0;    // bytes stored (compressed size when compressed)
    int method = 0;       // 0: stored; anything else is compressed and cannot be read in place

    // An error naming the entry when it is compressed; torch.save never compresses.
    std::string CompressedError() const;
};

// The most entries an archive may list: a torch.save checkpoint has one a storage plus three, and
// the cap bounds the directory's memory whatever the end record claims.
constexpr uint64_t kMaxZipEntries = 1'000'000;

struct ZipArchive {
    std::vector<ZipEntry> entries;  // in central-directory order
    std::unordered_map<std::string, size_t> index;  // name -> position in entries

    const ZipEntry* Find(const std::string& name) const;  // constant time: a checkpoint asks once a tensor
};

// Reads the central directory (ZIP64 too), at most kMaxZipEntries entries. Encrypted entries,
// entries whose data leaves the buffer, and duplicate names are errors naming the entry (escaped);
// compressed ones are listed (a TorchScript archive compresses its code) and refused by whoever
// reads them.
Result<ZipArchive> ParseZip(const uint8_t* data, size_t size);

}  // namespace model
