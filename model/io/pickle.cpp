#include "model/io/pickle.h"

#include <cmath>
#include <cstring>
#include <unordered_map>

#include "model/io/files.h"

namespace model {
namespace {

using Kind = PickleValue::Kind;

// A GPT-2 XL state dict pickles to ~15,000 values, a nanoGPT checkpoint with its optimizer state
// to a few times that. Every one-byte opcode can grow something, so each thing that grows has a
// cap: a hostile data.pkl of 200 MB then stays within about 1 GB instead of asking for 4 GB.
constexpr size_t kMaxValues = 4'000'000;     // the arena (~200 bytes a value) plus the stack
constexpr size_t kMaxMemo = 4'000'000;       // memo entries (MEMOIZE adds one without a value)
constexpr size_t kMaxMarks = 4'096;          // open MARKs: one a nesting level, and Python's pickler
                                             // stops at its recursion limit of 1,000 levels
constexpr size_t kMaxElements = 16'000'000;  // references held by all containers together
                                             // (DUP + APPENDS repeats one reference at will)
constexpr size_t kMaxCopiedBytes = 64 << 20; // text copied between values (global, object and
                                             // storage names recalled from the memo)

struct StorageType { const char* name; Dtype dtype; };
constexpr StorageType kStorageTypes[] = {
    {"torch.FloatStorage", Dtype::F32},   {"torch.HalfStorage", Dtype::F16},  {"torch.BFloat16Storage", Dtype::BF16},
    {"torch.DoubleStorage", Dtype::F64},  {"torch.LongStorage", Dtype::I64},  {"torch.IntStorage", Dtype::I32},
    {"torch.ShortStorage", Dtype::I16},   {"torch.CharStorage", Dtype::I8},   {"torch.ByteStorage", Dtype::U8},
    {"torch.BoolStorage", Dtype::Bool},
};

class Unpickler {
public:
    Unpickler(const uint8_t* data, size_t size) : m_data(data), m_size(size) {}

    Result<Pickle> Run() {
        while (true) {
            if (m_pos >= m_size) return Fail("pickle ends without STOP after " + std::to_string(m_size) + " bytes; truncated?");
            m_op_pos = m_pos;
            m_op = m_data[m_pos++];
            if (m_op == '.') break;  // STOP
            Status s = Step();
            if (s) s = CheckLimits();
            if (!s) return Fail(s.error());
        }
        if (m_stack.size() != 1 || !m_marks.empty()) return Fail("pickle stops with " + std::to_string(m_stack.size()) + " values on its stack, expected 1");
        m_out.root = m_stack.back();
        return std::move(m_out);
    }

private:
    // After every opcode: a step grows each thing by at most one container's worth.
    Status CheckLimits() const {
        const std::string refuse = "; not a state dict ssaviz will read";
        if (m_out.values.size() + m_stack.size() > kMaxValues) return Fail("pickle holds more than " + std::to_string(kMaxValues) + " values" + refuse);
        if (m_memo.size() > kMaxMemo) return Fail("pickle memoizes more than " + std::to_string(kMaxMemo) + " values" + refuse);
        if (m_marks.size() > kMaxMarks) return Fail("pickle opens more than " + std::to_string(kMaxMarks) + " MARKs at once" + refuse);
        if (m_elements > kMaxElements) return Fail("pickle's containers hold more than " + std::to_string(kMaxElements) + " elements" + refuse);
        if (m_copied > kMaxCopiedBytes) return Fail("pickle copies more than " + std::to_string(kMaxCopiedBytes) + " bytes of names" + refuse);
        return Ok{};
    }

    Error Bad(const std::string& what) const {
        char op[8];
        std::snprintf(op, sizeof op, m_op >= 0x20 && m_op < 0x7f ? "'%c'" : "0x%02x", m_op);
        return Fail("pickle opcode " + std::string(op) + " at byte " + std::to_string(m_op_pos) + ": " + what);
    }

    Result<const uint8_t*> Take(uint64_t n) {
        if (n > m_size - m_pos) return Bad("needs " + std::to_string(n) + " bytes, " + std::to_string(m_size - m_pos) + " left; truncated?");
        const uint8_t* p = m_data + m_pos;
        m_pos += n;
        return p;
    }
    Result<uint64_t> TakeLe(int bytes) {
        auto p = Take(bytes);
        if (!p) return Fail(p.error());
        uint64_t v = 0;
        for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | (*p)[i];
        return v;
    }
    Result<std::string> TakeLine() {
        const void* nl = std::memchr(m_data + m_pos, '\n', m_size - m_pos);
        if (!nl) return Bad("line without its newline; truncated?");
        const size_t n = static_cast<const uint8_t*>(nl) - (m_data + m_pos);
        std::string line(reinterpret_cast<const char*>(m_data + m_pos), n);
        m_pos += n + 1;
        return line;
    }

