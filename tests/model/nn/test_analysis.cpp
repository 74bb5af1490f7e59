// Engine::Analyze at more tokens than a thumbnail has cells: the maps it rebuilds on demand, its
// thumbnails and its layer-by-layer metrics against model::Forward's full [L, H, T, T] capture of
// the same model (whose maps tests/model/nn/test_parity.cpp checks against PyTorch).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "model/nn/analysis.h"
#include "model/nn/analysis_plan_torch.h"
#include "model/nn/metrics.h"
#include "model/nn/forward.h"
#include "model/nn/model_folder_torch.h"

namespace {

namespace fs = std::filesystem;
using model::MapSide;

// 300 tokens: thumbnails pool 2 x 2 blocks (kThumbnailCells is 256), the last block half full.
constexpr int kTokens = 300;

class OnDemandMaps : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        ASSERT_EQ(model::kThumbnailCells, 256) << "kTokens is chosen for 256-cell thumbnails";
        // One folder per process: CTest runs this suite's tests in parallel processes, and one
        // removing the folder while another reads it made the other's set-up fail (reported as skipped).
        const std::string dir = SSAVIZ_TEST_OUT "/analysis/model-" + std::to_string(::getpid());
        fs::remove_all(dir);
        model::ModelConfig c;
        c.n_layer = 2;
        c.n_head = 3;
        c.n_embd = 24;
        c.n_positions = 512;
        c.vocab_size = 1;  // the tokenizer's
        c.query = {model::PositionForm::Sigmoid, model::TokenForm::Shared, model::Combine::Sum};
        c.value = {model::PositionForm::None, model::TokenForm::Feature, model::Combine::Sum};
        auto written = model::WriteRandomModel(c, 5, SSAVIZ_SOURCE_DIR "/assets/tokenizers/gpt2", dir);
        ASSERT_TRUE(written.ok()) << written.error();
        auto engine = model::Engine::Open(dir, "cpu");
        ASSERT_TRUE(engine.ok()) << engine.error();
        s_engine = (*engine).release();
        auto gpt = model::LoadSsaGptFolder(dir, at::kCPU);
        ASSERT_TRUE(gpt.ok()) << gpt.error();
        s_gpt = new model::SsaGpt(std::move(*gpt));

        model::Tokenization tokens;
        for (int i = 0; i < kTokens; ++i) {
            tokens.ids.push_back((i * 7919 + 13) % 50000);
            tokens.pieces.push_back("x");
            tokens.offsets.push_back({0, 0});
        }
        auto analysis = s_engine->Analyze(tokens);
        ASSERT_TRUE(analysis.ok()) << analysis.error();
        s_analysis = new model::Analysis(std::move(*analysis));
        auto ssa = model::Forward(*s_gpt, tokens.ids);
        model::ForwardOptions vanilla;
        vanilla.vanilla = true;
        auto other = model::Forward(*s_gpt, tokens.ids, vanilla);
        ASSERT_TRUE(ssa.ok() && other.ok());
        s_full = new at::Tensor[2]{ssa->attention, other->attention};
    }
    static void TearDownTestSuite() {
        delete s_analysis;
        delete[] s_full;
        delete s_gpt;
        delete s_engine;
    }
    static at::Tensor Full(MapSide side, int l, int h) { return s_full[side == MapSide::Ssa ? 0 : 1][l][h]; }

    static model::Engine* s_engine;
    static model::SsaGpt* s_gpt;
    static model::Analysis* s_analysis;
    static at::Tensor* s_full;  // Forward's attention, SSA and vanilla: [L, H, T, T] each
};
model::Engine* OnDemandMaps::s_engine = nullptr;
model::SsaGpt* OnDemandMaps::s_gpt = nullptr;
model::Analysis* OnDemandMaps::s_analysis = nullptr;
at::Tensor* OnDemandMaps::s_full = nullptr;

