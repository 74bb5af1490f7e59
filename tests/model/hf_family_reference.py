"""Independent PyTorch reference for Hugging Face folders of the RoPE families (SPEC section 7):
config.json model_type gpt_neox, llama (Llama 3.1's rope_scaling), mistral, qwen2 and qwen3, with
model.safetensors in HF's names. family_reference.py runs these cases beside its lit-gpt ones
(the same CTest fixture, the same reference.safetensors keys, the same C++ tests).

Written from HF transformers' documented behaviour of each architecture, in float64, one head at a
time; no transformers code is used (nor installed). What each model does:

  names     llama / mistral / qwen2 / qwen3: model.embed_tokens, model.layers.{l}.input_layernorm,
            .self_attn.{q,k,v,o}_proj (torch.nn.Linear [out, in]; q [H*hd, E], k and v [G*hd, E],
            o [E, H*hd]), .self_attn.{q,k}_norm [hd] (qwen3), .post_attention_layernorm,
            .mlp.{gate,up,down}_proj, model.norm, lm_head (left out when tie_word_embeddings: the
            head is embed_tokens). gpt_neox: gpt_neox.embed_in, gpt_neox.layers.{l}.input_layernorm
            and .post_attention_layernorm (LayerNorm, weight and bias), .attention.query_key_value
            (one Linear of 3*E rows; its output viewed [T, H, 3*hd]: per head q, k, v), .attention.
            dense, .mlp.dense_h_to_4h, .mlp.dense_4h_to_h, gpt_neox.final_layer_norm, embed_out;
            old checkpoints also carry buffers (attention.bias, attention.masked_bias,
            rotary_emb.inv_freq) that are not parameters.
  biases    gpt_neox: every Linear (attention_bias true); qwen2: q, k, v only; llama, mistral, qwen3
            here: none.
  norm      RMSNorm w * x / sqrt(mean(x^2) + rms_norm_eps); gpt_neox LayerNorm (layer_norm_eps).
  qk norm   qwen3: RMSNorm over hd of each head's q and k (q_norm / k_norm weights, rms_norm_eps)
            after the projection, before RoPE.
  RoPE      HF's rotate_half: inv_freq_d = base^(-2d/dim), d < dim/2, dim = the rotary dims
            (gpt_neox: int(hd * rotary_pct), its base rotary_emb_base; else hd and rope_theta);
            emb = cat(freqs, freqs), x * cos + rotate_half(x) * sin on the first dim dims, the rest
            passed through; position p = 0, 1, ...
            rope_scaling {"rope_type": "llama3", factor, low_freq_factor, high_freq_factor,
            original_max_position_embeddings}: wavelen = 2 pi / inv_freq; wavelen >
            original / low -> inv_freq / factor; wavelen < original / high -> unchanged; else
            (1 - s) inv_freq / factor + s inv_freq, s = (original / wavelen - low) / (high - low).
  mask      causal; with a sliding window W also i - j < W (mistral: sliding_window on every layer;
            qwen2: only with use_sliding_window, layers l >= max_window_layers).
  MLP       silu(gate x) * (up x) -> down; gpt_neox dense_4h_to_h(gelu(dense_h_to_4h x)), exact gelu.
  residual  sequential; gpt_neox with use_parallel_residual: x + attn(ln1 x) + mlp(ln2 x).
  SSA       as SPEC sections 1 and 7, parameters under the attention module: self_attn.ssa_q_pos,
            .ssa_q_tok.{weight,bias}, ssa_v_* (query per query head, value per kv head) from the
            config's "ssa" block, or the official one parameter a layer self_attn.beta /
            attention.beta read as exp_exp. tau_q multiplies q.k / sqrt(hd) (q and k after RoPE)
            before mask and softmax; y = P (tau_v v). Token term z: "shared" = the head's q as
            attention reads it before RoPE (qwen3: after q_norm) or its kv head's v; "feature" =
            input_layernorm's output.
"""

import json
import math
import os
import shutil
import struct
import time

import torch

import family_reference as lit

F64 = torch.float64
TOKENIZER_VOCAB = lit.TOKENIZER_VOCAB

SIGMOID_SHARED = {"query": {"position": "sigmoid", "token": "shared", "combine": "sum"},
                  "value": {"position": "sigmoid", "token": None, "combine": "sum"}}

