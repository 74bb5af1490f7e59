#!/usr/bin/python3
"""What `import ssaviz` costs on top of the engine (issue 28: analyze from Python <= the engine call
+ 5%), beside `ssaviz export` and the PyTorch baseline (bench/pytorch_baseline.py), same machine,
same model, same tokens.

For each token count, from Python: a full analysis (the first token changes every run, so no row
is reused) timed around `Model.analyze`, against the engine's own calls inside it (`engine_ms`:
tokenizing and `Engine::Analyze`, timed in C++); one head's map as a numpy array; an edit at the end
(the incremental path). Then `ssaviz export --format json` as a process (its own forward + metrics
line, and its wall time with start-up and loading) against Python's load + analyze + export, and the
baseline's forward + metrics in torch ops (without the predictions' logits, which ssaviz computes).
Medians of --repeats after a warm-up; one thread unless --threads.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/python_api.py [--model DIR] [--tokens 64,256,1024]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def median(values):
    return statistics.median(values)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=None, help="default: BUILD/models/default (GPT-2 shaped, random)")
    ap.add_argument("--tokens", default="64,256,1024")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--text-file", default="/usr/share/common-licenses/GPL-3")
    args = ap.parse_args()
    os.environ["SSAVIZ_THREADS"] = str(args.threads)
    sys.path.insert(0, os.path.join(args.build, "python"))
    import numpy as np
    import ssaviz

    model_dir = args.model or os.path.join(args.build, "models", "default")
    binary = os.path.join(args.build, "ssaviz")
    m = ssaviz.load(model_dir, device="cpu")
    with open(args.text_file, encoding="utf-8") as f:
        corpus = f.read()
    print(f"model {model_dir} ({m.n_layer} x {m.n_head}), {args.threads} thread(s), medians of {args.repeats}")
    print(f"{'tokens':>6} | {'analyze ms':>10} {'engine ms':>9} {'overhead':>8} | {'map ms':>6} | {'edit ms':>7} {'engine':>7} | "
          f"{'export: forward+metrics ms':>26} {'python':>7} | {'wall s: export':>14} {'python':>7} | {'PyTorch f+m ms':>14}")
    for T in [int(t) for t in args.tokens.split(",")]:
        ids, _ = m.tokenize(corpus, truncate=True)
        ids = ids[:T]
        # The text whose tokens are these ids (the GPL's first T tokens), and variants whose first
        # token differs, so that every run is a full analysis.
        a0 = m.analyze(ids)
        text = a0.text
        variants = [w + text[len(a0.pieces[0]):] for w in ("Every", "Some", "This", "That", "Each", "Any", "No", "All", "One")]
        m.analyze(variants[-1], truncate=True)  # warm-up
        wall, engine, full = [], [], []
        for k in range(args.repeats):
            start = time.perf_counter()
            a = m.analyze(variants[k % (len(variants) - 1)], truncate=True)
            wall.append((time.perf_counter() - start) * 1000)
            engine.append(a.engine_ms)
            full.append(a.forward_ms + a.metrics_ms)
            assert a.reused_rows == 0
        overhead = [w / e - 1 for w, e in zip(wall, engine)]
        maps = []
        for k in range(args.repeats):
            h = a.n_head - 1 - k % a.n_head
            start = time.perf_counter()
            arr = a.attention(k % a.n_layer, h)
            maps.append((time.perf_counter() - start) * 1000)
            assert arr.shape == (a.n_tokens, a.n_tokens)
        edits, edit_engine = [], []
        for k in range(args.repeats):
            base = variants[0][: len(variants[0]) - 1]
            m.analyze(base, truncate=True)
            start = time.perf_counter()
            e = m.analyze(base + "xyz"[k % 3], truncate=True)
            edits.append((time.perf_counter() - start) * 1000)
            edit_engine.append(e.engine_ms)

        # ssaviz export, as a process: its own "forward ..., metrics ..." line and its wall time.
        with tempfile.TemporaryDirectory() as tmp:
            text_file = os.path.join(tmp, "text.txt")
            with open(text_file, "w", encoding="utf-8") as f:
                f.write(variants[0])
            cli_fm, cli_wall = [], []
            for k in range(3):
                start = time.perf_counter()
                p = subprocess.run([binary, "export", "--model", model_dir, "--device", "cpu", "--text-file", text_file,
                                    "--out", os.path.join(tmp, f"cli{k}"), "--format", "json", "--truncate"], capture_output=True, text=True,
                                   env=dict(os.environ, SSAVIZ_THREADS=str(args.threads)))
                cli_wall.append(time.perf_counter() - start)
                got = re.search(r"forward ([\d.]+) ms, metrics ([\d.]+) ms", p.stderr)
                if p.returncode != 0 or not got:
                    raise SystemExit(f"ssaviz export failed: {p.stderr}")
                cli_fm.append(float(got.group(1)) + float(got.group(2)))
            py_wall = []
            for k in range(3):
                start = time.perf_counter()
                fresh = ssaviz.load(model_dir, device="cpu")
                fresh.analyze(variants[0], truncate=True).export(os.path.join(tmp, f"py{k}"), formats=["json"])
                py_wall.append(time.perf_counter() - start)
                fresh.close()
            ids_file = os.path.join(tmp, "ids.txt")
            with open(ids_file, "w") as f:
                f.write(" ".join(str(i) for i in m.tokenize(variants[0], truncate=True)[0]))
            baseline = subprocess.run([sys.executable, os.path.join(HERE, "pytorch_baseline.py"), "--model", model_dir, "--ids", ids_file,
                                       "--tokens", str(T), "--threads", str(args.threads), "--repeats", str(args.repeats)],
                                      capture_output=True, text=True)
            torch_ms = float("nan")
            if baseline.returncode == 0:
                b = json.loads(baseline.stdout.strip().splitlines()[-1])
                torch_ms = b["forward_ms"] + b["metrics_ms"]
            else:
                print(f"  (PyTorch baseline failed: {baseline.stderr.strip().splitlines()[-1:]})")

        print(f"{a.n_tokens:6d} | {median(wall):10.2f} {median(engine):9.2f} {100 * median(overhead):7.2f}% | {median(maps):6.2f} | "
              f"{median(edits):7.2f} {median(edit_engine):7.2f} | {median(cli_fm):26.1f} {median(full):7.1f} | "
              f"{median(cli_wall):14.2f} {median(py_wall):7.2f} | {torch_ms:14.1f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
