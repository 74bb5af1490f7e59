#!/usr/bin/python3
"""Independent PyTorch reference for ssaviz's SSA forward pass and attention metrics.

Written from docs SPEC sections 1-3 alone (Selective Self-Attention on a pre-LayerNorm GPT-2),
with plain tensor operations and no model library. For each test case it builds a small random
model, writes it as a model folder the C++ loader opens, runs the ids of the case through the
model, and stores what this implementation computes:

    OUT/<case>/config.json            HF GPT-2 keys plus the optional "ssa" block
    OUT/<case>/model.safetensors      weights (HF names and [in, out] Conv1D layout, or a variant)
    OUT/<case>/model.pt               the same weights as torch.save writes a state dict
    OUT/<case>/case.json              {"ids": [...], "description": "..."}
    OUT/<case>/reference.safetensors  float32 tensors: logits, attention, tau_q, tau_v, the
                                      vanilla counterfactual, torch.nn.MultiheadAttention maps,
                                      the row metrics of SPEC section 2 and the QK spectrum

The C++ parity / metrics / CLI tests (CTest fixture "pytorch_ref") load each model folder with
the C++ loader, run case.json's ids, and compare against reference.safetensors.

Usage:  /usr/bin/python3 tests/model/ssa_reference.py --out DIR
Exits non-zero with a message when a self-check fails.
"""

import argparse
import collections
import json
import math
import os
import shutil
import struct
import sys
import time

import numpy as np
import torch

torch.set_num_threads(1)


def fail(msg):
    sys.stderr.write("ssa_reference.py: self-check failed: " + msg + "\n")
    sys.exit(1)


# --------------------------------------------------------------------------------------------
# safetensors writer (written here: no safetensors package)
# --------------------------------------------------------------------------------------------

def tensor_bytes(t, dtype):
    """Raw little-endian bytes of float32 tensor t stored as dtype 'F32', 'F16' or 'BF16'."""
    t = t.detach().contiguous()
    if dtype == "F32":
        return t.to(torch.float32).numpy().astype("<f4").tobytes()
    if dtype == "F16":
        return t.to(torch.float16).numpy().astype("<f2").tobytes()
    if dtype == "BF16":
        bits = t.to(torch.bfloat16).view(torch.int16)
        return bits.numpy().astype("<i2").tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors, dtype="F32", metadata=None):
    """tensors: list of (name, float32 tensor), written contiguously in this order."""
    header = {}
    blobs = []
    offset = 0
    for name, t in tensors:
        data = tensor_bytes(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata is not None:
        header["__metadata__"] = metadata
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)


def round_to_storage(t, dtype):
    """The float32 value the C++ side sees after reading t stored as dtype."""
    if dtype == "F16":
        return t.to(torch.float16).to(torch.float32)
    if dtype == "BF16":
        return t.to(torch.bfloat16).to(torch.float32)
    return t.clone()


# --------------------------------------------------------------------------------------------
# Test cases
# --------------------------------------------------------------------------------------------

def side(position, token, combine, pos_per_head, tok_per_head):
    return {"position": position, "token": token, "combine": combine,
            "pos_per_head": pos_per_head, "tok_per_head": tok_per_head}


