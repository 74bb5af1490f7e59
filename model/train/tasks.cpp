#include "model/train/tasks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>

#include <sys/stat.h>

#include <c10/core/GradMode.h>

#include "model/io/files.h"
#include "model/nn/forward.h"
#include "model/text/sentencepiece.h"

namespace model {
namespace fs = std::filesystem;
namespace {

at::Tensor ToTensor(const std::vector<int64_t>& values, int64_t rows) {
    return at::tensor(at::ArrayRef<int64_t>(values), at::kLong).view({rows, -1});
}

// Mean cross-entropy of logits [B, T, V] against targets [B, T] (-1 = skip), and the count scored.
at::Tensor NextTokenLoss(const at::Tensor& logits, const at::Tensor& targets) {
    return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}), {}, at::Reduction::Mean, -1);
}

// The layers over ids [B, T] -> [B, T, E]. With `last_from` > 0 the last layer runs rows last_from..
// only, over the keys and values of every row (those before as Block's prefix, as an edit's rows
// run), and so the result is [B, T - last_from, E]: an evaluation that scores the last rows only
// skips most of that layer's attention.
at::Tensor RunLayers(const SsaGpt& m, const at::Tensor& ids, std::vector<BlockCapture>* captures = nullptr, int64_t last_from = 0) {
    at::Tensor x = Embed(m, ids.to(m.device()));
    for (size_t l = 0; l < m.layers.size(); ++l) {
        const LayerWeights& layer = m.layers[l];
        BlockCapture capture;
        BlockCapture* keep = captures ? &capture : nullptr;
        if (last_from > 0 && l + 1 == m.layers.size()) {
            const BlockInput before = BlockIn(m.config, layer, x.narrow(1, 0, last_from), false);
            const KeyValues prefix{before.k, before.vs};
            x = Block(m.config, layer, x.narrow(1, last_from, x.size(1) - last_from), false, keep, last_from, &prefix);
        } else {
            x = Block(m.config, layer, x, false, keep);
        }
        if (captures) captures->push_back(capture);
    }
    return x;
}

// ---- text: next-token prediction on prose --------------------------------------------------

class TextTask : public TrainingTask {
public:
    TextTask(std::vector<int32_t> train, std::vector<int32_t> val, int64_t seq_len, int64_t batch)
        : m_train(std::move(train)), m_val(std::move(val)), m_seq_len(seq_len), m_batch(batch) {}

    TaskBatch Sample(std::mt19937_64& rng) const override {
        std::uniform_int_distribution<int64_t> start(0, static_cast<int64_t>(m_train.size()) - m_seq_len - 1);
        std::vector<int64_t> ids, targets;
        for (int64_t b = 0; b < m_batch; ++b) {
            const int64_t s = start(rng);
            ids.insert(ids.end(), m_train.begin() + s, m_train.begin() + s + m_seq_len);
            targets.insert(targets.end(), m_train.begin() + s + 1, m_train.begin() + s + m_seq_len + 1);
        }
        return {ToTensor(ids, m_batch), ToTensor(targets, m_batch)};
    }

    nlohmann::json Evaluate(const SsaGpt& m) const override {
        // Every non-overlapping window of the held-out tokens, in order.
        const int64_t windows = static_cast<int64_t>(m_val.size() - 1) / m_seq_len;
        double sum = 0;
        int64_t count = 0;
        for (int64_t w0 = 0; w0 < windows && !Cancelled(); w0 += m_batch) {
            const int64_t n = std::min(m_batch, windows - w0);
            std::vector<int64_t> ids, targets;
            for (int64_t w = w0; w < w0 + n; ++w) {
                auto s = m_val.begin() + w * m_seq_len;
                ids.insert(ids.end(), s, s + m_seq_len);
                targets.insert(targets.end(), s + 1, s + m_seq_len + 1);
            }
            at::Tensor logits = Logits(m, RunLayers(m, ToTensor(ids, n)));
            at::Tensor t = ToTensor(targets, n).to(m.device());
            sum += at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), t.reshape({-1}), {}, at::Reduction::Sum, -1)
                       .item<double>();
            count += n * m_seq_len;
        }
        const double loss = count ? sum / count : NAN;
        return {{"loss", loss}, {"perplexity", std::exp(loss)}, {"tokens", count}, {"windows", windows},
                {"train_tokens", m_train.size()}};
    }

    int64_t TokensPerBatch() const override { return m_batch * m_seq_len; }

