// Contents:
//   [SECTION] Aligned text: normalized bytes that remember their input bytes
//   [SECTION] What one text may cost
//   [SECTION] Growing text within the budget
//   [SECTION] Normalizers
//   [SECTION] Pre-tokenizers
//   [SECTION] Added tokens
//   [SECTION] Decoders
//   [SECTION] The tokenizer
//   [SECTION] Reading tokenizer.json
//
// The behaviour follows the Rust crate `tokenizers` (tokenizer/mod.rs, added_vocabulary.rs,
// normalizer.rs and the component folders); the test reference is HF's JavaScript port run on
// real files (tests/model/hf_tokenizer_reference.js).
#include "model/text/hf_tokenizer.h"

#include "model/io/files.h"
#include "model/text/regex.h"
#include "model/text/unicode.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cassert>
#include <optional>
#include <unordered_map>
#include <utility>

namespace model {
namespace {

using nlohmann::json;

//-----------------------------------------------------------------------------
// [SECTION] Aligned text: normalized bytes that remember their input bytes
//-----------------------------------------------------------------------------
// HF's NormalizedString keeps, for every normalized character, the range of the original text it
// came from. Here it is kept per byte: `from`/`to` is the input range of the unit a byte belongs
// to. Unchanged bytes are units of one byte; a replaced stretch (a space that became "▁", "ﬁ" that
// became "fi") is one unit over the input it replaced; inserted text (a prefix) is a unit with an
// empty range. Token boundaries map back through this (MapEnds) so tokens tile the input.

struct AlignedText {
    std::string text;
    std::vector<uint32_t> from, to;  // [N] input range of each byte's unit
    uint32_t origin = 0;             // input offset where this string's input starts (HF's offsets_original().0)

    size_t size() const { return text.size(); }
    bool empty() const { return text.empty(); }
    void Reserve(size_t bytes) {
        text.reserve(bytes);
        from.reserve(bytes);
        to.reserve(bytes);
    }

    void Copy(const AlignedText& src, size_t begin, size_t end) {
        text.append(src.text, begin, end - begin);
        from.insert(from.end(), src.from.begin() + begin, src.from.begin() + end);
        to.insert(to.end(), src.to.begin() + begin, src.to.begin() + end);
    }
    void Emit(std::string_view bytes, uint32_t unit_from, uint32_t unit_to) {
        text.append(bytes);
        from.insert(from.end(), bytes.size(), unit_from);
        to.insert(to.end(), bytes.size(), unit_to);
    }
    // The input range that [begin, end) of this text came from; an empty range at the point
    // `begin` stands for when the stretch is empty.
    std::pair<uint32_t, uint32_t> InputRange(size_t begin, size_t end) const {
        if (begin >= end) {
            const uint32_t at = begin < size() ? from[begin] : (empty() ? origin : to.back());
            return {at, at};
        }
        uint32_t lo = from[begin], hi = to[begin];
        for (size_t k = begin + 1; k < end; ++k) {
            lo = std::min(lo, from[k]);
            hi = std::max(hi, to[k]);
        }
        return {lo, hi};
    }
    AlignedText Slice(size_t begin, size_t end) const {
        AlignedText out;
        out.Copy(*this, begin, end);
        out.origin = begin < size() ? from[begin] : origin;
        return out;
    }
};

AlignedText Identity(std::string_view text, uint32_t offset) {
    AlignedText out;
    out.text.assign(text);
    out.from.resize(text.size());
    out.to.resize(text.size());
    for (size_t k = 0; k < text.size(); ++k) {
        out.from[k] = offset + static_cast<uint32_t>(k);
        out.to[k] = offset + static_cast<uint32_t>(k) + 1;
    }
    out.origin = offset;
    return out;
}

// Where the token boundaries `ends` (increasing positions in t, each in (0, N]) fall in the input.
// A boundary inside a unit splits the unit's input in proportion, so a character split across
// byte-level tokens gives each token its own bytes.
void MapEnds(const AlignedText& t, const std::vector<size_t>& ends, std::vector<int64_t>* out) {
    const size_t n = t.size();
    size_t unit_begin = 0, unit_end = 0;  // the unit last scanned
    const auto same = [&](size_t a, size_t b) { return t.from[a] == t.from[b] && t.to[a] == t.to[b]; };
    for (size_t q : ends) {
        if (q >= n) {
            out->push_back(n == 0 ? t.origin : t.to[n - 1]);
            continue;
        }
        if (!same(q - 1, q)) {
            out->push_back(t.to[q - 1]);
            continue;
        }
        if (!(q > unit_begin && q < unit_end)) {
            unit_begin = q - 1;
            while (unit_begin > 0 && same(unit_begin - 1, q)) --unit_begin;
            unit_end = q + 1;
            while (unit_end < n && same(unit_end, q)) ++unit_end;
        }
        const uint64_t input = t.to[q] - t.from[q];
        out->push_back(t.from[q] + static_cast<int64_t>((q - unit_begin) * input / (unit_end - unit_begin)));
    }
}

// A stretch of a text and whether it matched a pattern (HF's find_matches result).
struct Stretch {
    size_t begin, end;
    bool is_match;
};

std::vector<Stretch> StretchesFromMatches(size_t size, const std::vector<std::pair<size_t, size_t>>& matches) {
    std::vector<Stretch> out;
    if (size == 0) return {{0, 0, false}};
    size_t previous = 0;
    for (const auto& [b, e] : matches) {
        if (previous != b) out.push_back({previous, b, false});
        out.push_back({b, e, true});
        previous = e;
    }
    if (previous != size) out.push_back({previous, size, false});
    return out;
}

// Each character for which `predicate` holds is a match of its own (HF's Pattern for Fn(char)).
template <class Predicate>
std::vector<Stretch> StretchesFromCharacters(std::string_view text, Predicate predicate) {
    if (text.empty()) return {{0, 0, false}};
    std::vector<Stretch> out;
    size_t last = 0;
    for (size_t i = 0; i < text.size();) {
        uint32_t cp = 0;
        const size_t length = CodePointAt(text, i, &cp);
        if (predicate(cp)) {
            if (last < i) out.push_back({last, i, false});
            out.push_back({i, i + length, true});
            last = i + length;
        }
        i += length;
    }
    if (text.size() > last) out.push_back({last, text.size(), false});
    return out;
}

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// HF's NormalizedString::split: the pieces to keep, empty ones dropped.
void SplitText(const AlignedText& t, std::vector<Stretch> stretches, SplitBehavior behavior, std::vector<AlignedText>* out) {
    std::vector<Stretch> kept;  // is_match: remove
    switch (behavior) {
        case SplitBehavior::kIsolated:
            for (Stretch s : stretches) kept.push_back({s.begin, s.end, false});
            break;
        case SplitBehavior::kRemoved:
            kept = std::move(stretches);
            break;
        case SplitBehavior::kContiguous: {
            bool previous = false;
            for (const Stretch& s : stretches) {
                if (s.is_match == previous && !kept.empty()) kept.back().end = s.end;
                else kept.push_back({s.begin, s.end, false});
                previous = s.is_match;
            }
            break;
        }
        case SplitBehavior::kMergedWithPrevious: {
            bool previous = false;
            for (const Stretch& s : stretches) {
                if (s.is_match && !previous && !kept.empty()) kept.back().end = s.end;
                else kept.push_back({s.begin, s.end, false});
                previous = s.is_match;
            }
            break;
        }
        case SplitBehavior::kMergedWithNext: {
            bool previous = false;
            for (auto it = stretches.rbegin(); it != stretches.rend(); ++it) {
                if (it->is_match && !previous && !kept.empty()) kept.back().begin = it->begin;
                else kept.push_back({it->begin, it->end, false});
                previous = it->is_match;
            }
            std::reverse(kept.begin(), kept.end());
            break;
        }
    }
    for (const Stretch& s : kept)
        if (!s.is_match && s.end > s.begin) out->push_back(t.Slice(s.begin, s.end));
}

//-----------------------------------------------------------------------------
// [SECTION] What one text may cost
//-----------------------------------------------------------------------------
// A file's components run on text that came from outside, so what encoding one text (or one
// decode call) may cost is fixed by the size of what came in before any of them runs: the steps
// of every regex search (RegexBudget), and the bytes of text the steps hold, at most kMaxGrowth
// times the input + kGrowthSlack in all. A step that grows text checks the new size before it
// builds it (or as it does, a character at a time), so a hostile file is refused with the memory
// it took within that limit rather than after building what the limit forbids.

constexpr size_t kMaxGrowth = 16;
constexpr size_t kGrowthSlack = 4096;

class Budget {
public:
    static Budget ForText(size_t bytes) { return Budget(RegexBudget::ForText(bytes), bytes); }
    static Budget ForDecoding(size_t bytes) { return Budget(RegexBudget::ForDecoding(bytes), bytes); }

    RegexBudget regex;