CASES = [
    dict(name="vanilla", seed=101, H=2, E=16, P=32, V=60, T=12, act="gelu_new",
         q=None, v=None, desc="plain GPT-2, no ssa block"),
    dict(name="q_sigmoid_shared_sum_perhead", seed=102, H=4, E=32, P=32, V=80, T=16, generate=True,
         act="gelu_new", q=side("sigmoid", "shared", "sum", True, True), v=None,
         desc="query: sigmoid position + shared token, sum; p [H], w [H,d_h], b [H]"),
    dict(name="q_expexp_feature_sum_layer", seed=103, H=2, E=24, P=32, V=70, T=14,
         act="gelu_new", q=side("exp_exp", "feature", "sum", False, False), v=None,
         desc="query: exp_exp position + feature token, sum; p [], w [E], b []"),
    dict(name="q_linear_none_sum", seed=104, H=3, E=24, P=48, V=64, T=20, act="gelu_new",
         q=side("linear", None, "sum", True, False), v=None, checkpoints=("protocol4",),
         desc="query: linear position only, sum; p [H]"),
    dict(name="q_none_shared_sum", seed=105, H=2, E=16, P=32, V=60, T=10, act="gelu_new",
         q=side(None, "shared", "sum", False, False), v=None,
         desc="query: shared token only, sum; w [d_h], b []"),
    dict(name="qv_sigmoid_shared_product_perhead", seed=106, H=4, E=32, P=64, V=90, T=24,
         act="gelu_new", q=side("sigmoid", "shared", "product", True, True),
         v=side("sigmoid", "shared", "product", True, True),
         desc="query and value: sigmoid position * shared token, product; all per head"),
    dict(name="qv_expexp_feature_product_mixed", seed=107, H=3, E=36, P=48, V=75, T=18,
         act="gelu_new", q=side("exp_exp", "feature", "product", True, False),
         v=side("exp_exp", "feature", "product", False, True),
         desc="query and value: exp_exp * feature, product; query p [H] + w [E], "
              "value p [] + w [H,E]"),
    dict(name="v_only_linear_feature_sum", seed=108, H=2, E=32, P=32, V=60, T=16,
         act="gelu_new", q=None, v=side("linear", "feature", "sum", False, True),
         desc="value only: linear position + feature token, sum; p [], w [H,E], b [H]"),
    dict(name="q_sigmoid_feature_product_gelu_exact", seed=109, H=2, E=24, P=32, V=66, T=14,
         act="gelu", q=side("sigmoid", "feature", "product", False, True), v=None,
         desc="query: sigmoid * feature token, product; p [], w [H,E]; exact erf gelu"),
    dict(name="qv_none_feature_product", seed=110, H=4, E=48, P=64, V=100, T=22,
         act="gelu_new", q=side(None, "feature", "product", False, True),
         v=side("sigmoid", None, "product", True, False),
         desc="query: feature token only, product (pos = 1); value: sigmoid position only, "
              "product (tok = 0)"),
    dict(name="identity", seed=111, H=2, E=16, P=32, V=60, T=12, act="gelu_new",
         q=side("linear", "shared", "sum", True, True),
         v=side("linear", "feature", "product", False, False), zero_ssa=True,
         desc="SSA forms present but p = w = b = 0: every temperature is exactly 1"),
    dict(name="fp16_storage", seed=112, H=2, E=32, P=32, V=80, T=16, act="gelu_new",
         q=side("sigmoid", "feature", "sum", True, True),
         v=side("exp_exp", "shared", "product", False, False), storage="F16",
         desc="q+v SSA, every tensor stored F16 (reference from the rounded weights)"),
    dict(name="bf16_storage", seed=113, H=4, E=32, P=32, V=80, T=16, act="gelu_new",
         q=side("linear", "shared", "product", True, False),
         v=side("sigmoid", "feature", "sum", False, True), storage="BF16",
         desc="q+v SSA, every tensor stored BF16 (reference from the rounded weights)"),
    dict(name="transformer_prefix", seed=114, H=2, E=24, P=32, V=70, T=14, act="gelu_new",
         q=side("sigmoid", "shared", "sum", True, True),
         v=side(None, "shared", "sum", False, False), prefix="transformer.", checkpoints=("hf",),
         desc="tensor names prefixed 'transformer.'"),
    dict(name="linear_layout", seed=115, H=3, E=24, P=32, V=64, T=18, act="gelu",
         q=side("exp_exp", None, "sum", True, False), v=None, prefix="transformer.",
         layout="linear", checkpoints=("nanogpt",),
         desc="nanoGPT layout: 'transformer.' names, weights [out, in], lm_head.weight, "
              "query exp_exp position stored as attn.beta [H]"),
    dict(name="compiled_prefix", seed=116, H=2, E=16, P=32, V=50, T=12, act="gelu",
         q=side("exp_exp", "shared", "sum", True, True), v=None, prefix="transformer.",
         outer="_orig_mod.", layout="linear", checkpoints=("nanogpt",),
         desc="a torch.compile'd nanoGPT state dict: '_orig_mod.transformer.' names and "
              "'_orig_mod.lm_head.weight'"),
    dict(name="ddp_prefix", seed=117, H=2, E=16, P=32, V=50, T=12, act="gelu_new",
         q=side("sigmoid", "feature", "sum", True, False), v=side(None, "shared", "sum", False, False),
         outer="module.", desc="a DistributedDataParallel state dict: HF names under 'module.'"),
    dict(name="paper_gpt2_vocab", seed=119, L=3, H=2, E=16, P=64, V=50257, T=24, act="gelu_new",
         q=side("sigmoid", "shared", "sum", True, True), v=side(None, "shared", "sum", False, True),
         tokenizer="gpt2",
         desc="the paper's form on GPT-2's vocabulary, with GPT-2's tokenizer files, so model::Engine opens "
              "it (the layer-local comparison's reference)"),
    dict(name="gpt2_small", seed=118, L=12, H=12, E=768, P=1024, V=50257, T=16, act="gelu_new",
         q=side("sigmoid", "shared", "sum", True, True), v=None, prefix="transformer.",
         storage="F16", checkpoints=("hf",), hf_only=True, matrix_scale=0.2,
         desc="GPT-2 small's shape (124M parameters) with a per-head SSA query, as an HF folder: "
              "config.json + pytorch_model.bin (fp16, tied head, strided matrices)"),
]


def ssa_config(case):
    """The config.json 'ssa' block, or None for a vanilla model."""
    block = {}
    for key, s in (("query", case["q"]), ("value", case["v"])):
        if s is not None:
            block[key] = {"position": s["position"], "token": s["token"],
                          "combine": s["combine"]}
    return block or None


# --------------------------------------------------------------------------------------------
# Random weights (logical form: HF Conv1D [in, out] matrices, float32)
# --------------------------------------------------------------------------------------------

