// Generation, one token at a time: drawing the next token from a position's logits, and appending
// it to a tokenized text. `ssaviz generate` and the window's Continue share both steps, so the two
// front ends write the same tokens with the same pieces and offsets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/text/tokenizer.h"

namespace model {

// The next token from a position's logits: the most likely (lowest id on a tie) at temperature 0,
// else drawn from softmax(logits / temperature) over the `top_k` most likely (0: all) with `rng`.
// Only ids below `vocab` (the tokenizer's size; a padded vocabulary has unused logits) are drawn.
// The same seed draws the same tokens on every platform (the generator and the arithmetic are ours).
int32_t NextToken(const std::vector<float>& logits, size_t vocab, float temperature, int top_k, uint64_t* rng_state);

// Appends token `id` to `tokens` as if the text had been tokenized with it at the end: its piece
// is the bytes it adds to the decoded text, its offsets the byte range after the last token's.
// Returns that piece, for the caller that keeps the text. Decoding the id alone is not enough:
// SentencePiece drops a piece's leading space at the start of a text, so it is decoded after the
// previous token. Fails as Decode does (a hostile tokenizer.json decoder), leaving `tokens` as it was.
Result<std::string> AppendToken(const Tokenizer& tokenizer, int32_t id, Tokenization* tokens);

}  // namespace model