private:
    std::vector<int32_t> m_train, m_val;  // 4 bytes a token: a corpus of 1 GB is some 900 M of them
    int64_t m_seq_len, m_batch;
};

// ---- graph: the paper's Figure 3 ------------------------------------------------------------

constexpr int kNodes = 8;
constexpr const char* kNodeNames = "ABCDEFGH";

// Rows 8..15 of the map on "ABCDEFGHABCDEFGH": query node q (second half) over all 16 keys.
// Target: P*[q] on the first eight keys, zero on the queries.
class GraphTask : public TrainingTask {
public:
    GraphTask() {
        std::vector<float> target(kNodes * 2 * kNodes, 0.0f);
        const auto p = GraphTarget();
        for (int q = 0; q < kNodes; ++q)
            for (int j = 0; j < kNodes; ++j) target[q * 2 * kNodes + j] = static_cast<float>(p[q][j]);
        m_target = at::tensor(target).view({kNodes, 2 * kNodes});
        std::vector<int64_t> ids;
        for (int r = 0; r < 2; ++r)
            for (int i = 0; i < kNodes; ++i) ids.push_back(i);
        m_ids = ToTensor(ids, 1);
    }

    TaskBatch Sample(std::mt19937_64&) const override { return {m_ids, {}}; }

    at::Tensor Loss(const SsaGpt& m, const TaskBatch&) const override { return Scores(m).ce; }

    nlohmann::json Evaluate(const SsaGpt& m) const override {
        GraphScores s = Scores(m);
        at::Tensor map = s.rows.narrow(1, 0, kNodes).to(at::kCPU).contiguous();
        nlohmann::json rows = nlohmann::json::array();
        for (int q = 0; q < kNodes; ++q) {
            std::vector<double> row(map[q].data_ptr<float>(), map[q].data_ptr<float>() + kNodes);
            rows.push_back(row);
        }
        std::vector<float> tau(s.tau.data_ptr<float>(), s.tau.data_ptr<float>() + kNodes);
        return {{"loss", s.ce.item<double>()}, {"kl", s.kl.item<double>()}, {"l1", s.l1.item<double>()},
                {"map", rows}, {"tau_q", tau}};
    }

    int64_t TokensPerBatch() const override { return 2 * kNodes; }

private:
    struct GraphScores { at::Tensor ce, kl, l1, rows, tau; };

    GraphScores Scores(const SsaGpt& m) const {
        at::Tensor x = Embed(m, m_ids.to(m.device()));
        BlockCapture capture;
        Block(m.config, m.layers[0], x, false, &capture);
        at::Tensor rows = capture.attention[0].mean(0).narrow(0, kNodes, kNodes);  // [8, 16], heads averaged
        at::Tensor target = m_target.to(m.device());
        at::Tensor plogp = at::xlogy(target, target).sum(-1);                      // -H(P*[q])
        GraphScores s;
        s.ce = -(target * at::log(rows.clamp_min(1e-30))).sum(-1).mean();
        s.kl = s.ce + plogp.mean();
        s.l1 = (rows - target).abs().sum(-1).mean();
        s.rows = rows;
        s.tau = capture.tau_q[0].mean(0).narrow(0, kNodes, kNodes).detach().to(at::kCPU).contiguous();
        return s;
    }

    at::Tensor m_target, m_ids;
};

// ---- passkey: recall a key hidden in filler ---------------------------------------------------

const std::vector<std::vector<std::string>> kFiller = {
    {"the", "grass", "is", "green", "."}, {"the", "sky", "is", "blue", "."}, {"the", "sun", "is", "yellow", "."},
    {"here", "we", "go", "."},            {"there", "and", "back", "again", "."}};
const std::vector<std::string> kKeyIntro = {"the", "pass", "key", "is"};
const std::vector<std::string> kKeyOutro = {".", "remember", "it", "."};
const std::vector<std::string> kQuestion = {"what", "is", "the", "pass", "key", "?"};
constexpr int kKeyDigits = 5;

// Digit d of the key's slot s (1-based) is the word "s:d", so the key 71432 reads "1:7 2:1 3:4 4:3 5:2".
std::string KeyWord(int slot, int digit) { return std::to_string(slot) + ":" + std::to_string(digit); }