def make_weights(case):
    torch.manual_seed(case["seed"])
    H, E, P, V = case["H"], case["E"], case["P"], case["V"]
    d = E // H
    L = case.get("L", 2)
    n = lambda *shape, std=1.0: torch.randn(tuple(shape), dtype=torch.float32) * std
    # Wide models keep activations in range with matrices scaled like 1/sqrt(width).
    m = lambda *shape, std=1.0: n(*shape, std=std * case.get("matrix_scale", 1.0))
    W = {}
    W["wte"] = m(V, E, std=0.3)
    W["wpe"] = m(P, E, std=0.1)
    for l in range(L):
        W[f"{l}.ln_1.w"] = 1.0 + n(E, std=0.1)
        W[f"{l}.ln_1.b"] = n(E, std=0.05)
        W[f"{l}.c_attn.w"] = m(E, 3 * E, std=0.3)
        W[f"{l}.c_attn.b"] = n(3 * E, std=0.1)
        W[f"{l}.attn_proj.w"] = m(E, E, std=0.15)
        W[f"{l}.attn_proj.b"] = n(E, std=0.05)
        W[f"{l}.ln_2.w"] = 1.0 + n(E, std=0.1)
        W[f"{l}.ln_2.b"] = n(E, std=0.05)
        W[f"{l}.c_fc.w"] = m(E, 4 * E, std=0.15)
        W[f"{l}.c_fc.b"] = n(4 * E, std=0.05)
        W[f"{l}.mlp_proj.w"] = m(4 * E, E, std=0.1)
        W[f"{l}.mlp_proj.b"] = n(E, std=0.05)
        for tag in ("q", "v"):
            s = case[tag]
            if s is None:
                continue
            if s["position"] is not None:
                shape = (H,) if s["pos_per_head"] else ()
                # linear: s = p itself; a smaller spread keeps most temperatures positive
                W[f"{l}.{tag}_pos"] = n(*shape, std=0.5 if s["position"] == "linear" else 1.0)
            if s["token"] is not None:
                zlen = d if s["token"] == "shared" else E
                wshape = (H, zlen) if s["tok_per_head"] else (zlen,)
                bshape = (H,) if s["tok_per_head"] else ()
                W[f"{l}.{tag}_tok.w"] = n(*wshape, std=1.0 / math.sqrt(zlen))
                W[f"{l}.{tag}_tok.b"] = n(*bshape, std=0.5)
            if case.get("zero_ssa"):
                for key in (f"{l}.{tag}_pos", f"{l}.{tag}_tok.w", f"{l}.{tag}_tok.b"):
                    if key in W:
                        W[key] = torch.zeros_like(W[key])
    W["ln_f.w"] = 1.0 + n(E, std=0.1)
    W["ln_f.b"] = n(E, std=0.05)
    storage = case.get("storage", "F32")
    return {k: round_to_storage(v, storage) for k, v in W.items()}


def stored_tensors(case, W):
    """(name, tensor) list in the file's naming and layout."""
    pre = case.get("prefix", "")
    linear = case.get("layout") == "linear"
    mat = (lambda w: w.t().contiguous()) if linear else (lambda w: w)
    out = [(pre + "wte.weight", W["wte"]), (pre + "wpe.weight", W["wpe"])]
    for l in range(case.get("L", 2)):
        h = f"{pre}h.{l}."
        out += [
            (h + "ln_1.weight", W[f"{l}.ln_1.w"]), (h + "ln_1.bias", W[f"{l}.ln_1.b"]),
            (h + "attn.c_attn.weight", mat(W[f"{l}.c_attn.w"])),
            (h + "attn.c_attn.bias", W[f"{l}.c_attn.b"]),
            (h + "attn.c_proj.weight", mat(W[f"{l}.attn_proj.w"])),
            (h + "attn.c_proj.bias", W[f"{l}.attn_proj.b"]),
        ]
        for tag in ("q", "v"):
            if f"{l}.{tag}_pos" in W:
                pname = "attn.beta" if linear else f"attn.ssa_{tag}_pos"
                if linear and tag != "q":
                    raise ValueError("linear layout case has only a query position")
                out.append((h + pname, W[f"{l}.{tag}_pos"]))
            if f"{l}.{tag}_tok.w" in W:
                out.append((h + f"attn.ssa_{tag}_tok.weight", W[f"{l}.{tag}_tok.w"]))
                out.append((h + f"attn.ssa_{tag}_tok.bias", W[f"{l}.{tag}_tok.b"]))
        out += [
            (h + "ln_2.weight", W[f"{l}.ln_2.w"]), (h + "ln_2.bias", W[f"{l}.ln_2.b"]),
            (h + "mlp.c_fc.weight", mat(W[f"{l}.c_fc.w"])),
            (h + "mlp.c_fc.bias", W[f"{l}.c_fc.b"]),
            (h + "mlp.c_proj.weight", mat(W[f"{l}.mlp_proj.w"])),
            (h + "mlp.c_proj.bias", W[f"{l}.mlp_proj.b"]),
        ]
    out += [(pre + "ln_f.weight", W["ln_f.w"]), (pre + "ln_f.bias", W["ln_f.b"])]
    if linear:
        out.append(("lm_head.weight", W["wte"].clone()))
    outer = case.get("outer", "")  # a wrapper's prefix on every name (torch.compile, DDP)
    return [(outer + name, t) for name, t in out]


# --------------------------------------------------------------------------------------------
# torch.save checkpoints of the same weights
# --------------------------------------------------------------------------------------------

def state_dict(tensors):
    """An OrderedDict with the _metadata attribute nn.Module.state_dict() attaches."""
    sd = collections.OrderedDict(tensors)
    sd._metadata = collections.OrderedDict([("", {"version": 1})])
    return sd