    // Fails when a step would make the stretch being encoded hold `bytes` (its normalized text, or
    // its words in all) and that is more than the limit leaves it.
    Status Hold(size_t bytes) {
        if (bytes > Room())
            return Fail("makes the text more than " + std::to_string(kMaxGrowth) + " times longer (+ 4 KB) than the " +
                        FormatBytes(m_input) + " it came from");
        m_peak = std::max(m_peak, bytes);
        return Ok{};
    }
    size_t Room() const { return m_limit - m_used; }
    // A form of the text is done with (a stretch's normalized text, or the words of part of it):
    // the most it held counts against every form after it, so the forms together stay within the limit.
    void Spend() {
        m_used = std::min(m_limit, m_used + m_peak);
        m_peak = 0;
    }

private:
    Budget(RegexBudget regex_budget, size_t bytes) : regex(regex_budget), m_input(bytes), m_limit(kMaxGrowth * bytes + kGrowthSlack) {}
    size_t m_input, m_limit, m_used = 0, m_peak = 0;
};

//-----------------------------------------------------------------------------
// [SECTION] Growing text within the budget
//-----------------------------------------------------------------------------
// Each checks with the Budget first. `held`: the bytes the stretch's other words hold beside this
// one (0 for a normalizer, which has the stretch as one text).

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 become
// U+0100, U+0101, ... in byte order.
struct ByteTable {
    static constexpr uint32_t kEnd = 256 + 68;  // the characters that stand for bytes are all below this
    uint32_t byte_to_code_point[256];
    std::string byte_to_text[256];
    int16_t code_point_to_byte[kEnd];  // -1: not a byte's character