// The rebuilt map runs the forward pass's own AttentionWeights on the captured q, k and tau_q;
// one head's matmul against the batched one may round differently in the last bit.
TEST_F(OnDemandMaps, EveryHeadRebuildsForwardsMap) {
    ASSERT_TRUE(s_analysis);
    const model::Analysis& a = *s_analysis;
    for (MapSide side : {MapSide::Ssa, MapSide::Compare})
        for (int l = 0; l < a.n_layer; ++l)
            for (int h = 0; h < a.n_head; ++h) {
                const model::HeadMap map = a.Map(side, l, h);
                ASSERT_TRUE(map) << l << "," << h;
                ASSERT_EQ(map->size(), static_cast<size_t>(kTokens) * kTokens);
                const at::Tensor want = Full(side, l, h).contiguous();
                const float* w = want.data_ptr<float>();
                float worst = 0;
                for (size_t k = 0; k < map->size(); ++k) worst = std::max(worst, std::abs((*map)[k] - w[k]));
                EXPECT_LE(worst, 1e-6f) << "side " << static_cast<int>(side) << " layer " << l << " head " << h;
                EXPECT_EQ(a.Cells(side, l, h).get(), a.Cells(side, l, h).get()) << "a second request is served from the cache";
                EXPECT_EQ(a.Map(side, l, h).get(), map.get()) << "and so is the host's copy";
            }
    EXPECT_FALSE(a.Map(MapSide::Ssa, a.n_layer, 0));
    EXPECT_FALSE(a.Map(MapSide::Ssa, 0, -1));
}

// The map view's reading of a head (Analysis::Cells): the same map as Map, read in parts (Map
// copies the kept map whole). Levels and extents are checked against loops in test_map_cells.cpp.
TEST_F(OnDemandMaps, CellsReadTheHeadsMapInParts) {
    ASSERT_TRUE(s_analysis);
    const model::Analysis& a = *s_analysis;
    const int T = kTokens;
    for (MapSide side : {MapSide::Ssa, MapSide::Compare}) {
        const model::HeadMap map = a.Map(side, 1, 2);
        const model::MapCellsPtr cells = a.Cells(side, 1, 2);
        ASSERT_TRUE(map && cells);
        ASSERT_EQ(cells->Tokens(), T);
        EXPECT_EQ(cells->Cells(0, 0, 0, T, T), *map);
        EXPECT_EQ(cells->Row(T - 1), std::vector<float>(map->end() - T, map->end()));
        EXPECT_EQ(cells->At(T - 1, 5), (*map)[static_cast<size_t>(T - 1) * T + 5]);
        const model::MapExtent e = cells->Extent(), want = model::HostMapExtent(map->data(), T);
        EXPECT_EQ(e.max, want.max);
        EXPECT_EQ(e.min_positive, want.min_positive);
        EXPECT_GT(e.max, 0.0f);
    }
    const model::MapCellsPtr d = a.Cells(MapSide::Ssa, 0, 1)->Minus(*a.Cells(MapSide::Compare, 0, 1));
    ASSERT_TRUE(d);
    const model::HeadMap p = a.Map(MapSide::Ssa, 0, 1), q = a.Map(MapSide::Compare, 0, 1);
    EXPECT_EQ(d->At(200, 100), (*p)[200 * T + 100] - (*q)[200 * T + 100]);
    EXPECT_FALSE(a.Cells(MapSide::Ssa, a.n_layer, 0));
    EXPECT_FALSE(a.Cells(MapSide::Base, 0, 0)) << "no base beside this model";
}

