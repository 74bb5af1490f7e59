// A safe reader for the pickles torch.save writes (data.pkl in its ZIP archive). It understands
// the opcodes of protocols 2 to 5 and builds plain values; it never imports or calls anything.
// A few globals are understood (OrderedDict, torch's tensor rebuild functions, storage types);
// any other global becomes an opaque Object value carrying its name, so metadata such as numpy
// scalars is skipped while the state dict is still read, and a pickled whole module
// (torch.save(model)) is reported by its class name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/io/result.h"
#include "model/io/safetensors.h"

namespace model {

// A tensor as torch.save describes it: a view (shape, strides, offset; in elements) of a
// storage, whose bytes are the archive entry data/<storage_key>.
struct PickledTensor {
    std::string storage_key;
    Dtype dtype = Dtype::F32;
    uint64_t storage_elements = 0;  // as the pickle claims; checked against the entry's size later
    std::vector<int64_t> shape;
    std::vector<int64_t> strides;
    int64_t offset = 0;
};

// Values live in one arena and refer to each other by index, so a pickle whose containers refer
// to themselves (memo cycles) is representable and frees without leaks.
struct PickleValue {
    enum class Kind { None, Bool, Int, Float, String, Bytes, Tuple, List, Dict, Global, Object, Storage, Tensor };
    Kind kind = Kind::None;
    int64_t integer = 0;      // Bool, Int
    double number = 0;        // Float
    std::string text;         // String, Bytes; Global and Object: "module.name"
    std::vector<size_t> items;  // Tuple, List: elements; Dict: key, value, key, value...; Object: its args
    PickledTensor tensor;     // Storage (key, dtype, elements) and Tensor
};

struct Pickle {
    std::vector<PickleValue> values;
    size_t root = 0;

    const PickleValue& operator[](size_t i) const { return values[i]; }
    // The value for string key `key` in the Dict at `dict`, or nullptr.
    const PickleValue* Get(size_t dict, const std::string& key) const;
};

// Errors name the opcode and its byte offset. Values, memo entries, open MARKs, container elements
// and copied names each have a cap (pickle.cpp), so memory stays bounded whatever the opcodes.
Result<Pickle> Unpickle(const uint8_t* data, size_t size);

const char* ToString(PickleValue::Kind kind);

}  // namespace model
