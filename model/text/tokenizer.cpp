// The Tokenizer interface's shared pieces: UTF-8 checks and display, GPT-2's vocab.json +
// merges.txt, and which tokenizer files a model folder holds. The pipelines themselves live in
// hf_tokenizer.cpp (tokenizer.json and GPT-2's files, whose behaviour follows OpenAI's encoder.py
// as ported to JavaScript by the npm package gpt-3-encoder, our test reference) and
// sentencepiece.cpp.
#include "model/text/tokenizer.h"
#include "model/text/utf8.h"
#include "model/io/files.h"
#include "model/text/bpe.h"
#include "model/text/hf_tokenizer.h"
#include "model/text/sentencepiece.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <utility>

namespace model {
namespace {

// ---------------------------------------------------------------------------------------------
// Files

// GPT-2's two files as read; tokens and merge symbols are spelled in byte-level characters.
struct BpeFiles {
    std::vector<std::pair<std::string, int32_t>> vocab;        // [V] (token, id)
    std::vector<std::pair<std::string, std::string>> merges;   // [M] in rank order
    std::string vocab_source;                                   // file names for error messages
    std::string merges_source;
};

Status ReadVocab(const nlohmann::json& object, const std::string& source, BpeFiles* files) {
    if (!object.is_object()) return Fail(source + ": not a JSON object");
    files->vocab.reserve(object.size());
    for (const auto& [token, id] : object.items()) {
        // Ids index dense tables, so absurd ones are rejected rather than allocated for.
        const bool valid = id.is_number_unsigned() ? id.get<uint64_t>() < kMaxTokenId
                                                   : id.is_number_integer() && id.get<int64_t>() >= 0 &&
                                                         id.get<int64_t>() < int64_t{kMaxTokenId};
        if (!valid) {
            return Fail(source + ": the id of token '" + EscapeForMessage(token) + "' is not an integer in [0, " +
                        std::to_string(kMaxTokenId) + ")");
        }
        files->vocab.emplace_back(token, static_cast<int32_t>(id.get<int64_t>()));
    }
    return Ok{};
}

// "a b" -> {a, b}; false unless there are exactly two symbols separated by spaces or tabs.
bool SplitMerge(std::string_view line, std::pair<std::string, std::string>* merge) {
    std::string_view parts[2];
    size_t count = 0;
    size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
        if (i == line.size()) break;
        const size_t start = i;
        while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
        if (count == 2) return false;
        parts[count++] = line.substr(start, i - start);
    }
    if (count != 2) return false;
    *merge = {std::string(parts[0]), std::string(parts[1])};
    return true;
}

Status ReadMergesText(std::string_view text, const std::string& source, BpeFiles* files) {
    size_t line_number = 0;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(start, end - start);
        start = end + 1;
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line_number == 1 && line.substr(0, 8) == "#version") continue;
        if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
        std::pair<std::string, std::string> merge;
        if (!SplitMerge(line, &merge)) {
            return Fail(source + " line " + std::to_string(line_number) + ": expected two symbols");
        }
        files->merges.push_back(std::move(merge));
    }
    return Ok{};
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> LoadGpt2Tokenizer(const std::string& vocab_json_path,
                                                      const std::string& merges_path) {
    BpeFiles files;
    files.vocab_source = vocab_json_path;
    files.merges_source = merges_path;
    auto vocab = ParseJsonFile(vocab_json_path, kMaxTokenizerFileBytes, kTokenizerJsonTree);
    if (!vocab) return Fail(vocab.error());
    if (Status status = ReadVocab(*vocab, vocab_json_path, &files); !status) return Fail(status.error());
    auto merges = ReadFile(merges_path, kMaxTokenizerFileBytes);
    if (!merges) return Fail(merges.error());
    if (Status status = ReadMergesText(*merges, merges_path, &files); !status) return Fail(status.error());
    BpeOptions options;
    options.merges_in_vocab = false;
    options.unknown_is_error = true;
    options.vocab_source = vocab_json_path;
    options.merges_source = merges_path;
    // ContentHash: each id's token in id order, then the merges in rank order.
    std::vector<std::pair<int32_t, const std::string*>> by_id;
    by_id.reserve(files.vocab.size());
    for (const auto& [token, id] : files.vocab) by_id.push_back({id, &token});
    std::sort(by_id.begin(), by_id.end());
    uint64_t hash = kHashSeed;
    for (const auto& [id, token] : by_id) hash = HashBytes(*token + '\0' + std::to_string(id) + '\0', hash);
    for (const auto& [a, b] : files.merges) hash = HashBytes(a + ' ' + b + '\n', hash);
    auto model = BpeModel::Create(files.vocab, files.merges, std::move(options));
    if (!model) return Fail(model.error());
    return MakeGpt2Tokenizer(std::move(*model), hash);
}

