// Contents:
//   [SECTION] Oniguruma to PCRE2
//   [SECTION] Compiling
//   [SECTION] Searching under a budget
#include "model/text/regex.h"

#include "model/io/files.h"
#include "model/text/tokenizer.h"
#include "model/text/unicode.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string.h>  // memmem

namespace model {
namespace {

//-----------------------------------------------------------------------------
// [SECTION] Oniguruma to PCRE2
//-----------------------------------------------------------------------------
// HF compiles tokenizer.json patterns with Oniguruma (the onig crate, Ruby syntax, Unicode). Most
// of that syntax means the same to PCRE2 with UTF, UCP and MULTILINE; what differs is rewritten
// (the classes follow Oniguruma's Unicode definitions, as HF's own JavaScript port spells them)
// and what cannot be reproduced exactly is refused rather than run differently.

constexpr size_t kMaxPatternBytes = 64 * 1024;

// Oniguruma's Unicode \w, as a class body.
constexpr const char* kWordClass = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";

bool IsHexDigit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool IsAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// What an escape letter stands for in PCRE2, outside a character class and inside one (nullptr:
// not one of these; the letters left are read in Translator::Escape or refused).
const char* EscapeText(char letter, bool in_class) {
    static const std::string word = kWordClass, boundary_word = "[" + word + "]";
    struct Rule {
        char letter;
        std::string outside, inside;  // "": not an escape there
    };
    static const Rule kRules[] = {
        {'s', "\\p{White_Space}", "\\p{White_Space}"},
        {'S', "\\P{White_Space}", "\\P{White_Space}"},
        {'d', "\\p{Nd}", "\\p{Nd}"},
        {'D', "\\P{Nd}", "\\P{Nd}"},
        {'h', "[0-9A-Fa-f]", "0-9A-Fa-f"},  // a hex digit (to PCRE2 a horizontal space)
        {'H', "[^0-9A-Fa-f]", ""},
        {'w', boundary_word, word},
        {'W', "[^" + word + "]", ""},
        {'b', "(?:(?<!" + boundary_word + ")(?=" + boundary_word + ")|(?<=" + boundary_word + ")(?!" + boundary_word + "))", "\\x{08}"},
        {'B', "(?:(?<!" + boundary_word + ")(?!" + boundary_word + ")|(?<=" + boundary_word + ")(?=" + boundary_word + "))", ""},
        {'v', "\\x{0B}", "\\x{0B}"},
        {'n', "\\n", "\\n"}, {'t', "\\t", "\\t"}, {'r', "\\r", "\\r"}, {'f', "\\f", "\\f"}, {'a', "\\a", "\\a"}, {'e', "\\e", "\\e"},
        {'A', "\\A", ""}, {'z', "\\z", ""}, {'Z', "\\Z", ""}, {'k', "\\k", ""},
    };
    for (const Rule& rule : kRules) {
        if (rule.letter != letter) continue;
        const std::string& text = in_class ? rule.inside : rule.outside;
        return text.empty() ? nullptr : text.c_str();
    }
    return nullptr;
}

class Translator {
public:
    explicit Translator(std::string_view pattern) : m_in(pattern) {}

    Result<std::string> Run() {
        while (m_at < m_in.size()) {
            if (Status s = Outside(); !s) return Fail(s.error());
        }
        return m_out;
    }

private:
    Error Refuse(const std::string& what) const {
        return Fail("uses " + what + " (at character offset " + std::to_string(m_at) + "), which ssaviz cannot run as Oniguruma does");
    }

    char Peek(size_t ahead = 0) const { return m_at + ahead < m_in.size() ? m_in[m_at + ahead] : '\0'; }

    // One whole UTF-8 character copied as it is.
    void CopyCharacter() {
        uint32_t cp = 0;
        const size_t length = CodePointAt(m_in, m_at, &cp);
        m_out.append(m_in.substr(m_at, length));
        m_at += length;
    }

