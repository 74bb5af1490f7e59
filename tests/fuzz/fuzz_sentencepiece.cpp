// SentencePiece (the bundled English model's tokenizer.model, trained by ssaviz: identity
// normalisation, byte fallback) on arbitrary bytes as text, through libssaviz_spm.so. Invalid
// UTF-8 must be refused; valid text (the input, or the input with its broken bytes replaced by
// U+FFFD) must keep the Tokenizer contract, so byte pieces get one byte each of the character they
// spell, and decode back to itself (except U+2581, SentencePiece's own spelling of a space, which
// decodes as one). The bytes also go to Decode as ids.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/text/sentencepiece.h"
#include "model/text/tokenizer.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

const model::Tokenizer& English() {
    static const std::unique_ptr<model::Tokenizer> tokenizer =
        TokenizerOrAbort("fuzz_sentencepiece", model::LoadSentencePieceTokenizer(SSAVIZ_SOURCE_DIR "/assets/models/english/ssa/tokenizer.model"));
    return *tokenizer;
}

std::string MarkersAsSpaces(std::string_view text) {
    std::string out(text);
    for (size_t at = out.find("\xE2\x96\x81"); at != std::string::npos; at = out.find("\xE2\x96\x81", at + 1))
        out.replace(at, 3, " ");
    return out;
}

void CheckValidText(std::string_view text) {
    const model::Tokenizer& tokenizer = English();
    auto encoded = tokenizer.Encode(text);
    FUZZ_CHECK(encoded.ok());
    CheckTokenization(tokenizer, text, *encoded, EmptyTokens::kFirst);
    auto decoded = tokenizer.Decode(encoded->ids);
    FUZZ_CHECK(decoded.ok() && *decoded == MarkersAsSpaces(text));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    English();  // load once, outside the timed runs
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzTokenizerInput(English(), data, size, CheckValidText);
    return 0;
}
