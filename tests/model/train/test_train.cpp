// The trainer: real LibTorch autograd on real data (a fortune file from Debian's fortunes package,
// the synthetic tasks), real files written and read back. Small models and few steps keep each
// test to seconds; nothing here checks a timing.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>

#include "model/nn/analysis.h"
#include "model/nn/model_folder_torch.h"
#include "model/text/sentencepiece.h"
#include "model/train/tasks.h"
#include "model/train/train.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kFortune = "/usr/share/games/fortunes/science";  // Debian package fortunes (set up by .ci/setup-debian)

std::string Out(const std::string& name) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/train/" + name;
    fs::remove_all(dir);
    return dir;
}

std::string Bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The graph task's model (1 layer, 1 head, width 8) trained full-batch for `steps` into Out(name).
model::TrainOptions Graph(const std::string& name, int64_t steps) {
    model::TrainOptions o;
    o.task.task = "graph";
    o.task.seq_len = 16;
    o.task.batch = 1;
    o.config.n_layer = 1, o.config.n_head = 1, o.config.n_embd = 8, o.config.n_positions = 16;
    o.config.query = {model::PositionForm::Sigmoid, model::TokenForm::Shared, model::Combine::Sum};
    o.out = Out(name);
    o.steps = steps;
    o.lr = 1e-2;
    o.warmup = 0;
    o.eval_every = 0;
    return o;
}

model::TrainOptions SmallText(const std::string& out) {
    model::TrainOptions o;
    o.config.n_layer = 2;
    o.config.n_head = 2;
    o.config.n_embd = 32;
    o.config.n_positions = 64;
    o.config.vocab_size = 400;  // SentencePiece: 256 bytes, the characters of the file, and merges
    o.config.query = {model::PositionForm::Sigmoid, model::TokenForm::Shared, model::Combine::Sum};
    o.config.value = {model::PositionForm::None, model::TokenForm::Feature, model::Combine::Sum};
    o.task.task = "text";
    o.task.data = {kFortune};
    o.task.seq_len = 32;
    o.task.batch = 8;
    o.task.val_fraction = 0.1;
    o.out = out;
    o.steps = 60;
    o.lr = 1e-2;
    o.warmup = 5;
    o.eval_every = 20;
    o.checkpoint_every = 30;
    o.seed = 7;
    return o;
}

TEST(Train, ShortRunLowersTheLossOfBothModels) {
    ASSERT_TRUE(fs::exists(kFortune)) << kFortune << " is missing: install Debian's fortunes package (.ci/setup-debian)";
    model::SetComputeThreads(1);
    auto o = SmallText(Out("lowers"));
    auto result = model::Train(o, nullptr);
    ASSERT_TRUE(result) << result.error();
    json record = json::parse(Bytes(o.out + "/ssa/train.json"));
    const auto& history = record["history"];
    ASSERT_EQ(history.size(), 3u);
    for (const char* role : {"ssa", "vanilla"}) {
        // ln(400) = 5.99 is the loss of a uniform guess. Both models end well below it on held-out
        // text, and their training loss keeps falling from the first evaluation to the last.
        const double held_out = (*result)[role]["loss"];
        EXPECT_LT(held_out, std::log(400.0) - 1.0) << role;
        const double first = history[0]["train_loss"][role], last = history[2]["train_loss"][role];
        EXPECT_LT(last, first - 0.1) << role;
    }
    EXPECT_EQ(record["role"], "ssa");
    EXPECT_EQ(record["task"]["task"], "text");
}

