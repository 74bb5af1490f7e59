#!/usr/bin/env python3
"""The official SSA code's GPT-2 (lit_gpt/gpt_2_PTS.py: nanoGPT with one attn.beta a layer) against ssaviz.

Written from the official code's behaviour, not from ssaviz: nanoGPT's module names
(transformer.wte / wpe / h.N.ln_1 / attn.c_attn / attn.c_proj / ln_2 / mlp.c_fc / mlp.c_proj /
ln_f, lm_head tied to wte), LayerNorm eps 1e-5 with or without bias, exact GELU, and the
temperature of gpt_2_PTS.py's scaled_dot_product_attention: the scores of query row i (1-based)
times 1 + exp(-exp(beta)) ln i, then the causal mask and the softmax.

Two cases, each a checkpoint with the official configs' keys (block_size, vocab_size, n_layer,
n_head, n_embd, dropout, bias) at a small size, read by `ssaviz export --config FILE`:
  original  configs/gpt_2_124M_original.json's shape: bias true, GPT-2's 50,257 tokens (vocab.json
            + merges.txt), a Fabric-style {"model": state_dict} saved by PyTorch < 2, so each
            layer also holds nanoGPT's causal-mask buffer attn.bias [1, 1, T, T]
  mistral   configs/gpt_2_124M_mistral.json's: bias false (no bias in any Linear or LayerNorm),
            32,000 tokens with a SentencePiece-BPE tokenizer.json (Llama 2's, from npm), a bare
            state dict
For each: ssaviz tokenizes the text, this script runs the same ids through its own forward, and
attention.npy, tau_q.npy and loss.npy must agree within 1e-5 (attention, tau) and 1e-4 (loss).
Exit 0 when every case agrees; the largest differences are printed.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

TEXT = ("The keeper of the lighthouse climbed the stairs every evening, lit the lamp and wrote in his journal "
        "that the sea was calm and the wind came from the west.")

CASES = {
    "original": dict(config=dict(block_size=128, vocab_size=50257, n_layer=3, n_head=4, n_embd=64, dropout=0.0, bias=True),
                     betas=[-1.0, 0.4, -0.2], seed=11, container="fabric", mask_buffer=True),
    "mistral": dict(config=dict(block_size=128, vocab_size=32000, n_layer=2, n_head=4, n_embd=64, dropout=0.0, bias=False),
                    betas=[0.3, -0.7], seed=12, container="bare", mask_buffer=False),
}


def make_weights(c, betas, seed):
    """nanoGPT's state dict, in its order, with weights where attention is neither flat nor one-hot."""
    g = torch.Generator().manual_seed(seed)
    E, V, P, L, b = c["n_embd"], c["vocab_size"], c["block_size"], c["n_layer"], c["bias"]

    def rn(*shape, std):
        return torch.randn(*shape, generator=g) * std

    sd = {"transformer.wte.weight": rn(V, E, std=0.5), "transformer.wpe.weight": rn(P, E, std=0.2)}
    for l in range(L):
        p = f"transformer.h.{l}."
        sd[p + "ln_1.weight"] = 1 + rn(E, std=0.1)
        if b:
            sd[p + "ln_1.bias"] = rn(E, std=0.05)
        sd[p + "attn.beta"] = torch.tensor(float(betas[l]))
        sd[p + "attn.c_attn.weight"] = rn(3 * E, E, std=1.2 / math.sqrt(E))
        if b:
            sd[p + "attn.c_attn.bias"] = rn(3 * E, std=0.1)
        sd[p + "attn.c_proj.weight"] = rn(E, E, std=0.6 / math.sqrt(E))
        if b:
            sd[p + "attn.c_proj.bias"] = rn(E, std=0.05)
        sd[p + "ln_2.weight"] = 1 + rn(E, std=0.1)
        if b:
            sd[p + "ln_2.bias"] = rn(E, std=0.05)
        sd[p + "mlp.c_fc.weight"] = rn(4 * E, E, std=1.0 / math.sqrt(E))
        if b:
            sd[p + "mlp.c_fc.bias"] = rn(4 * E, std=0.05)
        sd[p + "mlp.c_proj.weight"] = rn(E, 4 * E, std=0.6 / math.sqrt(4 * E))
        if b:
            sd[p + "mlp.c_proj.bias"] = rn(E, std=0.05)
    sd["transformer.ln_f.weight"] = 1 + rn(E, std=0.1)
    if b:
        sd["transformer.ln_f.bias"] = rn(E, std=0.05)
    sd["lm_head.weight"] = sd["transformer.wte.weight"]  # tied: one storage, two keys, as nanoGPT saves it
    return sd