    // \x{...} or \xHH (up to two digits), \p{...}, \uHHHH: the escape letter is at m_at.
    Status CopyOperandEscape(char letter) {
        if (letter == 'x') {
            m_out += "\\x";
            ++m_at;
            if (Peek() == '{') {
                const size_t close = m_in.find('}', m_at);
                if (close == std::string_view::npos) return Refuse("an unterminated \\x{");
                m_out.append(m_in.substr(m_at, close + 1 - m_at));
                m_at = close + 1;
            } else {
                for (int k = 0; k < 2 && IsHexDigit(Peek()); ++k) m_out += m_in[m_at++];
            }
            return Ok{};
        }
        if (letter == 'u') {
            ++m_at;
            for (int k = 0; k < 4; ++k)
                if (!IsHexDigit(Peek(k))) return Refuse("\\u without four hex digits");
            m_out += "\\x{" + std::string(m_in.substr(m_at, 4)) + "}";
            m_at += 4;
            return Ok{};
        }
        // \p{...} / \P{...}
        ++m_at;
        if (Peek() != '{') return Refuse(std::string("\\") + letter + " without braces");
        const size_t close = m_in.find('}', m_at);
        if (close == std::string_view::npos) return Refuse("an unterminated \\p{");
        m_out += std::string("\\") + letter;
        m_out.append(m_in.substr(m_at, close + 1 - m_at));
        m_at = close + 1;
        return Ok{};
    }

    Status Outside() {
        const char c = m_in[m_at];
        switch (c) {
            case '\\': return Escape(false);
            case '[': return Class();
            case '.': m_out += "[^\\n]"; ++m_at; return Ok{};
            case '(': return Group();
            case '{': return Brace();
            case '}': m_out += "\\}"; ++m_at; return Ok{};
            default: CopyCharacter(); return Ok{};
        }
    }

    // A backslash escape, outside a class or inside one: the escapes both read alike come from
    // EscapeText; back-references and octal exist only outside a class.
    Status Escape(bool in_class) {
        if (m_at + 1 >= m_in.size()) return Refuse("a trailing backslash");
        const char e = m_in[m_at + 1];
        if (const char* text = EscapeText(e, in_class)) {
            m_out += text;
            m_at += 2;
            return Ok{};
        }
        if (e == 'x' || e == 'u' || e == 'p' || e == 'P') {
            ++m_at;
            return CopyOperandEscape(e);
        }
        if (!in_class && e >= '1' && e <= '9') {  // a back-reference
            m_out += '\\';
            ++m_at;
            while (Peek() >= '0' && Peek() <= '9') m_out += m_in[m_at++];
            return Ok{};
        }
        if (!in_class && e == '0') {  // octal
            m_out += "\\0";
            m_at += 2;
            for (int k = 0; k < 2 && Peek() >= '0' && Peek() <= '7'; ++k) m_out += m_in[m_at++];
            return Ok{};
        }
        if (IsAsciiLetter(e) || (in_class && e >= '0' && e <= '9')) return Refuse(std::string("\\") + e + (in_class ? " inside a class" : ""));
        m_out += '\\';  // an escaped punctuation or non-ASCII character stands for itself
        ++m_at;
        CopyCharacter();
        return Ok{};
    }