TEST(Train, SaveLoadRoundTripsExactly) {
    model::SetComputeThreads(1);
    auto o = SmallText(Out("roundtrip"));
    o.steps = 10;
    o.eval_every = 0;
    auto result = model::Train(o, nullptr);
    ASSERT_TRUE(result) << result.error();
    // The f32 checkpoint holds the trained weights; writing them again and reading back is exact.
    auto trained = model::LoadSsaGptFolder(o.out + "/checkpoint/ssa", at::kCPU);
    ASSERT_TRUE(trained) << trained.error();
    const std::string again = o.out + "/again";
    fs::create_directories(again);
    ASSERT_TRUE(model::SaveModelFolder(*trained, again));
    auto reread = model::LoadSsaGptFolder(again, at::kCPU);
    ASSERT_TRUE(reread) << reread.error();
    EXPECT_TRUE(at::equal(trained->wte, reread->wte));
    for (size_t l = 0; l < trained->layers.size(); ++l) {
        EXPECT_TRUE(at::equal(trained->layers[l].attn_w, reread->layers[l].attn_w));
        EXPECT_TRUE(at::equal(trained->layers[l].q.pos, reread->layers[l].q.pos));
        EXPECT_TRUE(at::equal(trained->layers[l].v.tok_w, reread->layers[l].v.tok_w));
    }
    EXPECT_EQ(Bytes(o.out + "/checkpoint/ssa/model.safetensors"), Bytes(again + "/model.safetensors"));
    // The shipped folder is the same model, and eval re-scores it to the number train recorded.
    auto eval = model::EvaluateModelFolder(o.out + "/ssa");
    ASSERT_TRUE(eval) << eval.error();
    EXPECT_DOUBLE_EQ((*eval)["loss"].get<double>(), (*result)["ssa"]["loss"].get<double>());
    // f16 storage: every weight is the f16 rounding of the trained one.
    const std::string half = o.out + "/half";
    fs::create_directories(half);
    ASSERT_TRUE(model::SaveModelFolder(*trained, half, model::Dtype::F16));
    auto half_model = model::LoadSsaGptFolder(half, at::kCPU);
    ASSERT_TRUE(half_model) << half_model.error();
    EXPECT_TRUE(at::equal(half_model->wte, trained->wte.to(at::kHalf).to(at::kFloat)));
}

TEST(Train, SameSeedSameBytes) {
    model::SetComputeThreads(1);
    auto a = SmallText(Out("seed_a"));
    auto b = SmallText(Out("seed_b"));
    a.steps = b.steps = 8;
    a.eval_every = b.eval_every = 0;
    ASSERT_TRUE(model::Train(a, nullptr));
    ASSERT_TRUE(model::Train(b, nullptr));
    for (const char* role : {"ssa", "vanilla"})
        EXPECT_EQ(Bytes(a.out + "/" + role + "/model.safetensors"), Bytes(b.out + "/" + role + "/model.safetensors")) << role;
    auto c = SmallText(Out("seed_c"));
    c.steps = 8;
    c.eval_every = 0;
    c.seed = 8;
    ASSERT_TRUE(model::Train(c, nullptr));
    EXPECT_NE(Bytes(a.out + "/ssa/model.safetensors"), Bytes(c.out + "/ssa/model.safetensors"));
}

// Ctrl+C or SIGTERM after the last step was dropped (the models written, exit 0) and one while the
// corpus was encoded acted on only once it was: the run stops before its models are put in place,
// its last checkpoint kept for --resume, and the encoding stops between blocks.
TEST(Train, ACancelAfterTheLastStepOrWhileEncodingIsNotDropped) {
    model::SetComputeThreads(1);
    auto o = SmallText(Out("late_cancel"));
    o.steps = 10;
    o.eval_every = 0;
    o.checkpoint_every = 10;
    std::atomic<bool> stop{false};
    auto late = model::Train(o, [&](const model::TrainProgress& p) { stop = p.step == p.steps; }, &stop);
    ASSERT_FALSE(late);
    EXPECT_NE(late.error().find("cancelled after the last step"), std::string::npos) << late.error();
    EXPECT_FALSE(fs::exists(o.out + "/ssa")) << "not put in place";
    o.resume = true;
    auto resumed = model::Train(o, nullptr);
    ASSERT_TRUE(resumed) << resumed.error();
    EXPECT_TRUE(fs::exists(o.out + "/ssa/model.safetensors"));
    // Encoding: cancelled between blocks.
    std::atomic<bool> cancelled{true};
    auto gpt2 = model::LoadTokenizer(std::string(SSAVIZ_SOURCE_DIR) + "/assets/tokenizers/gpt2");
    ASSERT_TRUE(gpt2) << gpt2.error();
    auto task = model::MakeTask(o.task, **gpt2, &cancelled);
    ASSERT_FALSE(task);
    EXPECT_EQ(task.error(), "cancelled while encoding --data");
}

