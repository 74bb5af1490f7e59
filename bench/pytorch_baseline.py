#!/usr/bin/python3
"""The PyTorch baseline ssaviz_bench measures against, in the same run and on the same machine.

The same work as ssaviz's analysis (Engine::Analyze), written as a researcher would write it in
PyTorch: the HF GPT-2 forward pass in batched torch ops with every layer's attention captured
(like output_attentions=True), the SSA model and its tau = 1 counterfactual as one batch of two
(they share the weights; the counterfactual's temperatures are ones); both sides' logits, and
from them each token's loss and rank and each position's top 10 (log_softmax, gather, topk);
the row metrics of SPEC section 2 and JS / L1 against the counterfactual in torch ops; and one
head's map max-pooled and colour-mapped to an image.

Reads a model folder (config.json + model.safetensors, HF names) and a file of token ids, runs
one token count per process (so peak memory is that count's), and prints one JSON line:
  {"tokens": T, "forward_ms": ..., "predictions_ms": ..., "metrics_ms": ..., "total_ms": ...,
   "bake_ms": ..., "peak_rss_mb": ..., "entropy_sum": ..., "js_sum": ..., "loss_sum": ...}
forward_ms: both passes; predictions_ms: logits, loss, rank and top 10 of both sides; total_ms:
the three phases run back to back. Each time is the median of --repeats runs after one warm-up.

Usage: /usr/bin/python3 bench/pytorch_baseline.py --model DIR --ids FILE --tokens T [--threads N]
"""

import argparse
import json
import math
import resource
import statistics
import struct
import time