// Thumbnails are block maxima of pool x pool tokens (the difference: the value of largest
// magnitude, the positive one when the magnitudes agree to 1e-5), computed here by plain loops
// over Forward's maps.
TEST_F(OnDemandMaps, ThumbnailsAreBlockMaxima) {
    ASSERT_TRUE(s_analysis);
    const model::Analysis& a = *s_analysis;
    const model::Thumbnails& t = a.thumbnails;
    ASSERT_EQ(t.pool, 2);
    ASSERT_EQ(t.side, 150);
    const size_t count = static_cast<size_t>(a.n_layer) * a.n_head * t.side * t.side;
    const std::vector<float> ssa = t.All(model::ThumbnailKind::Ssa), compare = t.All(model::ThumbnailKind::Compare),
                             difference = t.All(model::ThumbnailKind::Difference);
    ASSERT_EQ(ssa.size(), count);
    ASSERT_EQ(compare.size(), count);
    ASSERT_EQ(difference.size(), count);
    for (int l = 0; l < a.n_layer; ++l)
        for (int h = 0; h < a.n_head; ++h) {
            const at::Tensor p = Full(MapSide::Ssa, l, h).contiguous(), q = Full(MapSide::Compare, l, h).contiguous();
            const float *pp = p.data_ptr<float>(), *qq = q.data_ptr<float>();
            for (int bi = 0; bi < t.side; ++bi)
                for (int bj = 0; bj < t.side; ++bj) {
                    float max_p = -1, max_q = -1, up = -2, down = -2;
                    for (int i = bi * t.pool; i < std::min(kTokens, (bi + 1) * t.pool); ++i)
                        for (int j = bj * t.pool; j < std::min(kTokens, (bj + 1) * t.pool); ++j) {
                            const size_t k = static_cast<size_t>(i) * kTokens + j;
                            max_p = std::max(max_p, pp[k]);
                            max_q = std::max(max_q, qq[k]);
                            up = std::max(up, pp[k] - qq[k]);
                            down = std::max(down, qq[k] - pp[k]);
                        }
                    const size_t at = (static_cast<size_t>(l) * a.n_head + h) * t.side * t.side + static_cast<size_t>(bi) * t.side + bj;
                    // Within rounding of Forward's maps, as the rebuilt maps above: the analysis runs the
                    // SSA side and its counterfactual as one batch, whose kernels may round the last bit apart.
                    ASSERT_NEAR(ssa[at], max_p, 1e-6f) << l << "," << h << " block " << bi << "," << bj;
                    ASSERT_NEAR(compare[at], max_q, 1e-6f) << l << "," << h << " block " << bi << "," << bj;
                    // The difference block keeps the value of largest magnitude with its sign. Each map is
                    // within 1e-6 of Forward's, so a difference within 2e-6: where the largest rise and
                    // the largest fall are that close in size, either is right (which one the engine
                    // kept depends on how the BLAS rounded, e.g. OpenBLAS's SkylakeX kernels).
                    const float magnitude = std::max(up, down), tie = 2e-6f;
                    const float kept = difference[at];
                    ASSERT_NEAR(std::abs(kept), magnitude, tie) << l << "," << h << " block " << bi << "," << bj;
                    if (std::abs(kept) > tie) {
                        ASSERT_GE(kept > 0 ? up : down, magnitude - tie)
                            << l << "," << h << " block " << bi << "," << bj << ": kept " << kept << ", rise " << up << ", fall " << down;
                    }
                }
        }
}

// Measured layer by layer, the metrics equal those of the whole capture at once.
TEST_F(OnDemandMaps, LayerByLayerMetricsEqualTheWholeCapture) {
    ASSERT_TRUE(s_analysis);
    const model::Analysis& a = *s_analysis;
    const model::MapComparison whole = model::CompareMaps(s_full[0], s_full[1]);
    auto expect_same = [](const model::RowArray& rows, const at::Tensor& want, const char* what) {
        const std::vector<float> got = rows.Flat();
        const at::Tensor w = want.to(at::kFloat).contiguous();
        ASSERT_EQ(got.size(), static_cast<size_t>(w.numel())) << what;
        for (size_t k = 0; k < got.size(); ++k) {
            const float x = got[k], y = w.data_ptr<float>()[k];
            if (std::isnan(x) || std::isnan(y)) ASSERT_TRUE(std::isnan(x) && std::isnan(y)) << what << " at " << k;
            else ASSERT_NEAR(x, y, 1e-5f * std::max(1.0f, std::abs(y))) << what << " at " << k;
        }
    };
    expect_same(a.metrics.Get("entropy"), whole.p.entropy, "entropy");
    expect_same(a.metrics.Get("spikiness"), whole.p.spikiness, "spikiness");
    expect_same(a.metrics.Get("sink_mass"), whole.p.sink_mass, "sink_mass");
    expect_same(a.metrics_compare.Get("max_weight"), whole.q.max_weight, "vanilla max_weight");
    expect_same(a.js, whole.js, "js");
    expect_same(a.l1, whole.l1, "l1");
}