TEST(Train, ResumeContinuesBitForBit) {
    model::SetComputeThreads(1);
    auto straight = SmallText(Out("straight"));
    straight.steps = 20;
    straight.eval_every = 0;
    straight.checkpoint_every = 10;
    ASSERT_TRUE(model::Train(straight, nullptr));

    auto split = straight;
    split.out = Out("split");
    std::atomic<bool> stop{false};
    auto first = model::Train(split, [&](const model::TrainProgress& p) { stop = p.step >= 10; }, &stop);
    ASSERT_FALSE(first);
    EXPECT_NE(first.error().find("cancelled at step 11"), std::string::npos) << first.error();
    split.resume = true;
    auto second = model::Train(split, nullptr);
    ASSERT_TRUE(second) << second.error();
    for (const char* role : {"ssa", "vanilla"})
        EXPECT_EQ(Bytes(straight.out + "/" + role + "/model.safetensors"), Bytes(split.out + "/" + role + "/model.safetensors"))
            << role;

    auto other = split;
    other.seed = 99;
    auto refused = model::Train(other, nullptr);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().find("other settings"), std::string::npos) << refused.error();
    // A checkpoint past --steps has nothing to resume (it was taken, and train.json said 5 steps).
    auto shorter = split;
    shorter.steps = 5;
    refused = model::Train(shorter, nullptr);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().find("is at step 20, past --steps 5"), std::string::npos) << refused.error();
}

// What resuming refuses besides other flags: a tokenizer made from data that changed since the
// checkpoint (it trained on with other ids), and checkpoint models of another shape than the run's
// (its models replaced, its state.json kept).
TEST(Train, ResumeRefusesAnotherTokenizerOrShape) {
    model::SetComputeThreads(1);
    const std::string data = Out("resume_data.txt");
    fs::create_directories(fs::path(data).parent_path());  // run alone, no other test has made it
    fs::copy_file(kFortune, data, fs::copy_options::overwrite_existing);
    auto o = SmallText(Out("resume_refusals"));
    o.task.data = {data};
    o.steps = 20;
    o.eval_every = 0;
    o.checkpoint_every = 10;
    std::atomic<bool> stop{false};
    ASSERT_FALSE(model::Train(o, [&](const model::TrainProgress& p) { stop = p.step >= 10; }, &stop));
    o.resume = true;
    {
        std::ofstream more(data, std::ios::app);
        for (int i = 0; i < 300; ++i) more << "zebra quokka xylophone jubilee " << i << " wombat kumquat\n";
    }
    auto refused = model::Train(o, nullptr);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().find("another tokenizer than this run's (made from --data: has the data changed?)"), std::string::npos)
        << refused.error();
    fs::copy_file(kFortune, data, fs::copy_options::overwrite_existing);  // the data it was trained on
    // An optimizer.pt that is not one: a FIFO is refused before anything reads it (LibTorch's reader
    // would wait on it for ever), bytes that are no state are named as such ("cannot read" was all).
    const std::string optimizer = o.out + "/checkpoint/ssa/optimizer.pt", kept = Out("resume_optimizer.pt");
    fs::rename(optimizer, kept);
    ASSERT_EQ(::mkfifo(optimizer.c_str(), 0600), 0);
    refused = model::Train(o, nullptr);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().find("holds 'optimizer.pt': it is not a folder ssaviz train wrote"), std::string::npos) << refused.error();
    fs::remove(optimizer);
    std::ofstream(optimizer) << "not an optimizer";
    refused = model::Train(o, nullptr);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().find("optimizer.pt': not the optimizer's state of this run ("), std::string::npos) << refused.error();
    fs::remove(optimizer);
    fs::rename(kept, optimizer);

    auto wider = SmallText(Out("resume_wider"));
    wider.config.n_embd = 64;
    wider.steps = 10;
    wider.eval_every = 0;
    wider.checkpoint_every = 10;
    ASSERT_TRUE(model::Train(wider, nullptr));
    for (const char* role : {"ssa", "vanilla"}) {
        fs::remove_all(o.out + "/checkpoint/" + role);
        fs::copy(wider.out + "/checkpoint/" + role, o.out + "/checkpoint/" + role, fs::copy_options::recursive);
    }
    refused = model::Train(o, nullptr);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().find("a model of width 64, where the run has 32"), std::string::npos) << refused.error();
    // state.json's seconds and history go into train.json: a negative time or history that is not
    // train's evaluations is refused, naming the field (-1e308 s was written as the wall time).
    const json state = json::parse(Bytes(o.out + "/checkpoint/state.json"));
    for (const auto& [field, value, said] : {std::tuple<const char*, json, const char*>{"seconds", -1e308, "'seconds' must be a number of seconds"},
                                             {"history", json::array({1, "x"}), "'history' must be an array of evaluations"}}) {
        json edited = state;
        edited[field] = value;
        std::ofstream(o.out + "/checkpoint/state.json") << edited.dump();
        refused = model::Train(o, nullptr);
        ASSERT_FALSE(refused);
        EXPECT_NE(refused.error().find(said), std::string::npos) << refused.error();
    }
}