std::vector<std::string> PasskeyWords() {
    std::vector<std::string> words;
    auto add = [&](const std::vector<std::string>& list) {
        for (const auto& w : list)
            if (std::find(words.begin(), words.end(), w) == words.end()) words.push_back(w);
    };
    for (const auto& s : kFiller) add(s);
    add(kKeyIntro);
    add(kKeyOutro);
    add(kQuestion);
    for (int s = 1; s <= kKeyDigits; ++s)
        for (int d = 0; d < 10; ++d) add({KeyWord(s, d)});
    return words;
}

}  // namespace

// The words a sequence holds besides filler: the key's sentence, the question and the key again.
int64_t PasskeyMinimumLength() { return static_cast<int64_t>(kKeyIntro.size() + kKeyOutro.size() + kQuestion.size()) + 2 * kKeyDigits; }

namespace {

// One sequence of exactly `length` words; *answer_at is the index of "?" (whose next five words are the key).
std::vector<std::string> PasskeySequence(int64_t length, std::mt19937_64& rng, int64_t* answer_at) {
    std::vector<std::string> key;
    for (int s = 1; s <= kKeyDigits; ++s) key.push_back(KeyWord(s, std::uniform_int_distribution<int>(0, 9)(rng)));
    const int64_t fixed = PasskeyMinimumLength();
    const int64_t filler_words = std::max<int64_t>(0, length - fixed);
    std::vector<std::string> filler;
    std::vector<size_t> sentence_starts = {0};
    std::uniform_int_distribution<size_t> pick(0, kFiller.size() - 1);
    while (static_cast<int64_t>(filler.size()) < filler_words) {
        for (const auto& w : kFiller[pick(rng)]) filler.push_back(w);
        sentence_starts.push_back(filler.size());
    }
    filler.resize(filler_words);
    while (sentence_starts.back() > filler.size()) sentence_starts.pop_back();
    const size_t at = sentence_starts[std::uniform_int_distribution<size_t>(0, sentence_starts.size() - 1)(rng)];

    std::vector<std::string> words(filler.begin(), filler.begin() + at);
    for (const std::vector<std::string>* part : {&kKeyIntro, static_cast<const std::vector<std::string>*>(&key), &kKeyOutro}) words.insert(words.end(), part->begin(), part->end());
    words.insert(words.end(), filler.begin() + at, filler.end());
    words.insert(words.end(), kQuestion.begin(), kQuestion.end());
    *answer_at = static_cast<int64_t>(words.size()) - 1;
    words.insert(words.end(), key.begin(), key.end());
    return words;
}

class PasskeyTask : public TrainingTask {
public:
    PasskeyTask(std::map<std::string, int64_t> ids, int64_t seq_len, int64_t batch, int64_t max_length, int64_t samples)
        : m_ids(std::move(ids)), m_seq_len(seq_len), m_batch(batch), m_max_length(max_length), m_samples(samples) {}

    TaskBatch Sample(std::mt19937_64& rng) const override { return Make(m_seq_len, m_batch, rng); }

    nlohmann::json Evaluate(const SsaGpt& m) const override {
        nlohmann::json lengths = nlohmann::json::array();
        double train_loss = NAN;
        for (int64_t length = m_seq_len; length <= std::min<int64_t>(m_max_length, m.config.n_positions); length *= 2) {
            std::mt19937_64 rng(1000 + static_cast<uint64_t>(length));  // the same test sequences for every model
            // Batches small enough that the captured maps stay near 256 MB.
            const int64_t per_batch = std::max<int64_t>(1, (64ll << 20) / (length * length * m.config.n_head * m.config.n_layer));
            int64_t exact = 0, digits = 0;
            double loss_sum = 0, key_attention = 0;
            for (int64_t done = 0; done < m_samples && !Cancelled(); done += per_batch) {
                const int64_t n = std::min(per_batch, m_samples - done);
                TaskBatch b = Make(length, n, rng);
                // Only the rows from "?" on are scored (the key's digits follow it) or read (its
                // attention): the last layer runs those alone.
                const int64_t q = length - kKeyDigits - 1;
                std::vector<BlockCapture> captures;
                at::Tensor logits = Logits(m, RunLayers(m, b.ids, &captures, q));  // [n, T - q, V]
                at::Tensor targets = b.targets.to(m.device());
                targets = targets.narrow(1, q, length - q);  // none before is scored (PasskeySequence)
                at::Tensor scored = targets >= 0;
                loss_sum += NextTokenLoss(logits, targets).item<double>() * n;
                at::Tensor correct = (logits.argmax(-1) == targets) & scored;  // [n, T - q]
                at::Tensor per_row = correct.sum(-1);
                exact += (per_row == kKeyDigits).sum().item<int64_t>();
                digits += per_row.sum().item<int64_t>();
                // Attention from "?" onto the key's first digit: the most any head gives it.
                at::Tensor key_pos = FirstKeyPosition(b.ids, length);  // [n]
                at::Tensor best = at::zeros({n}, logits.options());
                for (const auto& c : captures) {
                    at::Tensor row = c.attention.select(2, q - (length - c.attention.size(2)));  // [n, H, T]: the rows run are the last
                    at::Tensor on_key = row.gather(2, key_pos.to(m.device()).view({n, 1, 1}).expand({n, row.size(1), 1}));
                    best = at::maximum(best, on_key.squeeze(-1).amax(1));
                }
                key_attention += best.sum().item<double>();
            }
            if (length == m_seq_len) train_loss = loss_sum / m_samples;
            lengths.push_back({{"length", length}, {"accuracy", static_cast<double>(exact) / m_samples},
                               {"digit_accuracy", static_cast<double>(digits) / (m_samples * kKeyDigits)},
                               {"key_attention", key_attention / m_samples}, {"samples", m_samples}});
        }
        return {{"loss", train_loss}, {"lengths", lengths}};
    }