def storage_dtype(case):
    return {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[case.get("storage", "F32")]


def tie_lm_head(tensors):
    """nanoGPT / HF tie lm_head.weight to wte.weight: one storage, saved once, named twice."""
    wte = next(t for name, t in tensors if name.endswith("wte.weight"))
    return [(name, wte if name.endswith("lm_head.weight") else t) for name, t in tensors]


def nanogpt_checkpoint(case, tensors):
    """What nanoGPT's train.py saves: the model under 'model' plus optimizer state and metadata
    (a numpy scalar among it, which the C++ reader must skip without running anything)."""
    params = [t.clone().requires_grad_(True) for _, t in tensors if t.dtype.is_floating_point]
    opt = torch.optim.AdamW(params, lr=6e-4, betas=(0.9, 0.95))
    sum((p.float() ** 2).sum() for p in params).backward()
    opt.step()
    return {
        "model": state_dict(tensors),
        "optimizer": opt.state_dict(),
        "model_args": dict(n_layer=2, n_head=case["H"], n_embd=case["E"], block_size=case["P"],
                           bias=True, vocab_size=case["V"], dropout=0.0),
        "iter_num": 5000,
        "best_val_loss": torch.tensor(3.25),
        "config": {"dataset": "openwebtext", "learning_rate": 6e-4, "betas": (0.9, 0.95),
                   "numpy_loss": np.float64(3.25), "compile": True},
    }


def write_checkpoints(case, W, d):
    dtype = storage_dtype(case)
    tensors = [(name, t.to(dtype)) for name, t in stored_tensors(case, W)]
    if not case.get("hf_only"):
        torch.save(state_dict(tensors), os.path.join(d, "model.pt"))
    for variant in case.get("checkpoints", ()):
        sub = os.path.join(d, variant)
        os.makedirs(sub, exist_ok=True)
        if variant == "hf":
            # transformers' save_pretrained(safe_serialization=False): config.json +
            # pytorch_model.bin with the tied lm_head; matrices saved as transposed views
            # (strides (1, rows)) to exercise strided storage.
            with open(os.path.join(d, "config.json")) as f:
                config = f.read()
            with open(os.path.join(sub, "config.json"), "w") as f:
                f.write(config)
            strided = [(n, t.t().contiguous().t() if t.dim() == 2 else t) for n, t in tensors]
            strided.append((case.get("prefix", "") .replace("transformer.", "") + "lm_head.weight", tensors[0][1]))
            torch.save(state_dict(tie_lm_head(strided)), os.path.join(sub, "pytorch_model.bin"))
        elif variant == "nanogpt":
            torch.save(nanogpt_checkpoint(case, tie_lm_head(tensors)), os.path.join(sub, "ckpt.pt"))
        elif variant == "protocol4":
            torch.save(state_dict(tensors), os.path.join(sub, "model.pt"), pickle_protocol=4)
        else:
            raise ValueError(variant)


# --------------------------------------------------------------------------------------------
# Forward pass (float32), SPEC section 1
# --------------------------------------------------------------------------------------------

def layer_norm(x, w, b, eps):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased variance, as GPT-2
    return (x - mean) / torch.sqrt(var + eps) * w + b


def activation(x, kind):
    if kind == "gelu_new":
        c = math.sqrt(2.0 / math.pi)
        return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))
    if kind == "gelu":
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    raise ValueError(kind)


def temperature(s, W, l, tag, h, H, zs):
    """tau at positions 1..T for one head. zs: [T, len] token-term inputs (q/v slice or x)."""
    T = zs.shape[0]
    pos_i = torch.arange(1, T + 1, dtype=torch.float32)
    # position term
    if s["position"] is None:
        pos = torch.ones(T, dtype=torch.float32)
    else:
        p = W[f"{l}.{tag}_pos"]
        p = p[h] if p.dim() == 1 else p
        if s["position"] == "sigmoid":
            sc = 1.0 / (1.0 + torch.exp(-p))
        elif s["position"] == "exp_exp":
            sc = torch.exp(-torch.exp(p))
        elif s["position"] == "linear":
            sc = p
        else:
            raise ValueError(s["position"])
        pos = 1.0 + sc * torch.log(pos_i)
    # token term
    if s["token"] is None:
        tok = torch.zeros(T, dtype=torch.float32)
    else:
        w = W[f"{l}.{tag}_tok.w"]
        b = W[f"{l}.{tag}_tok.b"]
        w = w[h] if w.dim() == 2 else w
        b = b[h] if b.dim() == 1 else b
        tok = torch.empty(T, dtype=torch.float32)
        for i in range(T):
            tok[i] = torch.tanh(torch.dot(w, zs[i]) + b)
    if s["combine"] == "sum":
        return pos + tok
    if s["combine"] == "product":
        return pos * (1.0 + tok)
    raise ValueError(s["combine"])


