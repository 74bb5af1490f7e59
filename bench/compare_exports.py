#!/usr/bin/env python3
"""Two exports of the same text compared file by file (bench/gpu.sh's exactness stages): each .npy's
largest |difference| where both are finite, and metrics.json's numeric leaf that differs most
relative to max(1, |its value|) (effective support counts keys, so float32 holds it to about 1e-7
of its size), with its absolute difference.

    usage: python3 bench/compare_exports.py WORK DEVICE [softmax]
           WORK holds out-NAME-DEVICE-TAG folders (gpu.sh's exact()); with `softmax` the exports
           made with torch's softmax instead of the CUDA kernel (SSAVIZ_CUDA_SOFTMAX=0, tag softmax)
           against the CPU's; exports with 1 MB blocks of rows (tags blocks, blocks-base, and
           block-products: each block running the whole layer, SSAVIZ_LAYER_PRODUCTS=blocks, where
           the device's default runs a layer's weights over every row at once), where made, against
           the CPU's too; --rank-heads beside a base and a run's timeline with its steps' exports
           (tags rank-base and run) against the CPU's; the fused temperatures' exports (SSAVIZ_CUDA_TEMPERATURES=1, tags
           temperatures and temperatures-what-ifs) against the CPU's; and those of the softmax and
           row measures' kernel and the predictions' (SSAVIZ_CUDA_SOFTMAX_MEASURES=1
           SSAVIZ_CUDA_PREDICTIONS=1, tags kernels, kernels-twin, -base and -blocks) against the CPU's;
           and those with the TF32 products (SSAVIZ_PRODUCTS=tf32x3, tags tf32x3, tf32x3-twin, -base
           and -blocks) against the CPU's float32; and those with the attention rows fused
           (SSAVIZ_FUSED_ATTENTION=1, tags fused, fused-twin, -base and -blocks) against the CPU's.
           Then a summary a switch: its largest differences against the CPU's over all its exports
           (the maps absolute; the other arrays, losses, the lens and attribution of a few nats,
           and metrics.json relative to max(1, |value|)) and whether it meets issue 37's 1e-5.
"""
import glob, json, os, sys
import numpy as np
work, dev = sys.argv[1], sys.argv[2]
softmax = len(sys.argv) > 3 and sys.argv[3] == "softmax"
def tried(name, tag):
    """Whether gpu.sh's exact() ran this export (it leaves tried-NAME-DEVICE-TAG): one it ran and
    that wrote nothing (a kernel's error, a NaN refused, its timeout) counts as missing, not as
    absent from the summary."""
    return os.path.exists(f"{work}/tried-{name}-{dev}-{tag}") or os.path.isdir(f"{work}/out-{name}-{dev}-{tag}")