    ByteTable() {
        const auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
        std::fill(std::begin(code_point_to_byte), std::end(code_point_to_byte), int16_t{-1});
        uint32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            byte_to_code_point[b] = printable(b) ? static_cast<uint32_t>(b) : next++;
            AppendCodePoint(byte_to_code_point[b], &byte_to_text[b]);
            code_point_to_byte[byte_to_code_point[b]] = static_cast<int16_t>(b);
        }
        assert(next == kEnd);
    }
    int ByteOf(uint32_t cp) const { return cp < kEnd ? code_point_to_byte[cp] : -1; }
};

const ByteTable& Bytes() {
    static const ByteTable table;
    return table;
}

// `t` with each byte as its byte-level character, aligned to that byte's unit, into `out`.
Status ToByteLevel(const AlignedText& t, size_t held, Budget* budget, AlignedText* out) {
    size_t size = 0;
    for (char c : t.text) size += Bytes().byte_to_text[static_cast<uint8_t>(c)].size();
    if (Status s = budget->Hold(held + size); !s) return s;
    out->origin = t.origin;
    out->Reserve(size);
    for (size_t k = 0; k < t.size(); ++k) out->Emit(Bytes().byte_to_text[static_cast<uint8_t>(t.text[k])], t.from[k], t.to[k]);
    return Ok{};
}

// Every occurrence of `regex` replaced by `content` (HF's NormalizedString::replace).
Status ReplaceAll(const Regex& regex, const std::string& content, AlignedText* t, Budget* budget) {
    std::vector<std::pair<size_t, size_t>> matches;
    if (Status s = regex.FindAll(t->text, &budget->regex, &matches); !s) return s;
    if (matches.empty()) return Ok{};
    size_t size = t->size();
    for (const auto& [b, e] : matches) size += content.size() - (e - b);  // modular: right in the end
    if (Status s = budget->Hold(size); !s) return s;
    AlignedText out;
    out.origin = t->origin;
    out.Reserve(size);
    size_t last = 0;
    for (const auto& [b, e] : matches) {
        out.Copy(*t, last, b);
        const auto [lo, hi] = t->InputRange(b, e);
        out.Emit(content, lo, hi);
        last = e;
    }
    out.Copy(*t, last, t->size());
    *t = std::move(out);
    return Ok{};
}

Status PrependText(const std::string& prefix, AlignedText* t, size_t held, Budget* budget) {
    if (t->empty() || prefix.empty()) return Ok{};
    if (Status s = budget->Hold(held + prefix.size() + t->size()); !s) return s;
    AlignedText out;
    out.origin = t->origin;
    out.Reserve(prefix.size() + t->size());
    out.Emit(prefix, t->from[0], t->from[0]);
    out.Copy(*t, 0, t->size());
    *t = std::move(out);
    return Ok{};
}

// Rewrites each character by `map` (into the string it is given), aligned to that character. A
// character grows by a few bytes at most, so the size is checked as the text is built.
template <class Map>
Status MapCharacters(AlignedText* t, size_t held, Budget* budget, Map map) {
    AlignedText out;
    out.origin = t->origin;
    std::string replacement;
    const size_t room = budget->Room() - std::min(held, budget->Room());
    for (size_t i = 0; i < t->size();) {
        uint32_t cp = 0;
        const size_t length = CodePointAt(t->text, i, &cp);
        replacement.clear();
        map(cp, &replacement);
        if (replacement == std::string_view(t->text).substr(i, length)) {
            out.Copy(*t, i, i + length);
        } else if (!replacement.empty()) {
            const auto [lo, hi] = t->InputRange(i, i + length);
            out.Emit(replacement, lo, hi);
        }
        if (out.size() > room) return budget->Hold(held + out.size());
        i += length;
    }
    if (Status s = budget->Hold(held + out.size()); !s) return s;
    *t = std::move(out);
    return Ok{};
}

//-----------------------------------------------------------------------------
// [SECTION] Normalizers
//-----------------------------------------------------------------------------

// A normalizer, pre-tokenizer or decoder, as read from the file: each turns the data it is given
// (a stretch's text, its words, the tokens' strings) into what the next one takes, and what goes
// wrong in it names the field it was read from.
template <class DataType>
class Step {
public:
    using Data = DataType;
    explicit Step(std::string where) : m_where(std::move(where)) {}
    virtual ~Step() = default;
    Status Apply(DataType* data, Budget* budget) const {
        Status s = Run(data, budget);
        return s || m_where.empty() ? s : Fail(m_where + ": " + s.error());
    }

private:
    virtual Status Run(DataType* data, Budget* budget) const = 0;
    std::string m_where;  // "normalizer.normalizers[1]"; "" for a Sequence, whose parts name themselves
};

using Normalizer = Step<AlignedText>;
using PreTokenizer = Step<std::vector<AlignedText>>;
using Decoder = Step<std::vector<std::string>>;

// A Sequence of any of them: each part in turn.
template <class Data>
class SequenceStep final : public Step<Data> {
public:
    explicit SequenceStep(std::vector<std::unique_ptr<Step<Data>>> parts) : Step<Data>(""), m_parts(std::move(parts)) {}

private:
    Status Run(Data* data, Budget* budget) const override {
        for (const auto& part : m_parts)
            if (Status s = part->Apply(data, budget); !s) return s;
        return Ok{};
    }
    std::vector<std::unique_ptr<Step<Data>>> m_parts;
};

class UnicodeNormalizer final : public Normalizer {
public:
    UnicodeNormalizer(std::string where, NormalForm form) : Normalizer(std::move(where)), m_form(form) {}

private:
    Status Run(AlignedText* t, Budget* budget) const override {
        std::string normalized;
        std::vector<NormalizedSpan> spans;
        if (Status s = NormalizeUnicode(m_form, t->text, budget->Room(), &normalized, &spans); !s) return s;
        if (Status s = budget->Hold(normalized.size()); !s) return s;
        if (spans.size() == 1 && !spans[0].changed) return Ok{};
        AlignedText out;
        out.origin = t->origin;
        size_t in = 0, produced = 0;
        for (const NormalizedSpan& span : spans) {
            if (span.changed) {
                const auto [lo, hi] = t->InputRange(in, in + span.old_length);
                out.Emit(std::string_view(normalized).substr(produced, span.new_length), lo, hi);
            } else {
                out.Copy(*t, in, in + span.old_length);
            }
            in += span.old_length;
            produced += span.new_length;
        }
        *t = std::move(out);
        return Ok{};
    }
    NormalForm m_form;
};

class ReplaceNormalizer final : public Normalizer {
public:
    ReplaceNormalizer(std::string where, Regex pattern, std::string content)
        : Normalizer(std::move(where)), m_pattern(std::move(pattern)), m_content(std::move(content)) {}

private:
    Status Run(AlignedText* t, Budget* budget) const override { return ReplaceAll(m_pattern, m_content, t, budget); }
    Regex m_pattern;
    std::string m_content;
};

class PrependNormalizer final : public Normalizer {
public:
    PrependNormalizer(std::string where, std::string prefix) : Normalizer(std::move(where)), m_prefix(std::move(prefix)) {}

private:
    Status Run(AlignedText* t, Budget* budget) const override { return PrependText(m_prefix, t, 0, budget); }
    std::string m_prefix;
};

class StripNormalizer final : public Normalizer {
public:
    StripNormalizer(std::string where, bool left, bool right) : Normalizer(std::move(where)), m_left(left), m_right(right) {}

private:
    Status Run(AlignedText* t, Budget*) const override {
        size_t begin = 0, end = t->size();
        uint32_t cp = 0;
        while (m_left && begin < end) {
            const size_t length = CodePointAt(t->text, begin, &cp);
            if (!IsWhiteSpace(cp)) break;
            begin += length;
        }
        while (m_right && end > begin) {
            size_t start = end - 1;
            while (start > begin && (static_cast<uint8_t>(t->text[start]) & 0xC0) == 0x80) --start;
            CodePointAt(t->text, start, &cp);
            if (!IsWhiteSpace(cp)) break;
            end = start;
        }
        if (begin == 0 && end == t->size()) return Ok{};
        const uint32_t origin = t->origin;
        *t = t->Slice(begin, end);
        t->origin = origin;  // stripping does not move where HF says the string starts
        return Ok{};
    }
    bool m_left, m_right;
};

// Normalizers that rewrite each character on its own, by the maps in kCharacterNormalizers.
class CharacterNormalizer final : public Normalizer {
public:
    using Map = void (*)(uint32_t code_point, std::string* out);
    CharacterNormalizer(std::string where, Map map) : Normalizer(std::move(where)), m_map(map) {}

private:
    Status Run(AlignedText* t, Budget* budget) const override { return MapCharacters(t, 0, budget, m_map); }
    Map m_map;
};

void StripAccent(uint32_t cp, std::string* out) {
    if (!IsCombiningMark(cp)) AppendCodePoint(cp, out);
}

// HF's Nmt: some control characters removed, some kinds of space made spaces.
void NmtCharacter(uint32_t c, std::string* out) {
    if ((c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F || c == 0x8F || c == 0x9F) return;
    const bool space = c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 || (c >= 0x200B && c <= 0x200F) ||
                       c == 0x2028 || c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD;
    AppendCodePoint(space ? ' ' : c, out);
}

constexpr std::pair<const char*, CharacterNormalizer::Map> kCharacterNormalizers[] = {
    {"Lowercase", AppendLowercase}, {"StripAccents", StripAccent}, {"Nmt", NmtCharacter}};

class ByteLevelNormalizer final : public Normalizer {
public:
    using Normalizer::Normalizer;

private:
    Status Run(AlignedText* t, Budget* budget) const override {
        AlignedText out;
        if (Status s = ToByteLevel(*t, 0, budget, &out); !s) return s;
        *t = std::move(out);
        return Ok{};
    }
};

//-----------------------------------------------------------------------------
// [SECTION] Pre-tokenizers
//-----------------------------------------------------------------------------
// Each turns every split into the splits it makes of it (HF's PreTokenizedString::split), empty
// ones dropped.

class ByteLevelPreTokenizer final : public PreTokenizer {
public:
    ByteLevelPreTokenizer(std::string where, bool add_prefix_space, std::optional<Regex> regex)
        : PreTokenizer(std::move(where)), m_add_prefix_space(add_prefix_space), m_regex(std::move(regex)) {}

private:
    Status Run(std::vector<AlignedText>* splits, Budget* budget) const override {
        std::vector<AlignedText> out;
        std::vector<std::pair<size_t, size_t>> matches;
        std::vector<AlignedText> pieces;
        size_t held = 0;  // by `out`
        const auto add = [&](const AlignedText& piece) {
            out.emplace_back();
            Status s = ToByteLevel(piece, held, budget, &out.back());
            held += out.back().size();
            return s;
        };
        for (AlignedText& split : *splits) {
            if (m_add_prefix_space && split.text[0] != ' ') {
                if (Status s = PrependText(" ", &split, held, budget); !s) return s;
            }
            if (!m_regex) {
                if (Status s = add(split); !s) return s;
                continue;
            }
            if (Status s = m_regex->FindAll(split.text, &budget->regex, &matches); !s) return s;
            pieces.clear();
            SplitText(split, StretchesFromMatches(split.size(), matches), SplitBehavior::kIsolated, &pieces);
            for (const AlignedText& piece : pieces)
                if (Status s = add(piece); !s) return s;
        }
        *splits = std::move(out);
        return Ok{};
    }
    bool m_add_prefix_space;
    std::optional<Regex> m_regex;  // none: use_regex false
};

class SplitPreTokenizer final : public PreTokenizer {
public:
    SplitPreTokenizer(std::string where, Regex pattern, SplitBehavior behavior, bool invert)
        : PreTokenizer(std::move(where)), m_pattern(std::move(pattern)), m_behavior(behavior), m_invert(invert) {}

private:
    Status Run(std::vector<AlignedText>* splits, Budget* budget) const override {
        std::vector<AlignedText> out;
        std::vector<std::pair<size_t, size_t>> matches;
        for (const AlignedText& split : *splits) {
            if (Status s = m_pattern.FindAll(split.text, &budget->regex, &matches); !s) return s;
            std::vector<Stretch> stretches = StretchesFromMatches(split.size(), matches);
            if (m_invert)
                for (Stretch& s : stretches) s.is_match = !s.is_match;
            SplitText(split, std::move(stretches), m_behavior, &out);
        }
        *splits = std::move(out);
        return Ok{};
    }
    Regex m_pattern;
    SplitBehavior m_behavior;
    bool m_invert;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer final : public PreTokenizer {
public:
    MetaspacePreTokenizer(std::string where, uint32_t replacement, PrependScheme scheme, bool split)
        : PreTokenizer(std::move(where)), m_replacement(replacement), m_scheme(scheme), m_split(split) {
        AppendCodePoint(replacement, &m_text);
    }

private:
    Status Run(std::vector<AlignedText>* splits, Budget* budget) const override {
        std::vector<AlignedText> out;
        size_t held = 0;  // by `out`
        for (AlignedText& split : *splits) {
            const uint32_t origin = split.origin;
            Status s = MapCharacters(&split, held, budget, [&](uint32_t cp, std::string* o) {
                if (cp == ' ') *o += m_text;
                else AppendCodePoint(cp, o);
            });
            if (!s) return s;
            const bool starts = split.text.compare(0, m_text.size(), m_text) == 0;
            if (!starts && (m_scheme == PrependScheme::kAlways || (m_scheme == PrependScheme::kFirst && origin == 0))) {
                if (s = PrependText(m_text, &split, held, budget); !s) return s;
            }
            held += split.size();
            if (!m_split) {
                out.push_back(std::move(split));
                continue;
            }
            SplitText(split, StretchesFromCharacters(split.text, [&](uint32_t cp) { return cp == m_replacement; }),
                      SplitBehavior::kMergedWithNext, &out);
        }
        *splits = std::move(out);
        return Ok{};
    }
    uint32_t m_replacement;
    std::string m_text;
    PrependScheme m_scheme;
    bool m_split;
};

class DigitsPreTokenizer final : public PreTokenizer {
public:
    DigitsPreTokenizer(std::string where, bool individual) : PreTokenizer(std::move(where)), m_individual(individual) {}

private:
    Status Run(std::vector<AlignedText>* splits, Budget*) const override {
        std::vector<AlignedText> out;
        for (const AlignedText& split : *splits)
            SplitText(split, StretchesFromCharacters(split.text, IsNumeric),
                      m_individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, &out);
        *splits = std::move(out);
        return Ok{};
    }
    bool m_individual;
};

//-----------------------------------------------------------------------------
// [SECTION] Added tokens
//-----------------------------------------------------------------------------
// Tokens the file adds to the model's vocabulary (special ones included) are found in the text
// before anything else: first those matched in the raw text (normalized: false), then, in each
// normalized stretch between them, those matched after normalization. Matching is
// leftmost-longest, as HF's Aho-Corasick automaton does it.

struct AddedToken {
    int32_t id = 0;
    std::string content;
    bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

struct Section {
    size_t begin, end;
    int32_t token;  // index into the added tokens, -1 for text between them
};

class AddedTokenMatcher {
public:
    void Add(std::string_view pattern, int32_t token) {
        int32_t node = 0;
        if (m_nodes.empty()) m_nodes.push_back(-1);
        for (char c : pattern) {
            const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
            const auto [it, inserted] = m_children.emplace(key, static_cast<int32_t>(m_nodes.size()));
            if (inserted) m_nodes.push_back(-1);
            node = it->second;
        }
        m_nodes[node] = token;
    }

    // HF's AddedVocabulary::find_matches.
    std::vector<Section> Find(std::string_view s, const std::vector<AddedToken>& tokens) const {
        if (m_nodes.empty()) return {{0, s.size(), -1}};
        std::vector<Section> out;
        size_t start_offset = 0;
        for (size_t i = 0; i < s.size();) {
            int32_t node = 0, found = -1;
            size_t found_end = 0;
            for (size_t k = i; k < s.size(); ++k) {
                const auto it = m_children.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(s[k]));
                if (it == m_children.end()) break;
                node = it->second;
                if (m_nodes[node] >= 0) {
                    found = m_nodes[node];
                    found_end = k + 1;
                }
            }
            if (found < 0) {
                ++i;
                continue;
            }
            size_t start = i, stop = found_end;
            i = found_end;
            const AddedToken& token = tokens[found];
            if (token.single_word) {
                const bool start_space = start == 0 || !EndsWithWord(s.substr(0, start));
                const bool stop_space = stop == s.size() || !StartsWithWord(s.substr(stop));
                if (!start_space || !stop_space) continue;
            }
            if (token.lstrip) start = std::max(SpacesStartAtEnd(s.substr(0, start)), start_offset);
            if (token.rstrip) stop += SpacesAtStart(s.substr(stop));
            if (start < start_offset) continue;  // inside what an rstrip before it took
            if (start_offset < start) out.push_back({start_offset, start, -1});
            out.push_back({start, stop, found});
            start_offset = stop;
        }
        if (start_offset != s.size()) out.push_back({start_offset, s.size(), -1});
        if (s.empty()) out.push_back({0, 0, -1});
        return out;
    }

private:
    static bool StartsWithWord(std::string_view s) {
        uint32_t cp = 0;
        return !s.empty() && (CodePointAt(s, 0, &cp), IsWordCharacter(cp));
    }
    static bool EndsWithWord(std::string_view s) {
        size_t start = s.size() - 1;
        while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
        uint32_t cp = 0;
        CodePointAt(s, start, &cp);
        return IsWordCharacter(cp);
    }
    static size_t SpacesAtStart(std::string_view s) {
        size_t at = 0;
        uint32_t cp = 0;
        while (at < s.size()) {
            const size_t length = CodePointAt(s, at, &cp);
            if (!IsWhiteSpace(cp)) break;
            at += length;
        }
        return at;
    }
    static size_t SpacesStartAtEnd(std::string_view s) {
        size_t at = s.size();
        uint32_t cp = 0;
        while (at > 0) {
            size_t start = at - 1;
            while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
            CodePointAt(s, start, &cp);
            if (!IsWhiteSpace(cp)) break;
            at = start;
        }
        return at;
    }

    std::unordered_map<uint64_t, int32_t> m_children;  // (node, byte) -> node
    std::vector<int32_t> m_nodes;                       // [nodes] token ending here, -1 for none
};

//-----------------------------------------------------------------------------
// [SECTION] Decoders
//-----------------------------------------------------------------------------
// As HF's, on each token's text; but bytes are kept as they are where HF would turn a character
// split across tokens into U+FFFD, so decoding one token gives its raw bytes (GPT-2's pieces of an
// emoji, a <0xF0> byte piece) and decoding them all still joins them into the character.

class ByteLevelDecoder final : public Decoder {
public:
    using Decoder::Decoder;

private:
    Status Run(std::vector<std::string>* tokens, Budget*) const override {
        std::string bytes;
        for (const std::string& token : *tokens) {
            const size_t mark = bytes.size();
            bool all = true;
            for (size_t i = 0; i < token.size() && all;) {
                uint32_t cp = 0;
                i += CodePointAt(token, i, &cp);
                const int byte = Bytes().ByteOf(cp);
                all = byte >= 0;
                if (all) bytes.push_back(static_cast<char>(byte));
            }
            if (!all) {
                bytes.resize(mark);
                bytes += token;
            }
        }
        *tokens = {std::move(bytes)};
        return Ok{};
    }
};

class MetaspaceDecoder final : public Decoder {
public:
    MetaspaceDecoder(std::string where, uint32_t replacement, PrependScheme scheme)
        : Decoder(std::move(where)), m_replacement(replacement), m_scheme(scheme) {}

private:
    Status Run(std::vector<std::string>* tokens, Budget*) const override {
        for (size_t t = 0; t < tokens->size(); ++t) {
            std::string& token = (*tokens)[t];
            std::string out;
            for (size_t i = 0; i < token.size();) {
                uint32_t cp = 0;
                const size_t length = CodePointAt(token, i, &cp);
                if (cp != m_replacement) out.append(token, i, length);
                else if (t != 0 || m_scheme == PrependScheme::kNever) out += ' ';
                i += length;
            }
            token = std::move(out);
        }
        return Ok{};
    }
    uint32_t m_replacement;
    PrependScheme m_scheme;
};

class ByteFallbackDecoder final : public Decoder {
public:
    using Decoder::Decoder;

private:
    Status Run(std::vector<std::string>* tokens, Budget*) const override {
        std::vector<std::string> out;
        std::string bytes;
        for (std::string& token : *tokens) {
            int byte = -1;
            if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>') byte = ParseHexByte(token[3], token[4]);
            if (byte >= 0) {
                bytes.push_back(static_cast<char>(byte));
                continue;
            }
            if (!bytes.empty()) out.push_back(std::move(bytes));
            bytes.clear();
            out.push_back(std::move(token));
        }
        if (!bytes.empty()) out.push_back(std::move(bytes));
        *tokens = std::move(out);
        return Ok{};
    }
    // Rust's u8::from_str_radix(.., 16) on the two characters: hex digits, or '+' and one digit.
    static int ParseHexByte(char a, char b) {
        const auto digit = [](char c) {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            return -1;
        };
        if (a == '+') return digit(b);
        return digit(a) < 0 || digit(b) < 0 ? -1 : digit(a) * 16 + digit(b);
    }
};

class FuseDecoder final : public Decoder {
public:
    using Decoder::Decoder;

private:
    Status Run(std::vector<std::string>* tokens, Budget*) const override {
        std::string joined;
        for (const std::string& token : *tokens) joined += token;
        *tokens = {std::move(joined)};
        return Ok{};
    }
};

class StripDecoder final : public Decoder {
public:
    StripDecoder(std::string where, uint32_t content, size_t start, size_t stop)
        : Decoder(std::move(where)), m_content(content), m_start(start), m_stop(stop) {}

private:
    Status Run(std::vector<std::string>* tokens, Budget*) const override {
        for (std::string& token : *tokens) {
            std::vector<std::pair<size_t, uint32_t>> chars;  // (offset, code point)
            for (size_t i = 0; i < token.size();) {
                uint32_t cp = 0;
                const size_t length = CodePointAt(token, i, &cp);
                chars.emplace_back(i, cp);
                i += length;
            }
            size_t start_cut = 0, stop_cut = chars.size();
            for (size_t i = 0; i < m_start && i < chars.size() && chars[i].second == m_content; ++i) start_cut = i + 1;
            for (size_t i = 0; i < m_stop && i < chars.size() && chars[chars.size() - 1 - i].second == m_content; ++i)
                stop_cut = chars.size() - 1 - i;
            if (stop_cut <= start_cut) {
                token.clear();
                continue;
            }
            const size_t begin = chars[start_cut].first, end = stop_cut < chars.size() ? chars[stop_cut].first : token.size();
            token = token.substr(begin, end - begin);
        }
        return Ok{};
    }
    uint32_t m_content;
    size_t m_start, m_stop;
};

class ReplaceDecoder final : public Decoder {
public:
    ReplaceDecoder(std::string where, Regex pattern, std::string content)
        : Decoder(std::move(where)), m_pattern(std::move(pattern)), m_content(std::move(content)) {}

private:
    Status Run(std::vector<std::string>* tokens, Budget* budget) const override {
        std::vector<std::pair<size_t, size_t>> matches;
        size_t held = 0;  // by all the tokens
        for (const std::string& token : *tokens) held += token.size();
        for (std::string& token : *tokens) {
            if (Status s = m_pattern.FindAll(token, &budget->regex, &matches); !s) return s;
            if (matches.empty()) continue;
            size_t size = token.size();
            for (const auto& [b, e] : matches) size += m_content.size() - (e - b);  // modular: right in the end
            if (Status s = budget->Hold(held - token.size() + size); !s) return s;
            held += size - token.size();
            std::string out;
            out.reserve(size);
            size_t last = 0;
            for (const auto& [b, e] : matches) {
                out.append(token, last, b - last);
                out += m_content;
                last = e;
            }
            out.append(token, last, std::string::npos);
            token = std::move(out);
        }
        return Ok{};
    }
    Regex m_pattern;
    std::string m_content;
};

//-----------------------------------------------------------------------------
// [SECTION] The tokenizer
//-----------------------------------------------------------------------------

constexpr size_t kMaxTextBytes = size_t{1} << 30;  // alignment offsets are 32-bit

struct Pipeline {
    std::string kind;                            // Tokenizer::Kind()
    std::string source;                          // file name for messages
    std::unique_ptr<BpeModel> model;
    std::unique_ptr<Normalizer> normalizer;      // null: none
    std::unique_ptr<PreTokenizer> pre_tokenizer; // null: the whole stretch is one word
    std::unique_ptr<Decoder> decoder;            // null: tokens joined with spaces, as HF does
    std::vector<AddedToken> added;               // one per id, as HF keeps them
    std::unordered_map<int32_t, int32_t> added_by_id;  // id -> index into `added`
    AddedTokenMatcher raw_matcher, normalized_matcher;
    std::vector<int32_t> prefix, suffix;         // the post-processor's ids around the text
    size_t vocab_size = 0;
    uint64_t content_hash = kHashSeed;           // of everything above that decides the ids
};

class HfTokenizer final : public Tokenizer {
public:
    explicit HfTokenizer(Pipeline pipeline) : m(std::move(pipeline)) {}

    Result<Tokenization> Encode(std::string_view text) const override;
    Result<std::string> Decode(const std::vector<int32_t>& ids) const override;
    size_t VocabSize() const override { return m.vocab_size; }
    std::string Kind() const override { return m.kind; }
    uint64_t ContentHash() const override { return m.content_hash; }
    int BytePiece(int32_t id) const override { return m.added_by_id.count(id) || !m.model ? -1 : m.model->BytePiece(id); }

private:
    struct Produced {
        int32_t id;
        int64_t end;  // input offset where the token ends, -1 when it comes from no input
    };
    Status EncodeStretch(std::string_view text, size_t begin, size_t end, Budget* budget, std::vector<Produced>* out) const;
    Status EncodeWords(const AlignedText& stretch, Budget* budget, std::vector<Produced>* out) const;

    Pipeline m;
};

Status HfTokenizer::EncodeWords(const AlignedText& stretch, Budget* budget, std::vector<Produced>* out) const {
    std::vector<AlignedText> words = {stretch};
    if (m.pre_tokenizer) {
        if (Status s = m.pre_tokenizer->Apply(&words, budget); !s) return Fail(m.source + ": " + s.error());
        budget->Spend();
    }
    std::vector<BpeModel::Piece> pieces;
    std::vector<size_t> ends;
    std::vector<int64_t> input_ends;
    for (const AlignedText& word : words) {
        pieces.clear();
        if (Status s = m.model->Tokenize(word.text, &pieces); !s)
            return Fail("tokenizing the word at byte " + std::to_string(word.origin) + " of the text: " + s.error());
        ends.clear();
        input_ends.clear();
        size_t at = 0;
        for (const BpeModel::Piece& p : pieces) ends.push_back(at += p.length);
        MapEnds(word, ends, &input_ends);
        for (size_t k = 0; k < pieces.size(); ++k) out->push_back({pieces[k].id, input_ends[k]});
    }
    return Ok{};
}

Status HfTokenizer::EncodeStretch(std::string_view text, size_t begin, size_t end, Budget* budget, std::vector<Produced>* out) const {
    AlignedText stretch = Identity(text.substr(begin, end - begin), static_cast<uint32_t>(begin));
    if (m.normalizer) {
        if (Status s = m.normalizer->Apply(&stretch, budget); !s) return Fail(m.source + ": " + s.error());
        budget->Spend();
    }
    if (stretch.empty()) return Ok{};
    for (const Section& section : m.normalized_matcher.Find(stretch.text, m.added)) {
        if (section.token >= 0) {
            std::vector<int64_t> input_end;
            MapEnds(stretch, {section.end}, &input_end);
            out->push_back({m.added[section.token].id, input_end[0]});
            continue;
        }
        if (section.end == section.begin) continue;
        if (Status s = EncodeWords(stretch.Slice(section.begin, section.end), budget, out); !s) return s;
    }
    return Ok{};
}

Result<Tokenization> HfTokenizer::Encode(std::string_view text) const {
    if (const size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos)
        return Fail("text is not valid UTF-8 at byte " + std::to_string(bad));
    Tokenization out;
    if (text.empty()) return out;
    if (text.size() > kMaxTextBytes) return Fail("text is " + FormatBytes(text.size()) + ", more than the 1 GB a tokenizer takes");

    Budget budget = Budget::ForText(text.size());  // one for the whole text, however it is split
    std::vector<Produced> produced;
    for (int32_t id : m.prefix) produced.push_back({id, -1});
    for (const Section& section : m.raw_matcher.Find(text, m.added)) {
        if (section.token >= 0) {
            produced.push_back({m.added[section.token].id, static_cast<int64_t>(section.end)});
            continue;
        }
        if (section.end == section.begin) continue;
        if (Status s = EncodeStretch(text, section.begin, section.end, &budget, &produced); !s) return Fail(s.error());
    }
    for (int32_t id : m.suffix) produced.push_back({id, -1});

    // Tokens tile the input: each starts where the one before ended, input bytes no token took (a
    // stripped space) go to the token after them, and the last token from the input ends at its end.
    int64_t last_from_input = -1;
    for (size_t k = 0; k < produced.size(); ++k)
        if (produced[k].end >= 0) last_from_input = static_cast<int64_t>(k);
    if (last_from_input < 0) return Fail("the text gives no tokens: " + m.source + " removes or drops every character of it");
    size_t position = 0;
    out.ids.reserve(produced.size());
    for (size_t k = 0; k < produced.size(); ++k) {
        const size_t begin = position;
        size_t end = begin;
        if (static_cast<int64_t>(k) == last_from_input) end = text.size();
        else if (produced[k].end >= 0) end = std::max(begin, std::min(text.size(), static_cast<size_t>(produced[k].end)));
        out.ids.push_back(produced[k].id);
        out.pieces.emplace_back(text.substr(begin, end - begin));
        out.offsets.emplace_back(begin, end);
        position = end;
    }
    return out;
}

// Ids that are neither added tokens nor in the model's vocabulary are skipped, as HF skips them.
Result<std::string> HfTokenizer::Decode(const std::vector<int32_t>& ids) const {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    size_t bytes = 0;
    for (int32_t id : ids) {
        if (const auto it = m.added_by_id.find(id); it != m.added_by_id.end()) tokens.push_back(m.added[it->second].content);
        else if (const std::string* token = m.model->TokenOf(id)) tokens.push_back(*token);
        else continue;
        bytes += tokens.back().size();
    }
    std::string text;
    if (!m.decoder) {
        for (size_t k = 0; k < tokens.size(); ++k) text += (k ? " " : "") + tokens[k];
        return text;
    }
    Budget budget = Budget::ForDecoding(bytes);  // one per call: decoding an id at a time costs each id its own bytes' worth
    if (Status s = m.decoder->Apply(&tokens, &budget); !s) return Fail(m.source + ": " + s.error());
    for (const std::string& token : tokens) text += token;
    return text;
}

//-----------------------------------------------------------------------------
// [SECTION] Reading tokenizer.json
//-----------------------------------------------------------------------------
// Every field is checked for its type; `where` names the field ("normalizer.normalizers[1]") and
// values from the file are escaped and cut in messages.

std::string Child(const std::string& where, const std::string& key) { return where.empty() ? key : where + "." + key; }
std::string Index(const std::string& where, size_t i) { return where + "[" + std::to_string(i) + "]"; }

const json* Find(const json& object, const char* key) {
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
}

Result<bool> ReadBool(const json& object, const char* key, const std::string& where, std::optional<bool> fallback) {
    const json* v = Find(object, key);
    if (!v) {
        if (fallback) return *fallback;
        return Fail(Child(where, key) + " is missing");
    }
    if (!v->is_boolean()) return Fail(Child(where, key) + " is " + DescribeJson(*v) + ", not true or false");
    return v->get<bool>();
}

Result<std::string> ReadString(const json& object, const char* key, const std::string& where) {
    const json* v = Find(object, key);
    if (!v) return Fail(Child(where, key) + " is missing");
    if (!v->is_string()) return Fail(Child(where, key) + " is " + DescribeJson(*v) + ", not a string");
    if (FindInvalidUtf8(v->get_ref<const std::string&>()) != std::string::npos) return Fail(Child(where, key) + " is not valid UTF-8");
    return v->get<std::string>();
}

Result<int64_t> ReadInteger(const json& value, const std::string& where, int64_t max) {
    const bool ok = value.is_number_unsigned() ? value.get<uint64_t>() <= static_cast<uint64_t>(max)
                                               : value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() <= max;
    if (!ok) return Fail(where + " is " + DescribeJson(value) + ", not an integer in [0, " + std::to_string(max) + "]");
    return value.get<int64_t>();
}

Result<int32_t> ReadId(const json& value, const std::string& where) {
    auto v = ReadInteger(value, where, kMaxTokenId - 1);
    if (!v) return Fail(v.error());
    return static_cast<int32_t>(*v);
}

// A one-character string (Metaspace's replacement, Strip's content).
Result<uint32_t> ReadCharacter(const json& object, const char* key, const std::string& where) {
    auto s = ReadString(object, key, where);
    if (!s) return Fail(s.error());
    uint32_t cp = 0;
    if (s->empty() || CodePointAt(*s, 0, &cp) != s->size()) return Fail(Child(where, key) + " must be one character");
    return cp;
}

Result<std::string> ReadType(const json& value, const std::string& where) {
    if (!value.is_object()) return Fail(where + " is " + DescribeJson(value) + ", not an object");
    const json* type = Find(value, "type");
    if (!type || !type->is_string()) return Fail(where + " has no \"type\"");
    return type->get<std::string>();
}

Error Unsupported(const std::string& where, const std::string& type, const char* supported) {
    return Fail(where + ": type '" + EscapeForMessage(type, 60) + "' is not supported (ssaviz runs " + supported + ")");
}

// {"String": "..."} or {"Regex": "..."}, as Split and Replace spell their pattern.
Result<Regex> ReadPattern(const json& object, const std::string& where, bool invalid_utf8) {
    const json* pattern = Find(object, "pattern");
    const std::string field = Child(where, "pattern");
    if (!pattern || !pattern->is_object() || pattern->size() != 1)
        return Fail(field + " must be {\"String\": ...} or {\"Regex\": ...}");
    const auto read = [&](const char* key) { return ReadString(*pattern, key, field); };
    if (pattern->contains("String")) {
        auto s = read("String");
        if (!s) return Fail(s.error());
        auto r = Regex::Literal(*s, invalid_utf8);
        if (!r) return Fail(field + ": " + r.error());
        return r;
    }
    if (pattern->contains("Regex")) {
        auto s = read("Regex");
        if (!s) return Fail(s.error());
        auto r = Regex::Compile(*s, Regex::Dialect::kOniguruma, invalid_utf8);
        if (!r) return Fail(field + ": " + r.error());
        return r;
    }
    return Fail(field + " must be {\"String\": ...} or {\"Regex\": ...}");
}

// Metaspace's prepend_scheme, from it or from the older add_prefix_space.
Result<PrependScheme> ReadPrependScheme(const json& object, const std::string& where) {
    PrependScheme scheme = PrependScheme::kAlways;
    if (const json* v = Find(object, "prepend_scheme")) {
        const std::string s = v->is_string() ? v->get<std::string>() : "";
        if (s == "always") scheme = PrependScheme::kAlways;
        else if (s == "first") scheme = PrependScheme::kFirst;
        else if (s == "never") scheme = PrependScheme::kNever;
        else return Fail(Child(where, "prepend_scheme") + " is " + DescribeJson(*v) + ", not \"always\", \"first\" or \"never\"");
    }
    auto add_prefix_space = ReadBool(object, "add_prefix_space", where, true);
    if (!add_prefix_space) return Fail(add_prefix_space.error());
    if (!*add_prefix_space) {
        if (Find(object, "prepend_scheme") && scheme != PrependScheme::kNever)
            return Fail(where + ": add_prefix_space does not match prepend_scheme");
        scheme = PrependScheme::kNever;
    }
    return scheme;
}

// A Replace (its pattern and content), as a normalizer or a decoder.
template <class Part, class Replace>
Result<std::unique_ptr<Part>> ReadReplace(const json& value, const std::string& where, bool invalid_utf8) {
    auto pattern = ReadPattern(value, where, invalid_utf8);
    if (!pattern) return Fail(pattern.error());
    auto content = ReadString(value, "content", where);
    if (!content) return Fail(content.error());
    return std::unique_ptr<Part>(std::make_unique<Replace>(where, std::move(*pattern), std::move(*content)));
}

constexpr const char* kNormalizers = "NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Strip, StripAccents, Nmt, ByteLevel and Sequence";

// A Sequence's parts (its "normalizers", "pretokenizers" or "decoders"), each read by `read`.
template <class Part, class Read>
Result<std::unique_ptr<Part>> ReadSequence(const json& value, const char* key, const std::string& where, Read read) {
    const json* list = Find(value, key);
    if (!list || !list->is_array()) return Fail(Child(where, key) + " is not an array");
    std::vector<std::unique_ptr<Part>> parts;
    for (size_t i = 0; i < list->size(); ++i) {
        auto part = read((*list)[i], Index(Child(where, key), i));
        if (!part) return Fail(part.error());
        parts.push_back(std::move(*part));
    }
    return std::unique_ptr<Part>(std::make_unique<SequenceStep<typename Part::Data>>(std::move(parts)));
}

Result<std::unique_ptr<Normalizer>> ReadNormalizer(const json& value, const std::string& where) {
    auto type = ReadType(value, where);
    if (!type) return Fail(type.error());
    const std::string& t = *type;
    if (t == "Sequence") return ReadSequence<Normalizer>(value, "normalizers", where, ReadNormalizer);
    for (const auto& [name, form] : {std::pair<const char*, NormalForm>{"NFC", NormalForm::kNFC},
                                     {"NFD", NormalForm::kNFD},
                                     {"NFKC", NormalForm::kNFKC},
                                     {"NFKD", NormalForm::kNFKD}})
        if (t == name) return std::unique_ptr<Normalizer>(std::make_unique<UnicodeNormalizer>(where, form));
    for (const auto& [name, map] : kCharacterNormalizers)
        if (t == name) return std::unique_ptr<Normalizer>(std::make_unique<CharacterNormalizer>(where, map));
    if (t == "ByteLevel") return std::unique_ptr<Normalizer>(std::make_unique<ByteLevelNormalizer>(where));
    if (t == "Replace") return ReadReplace<Normalizer, ReplaceNormalizer>(value, where, false);
    if (t == "Prepend") {
        auto prefix = ReadString(value, "prepend", where);
        if (!prefix) return Fail(prefix.error());
        return std::unique_ptr<Normalizer>(std::make_unique<PrependNormalizer>(where, std::move(*prefix)));
    }
    if (t == "Strip") {
        auto left = ReadBool(value, "strip_left", where, std::nullopt);
        if (!left) return Fail(left.error());
        auto right = ReadBool(value, "strip_right", where, std::nullopt);
        if (!right) return Fail(right.error());
        return std::unique_ptr<Normalizer>(std::make_unique<StripNormalizer>(where, *left, *right));
    }
    return Unsupported(where, t, kNormalizers);
}

// The ByteLevel pre-tokenizer's regex, HF's, with Oniguruma's \s.
constexpr const char* kByteLevelRegex = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

Result<SplitBehavior> ReadBehavior(const json& object, const std::string& where) {
    auto s = ReadString(object, "behavior", where);
    if (!s) return Fail(s.error());
    if (*s == "Removed") return SplitBehavior::kRemoved;
    if (*s == "Isolated") return SplitBehavior::kIsolated;
    if (*s == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
    if (*s == "MergedWithNext") return SplitBehavior::kMergedWithNext;
    if (*s == "Contiguous") return SplitBehavior::kContiguous;
    return Fail(Child(where, "behavior") + " '" + EscapeForMessage(*s, 40) +
                "' is not Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
}

Result<std::unique_ptr<PreTokenizer>> ReadPreTokenizer(const json& value, const std::string& where) {
    auto type = ReadType(value, where);
    if (!type) return Fail(type.error());
    const std::string& t = *type;
    if (t == "Sequence") return ReadSequence<PreTokenizer>(value, "pretokenizers", where, ReadPreTokenizer);
    if (t == "ByteLevel") {
        // trim_offsets moves HF's offsets only; ssaviz's tile the text whatever it says.
        auto add_prefix_space = ReadBool(value, "add_prefix_space", where, std::nullopt);
        if (!add_prefix_space) return Fail(add_prefix_space.error());
        auto trim_offsets = ReadBool(value, "trim_offsets", where, true);
        if (!trim_offsets) return Fail(trim_offsets.error());
        auto use_regex = ReadBool(value, "use_regex", where, true);
        if (!use_regex) return Fail(use_regex.error());
        std::optional<Regex> regex;
        if (*use_regex) {
            auto r = Regex::Compile(kByteLevelRegex, Regex::Dialect::kOniguruma);
            if (!r) return Fail(where + ": " + r.error());
            regex = std::move(*r);
        }
        return std::unique_ptr<PreTokenizer>(std::make_unique<ByteLevelPreTokenizer>(where, *add_prefix_space, std::move(regex)));
    }
    if (t == "Split") {
        auto pattern = ReadPattern(value, where, false);
        if (!pattern) return Fail(pattern.error());
        auto behavior = ReadBehavior(value, where);
        if (!behavior) return Fail(behavior.error());
        auto invert = ReadBool(value, "invert", where, std::nullopt);
        if (!invert) return Fail(invert.error());
        return std::unique_ptr<PreTokenizer>(std::make_unique<SplitPreTokenizer>(where, std::move(*pattern), *behavior, *invert));
    }
    if (t == "Metaspace") {
        auto replacement = ReadCharacter(value, "replacement", where);
        if (!replacement) return Fail(replacement.error());
        auto scheme = ReadPrependScheme(value, where);
        if (!scheme) return Fail(scheme.error());
        auto split = ReadBool(value, "split", where, true);
        if (!split) return Fail(split.error());
        return std::unique_ptr<PreTokenizer>(std::make_unique<MetaspacePreTokenizer>(where, *replacement, *scheme, *split));
    }
    if (t == "Digits") {
        auto individual = ReadBool(value, "individual_digits", where, std::nullopt);
        if (!individual) return Fail(individual.error());
        return std::unique_ptr<PreTokenizer>(std::make_unique<DigitsPreTokenizer>(where, *individual));
    }
    return Unsupported(where, t, "ByteLevel, Split, Metaspace, Digits and Sequence");
}

Result<std::unique_ptr<Decoder>> ReadDecoder(const json& value, const std::string& where) {
    auto type = ReadType(value, where);
    if (!type) return Fail(type.error());
    const std::string& t = *type;
    if (t == "Sequence") return ReadSequence<Decoder>(value, "decoders", where, ReadDecoder);
    if (t == "ByteLevel") return std::unique_ptr<Decoder>(std::make_unique<ByteLevelDecoder>(where));
    if (t == "ByteFallback") return std::unique_ptr<Decoder>(std::make_unique<ByteFallbackDecoder>(where));
    if (t == "Fuse") return std::unique_ptr<Decoder>(std::make_unique<FuseDecoder>(where));
    if (t == "Metaspace") {
        auto replacement = ReadCharacter(value, "replacement", where);
        if (!replacement) return Fail(replacement.error());
        auto scheme = ReadPrependScheme(value, where);
        if (!scheme) return Fail(scheme.error());
        return std::unique_ptr<Decoder>(std::make_unique<MetaspaceDecoder>(where, *replacement, *scheme));
    }
    if (t == "Strip") {
        auto content = ReadCharacter(value, "content", where);
        if (!content) return Fail(content.error());
        int64_t counts[2] = {0, 0};
        const char* keys[2] = {"start", "stop"};
        for (int k = 0; k < 2; ++k) {
            const json* v = Find(value, keys[k]);
            if (!v) return Fail(Child(where, keys[k]) + " is missing");
            auto n = ReadInteger(*v, Child(where, keys[k]), kMaxTokenId);
            if (!n) return Fail(n.error());
            counts[k] = *n;
        }
        return std::unique_ptr<Decoder>(std::make_unique<StripDecoder>(where, *content, static_cast<size_t>(counts[0]), static_cast<size_t>(counts[1])));
    }
    if (t == "Replace") return ReadReplace<Decoder, ReplaceDecoder>(value, where, true);  // a decoder sees raw bytes
    return Unsupported(where, t, "ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace and Sequence");
}

// A ["token", id] pair (RobertaProcessing's and BertProcessing's cls and sep).
Result<int32_t> ReadTokenPair(const json& object, const char* key, const std::string& where) {
    const json* v = Find(object, key);
    if (!v || !v->is_array() || v->size() != 2 || !(*v)[0].is_string())
        return Fail(Child(where, key) + " must be [\"token\", id]");
    return ReadId((*v)[1], Index(Child(where, key), 1));
}

// The ids the post-processor puts before and after the text (the single template: ssaviz
// tokenizes one text).
constexpr size_t kMaxPostProcessorTokens = 1024;

// What the post-processors add, checked as they are read (not once all are: a Sequence of a
// hundred thousand templates was read, each inserted at the front, in quadratic time).
Status CheckPostProcessorTokens(size_t count) {
    if (count <= kMaxPostProcessorTokens) return Ok{};
    return Fail("post_processor: adds more than " + std::to_string(kMaxPostProcessorTokens) + " tokens to a text");
}

Status ReadPostProcessor(const json& value, const std::string& where, std::vector<int32_t>* prefix, std::vector<int32_t>* suffix) {
    auto type = ReadType(value, where);
    if (!type) return Fail(type.error());
    const std::string& t = *type;
    if (t == "ByteLevel") return Ok{};  // offsets only
    if (t == "Sequence") {
        const json* list = Find(value, "processors");
        if (!list || !list->is_array()) return Fail(Child(where, "processors") + " is not an array");
        for (size_t i = 0; i < list->size(); ++i) {
            std::vector<int32_t> p, s;
            if (Status st = ReadPostProcessor((*list)[i], Index(Child(where, "processors"), i), &p, &s); !st) return st;
            prefix->insert(prefix->begin(), p.begin(), p.end());  // a later processor wraps what came before
            suffix->insert(suffix->end(), s.begin(), s.end());
            if (Status st = CheckPostProcessorTokens(prefix->size() + suffix->size()); !st) return st;
        }
        return Ok{};
    }
    if (t == "RobertaProcessing" || t == "BertProcessing") {
        auto cls = ReadTokenPair(value, "cls", where);
        if (!cls) return Fail(cls.error());
        auto sep = ReadTokenPair(value, "sep", where);
        if (!sep) return Fail(sep.error());
        prefix->insert(prefix->begin(), *cls);
        suffix->push_back(*sep);
        return Ok{};
    }
    if (t == "TemplateProcessing") {
        const json* single = Find(value, "single");
        const std::string single_where = Child(where, "single");
        if (!single || !single->is_array()) return Fail(single_where + " is not an array");
        const json* specials = Find(value, "special_tokens");
        if (specials && !specials->is_object()) return Fail(Child(where, "special_tokens") + " is not an object");
        std::vector<int32_t> before, after;
        bool seen_a = false;
        for (size_t i = 0; i < single->size(); ++i) {
            const json& piece = (*single)[i];
            const std::string piece_where = Index(single_where, i);
            if (!piece.is_object() || piece.size() != 1) return Fail(piece_where + " must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
            if (const json* seq = Find(piece, "Sequence")) {
                auto id = seq->is_object() ? ReadString(*seq, "id", Child(piece_where, "Sequence")) : Result<std::string>(Fail(""));
                if (!id || *id != "A" || seen_a)
                    return Fail(piece_where + ": the single template must hold the sequence A exactly once");
                seen_a = true;
                continue;
            }
            const json* special = Find(piece, "SpecialToken");
            if (!special || !special->is_object()) return Fail(piece_where + " must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
            auto name = ReadString(*special, "id", Child(piece_where, "SpecialToken"));
            if (!name) return Fail(name.error());
            const auto found = specials ? specials->find(*name) : json::const_iterator();
            const json* entry = specials && found != specials->end() ? &*found : nullptr;
            const std::string entry_where = Child(Child(where, "special_tokens"), "'" + EscapeForMessage(*name, 40) + "'");
            if (!entry || !entry->is_object()) return Fail(piece_where + " names '" + EscapeForMessage(*name, 40) + "', which special_tokens lacks");
            const json* ids = Find(*entry, "ids");
            if (!ids || !ids->is_array()) return Fail(Child(entry_where, "ids") + " is not an array");
            for (size_t k = 0; k < ids->size(); ++k) {
                auto id = ReadId((*ids)[k], Index(Child(entry_where, "ids"), k));
                if (!id) return Fail(id.error());
                (seen_a ? after : before).push_back(*id);
                if (Status st = CheckPostProcessorTokens(before.size() + after.size()); !st) return st;
            }
        }
        if (!seen_a) return Fail(single_where + " does not hold the sequence A");
        prefix->insert(prefix->begin(), before.begin(), before.end());
        suffix->insert(suffix->end(), after.begin(), after.end());
        return Ok{};
    }
    return Unsupported(where, t, "TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing and Sequence");
}

constexpr size_t kMaxAddedTokenBytes = 512;
constexpr size_t kMaxAddedBytes = size_t{4} << 20;

Result<std::unique_ptr<BpeModel>> ReadModel(const json& root, const std::string& path) {
    const json* model = Find(root, "model");
    if (!model || !model->is_object()) return Fail(path + ": no \"model\" object");
    if (const auto type = model->find("type"); type != model->end() && !(type->is_string() && type->get<std::string>() == "BPE"))
        return Fail(path + ": model type " + DescribeJson(*type) + " is not supported (only \"BPE\")");
    BpeOptions options;
    options.vocab_source = path + " model.vocab";
    options.merges_source = path + " model.merges";
    options.unk_source = path + " model.unk_token";
    if (const json* dropout = Find(*model, "dropout")) {
        if (!dropout->is_number()) return Fail(path + ": model.dropout is " + DescribeJson(*dropout) + ", not a number");
        if (dropout->get<double>() != 0.0)
            return Fail(path + ": model.dropout is " + DescribeJson(*dropout) + ": HF then drops merges at random; ssaviz needs it null");
    }
    for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        const json* v = Find(*model, affix);
        if (v && !(v->is_string() && v->get_ref<const std::string&>().empty()))
            return Fail(path + ": model." + affix + " is " + DescribeJson(*v) + ": not supported (ssaviz runs BPE without one)");
    }
    if (const json* unk = Find(*model, "unk_token")) {
        if (!unk->is_string()) return Fail(path + ": model.unk_token is " + DescribeJson(*unk) + ", not a string");
        options.has_unk = true;
        options.unk_token = unk->get<std::string>();
    }
    const std::string model_where = path + ": model";
    for (auto [key, flag] : {std::pair<const char*, bool*>{"fuse_unk", &options.fuse_unk},
                             {"byte_fallback", &options.byte_fallback},
                             {"ignore_merges", &options.ignore_merges}}) {
        auto v = ReadBool(*model, key, model_where, false);
        if (!v) return Fail(v.error());
        *flag = *v;
    }

    const json* vocab = Find(*model, "vocab");
    if (!vocab) return Fail(path + ": no model.vocab");
    if (!vocab->is_object()) return Fail(options.vocab_source + ": not a JSON object");
    std::vector<std::pair<std::string, int32_t>> entries;
    entries.reserve(vocab->size());
    for (const auto& [token, id] : vocab->items()) {
        auto v = ReadId(id, options.vocab_source + " '" + EscapeForMessage(token, 60) + "'");
        if (!v) return Fail(v.error());
        entries.emplace_back(token, *v);
    }

    const json* merges = Find(*model, "merges");
    if (!merges || !merges->is_array()) return Fail(path + ": model.merges is not an array");
    std::vector<std::pair<std::string, std::string>> pairs;
    pairs.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
        const json& entry = (*merges)[i];
        if (entry.is_string()) {  // older files: "a b", split on its one space as HF does
            const std::string& line = entry.get_ref<const std::string&>();
            if (line.rfind("#version", 0) == 0) continue;
            const size_t space = line.find(' ');
            if (space != std::string::npos && line.find(' ', space + 1) == std::string::npos) {
                pairs.emplace_back(line.substr(0, space), line.substr(space + 1));
                continue;
            }
        } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
            pairs.emplace_back(entry[0].get<std::string>(), entry[1].get<std::string>());  // newer files: ["a", "b"]
            continue;
        }
        return Fail(path + ": model.merges[" + std::to_string(i) + "] is not \"a b\" or [\"a\", \"b\"]");
    }
    return BpeModel::Create(entries, pairs, std::move(options));
}

// HF's AddedVocabulary as it is built from the file: ids are given as HF gives them (a token
// already in the vocabulary keeps its id, a new one takes the next free id), and a file whose
// ids say otherwise is refused rather than read two ways.
Status ReadAddedTokens(const json& root, const std::string& path, Pipeline* p, size_t model_vocab_entries) {
    const json* list = Find(root, "added_tokens");
    if (!list) return Ok{};
    const std::string where = path + ": added_tokens";
    if (!list->is_array()) return Fail(where + " is not an array");
    int64_t next_id = static_cast<int64_t>(model_vocab_entries);
    std::unordered_map<std::string, int32_t> id_of_content;
    size_t total_bytes = 0;
    for (size_t i = 0; i < list->size(); ++i) {
        const json& entry = (*list)[i];
        const std::string at = Index(where, i);
        if (!entry.is_object()) return Fail(at + " is " + DescribeJson(entry) + ", not an object");
        AddedToken token;
        const json* id = Find(entry, "id");
        if (!id) return Fail(Child(at, "id") + " is missing");
        auto file_id = ReadId(*id, Child(at, "id"));
        if (!file_id) return Fail(file_id.error());
        auto content = ReadString(entry, "content", at);
        if (!content) return Fail(content.error());
        token.content = std::move(*content);
        auto special = ReadBool(entry, "special", at, false);
        if (!special) return Fail(special.error());
        token.special = *special;
        for (auto [key, flag] : {std::pair<const char*, bool*>{"single_word", &token.single_word},
                                 {"lstrip", &token.lstrip},
                                 {"rstrip", &token.rstrip}}) {
            auto v = ReadBool(entry, key, at, false);
            if (!v) return Fail(v.error());
            *flag = *v;
        }
        auto normalized = ReadBool(entry, "normalized", at, !token.special);
        if (!normalized) return Fail(normalized.error());
        token.normalized = *normalized;
        if (token.content.empty()) continue;  // HF ignores it
        if (token.content.size() > kMaxAddedTokenBytes)
            return Fail(at + ": content is " + FormatBytes(token.content.size()) + ", more than the 512 bytes ssaviz takes");
        if ((total_bytes += token.content.size()) > kMaxAddedBytes) return Fail(where + ": more than 4 MB of tokens");

        int32_t hf_id = -1;
        if (const auto known = id_of_content.find(token.content); known != id_of_content.end()) hf_id = known->second;
        else if (const int32_t in_vocab = p->model->IdOf(token.content); in_vocab >= 0) hf_id = in_vocab;
        else if (next_id < kMaxTokenId) hf_id = static_cast<int32_t>(next_id++);
        if (hf_id != *file_id)
            return Fail(at + " ('" + EscapeForMessage(token.content, 60) + "'): id " + std::to_string(*file_id) +
                        " is not the id Hugging Face's tokenizers give it (" + std::to_string(hf_id) + ")");
        if (const std::string* other = p->model->TokenOf(hf_id); other && *other != token.content)
            return Fail(at + ": id " + std::to_string(hf_id) + " is also model.vocab's '" + EscapeForMessage(*other, 60) + "'");
        id_of_content[token.content] = hf_id;
        token.id = hf_id;
        // A token listed again keeps its id and takes the later flags, as HF's map does.
        if (const auto it = p->added_by_id.find(hf_id); it != p->added_by_id.end()) {
            p->added[it->second] = std::move(token);
        } else {
            p->added_by_id[hf_id] = static_cast<int32_t>(p->added.size());
            p->added.push_back(std::move(token));
        }
    }
    for (size_t k = 0; k < p->added.size(); ++k) {
        const AddedToken& token = p->added[k];
        if (!token.normalized) {
            p->raw_matcher.Add(token.content, static_cast<int32_t>(k));
            continue;
        }
        std::string pattern = token.content;
        if (p->normalizer) {
            AlignedText t = Identity(token.content, 0);
            Budget budget = Budget::ForText(token.content.size());
            if (Status s = p->normalizer->Apply(&t, &budget); !s)
                return Fail(where + " ('" + EscapeForMessage(token.content, 60) + "'): " + s.error());
            pattern = std::move(t.text);
        }
        if (pattern.empty()) return Fail(where + ": '" + EscapeForMessage(token.content, 60) + "' normalizes to nothing");
        p->normalized_matcher.Add(pattern, static_cast<int32_t>(k));
    }
    return Ok{};
}

size_t VocabEntries(const json& root) {
    const json* model = Find(root, "model");
    const json* vocab = model ? Find(*model, "vocab") : nullptr;
    return vocab && vocab->is_object() ? vocab->size() : 0;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> LoadHfTokenizerJson(const std::string& path) {
    auto root = ParseJsonFile(path, kMaxTokenizerFileBytes, kTokenizerJsonTree);
    if (!root) return Fail(root.error());
    if (!root->is_object()) return Fail(path + ": not a JSON object");
    Pipeline p;
    p.kind = "hf-bpe";
    p.source = path;
    auto model = ReadModel(*root, path);
    if (!model) return Fail(model.error());
    p.model = std::move(*model);
    const std::string prefix = path + ": ";
    for (const char* setting : {"truncation", "padding"}) {
        if (const json* v = Find(*root, setting))
            return Fail(prefix + setting + " is " + DescribeJson(*v) + ": not supported (ssaviz sizes texts itself; make it null)");
    }
    if (const json* v = Find(*root, "normalizer")) {
        auto normalizer = ReadNormalizer(*v, "normalizer");
        if (!normalizer) return Fail(prefix + normalizer.error());
        p.normalizer = std::move(*normalizer);
    }
    if (const json* v = Find(*root, "pre_tokenizer")) {
        auto pre_tokenizer = ReadPreTokenizer(*v, "pre_tokenizer");
        if (!pre_tokenizer) return Fail(prefix + pre_tokenizer.error());
        p.pre_tokenizer = std::move(*pre_tokenizer);
    }
    if (const json* v = Find(*root, "decoder")) {
        auto decoder = ReadDecoder(*v, "decoder");
        if (!decoder) return Fail(prefix + decoder.error());
        p.decoder = std::move(*decoder);
    }
    if (const json* v = Find(*root, "post_processor")) {
        if (Status s = ReadPostProcessor(*v, "post_processor", &p.prefix, &p.suffix); !s) return Fail(prefix + s.error());
    }
    if (Status s = ReadAddedTokens(*root, path, &p, VocabEntries(*root)); !s) return Fail(s.error());

    if (Status s = CheckPostProcessorTokens(p.prefix.size() + p.suffix.size()); !s) return Fail(prefix + s.error());
    int32_t max_id = p.model->MaxId();
    for (const AddedToken& token : p.added) max_id = std::max(max_id, token.id);
    p.vocab_size = static_cast<size_t>(max_id + 1);
    for (const auto* ids : {&p.prefix, &p.suffix})
        for (int32_t id : *ids)
            if (static_cast<size_t>(id) >= p.vocab_size)
                return Fail(prefix + "post_processor: id " + std::to_string(id) + " is outside the vocabulary (" + std::to_string(p.vocab_size) + " ids)");
    // What decides the ids, as parsed (keys sorted, so spacing and key order in the file do not
    // count); the decoder only spells them back.
    for (const char* part : {"model", "normalizer", "pre_tokenizer", "post_processor", "added_tokens"})
        if (const json* v = Find(*root, part)) p.content_hash = HashBytes(v->dump(), HashBytes(part, p.content_hash));
    return std::unique_ptr<Tokenizer>(std::make_unique<HfTokenizer>(std::move(p)));
}

Result<std::unique_ptr<Tokenizer>> MakeGpt2Tokenizer(std::unique_ptr<BpeModel> model, uint64_t content_hash) {
    // gpt-3-encoder runs GPT-2's pattern in JavaScript, whose \s is exactly this class (WhiteSpace
    // plus LineTerminator in ECMA-262): it has U+FEFF and lacks U+0085, unlike Oniguruma's.
    const std::string js_space =
        "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";
    const std::string pattern = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" + js_space + "\\p{L}\\p{N}]+|[" + js_space +
                                "]+(?![^" + js_space + "])|[" + js_space + "]+";
    auto regex = Regex::Compile(pattern, Regex::Dialect::kPcre2);
    if (!regex) return Fail("GPT-2 pre-tokenizer: " + regex.error());
    Pipeline p;
    p.kind = "gpt2-bpe";
    p.source = "GPT-2's tokenizer";
    p.vocab_size = static_cast<size_t>(model->MaxId() + 1);
    p.model = std::move(model);
    p.pre_tokenizer = std::make_unique<ByteLevelPreTokenizer>("pre_tokenizer", false, std::move(*regex));
    p.decoder = std::make_unique<ByteLevelDecoder>("decoder");
    p.content_hash = content_hash;
    return std::unique_ptr<Tokenizer>(std::make_unique<HfTokenizer>(std::move(p)));
}

}  // namespace model