// The plan's temperature edits are kept while the what-ifs, the comparison's rows and the model's
// shape are the same (typing makes none), and are the edits a fresh plan makes whatever came before.
TEST_F(OnDemandMaps, ThePlansTemperatureEditsAreKeptWhileTheWhatIfsAre) {
    using model::Intervention;
    const std::vector<int32_t> ids = {1, 2, 3, 4, 5};
    Intervention ablate, scale;
    ablate.layer = 1;
    ablate.head = 2;
    scale.kind = Intervention::Kind::Scale;
    scale.layer = 0;
    scale.head = 1;
    scale.scale = 0.5f;
    const std::vector<Intervention> a = {ablate}, b = {scale}, none;
    model::TemperatureEditsMemo memo;
    auto plan = [&](const std::vector<Intervention>& whatifs, model::Comparison comparison, model::TemperatureEditsMemo* edits) {
        return model::PlanAnalysis({s_gpt, nullptr, nullptr, comparison, &whatifs, at::Device(at::kCPU),
                                    model::AnalyzeOptions::LayerProducts::Auto, edits},
                                   ids, {}, 0, false);
    };
    auto expect_equal = [](const model::AnalysisPlan& x, const model::AnalysisPlan& y, const std::string& what) {
        ASSERT_EQ(x.runs.size(), y.runs.size()) << what;
        for (size_t r = 0; r < x.runs.size(); ++r)
            for (size_t l = 0; l < x.runs[r].edits.size(); ++l) {
                const model::TemperatureEdit &e = x.runs[r].edits[l], &f = y.runs[r].edits[l];
                const std::string at = what + ", run " + std::to_string(r) + " layer " + std::to_string(l);
                ASSERT_EQ(e.keep_position.defined(), f.keep_position.defined()) << at;
                if (!e.keep_position.defined()) continue;
                EXPECT_TRUE(at::equal(e.keep_position, f.keep_position)) << at;
                EXPECT_TRUE(at::equal(e.keep_token, f.keep_token)) << at;
                EXPECT_TRUE(at::equal(e.value_off, f.value_off)) << at;
                EXPECT_TRUE(at::equal(e.scale, f.scale)) << at;
                EXPECT_TRUE(at::equal(e.scaled, f.scaled)) << at;
                EXPECT_EQ(e.any_value_off, f.any_value_off) << at;
                EXPECT_EQ(e.any_scaled, f.any_scaled) << at;
            }
    };
    using model::Comparison;
    const model::AnalysisPlan first = plan(a, Comparison::Counterfactual, &memo);
    expect_equal(first, plan(a, Comparison::Counterfactual, nullptr), "the what-ifs a");
    ASSERT_TRUE(first.runs[0].edits[1].keep_position.defined());
    EXPECT_TRUE(first.runs[0].edits[1].value_off[0][2].item<bool>());  // the SSA row's ablated head
    EXPECT_TRUE(first.runs[0].edits[1].value_off[1][0].item<bool>());  // the tau = 1 row's every head
    EXPECT_TRUE(plan(a, Comparison::Counterfactual, &memo).runs[0].edits[1].keep_position.is_same(first.runs[0].edits[1].keep_position));
    // Other what-ifs, another comparison, none: each as a fresh plan makes them.
    const model::AnalysisPlan other = plan(b, Comparison::Counterfactual, &memo);
    expect_equal(other, plan(b, Comparison::Counterfactual, nullptr), "the what-ifs b");
    EXPECT_FALSE(other.runs[0].edits[1].keep_position.is_same(first.runs[0].edits[1].keep_position));
    EXPECT_TRUE(other.runs[0].edits[0].any_scaled);
    expect_equal(plan(a, Comparison::Unedited, &memo), plan(a, Comparison::Unedited, nullptr), "a against the unedited model");
    expect_equal(plan(none, Comparison::Unedited, &memo), plan(none, Comparison::Unedited, nullptr), "no what-ifs, unedited");
    EXPECT_FALSE(plan(none, Comparison::Unedited, &memo).runs[0].edits[0].keep_position.defined());
    // The first what-ifs again: still kept.
    expect_equal(plan(a, Comparison::Counterfactual, &memo), first, "a again");
    EXPECT_TRUE(plan(a, Comparison::Counterfactual, &memo).runs[0].edits[1].keep_position.is_same(first.runs[0].edits[1].keep_position));
}