summary = {}  # switch -> {"maps", "rest", "metrics": largest, "missing": count, "exports": count}
def compare(a, b, label, switch=None):
    worst = []
    group = summary.setdefault(switch, {"maps": 0.0, "rest": 0.0, "metrics": 0.0, "missing": 0, "exports": 0}) if switch else None
    if group: group["exports"] += 1
    for f in sorted(glob.glob(os.path.join(a, "*.npy"))):
        name = os.path.basename(f)
        g = os.path.join(b, name)
        if not os.path.exists(g):
            worst.append(f"{name}: missing")
            if group: group["missing"] += 1
            continue
        x, y = np.load(f).astype(np.float64), np.load(g).astype(np.float64)
        if x.shape != y.shape:
            worst.append(f"{name}: shape {x.shape} vs {y.shape}")
            if group: group["missing"] += 1
            continue
        both = np.isfinite(x) & np.isfinite(y)
        if group and not np.array_equal(np.isfinite(x), np.isfinite(y)):
            group["missing"] += 1  # a value finite on one side only is as wrong as a missing file
        d = np.abs(x - y)[both].max() if both.any() else 0.0
        worst.append(f"{name} {d:.2e}")
        if group and both.any():
            if name.startswith("attention"):
                group["maps"] = max(group["maps"], d)
            else:  # relative to max(1, |value|), as metrics.json's
                group["rest"] = max(group["rest"], (np.abs(x - y) / np.maximum(1.0, np.abs(x)))[both].max())
    def numbers(v, path=""):  # metrics.json's numeric leaves by path
        if isinstance(v, dict):
            for k, x in v.items(): yield from numbers(x, path + "/" + k)
        elif isinstance(v, list):
            for i, x in enumerate(v): yield from numbers(x, path + f"[{i}]")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            yield path, float(v)
    # metrics.json (a run's run.json), and beside it what --rank-heads and --lens write as JSON
    jsons = [f for f in ("metrics.json", "run.json", "head_impacts.json", "dla_at.json") if os.path.exists(os.path.join(a, f))]
    for f in jsons or ["metrics.json"]:
        try:
            ja = dict(numbers(json.load(open(os.path.join(a, f)))))
            mb = json.load(open(os.path.join(b, f)))
            jb = dict(numbers(mb))
            settings = mb.get("model", {}).get("settings", []) if isinstance(mb, dict) else []  # what `info` names: the switches in effect there
            if settings:
                worst.append("settings: " + "; ".join(str(x).split(":")[0] for x in settings))
            skip = ("ms", "threads", "seconds")
            keys = [k for k in ja if k in jb and not any(k.endswith(s) for s in skip) and np.isfinite(ja[k]) and np.isfinite(jb[k])]
            alone = [k for k in ja if k not in jb and not any(k.endswith(s) for s in skip)]
            if alone:  # a number on one side only
                worst.append(f"{f}: {len(alone)} numbers missing ({alone[0]} ...)")
                if group: group["missing"] += 1
            if keys:
                scaled = lambda k: abs(ja[k] - jb[k]) / max(1.0, abs(ja[k]))
                k = max(keys, key=scaled)
                worst.append(f"{f} {scaled(k):.2e} relative ({k}: {abs(ja[k] - jb[k]):.2e})")
                if group: group["metrics"] = max(group["metrics"], scaled(k))
        except (OSError, ValueError) as e:
            worst.append(f"{f}: {e}")
            if group: group["missing"] += 1
    print(f"{label:38s} " + ", ".join(worst))
    # A run's chosen steps' whole exports (--steps), each as an export of its own
    for step in sorted(glob.glob(os.path.join(a, "step-*")) + glob.glob(os.path.join(a, "compare-run", "step-*"))):
        name = os.path.relpath(step, a)
        compare(step, os.path.join(b, name), f"{label} {name}", switch)
# A head's part of the loss is a difference of two losses, each within 1e-5 of the CPU's (2026-11-29:
# 1.05e-5 at most): the ranking's group is held to 3e-5, every statistic else to issue 37's 1e-5.
tolerance = {"heads, runs": 3e-5}
def report():
    """Each switch's largest differences from the CPU over all its exports, and whether they meet
    issue 37's 1e-5 (a switch that does can be on by default)."""
    print("\nsummary, each switch's largest difference from the CPU over all its exports (issue 37: 1e-5;"
          " maps absolute, the rest relative to max(1, |value|)):")
    print(f"  {'switch':14s} {'exports':>7s} {'maps':>9s} {'the rest':>9s} {'metrics':>9s}  verdict")
    for switch, g in summary.items():
        if g["missing"]:
            verdict = f"NOT EXACT: {g['missing']} arrays or files missing, misshapen or finite on one side only"
        elif max(g["maps"], g["rest"], g["metrics"]) > tolerance.get(switch, 1e-5):
            verdict = f"NOT EXACT (over {tolerance.get(switch, 1e-5):g})"
        else:
            verdict = "exact" + (": can be on by default" if switch in ("temperatures", "kernels", "tf32x3", "fused") else "")
        print(f"  {switch:14s} {g['exports']:7d} {g['maps']:9.2e} {g['rest']:9.2e} {g['metrics']:9.2e}  {verdict}")
if softmax:
    for name in ["english", "gpt2", "pythia", "llama", "mistral", "llama3"]:
        compare(f"{work}/out-{name}-cpu-f32", f"{work}/out-{name}-{dev}-softmax", f"{name} {dev} torch softmax vs cpu", "torch softmax")
    compare(f"{work}/out-gpt2-cpu-twin", f"{work}/out-gpt2-{dev}-softmax-twin", f"gpt2 + twin {dev} torch softmax vs cpu", "torch softmax")
    report()
    sys.exit(0)
for name in ["english", "gpt2", "pythia", "llama", "mistral", "llama3"]:
    compare(f"{work}/out-{name}-cpu-f32", f"{work}/out-{name}-{dev}-f32", f"{name} {dev} vs cpu (f32)", "plain")
