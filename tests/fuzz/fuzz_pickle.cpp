// Unpickle (the safe reader for torch.save's data.pkl) on arbitrary bytes. An accepted pickle must
// be a well-formed arena: the root and every item index name a value, so code walking the result
// (the checkpoint loader) can trust them.
#include <cstdint>
#include <cstring>

#include "model/io/pickle.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto pickle = model::Unpickle(data, size);
    if (!pickle) {
        FUZZ_CHECK(!pickle.error().empty());
        return 0;
    }
    const size_t n = pickle->values.size();
    FUZZ_CHECK(pickle->root < n);
    for (size_t i = 0; i < n; ++i) {
        const model::PickleValue& v = (*pickle)[i];
        FUZZ_CHECK(std::strcmp(model::ToString(v.kind), "") != 0);
        for (size_t item : v.items) FUZZ_CHECK(item < n);
        if (v.kind == model::PickleValue::Kind::Dict) {
            FUZZ_CHECK(v.items.size() % 2 == 0);
            (void)pickle->Get(i, "state_dict");
        }
    }
    return 0;
}