HF_CASES = [
    dict(name="hf_gpt_neox", family="gpt_neox", seed=301, T=256, ablate="1:2", beta=[-0.8, 0.4], buffers=True,
         config={"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "hidden_size": 64,
                 "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 50257,
                 "max_position_embeddings": 512, "rotary_pct": 0.25, "rotary_emb_base": 1000,
                 "layer_norm_eps": 1e-5, "use_parallel_residual": True, "hidden_act": "gelu",
                 "tie_word_embeddings": False, "torch_dtype": "float32", "bos_token_id": 0},
         desc="GPT-NeoX (Pythia): fused per-head query_key_value, rotary_pct 0.25 of hd 16 (4 dims), "
              "rotary_emb_base 1000, parallel residual, exact GELU, biases, untied embed_out; the "
              "official attention.beta (exp_exp); the old buffers attention.bias / masked_bias / "
              "rotary_emb.inv_freq in the file"),
    dict(name="hf_llama3", family="llama3", seed=302, T=288, ablate="0:1",
         config={"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "num_key_value_heads": 2, "intermediate_size": 176, "vocab_size": 50257,
                 "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
                 "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
                 "hidden_act": "silu", "tie_word_embeddings": True, "attention_bias": False, "mlp_bias": False,
                 "ssa": SIGMOID_SHARED},
         desc="Llama 3.1: rope_theta 500000 with rope_scaling llama3 (factor 8, original context 64, so "
              "hd 16's frequencies fall in all three bands), GQA H=4 G=2, tied embeddings (no "
              "lm_head in the file); ssa block: query sigmoid + shared token, value sigmoid [G]"),
    dict(name="hf_mistral", family="mistral", seed=303, T=160, ablate="1:3", beta=[0.2, -1.1], buffers=True,
         config={"model_type": "mistral", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "num_key_value_heads": 1, "intermediate_size": 96, "vocab_size": 50257,
                 "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
                 "sliding_window": 48, "hidden_act": "silu", "tie_word_embeddings": False},
         desc="Mistral: sliding_window 48 under a 160-token text, MQA (G=1), the official self_attn.beta "
              "(exp_exp), untied lm_head, a rotary_emb.inv_freq buffer in the file"),
    dict(name="hf_qwen2", family="qwen2", seed=304, T=200, ablate="1:0",
         config={"model_type": "qwen2", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 50304,
                 "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
                 "use_sliding_window": True, "sliding_window": 40, "max_window_layers": 1,
                 "hidden_act": "silu", "tie_word_embeddings": True,
                 "ssa": {"query": {"position": "exp_exp", "token": "feature", "combine": "product"},
                         "value": {"position": None, "token": "shared", "combine": "sum"}}},
         tied_head_in_file=True,
         desc="Qwen 2: q/k/v biases (o_proj and MLP none), rope_theta 1e6, vocab_size 50304 over the "
              "tokenizer's 50257, tied with lm_head.weight also in the file; use_sliding_window with "
              "window 40 from max_window_layers 1 (layer 0 full); ssa block: query exp_exp position x "
              "(1 + feature token) [H], value shared token [G]"),
    dict(name="hf_qwen3", family="qwen3", seed=305, T=224, ablate="0:2",
         config={"model_type": "qwen3", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96, "vocab_size": 50257,
                 "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
                 "attention_bias": False, "hidden_act": "silu", "tie_word_embeddings": False,
                 "use_sliding_window": False, "sliding_window": None, "ssa": SIGMOID_SHARED},
         desc="Qwen 3: head_dim 16 with hidden_size 32 over 4 heads (q_proj [64, 32], o_proj [32, 64]), "
              "q_norm / k_norm per head before RoPE, GQA H=4 G=2, untied; ssa block: query sigmoid + "
              "shared token (z = q after q_norm), value sigmoid [G]"),
]
HF_CASE_BY_NAME = {c["name"]: c for c in HF_CASES}