compare(f"{work}/out-gpt2-cpu-twin", f"{work}/out-gpt2-{dev}-twin", f"gpt2 + twin {dev} vs cpu", "plain")
compare(f"{work}/out-gpt2-cpu-base", f"{work}/out-gpt2-{dev}-base", f"gpt2 + base {dev} vs cpu", "plain")
compare(f"{work}/out-gpt2-{dev}-f32", f"{work}/out-gpt2-{dev}-bf16", f"gpt2 {dev} bf16 vs f32")
compare(f"{work}/out-llama-{dev}-f32", f"{work}/out-llama-{dev}-bf16", f"llama {dev} bf16 vs f32")
if dev == "cuda":
    compare(f"{work}/out-gpt2-cuda-f32", f"{work}/out-gpt2-cuda-f16", "gpt2 cuda f16 vs f32")
for name, tag in [("gpt2", "rank-base"), ("llama", "rank-base"), ("llama", "rank"), ("run", "run"), ("run", "run-compare"),
                  ("llama", "local"), ("mistral-window", "window")]:
    if tried(name, tag):  # --rank-heads beside a base and alone, --dla-target, runs' timelines and their steps' exports
        compare(f"{work}/out-{name}-cpu-{tag}", f"{work}/out-{name}-{dev}-{tag}", f"{name} {dev} {tag} vs cpu", "heads, runs")
for on in ("kernels", "fused"):
    if tried("mistral-window", f"window-{on}"):  # a sliding window with the row measures' kernel, and the rows fused
        compare(f"{work}/out-mistral-window-cpu-window", f"{work}/out-mistral-window-{dev}-window-{on}", f"mistral-window {dev} {on} vs cpu", on)
for name, tag, cpu in [("gpt2", "blocks", "f32"), ("llama", "blocks", "f32"), ("gpt2", "blocks-base", "base"),
                       ("llama", "block-products", "f32"), ("gpt2", "block-products-base", "base")]:
    if tried(name, tag):  # SSAVIZ_DEVICE_BLOCK_MB=1: many blocks of rows a layer
        compare(f"{work}/out-{name}-cpu-{cpu}", f"{work}/out-{name}-{dev}-{tag}", f"{name} {dev} 1 MB {tag} vs cpu ({cpu})", "1 MB blocks")
tagged = [(name, "temperatures", "f32") for name in ["english", "gpt2", "pythia", "llama", "mistral", "llama3"]]
for name, tag, cpu in tagged + [("gpt2", "temperatures-what-ifs", "what-ifs")]:
    if tried(name, tag):  # SSAVIZ_CUDA_TEMPERATURES=1: the fused temperatures
        compare(f"{work}/out-{name}-cpu-{cpu}", f"{work}/out-{name}-{dev}-{tag}", f"{name} {dev} fused {tag} vs cpu ({cpu})", "temperatures")
tagged = [(name, "kernels", "f32") for name in ["english", "gpt2", "pythia", "llama", "mistral", "llama3"]]
for name, tag, cpu in tagged + [("gpt2", "kernels-twin", "twin"), ("gpt2", "kernels-base", "base"), ("llama", "kernels-blocks", "f32")]:
    if tried(name, tag):  # SSAVIZ_CUDA_SOFTMAX_MEASURES=1 SSAVIZ_CUDA_PREDICTIONS=1
        compare(f"{work}/out-{name}-cpu-{cpu}", f"{work}/out-{name}-{dev}-{tag}", f"{name} {dev} {tag} vs cpu ({cpu})", "kernels")
tagged = [(name, "tf32x3", "f32") for name in ["english", "gpt2", "pythia", "llama", "mistral", "llama3"]]
for name, tag, cpu in tagged + [("gpt2", "tf32x3-twin", "twin"), ("gpt2", "tf32x3-base", "base"), ("llama", "tf32x3-blocks", "f32")]:
    if tried(name, tag):  # SSAVIZ_PRODUCTS=tf32x3: the TF32 products
        compare(f"{work}/out-{name}-cpu-{cpu}", f"{work}/out-{name}-{dev}-{tag}", f"{name} {dev} {tag} vs cpu ({cpu})", "tf32x3")
tagged = [(name, "fused", "f32") for name in ["english", "gpt2", "pythia", "llama", "mistral", "llama3"]]
for name, tag, cpu in tagged + [("gpt2", "fused-twin", "twin"), ("gpt2", "fused-base", "base"), ("llama", "fused-blocks", "f32")]:
    if tried(name, tag):  # SSAVIZ_FUSED_ATTENTION=1: the rows never written
        compare(f"{work}/out-{name}-cpu-{cpu}", f"{work}/out-{name}-{dev}-{tag}", f"{name} {dev} {tag} vs cpu ({cpu})", "fused")
report()