TEST(Train, TwinDiffersOnlyByTemperatures) {
    model::ModelConfig c;
    c.n_layer = 2, c.n_head = 2, c.n_embd = 16, c.n_positions = 8, c.vocab_size = 11;
    c.query = {model::PositionForm::Sigmoid, model::TokenForm::Shared, model::Combine::Sum};
    model::ModelConfig v = c;
    v.query = {};
    const auto ssa = model::InitSsaGpt(c, 3), vanilla = model::InitSsaGpt(v, 3);
    EXPECT_TRUE(at::equal(ssa.wte, vanilla.wte));
    EXPECT_TRUE(at::equal(ssa.layers[1].fc_w, vanilla.layers[1].fc_w));
    EXPECT_TRUE(ssa.layers[0].q.pos.defined());
    EXPECT_FALSE(vanilla.layers[0].q.pos.defined());
}

// A fine-tune (--from): both models start from the base's weights, the SSA model's temperatures
// near one as the official code's (attn.beta 2: a slope of exp(-exp(2))), token terms zero; the
// base is written beside them, exactly the weights started from, and train.json names it.
TEST(Train, AFineTuneStartsFromItsBaseAndWritesItBeside) {
    model::SetComputeThreads(1);
    model::TrainOptions b = Graph("ft_base", 10);
    b.config.query = {};
    b.twin = false;
    ASSERT_TRUE(model::Train(b, nullptr));
    const std::string base_dir = b.out + "/ssa";  // the role's name; a vanilla model

    model::TrainOptions o = Graph("ft", 10);
    o.from = base_dir;
    o.config.n_embd = 999;  // the base's shape wins over what the options say
    o.keep_checkpoints = true;
    o.checkpoint_every = 10;
    auto result = model::Train(o, nullptr);
    ASSERT_TRUE(result) << result.error();
    ASSERT_TRUE(result->contains("base"));

    auto base = model::LoadSsaGptFolder(base_dir, at::kCPU), beside = model::LoadSsaGptFolder(o.out + "/base", at::kCPU);
    auto ssa0 = model::LoadSsaGptFolder(o.out + "/run/ssa/checkpoint-0", at::kCPU);
    auto vanilla0 = model::LoadSsaGptFolder(o.out + "/run/vanilla/checkpoint-0", at::kCPU);
    auto ssa = model::LoadSsaGptFolder(o.out + "/ssa", at::kCPU);
    for (auto* m : {&base, &beside, &ssa0, &vanilla0, &ssa}) ASSERT_TRUE(*m) << m->error();
    EXPECT_EQ(ssa0->config.n_embd, base->config.n_embd);
    std::vector<model::RoleTensors> want = model::TensorsByRole(*base);
    for (auto* m : {&beside, &ssa0, &vanilla0}) {
        std::vector<model::RoleTensors> got = model::TensorsByRole(**m);
        ASSERT_EQ(got.size(), want.size());
        for (size_t k = 0; k < want.size(); ++k)
            for (const auto& [w, g] : {std::pair(want[k].weight, got[k].weight), std::pair(want[k].bias, got[k].bias)})
                if (w && w->defined()) {
                    EXPECT_TRUE(g && g->defined() && at::equal(*w, *g)) << "tensor " << k;
                }
    }
    const model::TemperatureParams& q = ssa0->layers[0].q;
    const double slope = std::exp(-std::exp(2.0));
    EXPECT_NEAR(at::sigmoid(q.pos).max().item<double>(), slope, 1e-9);
    EXPECT_NEAR(at::sigmoid(q.pos).min().item<double>(), slope, 1e-9);
    EXPECT_EQ(q.tok_w.abs().max().item<float>(), 0.0f);
    EXPECT_FALSE(vanilla0->layers[0].q.pos.defined());
    EXPECT_FALSE(at::equal(ssa->layers[0].attn_w, base->layers[0].attn_w)) << "ten steps moved the weights";

    const json record = json::parse(Bytes(o.out + "/ssa/train.json")), base_record = json::parse(Bytes(o.out + "/base/train.json"));
    EXPECT_EQ(record["from"], base_dir);
    EXPECT_EQ(record["base"], "../base");
    EXPECT_EQ(base_record["role"], "base");
    EXPECT_EQ(base_record["from"], base_dir);
    auto eval = model::EvaluateModelFolder(o.out + "/base");  // scored on the fine-tune's task, as train reported
    ASSERT_TRUE(eval) << eval.error();
    EXPECT_DOUBLE_EQ((*eval)["kl"].get<double>(), (*result)["base"]["kl"].get<double>());

    // Not a base: a model with temperatures, a folder that is none.
    model::TrainOptions again = Graph("ft_again", 2);
    again.from = o.out + "/ssa";
    auto refused = model::Train(again, nullptr);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().find("has temperatures already; a fine-tune starts from a vanilla model"), std::string::npos) << refused.error();
    again.from = o.out + "/nothing";
    refused = model::Train(again, nullptr);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().rfind("--from: ", 0), 0u) << refused.error();
    EXPECT_FALSE(fs::exists(again.out + "/base"));
}