def forward(case, W, ids, vanilla, local=None, capture=None):
    """Returns logits [T,V], attention [L,H,T,T], tau_q, tau_v [L,H,T], LN1 outputs [L,T,E].
    `local` [L,H,T,T], when given, receives the layer-local tau = 1 maps: each layer's own q and k
    (the SSA model's residual stream) with tau_q = 1. `capture`, a dict, receives what each part
    writes (SPEC section 10): resid [L+1] x [T,E] (the embeddings, then after each layer), head_out
    [L] x [H,T,E] (each head through its rows of the projection), mlp_out [L] x [T,E], attn_bias;
    with `local` too, the same of the layer-local run (local_head_out, local_mlp_out, local_resid:
    each layer again at tau = 1 on the SSA stream's input to it)."""
    H, E = case["H"], case["E"]
    d = E // H
    eps = 1e-5
    T = len(ids)
    L = case.get("L", 2)
    idx = torch.tensor(ids, dtype=torch.long)
    hidden = W["wte"][idx] + W["wpe"][:T]
    if capture is not None:
        capture.update(resid=[hidden], head_out=[], mlp_out=[], attn_bias=[])
    attn = torch.zeros(L, H, T, T, dtype=torch.float32)
    tau_q = torch.ones(L, H, T, dtype=torch.float32)
    tau_v = torch.ones(L, H, T, dtype=torch.float32)
    ln1_out = []
    for l in range(L):
        x = layer_norm(hidden, W[f"{l}.ln_1.w"], W[f"{l}.ln_1.b"], eps)
        ln1_out.append(x)
        qkv = x @ W[f"{l}.c_attn.w"] + W[f"{l}.c_attn.b"]
        q_all, k_all, v_all = qkv[:, :E], qkv[:, E:2 * E], qkv[:, 2 * E:]
        heads_out = []
        for h in range(H):
            q = q_all[:, h * d:(h + 1) * d]
            k = k_all[:, h * d:(h + 1) * d]
            v = v_all[:, h * d:(h + 1) * d]
            if not vanilla and case["q"] is not None:
                zq = q if case["q"]["token"] == "shared" else x
                tau_q[l, h] = temperature(case["q"], W, l, "q", h, H, zq)
            if not vanilla and case["v"] is not None:
                zv = v if case["v"]["token"] == "shared" else x
                tau_v[l, h] = temperature(case["v"], W, l, "v", h, H, zv)
            y = torch.zeros(T, d, dtype=torch.float32)
            for i in range(T):  # query row i (0-based here), keys 0..i
                a = tau_q[l, h, i] * (k[:i + 1] @ q[i]) / math.sqrt(d)
                a = a - a.max()
                e = torch.exp(a)
                p = e / e.sum()
                attn[l, h, i, :i + 1] = p
                y[i] = (p[:, None] * (tau_v[l, h, :i + 1, None] * v[:i + 1])).sum(dim=0)
                if local is not None:
                    local[l, h, i, :i + 1] = torch.softmax((k[:i + 1] @ q[i]) / math.sqrt(d), dim=0)
            heads_out.append(y)
        y = torch.cat(heads_out, dim=1)
        if capture is not None and local is not None:  # this layer again at tau = 1 (tau_v = 1 too) on the same input
            Wo = W[f"{l}.attn_proj.w"]
            lh = [local[l, h] @ v_all[:, h * d:(h + 1) * d] for h in range(H)]
            mid = hidden + (torch.cat(lh, dim=1) @ Wo + W[f"{l}.attn_proj.b"])
            x2 = layer_norm(mid, W[f"{l}.ln_2.w"], W[f"{l}.ln_2.b"], eps)
            m_local = activation(x2 @ W[f"{l}.c_fc.w"] + W[f"{l}.c_fc.b"], case["act"]) @ W[f"{l}.mlp_proj.w"] + W[f"{l}.mlp_proj.b"]
            capture.setdefault("local_head_out", []).append(torch.stack([lh[h] @ Wo[h * d:(h + 1) * d] for h in range(H)]))
            capture.setdefault("local_mlp_out", []).append(m_local)
            capture.setdefault("local_resid", []).append(mid + m_local)
        hidden = hidden + (y @ W[f"{l}.attn_proj.w"] + W[f"{l}.attn_proj.b"])
        x2 = layer_norm(hidden, W[f"{l}.ln_2.w"], W[f"{l}.ln_2.b"], eps)
        m = activation(x2 @ W[f"{l}.c_fc.w"] + W[f"{l}.c_fc.b"], case["act"])
        mlp_out = m @ W[f"{l}.mlp_proj.w"] + W[f"{l}.mlp_proj.b"]
        hidden = hidden + mlp_out
        if capture is not None:  # [in, out] layout: head h's rows of the projection
            Wo = W[f"{l}.attn_proj.w"]
            capture["head_out"].append(torch.stack([heads_out[h] @ Wo[h * d:(h + 1) * d] for h in range(H)]))
            capture["mlp_out"].append(mlp_out)
            capture["attn_bias"].append(W[f"{l}.attn_proj.b"])
            capture["resid"].append(hidden)
    hf = layer_norm(hidden, W["ln_f.w"], W["ln_f.b"], eps)
    logits = hf @ W["wte"].t()
    return logits, attn, tau_q, tau_v, torch.stack(ln1_out)


# --------------------------------------------------------------------------------------------
# Self-checks with torch.nn modules (vanilla only)
# --------------------------------------------------------------------------------------------

def mha_maps(case, W, ln1):
    """attention_mha [L,H,T,T] from torch.nn.MultiheadAttention on the vanilla LN1 outputs."""
    H, E = case["H"], case["E"]
    T = ln1.shape[1]
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # True = masked
    maps = []
    for l in range(case.get("L", 2)):
        mha = torch.nn.MultiheadAttention(E, H, bias=True, batch_first=True)
        with torch.no_grad():
            mha.in_proj_weight.copy_(W[f"{l}.c_attn.w"].t())
            mha.in_proj_bias.copy_(W[f"{l}.c_attn.b"])
        mha.eval()
        x = ln1[l].unsqueeze(0)
        with torch.no_grad():
            _, w = mha(x, x, x, attn_mask=causal, need_weights=True,
                       average_attn_weights=False)
        maps.append(w[0])
    return torch.stack(maps)


def nn_vanilla_logits(case, W, ids):
    """Whole vanilla model through torch.nn.LayerNorm / MultiheadAttention / F.gelu."""
    H, E = case["H"], case["E"]
    T = len(ids)
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    approx = "tanh" if case["act"] == "gelu_new" else "none"

    def ln(w, b):
        m = torch.nn.LayerNorm(E, eps=1e-5)
        m.weight.data.copy_(w)
        m.bias.data.copy_(b)
        return m

    with torch.no_grad():
        h = (W["wte"][torch.tensor(ids)] + W["wpe"][:T]).unsqueeze(0)
        for l in range(case.get("L", 2)):
            mha = torch.nn.MultiheadAttention(E, H, bias=True, batch_first=True).eval()
            mha.in_proj_weight.copy_(W[f"{l}.c_attn.w"].t())
            mha.in_proj_bias.copy_(W[f"{l}.c_attn.b"])
            mha.out_proj.weight.copy_(W[f"{l}.attn_proj.w"].t())
            mha.out_proj.bias.copy_(W[f"{l}.attn_proj.b"])
            x = ln(W[f"{l}.ln_1.w"], W[f"{l}.ln_1.b"])(h)
            a, _ = mha(x, x, x, attn_mask=causal, need_weights=False)
            h = h + a
            x2 = ln(W[f"{l}.ln_2.w"], W[f"{l}.ln_2.b"])(h)
            fc = torch.nn.functional.linear(x2, W[f"{l}.c_fc.w"].t(), W[f"{l}.c_fc.b"])
            m = torch.nn.functional.gelu(fc, approximate=approx)
            h = h + torch.nn.functional.linear(m, W[f"{l}.mlp_proj.w"].t(),
                                               W[f"{l}.mlp_proj.b"])
        hf = ln(W["ln_f.w"], W["ln_f.b"])(h)
        return torch.nn.functional.linear(hf, W["wte"])[0]


