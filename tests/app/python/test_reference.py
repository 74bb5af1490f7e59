"""The numbers `import ssaviz` gives match the independent PyTorch references (tests/model/
ssa_reference.py, tests/model/family_reference.py) within the C++ tests' tolerances: maps,
temperatures, metrics, QK spectrum, losses and predictions, the comparisons and an ablation."""

import json
import os

import numpy as np
import pytest

import ssaviz
from conftest import FAMILIES, REFERENCE, family, read_safetensors, require


def worst(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.abs(got - want).max()) if got.size else 0.0


def maps(a, side):
    return np.stack([np.stack([a.attention(l, h, side) for h in range(a.n_head)]) for l in range(a.n_layer)])


def test_gpt2_reference_case():
    folder = require(os.path.join(REFERENCE, "paper_gpt2_vocab"))
    with open(os.path.join(folder, "case.json")) as f:
        ids = json.load(f)["ids"]
    ref = read_safetensors(os.path.join(folder, "reference.safetensors"))
    m = ssaviz.load(folder, device="cpu")
    a = m.analyze(ids)
    assert a.ids == ids
    assert worst(maps(a, "ssa"), ref["attention"]) <= 1e-5
    assert worst(maps(a, "compare"), ref["attention_vanilla"]) <= 1e-5
    assert worst(a.tau_q, ref["tau_q"]) <= 1e-5
    assert worst(a.tau_v, ref["tau_v"]) <= 1e-5
    metrics = a.metrics
    for name in ("entropy", "normalized_entropy", "spikiness", "max_weight", "top5_mass", "sink_mass"):
        assert worst(metrics[name], ref[name]) <= 2e-5, name
        assert worst(metrics[name + "_compare"], ref[name + "_vanilla"]) <= 2e-5, name
    assert worst(metrics["js"], ref["js"]) <= 2e-5
    assert worst(metrics["l1"], ref["l1"]) <= 2e-5
    for name in ("qk_opnorm", "qk_eig_mean", "qk_eig_var"):
        scale = np.maximum(1.0, np.abs(ref[name]))
        assert float((np.abs(metrics[name] - ref[name]) / scale).max()) <= 1e-5, name
    assert worst(a.loss, ref["loss"]) <= 1e-4
    assert worst(a.loss_compare, ref["loss_vanilla"]) <= 1e-4
    assert worst(a.top_probs, ref["top_probs"]) <= 1e-4
    assert (a.top_ids[:, 0] == ref["top_ids"][:, 0]).mean() > 0.9
    # The most likely next token by name, as predictions() lists it.
    first = a.predictions(3, k=3)
    assert len(first) == 3 and abs(first[0][1] - float(ref["top_probs"][3, 0])) <= 1e-4

    local = m.analyze(ids, compare="local")
    assert worst(maps(local, "compare"), ref["attention_local"]) <= 1e-5
    assert worst(local.metrics["js"], ref["js_local"]) <= 2e-5
    assert local.loss_compare is None

    if "attention_ablated" in ref:
        L, H = m.n_layer - 1, m.n_head - 1
        ablated = m.analyze(ids, compare="unedited", ablate=[(L, H)])
        assert worst(maps(ablated, "ssa"), ref["attention_ablated"]) <= 1e-5
        assert worst(ablated.loss, ref["loss_ablated"]) <= 1e-4
        assert worst(ablated.loss_compare, ref["loss"]) <= 1e-4


@pytest.mark.parametrize("case", ["pythia", "llama"])
def test_lit_gpt_family_reference(case):
    weights, meta, ref = family(case)
    flags = {"query_form": "linear"} if meta.get("query_form") == "linear" else {}
    m = ssaviz.load(require(weights), device="cpu", **flags)
    ids = meta["ids"]
    a = m.analyze(ids)
    assert worst(maps(a, "ssa"), ref["attention"]) <= 1e-4
    assert worst(maps(a, "compare"), ref["attention_vanilla"]) <= 1e-4
    assert worst(a.tau_q, ref["tau_q"]) <= 1e-4
    assert worst(a.tau_v, ref["tau_v"]) <= 1e-4
    assert worst(a.loss, ref["loss"]) <= 1e-4
    assert worst(a.loss_compare, ref["loss_vanilla"]) <= 1e-4
    assert worst(a.top_probs, ref["top_probs"]) <= 1e-4
    assert worst(a.next_logits, ref["last_logits"]) <= 1e-4 * max(1.0, float(np.abs(ref["last_logits"]).max()))

    local = m.analyze(ids, compare="local")
    assert worst(maps(local, "compare"), ref["attention_local"]) <= 1e-4

    ablated = m.analyze(ids, ablate=meta["ablate"], compare="unedited")
    assert worst(maps(ablated, "ssa"), ref["attention_ablated"]) <= 1e-4
    assert worst(ablated.loss, ref["loss_ablated"]) <= 1e-4

    if meta.get("twin"):
        twin = ssaviz.load(os.path.join(FAMILIES, meta["twin"]), device="cpu")
        t = m.analyze(ids, compare=twin)
        assert t.compare == "twin" and t.comparison_kind == "twin"
        assert worst(maps(t, "compare"), ref["attention_twin"]) <= 1e-4
        assert worst(t.loss_compare, ref["loss_twin"]) <= 1e-4


