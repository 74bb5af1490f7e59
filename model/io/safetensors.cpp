#include "model/io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unordered_set>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "model/io/files.h"

namespace model {
namespace {

using nlohmann::json;

// The header is metadata only; 100 MiB is far above any real model's and bounds our allocation.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
// JSON values in a header: a tensor's entry takes about ten (object, dtype, shape and sizes,
// offsets), so 16 a tensor is ample. Checked before the tree (~60 bytes a value) is built.
constexpr size_t kMaxHeaderValues = 16 * kMaxSafetensorsTensors;

struct DtypeName { Dtype dtype; const char* name; size_t size; };
constexpr DtypeName kDtypes[] = {
    {Dtype::Bool, "BOOL", 1}, {Dtype::U8, "U8", 1},   {Dtype::I8, "I8", 1},       {Dtype::I16, "I16", 2},
    {Dtype::U16, "U16", 2},   {Dtype::F16, "F16", 2}, {Dtype::BF16, "BF16", 2},   {Dtype::I32, "I32", 4},
    {Dtype::U32, "U32", 4},   {Dtype::F32, "F32", 4}, {Dtype::F64, "F64", 8},     {Dtype::I64, "I64", 8},
    {Dtype::U64, "U64", 8},   {Dtype::F8_E4M3, "F8_E4M3", 1}, {Dtype::F8_E5M2, "F8_E5M2", 1},
};

bool ParseDtype(const std::string& s, Dtype* out) {
    for (const auto& d : kDtypes)
        if (s == d.name) { *out = d.dtype; return true; }
    return false;
}

bool MulOverflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

// A value from the header in a message: a short array of numbers or strings as itself ("[0, 4,
// 8]"), anything else as DescribeJson says (never dumped: it may nest deep or be huge).
std::string Describe(const json& value) {
    if (!value.is_array() || value.size() > 16) return DescribeJson(value);
    std::string s = "[";
    for (const auto& v : value) {
        if (v.is_structured()) return DescribeJson(value);
        s += (s.size() > 1 ? ", " : "") + DescribeJson(v);
    }
    return s + "]";
}

Result<TensorInfo> ParseTensorEntry(const std::string& name, const json& entry) {
    std::string where = "tensor " + Quoted(name);
    if (!entry.is_object()) return Fail(where + ": header entry is " + DescribeJson(entry) + ", not an object");
    auto dtype = entry.find("dtype");
    auto shape = entry.find("shape");
    auto offsets = entry.find("data_offsets");
    if (dtype == entry.end() || shape == entry.end() || offsets == entry.end())
        return Fail(where + ": header entry needs dtype, shape and data_offsets");

    TensorInfo info;
    info.name = name;
    if (!dtype->is_string() || !ParseDtype(dtype->get<std::string>(), &info.dtype))
        return Fail(where + ": unknown dtype " + DescribeJson(*dtype));
    if (!shape->is_array() || shape->size() > 16)
        return Fail(where + ": shape must be an array of at most 16 sizes, got " + DescribeJson(*shape));
    for (const auto& dim : *shape) {
        if (!dim.is_number_unsigned())
            return Fail(where + ": shape " + Describe(*shape) + " has a dimension (" + DescribeJson(dim) + ") that is not a non-negative integer");
        uint64_t d = dim.get<uint64_t>();
        if (d > (1ull << 62)) return Fail(where + ": shape dimension " + std::to_string(d) + " is too large");
        info.shape.push_back(static_cast<int64_t>(d));
    }
    if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
        return Fail(where + ": data_offsets must be [begin, end] with non-negative integers, got " + Describe(*offsets));
    info.begin = (*offsets)[0].get<uint64_t>();
    info.end = (*offsets)[1].get<uint64_t>();
    if (info.end < info.begin)
        return Fail(where + ": data_offsets [" + std::to_string(info.begin) + ", " + std::to_string(info.end) + "] end before begin");

    uint64_t bytes = DtypeSize(info.dtype);
    for (int64_t d : info.shape)
        if (MulOverflows(bytes, static_cast<uint64_t>(d), &bytes))
            return Fail(where + ": shape " + ShapeString(info.shape) + " x " + ToString(info.dtype) + " overflows 64 bits");
    if (bytes != info.end - info.begin)
        return Fail(where + ": shape " + ShapeString(info.shape) + " of " + ToString(info.dtype) + " needs " + std::to_string(bytes) +
                    " bytes but data_offsets span " + std::to_string(info.end - info.begin));
    return info;
}

// One pass over the header text that builds nothing: counts names and values against their limits
// before the tree is built, and catches duplicate names (nlohmann keeps the last one silently)
// with a hash set, so the whole check is linear.
class HeaderScan final : public nlohmann::json_sax<json> {
public:
    std::string error;
    bool null() override { return Value(); }
    bool boolean(bool) override { return Value(); }
    bool number_integer(number_integer_t) override { return Value(); }
    bool number_unsigned(number_unsigned_t) override { return Value(); }
    bool number_float(number_float_t, const string_t&) override { return Value(); }
    bool string(string_t&) override { return Value(); }
    bool binary(binary_t&) override { return Value(); }
    bool start_object(std::size_t) override { return ++m_depth, Value(); }
    bool end_object() override { return --m_depth, true; }
    bool start_array(std::size_t) override { return ++m_depth, Value(); }
    bool end_array() override { return --m_depth, true; }
    bool key(string_t& name) override {
        if (m_depth != 1) return true;
        if (name != "__metadata__" && ++m_tensors > kMaxSafetensorsTensors) {
            error = "header names more than " + std::to_string(kMaxSafetensorsTensors) + " tensors, the most ssaviz reads";
            return false;
        }
        if (!m_names.insert(name).second) {
            error = "header names tensor " + Quoted(name) + " twice";
            return false;
        }
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
        error = "header is not valid JSON (" + JsonErrorText(e) + ")";
        return false;
    }

private:
    bool Value() {
        if (++m_values <= kMaxHeaderValues) return true;
        error = "header holds more than " + std::to_string(kMaxHeaderValues) + " JSON values (" +
                std::to_string(kMaxHeaderValues / kMaxSafetensorsTensors) + " a tensor for at most " +
                std::to_string(kMaxSafetensorsTensors) + " tensors)";
        return false;
    }
    int m_depth = 0;
    size_t m_values = 0, m_tensors = 0;
    std::unordered_set<std::string> m_names;
};

}  // namespace

std::string ShapeString(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

const char* ToString(Dtype dtype) {
    for (const auto& d : kDtypes)
        if (d.dtype == dtype) return d.name;
    return "?";
}

size_t DtypeSize(Dtype dtype) {
    for (const auto& d : kDtypes)
        if (d.dtype == dtype) return d.size;
    assert(false);
    return 0;
}

uint64_t TensorInfo::NumElements() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
}

const TensorInfo* SafetensorsHeader::Find(const std::string& name) const {
    auto it = index.find(name);
    return it == index.end() ? nullptr : &tensors[it->second];
}

Result<SafetensorsHeader> ParseSafetensorsHeader(const uint8_t* data, size_t size) {
    if (size < 8) return Fail("file is " + std::to_string(size) + " bytes, too short for the 8-byte header length");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
    if (header_len > size - 8)
        return Fail("header length " + std::to_string(header_len) + " exceeds the file's " + std::to_string(size - 8) +
                    " bytes after the length field: not a safetensors file, or a truncated one");
    if (header_len > kMaxHeaderBytes)
        return Fail("header length " + std::to_string(header_len) + " is over the " + std::to_string(kMaxHeaderBytes) + "-byte limit");
    if (header_len < 2) return Fail("header length " + std::to_string(header_len) + " is too short for a JSON object");

    const std::string_view text(reinterpret_cast<const char*>(data + 8), header_len);
    {
        HeaderScan scan;
        if (!json::sax_parse(text, &scan)) return Fail(scan.error.empty() ? "header is not valid JSON" : scan.error);
    }
    // Padding after the header's object: spaces as the format pads, or NULs some writers use (with
    // spaces after them too).
    auto parsed = ParseJsonText(text.substr(0, text.find_last_not_of(std::string_view(" \t\r\n\0", 5)) + 1));  // nesting at most kMaxJsonDepth
    if (!parsed) return Fail("header is not valid JSON (" + EscapeForMessage(parsed.error()) + ")");
    const json& root = *parsed;
    if (!root.is_object()) return Fail("header is not a JSON object");

    SafetensorsHeader header;
    header.data_offset = 8 + header_len;
    header.tensors.reserve(root.size());
    for (auto& [name, entry] : root.items()) {
        if (name == "__metadata__") {
            if (!entry.is_object()) return Fail("__metadata__ is " + DescribeJson(entry) + ", not an object");
            for (auto& [k, v] : entry.items())
                if (v.is_string()) header.metadata[k] = v.get<std::string>();
            continue;
        }
        auto info = ParseTensorEntry(name, entry);
        if (!info) return Fail(info.error());
        header.tensors.push_back(std::move(*info));
    }

    std::sort(header.tensors.begin(), header.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    const uint64_t data_size = size - header.data_offset;
    uint64_t expected = 0;
    for (const auto& t : header.tensors) {
        if (t.begin == expected && t.end <= data_size) {
            expected = t.end;
            continue;
        }
        const std::string where = "tensor " + Quoted(t.name) + " data [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + ")";
        if (t.end > data_size) return Fail(where + " is not within the file's " + std::to_string(data_size) + " data bytes");
        if (t.begin < expected) return Fail(where + " overlaps the previous tensor, which ends at " + std::to_string(expected));
        return Fail(where + " leaves a gap after byte " + std::to_string(expected));
    }
    if (expected != data_size)
        return Fail("tensors cover " + std::to_string(expected) + " of the file's " + std::to_string(data_size) + " data bytes");
    header.index.reserve(header.tensors.size());
    for (size_t i = 0; i < header.tensors.size(); ++i) header.index.emplace(header.tensors[i].name, i);
    return header;
}

Result<std::shared_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
    // O_NONBLOCK: a FIFO put where a file was expected does not wait for a writer; fstat refuses it.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return Fail(path + ": cannot open (" + std::strerror(errno) + ")");
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return Fail(path + ": not a regular file");
    }
    std::shared_ptr<MappedFile> file(new MappedFile());
    file->m_path = path;
    file->m_size = static_cast<size_t>(st.st_size);
    if (file->m_size > 0) {
        void* p = ::mmap(nullptr, file->m_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            ::close(fd);
            return Fail(path + ": cannot map (" + std::strerror(errno) + ")");
        }
        file->m_data = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
    return file;
}