    Status Group() {
        if (Peek(1) != '?') {
            m_out += '(';
            ++m_at;
            return Ok{};
        }
        const char kind = Peek(2);
        if (kind == '#') {  // a comment
            const size_t close = m_in.find(')', m_at);
            if (close == std::string_view::npos) return Refuse("an unterminated comment");
            m_at = close + 1;
            return Ok{};
        }
        if (kind == ':' || kind == '=' || kind == '!' || kind == '>') {
            m_out.append(m_in.substr(m_at, 3));
            m_at += 3;
            return Ok{};
        }
        if (kind == '<' && (Peek(3) == '=' || Peek(3) == '!')) {
            m_out.append(m_in.substr(m_at, 4));
            m_at += 4;
            return Ok{};
        }
        if (kind == '<' || kind == '\'') {  // a named group: (?<name>...) or (?'name'...)
            m_out.append(m_in.substr(m_at, 3));
            m_at += 3;
            return Ok{};
        }
        // Options: only case-insensitivity means the same in both ((?m) is dotall to Oniguruma's
        // Ruby syntax, (?x) changes how the rest must be read).
        size_t k = m_at + 2;
        while (k < m_in.size() && (m_in[k] == 'i' || m_in[k] == '-')) ++k;
        if (k > m_at + 2 && k < m_in.size() && (m_in[k] == ':' || m_in[k] == ')')) {
            m_out.append(m_in.substr(m_at, k + 1 - m_at));
            m_at = k + 1;
            return Ok{};
        }
        return Refuse("the group \"" + EscapeForMessage(m_in.substr(m_at, 4), 8) + "\"");
    }

    // {n}, {n,}, {n,m} and Oniguruma's {,m}; anything else is a literal brace.
    Status Brace() {
        size_t k = m_at + 1;
        const size_t first = k;
        while (k < m_in.size() && m_in[k] >= '0' && m_in[k] <= '9') ++k;
        const bool has_min = k > first;
        bool has_max = false, comma = false;
        if (k < m_in.size() && m_in[k] == ',') {
            comma = true;
            const size_t second = ++k;
            while (k < m_in.size() && m_in[k] >= '0' && m_in[k] <= '9') ++k;
            has_max = k > second;
        }
        const bool valid = k < m_in.size() && m_in[k] == '}' && (has_min || (comma && has_max)) && !m_out.empty();
        if (!valid) {
            m_out += "\\{";
            ++m_at;
            return Ok{};
        }
        if (k + 1 < m_in.size() && m_in[k + 1] == '+') return Refuse("{n,m}+ (a repeat of a repeat in Oniguruma)");
        m_out += '{';
        if (!has_min) m_out += '0';
        m_out.append(m_in.substr(m_at + 1, k + 1 - (m_at + 1)));
        m_at = k + 1;
        return Ok{};
    }

    Status Class() {
        m_out += '[';
        ++m_at;
        if (Peek() == '^') {
            m_out += '^';
            ++m_at;
        }
        if (Peek() == ']') return Refuse("a character class that starts with ']'");
        while (m_at < m_in.size()) {
            const char c = m_in[m_at];
            if (c == ']') {
                m_out += ']';
                ++m_at;
                return Ok{};
            }
            if (c == '[') {
                if (Peek(1) != ':') return Refuse("a nested character class");
                if (Status s = PosixClass(); !s) return s;
                continue;
            }
            if (c == '&' && Peek(1) == '&') return Refuse("a class intersection (&&)");
            if (c == '\\') {
                if (Status s = Escape(true); !s) return s;
                continue;
            }
            CopyCharacter();
        }
        return Refuse("an unterminated character class");
    }

    Status PosixClass() {
        const size_t close = m_in.find(":]", m_at + 2);
        if (close == std::string_view::npos) return Refuse("an unterminated [:class:]");
        const std::string name(m_in.substr(m_at + 2, close - (m_at + 2)));
        static const std::pair<const char*, const char*> kClasses[] = {
            {"alpha", "\\p{Alphabetic}"}, {"alnum", "\\p{Alphabetic}\\p{Nd}"}, {"digit", "\\p{Nd}"},
            {"lower", "\\p{Lowercase}"},  {"upper", "\\p{Uppercase}"},         {"space", "\\p{White_Space}"},
            {"blank", "\\t\\p{Zs}"},      {"cntrl", "\\p{Cc}"},                {"xdigit", "0-9A-Fa-f"},
        };
        for (const auto& [posix, body] : kClasses) {
            if (name == posix) {
                m_out += body;
                m_at = close + 2;
                return Ok{};
            }
        }
        if (name == "word") {
            m_out += kWordClass;
            m_at = close + 2;
            return Ok{};
        }
        return Refuse("[:" + EscapeForMessage(name, 20) + ":]");
    }