TEST(Train, GraphTaskFitsTheTarget) {
    model::SetComputeThreads(1);
    model::TrainOptions o = Graph("graph", 600);
    auto result = model::Train(o, nullptr);
    ASSERT_TRUE(result) << result.error();
    for (const char* role : {"ssa", "vanilla"}) {
        // A uniform row over the 16 keys is L1 ~1.5 from P*; a trained map is far closer.
        EXPECT_LT((*result)[role]["l1"].get<double>(), 0.3) << role;
        EXPECT_LT((*result)[role]["kl"].get<double>(), 0.05) << role;
        EXPECT_EQ((*result)[role]["map"].size(), 8u);
    }
    // P* is row-stochastic with the degrees the task names.
    const auto p = model::GraphTarget();
    const int degrees[] = {4, 2, 3, 3, 3, 2, 2, 1};
    for (int q = 0; q < 8; ++q) {
        double sum = 0;
        int nonzero = 0;
        for (double x : p[q]) sum += x, nonzero += x > 0;
        EXPECT_NEAR(sum, 1.0, 1e-12);
        EXPECT_EQ(nonzero, degrees[q]);
    }
}

// The text task encodes a corpus file a block of whole lines at a time (its memory was ~85 bytes a
// byte of text): with GPT-2's byte-level BPE the ids are the whole file's, block size aside, on a
// real fortune file cut into blocks of 1 KB.
TEST(Train, ACorpusInBlocksIsTheWholeFilesIds) {
    auto gpt2 = model::LoadTokenizer(std::string(SSAVIZ_SOURCE_DIR) + "/assets/tokenizers/gpt2");
    ASSERT_TRUE(gpt2) << gpt2.error();
    const std::string text = Bytes(kFortune);
    ASSERT_GT(text.size(), 20000u);
    auto whole = (*gpt2)->Encode(text);
    ASSERT_TRUE(whole) << whole.error();
    for (size_t block : {size_t{1024}, size_t{7777}, text.size()}) {
        auto blocks = model::EncodeInBlocks(**gpt2, text, block);
        ASSERT_TRUE(blocks) << blocks.error();
        EXPECT_EQ(*blocks, whole->ids) << "blocks of " << block;
    }
    // One long line (a 60 MB line was encoded whole, 16 GB held): cut before a space between two
    // words, the same ids again.
    std::string line = text;
    std::replace(line.begin(), line.end(), '\n', ' ');
    auto one = (*gpt2)->Encode(line);
    ASSERT_TRUE(one) << one.error();
    for (size_t block : {size_t{1024}, size_t{7777}}) {
        auto blocks = model::EncodeInBlocks(**gpt2, line, block);
        ASSERT_TRUE(blocks) << blocks.error();
        EXPECT_EQ(*blocks, one->ids) << "one line in blocks of " << block;
    }
    // No space at all (two-byte characters): cut at a character's first byte, the text whole again.
    std::string word;
    for (int i = 0; i < 3000; ++i) word += "\xC3\xA9";  // é
    for (size_t block : {size_t{1001}, size_t{1024}}) {
        auto blocks = model::EncodeInBlocks(**gpt2, word, block);
        ASSERT_TRUE(blocks) << blocks.error();
        auto back = (*gpt2)->Decode(*blocks);
        ASSERT_TRUE(back) << back.error();
        EXPECT_EQ(*back, word) << "blocks of " << block;
    }
}