class Shape:
    """The numbers a config.json gives, with HF's defaults for what it leaves out."""

    def __init__(self, cfg):
        self.type = cfg["model_type"]
        self.neox = self.type == "gpt_neox"
        self.E, self.L, self.H = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
        self.G = self.H if self.neox else cfg.get("num_key_value_heads", self.H)
        self.hd = cfg.get("head_dim") or self.E // self.H
        self.I, self.V = cfg["intermediate_size"], cfg["vocab_size"]
        self.root = "gpt_neox." if self.neox else "model."
        if self.neox:
            self.rot = int(self.hd * cfg.get("rotary_pct", 0.25))
            self.base = cfg.get("rope_theta", cfg.get("rotary_emb_base", 10000))
            self.eps = cfg.get("layer_norm_eps", 1e-5)
        else:
            self.rot = self.hd
            self.base = cfg.get("rope_theta", 10000)
            self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.scaling = cfg.get("rope_scaling")
        self.tied = cfg.get("tie_word_embeddings", False)
        self.parallel = self.neox and cfg.get("use_parallel_residual", True)
        window = cfg.get("sliding_window")
        if self.type == "mistral":
            self.windows = [window or 0] * self.L
        elif self.type in ("qwen2", "qwen3") and cfg.get("use_sliding_window") and window:
            self.windows = [window if l >= cfg.get("max_window_layers", 28) else 0 for l in range(self.L)]
        else:
            self.windows = [0] * self.L
        self.ssa = cfg.get("ssa")

    def attn(self, l):
        return f"{self.root}layers.{l}.{'attention' if self.neox else 'self_attn'}"


# --------------------------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------------------------

def hf_weights(case, s):
    """name -> float32 tensor, in HF's names, drawn where attention is neither uniform nor one-hot."""
    gen = torch.Generator().manual_seed(case["seed"])
    rn = lambda shape, std: torch.randn(shape, generator=gen) * std
    E, H, G, hd, I, V = s.E, s.H, s.G, s.hd, s.I, s.V
    W = {}
    W[s.root + ("embed_in" if s.neox else "embed_tokens") + ".weight"] = rn((V, E), 1.0)
    for l in range(s.L):
        p, a = f"{s.root}layers.{l}.", s.attn(l) + "."
        for n in ("input_layernorm", "post_attention_layernorm"):
            W[p + n + ".weight"] = 1.0 + rn(E, 0.1)
            if s.neox:
                W[p + n + ".bias"] = rn(E, 0.05)
        if s.neox:
            W[a + "query_key_value.weight"] = rn((3 * H * hd, E), 1.1 / math.sqrt(E))
            W[a + "query_key_value.bias"] = rn(3 * H * hd, 0.1)
            W[a + "dense.weight"] = rn((E, H * hd), 0.6 / math.sqrt(E))
            W[a + "dense.bias"] = rn(E, 0.05)
            W[p + "mlp.dense_h_to_4h.weight"] = rn((I, E), 1.0 / math.sqrt(E))
            W[p + "mlp.dense_h_to_4h.bias"] = rn(I, 0.05)
            W[p + "mlp.dense_4h_to_h.weight"] = rn((E, I), 0.6 / math.sqrt(I))
            W[p + "mlp.dense_4h_to_h.bias"] = rn(E, 0.05)
        else:
            for n, rows in (("q_proj", H * hd), ("k_proj", G * hd), ("v_proj", G * hd)):
                W[a + n + ".weight"] = rn((rows, E), 1.1 / math.sqrt(E))
                if s.type == "qwen2":
                    W[a + n + ".bias"] = rn(rows, 0.1)
            W[a + "o_proj.weight"] = rn((E, H * hd), 0.6 / math.sqrt(E))
            if s.type == "qwen3":
                W[a + "q_norm.weight"] = 1.0 + rn(hd, 0.2)
                W[a + "k_norm.weight"] = 1.0 + rn(hd, 0.2)
            W[p + "mlp.gate_proj.weight"] = rn((I, E), 1.0 / math.sqrt(E))
            W[p + "mlp.up_proj.weight"] = rn((I, E), 1.0 / math.sqrt(E))
            W[p + "mlp.down_proj.weight"] = rn((E, I), 0.6 / math.sqrt(I))
        if case.get("beta"):
            W[a + "beta"] = torch.tensor(case["beta"][l])
        for tag, units in (("q", H), ("v", G)):
            spec = (s.ssa or {}).get({"q": "query", "v": "value"}[tag])
            if not spec:
                continue
            if spec["position"]:
                W[a + f"ssa_{tag}_pos"] = rn(units, 1.0)
            if spec["token"]:
                zlen = hd if spec["token"] == "shared" else E
                W[a + f"ssa_{tag}_tok.weight"] = rn((units, zlen), 1.0 / math.sqrt(zlen))
                W[a + f"ssa_{tag}_tok.bias"] = rn(units, 0.5)
    final = s.root + ("final_layer_norm" if s.neox else "norm")
    W[final + ".weight"] = 1.0 + rn(E, 0.1)
    if s.neox:
        W[final + ".bias"] = rn(E, 0.05)
    head = "embed_out.weight" if s.neox else "lm_head.weight"
    if not s.tied:
        W[head] = rn((V, E), 2.0 / math.sqrt(E))
    elif case.get("tied_head_in_file"):
        W[head] = W[s.root + "embed_tokens.weight"].clone()
    return W