    size_t Add(PickleValue v) {
        m_out.values.push_back(std::move(v));
        return m_out.values.size() - 1;
    }
    void Push(PickleValue v) { m_stack.push_back(Add(std::move(v))); }
    Result<size_t> Pop() {
        if (m_stack.size() <= (m_marks.empty() ? 0 : m_marks.back())) return Bad("pops an empty stack");
        size_t v = m_stack.back();
        m_stack.pop_back();
        return v;
    }
    // The values above the newest mark, which is removed.
    Result<std::vector<size_t>> PopMark() {
        if (m_marks.empty()) return Bad("needs a MARK and there is none");
        std::vector<size_t> items(m_stack.begin() + m_marks.back(), m_stack.end());
        m_stack.resize(m_marks.back());
        m_marks.pop_back();
        return items;
    }
    PickleValue& At(size_t i) { return m_out.values[i]; }
    // Counts references put into containers and text copied out of other values (the limits above).
    void Hold(size_t elements) { m_elements += elements; }
    const std::string& Copied(const std::string& text) { return m_copied += text.size(), text; }

    Status PushString(Kind kind, uint64_t length) {
        auto p = Take(length);
        if (!p) return Fail(p.error());
        PickleValue v;
        v.kind = kind;
        v.text.assign(reinterpret_cast<const char*>(*p), length);
        Push(std::move(v));
        return Ok{};
    }
    void PushInt(int64_t i, Kind kind = Kind::Int) {
        PickleValue v;
        v.kind = kind;
        v.integer = i;
        Push(std::move(v));
    }
    // A tuple, list or dict of the values `items` (a dict's keys and values alternate).
    void PushContainer(Kind kind, std::vector<size_t> items) {
        Hold(items.size());
        PickleValue v;
        v.kind = kind;
        v.items = std::move(items);
        Push(std::move(v));
    }
    void PushTuple(std::vector<size_t> items) { PushContainer(Kind::Tuple, std::move(items)); }
    void PushGlobal(const std::string& module, const std::string& name) {
        PickleValue v;
        v.kind = Kind::Global;
        v.text = Copied(module) + "." + Copied(name);
        Push(std::move(v));
    }

    // Adds items to the container below them: key/value pairs to a dict, elements to a list (or
    // either to an opaque object standing for a subclass).
    Status Extend(Kind container, const std::vector<size_t>& items) {
        if (container == Kind::Dict && items.size() % 2) return Bad("odd number of keys and values");
        auto target = Pop();
        if (!target) return Fail(target.error());
        PickleValue& c = At(*target);
        if (c.kind != container && c.kind != Kind::Object)
            return Bad(std::string(container == Kind::Dict ? "sets items on a " : "appends to a ") + ToString(c.kind));
        Hold(items.size());
        c.items.insert(c.items.end(), items.begin(), items.end());
        m_stack.push_back(*target);
        return Ok{};
    }

    Result<std::vector<int64_t>> IntTuple(size_t index, const char* what) {
        const PickleValue& t = At(index);
        if (t.kind != Kind::Tuple || t.items.size() > 16) return Bad(std::string("tensor ") + what + " is not a tuple of at most 16 integers");
        std::vector<int64_t> out;
        for (size_t i : t.items) {
            if (At(i).kind != Kind::Int || At(i).integer < 0) return Bad(std::string("tensor ") + what + " holds a value that is not a non-negative integer");
            out.push_back(At(i).integer);
        }
        return out;
    }