    int64_t TokensPerBatch() const override { return m_batch * m_seq_len; }

private:
    TaskBatch Make(int64_t length, int64_t rows, std::mt19937_64& rng) const {
        std::vector<int64_t> ids, targets;
        for (int64_t r = 0; r < rows; ++r) {
            int64_t answer_at = 0;
            const auto words = PasskeySequence(length, rng, &answer_at);
            for (size_t i = 0; i < words.size(); ++i) {
                ids.push_back(m_ids.at(words[i]));
                const bool scored = static_cast<int64_t>(i) >= answer_at && i + 1 < words.size();
                targets.push_back(scored ? m_ids.at(words[i + 1]) : -1);
            }
        }
        return {ToTensor(ids, rows), ToTensor(targets, rows)};
    }

    at::Tensor FirstKeyPosition(const at::Tensor& ids, int64_t length) const {
        // The key's first digit is the first word of slot 1 in the sequence.
        std::vector<int64_t> first_slot;
        for (int d = 0; d < 10; ++d) first_slot.push_back(m_ids.at(KeyWord(1, d)));
        at::Tensor is_key = at::isin(ids, at::tensor(first_slot, at::kLong));
        return is_key.to(at::kInt).argmax(1);  // first match
    }

    std::map<std::string, int64_t> m_ids;
    int64_t m_seq_len, m_batch, m_max_length, m_samples;
};

}  // namespace

at::Tensor TrainingTask::Loss(const SsaGpt& m, const TaskBatch& batch) const {
    return NextTokenLoss(Logits(m, RunLayers(m, batch.ids)), batch.targets.to(m.device()));
}

std::vector<std::vector<double>> GraphTarget() {
    // A B C D E F G H; degrees 4 2 3 3 3 2 2 1.
    const int edges[][2] = {{0, 1}, {0, 2}, {0, 3}, {0, 4}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}, {6, 7}};
    std::vector<std::vector<double>> p(kNodes, std::vector<double>(kNodes, 0.0));
    for (const auto& e : edges) p[e[0]][e[1]] = p[e[1]][e[0]] = 1.0;
    for (auto& row : p) {
        double degree = 0;
        for (double v : row) degree += v;
        for (double& v : row) v /= degree;
    }
    return p;
}

const char* GraphNodes() { return kNodeNames; }

nlohmann::json TaskSpecToJson(const TaskSpec& s) {
    nlohmann::json j = {{"task", s.task}, {"seq_len", s.seq_len}, {"batch", s.batch}};
    if (s.task == "text") {
        j["data"] = s.data;
        j["val_fraction"] = s.val_fraction;
    }
    if (s.task == "passkey") {
        j["eval_lengths_max"] = s.eval_lengths_max;
        j["eval_samples"] = s.eval_samples;
    }
    return j;
}