# --------------------------------------------------------------------------------------------
# Metrics (float64), SPEC section 2
# --------------------------------------------------------------------------------------------

def xlogy_row(p):
    """sum_j p_j ln p_j with 0 ln 0 = 0."""
    return sum(float(pj) * math.log(float(pj)) for pj in p if pj > 0.0)


def kl(p, m):
    return sum(float(pj) * math.log(float(pj) / float(mj)) for pj, mj in zip(p, m) if pj > 0.0)


def row_metrics(A):
    """A: float64 numpy [L,H,T,T]. Returns dict of [L,H,T] arrays."""
    L, H, T, _ = A.shape
    names = ("entropy", "normalized_entropy", "spikiness", "max_weight", "top5_mass",
             "sink_mass")
    out = {k: np.zeros((L, H, T), dtype=np.float64) for k in names}
    for l in range(L):
        for h in range(H):
            for r in range(T):
                i = r + 1
                p = A[l, h, r, :i]
                ent = -xlogy_row(p)
                out["entropy"][l, h, r] = ent
                out["normalized_entropy"][l, h, r] = 0.0 if i == 1 else ent / math.log(i)
                out["spikiness"][l, h, r] = 1.0 / (i * float(np.sum(p * p)))
                out["max_weight"][l, h, r] = float(np.max(p))
                out["top5_mass"][l, h, r] = float(np.sum(np.sort(p)[::-1][:5]))
                out["sink_mass"][l, h, r] = float(p[0])
    return out


def compare_metrics(A, B):
    L, H, T, _ = A.shape
    js = np.zeros((L, H, T))
    l1 = np.zeros((L, H, T))
    for l in range(L):
        for h in range(H):
            for r in range(T):
                p = A[l, h, r, :r + 1]
                q = B[l, h, r, :r + 1]
                m = 0.5 * (p + q)
                js[l, h, r] = 0.5 * kl(p, m) + 0.5 * kl(q, m)
                l1[l, h, r] = float(np.sum(np.abs(p - q)))
    return js, l1


def qk_spectrum(case, W):
    H, E = case["H"], case["E"]
    d = E // H
    opn = np.zeros((case.get("L", 2), H))
    emean = np.zeros((case.get("L", 2), H))
    evar = np.zeros((case.get("L", 2), H))
    for l in range(case.get("L", 2)):
        Wa = W[f"{l}.c_attn.w"].numpy().astype(np.float64)
        for h in range(H):
            Wq = Wa[:, h * d:(h + 1) * d]
            Wk = Wa[:, E + h * d:E + (h + 1) * d]
            Wqk = Wq @ Wk.T / math.sqrt(d)
            opn[l, h] = np.linalg.svd(Wqk, compute_uv=False)[0]
            ev = np.linalg.eigvals(Wk.T @ Wq / math.sqrt(d)).real
            emean[l, h] = ev.mean()
            evar[l, h] = np.mean((ev - ev.mean()) ** 2)
    return opn, emean, evar


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------

def ablatable(case):
    """Whether a head's temperatures can be set to 1 by its own parameters: every term per head."""
    sides = [case[t] for t in ("q", "v") if case[t] is not None]
    if not sides or case.get("zero_ssa") or case.get("hf_only"):
        return False
    return all((s["position"] is None or s["pos_per_head"]) and (s["token"] is None or s["tok_per_head"]) for s in sides)