uint64_t HashBytes(std::string_view bytes, uint64_t hash) {
    for (const char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    return hash;
}

std::string TokenizerFilesIn(const std::string& model_dir) {
    namespace fs = std::filesystem;
    std::error_code error;
    const fs::path dir(model_dir);
    auto present = [&](const char* name) { return fs::exists(fs::symlink_status(dir / name, error)); };
    const bool vocab = present("vocab.json"), merges = present("merges.txt");
    if (vocab && merges) return "vocab.json + merges.txt";
    if (present("tokenizer.json")) return "tokenizer.json";
    if (present("tokenizer.model")) return "tokenizer.model";
    if (vocab || merges) return "vocab.json + merges.txt";  // half of the pair: an error to report
    return "";
}

Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& model_dir) {
    namespace fs = std::filesystem;
    std::error_code error;
    if (!fs::is_directory(model_dir, error))
        return Fail("model folder '" + EscapeForMessage(model_dir) + "'" + (error ? WhyNotThere(error.value()) : " is not a folder"));
    const fs::path dir(model_dir);
    const std::string files = TokenizerFilesIn(model_dir);
    if (files == "vocab.json + merges.txt") {
        const fs::path vocab = dir / "vocab.json", merges = dir / "merges.txt";
        const bool has_vocab = fs::exists(fs::symlink_status(vocab, error)), has_merges = fs::exists(fs::symlink_status(merges, error));
        if (has_vocab != has_merges)
            return Fail("model folder '" + EscapeForMessage(model_dir) + "' has " +
                        (has_vocab ? "vocab.json but no merges.txt" : "merges.txt but no vocab.json") +
                        " (GPT-2 BPE needs both, or a tokenizer.json)");
        return LoadGpt2Tokenizer(vocab.string(), merges.string());
    }
    if (files == "tokenizer.json") {
        return LoadHfTokenizerJson((dir / "tokenizer.json").string());
    }
    if (files == "tokenizer.model") return LoadSentencePieceTokenizer((dir / "tokenizer.model").string());
    return Fail("model folder '" + EscapeForMessage(model_dir) + "' has no tokenizer (vocab.json + merges.txt, tokenizer.json or tokenizer.model)");
}

Result<std::string> DecodeAfter(const Tokenizer& tokenizer, int32_t before, int32_t id, const std::string* before_text) {
    if (before < 0) return tokenizer.Decode({id});
    Result<std::string> alone = before_text ? Result<std::string>(*before_text) : tokenizer.Decode({before});
    if (!alone) return alone;
    auto both = tokenizer.Decode({before, id});  // a hostile decoder's budget may refuse the pair, not `id` alone
    if (!both || both->compare(0, alone->size(), *alone) != 0) return tokenizer.Decode({id});
    return both->substr(alone->size());
}

PredictedPieces::PredictedPieces(const Tokenizer& tokenizer) : m_tokenizer(tokenizer) {
    auto anchor = tokenizer.Encode("a");
    if (!anchor || anchor->ids.empty()) return;
    auto text = tokenizer.Decode({anchor->ids.back()});
    if (!text) return;
    m_anchor = anchor->ids.back();
    m_anchor_text = std::move(*text);
}

Result<std::string> PredictedPieces::operator()(int32_t id) const {
    // A byte piece of a printable character reads as the piece of that character ('.' and <0x2E>),
    // and one past ASCII as no character at all (U+FFFD, all alike): named by its spelling. A
    // control character's reads as itself, escaped wherever shown ("\n": the newline's only piece).
    if (const int byte = m_tokenizer.BytePiece(id); byte >= 0x20 && byte != 0x7F) {
        char spelled[16];
        std::snprintf(spelled, sizeof spelled, "<0x%02X>", byte);
        return std::string(spelled);
    }
    return DecodeAfter(m_tokenizer, m_anchor, id, &m_anchor_text);
}

std::string PieceToDisplay(std::string_view piece_bytes) {
    std::string out;
    out.reserve(piece_bytes.size());
    for (size_t i = 0; i < piece_bytes.size();) AppendUtf8(NextCodePoint(piece_bytes, &i), &out);
    return out;
}

std::string PieceWithBytes(std::string_view piece_bytes) {
    std::string out;
    out.reserve(piece_bytes.size());
    for (size_t i = 0; i < piece_bytes.size();) {
        const Utf8Char c = DecodeUtf8(piece_bytes, i);
        if (c.length == 0) {
            char byte[8];
            std::snprintf(byte, sizeof byte, "\\x%02X", static_cast<unsigned char>(piece_bytes[i++]));
            out += byte;
        } else {
            out.append(piece_bytes.substr(i, c.length));
            i += c.length;
        }
    }
    return out;
}

}  // namespace model