Result<TaskSpec> TaskSpecFromJson(const nlohmann::json& j) {
    TaskSpec s;
    const char* field = "task";  // the one being read, named where its type is wrong
    try {
        if (!j.is_object()) return Fail("task spec: not a JSON object");
        s.task = j.value(field, s.task);
        s.data = j.value(field = "data", s.data);
        s.seq_len = j.value(field = "seq_len", s.seq_len);
        s.batch = j.value(field = "batch", s.batch);
        s.val_fraction = j.value(field = "val_fraction", s.val_fraction);
        s.eval_lengths_max = j.value(field = "eval_lengths_max", s.eval_lengths_max);
        s.eval_samples = j.value(field = "eval_samples", s.eval_samples);
    } catch (const nlohmann::json::exception& e) {
        return Fail(std::string("task.") + field + ": " + JsonErrorText(e));
    }
    // What a file may hold, bounded as train's flags are: a hostile train.json is named, not run
    // (10^15 passkey samples ran for ever; a val_fraction of 2 underflowed the split).
    auto outside = [](const char* field, double v, double lo, double hi) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "task.%s %.6g must be from %.6g to %.6g", field, v, lo, hi);
        return Fail(buf);
    };
    if (s.seq_len < 2 || s.seq_len > (int64_t{1} << 20)) return outside("seq_len", static_cast<double>(s.seq_len), 2, 1 << 20);
    if (s.batch < 1 || s.batch > (int64_t{1} << 20)) return outside("batch", static_cast<double>(s.batch), 1, 1 << 20);  // as --batch
    if (!(s.val_fraction > 0.0 && s.val_fraction < 1.0)) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "task.val_fraction %.6g must be above 0 and below 1", s.val_fraction);
        return Fail(buf);
    }
    if (s.eval_lengths_max < 1 || s.eval_lengths_max > (int64_t{1} << 20))
        return outside("eval_lengths_max", static_cast<double>(s.eval_lengths_max), 1, 1 << 20);
    if (s.eval_samples < 1 || s.eval_samples > 100000) return outside("eval_samples", static_cast<double>(s.eval_samples), 1, 100000);
    return s;
}

constexpr size_t kSkippedNamed = 20;

Result<Corpus> ReadCorpus(const std::vector<std::string>& paths) {
    Corpus corpus;
    std::vector<fs::path> files;
    for (const auto& p : paths) {
        std::error_code ec;
        if (fs::is_directory(p, ec)) {
            std::vector<fs::path> in_dir;
            for (const auto& entry : fs::directory_iterator(p, ec))
                if (entry.is_symlink()) corpus.skipped.push_back(entry.path().string() + " (symlink)");
                else if (entry.is_regular_file()) in_dir.push_back(entry.path());
                else if (entry.is_directory()) corpus.skipped.push_back(entry.path().string() + " (a folder: --data reads a folder's files, not its sub-folders)");
                else corpus.skipped.push_back(entry.path().string() + " (not a regular file)");  // a FIFO, a device
            if (ec) return Fail("--data '" + EscapeForMessage(p) + "': cannot list the folder (" + ec.message() + ")");
            std::sort(in_dir.begin(), in_dir.end());
            std::sort(corpus.skipped.begin(), corpus.skipped.end());  // named in the same order on every file system
            files.insert(files.end(), in_dir.begin(), in_dir.end());
        } else if (fs::is_regular_file(p, ec)) {
            files.push_back(p);
        } else if (fs::exists(p, ec)) {
            return Fail("--data '" + EscapeForMessage(p) + "' is not a regular file or a folder");
        } else {
            return Fail("--data '" + EscapeForMessage(p) + "': no such file or folder");
        }
    }
    std::set<std::pair<dev_t, ino_t>> seen;  // a file named twice (a link, a folder named too, a hard link) was learned from twice
    for (const auto& f : files) {
        struct stat st {};
        if (::stat(f.c_str(), &st) == 0 && !seen.insert({st.st_dev, st.st_ino}).second) {
            corpus.skipped.push_back(f.string() + " (named twice: read once)");
            continue;
        }
        auto read = ReadFile(f.string(), kMaxCorpusFileBytes);
        if (!read) return Fail(read.error());
        const std::string& text = *read;
        const size_t nul = text.find('\0'), bad = std::min(FindInvalidUtf8(text), nul);
        if (text.empty() || bad != std::string::npos) {
            corpus.skipped.push_back(f.string() + (text.empty() ? " (empty)"
                                                   : bad == nul ? " (a NUL byte at byte " + std::to_string(bad) + ": binary, not text)"
                                                                : " (not UTF-8 text: byte " + std::to_string(bad) + ")"));
            continue;
        }
        std::string clean;
        std::istringstream lines(text);
        for (std::string line; std::getline(lines, line);) clean += (line == "%" ? "" : line) + "\n";
        corpus.bytes += clean.size();
        corpus.files.push_back(f.string());
        corpus.texts.push_back(std::move(clean));
    }
    if (corpus.texts.empty()) {
        std::string skipped;  // what was passed over, so that a named file's problem is said
        for (size_t i = 0; i < corpus.skipped.size() && i < 3; ++i) skipped += (i ? ", " : "") + EscapeForMessage(corpus.skipped[i]);
        if (corpus.skipped.size() > 3) skipped += " and " + std::to_string(corpus.skipped.size() - 3) + " more";
        return Fail("--data: no UTF-8 text files found" + (skipped.empty() ? std::string() : " (skipped " + skipped + ")"));
    }
    return corpus;
}