    // func(*args) for the few callables torch.save uses; anything else is an opaque Object.
    Status Reduce() {
        auto args = Pop();
        if (!args) return Fail(args.error());
        auto func = Pop();
        if (!func) return Fail(func.error());
        if (At(*args).kind != Kind::Tuple) return Bad("REDUCE's arguments are not a tuple");
        // A reference, not a copy: a long tuple handed to REDUCE again and again was copied each time
        // (a 4 MB file ran for minutes). Nothing below pushes a value before its last use of `a`.
        const std::vector<size_t>& a = At(*args).items;
        const std::string name = At(*func).kind == Kind::Global ? At(*func).text : "";
        if (name == "collections.OrderedDict" && a.empty()) {
            PickleValue d;
            d.kind = Kind::Dict;
            Push(std::move(d));
        } else if ((name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") && a.size() >= 4) {
            if (At(a[0]).kind != Kind::Storage) return Bad("tensor rebuilt from a " + std::string(ToString(At(a[0]).kind)) + ", not a storage");
            if (At(a[1]).kind != Kind::Int || At(a[1]).integer < 0) return Bad("tensor storage offset is not a non-negative integer");
            PickleValue t;
            t.kind = Kind::Tensor;
            Copied(At(a[0]).tensor.storage_key);
            t.tensor = At(a[0]).tensor;
            t.tensor.offset = At(a[1]).integer;
            auto shape = IntTuple(a[2], "size");
            if (!shape) return Fail(shape.error());
            auto strides = IntTuple(a[3], "stride");
            if (!strides) return Fail(strides.error());
            if (shape->size() != strides->size()) return Bad("tensor size and stride differ in length");
            t.tensor.shape = *shape;
            t.tensor.strides = *strides;
            Push(std::move(t));
        } else if ((name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") && !a.empty()) {
            m_stack.push_back(a[0]);  // a Parameter is its tensor
        } else {
            PickleValue o;
            o.kind = Kind::Object;
            o.text = name.empty() ? std::string("(a call of a ") + ToString(At(*func).kind) + ")" : Copied(name);
            Hold(a.size());
            o.items = a;
            Push(std::move(o));
        }
        return Ok{};
    }

    Status PersistentLoad() {
        auto pid = Pop();
        if (!pid) return Fail(pid.error());
        const PickleValue& t = At(*pid);
        if (t.kind != Kind::Tuple || t.items.size() != 5 || At(t.items[0]).kind != Kind::String || At(t.items[0]).text != "storage")
            return Bad("persistent id is not ('storage', type, key, location, size)");
        const PickleValue &type = At(t.items[1]), &key = At(t.items[2]), &count = At(t.items[4]);
        if (type.kind != Kind::Global || key.kind != Kind::String || count.kind != Kind::Int || count.integer < 0)
            return Bad("persistent id is not ('storage', type, key, location, size)");
        PickleValue s;
        s.kind = Kind::Storage;
        bool known = false;
        for (const auto& st : kStorageTypes)
            if (type.text == st.name) { s.tensor.dtype = st.dtype; known = true; }
        if (!known) return Bad("storage type '" + EscapeForMessage(type.text) + "' is not supported (float, half, bfloat16, double and integer storages are)");
        s.tensor.storage_key = Copied(key.text);
        s.tensor.storage_elements = static_cast<uint64_t>(count.integer);
        Push(std::move(s));
        return Ok{};
    }

    Status Memo(uint64_t key) {
        if (m_stack.empty()) return Bad("memoizes an empty stack");
        m_memo[key] = m_stack.back();
        return Ok{};
    }
    Status Recall(uint64_t key) {
        auto it = m_memo.find(key);
        if (it == m_memo.end()) return Bad("memo key " + std::to_string(key) + " was never stored");
        m_stack.push_back(it->second);
        return Ok{};
    }

    Status Step();

    const uint8_t* m_data;
    size_t m_size;
    size_t m_pos = 0, m_op_pos = 0;
    uint8_t m_op = 0;
    Pickle m_out;
    std::vector<size_t> m_stack;  // value indices
    std::vector<size_t> m_marks;  // stack heights at each MARK
    std::unordered_map<uint64_t, size_t> m_memo;
    size_t m_elements = 0;  // see kMaxElements
    size_t m_copied = 0;    // see kMaxCopiedBytes
};

#define TRY(expr)                                 \
    do {                                          \
        auto _r = (expr);                         \
        if (!_r) return Fail(_r.error());         \
    } while (0)
#define TAKE(var, expr)                           \
    auto var##_r = (expr);                        \
    if (!var##_r) return Fail(var##_r.error());   \
    auto var = *var##_r

Status Unpickler::Step() {
    switch (m_op) {
        case 0x80: { TAKE(version, TakeLe(1)); if (version < 2 || version > 5) return Bad("protocol " + std::to_string(version) + " (2 to 5 are read)"); return Ok{}; }
        case 0x95: { TAKE(frame, TakeLe(8)); (void)frame; return Ok{}; }  // FRAME: a hint only
        case '(': m_marks.push_back(m_stack.size()); return Ok{};
        case '0': TRY(Pop()); return Ok{};
        case '1': TRY(PopMark()); return Ok{};
        case '2': if (m_stack.empty()) return Bad("duplicates an empty stack"); m_stack.push_back(m_stack.back()); return Ok{};
        case 'N': Push({}); return Ok{};
        case 0x88: PushInt(1, Kind::Bool); return Ok{};
        case 0x89: PushInt(0, Kind::Bool); return Ok{};
        case 'K': { TAKE(v, TakeLe(1)); PushInt(static_cast<int64_t>(v)); return Ok{}; }
        case 'M': { TAKE(v, TakeLe(2)); PushInt(static_cast<int64_t>(v)); return Ok{}; }
        case 'J': { TAKE(v, TakeLe(4)); PushInt(static_cast<int32_t>(static_cast<uint32_t>(v))); return Ok{}; }
        case 0x8a: case 0x8b: {  // LONG1, LONG4: little-endian two's complement of n bytes
            TAKE(n, TakeLe(m_op == 0x8a ? 1 : 4));
            TAKE(p, Take(n));
            if (n > 8) {
                PickleValue o;
                o.kind = Kind::Object;
                o.text = "int wider than 64 bits";
                Push(std::move(o));
                return Ok{};
            }
            uint64_t v = 0;
            for (uint64_t i = n; i-- > 0;) v = (v << 8) | p[i];
            if (n > 0 && n < 8 && (p[n - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign-extend
            PushInt(static_cast<int64_t>(v));
            return Ok{};
        }
        case 'I': case 'L': {  // INT / LONG as text; "I01" / "I00" are True / False
            TAKE(line, TakeLine());
            if (!line.empty() && line.back() == 'L') line.pop_back();
            if (m_op == 'I' && (line == "01" || line == "00")) { PushInt(line == "01", Kind::Bool); return Ok{}; }
            char* end = nullptr;
            errno = 0;
            const long long v = std::strtoll(line.c_str(), &end, 10);
            if (line.empty() || *end || errno) return Bad("'" + EscapeForMessage(line) + "' is not a 64-bit integer");
            PushInt(v);
            return Ok{};
        }
        case 'G': {
            TAKE(p, Take(8));
            uint64_t bits = 0;
            for (int i = 0; i < 8; ++i) bits = (bits << 8) | p[i];  // big-endian
            PickleValue v;
            v.kind = Kind::Float;
            std::memcpy(&v.number, &bits, 8);
            Push(std::move(v));
            return Ok{};
        }
        case 'F': {
            TAKE(line, TakeLine());
            char* end = nullptr;
            PickleValue v;
            v.kind = Kind::Float;
            v.number = std::strtod(line.c_str(), &end);
            if (line.empty() || *end) return Bad("'" + EscapeForMessage(line) + "' is not a float");
            Push(std::move(v));
            return Ok{};
        }
        case 'X': { TAKE(n, TakeLe(4)); return PushString(Kind::String, n); }
        case 0x8c: { TAKE(n, TakeLe(1)); return PushString(Kind::String, n); }
        case 0x8d: { TAKE(n, TakeLe(8)); return PushString(Kind::String, n); }
        case 'T': { TAKE(n, TakeLe(4)); return PushString(Kind::Bytes, n); }
        case 'U': { TAKE(n, TakeLe(1)); return PushString(Kind::Bytes, n); }
        case 'B': { TAKE(n, TakeLe(4)); return PushString(Kind::Bytes, n); }
        case 'C': { TAKE(n, TakeLe(1)); return PushString(Kind::Bytes, n); }
        case 0x8e: case 0x96: { TAKE(n, TakeLe(8)); return PushString(Kind::Bytes, n); }
        case ')': PushTuple({}); return Ok{};
        case 't': { TAKE(items, PopMark()); PushTuple(std::move(items)); return Ok{}; }
        case 0x85: case 0x86: case 0x87: {
            const size_t n = m_op - 0x84;
            std::vector<size_t> items(n);
            for (size_t i = n; i-- > 0;) { TAKE(v, Pop()); items[i] = v; }
            PushTuple(std::move(items));
            return Ok{};
        }
        case ']': case 0x8f: { PickleValue v; v.kind = Kind::List; Push(std::move(v)); return Ok{}; }  // EMPTY_LIST, EMPTY_SET
        case 'l': case 0x91: { TAKE(items, PopMark()); PushContainer(Kind::List, std::move(items)); return Ok{}; }  // LIST, FROZENSET
        case 'a': { TAKE(v, Pop()); return Extend(Kind::List, {v}); }
        case 'e': case 0x90: { TAKE(items, PopMark()); return Extend(Kind::List, items); }  // APPENDS, ADDITEMS
        case '}': { PickleValue v; v.kind = Kind::Dict; Push(std::move(v)); return Ok{}; }
        case 'd': {
            TAKE(items, PopMark());
            if (items.size() % 2) return Bad("odd number of keys and values");
            PushContainer(Kind::Dict, std::move(items));
            return Ok{};
        }
        case 's': { TAKE(value, Pop()); TAKE(key, Pop()); return Extend(Kind::Dict, {key, value}); }
        case 'u': { TAKE(items, PopMark()); return Extend(Kind::Dict, items); }
        case 'c': {
            TAKE(module, TakeLine());
            TAKE(name, TakeLine());
            PushGlobal(module, name);
            return Ok{};
        }
        case 0x93: {  // STACK_GLOBAL
            TAKE(name, Pop());
            TAKE(module, Pop());
            if (At(name).kind != Kind::String || At(module).kind != Kind::String) return Bad("STACK_GLOBAL needs two strings");
            PushGlobal(At(module).text, At(name).text);
            return Ok{};
        }
        case 'R': return Reduce();
        case 0x81: case 0x92: {  // NEWOBJ (cls, args), NEWOBJ_EX (cls, args, kwargs): opaque objects
            if (m_op == 0x92) TRY(Pop());
            TAKE(args, Pop());
            TAKE(cls, Pop());
            PickleValue o;
            o.kind = Kind::Object;
            o.text = At(cls).kind == Kind::Global ? Copied(At(cls).text) : "(an object)";
            if (At(args).kind == Kind::Tuple) {
                Hold(At(args).items.size());
                o.items = At(args).items;
            }
            Push(std::move(o));
            return Ok{};
        }
        case 'b': {  // BUILD: state for an object; an OrderedDict's _metadata is dropped
            TAKE(state, Pop());
            if (m_stack.empty()) return Bad("BUILD without an object");
            if (At(m_stack.back()).kind == Kind::Object) {
                Hold(1);
                At(m_stack.back()).items.push_back(state);
            }
            return Ok{};
        }
        case 'Q': return PersistentLoad();
        case 'p': { TAKE(line, TakeLine()); char* end; uint64_t k = std::strtoull(line.c_str(), &end, 10); if (line.empty() || *end) return Bad("bad memo key"); return Memo(k); }
        case 'q': { TAKE(k, TakeLe(1)); return Memo(k); }
        case 'r': { TAKE(k, TakeLe(4)); return Memo(k); }
        case 0x94: return Memo(m_memo.size());
        case 'g': { TAKE(line, TakeLine()); char* end; uint64_t k = std::strtoull(line.c_str(), &end, 10); if (line.empty() || *end) return Bad("bad memo key"); return Recall(k); }
        case 'h': { TAKE(k, TakeLe(1)); return Recall(k); }
        case 'j': { TAKE(k, TakeLe(4)); return Recall(k); }
        default: break;
    }
    return Bad("is not one torch.save writes; refusing the file (the reader only understands plain data, never code)");
}

#undef TRY
#undef TAKE

}  // namespace

const PickleValue* Pickle::Get(size_t dict, const std::string& key) const {
    const PickleValue& d = values[dict];
    if (d.kind != PickleValue::Kind::Dict) return nullptr;
    for (size_t i = 0; i + 1 < d.items.size(); i += 2)
        if (values[d.items[i]].kind == PickleValue::Kind::String && values[d.items[i]].text == key) return &values[d.items[i + 1]];
    return nullptr;
}

Result<Pickle> Unpickle(const uint8_t* data, size_t size) { return Unpickler(data, size).Run(); }

const char* ToString(PickleValue::Kind kind) {
    switch (kind) {
        case Kind::None: return "None";
        case Kind::Bool: return "bool";
        case Kind::Int: return "int";
        case Kind::Float: return "float";
        case Kind::String: return "str";
        case Kind::Bytes: return "bytes";
        case Kind::Tuple: return "tuple";
        case Kind::List: return "list";
        case Kind::Dict: return "dict";
        case Kind::Global: return "global";
        case Kind::Object: return "object";
        case Kind::Storage: return "storage";
        case Kind::Tensor: return "tensor";
    }
    return "?";
}

}  // namespace model
