// Arbitrary bytes as a model folder's tokenizer files: the loaders must answer with a Result
// error, never crash, hang or allocate without bound. The first byte picks the files:
//   even: vocab.json, then a NUL byte, then merges.txt (LoadGpt2Tokenizer)
//   odd:  tokenizer.json (LoadTokenizer on a folder holding only it): normalizers, pre-tokenizers
//         with their regexes, added tokens, post-processors and decoders from the file
// A tokenizer that loads must keep the Tokenizer contract on a few texts (or refuse them with an
// error), encode them the same way twice, and decode any ids (a tokenizer.json decoder may refuse,
// in one line, over its budgets); GPT-2's files must decode back to the text (a tokenizer.json
// decodes as its decoder says).
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "model/text/tokenizer.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace fs = std::filesystem;

// A scratch folder per process, so parallel fuzzers (-jobs) do not share files.
const fs::path& Scratch() {
    static const fs::path dir = [] {
        const fs::path d = fs::temp_directory_path() / ("ssaviz_fuzz_tokenizer_files." + std::to_string(::getpid()));
        fs::create_directories(d / "gpt2");
        fs::create_directories(d / "hf");
        std::atexit([] {
            std::error_code ec;
            fs::remove_all(Scratch(), ec);
        });
        return d;
    }();
    return dir;
}

void Write(const fs::path& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    FUZZ_CHECK(out.good());
}

bool OneLine(const std::string& error) { return !error.empty() && error.find('\n') == std::string::npos; }

constexpr const char* kTexts[] = {
    "Hello world, it's 2024!",
    " \t\n  spaces  and\r\nlines ",
    "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\xA6\x8A \xC2\xA0nbsp",
    "'s'll'd 12345 ...!!!",
    "<s>ab</s> <|endoftext|>x<unk>  \xE2\x96\x81" "a",
    "cafe\xCC\x81 \xEF\xAC\x81 \xCE\x9F\xCE\xA3 \xC2\x85\xEF\xBB\xBF aaaa",
    // Long runs for the budgets (issue 38): a pattern that backtracks on them spends the text's.
    "aaaaaaaaaaaaaaaaaaaaaaaa aaaaaaaaaaaaaaaaaaaaaaaa 1<s>aaaaaaaaaaaaaaaaaaaaaaaa<s>\xC3\xA9\xC3\xA9\xC3\xA9      \n",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    model::Result<std::unique_ptr<model::Tokenizer>> loaded = model::Fail("not loaded");
    if (data[0] % 2 == 0) {
        const size_t nul = rest.find('\0');
        const fs::path vocab = Scratch() / "gpt2" / "vocab.json", merges = Scratch() / "gpt2" / "merges.txt";
        Write(vocab, rest.substr(0, nul));
        Write(merges, nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1));
        loaded = model::LoadGpt2Tokenizer(vocab.string(), merges.string());
    } else {
        Write(Scratch() / "hf" / "tokenizer.json", rest);
        loaded = model::LoadTokenizer((Scratch() / "hf").string());
    }
    if (!loaded) {
        FUZZ_CHECK(!loaded.error().empty());
        return 0;
    }
    const model::Tokenizer& tokenizer = **loaded;
    const bool gpt2 = data[0] % 2 == 0;
    for (const char* text : kTexts) {
        auto encoded = tokenizer.Encode(text);
        if (!encoded) {  // a piece the vocabulary lacks, a regex over its budget, text grown too long
            FUZZ_CHECK(OneLine(encoded.error()));
            continue;
        }
        CheckTokenization(tokenizer, text, *encoded, gpt2 ? EmptyTokens::kNone : EmptyTokens::kAny);
        auto decoded = tokenizer.Decode(encoded->ids);
        if (!decoded) FUZZ_CHECK(!gpt2 && OneLine(decoded.error()));  // a decoder's regex over its budget, or text it grows too long
        else if (gpt2) FUZZ_CHECK(*decoded == text);
        auto again = tokenizer.Encode(text);
        FUZZ_CHECK(again.ok() && again->ids == encoded->ids && again->offsets == encoded->offsets);
    }
    // Ids from the input: any must decode without harm.
    std::vector<int32_t> ids(std::min<size_t>(rest.size() / sizeof(int32_t), 64));
    if (!ids.empty()) std::memcpy(ids.data(), rest.data(), ids.size() * sizeof(int32_t));
    for (int32_t& id : ids) id = static_cast<int32_t>(static_cast<uint32_t>(id) % (tokenizer.VocabSize() + 2));
    auto decoded = tokenizer.Decode(ids);
    FUZZ_CHECK(decoded.ok() || OneLine(decoded.error()));
    return 0;
}
