#!/usr/bin/env python3
"""Issue 37's Python check on a device: `import ssaviz` with device="cuda" (and "cuda:N" for each
GPU the machine has) against device="cpu" on the same text, every array of the analysis within
TOL (|difference| / max(1, |CPU's value|): effective support counts keys, up to T, so float32
holds it to about 1e-7 of its size, not of 1); the arrays' first read timed against a second (copied to the host once); and, where
dask.distributed is installed, export_batch on a LocalCluster with a device per worker against
the serial CPU batch. With BASE (a fine-tune's base of MODEL's shape) also the lens, the
attribution and the head ranking beside it on the device against the CPU: every side's lens loss
and parts, one token's attribute() read through SSA's divisor, and rank_heads()'s every part
(a what-if a head; the drift's parts, each weight taken back from the base one at a time).
Prints one line per check and exits 1 if any failed.

    usage: PYTHONPATH=BUILD/python python3 bench/gpu_python.py MODEL DEVICE TEXT_FILE WORK [TOL [BASE]]
           (DEVICE cpu: a dry run on a machine without a GPU)
"""
import os
import subprocess
import sys
import time
import warnings

import numpy as np

import ssaviz

ARRAYS = ("tau_q", "tau_v", "loss", "loss_compare", "top_probs")


def largest(x, y):
    """max |x - y| / max(1, |y|), NaN where both are NaN counting as equal (inf where only one is, or the shapes differ)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape:
        return float("inf")
    both = np.isnan(x) & np.isnan(y)
    d = np.where(both, 0.0, np.abs(x - y) / np.maximum(1.0, np.abs(y)))
    return float(np.max(np.where(np.isnan(d), np.inf, d))) if d.size else 0.0


def worst(a, b):
    """The largest scaled |difference| of two analyses' arrays, by name."""
    out = {name: largest(getattr(a, name), getattr(b, name)) for name in ARRAYS}
    for name, x in a.metrics.items():
        out["metrics." + name] = largest(x, b.metrics[name])
    for layer in (0, a.n_layer - 1):
        for side in ("ssa", "compare"):
            out[f"attention[{layer}, 0, {side}]"] = largest(a.attention(layer, 0, side=side), b.attention(layer, 0, side=side))
    return out


def worst_of(ref, got, prefix):
    """The largest scaled |difference| of two dicts' numeric values (numbers, lists, arrays), by key."""
    out = {}
    for k, x in ref.items():
        if isinstance(x, (str, bytes)) or x is None or (isinstance(x, list) and x and isinstance(x[0], str)):
            continue
        out[prefix + k] = largest(got.get(k, np.nan), x) if k in got else float("inf")
    return out


def beside_base(model, base, device, text, tol, check):
    """The lens, the attribution and the head ranking beside a base on DEVICE against the CPU (a
    head's part of the loss is a difference of two losses, each within tol: held to 3 tol)."""
    sides, token, models = [], None, []
    for name in ("cpu", device):
        m = ssaviz.load(model, device=name)
        models.append(m)
        t0 = time.perf_counter()
        a = m.analyze(text, truncate=True, base=base, lens=True)
        token = int(a.top_ids[-1][0]) if token is None else token  # the CPU's top token on both: a near tie picks one
        parts = a.attribute(-1, token, side="base", through="ssa")
        t1 = time.perf_counter()
        ranked = a.rank_heads(progress=False)
        t2 = time.perf_counter()
        sides.append((a, parts, ranked, t1 - t0, t2 - t1))
    (ref, ref_parts, ref_ranked, _, _), (a, parts, ranked, lens_s, rank_s) = sides
    diffs = {}
    for name in ("lens_loss", "lens_loss_compare", "lens_loss_base", "dla", "dla_mlp", "dla_embed", "dla_const",
                 "dla_logit", "dla_divisor", "dla_base", "dla_compare", "dla_divisor_base", "dla_const_free"):
        diffs[name] = largest(getattr(a, name), getattr(ref, name))
    diffs.update(worst_of(ref_parts, parts, "attribute."))
    diffs.update({k: v / 3 for k, v in worst_of(ref_ranked, ranked, "rank_heads.").items()})  # said as a share of 3 tol
    key = max(diffs, key=diffs.get)
    check(f"{device} beside a base: lens, attribute(through='ssa'), rank_heads() (its parts / 3)", diffs[key] <= tol,
          f"{len(diffs)} arrays, largest |diff| / max(1, |cpu|) {diffs[key]:.3g} ({key}), tolerance {tol};"
          f" the lens and attribution {1e3 * lens_s:.0f} ms, rank_heads {1e3 * rank_s:.0f} ms on {device}")
    for m in models:
        m.close()


