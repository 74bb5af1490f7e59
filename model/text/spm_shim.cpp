// libssaviz_spm.so: libsentencepiece behind a C interface. Debian's libsentencepiece bundles
// protobuf 3.14 and exports its symbols, while LibTorch loads the system protobuf 3.21; in one
// symbol scope they break each other (a crash at start-up, or a version check that aborts). So
// ssaviz never links SentencePiece: model/text/sentencepiece.cpp dlopen()s this shim with RTLD_LOCAL |
// RTLD_DEEPBIND, and SentencePiece keeps its own protobuf. Only the functions below cross over.
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

namespace {

void SetError(char* error, size_t size, const std::string& message) {
    if (!error || size == 0) return;
    std::strncpy(error, message.c_str(), size - 1);
    error[size - 1] = '\0';
}

class Lines : public sentencepiece::SentenceIterator {
public:
    Lines(const char* const* lines, size_t count) : m_lines(lines), m_count(count) { Load(); }
    bool done() const override { return m_index >= m_count; }
    void Next() override { ++m_index; Load(); }
    const std::string& value() const override { return m_value; }
    sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

private:
    void Load() {
        while (m_index < m_count && !*m_lines[m_index]) ++m_index;  // skip empty lines
        if (m_index < m_count) m_value = m_lines[m_index];
    }
    const char* const* m_lines;
    size_t m_count;
    size_t m_index = 0;
    std::string m_value;
};

}  // namespace

extern "C" {

using ssaviz_spm_piece_fn = void (*)(void* ctx, int id, unsigned begin, unsigned end, int is_byte, const char* piece, size_t size);
using ssaviz_spm_bytes_fn = void (*)(void* ctx, const char* bytes, size_t size);

__attribute__((visibility("default"))) void* ssaviz_spm_load(const char* bytes, size_t size, char* error, size_t error_size) {
    auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
    const auto status = processor->LoadFromSerializedProto(absl::string_view(bytes, size));
    if (!status.ok()) {
        SetError(error, error_size, status.message());
        return nullptr;
    }
    return processor.release();
}

__attribute__((visibility("default"))) void ssaviz_spm_free(void* handle) {
    delete static_cast<sentencepiece::SentencePieceProcessor*>(handle);
}

__attribute__((visibility("default"))) int ssaviz_spm_piece_size(void* handle) {
    return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->GetPieceSize();
}

__attribute__((visibility("default"))) int ssaviz_spm_encode(void* handle, const char* text, size_t size, ssaviz_spm_piece_fn emit,
                                                             void* ctx) {
    auto* p = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
    const auto encoded = p->EncodeAsImmutableProto(absl::string_view(text, size));
    for (const auto& piece : encoded.pieces())
        emit(ctx, static_cast<int>(piece.id()), piece.begin(), piece.end(), p->IsByte(static_cast<int>(piece.id())) ? 1 : 0,
             piece.piece().data(), piece.piece().size());
    return 1;
}

__attribute__((visibility("default"))) void ssaviz_spm_decode(void* handle, const int* ids, size_t count, ssaviz_spm_bytes_fn emit,
                                                              void* ctx) {
    const std::string text = static_cast<sentencepiece::SentencePieceProcessor*>(handle)->DecodeIds(std::vector<int>(ids, ids + count));
    emit(ctx, text.data(), text.size());
}

// Trains on `lines` with trainer flags `keys` = `values`; the serialized model goes to `emit`.
__attribute__((visibility("default"))) int ssaviz_spm_train(const char* const* lines, size_t count, const char* const* keys,
                                                            const char* const* values, size_t flags, ssaviz_spm_bytes_fn emit, void* ctx,
                                                            char* error, size_t error_size) {
    std::unordered_map<std::string, std::string> args;
    for (size_t i = 0; i < flags; ++i) args[keys[i]] = values[i];
    Lines it(lines, count);
    std::string model;
    const auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
    if (!status.ok()) {
        SetError(error, error_size, status.message());
        return 0;
    }
    emit(ctx, model.data(), model.size());
    return 1;
}

}  // extern "C"
