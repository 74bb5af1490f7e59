#include "model/io/torch_save.h"

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "model/io/files.h"

namespace model {
namespace {

uint32_t Crc32(const uint8_t* data, size_t size, uint32_t crc = 0) {
    static const std::array<uint32_t, 256> table = [] {
        std::array<uint32_t, 256> t{};
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    crc = ~crc;
    for (size_t i = 0; i < size; ++i) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

// The pickle (protocol 2) of an OrderedDict of tensors rebuilt by torch._utils._rebuild_tensor_v2,
// each over its own storage record data/<i>, as torch.save writes it.
class Pickler {
public:
    std::string Take() { return std::move(m_out); }
    void Op(char op) { m_out += op; }
    void Global(const char* module, const char* name) { m_out += std::string("c") + module + "\n" + name + "\n"; }
    void Text(const std::string& s) {
        Op('X');
        Le(static_cast<uint32_t>(s.size()), 4);
        m_out += s;
    }
    void Int(int64_t v) {
        if (v >= INT32_MIN && v <= INT32_MAX) {
            Op('J');
            Le(static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
        } else {  // LONG1: 8 bytes, two's complement little-endian
            Op('\x8a');
            m_out += '\x08';
            Le(static_cast<uint64_t>(v), 8);
        }
    }
    void Tuple(const std::vector<int64_t>& values) {
        Op('(');
        for (int64_t v : values) Int(v);
        Op('t');
    }

private:
    void Le(uint64_t v, int bytes) {
        for (int i = 0; i < bytes; ++i) m_out += static_cast<char>((v >> (8 * i)) & 0xFF);
    }
    std::string m_out;
};

const char* StorageType(Dtype dtype) {
    switch (dtype) {
        case Dtype::F32: return "FloatStorage";
        case Dtype::F16: return "HalfStorage";
        case Dtype::BF16: return "BFloat16Storage";
        default: return nullptr;
    }
}

// A stored (uncompressed) ZIP, written as it goes: local headers and data, then the directory.
class ZipWriter {
public:
    explicit ZipWriter(std::ofstream& out) : m_out(out) {}
    void Add(const std::string& name, const void* data, size_t size) {
        Entry e{name, static_cast<uint64_t>(m_offset), Crc32(static_cast<const uint8_t*>(data), size), static_cast<uint64_t>(size)};
        // Records start on 64-byte boundaries (as torch.save aligns them), padded with an extra field.
        const size_t header = 30 + name.size();
        const size_t pad = (64 - (m_offset + header + 4) % 64) % 64;
        std::string h;
        U32(&h, 0x04034b50); U16(&h, 20); U16(&h, 0); U16(&h, 0); U16(&h, 0); U16(&h, 0);
        U32(&h, e.crc); U32(&h, static_cast<uint32_t>(size)); U32(&h, static_cast<uint32_t>(size));
        U16(&h, static_cast<uint16_t>(name.size())); U16(&h, static_cast<uint16_t>(pad + 4));
        h += name;
        U16(&h, 0x4653); U16(&h, static_cast<uint16_t>(pad));  // an extra field of padding ("FS", as PyTorch's writer names it)
        h.append(pad, 'Z');
        Write(h.data(), h.size());
        Write(data, size);
        m_entries.push_back(std::move(e));
    }
    void Finish() {
        const uint64_t start = m_offset;
        for (const Entry& e : m_entries) {
            std::string c;
            U32(&c, 0x02014b50); U16(&c, 20); U16(&c, 20); U16(&c, 0); U16(&c, 0); U16(&c, 0); U16(&c, 0);
            U32(&c, e.crc); U32(&c, static_cast<uint32_t>(e.size)); U32(&c, static_cast<uint32_t>(e.size));
            U16(&c, static_cast<uint16_t>(e.name.size())); U16(&c, 0); U16(&c, 0); U16(&c, 0); U16(&c, 0); U32(&c, 0);
            U32(&c, static_cast<uint32_t>(e.offset));
            c += e.name;
            Write(c.data(), c.size());
        }
        std::string end;
        U32(&end, 0x06054b50); U16(&end, 0); U16(&end, 0);
        U16(&end, static_cast<uint16_t>(m_entries.size())); U16(&end, static_cast<uint16_t>(m_entries.size()));
        U32(&end, static_cast<uint32_t>(m_offset - start)); U32(&end, static_cast<uint32_t>(start)); U16(&end, 0);
        Write(end.data(), end.size());
    }
    uint64_t Size() const { return m_offset; }

private:
    struct Entry {
        std::string name;
        uint64_t offset;
        uint32_t crc;
        uint64_t size;
    };
    static void U16(std::string* s, uint16_t v) { s->push_back(static_cast<char>(v & 0xFF)); s->push_back(static_cast<char>(v >> 8)); }
    static void U32(std::string* s, uint32_t v) { for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xFF)); }
    void Write(const void* data, size_t size) {
        m_out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
        m_offset += size;
    }
    std::ofstream& m_out;
    uint64_t m_offset = 0;
    std::vector<Entry> m_entries;
};

}  // namespace

Status WriteTorchSave(const std::string& path, const std::string& archive, const std::vector<TensorToWrite>& tensors) {
    uint64_t total = 0;
    if (tensors.size() > 60000) return Fail(path + ": " + std::to_string(tensors.size()) + " tensors, more than a plain ZIP holds");
    Pickler p;
    p.Op('\x80'); p.Op('\x02');                                   // protocol 2
    p.Global("collections", "OrderedDict"); p.Op(')'); p.Op('R');  // OrderedDict()
    p.Op('(');
    for (size_t i = 0; i < tensors.size(); ++i) {
        const TensorToWrite& t = tensors[i];
        const char* storage = StorageType(t.dtype);
        if (!storage) return Fail(path + ": tensor '" + t.name + "' has dtype " + ToString(t.dtype) + "; torch.save files here hold F32, F16 or BF16");
        int64_t numel = 1;
        for (int64_t d : t.shape) numel *= d;
        std::vector<int64_t> strides(t.shape.size(), 1);
        for (size_t d = t.shape.size(); d-- > 1;) strides[d - 1] = strides[d] * t.shape[d];
        total += static_cast<uint64_t>(numel) * DtypeSize(t.dtype);
        p.Text(t.name);
        p.Global("torch._utils", "_rebuild_tensor_v2");
        p.Op('(');
        p.Op('(');  // the persistent id: ('storage', type, key, location, numel)
        p.Text("storage"); p.Global("torch", storage); p.Text(std::to_string(i)); p.Text("cpu"); p.Int(numel);
        p.Op('t'); p.Op('Q');
        p.Int(0);  // storage offset
        p.Tuple(t.shape);
        p.Tuple(strides);
        p.Op('\x89');  // requires_grad False
        p.Global("collections", "OrderedDict"); p.Op(')'); p.Op('R');  // backward hooks
        p.Op('t'); p.Op('R');
    }
    p.Op('u'); p.Op('.');
    if (total > (uint64_t{4} << 30) - (uint64_t{64} << 20)) return Fail(path + ": " + FormatBytes(total) + " of tensors, more than a plain ZIP (4 GB) holds");

    auto temp = CreateTempFileBeside(path);
    if (!temp) return Fail(temp.error());
    {
        // "r+": the empty file just made, never made again (an interrupt may have removed it meanwhile).
        std::ofstream out(*temp, std::ios::binary | std::ios::in | std::ios::out);
        ZipWriter zip(out);
        const std::string pickle = p.Take();
        zip.Add(archive + "/data.pkl", pickle.data(), pickle.size());
        zip.Add(archive + "/byteorder", "little", 6);
        for (size_t i = 0; i < tensors.size(); ++i) {
            int64_t numel = 1;
            for (int64_t d : tensors[i].shape) numel *= d;
            zip.Add(archive + "/data/" + std::to_string(i), tensors[i].data, static_cast<size_t>(numel) * DtypeSize(tensors[i].dtype));
        }
        zip.Add(archive + "/version", "3\n", 2);
        zip.Finish();
        out.flush();
        if (!out) {
            std::remove(temp->c_str());
            return Fail(path + ": cannot write (" + std::strerror(errno) + ")");
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