// The fused temperatures (FusedTemperature: temperature_rows.h's arithmetic, which a device runs as
// one kernel) against the torch ops BlockIn runs otherwise, on the CPU: every position and token
// form, both combinations, parameters shared by the heads or a head's own, with and without a bias,
// q strided as BlockIn's, the what-ifs (terms kept or dropped, tau scaled), positions from 1 and
// from an edit's row; the value side without what-ifs. Within 1e-6 (relative above 1): the dot
// products sum in their own order, and the CPU's torch ops take their exp and tanh from SLEEF.
TEST(Temperatures, TheFusedArithmeticEqualsTheTorchOps) {
    c10::InferenceMode guard;
    using model::Combine, model::PositionForm, model::TokenForm;
    const int64_t B = 2, H = 3, G = 1, R = 5, D = 4, E = 6;
    at::manual_seed(17);
    model::TemperatureEdit edit;  // [B, H, 1]: batch row 0 keeps head 1's token term only, row 1 is scaled on heads 0 and 2
    edit.keep_position = at::tensor({1, 0, 1, 1, 1, 1}, at::kInt).to(at::kBool).view({B, H, 1});
    edit.keep_token = at::tensor({1, 1, 0, 1, 1, 1}, at::kInt).to(at::kBool).view({B, H, 1});
    edit.value_off = at::zeros({B, H, 1}, at::kBool);
    edit.scale = at::tensor({1.0f, 1.0f, 1.0f, 0.25f, 1.0f, -2.0f}).view({B, H, 1});
    edit.scaled = edit.scale != 1;
    edit.any_scaled = true;
    float worst = 0;
    int cases = 0;
    for (const PositionForm position : {PositionForm::None, PositionForm::Sigmoid, PositionForm::ExpExp, PositionForm::Linear})
        for (const TokenForm token : {TokenForm::None, TokenForm::Shared, TokenForm::Feature})
            for (const Combine combine : {Combine::Sum, Combine::Product})
                for (const bool shared : {false, true})
                    for (const bool bias : {false, true})
                        for (const int64_t first : {int64_t{0}, int64_t{37}}) {
                            const model::TemperatureForm form{position, token, combine};
                            if (!form.Active()) continue;
                            model::TemperatureParams params;
                            params.pos = shared ? at::randn({}) : at::randn({H});
                            const int64_t length = token == TokenForm::Shared ? D : E;
                            params.tok_w = shared ? at::randn({length}) : at::randn({H, length});
                            if (bias) params.tok_b = shared ? at::randn({}) : at::randn({H});
                            const at::Tensor qkv = at::randn({B, R, H + 2 * G, D}) * 2;
                            const at::Tensor q = qkv.transpose(1, 2).narrow(1, 0, H), x = at::randn({B, R, E});  // as BlockIn's
                            const std::string what = "position " + std::to_string(static_cast<int>(position)) + ", token " +
                                                     std::to_string(static_cast<int>(token)) + ", combine " + std::to_string(static_cast<int>(combine)) +
                                                     (shared ? ", shared" : "") + (bias ? ", a bias" : "") + ", first " + std::to_string(first);
                            const model::TemperatureEdit* const edits[] = {nullptr, &edit};
                            for (const model::TemperatureEdit* e : edits) {
                                model::TemperatureTerms want_terms, got_terms;
                                const at::Tensor want = model::EditedTemperature(form, params, q, x, first, e, &want_terms);
                                const at::Tensor got = model::FusedTemperature(form, params, q, x, first, e, &got_terms);
                                ASSERT_TRUE(got.defined()) << what;
                                const std::pair<at::Tensor, at::Tensor> pairs[] = {
                                    {got, want}, {got_terms.position, want_terms.position}, {got_terms.token, want_terms.token}};
                                for (const auto& [a, b] : pairs) {
                                    ASSERT_EQ(a.sizes(), b.sizes()) << what;
                                    const float w = ((a - b).abs() / b.abs().clamp_min(1)).max().item<float>();
                                    EXPECT_LE(w, 1e-6f) << what << (e ? ", what-ifs" : "");
                                    worst = std::max(worst, w);
                                }
                            }
                            const at::Tensor tau_v = model::FusedTemperature(form, params, q, x, first, nullptr, nullptr);
                            const at::Tensor want_v = model::Temperature(form, params, q, x, first);
                            EXPECT_LE(((tau_v - want_v).abs() / want_v.abs().clamp_min(1)).max().item<float>(), 1e-6f) << what << ", no terms";
                            ++cases;
                        }
    EXPECT_EQ(cases, 11 * 2 * 2 * 2 * 2);
    std::printf("the fused temperatures against the torch ops: largest difference %.3g over %d forms\n", worst, cases);
}