def forward(sd, c, ids):
    """gpt_2_PTS.py's forward in float64: attention maps [L, H, T, T], tau_q [L, T], logits [T, V]."""
    E, H, L = c["n_embd"], c["n_head"], c["n_layer"]
    D = E // H
    T = len(ids)
    w = {k: v.double() for k, v in sd.items()}
    get = lambda name: w.get(name)
    ids_t = torch.tensor(ids)
    x = w["transformer.wte.weight"][ids_t] + w["transformer.wpe.weight"][:T]
    i = torch.arange(1, T + 1, dtype=torch.float64)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    maps, taus = [], []

    def ln(x, p):
        return F.layer_norm(x, (E,), get(p + ".weight"), get(p + ".bias"), 1e-5)

    def linear(x, p):
        return F.linear(x, get(p + ".weight"), get(p + ".bias"))

    for l in range(L):
        p = f"transformer.h.{l}."
        q, k, v = linear(ln(x, p + "ln_1"), p + "attn.c_attn").split(E, dim=-1)
        q, k, v = (t.view(T, H, D).transpose(0, 1) for t in (q, k, v))
        tau = 1 + torch.exp(-torch.exp(w[p + "attn.beta"])) * torch.log(i)  # row i's, 1-based
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D) * tau.view(1, T, 1)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        maps.append(att)
        taus.append(tau)
        y = (att @ v).transpose(0, 1).reshape(T, E)
        x = x + linear(y, p + "attn.c_proj")
        h = F.gelu(linear(ln(x, p + "ln_2"), p + "mlp.c_fc"))  # nn.GELU(): exact
        x = x + linear(h, p + "mlp.c_proj")
    x = ln(x, "transformer.ln_f")
    logits = x @ w["lm_head.weight"].T
    return torch.stack(maps), torch.stack(taus), logits


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr))
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ssaviz", required=True, help="the ssaviz binary")
    ap.add_argument("--out", required=True, help="scratch folder")
    ap.add_argument("--gpt2-tokenizer", required=True, help="a folder with GPT-2's vocab.json and merges.txt")
    ap.add_argument("--spm-tokenizer", required=True, help="a 32,000-piece SentencePiece-BPE tokenizer.json (Llama 2's)")
    args = ap.parse_args()
    worst = {}
    for name, case in CASES.items():
        c = case["config"]
        d = os.path.join(args.out, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        sd = make_weights(c, case["betas"], case["seed"])
        saved = dict(sd)
        if case["mask_buffer"]:  # nanoGPT without flash attention (PyTorch < 2) keeps its mask in the state dict
            for l in range(c["n_layer"]):
                saved[f"transformer.h.{l}.attn.bias"] = torch.tril(torch.ones(c["block_size"], c["block_size"])).view(
                    1, 1, c["block_size"], c["block_size"])
        ckpt = os.path.join(d, "ckpt.pth")
        torch.save({"model": saved, "iter_num": 100} if case["container"] == "fabric" else saved, ckpt)
        config = os.path.join(d, "gpt_2_124M_%s.json" % name)
        with open(config, "w") as f:
            json.dump(c, f, indent=4)
        if name == "original":
            for f in ("vocab.json", "merges.txt"):
                shutil.copy(os.path.join(args.gpt2_tokenizer, f), d)
        else:
            shutil.copy(args.spm_tokenizer, os.path.join(d, "tokenizer.json"))
        # Read with --config, and as the official fine-tune scripts require a checkpoint folder:
        # lit_model.pth with the config beside it as lit_config.json (read without --config; the
        # shape from the tensors alone took 1 head of GPT-2's size 64 here, not 4).
        folder = os.path.join(d, "folder")
        os.makedirs(folder)
        shutil.copy(ckpt, os.path.join(folder, "lit_model.pth"))
        shutil.copy(config, os.path.join(folder, "lit_config.json"))
        for f in os.listdir(d):
            if f in ("vocab.json", "merges.txt", "tokenizer.json"):
                shutil.copy(os.path.join(d, f), folder)
        for how, common in (("--config", ["--model", ckpt, "--config", config, "--device", "cpu"]),
                            ("lit_config.json", ["--model", folder, "--device", "cpu"])):
            ids = json.loads(run([args.ssaviz, "tokenize", *common, "--text", TEXT, "--json"]))["ids"]
            out = os.path.join(d, "export-" + how.strip("-"))
            run([args.ssaviz, "export", *common, "--text", TEXT, "--out", out, "--format", "npy"])
            maps, taus, logits = forward(sd, c, ids)
            loss = F.cross_entropy(logits[:-1], torch.tensor(ids[1:]), reduction="none")
            H, T = c["n_head"], len(ids)
            got = {k: np.load(os.path.join(out, k + ".npy")) for k in ("attention", "tau_q", "loss")}
            want = {"attention": maps.numpy(), "tau_q": taus[:, None, :].expand(-1, H, T).numpy(), "loss": loss.numpy()}
            for k, tol in (("attention", 1e-5), ("tau_q", 1e-5), ("loss", 1e-4)):
                if got[k].shape != want[k].shape:
                    sys.exit("%s %s (%s): shape %s, the reference's %s" % (name, k, how, got[k].shape, want[k].shape))
                diff = float(np.max(np.abs(got[k].astype(np.float64) - want[k])))
                worst[(name, k)] = max(worst.get((name, k), 0.0), diff)
                print("%-8s %-9s %-16s %d tokens  max |diff| %.3g  (tolerance %g)" % (name, k, how, T, diff, tol))
                if not diff <= tol:
                    sys.exit("%s: %s (%s) differs from the official forward by %.3g (tolerance %g)" % (name, k, how, diff, tol))
    print("the official GPT-2 configs: every case agrees")


if __name__ == "__main__":
    main()