import numpy as np
import torch


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F32": np.float32, "F16": np.float16}
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        begin, end = meta["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=dtypes[meta["dtype"]]).reshape(meta["shape"])
        out[name] = torch.from_numpy(array.astype(np.float32))
    return out


def temperature(form, W, prefix, z_heads, x):
    """tau [H, T] for one side; z_heads [H, T, D] (q or v), x [T, E] (LayerNorm-1 output)."""
    H, T, _ = z_heads.shape
    pos = torch.ones(1, T)
    if form.get("position"):
        p = W[prefix + "_pos"].reshape(-1, 1)
        s = {"sigmoid": torch.sigmoid(p), "exp_exp": torch.exp(-torch.exp(p)), "linear": p}[form["position"]]
        pos = 1 + s * torch.log(torch.arange(1, T + 1, dtype=torch.float32)).unsqueeze(0)
    tok = torch.zeros(1, T)
    if form.get("token"):
        w, b = W[prefix + "_tok.weight"], W.get(prefix + "_tok.bias")
        if form["token"] == "shared":
            tok = z_heads @ w if w.dim() == 1 else (z_heads * w.unsqueeze(1)).sum(-1)
        else:
            tok = (x @ w).unsqueeze(0) if w.dim() == 1 else (x @ w.t()).t()
        if b is not None:
            tok = tok + b.reshape(-1, 1)
        tok = torch.tanh(tok)
    tau = pos + tok if form.get("combine", "sum") == "sum" else pos * (1 + tok)
    return tau.expand(H, T)


def forward(config, W, ids):
    """Both sides at once, batch row 0 the SSA model and row 1 its tau = 1 counterfactual: every
    layer's attention [L, 2, H, T, T] and the last hidden state [2, T, E]."""
    E, H, L = config["n_embd"], config["n_head"], config["n_layer"]
    D, T = E // H, len(ids)
    ssa = config.get("ssa") or {}
    q_form, v_form = ssa.get("query"), ssa.get("value")
    x = (W["wte.weight"][ids] + W["wpe.weight"][:T]).expand(2, T, E)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    maps = []
    for l in range(L):
        p = f"h.{l}."
        h = torch.nn.functional.layer_norm(x, (E,), W[p + "ln_1.weight"], W[p + "ln_1.bias"], 1e-5)
        qkv = h @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]
        q, k, v = (qkv[..., i * E:(i + 1) * E].view(2, T, H, D).transpose(1, 2) for i in range(3))
        scores = q @ k.transpose(-1, -2) / math.sqrt(D)
        if q_form:  # the SSA row's temperatures; the counterfactual's stay 1
            tau_q = torch.ones(2, H, T)
            tau_q[0] = temperature(q_form, W, p + "attn.ssa_q", q[0], h[0])
            scores = scores * tau_q.unsqueeze(-1)
        attn = torch.softmax(scores.masked_fill(mask, float("-inf")), -1)
        if v_form:
            tau_v = torch.ones(2, H, T)
            tau_v[0] = temperature(v_form, W, p + "attn.ssa_v", v[0], h[0])
            v = v * tau_v.unsqueeze(-1)
        y = (attn @ v).transpose(1, 2).reshape(2, T, E)
        x = x + y @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
        h2 = torch.nn.functional.layer_norm(x, (E,), W[p + "ln_2.weight"], W[p + "ln_2.bias"], 1e-5)
        act = torch.nn.functional.gelu(h2 @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + act @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
        maps.append(attn)
    return torch.stack(maps), x


def predictions(W, hidden, ids):
    """Both sides' logits [2, T, V] (final LayerNorm, tied head), and from them each token's loss
    and rank [2, T - 1] (position t predicts token t + 1) and each position's top 10 [2, T, 10]."""
    E = hidden.shape[-1]
    head = W.get("lm_head.weight", W["wte.weight"])
    logits = torch.nn.functional.layer_norm(hidden, (E,), W["ln_f.weight"], W["ln_f.bias"], 1e-5) @ head.t()
    logp = torch.log_softmax(logits, -1)
    target = ids[1:].expand(2, -1).unsqueeze(-1)
    actual = logp[:, :-1].gather(-1, target)  # [2, T - 1, 1]
    loss = -actual[..., 0]
    rank = (logp[:, :-1] > actual).sum(-1)
    top = logp.topk(10, -1)
    return {"loss": loss, "rank": rank, "top_ids": top.indices, "top_probs": top.values.exp()}


def metrics(A, B):
    """SPEC section 2's row metrics of A and B [L, H, T, T], and JS / L1 of A against B."""
    T = A.shape[-1]
    i = torch.arange(1, T + 1, dtype=torch.float32)
    out = {}
    for name, P in (("ssa", A), ("compare", B)):
        entropy = -torch.special.xlogy(P, P).sum(-1)
        out[name] = {
            "entropy": entropy,
            "normalized_entropy": torch.where(i > 1, entropy / torch.log(i).clamp(min=1e-30), torch.zeros(())),
            "spikiness": 1.0 / (i * (P * P).sum(-1)),
            "max_weight": P.max(-1).values,
            "top5_mass": P.topk(min(5, T), -1).values.sum(-1),
            "effective_support": torch.exp(entropy),
            "sink_mass": P[..., 0],
        }
    M = 0.5 * (A + B)
    out["js"] = 0.5 * (torch.special.xlogy(A, A / M).nan_to_num(0).sum(-1) + torch.special.xlogy(B, B / M).nan_to_num(0).sum(-1))
    out["l1"] = (A - B).abs().sum(-1)
    return out


def bake(map_tt, pixels):
    """One [T, T] map max-pooled to at most `pixels` a side and colour-mapped to RGBA bytes."""
    T = map_tt.shape[-1]
    pool = max(1, math.ceil(T / pixels))
    pooled = torch.nn.functional.max_pool2d(map_tt[None], pool, pool, ceil_mode=True)[0]
    lut = (torch.linspace(0, 1, 256)[:, None] * torch.tensor([255.0, 200.0, 80.0, 255.0])).to(torch.uint8)
    index = (pooled / pooled.max().clamp(min=1e-30) * 255).to(torch.long)
    return lut[index].cpu().numpy()


def sync():
    """A GPU runs ahead of Python: wait for its queue before reading the clock."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def use_device(device):
    """cuda: every tensor these functions make (ones, arange, the ids) is made on the GPU."""
    if device != "cpu":
        torch.set_default_device(device)


def median_ms(fn, repeats):
    fn()  # warm-up
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--tokens", type=int, required=True)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pixels", type=int, default=1024)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (then tensors are made there and clocks synchronised)")
    args = ap.parse_args()
    use_device(args.device)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    with open(args.model + "/config.json") as f:
        config = json.load(f)
    W = {k: v.to(args.device) for k, v in load_safetensors(args.model + "/model.safetensors").items()}
    with open(args.ids) as f:
        ids = torch.tensor([int(t) for t in f.read().split()][:args.tokens], dtype=torch.long)

    captured = {}

    def run_forward():
        captured["maps"], captured["hidden"] = forward(config, W, ids)

    def run_predictions():
        captured["p"] = predictions(W, captured["hidden"], ids)

    def run_metrics():
        captured["m"] = metrics(captured["maps"][:, 0], captured["maps"][:, 1])

    def run_all():
        run_forward()
        run_predictions()
        run_metrics()

    forward_ms = median_ms(run_forward, args.repeats)
    predictions_ms = median_ms(run_predictions, args.repeats)
    metrics_ms = median_ms(run_metrics, args.repeats)
    total_ms = median_ms(run_all, args.repeats)
    bake_ms = median_ms(lambda: bake(captured["maps"][0, 0, 0], args.pixels), args.repeats)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if args.device == "cuda":  # the device's peak, not the host's
        peak_kb = torch.cuda.max_memory_allocated() / 1024.0
    print(json.dumps({"tokens": len(ids), "forward_ms": forward_ms, "predictions_ms": predictions_ms, "metrics_ms": metrics_ms,
                      "total_ms": total_ms, "bake_ms": bake_ms, "peak_rss_mb": peak_kb / 1024.0,
                      # The same computation as ssaviz's? ssaviz_bench compares these sums with its own.
                      "entropy_sum": float(captured["m"]["ssa"]["entropy"].double().sum()),
                      "js_sum": float(captured["m"]["js"].double().sum()),
                      "loss_sum": float(captured["p"]["loss"][0].double().sum())}))


if __name__ == "__main__":
    main()
