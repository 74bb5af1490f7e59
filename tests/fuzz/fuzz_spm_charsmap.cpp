// A SentencePiece model whose normalizer carries the input as its precompiled character map: the
// bundled English tokenizer.model with the input spliced in as NormalizerSpec.precompiled_charsmap.
// libsentencepiece trusts that map and reads outside it when it is hostile, so the loader walks it
// first (model/text/sentencepiece.cpp). Either the loader refuses the map with a one-line error,
// or the library loads it and encodes sample texts; a crash here is a map the walk let through.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

#include "model/io/files.h"
#include "model/text/sentencepiece.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

void PutVarint(std::string* out, uint64_t v) {
    while (v >= 0x80) {
        out->push_back(static_cast<char>((v & 0x7F) | 0x80));
        v >>= 7;
    }
    out->push_back(static_cast<char>(v));
}

void PutBytesField(std::string* out, uint64_t field, std::string_view bytes) {
    PutVarint(out, field << 3 | 2);
    PutVarint(out, bytes.size());
    out->append(bytes);
}

bool GetVarint(std::string_view* in, uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && !in->empty(); shift += 7) {
        const uint8_t b = static_cast<uint8_t>(in->front());
        in->remove_prefix(1);
        *v |= uint64_t{b & 0x7Fu} << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

// Copies the fields of `message` to `kept`, except length-delimited field `drop`, whose bytes go
// to `dropped` (the last one wins).
void Split(std::string_view message, uint64_t drop, std::string* kept, std::string* dropped) {
    while (!message.empty()) {
        const std::string_view start = message;
        uint64_t tag = 0, n = 0;
        FUZZ_CHECK(GetVarint(&message, &tag));
        switch (tag & 7) {
            case 0: FUZZ_CHECK(GetVarint(&message, &n)); break;
            case 1: message.remove_prefix(8); break;
            case 5: message.remove_prefix(4); break;
            case 2:
                FUZZ_CHECK(GetVarint(&message, &n) && n <= message.size());
                if ((tag >> 3) == drop) *dropped = std::string(message.substr(0, n));
                message.remove_prefix(n);
                break;
            default: FUZZ_CHECK(false);
        }
        if ((tag >> 3) != drop) kept->append(start.substr(0, start.size() - message.size()));
    }
}

struct Base {
    std::string model_fields;  // the ModelProto without its normalizer_spec (3)
    std::string spec_fields;   // that NormalizerSpec without its precompiled_charsmap (2)
    std::string path;          // where each input's model is written
};

const Base& GetBase() {
    static const Base base = [] {
        Base b;
        auto bytes = model::ReadFile(SSAVIZ_SOURCE_DIR "/assets/models/english/ssa/tokenizer.model", model::kMaxTokenizerFileBytes);
        FUZZ_CHECK(bytes.ok());
        std::string spec, unused;
        Split(*bytes, 3, &b.model_fields, &spec);
        Split(spec, 2, &b.spec_fields, &unused);
        b.path = "/tmp/fuzz_spm_charsmap-" + std::to_string(::getpid()) + ".model";
        return b;
    }();
    return base;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    GetBase();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const Base& base = GetBase();
    std::string spec = base.spec_fields;
    PutBytesField(&spec, 2, std::string_view(reinterpret_cast<const char*>(data), size));
    std::string model = base.model_fields;
    PutBytesField(&model, 3, spec);
    {
        std::ofstream out(base.path, std::ios::binary | std::ios::trunc);
        out.write(model.data(), static_cast<std::streamsize>(model.size()));
        FUZZ_CHECK(out.good());
    }
    auto tokenizer = model::LoadSentencePieceTokenizer(base.path);
    if (!tokenizer) {
        FUZZ_CHECK(tokenizer.error().find('\n') == std::string::npos);
        return 0;
    }
    // Texts that reach many of a map's entries: ASCII, Latin ligatures and full-width letters, CJK.
    for (const char* text : {"The quick brown fox.", "\xEF\xAC\x81sh \xEF\xBC\xA6\xEF\xBD\x95\xEF\xBD\x8C\xEF\xBD\x8C",
                             "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xE2\x85\xA0 \xC2\xBD", "\t \n  x"}) {
        auto encoded = (*tokenizer)->Encode(text);
        if (!encoded) FUZZ_CHECK(encoded.error().find('\n') == std::string::npos);
    }
    return 0;
}