# Issue 35: the lens and attribution from Python, both sides, against the family reference.
@pytest.mark.parametrize("case", ["pythia", "llama"])
def test_lens_and_attribution_against_the_family_reference(case):
    weights, meta, ref = family(case)
    flags = {"query_form": "linear"} if meta.get("query_form") == "linear" else {}
    m = ssaviz.load(require(weights), device="cpu", **flags)
    ids = meta["ids"]
    a = m.analyze(ids)
    scale = max(1.0, float(np.abs(ref["target_logit"]).max()))
    assert worst(a.lens_loss, ref["lens_loss"]) <= 1e-4
    assert worst(a.dla, ref["dla"]) <= 1e-4 * scale
    assert worst(a.dla_mlp, ref["dla_mlp"]) <= 1e-4 * scale
    assert worst(a.dla_embed, ref["dla_embed"]) <= 1e-4 * scale
    assert worst(a.dla_const, ref["dla_const"]) <= 1e-4 * scale
    assert worst(a.dla_logit, ref["target_logit"]) <= 1e-4 * scale  # what the parts sum to, as dla_logit.npy
    assert worst(a.lens_loss_compare, ref["lens_loss_vanilla"]) <= 1e-4
    assert worst(a.dla_compare, ref["dla_vanilla"]) <= 1e-4 * scale
    assert a.comparison_kind == "tau1" and a.dla_tau1 is a.dla_compare and a.lens_loss_tau1 is a.lens_loss_compare  # by the files' name
    # The final norm's divisor each side's parts were read through, and the constants outside it:
    # another side's parts through SSA's divisor are parts * divisor_side / divisor_ssa.
    assert worst(a.dla_divisor, ref["dla_divisor"]) <= 1e-4 * float(np.abs(ref["dla_divisor"]).max())
    assert worst(a.dla_divisor_compare, ref["dla_divisor_vanilla"]) <= 1e-4 * float(np.abs(ref["dla_divisor"]).max())
    assert worst(a.dla_const_free, ref["dla_const_free"]) <= 1e-4 * scale
    through = a.dla_embed_compare * a.dla_divisor_compare / a.dla_divisor  # the same embeddings at tau = 1
    assert worst(through, a.dla_embed) <= 1e-5 * scale
    assert worst(a.lens_loss[-1], a.loss) <= 1e-5
    top = a.lens_top(m.n_layer, 3, k=3)
    assert [p for p, _ in top] == [p for p, _ in a.predictions(3, k=3)]
    t = len(ids) // 2
    parts = a.attribute(t, ids[t + 1])
    assert parts["heads"].shape == (a.n_layer, a.n_head)
    assert abs(float(parts["heads"][1, 0]) - float(a.dla[1, 0, t])) <= 1e-4 * scale
    total = parts["heads"].sum() + parts["mlp"].sum() + parts["embed"] + parts["const"]
    assert abs(total - float(ref["target_logit"][t])) <= 1e-4 * scale
    # The divisor the parts were read through, and tau = 1's parts read through SSA's: the same
    # embeddings read the same, and the side's own divisor's part makes up its logit.
    assert abs(parts["divisor"] - float(ref["dla_divisor"][t])) <= 1e-4 * float(np.abs(ref["dla_divisor"]).max())
    assert abs(parts["const_free"] - float(ref["dla_const_free"][t])) <= 1e-4 * scale
    own = a.attribute(t, ids[t + 1], side="compare")
    through = a.attribute(t, ids[t + 1], side="compare", through="ssa")
    assert "final_norm" not in own and abs(own["divisor"] - float(ref["dla_divisor_vanilla"][t])) <= 1e-4 * float(np.abs(ref["dla_divisor"]).max())
    assert through["ssa_divisor"] == parts["divisor"] and through["divisor"] == own["divisor"]
    assert abs(through["embed"] - parts["embed"]) <= 1e-5 * scale  # the embeddings: one vector on both sides
    assert abs(through["heads"][1, 0] - own["heads"][1, 0] * own["divisor"] / parts["divisor"]) <= 1e-5 * scale
    total = through["heads"].sum() + through["mlp"].sum() + through["embed"] + through["const"] + through["final_norm"]
    assert abs(total - own["logit"]) <= 1e-4 * scale
    assert through["logit"] == own["logit"]  # the side's own logit, however its parts are read
    assert a.attribute(t, ids[t + 1], through="ssa")["final_norm"] == 0.0  # SSA through its own divisor: nothing, not float32's residue
    with pytest.raises(ValueError, match=r"is not one of ssa, compare \(or tau1\), diff, base, base_diff, drift$"):
        a.lens_grid(map="nope")
    with pytest.raises(ValueError, match='through must be "own" or "ssa"'):
        a.attribute(t, ids[t + 1], through="base")
    with pytest.raises(ValueError, match="position 100000 is out of range"):
        a.attribute(100000, 1)
    with pytest.raises(ValueError, match="layer 99 is out of range"):
        a.lens_top(99, 0)
    # The layer-local comparison's lens: each layer again at tau = 1 on SSA's input; its parts with
    # SSA's final scale, summing to its logit (the reference's own sum in float64).
    # A later analysis with tau = 1 leaves each its own comparison's lens (the engine switches back).
    local = m.analyze(ids, compare="local")
    assert local.comparison_kind == "local"
    again = m.analyze(ids, compare="vanilla")
    assert worst(local.lens_loss_compare, ref["lens_loss_local"]) <= 1e-4
    assert worst(local.dla_compare, ref["dla_local"]) <= 1e-4 * scale
    assert worst(local.lens("compare")["dla_mlp"], ref["dla_mlp_local"]) <= 1e-4 * scale
    assert worst(local.lens("compare")["logit"], ref["target_logit_local"]) <= 1e-4 * scale
    assert worst(again.lens_loss_compare, ref["lens_loss_vanilla"]) <= 1e-4
    assert abs(float(local.attribute(t, ids[t + 1], side="compare")["heads"][1, 0]) - float(ref["dla_local"][1, 0, t])) <= 1e-4 * scale