    std::string_view m_in;
    size_t m_at = 0;
    std::string m_out;
};

std::string Pcre2Message(int code) {
    PCRE2_UCHAR buffer[256];
    if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) return "error " + std::to_string(code);
    return reinterpret_cast<const char*>(buffer);
}

}  // namespace

//-----------------------------------------------------------------------------
// [SECTION] Compiling
//-----------------------------------------------------------------------------

struct Regex::Code {
    pcre2_code* code = nullptr;  // null for a non-empty literal
    std::string literal;
    bool invalid_utf8 = false;
    ~Code() {
        if (code) pcre2_code_free(code);
    }
};

Result<Regex> Regex::Compile(std::string_view pattern, Dialect dialect, bool invalid_utf8) {
    if (pattern.size() > kMaxPatternBytes) return Fail("the regex is " + FormatBytes(pattern.size()) + ", more than the 64 KB allowed");
    if (FindInvalidUtf8(pattern) != std::string_view::npos) return Fail("the regex is not valid UTF-8");
    std::string translated(pattern);
    if (dialect == Dialect::kOniguruma) {
        auto t = Translator(pattern).Run();
        if (!t) return Fail("the regex " + t.error());
        translated = std::move(*t);
    }
    pcre2_compile_context* context = pcre2_compile_context_create(nullptr);
    if (!context) return Fail("out of memory compiling a regex");
    pcre2_set_newline(context, PCRE2_NEWLINE_LF);
    // Anchored: FindAll tries each start position itself, so every attempt has its own bound.
    const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_ANCHORED | PCRE2_NEVER_BACKSLASH_C |
                             (invalid_utf8 ? PCRE2_MATCH_INVALID_UTF : 0);
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(), options,
                                     &error_code, &error_offset, context);
    pcre2_compile_context_free(context);
    if (!code) return Fail("the regex does not compile: " + Pcre2Message(error_code));
    // JIT is only a speed-up: without it pcre2_match interprets the same pattern.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    auto compiled = std::make_shared<Code>();
    compiled->code = code;
    compiled->invalid_utf8 = invalid_utf8;
    Regex regex;
    regex.m_code = std::move(compiled);
    return regex;
}

Result<Regex> Regex::Literal(std::string_view text, bool invalid_utf8) {
    if (text.empty()) {
        // HF escapes the string into a regex; an empty one matches between every two characters.
        return Compile("", Dialect::kPcre2, invalid_utf8);
    }
    if (text.size() > kMaxPatternBytes) return Fail("the pattern is " + FormatBytes(text.size()) + ", more than the 64 KB allowed");
    auto compiled = std::make_shared<Code>();
    compiled->literal = std::string(text);
    compiled->invalid_utf8 = invalid_utf8;
    Regex regex;
    regex.m_code = std::move(compiled);
    return regex;
}

//-----------------------------------------------------------------------------
// [SECTION] Searching under a budget
//-----------------------------------------------------------------------------
// PCRE2's match limit counts backtracking steps per start position, so it alone would let a
// pattern spend its limit at every position, and a file's components search a text many times.
// Each attempt here starts with a small limit that quadruples while it is hit, and every limit
// granted is drawn from the RegexBudget of the text being encoded (or of the decode call): one
// budget for all its searches, linear in its bytes. Ordinary patterns use a small part of it (a
// token's attempt fits the first limit under JIT; a pattern that matches nowhere costs that first
// limit per character); a catastrophic one spends it and is refused, after at most the budget.