// The analysis's blocks of attention rows: the CPU's small, a GPU's 256 MB unless
// $SSAVIZ_DEVICE_BLOCK_MB is a whole number of MB.
TEST(AnalysisBlocks, AGpusAreAsTheSettingSaysWhenItReads) {
    constexpr size_t MB = size_t{1} << 20;
    EXPECT_EQ(model::BlockBytes(at::Device(at::kCPU)), 8 * MB);
    bool unreadable = false;
    EXPECT_EQ(model::DeviceBlockBytes(nullptr, &unreadable), 256 * MB);
    EXPECT_EQ(model::DeviceBlockBytes("1", &unreadable), 1 * MB);
    EXPECT_EQ(model::DeviceBlockBytes("1024", &unreadable), 1024 * MB);
    EXPECT_EQ(model::DeviceBlockBytes("65536", &unreadable), 65536 * MB);
    EXPECT_FALSE(unreadable);
    for (const char* bad : {"", "0", "65537", "99999", "-5", "12x", " 12", "1e3", "0x10", "18446744073709551617"}) {
        unreadable = false;
        EXPECT_EQ(model::DeviceBlockBytes(bad, &unreadable), 256 * MB) << bad;
        EXPECT_TRUE(unreadable) << bad;
    }
}

// How a layer's weight products run: $SSAVIZ_LAYER_PRODUCTS says whole or blocks, or nothing (Auto:
// whole on a device, blocks on the CPU); anything else is said to be unreadable.
TEST(AnalysisBlocks, TheLayerProductsAreAsTheSettingSays) {
    using LayerProducts = model::AnalyzeOptions::LayerProducts;
    bool unreadable = false;
    EXPECT_EQ(model::LayerProductsSetting(nullptr, &unreadable), LayerProducts::Auto);
    EXPECT_EQ(model::LayerProductsSetting("whole", &unreadable), LayerProducts::Whole);
    EXPECT_EQ(model::LayerProductsSetting("blocks", &unreadable), LayerProducts::Blocks);
    EXPECT_FALSE(unreadable);
    for (const char* bad : {"", "Whole", "whole ", "block", "1", "auto"}) {
        unreadable = false;
        EXPECT_EQ(model::LayerProductsSetting(bad, &unreadable), LayerProducts::Auto) << bad;
        EXPECT_TRUE(unreadable) << bad;
    }
}

