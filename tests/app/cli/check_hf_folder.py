"""Reads an HF folder ssaviz wrote (init-random --layout hf) as Hugging Face would, and checks
ssaviz's analysis of it: tests/model/hf_family_reference.py's forward pass (written from
transformers' documented behaviour: HF's names, orientations, fused and split tensors) over the
folder's config.json and model.safetensors, for the ids of an export of that folder (tokens.json),
against the export's attention.npy, tau_q.npy and tau_v.npy. Prints the largest |difference| of
each; exits 1 above the tolerance (float32 against float64).

usage: check_hf_folder.py FOLDER EXPORT_DIR [FOLDER EXPORT_DIR ...]
"""

import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "model"))
import family_reference as lit  # noqa: E402
import hf_family_reference as hf  # noqa: E402

TOLERANCE = 1e-4


def check(folder, export):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    s = hf.Shape(cfg)
    s.cfg = cfg
    W = {k: v.to(torch.float64) for k, v in lit.read_safetensors(os.path.join(folder, "model.safetensors")).items()}
    with open(os.path.join(export, "tokens.json")) as f:
        ids = json.load(f)["ids"]
    ref = hf.hf_forward(s, W, ids)
    # ssaviz keeps tau_v per query head (each its kv head's), as the reference does.
    worst = 0.0
    for name in ("attention", "tau_q", "tau_v"):
        got = torch.from_numpy(np.load(os.path.join(export, name + ".npy"))).to(torch.float64)
        want = ref[name]
        if tuple(got.shape) != tuple(want.shape):
            print(f"{cfg['model_type']} {name}: shape {tuple(got.shape)}, the reference's {tuple(want.shape)}")
            return 1
        d = float((got - want).abs().max())
        print(f"{cfg['model_type']} {name}: max |diff| {d:.2e}")
        worst = max(worst, d)
    return 0 if worst <= TOLERANCE else 1


def main():
    args = sys.argv[1:]
    if not args or len(args) % 2:
        print(__doc__)
        return 2
    return max(check(args[i], args[i + 1]) for i in range(0, len(args), 2))


if __name__ == "__main__":
    sys.exit(main())