namespace {

constexpr uint64_t kTextBudgetBase = uint64_t{1} << 20;
constexpr uint64_t kDecodeBudgetBase = 4096;
constexpr uint64_t kBudgetPerByte = 256;
constexpr uint32_t kFirstLimit = 16;
constexpr uint32_t kHeapLimitKiB = 64 * 1024;

struct Pcre2Thread {
    pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
    pcre2_match_context* context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
    Pcre2Thread() {
        if (context) {
            pcre2_set_heap_limit(context, kHeapLimitKiB);
            if (jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
        }
    }
    ~Pcre2Thread() {
        pcre2_match_data_free(data);
        pcre2_match_context_free(context);
        pcre2_jit_stack_free(jit_stack);
    }
};

}  // namespace

RegexBudget::RegexBudget(uint64_t base, size_t bytes, const char* of)
    : m_total(base + kBudgetPerByte * bytes), m_left(m_total), m_bytes(bytes), m_of(of) {}

RegexBudget RegexBudget::ForText(size_t bytes) { return RegexBudget(kTextBudgetBase, bytes, "text"); }
RegexBudget RegexBudget::ForDecoding(size_t bytes) { return RegexBudget(kDecodeBudgetBase, bytes, "tokens"); }

Status Regex::FindAll(std::string_view text, RegexBudget* budget, std::vector<std::pair<size_t, size_t>>* matches) const {
    matches->clear();
    const Code& c = *m_code;
    if (!c.code) {  // memmem is linear in the text whatever the pattern (find is not: a long literal costs its length per byte)
        const std::string& literal = c.literal;
        for (size_t at = 0; at + literal.size() <= text.size();) {
            const void* found = memmem(text.data() + at, text.size() - at, literal.data(), literal.size());
            if (!found) break;
            at = static_cast<size_t>(static_cast<const char*>(found) - text.data());
            matches->emplace_back(at, at + literal.size());
            at += literal.size();
        }
        return Ok{};
    }
    thread_local Pcre2Thread pcre2;
    if (!pcre2.data || !pcre2.context) return Fail("out of memory for a regex search");
    const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    const uint32_t check = c.invalid_utf8 ? 0 : PCRE2_NO_UTF_CHECK;  // valid text was checked on the way in
    uint64_t& left = budget->m_left;
    const auto next_character = [&](size_t at) {
        uint32_t cp = 0;
        return at + CodePointAt(text, at, &cp);
    };
    // The end of a match starting exactly at `at`, or npos.
    const auto match_at = [&](size_t at, size_t* end) -> Status {
        *end = std::string_view::npos;
        for (uint64_t limit = kFirstLimit;; limit *= 4) {
            if (left == 0)
                return Fail("the regex needs more work than the budget left (" + std::to_string(budget->m_total) + " steps for " +
                            std::to_string(budget->m_bytes) + " bytes of " + budget->m_of + ")");
            const uint64_t granted = std::min<uint64_t>({limit, left, UINT32_MAX});
            pcre2_set_match_limit(pcre2.context, static_cast<uint32_t>(granted));
            const int rc = pcre2_match(c.code, subject, text.size(), at, check, pcre2.data, pcre2.context);
            left -= granted;
            if (rc >= 0) {  // 0: a match, with more groups than the one pair kept
                *end = pcre2_get_ovector_pointer(pcre2.data)[1];
                return Ok{};
            }
            if (rc == PCRE2_ERROR_NOMATCH) return Ok{};
            if (rc != PCRE2_ERROR_MATCHLIMIT) return Fail("the regex failed at byte " + std::to_string(at) + ": " + Pcre2Message(rc));
        }
    };
    size_t position = 0;
    bool have_last = false;
    size_t last_end = 0;
    while (position <= text.size()) {
        size_t start = position, end = std::string_view::npos;
        for (;;) {
            if (Status s = match_at(start, &end); !s) return s;
            if (end != std::string_view::npos || start >= text.size()) break;
            start = next_character(start);
        }
        if (end == std::string_view::npos) break;
        if (end == start && have_last && last_end == end) {
            if (start >= text.size()) break;
            position = next_character(start);
            continue;
        }
        matches->emplace_back(start, end);
        have_last = true;
        last_end = end;
        position = end;
    }
    return Ok{};
}

}  // namespace model