Result<std::vector<int32_t>> EncodeInBlocks(const Tokenizer& tokenizer, const std::string& text, size_t block_bytes,
                                            const std::atomic<bool>* cancel) {
    std::vector<int32_t> ids;
    block_bytes = std::max<size_t>(block_bytes, 1);
    const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; };
    const auto word_at = [&](size_t i) { return i < text.size() && !space(text[i]); };
    for (size_t begin = 0; begin < text.size();) {
        size_t end = text.size();
        if (end - begin > block_bytes) {
            // The block ends past block_bytes and within twice that: a line of 60 MB was encoded
            // whole (16 GB held), where a file of lines is cut between two of them.
            const size_t from = begin + block_bytes;
            const std::string_view window(text.data(), std::min(text.size(), from + block_bytes));
            end = 0;
            // A line end between two non-spaces: a byte-level BPE's whitespace runs ("\n\n") stay whole.
            for (size_t cut = window.find('\n', from); cut != std::string_view::npos && !end; cut = window.find('\n', cut + 1))
                if (word_at(cut - 1) && word_at(cut + 1)) end = cut + 1;
            // Else, in a line longer than that, before a space between two non-spaces: the next word
            // starts the next block with its space, as a byte-level BPE splits it anyway.
            for (size_t cut = from; !end && cut < window.size(); ++cut)
                if (text[cut] == ' ' && word_at(cut - 1) && word_at(cut + 1)) end = cut;
            // Else (no such space: base64, a minified dump) at a character's first byte: the one place a
            // word is cut in two.
            if (!end)
                for (end = from; end > begin + 1 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80;) --end;
        }
        if (cancel && cancel->load()) return Fail("cancelled while encoding --data");
        auto tokens = tokenizer.Encode(std::string_view(text).substr(begin, end - begin));
        if (!tokens) return Fail(tokens.error());
        ids.insert(ids.end(), tokens->ids.begin(), tokens->ids.end());
        begin = end;
    }
    return ids;
}

