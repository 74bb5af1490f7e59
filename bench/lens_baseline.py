#!/usr/bin/python3
"""The PyTorch baseline of `ssaviz_bench --only lens`: the logit lens and direct logit attribution
of the SSA side (SPEC section 10) written as a researcher would in PyTorch, the same products as
Engine::RunLens.

A forward pass of the HF GPT-2 layout that keeps the residual stream (the embeddings and each
layer's output, [L + 1, T, E]) and each layer's heads' outputs before the projection ([L, T, H, D]);
then for every layer and position, in blocks of 256 rows, the residual through the final LayerNorm
and the tied head, log_softmax, each position's top 5 and the next token's loss; then every
position's attribution to the next token (each head through its slice of the projection, each
MLP's whole output, the embeddings and the constants, through the final norm with its scale frozen
at the final residual). Prints one JSON line:
  {"tokens": T, "total_ms": ..., "forward_ms": ..., "lens_ms": ..., "attribution_ms": ...,
   "loss_sum": ..., "peak_rss_mb": ...}
each time the median of --repeats runs after one warm-up; loss_sum sums the lens's [L + 1, T - 1]
losses, which ssaviz_bench compares with its own.

Usage: /usr/bin/python3 bench/lens_baseline.py --model DIR --ids FILE --tokens T [--threads N]
"""

import argparse
import json
import math
import os
import resource
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_baseline import load_safetensors, median_ms, temperature  # noqa: E402


def forward_stream(config, W, ids):
    """The SSA side alone: the residual stream [L + 1, T, E] and the heads' outputs [L, T, H, D]."""
    E, H, L = config["n_embd"], config["n_head"], config["n_layer"]
    D, T = E // H, len(ids)
    ssa = config.get("ssa") or {}
    q_form, v_form = ssa.get("query"), ssa.get("value")
    x = W["wte.weight"][ids] + W["wpe.weight"][:T]
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    resid, heads = [x], []
    for l in range(L):
        p = f"h.{l}."
        h = torch.nn.functional.layer_norm(x, (E,), W[p + "ln_1.weight"], W[p + "ln_1.bias"], 1e-5)
        qkv = h @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]
        q, k, v = (qkv[:, i * E:(i + 1) * E].view(T, H, D).transpose(0, 1) for i in range(3))
        scores = q @ k.transpose(-1, -2) / math.sqrt(D)
        if q_form:
            scores = scores * temperature(q_form, W, p + "attn.ssa_q", q, h).unsqueeze(-1)
        attn = torch.softmax(scores.masked_fill(mask, float("-inf")), -1)
        if v_form:
            v = v * temperature(v_form, W, p + "attn.ssa_v", v, h).unsqueeze(-1)
        y = (attn @ v).transpose(0, 1)  # [T, H, D]
        heads.append(y)
        x = x + y.reshape(T, E) @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
        h2 = torch.nn.functional.layer_norm(x, (E,), W[p + "ln_2.weight"], W[p + "ln_2.bias"], 1e-5)
        act = torch.nn.functional.gelu(h2 @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + act @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
        resid.append(x)
    return resid, heads


def lens(W, resid, ids, block=256, k=5):
    """Every layer's rows through the final norm and head: the next token's loss [L + 1, T - 1] and
    each position's top k."""
    E = resid[0].shape[-1]
    T = len(ids)
    head = W.get("lm_head.weight", W["wte.weight"])
    loss = torch.zeros(len(resid), T - 1)
    tops = []
    for l, r in enumerate(resid):
        for t0 in range(0, T, block):
            rows = r[t0:t0 + block]
            logp = torch.log_softmax(
                torch.nn.functional.layer_norm(rows, (E,), W["ln_f.weight"], W["ln_f.bias"], 1e-5) @ head.t(), -1)
            tops.append(logp.topk(k, -1))
            n = min(len(rows), T - 1 - t0)
            if n > 0:
                loss[l, t0:t0 + n] = -logp[:n].gather(1, ids[t0 + 1:t0 + 1 + n].unsqueeze(1))[:, 0]
    return loss, tops


def attribution(config, W, resid, heads, ids):
    """Every position's parts of the next token's logit: heads [L, H, T - 1], MLPs [L, T - 1],
    embeddings and constants [T - 1]."""
    E, H, L = config["n_embd"], config["n_head"], config["n_layer"]
    D, T = E // H, len(ids)
    head = W.get("lm_head.weight", W["wte.weight"])
    targets = ids[1:]
    final = resid[-1][:T - 1]
    u = head[targets] * W["ln_f.weight"]
    d = (u - u.mean(-1, keepdim=True)) / torch.sqrt(final.var(-1, unbiased=False, keepdim=True) + 1e-5)  # [T - 1, E]
    constants = head[targets] @ W["ln_f.bias"]
    parts_heads, parts_mlp = [], []
    for l in range(L):
        p = f"h.{l}."
        proj = W[p + "attn.c_proj.weight"]
        y = heads[l][:T - 1]  # [T - 1, H, D]
        back = (d @ proj.t()).view(-1, H, D)
        parts_heads.append((y * back).sum(-1).t())
        attn = y.reshape(-1, E) @ proj + W[p + "attn.c_proj.bias"]
        constants = constants + d @ W[p + "attn.c_proj.bias"]
        parts_mlp.append(((resid[l + 1][:T - 1] - resid[l][:T - 1] - attn) * d).sum(-1))
    embed = (resid[0][:T - 1] * d).sum(-1)
    return torch.stack(parts_heads), torch.stack(parts_mlp), embed, constants


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--tokens", type=int, required=True)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    with open(args.model + "/config.json") as f:
        config = json.load(f)
    W = load_safetensors(args.model + "/model.safetensors")
    with open(args.ids) as f:
        ids = torch.tensor([int(t) for t in f.read().split()][:args.tokens], dtype=torch.long)

    kept = {}

    def run_forward():
        kept["resid"], kept["heads"] = forward_stream(config, W, ids)

    def run_lens():
        kept["loss"], _ = lens(W, kept["resid"], ids)

    def run_attribution():
        attribution(config, W, kept["resid"], kept["heads"], ids)

    def run_all():
        run_forward()
        run_lens()
        run_attribution()

    out = {"tokens": len(ids), "forward_ms": median_ms(run_forward, args.repeats), "lens_ms": median_ms(run_lens, args.repeats),
           "attribution_ms": median_ms(run_attribution, args.repeats), "total_ms": median_ms(run_all, args.repeats)}
    out["loss_sum"] = float(kept["loss"].double().sum())
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps(out))


if __name__ == "__main__":
    main()
