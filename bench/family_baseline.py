#!/usr/bin/python3
"""The PyTorch baseline for the lit-gpt families (Pythia, Llama, Mistral, Llama 3), run beside
`ssaviz_bench --no-baseline` by bench/families.sh on the same machine in the same run.

The same work as ssaviz's whole analysis: the forward pass in batched float32 torch ops with every
layer's attention captured (as output_attentions does), for the SSA model and its tau = 1
counterfactual; SPEC section 2's row metrics and JS / L1 (bench/pytorch_baseline.py's own
functions); and both passes' logits, per-token loss and top-10 next tokens.

Reads a folder `ssaviz init-random --family ...` wrote (lit_config.json + model.safetensors in
lit-gpt's names) and a file of token ids; prints one JSON line:
  {"tokens": T, "forward_ms": ..., "metrics_ms": ..., "peak_rss_mb": ..., "loss": ...}

Usage: /usr/bin/python3 bench/family_baseline.py --model DIR --ids FILE --tokens T [--threads N]
"""

import argparse
import json
import math
import os
import resource
import struct
import sys

import numpy as np

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_baseline import median_ms, metrics, use_device  # noqa: E402


def load_safetensors(path):
    """name -> float32 tensor, from F32, F16 or BF16 (bfloat16 is the top half of a float32)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        begin, end = meta["data_offsets"]
        raw = data[begin:end]
        if meta["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype={"F32": "<f4", "F16": "<f2"}[meta["dtype"]]).astype(np.float32)
        out[name] = torch.from_numpy(array.reshape(meta["shape"]).copy())
    return out


def tau(form, W, prefix, z, x, log_i):
    """[N, T] for one side: z [N, T, D] its heads' q or v, x [T, E] the norm-1 output."""
    N, T, _ = z.shape
    pos, tok = torch.ones(1, T), torch.zeros(1, T)
    if form.get("position"):
        p = W[prefix + "_pos"].reshape(-1, 1)
        s = {"sigmoid": torch.sigmoid(p), "exp_exp": torch.exp(-torch.exp(p)), "linear": p}[form["position"]]
        pos = 1 + s * log_i
    if form.get("token"):
        w, b = W[prefix + "_tok.weight"], W[prefix + "_tok.bias"]
        tok = (z * w.reshape(-1, 1, z.shape[-1])).sum(-1) if form["token"] == "shared" else (x @ w.reshape(-1, x.shape[-1]).t()).t()
        tok = torch.tanh(tok + b.reshape(-1, 1))
    out = pos + tok if form.get("combine", "sum") == "sum" else pos * (1 + tok)
    return out.expand(N, T)


def forward(c, W, ids, vanilla):
    """attention [L, H, T, T] and logits [T, V] of one pass."""
    E, H, G, L = c["n_embd"], c["n_head"], c["n_query_groups"], c["n_layer"]
    D, T, n = E // H, len(ids), int(c["rotary_percentage"] * (E // H))
    ssa = c.get("ssa") or {}
    inv = 1.0 / (float(c["rope_base"]) ** (torch.arange(0, n, 2, dtype=torch.float32) / n))
    ang = torch.outer(torch.arange(T, dtype=torch.float32) / c["rope_condense_ratio"], inv).repeat(1, 2)
    cos, sin = ang.cos(), ang.sin()
    log_i = torch.log(torch.arange(1, T + 1, dtype=torch.float32)).unsqueeze(0)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    rms = c["_norm_class"] == "RMSNorm"

    def norm(x, p):
        if rms:
            return W[p + ".weight"] * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c["norm_eps"])
        return F.layer_norm(x, (E,), W[p + ".weight"], W[p + ".bias"], c["norm_eps"])

    def linear(x, p):
        y = x @ W[p + ".weight"].t()
        return y + W[p + ".bias"] if p + ".bias" in W else y

    def rope(t):
        a = t[..., :n]
        rot = torch.cat((-a[..., n // 2:], a[..., :n // 2]), -1)
        return torch.cat((a * cos + rot * sin, t[..., n:]), -1)

    x = W["transformer.wte.weight"][ids]
    maps = []
    for l in range(L):
        p = f"transformer.h.{l}."
        n1 = norm(x, p + "norm_1")
        qkv = linear(n1, p + "attn.attn").view(T, G, H // G + 2, D)
        q = qkv[:, :, :H // G].reshape(T, H, D).transpose(0, 1)
        k, v = qkv[:, :, H // G].transpose(0, 1), qkv[:, :, H // G + 1].transpose(0, 1)
        tq = tau(ssa["query"], W, p + "attn.ssa_q", q, n1, log_i) if ssa.get("query") and not vanilla else None
        if ssa.get("value") and not vanilla:
            v = v * tau(ssa["value"], W, p + "attn.ssa_v", v, n1, log_i).unsqueeze(-1)
        k = rope(k).repeat_interleave(H // G, 0)
        scores = rope(q) @ k.transpose(-1, -2) / math.sqrt(D)
        if tq is not None:
            scores = scores * tq.unsqueeze(-1)
        attn = torch.softmax(scores.masked_fill(mask, float("-inf")), -1)
        maps.append(attn)
        a = linear((attn @ v.repeat_interleave(H // G, 0)).transpose(0, 1).reshape(T, E), p + "attn.proj")

        def mlp(h):
            if c["_mlp_class"] == "LLaMAMLP":
                return linear(F.silu(linear(h, p + "mlp.fc_1")) * linear(h, p + "mlp.fc_2"), p + "mlp.proj")
            return linear(F.gelu(linear(h, p + "mlp.fc"), approximate=c["gelu_approximate"]), p + "mlp.proj")

        if c["parallel_residual"]:
            x = x + a + mlp(n1 if c["shared_attention_norm"] else norm(x, p + "norm_2"))
        else:
            x = x + a
            x = x + mlp(norm(x, p + "norm_2"))
    return torch.stack(maps), linear(norm(x, "transformer.ln_f"), "lm_head")


def predictions(logits, ids):
    """Per-token loss and the top-10 of every position, as ssaviz computes them."""
    logp = torch.log_softmax(logits, -1)
    loss = -logp[:-1].gather(1, ids[1:].unsqueeze(1)).squeeze(1)
    top = logp.topk(10, -1)
    return loss, top.indices, top.values.exp()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--tokens", type=int, required=True)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    args = ap.parse_args()
    use_device(args.device)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    with open(os.path.join(args.model, "lit_config.json")) as f:
        c = json.load(f)
    W = {k: v.to(args.device) for k, v in load_safetensors(os.path.join(args.model, "model.safetensors")).items()}
    with open(args.ids) as f:
        ids = torch.tensor([int(t) for t in f.read().split()][:args.tokens], dtype=torch.long)
    out = {}

    def run():
        for name, vanilla in (("ssa", False), ("vanilla", True)):
            maps, logits = forward(c, W, ids, vanilla)
            out[name] = maps
            out[name + "_pred"] = predictions(logits, ids)

    forward_ms = median_ms(run, args.repeats)
    metrics_ms = median_ms(lambda: out.update(m=metrics(out["ssa"], out["vanilla"])), args.repeats)
    print(json.dumps({"tokens": len(ids), "forward_ms": forward_ms, "metrics_ms": metrics_ms,
                      "peak_rss_mb": (torch.cuda.max_memory_allocated() / 2**20 if args.device == "cuda"
                                      else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0),
                      "loss": float(out["ssa_pred"][0].double().mean()),
                      "entropy_sum": float(out["m"]["ssa"]["entropy"].double().sum())}))


if __name__ == "__main__":
    main()
