// Regular expressions from tokenizer files (Split, Replace, the ByteLevel pre-tokenizer's), run by
// PCRE2 the way Hugging Face's tokenizers run them with Oniguruma: patterns are translated where
// the two differ (\s is White_Space, \h a hex digit, "." stops only at \n, ^ and $ at lines,
// {,n}), constructs PCRE2 cannot reproduce are refused, and every search draws on a work budget
// linear in the text it serves, so a hostile pattern ends in an error instead of a hang.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/io/result.h"

namespace model {

// The regex work one text may cost. Every search made while encoding a text (its normalizers and
// pre-tokenizers, all of them) draws from one budget sized by the text, and every search of one
// decode call from one sized by the tokens it decodes, so the work is linear in what came in
// however many searches a file's components make of it.
class RegexBudget {
public:
    static RegexBudget ForText(size_t bytes);      // encoding a text of `bytes` bytes: 1 M steps + 256 a byte
    static RegexBudget ForDecoding(size_t bytes);  // one decode call of tokens `bytes` long in all: 4 K + 256 a byte

private:
    friend class Regex;
    RegexBudget(uint64_t base, size_t bytes, const char* of);
    uint64_t m_total, m_left;
    size_t m_bytes;
    const char* m_of;  // "text" or "tokens", for the message
};

class Regex {
public:
    enum class Dialect {
        kOniguruma,  // a tokenizer.json pattern ("Regex": ...)
        kPcre2,      // a pattern ssaviz writes itself, already in PCRE2's syntax
    };

    // The error is one line without a file name (the caller names the file and field).
    // `invalid_utf8` lets the pattern run over bytes that are not UTF-8 (decoders see raw bytes).
    static Result<Regex> Compile(std::string_view pattern, Dialect dialect, bool invalid_utf8 = false);
    // A "String" pattern: the text itself, as HF escapes it into a regex.
    static Result<Regex> Literal(std::string_view text, bool invalid_utf8 = false);

    // Every match, as Oniguruma's find_iter (the onig crate) gives them: leftmost first,
    // non-overlapping, empty matches included except one right where the previous match ended.
    // The work is drawn from `budget`; fails when the search needs more than is left.
    Status FindAll(std::string_view text, RegexBudget* budget, std::vector<std::pair<size_t, size_t>>* matches) const;

private:
    struct Code;
    std::shared_ptr<const Code> m_code;
};

}  // namespace model
