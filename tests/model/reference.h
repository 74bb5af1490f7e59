// Loading the PyTorch reference cases written by tests/model/ssa_reference.py, and comparing
// tensors with a failure message that shows the largest difference and where it is.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/io/safetensors.h"
#include "model/nn/forward.h"
#include "model/nn/model_folder_torch.h"
#include "model/io/weights.h"

namespace model::testing {

struct ReferenceCase {
    bool ok = false;
    std::string error;
    SsaGpt gpt;
    std::vector<int32_t> ids;
    SafetensorsFile reference;

    // `weights`: the file in the case's folder to load (its safetensors by default, or one of the
    // torch.save checkpoints the reference wrote of the same weights), with `hints` for those
    // without a config.json beside them.
    explicit ReferenceCase(const std::string& name, const std::string& weights = "", const ConfigHints& hints = {}) {
        const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/ref/" + name;
        auto gpt_or = weights.empty() ? LoadDirect(dir) : LoadSsaGptFolder(dir + "/" + weights, at::kCPU, hints);
        if (!gpt_or) { error = gpt_or.error(); return; }
        gpt = std::move(*gpt_or);
        auto ref = SafetensorsFile::Open(dir + "/reference.safetensors");
        if (!ref) { error = ref.error(); return; }
        reference = std::move(*ref);
        std::ifstream in(dir + "/case.json");
        nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_discarded() || !j.contains("ids")) { error = dir + "/case.json: no ids"; return; }
        ids = j["ids"].get<std::vector<int32_t>>();
        ok = true;
    }

    static Result<SsaGpt> LoadDirect(const std::string& dir) {
        auto config = LoadConfig(dir + "/config.json");
        if (!config) return Fail(config.error());
        auto weights = OpenWeights(dir + "/model.safetensors");
        if (!weights) return Fail(weights.error());
        return LoadSsaGpt(*config, *weights, at::kCPU);
    }

    at::Tensor Ref(const std::string& name) const {
        const TensorInfo* info = reference.header.Find(name);
        EXPECT_NE(info, nullptr) << "reference has no tensor " << name;
        if (!info || info->dtype != Dtype::F32) return at::Tensor();
        at::Tensor t = at::empty(info->shape, at::kFloat);
        std::memcpy(t.data_ptr(), reference.Data(*info), info->end - info->begin);
        return t;
    }
};

// |got - want| <= tolerance, reporting the worst element. When relative, the tolerance is times the
// largest |want| of the element's row (last dimension), at least 1: a float32 sum rounds in
// proportion to the size of its terms, which the row's largest value bounds and a single element
// does not (a logit near 0 cancels large terms; its error then depends on which kernels summed).
inline void CheckClose(const at::Tensor& got, const at::Tensor& want, double tolerance, const std::string& what,
                       bool relative = false) {
    ASSERT_TRUE(got.defined() && want.defined()) << what << ": missing tensor";
    ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what << ": shapes differ";
    at::Tensor g = got.to(at::kCPU, at::kDouble), w = want.to(at::kCPU, at::kDouble);
    at::Tensor diff = (g - w).abs();
    if (relative) diff = diff / at::clamp_min(std::get<0>(w.abs().max(-1, /*keepdim=*/true)), 1.0);
    // NaN must match NaN (e.g. metrics of a single-key row).
    diff = at::where(at::isnan(g) & at::isnan(w), at::zeros_like(diff), diff);
    diff = at::where(at::isnan(diff), at::full_like(diff, INFINITY), diff);
    const int64_t worst = diff.flatten().argmax().item<int64_t>();
    const double max_diff = diff.flatten()[worst].item<double>();
    std::string where = "[";
    int64_t rest = worst;
    std::vector<int64_t> index(g.dim());
    for (int64_t d = g.dim() - 1; d >= 0; --d) { index[d] = rest % g.size(d); rest /= g.size(d); }
    for (size_t d = 0; d < index.size(); ++d) where += (d ? ", " : "") + std::to_string(index[d]);
    where += "]";
    EXPECT_LE(max_diff, tolerance) << what << ": max " << (relative ? "relative " : "") << "difference " << max_diff << " at "
                                   << where << " (got " << g.flatten()[worst].item<double>() << ", want "
                                   << w.flatten()[worst].item<double>() << "), tolerance " << tolerance;
}

// The SSA forward pass of a loaded case against the reference's maps, temperatures and logits.
// The temperatures relative to max(1, their row's largest), as the logits: a float32 product's
// rounding grows with its size, and a temperature is not bounded by 1 as a weight is (tau_q 3.17 of
// the product form moved by 1.07e-5, 3.4e-6 relative, under an Intel Xeon's AVX-512 kernels).
inline void ExpectForwardMatchesReference(const ReferenceCase& c, double map_tolerance, double logit_tolerance) {
    auto out = Forward(c.gpt, c.ids);
    ASSERT_TRUE(out.ok()) << out.error();
    CheckClose(out->attention, c.Ref("attention"), map_tolerance, "attention");
    CheckClose(out->tau_q, c.Ref("tau_q"), map_tolerance, "tau_q", /*relative=*/true);
    CheckClose(out->tau_v, c.Ref("tau_v"), map_tolerance, "tau_v", /*relative=*/true);
    CheckClose(out->logits, c.Ref("logits"), logit_tolerance, "logits", /*relative=*/true);
}

}  // namespace model::testing