TEST(Train, PasskeyTokenizerAndSequences) {
    const std::string dir = Out("passkey_tok");
    ASSERT_TRUE(model::WriteTaskTokenizer("passkey", dir));
    auto tok = model::LoadTokenizer(dir);
    ASSERT_TRUE(tok) << tok.error();
    const std::string text = model::TaskExampleText("passkey", 256, 5);
    auto ids = (*tok)->Encode(text);
    ASSERT_TRUE(ids) << ids.error();
    EXPECT_EQ(ids->ids.size(), 256u);  // one token per word, exactly the length asked for
    EXPECT_EQ(std::count(ids->ids.begin(), ids->ids.end(), 0), 0) << "no <unk>";
    // Byte ranges cover the text: each token's bytes are the text at its offsets.
    for (size_t i = 0; i < ids->ids.size(); ++i)
        EXPECT_EQ(ids->pieces[i], text.substr(ids->offsets[i].first, ids->offsets[i].second - ids->offsets[i].first));
    EXPECT_NE(text.find("what is the pass key ?"), std::string::npos);
}

}  // namespace

// --keep-checkpoints: each checkpoint's models kept as a run (out/run/ROLE/checkpoint-N/, from
// step 0), the last step the final model's bytes, a resumed run the same steps with the same bytes,
// and a run folder holding something train did not write refused and left alone.
TEST(Train, KeptCheckpointsAreARun) {
    model::SetComputeThreads(1);
    model::TrainOptions o = Graph("kept", 30);
    o.checkpoint_every = 10;
    o.keep_checkpoints = true;
    ASSERT_TRUE(model::Train(o, nullptr));
    for (const char* role : {"ssa", "vanilla"}) {
        std::vector<std::string> names;
        for (const auto& e : fs::directory_iterator(o.out + "/run/" + role)) names.push_back(e.path().filename().string());
        std::sort(names.begin(), names.end());
        EXPECT_EQ(names, (std::vector<std::string>{"checkpoint-0", "checkpoint-10", "checkpoint-20", "checkpoint-30"})) << role;
        const std::string last = o.out + "/run/" + role + "/checkpoint-30";
        EXPECT_EQ(Bytes(last + "/model.safetensors"), Bytes(o.out + "/" + role + "/model.safetensors")) << role;
        const json record = json::parse(Bytes(last + "/train.json"));
        EXPECT_EQ(record["role"], role);
        EXPECT_EQ(record["step"], 30);
        EXPECT_TRUE(fs::is_regular_file(last + "/vocab.json")) << "each step a model folder with its tokenizer";
    }
    auto first = model::LoadSsaGptFolder(o.out + "/run/ssa/checkpoint-0", at::kCPU);
    ASSERT_TRUE(first) << first.error();
    const auto init = model::InitSsaGpt(first->config, o.seed);  // the config as trained: its vocabulary the task's
    EXPECT_TRUE(at::equal(first->wte, init.wte));
    EXPECT_TRUE(at::equal(first->layers[0].q.pos, init.layers[0].q.pos));

    auto split = o;
    split.out = Out("kept_split");
    std::atomic<bool> stop{false};
    ASSERT_FALSE(model::Train(split, [&](const model::TrainProgress& p) { stop = p.step >= 15; }, &stop));
    EXPECT_TRUE(fs::exists(split.out + "/run.new/ssa/checkpoint-10")) << "an unfinished run's steps wait in run.new/";
    EXPECT_FALSE(fs::exists(split.out + "/run.new/ssa/checkpoint-20"));
    EXPECT_FALSE(fs::exists(split.out + "/run"));
    split.resume = true;
    auto resumed = model::Train(split, nullptr);
    ASSERT_TRUE(resumed) << resumed.error();
    EXPECT_FALSE(fs::exists(split.out + "/run.new"));
    for (const char* step : {"checkpoint-0", "checkpoint-10", "checkpoint-20", "checkpoint-30"})
        EXPECT_EQ(Bytes(o.out + "/run/ssa/" + step + "/model.safetensors"), Bytes(split.out + "/run/ssa/" + step + "/model.safetensors"))
            << step;

    // A new run into the same folder leaves the older run's steps whole until it ends: stopped
    // half-way, run/ is the older run's, byte for byte; finished, run/ is its own.
    const std::string older = Bytes(split.out + "/run/ssa/checkpoint-30/model.safetensors");
    auto other = split;
    other.resume = false;
    other.seed = o.seed + 1;
    stop = false;
    ASSERT_FALSE(model::Train(other, [&](const model::TrainProgress& p) { stop = p.step >= 15; }, &stop));
    EXPECT_EQ(Bytes(split.out + "/run/ssa/checkpoint-30/model.safetensors"), older);
    EXPECT_TRUE(fs::exists(split.out + "/run/ssa/checkpoint-20"));
    EXPECT_TRUE(fs::exists(split.out + "/run.new/vanilla/checkpoint-10"));
    other.steps = 20;  // a new run again (not a resume): the unfinished run.new/ is replaced, step 0 on
    other.checkpoint_every = 20;
    auto finished = model::Train(other, nullptr);
    ASSERT_TRUE(finished) << finished.error();
    EXPECT_FALSE(fs::exists(split.out + "/run.new"));
    EXPECT_FALSE(fs::exists(split.out + "/run/ssa/checkpoint-10")) << "the older run's steps and the unfinished run's are gone";
    EXPECT_FALSE(fs::exists(split.out + "/run/ssa/checkpoint-30"));
    EXPECT_EQ(Bytes(split.out + "/run/ssa/checkpoint-20/model.safetensors"), Bytes(split.out + "/ssa/model.safetensors"));

    // A finished run resumed for more steps keeps them in run/ itself (no run.new/: nothing to stage).
    other.resume = true;
    other.steps = 40;
    auto extended = model::Train(other, nullptr);
    ASSERT_TRUE(extended) << extended.error();
    EXPECT_TRUE(fs::exists(split.out + "/run/ssa/checkpoint-40"));
    EXPECT_TRUE(fs::exists(split.out + "/run/ssa/checkpoint-20"));
    EXPECT_FALSE(fs::exists(split.out + "/run.new"));

    // The same settings again, stopped before their first checkpoint: checkpoint/ is still the
    // older run's (step 40), run.new/ the new run's step 0. Resuming would continue the older run
    // into run.new/ and put that over run/: refused, run/ as it was.
    const std::string kept40 = Bytes(split.out + "/run/ssa/checkpoint-40/model.safetensors");
    other.resume = false;
    other.steps = 60;
    stop = false;
    ASSERT_FALSE(model::Train(other, [&](const model::TrainProgress& p) { stop = p.step >= 5; }, &stop));
    EXPECT_FALSE(model::Resumable(other));
    other.resume = true;
    auto mixed = model::Train(other, nullptr);
    ASSERT_FALSE(mixed);
    EXPECT_NE(mixed.error().find("holds kept steps of another run than"), std::string::npos) << mixed.error();
    EXPECT_EQ(Bytes(split.out + "/run/ssa/checkpoint-40/model.safetensors"), kept40);
    EXPECT_TRUE(fs::exists(split.out + "/run.new/ssa/checkpoint-0"));

    // This run's own steps without the checkpoint's (removed by hand): resuming would have put
    // the steps from there on over them, the rest lost. Refused, run/ as it was.
    auto own = o;
    own.out = Out("kept_own");
    ASSERT_TRUE(model::Train(own, nullptr));  // steps 0..30
    fs::remove_all(own.out + "/run/ssa/checkpoint-30");
    own.resume = true;
    own.steps = 40;
    auto lost = model::Train(own, nullptr);
    ASSERT_FALSE(lost);
    EXPECT_NE(lost.error().find("holds this run's kept steps but not its step 30"), std::string::npos) << lost.error();
    EXPECT_TRUE(fs::exists(own.out + "/run/ssa/checkpoint-10"));
    EXPECT_TRUE(fs::exists(own.out + "/run/vanilla/checkpoint-30"));

    // An older checkpoint put back (step 10 of a 10-step run) and trained further with another
    // --steps: the kept steps after it, of the 30-step schedule, would be replaced by another
    // trajectory and the rest left, two runs in one timeline (round twenty-eight: exit 0, silent).
    // Refused, run/ as it was; with their own --steps it goes on (what a stopped train writes again).
    auto older_checkpoint = o;
    older_checkpoint.out = Out("kept_older");
    older_checkpoint.steps = 10;
    ASSERT_TRUE(model::Train(older_checkpoint, nullptr));
    const std::string backup = Out("kept_older_backup");
    fs::copy(older_checkpoint.out + "/checkpoint", backup, fs::copy_options::recursive);
    older_checkpoint.resume = true;
    older_checkpoint.steps = 30;
    ASSERT_TRUE(model::Train(older_checkpoint, nullptr));
    const std::string step20 = Bytes(older_checkpoint.out + "/run/ssa/checkpoint-20/model.safetensors");
    fs::remove_all(older_checkpoint.out + "/checkpoint");
    fs::copy(backup, older_checkpoint.out + "/checkpoint", fs::copy_options::recursive);
    older_checkpoint.steps = 40;
    auto replaced = model::Train(older_checkpoint, nullptr);
    ASSERT_FALSE(replaced);
    EXPECT_NE(replaced.error().find("holds kept steps after the checkpoint's step 10 of another schedule (ssa/checkpoint-"), std::string::npos)
        << replaced.error();
    EXPECT_NE(replaced.error().find("(of --steps 30)"), std::string::npos) << replaced.error();
    EXPECT_EQ(Bytes(older_checkpoint.out + "/run/ssa/checkpoint-20/model.safetensors"), step20);
    older_checkpoint.steps = 30;
    auto again = model::Train(older_checkpoint, nullptr);
    ASSERT_TRUE(again) << again.error();
    EXPECT_TRUE(fs::exists(older_checkpoint.out + "/run/ssa/checkpoint-30"));

    // A run trained without --keep-checkpoints, resumed with it beside another run's kept steps:
    // its steps wait in run.new/ and replace run/ whole at the end, never mixed into it (they went
    // into run/ over the other run's checkpoint-30 and -40).
    auto plain = o;
    plain.out = Out("kept_plain");
    ASSERT_TRUE(model::Train(plain, nullptr));  // seed 1, steps 0..30 kept
    plain.keep_checkpoints = false;
    plain.seed = o.seed + 1;
    plain.steps = 20;
    ASSERT_TRUE(model::Train(plain, nullptr));
    EXPECT_TRUE(fs::exists(plain.out + "/run/ssa/checkpoint-0")) << "a run that keeps nothing leaves run/ alone";
    plain.keep_checkpoints = true;
    plain.resume = true;
    plain.steps = 30;
    stop = false;  // stopped before its first checkpoint: the empty run.new/ it made is no other run's
    ASSERT_FALSE(model::Train(plain, [&](const model::TrainProgress& p) { stop = p.step >= 21; }, &stop));
    EXPECT_TRUE(fs::is_empty(plain.out + "/run.new"));
    EXPECT_TRUE(model::Resumable(plain));
    auto continued = model::Train(plain, nullptr);
    ASSERT_TRUE(continued) << continued.error();
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(plain.out + "/run/ssa")) names.push_back(e.path().filename().string());
    EXPECT_EQ(names, std::vector<std::string>{"checkpoint-30"});
    EXPECT_EQ(json::parse(Bytes(plain.out + "/run/ssa/checkpoint-30/train.json"))["seed"], plain.seed);

    // A step being written when its process was killed (kill -9): its temporary folder and the
    // temporary file inside are train's own, not a reason to refuse the folder ever after.
    const std::string killed = o.out + "/run/ssa/.checkpoint-13.ssaviz-AbCdEf";
    fs::create_directories(killed);
    std::ofstream(killed + "/.model.safetensors.ssaviz-4242-7.tmp") << "half";
    EXPECT_TRUE(model::CheckTrainOutput(o)) << model::CheckTrainOutput(o).error();
    std::ofstream(killed + "/.notes.txt.ssaviz-4242-7.tmp") << "not ours";
    EXPECT_FALSE(model::CheckTrainOutput(o));
    fs::remove_all(killed);

    std::ofstream(o.out + "/run/ssa/notes.txt") << "mine";
    auto refused = model::Train(o, nullptr);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().find("notes.txt"), std::string::npos) << refused.error();
    EXPECT_TRUE(fs::exists(o.out + "/run/ssa/checkpoint-30")) << "nothing of a folder train cannot prove its own is deleted";
}