void MappedFile::DropPages(const uint8_t* begin, size_t bytes) const {
    if (!m_data || begin < m_data || begin >= m_data + m_size) return;
    static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t base = reinterpret_cast<uintptr_t>(m_data);
    const uintptr_t end = reinterpret_cast<uintptr_t>(begin) + std::min<size_t>(bytes, m_size - (begin - m_data));
    const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
    // The mapping's last page may hold the file's end: it is all ours, so it goes too.
    const uintptr_t last = end == base + m_size ? (end + page - 1) / page * page : end / page * page;
    if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
    if (m_data) ::munmap(const_cast<uint8_t*>(m_data), m_size);
}

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
    auto file = MappedFile::Open(path);
    if (!file) return Fail(file.error());
    auto header = ParseSafetensorsHeader((*file)->data(), (*file)->size());
    if (!header) return Fail(path + ": " + header.error());
    return SafetensorsFile{std::move(*file), std::move(*header)};
}

Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata) {
    json header = json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const auto& t : tensors) {
        uint64_t bytes = DtypeSize(t.dtype);
        for (int64_t d : t.shape) bytes *= static_cast<uint64_t>(d);
        header[t.name] = {{"dtype", ToString(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // keep the data section 8-byte aligned

    // Into a new file beside `path`, renamed over it at the end: never half-written, never through a link.
    auto temp = CreateTempFileBeside(path);
    if (!temp) return Fail(temp.error());
    {
        // "r+": the empty file just made, never made again (an interrupt may have removed it meanwhile).
        std::ofstream out(*temp, std::ios::binary | std::ios::in | std::ios::out);
        uint8_t len[8];
        for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
        out.write(reinterpret_cast<const char*>(len), 8);
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        for (const auto& t : tensors) {
            uint64_t bytes = DtypeSize(t.dtype);
            for (int64_t d : t.shape) bytes *= static_cast<uint64_t>(d);
            out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(bytes));
        }
        out.flush();
        if (!out) {
            std::remove(temp->c_str());
            return Fail(path + ": write failed");
        }
    }
    if (std::rename(temp->c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        std::remove(temp->c_str());
        return Fail(path + ": cannot write (" + why + ")");
    }
    return Ok{};
}

}  // namespace model
