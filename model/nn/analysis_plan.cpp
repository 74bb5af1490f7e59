// The plan of an analysis (analysis_plan_torch.h): the rows kept, the runs and their what-ifs.
#include "model/nn/analysis_plan_torch.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <torch/cuda.h>

#include "model/io/files.h"
#include "model/nn/attention_maps_torch.h"
#include "model/nn/fused_attention_torch.h"
#include "model/nn/linear.h"
#include "model/nn/metrics.h"
#include "model/nn/runtime.h"

namespace model {

namespace {

// Per-layer edits on the device for a batch of rows, [H, 1] each for one row and [B, H, 1] for
// more; a layer no row edits has undefined tensors. Every term dropped and the value side off
// make tau_q = position 1 + token 0 and tau_v = 1 exactly, as a vanilla pass has them, so a
// batch can hold the SSA side and its counterfactual. Every layer's masks and scales are made on
// the host and sent in two copies, [L, 4, B H] bytes and [L, B H] floats: a copy to a device waits
// for it to finish its work, and one a layer and mask made 5 L of them.
std::vector<TemperatureEdit> MakeEdits(const std::vector<Intervention>& interventions, const ModelConfig& c, at::Device device,
                                       const std::vector<RowEdit>& rows) {
    const int64_t L = c.n_layer, B = static_cast<int64_t>(rows.size()), H = c.n_head, n = B * H;
    enum Mask { KeepPosition, KeepToken, ValueOff, Scaled, kMasks };
    at::Tensor masks = at::empty({L, kMasks, n}, at::kByte), scales = at::ones({L, n}, at::kFloat);
    std::vector<bool> any(L, false);
    for (int64_t l = 0; l < L; ++l) {
        uint8_t* m = masks.data_ptr<uint8_t>() + l * kMasks * n;
        uint8_t *position = m + KeepPosition * n, *token = m + KeepToken * n, *value_off = m + ValueOff * n, *scaled = m + Scaled * n;
        float* scale = scales.data_ptr<float>() + l * n;
        std::fill_n(position, n, 1);
        std::fill_n(token, n, 1);
        std::fill_n(value_off, n, 0);
        for (int64_t b = 0; b < B; ++b) {
            if (rows[b] == RowEdit::Vanilla) {
                any[l] = true;
                std::fill_n(position + b * H, H, 0);
                std::fill_n(token + b * H, H, 0);
                std::fill_n(value_off + b * H, H, 1);
                continue;
            }
            if (rows[b] != RowEdit::Interventions) continue;
            for (const Intervention& x : interventions) {
                if (x.layer != l) continue;
                any[l] = true;
                for (int64_t h = 0; h < H; ++h) {
                    if (x.head >= 0 && x.head != h) continue;
                    const int64_t i = b * H + h;
                    switch (x.kind) {
                        case Intervention::Kind::Ablate: position[i] = token[i] = 0; value_off[i] = 1; break;
                        case Intervention::Kind::PositionOnly: token[i] = 0; break;
                        case Intervention::Kind::TokenOnly: position[i] = 0; break;
                        case Intervention::Kind::Scale: scale[i] *= x.scale; break;
                        case Intervention::Kind::QueryOff: position[i] = token[i] = 0; break;
                        case Intervention::Kind::ValueOff: value_off[i] = 1; break;
                    }
                }
            }
        }
        for (int64_t i = 0; i < n; ++i) scaled[i] = scale[i] != 1;
    }
    std::vector<TemperatureEdit> edits(L);
    if (std::none_of(any.begin(), any.end(), [](bool a) { return a; })) return edits;
    const at::Tensor on_device = masks.to(device, at::kBool), scales_on_device = scales.to(device);
    const std::vector<int64_t> shape = B == 1 ? std::vector<int64_t>{H, 1} : std::vector<int64_t>{B, H, 1};
    for (int64_t l = 0; l < L; ++l) {
        if (!any[l]) continue;
        const at::Tensor m = on_device[l];
        const uint8_t* value_off = masks.data_ptr<uint8_t>() + (l * kMasks + ValueOff) * n;
        const uint8_t* scaled = masks.data_ptr<uint8_t>() + (l * kMasks + Scaled) * n;
        auto any = [n](const uint8_t* mask) { return std::any_of(mask, mask + n, [](uint8_t v) { return v != 0; }); };
        edits[l] = {m[KeepPosition].view(shape), m[KeepToken].view(shape), m[ValueOff].view(shape), scales_on_device[l].view(shape),
                    m[Scaled].view(shape), any(value_off), any(scaled)};
    }
    return edits;
}

}  // namespace

const std::vector<TemperatureEdit>& TemperatureEditsMemo::Get(const std::vector<Intervention>& interventions, const ModelConfig& c,
                                                              at::Device device, const std::vector<RowEdit>& rows) {
    auto same = [&](const Entry& e) {
        return e.layers == c.n_layer && e.heads == c.n_head && e.device == device && e.rows == rows && e.interventions == interventions;
    };
    auto it = std::find_if(m_entries.begin(), m_entries.end(), same);
    if (it == m_entries.end()) {
        if (m_entries.size() == kEntries) m_entries.pop_back();
        it = m_entries.insert(m_entries.begin(), Entry{interventions, c.n_layer, c.n_head, device, rows, MakeEdits(interventions, c, device, rows)});
    } else if (it != m_entries.begin()) {
        std::rotate(m_entries.begin(), it, it + 1);
        it = m_entries.begin();
    }
    return it->edits;
}

AnalysisPlan PlanAnalysis(const PlanInputs& in, const std::vector<int32_t>& ids, const std::vector<int32_t>& old_ids, int old_pool, bool reuse) {
    AnalysisPlan plan;
    const int64_t T = static_cast<int64_t>(ids.size());
    plan.T = T;
    plan.device = in.device;
    if (reuse) {
        const size_t n = std::min(old_ids.size(), ids.size());
        while (plan.p < static_cast<int64_t>(n) && old_ids[plan.p] == ids[plan.p]) ++plan.p;
    }
    const int pool = ThumbnailPool(static_cast<int>(T));
    plan.pool = pool;
    plan.cells = (T + pool - 1) / pool;
    plan.first_block_row = pool == old_pool ? plan.p / pool * pool : 0;
    plan.old_tail_first = pool == old_pool && !old_ids.empty() ? (static_cast<int64_t>(old_ids.size()) - 1) / pool * pool : AnalysisPlan::kNoTail;

    const ModelConfig& c = in.ssa->config;
    const std::vector<Intervention>& whatifs = *in.interventions;
    const bool local = in.comparison == Comparison::LayerLocal;
    const bool vanilla = in.comparison == Comparison::Counterfactual || in.comparison == Comparison::Base;  // the second row at tau = 1
    TemperatureEditsMemo fresh;
    TemperatureEditsMemo& edits = in.edits ? *in.edits : fresh;
    auto edited = [&](const std::vector<Intervention>& x, const std::vector<RowEdit>& rows) { return edits.Get(x, c, in.device, rows); };
    if (!local && !in.twin)
        plan.runs.push_back({in.ssa, {Side::Ssa, Side::Compare}, edited(whatifs, {RowEdit::Interventions, vanilla ? RowEdit::Vanilla : RowEdit::None})});
    else
        plan.runs.push_back({in.ssa, {Side::Ssa}, edited(whatifs, {RowEdit::Interventions})});
    if (in.twin) plan.runs.push_back({in.twin, {Side::Compare}, edited({}, {RowEdit::None})});
    if (in.base) plan.runs.push_back({in.base, {Side::Base}, edited({}, {RowEdit::None})});
    plan.sides = {Side::Ssa, Side::Compare};
    if (in.base) {
        plan.sides.push_back(Side::Base);
        plan.pairs = kSidePairCount;
    }
    for (size_t r = 0; r < plan.runs.size(); ++r)
        for (int i = 0; i < plan.runs[r].Rows(); ++i) plan.source[plan.runs[r].sides[i]] = {static_cast<int>(r), i, false};
    if (local) plan.source[Side::Compare] = {0, 0, true};

    const int64_t fit = static_cast<int64_t>(BlockBytes(in.device) / (sizeof(float) * static_cast<size_t>(c.n_head) * static_cast<size_t>(T)));
    plan.block = std::max<int64_t>(pool, fit / pool * pool);
    const int64_t fused_fit = static_cast<int64_t>(BlockBytes(in.device) / (sizeof(float) * 4 * static_cast<size_t>(c.n_head) * static_cast<size_t>(plan.cells)));
    plan.fused_block = std::max(plan.block, fused_fit / pool * pool);
    const AnalyzeOptions::LayerProducts asked =
        in.layer_products == AnalyzeOptions::LayerProducts::Auto ? LayerProductsOfEnvironment() : in.layer_products;
    plan.whole_layer_products = asked == AnalyzeOptions::LayerProducts::Auto ? !in.device.is_cpu() : asked == AnalyzeOptions::LayerProducts::Whole;
    int64_t widest = 1;  // floats a row, every batch row of a run
    for (const Run& run : plan.runs) {
        const ModelConfig& rc = run.model->config;
        const int64_t qkv = int64_t{rc.n_head + 2 * rc.KvHeads()} * rc.HeadSize();
        const int64_t mlp = int64_t{rc.MlpWidth()} * (rc.mlp == MlpKind::SwiGlu ? 2 : 1);
        widest = std::max(widest, run.Rows() * std::max(qkv, mlp));
    }
    plan.product_rows = std::max<int64_t>(1, static_cast<int64_t>(ProductBytes(in.device) / sizeof(float)) / widest);
    return plan;
}

at::Tensor AnalysisPlan::Join(const at::Tensor& old, const at::Tensor& rows) const {
    return p > 0 ? at::cat({old.narrow(1, 0, p), rows}, 1) : rows.contiguous();
}

at::Tensor AnalysisPlan::Join(const at::Tensor& old, const std::vector<at::Tensor>& parts) const {
    if (parts.empty()) return old.narrow(1, 0, T);
    return Join(old, parts.size() == 1 ? parts[0] : at::cat(parts, 1));
}

at::Tensor NewRows(const std::vector<at::Tensor>& parts) {
    return parts.empty() ? at::Tensor() : parts.size() == 1 ? parts[0] : at::cat(parts, 1);
}

size_t DeviceBlockBytes(const char* setting, bool* unreadable) {
    if (!setting) return kDeviceBlockBytes;
    size_t mb = 0;
    const size_t digits = std::strspn(setting, "0123456789");
    if (digits > 0 && digits <= 5 && setting[digits] == '\0') mb = std::strtoul(setting, nullptr, 10);
    if (mb >= 1 && mb <= 65536) return mb << 20;
    *unreadable = true;
    return kDeviceBlockBytes;
}

size_t BlockBytes(const at::Device& device) {
    if (device.is_cpu()) return kBlockBytes;
    static const size_t bytes = [] {  // read once: the environment does not change under a process
        const char* setting = std::getenv("SSAVIZ_DEVICE_BLOCK_MB");
        bool unreadable = false;
        const size_t b = DeviceBlockBytes(setting, &unreadable);
        if (unreadable)
            std::fprintf(stderr, "ssaviz: SSAVIZ_DEVICE_BLOCK_MB='%s' is not a whole number of MB from 1 to 65536; blocks of %zu MB\n",
                         EscapeForMessage(setting, 40).c_str(), b >> 20);
        return b;
    }();
    return bytes;
}

AnalyzeOptions::LayerProducts LayerProductsSetting(const char* setting, bool* unreadable) {
    if (!setting) return AnalyzeOptions::LayerProducts::Auto;
    if (std::strcmp(setting, "whole") == 0) return AnalyzeOptions::LayerProducts::Whole;
    if (std::strcmp(setting, "blocks") == 0) return AnalyzeOptions::LayerProducts::Blocks;
    *unreadable = true;
    return AnalyzeOptions::LayerProducts::Auto;
}

AnalyzeOptions::LayerProducts LayerProductsOfEnvironment() {
    static const AnalyzeOptions::LayerProducts asked = [] {  // read once: the environment does not change under a process
        const char* setting = std::getenv("SSAVIZ_LAYER_PRODUCTS");
        bool unreadable = false;
        const AnalyzeOptions::LayerProducts setting_read = LayerProductsSetting(setting, &unreadable);
        if (unreadable)
            std::fprintf(stderr, "ssaviz: SSAVIZ_LAYER_PRODUCTS='%s' is neither whole nor blocks; %s\n", EscapeForMessage(setting, 40).c_str(),
                         "whole on a device, blocks on the CPU");
        return setting_read;
    }();
    return asked;
}

std::vector<std::string> ComputeSettings(const at::Device& device) {
    std::vector<std::string> lines;
    const bool cpu = device.is_cpu();
    constexpr const char* kUnchecked = " (not yet checked on a device)";
    if (Tf32x3Products()) {
        if (!Tf32x3ProductsOn(device))
            lines.emplace_back("SSAVIZ_PRODUCTS=tf32x3 unused: this device has no TF32 tensor cores, so its products stay float32");
        else if (cpu)
            lines.emplace_back("SSAVIZ_PRODUCTS=tf32x3: products of 128 rows or more in three TF32 parts, emulated on the CPU for tests "
                               "(three times the products' arithmetic), within float32's rounding");
        else
            lines.emplace_back(std::string("SSAVIZ_PRODUCTS=tf32x3: the weights' and scores' products of 128 rows or more on TF32 tensor "
                                           "cores in three parts, within float32's rounding") + kUnchecked);
    }
    const AnalyzeOptions::LayerProducts layer = LayerProductsOfEnvironment();
    if (cpu && layer == AnalyzeOptions::LayerProducts::Whole)
        lines.emplace_back("SSAVIZ_LAYER_PRODUCTS=whole: each layer's weights over all its new rows at once (the CPU's default: a block of rows "
                           "at a time)");
    if (!cpu && layer == AnalyzeOptions::LayerProducts::Blocks)
        lines.emplace_back("SSAVIZ_LAYER_PRODUCTS=blocks: each block of rows through the whole layer (a device's default: a layer's weights over "
                           "all its new rows at once)");
    if (!cpu && BlockBytes(device) != kDeviceBlockBytes)
        lines.push_back("SSAVIZ_DEVICE_BLOCK_MB=" + std::to_string(BlockBytes(device) >> 20) + ": attention rows of that many MB at a time (256 by default)");
    if (FusedAttention()) {
        const bool whole = layer == AnalyzeOptions::LayerProducts::Whole || (!cpu && layer == AnalyzeOptions::LayerProducts::Auto);
        const char* what = "SSAVIZ_FUSED_ATTENTION=1";
        if (!whole)
            lines.push_back(std::string(what) + " unused: it takes a layer's weights over every new row at once" +
                            (cpu ? " (SSAVIZ_LAYER_PRODUCTS=whole on the CPU, for tests)" : " (not SSAVIZ_LAYER_PRODUCTS=blocks)"));
        else if (cpu)
            lines.push_back(std::string(what) + ": a block's attention rows measured, pooled and applied to the values in one step; on the CPU "
                                                "by the unfused way's own ops, for tests");
        else if (!device.is_cuda() || !HasCudaKernels() || !Tf32Device(device))
            lines.push_back(std::string(what) + " unused: it needs CUDA's TF32 tensor cores (compute capability 8.0 on) and this build's kernels");
        else
            lines.push_back(std::string(what) + ": a block's attention rows never written: one kernel measures them, pools them and applies "
                                                "them to the values, in blocks of as many rows as their thumbnail cells fit in the block size (head sizes 16, 32, 64 "
                                                "and 128; others the unfused way)" + kUnchecked);
    }
    if (device.is_cuda() && HasCudaKernels()) {
        const CudaSwitches& k = CudaSwitchesOfEnvironment();
        if (!k.softmax) lines.emplace_back("SSAVIZ_CUDA_SOFTMAX=0: torch's softmax for the attention rows instead of the kernel");
        if (k.temperatures) lines.emplace_back(std::string("SSAVIZ_CUDA_TEMPERATURES=1: the temperatures in one kernel") + kUnchecked);
        if (k.softmax_measures)
            lines.emplace_back(std::string("SSAVIZ_CUDA_SOFTMAX_MEASURES=1: the attention rows' softmax and statistics in one kernel") + kUnchecked);
        if (k.predictions) lines.emplace_back(std::string("SSAVIZ_CUDA_PREDICTIONS=1: the predictions' top ten and ranks in one kernel") + kUnchecked);
    }
    return lines;
}

void WaitForDevice(const at::Device& device) {
    if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);
}

}  // namespace model
