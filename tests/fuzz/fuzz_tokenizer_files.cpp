// Arbitrary bytes as a model folder's GPT-2 tokenizer files: the loaders must answer with a
// Result error, never crash, hang or allocate without bound. The first byte picks the files:
//   even: vocab.json, then a NUL byte, then merges.txt (LoadGpt2Tokenizer)
//   odd:  tokenizer.json (LoadTokenizer on a folder holding only it)
// A tokenizer that loads must keep the Tokenizer contract on a few texts (or refuse them).
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

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

constexpr const char* kTexts[] = {
    "Hello world, it's 2024!",
    " \t\n  spaces  and\r\nlines ",
    "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\xA6\x8A \xC2\xA0nbsp",
    "'s'll'd 12345 ...!!!",
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
    for (const char* text : kTexts) {
        auto encoded = tokenizer.Encode(text);
        if (!encoded) continue;  // a piece the vocabulary lacks
        CheckTokenization(tokenizer, text, *encoded);
        FUZZ_CHECK(tokenizer.Decode(encoded->ids) == text);
    }
    return 0;
}
