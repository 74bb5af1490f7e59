#!/usr/bin/env python3
"""Issue 37's Python check on a device: `import ssaviz` with device="cuda" (and "cuda:N" for each
GPU the machine has) against device="cpu" on the same text, every array of the analysis within
TOL (|difference| / max(1, |CPU's value|): effective support counts keys, up to T, so float32
holds it to about 1e-7 of its size, not of 1); the arrays' first read timed against a second (copied to the host once); and, where
dask.distributed is installed, export_batch on a LocalCluster with a device per worker against
the serial CPU batch. Prints one line per check and exits 1 if any failed.

    usage: PYTHONPATH=BUILD/python python3 bench/gpu_python.py MODEL DEVICE TEXT_FILE WORK [TOL]
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


def main():
    warnings.simplefilter("ignore")  # texts longer than the model's context are truncated, as asked
    model, device, text_file, work = sys.argv[1:5]
    tol = float(sys.argv[5]) if len(sys.argv) > 5 else 1e-5
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