// A RowArray holds what it was given, read back every way, at sizes either side of a band's.
TEST(RowArray, GivesBackItsValuesByRowTokenAndFlatIndex) {
    constexpr int64_t B = model::RowArray::kBand;
    for (int64_t rows : {0, 1, 3, 7})
        for (int64_t T : {int64_t{0}, int64_t{1}, B - 1, B, B + 1, 3 * B + 5}) {
            std::vector<float> flat(static_cast<size_t>(rows * T));
            for (size_t k = 0; k < flat.size(); ++k) flat[k] = static_cast<float>(k) * 0.5f - 3.0f;
            const model::RowArray a(flat, rows, T);
            const std::string what = std::to_string(rows) + " x " + std::to_string(T);
            EXPECT_EQ(a.rows(), rows) << what;
            EXPECT_EQ(a.tokens(), T) << what;
            EXPECT_EQ(a.size(), flat.size()) << what;
            EXPECT_EQ(a.empty(), flat.empty()) << what;
            EXPECT_EQ(static_cast<int64_t>(a.bands().size()), (T + B - 1) / B) << what;
            EXPECT_EQ(a.Flat(), flat) << what;
            EXPECT_TRUE(std::equal(a.begin(), a.end(), flat.begin(), flat.end())) << what;
            for (int64_t r = 0; r < rows; ++r) {
                EXPECT_EQ(a.Row(r), std::vector<float>(flat.begin() + r * T, flat.begin() + (r + 1) * T)) << what << " row " << r;
                int64_t next = 0;
                a.ForEachPart(r, [&](int64_t t, const float* v, int64_t n) {
                    EXPECT_EQ(t, next) << what;
                    EXPECT_TRUE(n > 0 && n <= B) << what;
                    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(v[i], flat[r * T + t + i]) << what << " row " << r << " token " << t + i;
                    next = t + n;
                });
                EXPECT_EQ(next, T) << what << " row " << r;
                for (int64_t t = 0; t < T; ++t) EXPECT_EQ(a.At(r, t), a[static_cast<size_t>(r * T + t)]) << what;
            }
            EXPECT_TRUE(a == model::RowArray(flat, rows, T)) << what;
            if (!flat.empty()) {
                flat.back() += 1.0f;
                EXPECT_TRUE(a != model::RowArray(flat, rows, T)) << what;
            }
        }
    // An array that ends inside a band made longer (a text cut back) continues the figures of the
    // band before over the tokens it has.
    std::vector<float> values(3 * (2 * B + 40));
    for (size_t k = 0; k < values.size(); ++k) values[k] = std::sin(static_cast<float>(k)) * 100.0f;
    const model::RowArray whole(values, 3, 2 * B + 40);
    for (int64_t T : {B + 1, 2 * B, 2 * B + 7}) {
        const auto& bands = whole.bands();
        const model::RowArray cut(3, T, {bands.begin(), bands.begin() + (T + B - 1) / B});
        for (int64_t r = 0; r < 3; ++r) {
            model::RowArray::Running one;
            one.Add(values.data() + r * (2 * B + 40), 0, T);
            const model::RowArray::Running kept = cut.Figures(r);
            EXPECT_EQ(kept.sum, one.sum) << T;
            EXPECT_EQ(kept.sum_after_first, one.sum_after_first) << T;
            EXPECT_EQ(kept.min, one.min) << T;
            EXPECT_EQ(kept.max, one.max) << T;
        }
    }
    EXPECT_TRUE(model::RowArray::Filled(2, 3, 1.5f) == model::RowArray({1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f}, 2, 3));
    EXPECT_FALSE(model::RowArray::Filled(2, 3, 1.0f) == model::RowArray::Filled(3, 2, 1.0f));  // another shape
    EXPECT_FALSE(model::RowArray::Filled(1, 1, NAN) == model::RowArray::Filled(1, 1, NAN));    // NaN equals nothing
}

