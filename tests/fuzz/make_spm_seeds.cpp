// Writes seeds for fuzz_spm_charsmap: the precompiled character maps libsentencepiece builds from
// a few normalization rules (TSV: source code points, tab, replacement code points). One-off:
//   g++ -std=c++17 tests/fuzz/make_spm_seeds.cpp -ldl -o /tmp/make_spm_seeds
//   printf '41\t61\n' >/tmp/r.tsv && /tmp/make_spm_seeds build/libssaviz_spm.so /tmp/r.tsv tests/fuzz/corpus/spm_charsmap/one_rule.bin
// (six_rules.bin: 41->61, 42->62, "fi"->U+FB01, U+FB01->"fi", U+3000->space, U+FF21->A)
#include <dlfcn.h>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>
using BytesFn = void (*)(void*, const char*, size_t);
using TrainFn = int (*)(const char* const*, size_t, const char* const*, const char* const*, size_t, BytesFn, void*, char*, size_t);
static bool V(const std::string& s, size_t* at, uint64_t* v) { *v = 0; for (int sh = 0; *at < s.size() && sh < 64; sh += 7) { uint8_t b = s[(*at)++]; *v |= uint64_t(b & 0x7F) << sh; if (!(b & 0x80)) return true; } return false; }
static bool F(const std::string& s, size_t b, size_t e, uint64_t f, size_t* ob, size_t* oe) { size_t at = b; while (at < e) { uint64_t t, l; if (!V(s, &at, &t)) return false; switch (t & 7) { case 0: V(s, &at, &l); break; case 1: at += 8; break; case 5: at += 4; break; case 2: V(s, &at, &l); if ((t >> 3) == f) { *ob = at; *oe = at + l; return true; } at += l; break; default: return false; } } return false; }
int main(int argc, char** argv) {
    void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    auto train = (TrainFn)dlsym(h, "ssaviz_spm_train");
    if (!train) { std::printf("no train: %s\n", dlerror()); return 1; }
    std::vector<const char*> lines = {"The quick brown fox jumps over the lazy dog.", "A fox is quick; a dog is lazy.", "Numbers 2024 and 1999."};
    std::vector<const char*> keys = {"model_type", "vocab_size", "normalization_rule_tsv", "byte_fallback", "minloglevel", "num_threads", "hard_vocab_limit"};
    std::vector<const char*> vals = {"bpe", "300", argv[2], "true", "2", "1", "false"};
    std::string model; char err[512] = "";
    if (!train(lines.data(), lines.size(), keys.data(), vals.data(), keys.size(), [](void* p, const char* b, size_t n) { ((std::string*)p)->assign(b, n); }, &model, err, sizeof err)) { std::printf("train failed: %s\n", err); return 1; }
    size_t a, b, c, d; if (!F(model, 0, model.size(), 3, &a, &b) || !F(model, a, b, 2, &c, &d)) { std::printf("no map\n"); return 2; }
    std::ofstream(argv[3], std::ios::binary) << model.substr(c, d - c);
    std::printf("%s: %zu bytes\n", argv[3], d - c);
}
