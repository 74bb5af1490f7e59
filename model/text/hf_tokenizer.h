// Tokenizers in Hugging Face's tokenizer.json format, run as HF's tokenizers library (its Rust
// crate) runs them: added and special tokens found in the text, the normalizer, the
// pre-tokenizer, BPE, the post-processor's tokens; and the decoder. A component ssaviz does not
// run is refused with its name, never skipped. GPT-2's vocab.json + merges.txt run through the
// same pipeline. Each token's byte range is in the input text (see Tokenization): a token that
// comes from no input bytes (the post-processor's BOS, a prefix the normalizer adds) has an empty
// range where it stands.
#pragma once

#include <memory>
#include <string>

#include "model/io/result.h"
#include "model/text/bpe.h"
#include "model/text/tokenizer.h"

namespace model {

// Opens a tokenizer.json; the error names the file and the field ("pre_tokenizer.pretokenizers[0]").
Result<std::unique_ptr<Tokenizer>> LoadHfTokenizerJson(const std::string& path);

// GPT-2's byte-level BPE: the ByteLevel pre-tokenizer with gpt-3-encoder's regex (JavaScript's \s),
// `model` (GPT-2's files: a piece outside the vocabulary is an error) and the ByteLevel decoder.
// `content_hash`: the tokenizer's ContentHash, of the vocabulary's ids and bytes and the merges in rank order.
Result<std::unique_ptr<Tokenizer>> MakeGpt2Tokenizer(std::unique_ptr<BpeModel> model, uint64_t content_hash);

}  // namespace model