// Every head's row mean and token statistics at once equal the one-head calls' to the bit, and
// both equal plain loops over the head's values in token order (the bands' running figures change
// nothing): head
// counts that are and are not multiples of four, T from 0 to 37, 1,000 and 1,025 (several bands,
// the last one partial), values spanning many magnitudes, NaN and infinities, and in every other
// head +-2^60 in turn between small values (which a double sum keeps or loses by its order: summed
// in another order, the means differ).
TEST(HeadSummaries, EveryHeadAtOnceEqualsHeadByHead) {
    uint32_t state = 5;
    auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 8; };
    auto bits = [](float f) {
        uint32_t b;
        std::memcpy(&b, &f, sizeof b);
        return b;
    };
    for (const auto& [L, H] : std::vector<std::pair<int, int>>{{1, 1}, {3, 3}, {2, 4}, {12, 12}})
        for (int T : {0, 1, 2, 3, 5, 37, 1000, 1025}) {
            model::Analysis a;
            a.n_layer = L, a.n_head = H, a.n_tokens = T;
            std::vector<float> values(static_cast<size_t>(L) * H * T);
            for (size_t j = 0; j < values.size(); ++j) {
                const uint32_t r = next();
                float& v = values[j];
                v = std::ldexp(static_cast<float>(r % 1000) / 999.0f, static_cast<int>(r % 61) - 30) * (r & 1 ? 1.0f : -1.0f);
                if (r % 4001 == 0) v = NAN;
                if (r % 4003 == 0) v = INFINITY;
                const size_t head = j / T, i = j % T;
                if (head % 2 == 1 && i % 3 != 0) v = i % 3 == 1 ? 0x1p60f : -0x1p60f;
            }
            const model::RowArray rows(values, static_cast<int64_t>(L) * H, T);
            const std::vector<float> means = model::HeadRowMeans(rows, a);
            const std::vector<model::HeadStats> stats = model::HeadTokenStatsAll(rows, a);
            ASSERT_EQ(means.size(), static_cast<size_t>(L) * H);
            ASSERT_EQ(stats.size(), static_cast<size_t>(L) * H);
            for (int l = 0; l < L; ++l)
                for (int h = 0; h < H; ++h) {
                    const size_t k = static_cast<size_t>(l) * H + h;
                    const model::HeadStats one = model::HeadTokenStats(rows, a, l, h);
                    EXPECT_EQ(bits(means[k]), bits(model::HeadRowMean(rows, a, l, h))) << L << "x" << H << " T " << T << " head " << k;
                    // The reference: the head's values in order, as one array, in plain loops.
                    double sum = 0, sum_all = 0;
                    float lo = T > 0 ? values[k * T] : NAN, hi = lo;
                    for (int i = 0; i < T; ++i) {
                        const float v = values[k * T + i];
                        if (i > 0) sum += v;
                        sum_all += v;
                        lo = std::min(lo, v);
                        hi = std::max(hi, v);
                    }
                    if (T > 1) {
                        EXPECT_EQ(bits(means[k]), bits(static_cast<float>(sum / (T - 1)))) << L << "x" << H << " T " << T << " head " << k;
                    }
                    if (T > 0) {
                        EXPECT_EQ(bits(stats[k].mean), bits(static_cast<float>(sum_all / T))) << L << "x" << H << " T " << T << " head " << k;
                        EXPECT_EQ(bits(stats[k].min), bits(lo)) << L << "x" << H << " T " << T << " head " << k;
                        EXPECT_EQ(bits(stats[k].max), bits(hi)) << L << "x" << H << " T " << T << " head " << k;
                    }
                    EXPECT_EQ(bits(stats[k].mean), bits(one.mean)) << L << "x" << H << " T " << T << " head " << k;
                    EXPECT_EQ(bits(stats[k].min), bits(one.min)) << L << "x" << H << " T " << T << " head " << k;
                    EXPECT_EQ(bits(stats[k].max), bits(one.max)) << L << "x" << H << " T " << T << " head " << k;
                }
            // An array of another shape: NaN, as the one-head statistics give.
            values.resize(values.empty() ? 0 : static_cast<size_t>(L) * H * (T - 1));
            const model::RowArray shorter(values, static_cast<int64_t>(L) * H, T > 0 ? T - 1 : 0);
            if (T > 1) {
                for (float m : model::HeadRowMeans(shorter, a)) EXPECT_TRUE(std::isnan(m));
                EXPECT_TRUE(std::isnan(model::HeadRowMean(shorter, a, 0, 0)));
            }
            if (T > 0) {
                for (const model::HeadStats& s : model::HeadTokenStatsAll(shorter, a)) EXPECT_TRUE(std::isnan(s.mean));
            }
        }
}

}  // namespace
