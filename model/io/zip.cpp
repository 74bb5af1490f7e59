#include "model/io/zip.h"

#include "model/io/files.h"

namespace model {
namespace {

constexpr uint32_t kEndOfCentralDir = 0x06054b50;
constexpr uint32_t kZip64EndLocator = 0x07064b50;
constexpr uint32_t kZip64End = 0x06064b50;
constexpr uint32_t kCentralEntry = 0x02014b50;
constexpr uint32_t kLocalHeader = 0x04034b50;

// Little-endian reads at offsets the caller has bounds-checked.
uint64_t Le(const uint8_t* p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

bool InBounds(uint64_t offset, uint64_t length, size_t size) { return offset <= size && length <= size - offset; }

}  // namespace

std::string ZipEntry::CompressedError() const {
    return "ZIP entry '" + EscapeForMessage(name) + "' is compressed (method " + std::to_string(method) +
           "); torch.save stores entries uncompressed, so the archive was re-zipped: unzip it and zip it again with -0";
}

const ZipEntry* ZipArchive::Find(const std::string& name) const {
    auto it = index.find(name);
    return it == index.end() ? nullptr : &entries[it->second];
}

Result<ZipArchive> ParseZip(const uint8_t* data, size_t size) {
    // The end-of-central-directory record is 22 bytes plus a comment of up to 65535 bytes.
    if (size < 22) return Fail("not a ZIP archive (" + std::to_string(size) + " bytes)");
    size_t eocd = size;
    const size_t lowest = size > 22 + 65535 ? size - 22 - 65535 : 0;
    for (size_t p = size - 22 + 1; p-- > lowest;)
        if (Le(data + p, 4) == kEndOfCentralDir) { eocd = p; break; }
    if (eocd == size) return Fail("no end-of-central-directory record: not a ZIP archive, or a truncated one");

    uint64_t count = Le(data + eocd + 10, 2);
    uint64_t dir_size = Le(data + eocd + 12, 4);
    uint64_t dir_offset = Le(data + eocd + 16, 4);
    if (count == 0xffff || dir_size == 0xffffffff || dir_offset == 0xffffffff) {
        // ZIP64: a locator just before the record points at the 64-bit record.
        if (eocd < 20 || Le(data + eocd - 20, 4) != kZip64EndLocator) return Fail("ZIP64 archive without its locator");
        const uint64_t record = Le(data + eocd - 20 + 8, 8);
        if (!InBounds(record, 56, size) || Le(data + record, 4) != kZip64End)
            return Fail("ZIP64 end record at " + std::to_string(record) + " is missing or out of bounds");
        count = Le(data + record + 32, 8);
        dir_size = Le(data + record + 40, 8);
        dir_offset = Le(data + record + 48, 8);
    }
    if (!InBounds(dir_offset, dir_size, size))
        return Fail("central directory (" + std::to_string(dir_size) + " bytes at " + std::to_string(dir_offset) +
                    ") lies outside the " + std::to_string(size) + "-byte file; truncated?");
    // Each central entry takes at least 46 bytes, which bounds the count before we reserve.
    if (count > dir_size / 46) return Fail("central directory claims " + std::to_string(count) + " entries in " + std::to_string(dir_size) + " bytes");
    if (count > kMaxZipEntries)
        return Fail("central directory lists " + std::to_string(count) + " entries, more than the " + std::to_string(kMaxZipEntries) + " ssaviz reads");

    ZipArchive zip;
    zip.entries.reserve(count);
    zip.index.reserve(count);
    uint64_t p = dir_offset;
    const uint64_t dir_end = dir_offset + dir_size;
    for (uint64_t i = 0; i < count; ++i) {
        if (!InBounds(p, 46, dir_end) || Le(data + p, 4) != kCentralEntry)
            return Fail("central directory entry " + std::to_string(i) + " is malformed");
        const uint64_t flags = Le(data + p + 8, 2), method = Le(data + p + 10, 2);
        uint64_t compressed = Le(data + p + 20, 4), uncompressed = Le(data + p + 24, 4);
        const uint64_t name_len = Le(data + p + 28, 2), extra_len = Le(data + p + 30, 2), comment_len = Le(data + p + 32, 2);
        uint64_t local = Le(data + p + 42, 4);
        if (!InBounds(p + 46, name_len + extra_len + comment_len, dir_end))
            return Fail("central directory entry " + std::to_string(i) + " runs past the directory");
        ZipEntry entry;
        entry.name.assign(reinterpret_cast<const char*>(data + p + 46), name_len);
        const std::string where = "ZIP entry '" + EscapeForMessage(entry.name) + "'";

        // ZIP64 extra field: the 64-bit values of whichever 32-bit fields are saturated, in order.
        const uint8_t* extra = data + p + 46 + name_len;
        for (uint64_t e = 0; e + 4 <= extra_len;) {
            const uint64_t id = Le(extra + e, 2), len = Le(extra + e + 2, 2);
            if (e + 4 + len > extra_len) return Fail(where + ": extra field runs past its entry");
            if (id == 0x0001) {
                uint64_t q = e + 4;
                for (uint64_t* field : {&uncompressed, &compressed, &local}) {
                    if (*field != 0xffffffff) continue;
                    if (q + 8 > e + 4 + len) return Fail(where + ": ZIP64 extra field is too short");
                    *field = Le(extra + q, 8);
                    q += 8;
                }
            }
            e += 4 + len;
        }
        if (flags & 1) return Fail(where + " is encrypted");
        if (method == 0 && compressed != uncompressed)
            return Fail(where + ": stored sizes disagree (" + std::to_string(compressed) + " vs " + std::to_string(uncompressed) + ")");
        if (!InBounds(local, 30, size) || Le(data + local, 4) != kLocalHeader)
            return Fail(where + ": local header at " + std::to_string(local) + " is missing or out of bounds");
        const uint64_t data_start = local + 30 + Le(data + local + 26, 2) + Le(data + local + 28, 2);
        if (!InBounds(data_start, compressed, size))
            return Fail(where + ": " + std::to_string(compressed) + " bytes at " + std::to_string(data_start) +
                        " lie outside the " + std::to_string(size) + "-byte file; truncated?");
        if (!zip.index.emplace(entry.name, zip.entries.size()).second) return Fail(where + " appears twice");
        entry.offset = data_start;
        entry.size = compressed;
        entry.method = static_cast<int>(method);
        zip.entries.push_back(std::move(entry));
        p += 46 + name_len + extra_len + comment_len;
    }
    return zip;
}

}  // namespace model