def buffers(s, P):
    """What old GPT-NeoX / Llama checkpoints also saved: masks and RoPE frequencies, not parameters."""
    out = {}
    inv = 1.0 / (s.base ** (torch.arange(0, s.rot, 2, dtype=torch.float32) / s.rot))
    for l in range(s.L):
        a = s.attn(l) + "."
        if s.neox:
            out[a + "bias"] = torch.tril(torch.ones(1, 1, P, P))
            out[a + "masked_bias"] = torch.tensor(-1e9)
        out[a + "rotary_emb.inv_freq"] = inv
    return out


# --------------------------------------------------------------------------------------------
# The reference forward pass
# --------------------------------------------------------------------------------------------

def inv_freq(s):
    """[rot / 2] float64: HF's base^(-2d/rot), rescaled by rope_scaling llama3."""
    freqs = [1.0 / (float(s.base) ** (2 * d / s.rot)) for d in range(s.rot // 2)]
    sc = s.scaling
    if sc and sc.get("rope_type", sc.get("type")) == "llama3":
        factor, low, high = sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"]
        orig = sc["original_max_position_embeddings"]
        out = []
        for f in freqs:
            wavelen = 2 * math.pi / f
            if wavelen < orig / high:
                out.append(f)
            elif wavelen > orig / low:
                out.append(f / factor)
            else:
                smooth = (orig / wavelen - low) / (high - low)
                out.append((1 - smooth) * f / factor + smooth * f)
        freqs = out
    return torch.tensor(freqs, dtype=F64)


def rotate(s, x, cos, sin):
    """HF's apply_rotary_pos_emb on the first s.rot dims of x [.., T, hd]."""
    r = s.rot
    a, rest = x[..., :r], x[..., r:]
    half = torch.cat((-a[..., r // 2:], a[..., :r // 2]), dim=-1)
    return torch.cat((a * cos + half * sin, rest), dim=-1)


def lin(W, x, name):
    y = x @ W[name + ".weight"].t()
    return y + W[name + ".bias"] if name + ".bias" in W else y


def rms(x, w, eps):
    return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps) * w + b


def windowed_softmax(scores, window):
    """Row-wise softmax over keys j <= i with i - j < window (0: no window); exactly 0 elsewhere."""
    T = scores.shape[-1]
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    keep = (j <= i) & ((i - j < window) if window else torch.ones(T, T, dtype=torch.bool))
    e = torch.exp(scores.masked_fill(~keep, float("-inf")) - scores.masked_fill(~keep, float("-inf")).max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def hf_forward(s, W, ids, beta=False, vanilla=False, ablate=None, local=False, windows=None, scaling=True):
    E, H, G, hd, T = s.E, s.H, s.G, s.hd, len(ids)
    qpk = H // G
    windows = s.windows if windows is None else windows
    freqs = inv_freq(s) if scaling else inv_freq(Shape({**s.cfg, "rope_scaling": None}))
    ang = torch.arange(T, dtype=F64)[:, None] * freqs[None, :]
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    ln_i = torch.log(torch.arange(1, T + 1, dtype=F64))
    out = {"attention": torch.zeros(s.L, H, T, T, dtype=F64), "tau_q": torch.ones(s.L, H, T, dtype=F64),
           "tau_v": torch.ones(s.L, H, T, dtype=F64)}
    if local:
        out["local"] = torch.zeros(s.L, H, T, T, dtype=F64)
        out["local_resid"], out["local_head_out"], out["local_mlp_out"] = [], [], []  # each layer again at tau = 1
    x = W[s.root + ("embed_in" if s.neox else "embed_tokens") + ".weight"][torch.tensor(ids)]
    # What each part writes (SPEC section 10), for the lens and attribution.
    out["resid"], out["head_out"], out["mlp_out"], out["attn_bias"] = [x], [], [], []

    def norm(name, v):
        return layer_norm(v, W[name + ".weight"], W[name + ".bias"], s.eps) if s.neox else rms(v, W[name + ".weight"], s.eps)

    for l in range(s.L):
        p, a = f"{s.root}layers.{l}.", s.attn(l)
        h = norm(p + "input_layernorm", x)
        if s.neox:
            qkv = lin(W, h, a + ".query_key_value").view(T, H, 3 * hd).transpose(0, 1)  # [H, T, 3 hd]
            q, k, v = qkv[..., :hd], qkv[..., hd:2 * hd], qkv[..., 2 * hd:]
        else:
            q = lin(W, h, a + ".q_proj").view(T, H, hd).transpose(0, 1)
            k = lin(W, h, a + ".k_proj").view(T, G, hd).transpose(0, 1)
            v = lin(W, h, a + ".v_proj").view(T, G, hd).transpose(0, 1)
            if s.type == "qwen3":
                q, k = rms(q, W[a + ".q_norm.weight"], s.eps), rms(k, W[a + ".k_norm.weight"], s.eps)
        tq, tv = torch.ones(H, T, dtype=F64), torch.ones(G, T, dtype=F64)
        if beta:
            tq = (1 + torch.exp(-torch.exp(W[a + ".beta"])) * ln_i).expand(H, T).clone()
        if s.ssa:
            if s.ssa.get("query"):
                tq = lit.side_tau(s.ssa["query"], W, a, "q", H, q, h, ln_i)
            if s.ssa.get("value"):
                tv = lit.side_tau(s.ssa["value"], W, a, "v", G, v, h, ln_i)
        qr, kr = rotate(s, q, cos, sin), rotate(s, k, cos, sin)
        heads, local_heads = [], []
        for hh in range(H):
            g = hh // qpk
            tq_h, tv_h = tq[hh], tv[g]
            if vanilla or ablate == (l, hh):
                tq_h, tv_h = torch.ones(T, dtype=F64), torch.ones(T, dtype=F64)
            sc = qr[hh] @ kr[g].t() / math.sqrt(hd)
            P = windowed_softmax(tq_h[:, None] * sc, windows[l])
            out["attention"][l, hh], out["tau_q"][l, hh], out["tau_v"][l, hh] = P, tq_h, tv_h
            if local:
                out["local"][l, hh] = windowed_softmax(sc, windows[l])
                local_heads.append(out["local"][l, hh] @ v[g])  # tau_v = 1 too
            heads.append(P @ (tv_h[:, None] * v[g]))
        proj = a + (".dense" if s.neox else ".o_proj")
        o = lin(W, torch.cat(heads, dim=1), proj)
        Wo = W[proj + ".weight"]  # [E, H hd]
        out["head_out"].append(torch.stack([heads[hh] @ Wo[:, hh * hd:(hh + 1) * hd].t() for hh in range(H)]))
        out["attn_bias"].append(W.get(proj + ".bias"))

        def mlp(u):
            if s.neox:
                z = lin(W, u, p + "mlp.dense_h_to_4h")
                return lin(W, 0.5 * z * (1 + torch.erf(z / math.sqrt(2))), p + "mlp.dense_4h_to_h")
            gate = lin(W, u, p + "mlp.gate_proj")
            return lin(W, gate * torch.sigmoid(gate) * lin(W, u, p + "mlp.up_proj"), p + "mlp.down_proj")

        if local:  # this layer at tau = 1 on the same input x; the stream goes on with SSA's
            o_local = lin(W, torch.cat(local_heads, dim=1), proj)
            out["local_head_out"].append(torch.stack([local_heads[hh] @ Wo[:, hh * hd:(hh + 1) * hd].t() for hh in range(H)]))
            m_local = mlp(norm(p + "post_attention_layernorm", x if s.parallel else x + o_local))
            out["local_mlp_out"].append(m_local)
            out["local_resid"].append(x + o_local + m_local)
        if s.parallel:
            m = mlp(norm(p + "post_attention_layernorm", x))
            x = x + o + m
        else:
            x = x + o
            m = mlp(norm(p + "post_attention_layernorm", x))
            x = x + m
        out["mlp_out"].append(m)
        out["resid"].append(x)
    final = s.root + ("final_layer_norm" if s.neox else "norm")
    head = "embed_out.weight" if s.neox else "lm_head.weight"
    head_w = W[s.root + "embed_tokens.weight"] if s.tied else W[head]
    out["final"] = {"rms": not s.neox, "eps": s.eps, "g": W[final + ".weight"], "b": W.get(final + ".bias") if s.neox else None,
                    "head": head_w, "head_bias": None}
    x = norm(final, x)
    out["logits"] = x @ head_w.t()
    return out


# --------------------------------------------------------------------------------------------
# Self-checks: each feature the case is about changes the numbers, and the maps are well formed
# --------------------------------------------------------------------------------------------

def self_checks(case, s, W, ids, ssa, vanilla):
    name, T = case["name"], len(ids)
    for tag, A in (("ssa", ssa["attention"]), ("vanilla", vanilla["attention"]), ("local", ssa["local"])):
        if float(torch.triu(A, diagonal=1).abs().max()) != 0.0:
            lit.fail(f"{name}: {tag} attention not zero above the diagonal")
        lit.check_close(f"{name}: {tag} rows sum to 1", A.sum(-1), torch.ones(A.shape[:-1], dtype=F64), 1e-12)
    for l, w in enumerate(s.windows):
        if w:
            if float(torch.tril(ssa["attention"][l], diagonal=-w).abs().max()) != 0.0:
                lit.fail(f"{name}: layer {l} attends outside its window {w}")
            if T <= w:
                lit.fail(f"{name}: the text is not longer than the window")
    if any(s.windows):
        full = hf_forward(s, W, ids, beta=bool(case.get("beta")), windows=[0] * s.L)
        if float((full["attention"] - ssa["attention"]).abs().max()) < 0.05:
            lit.fail(f"{name}: the sliding window barely changes the maps")
        first = min(l for l, w in enumerate(s.windows) if w)
        lit.check_close(f"{name}: layers before the first windowed one", full["attention"][:first], ssa["attention"][:first], 0.0)
    if s.scaling:
        plain = inv_freq(Shape({**s.cfg, "rope_scaling": None}))
        scaled = inv_freq(s)
        kept = int((scaled == plain).sum())
        divided = int(torch.isclose(scaled, plain / s.scaling["factor"], rtol=1e-12, atol=0).sum())
        if kept == 0 or divided == 0 or kept + divided == len(plain):
            lit.fail(f"{name}: llama3 scaling should keep, divide and interpolate some frequencies each")
        unscaled = hf_forward(s, W, ids, beta=bool(case.get("beta")), scaling=False)
        if float((unscaled["attention"] - ssa["attention"]).abs().max()) < 0.05:
            lit.fail(f"{name}: llama3 RoPE scaling barely changes the maps at {T} tokens")
    if s.neox:  # the fused projection's rows, per head [q | k | v], against a row gather
        h0 = layer_norm(W[s.root + "embed_in.weight"][torch.tensor(ids)], W[s.root + "layers.0.input_layernorm.weight"],
                        W[s.root + "layers.0.input_layernorm.bias"], s.eps)
        wq, bq = W[s.attn(0) + ".query_key_value.weight"], W[s.attn(0) + ".query_key_value.bias"]
        rows = torch.arange(2 * s.hd, 3 * s.hd) + 3 * s.hd * (s.H - 1)  # the last head's value rows
        v_last = h0 @ wq[rows].t() + bq[rows]
        qkv = (h0 @ wq.t() + bq).view(T, s.H, 3 * s.hd)
        lit.check_close(f"{name}: the last head's value rows", qkv[:, -1, 2 * s.hd:], v_last, 1e-12)
    if case.get("beta") or s.ssa:
        if float((ssa["attention"] - vanilla["attention"]).abs().max()) < 0.1:
            lit.fail(f"{name}: temperatures barely change the maps; not a meaningful case")
        if float((ssa["tau_q"] - 1).abs().max()) < 0.5:
            lit.fail(f"{name}: tau_q too close to 1")


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------

def case_ids(case):
    gen = torch.Generator().manual_seed(case["seed"] + 1000)
    return torch.randint(0, TOKENIZER_VOCAB, (case["T"],), generator=gen).tolist()


def run_hf_case(case, out_dir, tokenizer_dir):
    t0 = time.time()
    name, cfg = case["name"], case["config"]
    s = Shape(cfg)
    s.cfg = cfg
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    W32 = hf_weights(case, s)
    stored = list(W32.items())
    if case.get("buffers"):
        stored += list(buffers(s, cfg["max_position_embeddings"]).items())
    lit.write_safetensors(os.path.join(d, "model.safetensors"), stored, {"format": "pt"})
    back = lit.read_safetensors(os.path.join(d, "model.safetensors"))
    for k, t in stored:
        lit.check_close(f"{name}: model.safetensors {k} read back", back[k], t, 0.0)
    W = {k: v.to(F64) for k, v in W32.items()}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    shutil.copyfile(os.path.join(tokenizer_dir, "encoder.json"), os.path.join(d, "vocab.json"))
    shutil.copyfile(os.path.join(tokenizer_dir, "vocab.bpe"), os.path.join(d, "merges.txt"))

    ids = case_ids(case)
    beta = bool(case.get("beta"))
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump({"family": case["family"], "description": case["desc"], "ids": ids, "twin": None,
                   "ablate": case["ablate"], "hf": True, "windows": s.windows}, f)
        f.write("\n")
    l_ab, h_ab = (int(x) for x in case["ablate"].split(":"))
    ssa = hf_forward(s, W, ids, beta=beta, local=True)
    vanilla = hf_forward(s, W, ids, beta=beta, vanilla=True)
    ablated = hf_forward(s, W, ids, beta=beta, ablate=(l_ab, h_ab))
    self_checks(case, s, W, ids, ssa, vanilla)
    A, B = ssa["attention"], ablated["attention"]
    lit.check_close(f"{name}: ablation leaves layers before {l_ab}", A[:l_ab], B[:l_ab], 0.0)
    if float((A[l_ab, h_ab] - B[l_ab, h_ab]).abs().max()) < 0.05:
        lit.fail(f"{name}: the ablated head's map barely changes")

    ref, closest = [], []
    for suffix, run in (("", ssa), ("_vanilla", vanilla)):
        pred = lit.predictions(run["logits"], ids)
        closest.append(float(pred["top_gap"].min()))
        ref.append(("attention" + suffix, run["attention"]))
        if not suffix:
            ref += [("tau_q", run["tau_q"]), ("tau_v", run["tau_v"])]
        ref += [(k + suffix, pred[k]) for k in ("loss", "top_ids", "top_probs", "top_gap")]
    ref += lit.lens_and_attribution(ssa, ids)
    ref += [(k + "_vanilla", v) for k, v in lit.lens_and_attribution(vanilla, ids)]
    local_lens = dict(lit.lens_and_attribution(lit.local_run(ssa), ids))
    lit.check_close(f"{name}: layer-local lens row 1 equals tau = 1's", local_lens["lens_loss"][1], dict(ref)["lens_loss_vanilla"][1], 1e-9)
    ref += [(k + "_local", v) for k, v in local_lens.items()]
    ref += [("last_logits", ssa["logits"][-1]), ("attention_local", ssa["local"]),
            ("attention_ablated", ablated["attention"]), ("loss_ablated", lit.predictions(ablated["logits"], ids)["loss"])]
    path = os.path.join(d, "reference.safetensors")
    lit.write_safetensors(path, ref, {"generator": "tests/model/hf_family_reference.py", "case": name})
    print(f"{name:12s} {s.type} L={s.L} H={s.H} G={s.G} hd={s.hd} rot={s.rot} V={s.V} T={len(ids)} "
          f"windows={s.windows} tau_q=[{float(ssa['tau_q'].min()):.2f},{float(ssa['tau_q'].max()):.2f}] "
          f"max|P-Pvan|={float((ssa['attention'] - vanilla['attention']).abs().max()):.3f} "
          f"min top_gap={min(closest):.1e} {time.time() - t0:.1f}s")