Result<std::unique_ptr<TrainingTask>> MakeTask(const TaskSpec& spec, const Tokenizer& tokenizer, const std::atomic<bool>* cancel) {
    if (spec.seq_len < 2 || spec.batch < 1) return Fail("seq_len must be >= 2 and batch >= 1");
    std::unique_ptr<TrainingTask> task;
    std::vector<std::string> skipped;  // --data's files it could not use
    if (spec.task == "text") {
        auto corpus = ReadCorpus(spec.data);
        if (!corpus) return Fail(corpus.error());
        // Each file's ids (its text let go once encoded), then train and val at their exact sizes:
        // 4 bytes a token at most twice over (it held 8-byte ids, grown by doubling, beside each
        // file's: some 20 bytes a byte of text).
        std::vector<std::vector<int32_t>> files(corpus->texts.size());
        size_t train_size = 0, val_size = 0;
        auto split_of = [&](const std::vector<int32_t>& ids) { return ids.size() - static_cast<size_t>(spec.val_fraction * ids.size()); };
        for (size_t f = 0; f < corpus->texts.size(); ++f) {
            auto ids = EncodeInBlocks(tokenizer, corpus->texts[f], kEncodeBlockBytes, cancel);
            if (!ids) return Fail(cancel && cancel->load() ? ids.error() : corpus->files[f] + ": " + ids.error());
            std::string().swap(corpus->texts[f]);
            files[f] = std::move(*ids);
            files[f].shrink_to_fit();
            train_size += split_of(files[f]);
            val_size += files[f].size() - split_of(files[f]);
        }
        std::vector<int32_t> train, val;
        train.reserve(train_size);
        val.reserve(val_size);
        for (std::vector<int32_t>& ids : files) {
            const size_t split = split_of(ids);
            train.insert(train.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(split));
            val.insert(val.end(), ids.begin() + static_cast<std::ptrdiff_t>(split), ids.end());
            std::vector<int32_t>().swap(ids);
        }
        if (static_cast<int64_t>(train.size()) <= spec.seq_len + 1 || static_cast<int64_t>(val.size()) <= spec.seq_len + 1)
            return Fail("--data: " + std::to_string(train.size() + val.size()) + " tokens are too few for seq_len " +
                        std::to_string(spec.seq_len));
        task = std::make_unique<TextTask>(std::move(train), std::move(val), spec.seq_len, spec.batch);
        skipped = std::move(corpus->skipped);
    } else if (spec.task == "graph") {
        auto tokens = tokenizer.Encode(kNodeNames);
        if (!tokens || tokens->ids != std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7})
            return Fail("the graph task needs its own tokenizer (A..H as ids 0..7)");
        task = std::make_unique<GraphTask>();
    } else if (spec.task == "passkey") {
        if (spec.seq_len < PasskeyMinimumLength())
            return Fail("seq_len " + std::to_string(spec.seq_len) + " is too short for the passkey task: its sequences hold at least " +
                        std::to_string(PasskeyMinimumLength()) + " tokens (the key, its sentence and the question)");
        std::map<std::string, int64_t> ids;
        for (const auto& word : PasskeyWords()) {
            auto tokens = tokenizer.Encode(word);
            if (!tokens || tokens->ids.size() != 1)
                return Fail("the passkey task needs its own tokenizer ('" + word + "' is not one token)");
            ids[word] = tokens->ids[0];
        }
        task = std::make_unique<PasskeyTask>(std::move(ids), spec.seq_len, spec.batch, spec.eval_lengths_max, spec.eval_samples);
    } else {
        return Fail("task '" + spec.task + "' is not one of text, graph, passkey");
    }
    task->spec = TaskSpecToJson(spec);
    task->cancel = cancel;
    if (!skipped.empty()) {  // in train.json, and said by the trainer: the model learned from less than --data names
        nlohmann::json named = nlohmann::json::array();
        for (size_t i = 0; i < skipped.size() && i < kSkippedNamed; ++i) named.push_back(EscapeForMessage(skipped[i]));
        task->spec["skipped"] = std::move(named);  // the first 20
        task->spec["skipped_files"] = skipped.size();
    }
    return task;
}

Status WriteTaskTokenizer(const std::string& task, const std::string& dir) {
    MakeFolders(dir);  // a failure shows as the files' (a temporary folder of train's)
    if (task == "graph") {
        nlohmann::json vocab = nlohmann::json::object();
        for (int i = 0; i < kNodes; ++i) vocab[std::string(1, kNodeNames[i])] = i;
        std::ofstream(dir + "/vocab.json") << vocab.dump() << "\n";
        std::ofstream merges(dir + "/merges.txt");
        merges << "#version: 0.2\n";
        if (!merges) return Fail(dir + "/merges.txt: cannot write");
        return Ok{};
    }
    if (task == "passkey") {
        const auto words = PasskeyWords();
        std::string all;
        for (const auto& w : words) all += (all.empty() ? "" : " ") + w;
        std::vector<std::string> lines(4, all);
        SentencePieceTraining options;
        options.model_type = "word";
        options.vocab_size = static_cast<int>(words.size()) + 3;  // + <unk> <s> </s>
        return TrainSentencePiece(lines, options, dir + "/tokenizer.model");
    }
    return Fail("task '" + task + "' has no built-in tokenizer");
}

std::string TaskExampleText(const std::string& task, int64_t tokens, uint64_t seed) {
    if (task == "graph") return std::string(kNodeNames) + kNodeNames;
    if (task != "passkey") return "";
    std::mt19937_64 rng(seed);
    int64_t answer_at = 0;
    std::string text;
    for (const auto& w : PasskeySequence(tokens, rng, &answer_at)) text += (text.empty() ? "" : " ") + w;
    return text;
}

}  // namespace model
