// OpenWeights (safetensors or a torch.save ZIP checkpoint, told apart by content) and InferConfig
// on arbitrary bytes as a weights file: ZIP, unpickler, state-dict search and view checks
// together. The file is memory-mapped, where ASan cannot see past a tensor, so every accepted
// tensor's strided extent is checked against the mapping here; an inferred config must be usable.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "model/io/weights.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace fs = std::filesystem;

const fs::path& ScratchFile() {
    static const fs::path path = [] {
        const fs::path p = fs::temp_directory_path() / ("ssaviz_fuzz_weights." + std::to_string(::getpid()));
        std::atexit([] {
            std::error_code ec;
            fs::remove(ScratchFile(), ec);
        });
        return p;
    }();
    return path;
}

void CheckInsideFile(const model::WeightFile& w, const model::StoredTensor& t) {
    FUZZ_CHECK(t.shape.size() == t.strides.size());
    unsigned __int128 last = 0;  // the largest element index the view reaches
    for (size_t d = 0; d < t.shape.size(); ++d) {
        FUZZ_CHECK(t.shape[d] >= 0 && t.strides[d] >= 0);
        if (t.shape[d] == 0) return;  // an empty view reads nothing
        last += static_cast<unsigned __int128>(t.shape[d] - 1) * static_cast<uint64_t>(t.strides[d]);
    }
    const auto file = w.FileOf(t);
    FUZZ_CHECK(file);
    const uint8_t* begin = file->data();
    FUZZ_CHECK(t.data >= begin);
    const unsigned __int128 end = static_cast<uint64_t>(t.data - begin) + (last + 1) * model::DtypeSize(t.dtype);
    FUZZ_CHECK(end <= file->size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    {
        std::ofstream out(ScratchFile(), std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
        FUZZ_CHECK(out.good());
    }
    auto weights = model::OpenWeights(ScratchFile().string());
    if (!weights) {
        FUZZ_CHECK(!weights.error().empty());
        return 0;
    }
    for (size_t i = 0; i < weights->tensors.size(); ++i) {
        const model::StoredTensor& t = weights->tensors[i];
        CheckInsideFile(*weights, t);
        const auto at = weights->index.find(t.name);
        FUZZ_CHECK(at != weights->index.end() && at->second == i);
    }
    auto inferred = model::InferConfig(*weights, model::ConfigHints{});
    if (inferred) {
        const model::ModelConfig& c = inferred->config;
        FUZZ_CHECK(c.n_layer > 0 && c.n_head > 0 && c.n_embd > 0 && c.n_embd % c.n_head == 0);
        FUZZ_CHECK(c.n_positions > 0 && c.vocab_size > 0);
    }
    return 0;
}