def main():
    warnings.simplefilter("ignore")  # texts longer than the model's context are truncated, as asked
    model, device, text_file, work = sys.argv[1:5]
    tol = float(sys.argv[5]) if len(sys.argv) > 5 else 1e-5
    base = sys.argv[6] if len(sys.argv) > 6 else None
    text = open(text_file, encoding="utf-8").read()[:3000]
    failed = []

    def check(name, ok, detail):
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
        if not ok:
            failed.append(name)

    cpu = ssaviz.load(model, device="cpu")
    reference = cpu.analyze(text, truncate=True)
    names = [device]
    if device == "cuda":  # each GPU by index (nvidia-smi -L: a line a GPU)
        gpus = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count("GPU ")
        names += [f"cuda:{i}" for i in range(max(1, gpus))]
    for name in names:
        m = ssaviz.load(model, device=name)
        check(f"load(device={name!r})", m.device.startswith("cuda") == name.startswith("cuda"), f"runs on {m.device}")
        t0 = time.perf_counter()
        a = m.analyze(text, truncate=True)
        t1 = time.perf_counter()
        first = a.attention(m.n_layer - 1, 0)
        t2 = time.perf_counter()
        again = a.attention(m.n_layer - 1, 0)
        t3 = time.perf_counter()
        diffs = worst(reference, a)
        largest = max(diffs, key=diffs.get)
        check(f"{name} against the CPU", diffs[largest] <= tol, f"{len(a.ids)} tokens, largest |diff| / max(1, |cpu|) {diffs[largest]:.3g} ({largest}), tolerance {tol}")
        check(f"{name}: a map read twice is the same array", np.array_equal(first, again),
              f"analyze {1e3 * (t1 - t0):.1f} ms, a head's map {1e3 * (t2 - t1):.2f} ms, again {1e3 * (t3 - t2):.3f} ms")
        m.close()
    if base:
        beside_base(model, base, device, text, tol, check)

    try:
        import distributed
    except ImportError:
        print("skip export_batch on Dask: dask.distributed is not installed here", flush=True)
        return 1 if failed else 0
    texts = [{"name": f"t{i}", "text": text[200 * i:200 * i + 600]} for i in range(4)]
    serial = ssaviz.export_batch(texts, os.path.join(work, "batch-cpu"), model=cpu, formats=["json"])
    devices = names[1:] if len(names) > 1 else [device]
    with distributed.LocalCluster(n_workers=max(2, len(devices)), threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        got = ssaviz.export_batch(texts, os.path.join(work, "batch-dask"), model=model, client=client, formats=["json"], devices=devices)
        opens = client.run(ssaviz._batch.worker_opens)
    used = sorted({key[1] for worker in opens.values() for key in worker})
    rows = {r["name"]: r for r in serial["texts"]}
    worst_row = 0.0
    for r in got["texts"]:
        for k, v in r.items():
            if isinstance(v, float):
                worst_row = max(worst_row, abs(v - rows[r["name"]][k]))
    check(f"export_batch(devices={devices}) on {len(opens)} workers", len(got["texts"]) == len(serial["texts"]) and worst_row <= 1e-4,
          f"devices opened {used}; summary rows within {worst_row:.3g} of the CPU's")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
