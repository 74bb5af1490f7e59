// GPT-2 byte-level BPE with the real vocabulary (assets/tokenizers/gpt2) on arbitrary bytes as
// text. Invalid UTF-8 must be refused, naming a byte; valid text (the input, or the input with its
// broken bytes replaced by U+FFFD) must encode, keep the Tokenizer contract, decode back to itself
// and encode the same way twice (the second time through the BPE cache). The bytes also go to
// Decode as ids, which skips those outside the vocabulary.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/text/tokenizer.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

const model::Tokenizer& Gpt2() {
    static const std::unique_ptr<model::Tokenizer> tokenizer =
        TokenizerOrAbort("fuzz_tokenizer", model::LoadTokenizer(SSAVIZ_SOURCE_DIR "/assets/tokenizers/gpt2"));
    return *tokenizer;
}

void CheckValidText(std::string_view text) {
    const model::Tokenizer& tokenizer = Gpt2();
    auto first = tokenizer.Encode(text);
    FUZZ_CHECK(first.ok());
    CheckTokenization(tokenizer, text, *first);
    auto decoded = tokenizer.Decode(first->ids);
    FUZZ_CHECK(decoded.ok() && *decoded == text);
    auto second = tokenizer.Encode(text);
    FUZZ_CHECK(second.ok() && second->ids == first->ids && second->offsets == first->offsets);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    Gpt2();  // load once, outside the timed runs
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzTokenizerInput(Gpt2(), data, size, CheckValidText);
    return 0;
}
