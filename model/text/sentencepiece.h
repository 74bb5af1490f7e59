// SentencePiece tokenizers (tokenizer.model), loaded and trained with libsentencepiece. Models
// ssaviz trains keep the text's bytes exactly (identity normalisation, spaces kept, unknown
// characters as byte pieces), so every token maps back onto its byte range in the input.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/io/result.h"
#include "model/text/tokenizer.h"

namespace model {

// Opens a SentencePiece model file; the error names the file.
Result<std::unique_ptr<Tokenizer>> LoadSentencePieceTokenizer(const std::string& path);

struct SentencePieceTraining {
    int vocab_size = 4096;
    std::string model_type = "bpe";  // bpe | unigram | word | char
    std::vector<std::string> user_symbols;  // pieces kept whole (e.g. a task's marker words)
    std::string normalization = "identity";  // a built-in rule (nmt_nfkc, ...); identity keeps the bytes, so offsets index the text
};

// Trains on `lines` (each a training sentence) and writes the model to `path`. Deterministic.
Status TrainSentencePiece(const std::vector<std::string>& lines, const SentencePieceTraining& options,
                          const std::string& path);

}  // namespace model
