// Regular expressions from tokenizer files (Split, Replace, the ByteLevel pre-tokenizer's), run by
// PCRE2 the way Hugging Face's tokenizers run them with Oniguruma: patterns are translated where
// the two differ (\s is White_Space, \h a hex digit, "." stops only at \n, ^ and $ at lines,
// {,n}), constructs PCRE2 cannot reproduce are refused, and every search runs under a work
// budget linear in the text, so a hostile pattern ends in an error instead of a hang.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/io/result.h"

namespace model {

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
    // Fails, naming the byte, when the search needs more work than its budget.
    Status FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>* matches) const;

private:
    struct Code;
    std::shared_ptr<const Code> m_code;
};

}  // namespace model