def lens_and_attribution(W, run, ids):
    """Each residual through the final LayerNorm and the tied head (the lens's loss of the next
    token), and each part's share of the next token's logit with the final norm's scale frozen at
    the final residual: g (c - mean c) / sqrt(var(r_L) + eps) . wte[next]; the final norm's bias
    and the projections' biases in the constants. Checks that the parts sum to the logit. With
    run["frozen"] (the layer-local run: its final scale is SSA's), the logit is the parts' sum."""
    eps = 1e-5
    g, b, wte = W["ln_f.w"].double(), W["ln_f.b"].double(), W["wte"].double()
    T = len(ids)
    target = torch.tensor(ids[1:], dtype=torch.long)
    resid = [r.double() for r in run["resid"]]
    lens_loss = []
    for r in resid:
        logp = torch.log_softmax(layer_norm(r, g, b, eps) @ wte.t(), -1)
        lens_loss.append(-logp[:-1].gather(1, target[:, None])[:, 0])
    final = run.get("frozen", resid[-1]).double()[:-1]
    scale = torch.sqrt(((final - final.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True) + eps)
    rows = wte[target]
    through = lambda c: ((g * (c - c.mean(-1, keepdim=True)) / scale) * rows).sum(-1)
    dla = torch.stack([torch.stack([through(h[:-1].double()) for h in heads]) for heads in run["head_out"]])
    dla_mlp = torch.stack([through(m[:-1].double()) for m in run["mlp_out"]])
    dla_embed = through(resid[0][:-1])
    const = (b * rows).sum(-1)
    for bias in run["attn_bias"]:
        const = const + through(bias.double().expand(T - 1, -1))
    free = (b * rows).sum(-1)  # the final norm's bias: outside its divisor
    total = dla.sum((0, 1)) + dla_mlp.sum(0) + dla_embed + const
    if "frozen" in run:
        return [("lens_loss", torch.stack(lens_loss)), ("dla", dla), ("dla_mlp", dla_mlp), ("dla_embed", dla_embed),
                ("dla_const", const), ("target_logit", total), ("dla_divisor", scale[:, 0]), ("dla_const_free", free)]
    logit = (layer_norm(resid[-1], g, b, eps) @ wte.t())[:-1].gather(1, target[:, None])[:, 0]
    # The parts were captured in float32 (as the forward runs): their sum meets the logit to its rounding.
    gap = float((total - logit).abs().max())
    if gap > 1e-4 * max(1.0, float(logit.abs().max())):
        fail(f"the attribution's parts do not sum to the logit (off by {gap:.3g})")
    return [("lens_loss", torch.stack(lens_loss)), ("dla", dla), ("dla_mlp", dla_mlp), ("dla_embed", dla_embed),
            ("dla_const", const), ("target_logit", logit), ("dla_divisor", scale[:, 0]), ("dla_const_free", free)]


def run_case(case, out_dir):
    W = make_weights(case)
    H, E, P, V, T = case["H"], case["E"], case["P"], case["V"], case["T"]
    gen = torch.Generator().manual_seed(case["seed"] + 1000)
    ids = torch.randint(0, V, (T,), generator=gen).tolist()

    d = os.path.join(out_dir, case["name"])
    os.makedirs(d, exist_ok=True)
    config = {"n_layer": case.get("L", 2), "n_head": H, "n_embd": E, "n_positions": P, "vocab_size": V,
              "layer_norm_epsilon": 1e-5, "activation_function": case["act"]}
    ssa = ssa_config(case)
    if ssa is not None:
        config["ssa"] = ssa
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump({"ids": ids, "description": case["desc"]}, f, indent=2)
        f.write("\n")
    if not case.get("hf_only"):
        write_safetensors(os.path.join(d, "model.safetensors"), stored_tensors(case, W),
                          dtype=case.get("storage", "F32"), metadata={"format": "pt"})
    write_checkpoints(case, W, d)
    if case.get("tokenizer"):
        source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "assets", "tokenizers", case["tokenizer"])
        for f in ("vocab.json", "merges.txt"):
            shutil.copyfile(os.path.join(source, f), os.path.join(d, f))

    attn_local = torch.zeros(case.get("L", 2), H, T, T, dtype=torch.float32)
    parts, parts_v = {}, {}
    logits, attn, tau_q, tau_v, _ = forward(case, W, ids, vanilla=False, local=attn_local, capture=parts)
    logits_v, attn_v, _, _, ln1_v = forward(case, W, ids, vanilla=True, capture=parts_v)
    attn_mha = mha_maps(case, W, ln1_v)

    # self-checks
    name = case["name"]
    mha_diff = float((attn_mha - attn_v).abs().max())
    if mha_diff >= 1e-5:
        fail(f"{name}: torch.nn.MultiheadAttention maps differ from vanilla maps by {mha_diff}")
    nn_diff = float((nn_vanilla_logits(case, W, ids) - logits_v).abs().max())
    if nn_diff >= 1e-4:
        fail(f"{name}: torch.nn vanilla logits differ from the explicit forward by {nn_diff}")
    for tag, A in (("ssa", attn), ("vanilla", attn_v)):
        if float(torch.triu(A, diagonal=1).abs().max()) != 0.0:
            fail(f"{name}: {tag} attention not zero above the diagonal")
        if float((A.sum(dim=-1) - 1).abs().max()) > 1e-5:
            fail(f"{name}: {tag} attention rows do not sum to 1")
    ssa_diff = float((attn - attn_v).abs().max())
    if ssa is None or case.get("zero_ssa"):
        if ssa_diff != 0.0 or float((logits - logits_v).abs().max()) != 0.0:
            fail(f"{name}: tau = 1 everywhere but SSA differs from vanilla ({ssa_diff})")
        if float((tau_q - 1).abs().max()) != 0.0 or float((tau_v - 1).abs().max()) != 0.0:
            fail(f"{name}: temperatures should be exactly 1")
    elif ssa_diff <= 0.05:
        fail(f"{name}: SSA maps too close to vanilla ({ssa_diff}); test not meaningful")
    if case["q"] is None and float((tau_q - 1).abs().max()) != 0.0:
        fail(f"{name}: tau_q should be 1 with no query temperature")
    if case["v"] is None and float((tau_v - 1).abs().max()) != 0.0:
        fail(f"{name}: tau_v should be 1 with no value temperature")
    if case["q"] is None and float((attn[0] - attn_v[0]).abs().max()) != 0.0:
        fail(f"{name}: value-only SSA must not change layer-0 maps")  # later layers differ

    A = attn.double().numpy()
    B = attn_v.double().numpy()
    m = row_metrics(A)
    mv = row_metrics(B)
    js, l1 = compare_metrics(A, B)
    opn, emean, evar = qk_spectrum(case, W)

    f32 = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(torch.float32)
    ref = [("logits", logits), ("attention", attn), ("tau_q", tau_q), ("tau_v", tau_v),
           ("logits_vanilla", logits_v), ("attention_vanilla", attn_v),
           ("attention_mha", attn_mha)]
    ref += [(k, f32(m[k])) for k in m]
    ref += [("js", f32(js)), ("l1", f32(l1))]
    ref += [(k + "_vanilla", f32(mv[k])) for k in mv]
    ref += [("qk_opnorm", f32(opn)), ("qk_eig_mean", f32(emean)), ("qk_eig_var", f32(evar))]
    # Predictions (issue 17): each position's log-probabilities of the next token, in float64.
    def predictions(lg, seq):
        logp = torch.log_softmax(lg.double(), -1)
        target = torch.tensor(seq[1:], dtype=torch.long)[:, None]
        actual = logp[:-1].gather(1, target)
        top = torch.topk(logp, min(10, logp.shape[1]), -1)
        return [("loss", -actual[:, 0]), ("rank", (logp[:-1] > actual).sum(1)), ("top_ids", top.indices), ("top_probs", top.values.exp())]
    ref += [(k, v.float()) for k, v in predictions(logits, ids)]
    ref += [(k + "_vanilla", v.float()) for k, v in predictions(logits_v, ids)]
    # The logit lens and attribution (SPEC section 10), from the parts in float64.
    local_run = {"resid": [parts["resid"][0]] + parts["local_resid"], "head_out": parts["local_head_out"],
                 "mlp_out": parts["local_mlp_out"], "attn_bias": parts["attn_bias"], "frozen": parts["resid"][-1]}
    for suffix, run in (("", parts), ("_vanilla", parts_v), ("_local", local_run)):
        ref += [(k + suffix, v.float()) for k, v in lens_and_attribution(W, run, ids)]
    # Layer 0 alone at tau = 1 is the tau = 1 pass's layer 0.
    if float((parts["local_resid"][0] - parts_v["resid"][1]).abs().max()) > 1e-5:
        fail(f"{name}: the layer-local run's layer 0 differs from the tau = 1 pass's")
    # Greedy decoding: 8 argmax steps, each a whole forward pass of the sequence so far.
    if case.get("generate"):
        seq = list(ids)
        for _ in range(8):
            seq.append(int(torch.argmax(forward(case, W, seq, vanilla=False)[0][-1])))
        ref.append(("greedy_ids", torch.tensor(seq[len(ids):], dtype=torch.float32)))
    # What-if: the last layer's last head without SSA, by its weights: its temperature parameters
    # set so that tau = 1 exactly (a sigmoid slope of sigmoid(-100), a token term tanh(0)).
    ablate = ablatable(case)
    if ablate:
        Wa, l, h = dict(W), case.get("L", 2) - 1, H - 1
        for tag in ("q", "v"):
            s = case[tag]
            if s is None:
                continue
            if s["position"] is not None:
                Wa[f"{l}.{tag}_pos"] = W[f"{l}.{tag}_pos"].clone()
                Wa[f"{l}.{tag}_pos"][h] = {"sigmoid": -100.0, "exp_exp": 100.0, "linear": 0.0}[s["position"]]
            if s["token"] is not None:
                for key in (f"{l}.{tag}_tok.w", f"{l}.{tag}_tok.b"):
                    Wa[key] = W[key].clone()
                    Wa[key][h] = 0.0
        logits_a, attn_a, tau_q_a, tau_v_a, _ = forward(case, Wa, ids, vanilla=False)
        if float((tau_q_a[l, h] - 1).abs().max()) != 0.0 or float((tau_v_a[l, h] - 1).abs().max()) != 0.0:
            fail(f"{name}: the ablated head's temperatures are not exactly 1")
        write_safetensors(os.path.join(d, "ablated.safetensors"), stored_tensors(case, Wa), dtype="F32", metadata={"format": "pt"})
        ref += [("attention_ablated", attn_a), ("loss_ablated", predictions(logits_a, ids)[0][1].float())]
    js_local, l1_local = compare_metrics(A, attn_local.double().numpy())
    ref += [("attention_local", attn_local), ("js_local", f32(js_local)), ("l1_local", f32(l1_local))]
    write_safetensors(os.path.join(d, "reference.safetensors"), ref, dtype="F32",
                      metadata={"generator": "tests/model/ssa_reference.py",
                                "case": name})

    # summary
    rows = slice(1, None)  # aggregates skip i = 1
    def rng(t):
        return f"[{float(t.min()):.3f},{float(t.max()):.3f}]"
    print(f"{name:38s} H={H} E={E} T={T} {case.get('storage', 'F32'):4s} "
          f"tau_q={rng(tau_q)} tau_v={rng(tau_v)} "
          f"nH={m['normalized_entropy'][:, :, rows].mean():.3f}"
          f"/{mv['normalized_entropy'][:, :, rows].mean():.3f} "
          f"max|P-Pvan|={ssa_diff:.4f} max|logit-van|={float((logits - logits_v).abs().max()):.4f} "
          f"mha={mha_diff:.1e} nn={nn_diff:.1e}")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output folder (one subfolder per case)")
    ap.add_argument("--case", action="append", help="run only this case (repeatable)")
    args = ap.parse_args()
    t0 = time.time()
    os.makedirs(args.out, exist_ok=True)
    cases = CASES
    if args.case:
        cases = [c for c in CASES if c["name"] in args.case]
        if len(cases) != len(args.case):
            sys.stderr.write("ssa_reference.py: unknown case name\n")
            return 2
    for case in cases:
        run_case(case, args.out)
    print(f"{len(cases)} cases written to {args.out} in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
