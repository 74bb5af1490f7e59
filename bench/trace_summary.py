#!/usr/bin/env python3
"""Where a traced run spent its time (issue 37): reads the Chrome trace that ssaviz_bench writes
with SSAVIZ_BENCH_TRACE=FILE and prints the device's kernels and copies ranked by total time,
the CUDA runtime calls, the CPU's ops and ssaviz's own phases (the engine's RECORD_USER_SCOPEs),
and the host's time in each phase (its top-level ops, its CUDA runtime calls, and ssaviz's own code
between them), as Markdown tables.

    usage: python3 bench/trace_summary.py TRACE.json [--top 25]
"""
import collections
import json
import sys


def table(title, rows, top):
    total = sum(d for d, _ in rows.values())
    print(f"\n{title}: {total / 1000:.1f} ms in all, {sum(n for _, n in rows.values())} calls\n")
    print("| ms | share | calls | name |\n|---:|---:|---:|---|")
    for name, (d, n) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:top]:
        share = 100 * d / total if total else 0
        print(f"| {d / 1000:.2f} | {share:.1f}% | {n} | {name[:110].replace('|', '/')} |")


def by_phase(events, top):
    """The device's time by ssaviz's phase: each kernel or copy counted in the scope whose host
    span holds the runtime call that launched it (matched by Kineto's correlation ids)."""
    scopes = sorted(((float(e["ts"]), float(e["ts"]) + float(e["dur"]), e.get("tid"), e["name"]) for e in events
                     if e.get("ph") == "X" and e.get("cat") == "user_annotation" and "dur" in e), key=lambda s: s[1] - s[0])
    phase_of = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {}):
            ts = float(e["ts"])
            name = next((n for a, b, _, n in scopes if a <= ts <= b), "(no phase)")
            phase_of[e["args"]["correlation"]] = name
    phases = collections.defaultdict(lambda: collections.defaultdict(lambda: [0.0, 0]))
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e:
            g = phases[phase_of.get(e.get("args", {}).get("correlation"), "(no phase)")][e.get("name", "?")]
            g[0] += float(e["dur"])
            g[1] += 1
    for phase, rows in sorted(phases.items(), key=lambda kv: -sum(d for d, _ in kv[1].values())):
        table(f"Device work launched in {phase}", rows, min(top, 10))


def host_by_phase(events, top):
    """The host's time in each of ssaviz's phases: the ATen ops it called there (top level: an op
    inside another op counts in that one) and the CUDA runtime calls (copies, synchronisations, host
    allocations), each by inclusive time, and what is left: ssaviz's own C++ between them."""
    by_tid = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and "dur" in e and e.get("cat") in ("user_annotation", "cpu_op", "cuda_runtime"):
            by_tid[e.get("tid")].append(e)
    phases = collections.defaultdict(lambda: {"ms": 0.0, "ops": collections.defaultdict(lambda: [0.0, 0]),
                                              "runtime": collections.defaultdict(lambda: [0.0, 0]), "in_ops": 0.0})
    for tid_events in by_tid.values():
        tid_events.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        scopes, ops = [], []  # open user scopes and open ops: (name, end)
        for e in tid_events:
            ts, end = float(e["ts"]), float(e["ts"]) + float(e["dur"])
            while scopes and scopes[-1][1] <= ts:
                scopes.pop()
            while ops and ops[-1][1] <= ts:
                ops.pop()
            phase = scopes[-1][0] if scopes else None
            if e["cat"] == "user_annotation":
                if not any(name == e["name"] for name, _ in scopes):  # its outermost instance
                    phases[e["name"]]["ms"] += float(e["dur"])
                scopes.append((e["name"], end))
            elif phase is not None:
                if e["cat"] == "cuda_runtime":
                    g = phases[phase]["runtime"][e["name"]]
                    g[0] += float(e["dur"]); g[1] += 1
                elif not ops:
                    g = phases[phase]["ops"][e["name"]]
                    g[0] += float(e["dur"]); g[1] += 1
                    phases[phase]["in_ops"] += float(e["dur"])
                if e["cat"] == "cpu_op":
                    ops.append((e["name"], end))
    for phase, p in sorted(phases.items(), key=lambda kv: -kv[1]["ms"]):
        outside = max(0.0, p["ms"] - p["in_ops"])
        print(f"\nThe host in {phase}: {p['ms'] / 1000:.1f} ms, of which ATen ops {p['in_ops'] / 1000:.1f} ms "
              f"and ssaviz's own code between them {outside / 1000:.1f} ms\n")
        print("| ms | calls | top-level op or CUDA runtime call |\n|---:|---:|---|")
        rows = [(d, n, name) for name, (d, n) in p["ops"].items()] + [(d, n, "(runtime) " + name) for name, (d, n) in p["runtime"].items()]
        for d, n, name in sorted(rows, reverse=True)[:min(top, 10)]:
            print(f"| {d / 1000:.2f} | {n} | {name[:110].replace('|', '/')} |")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 25
    with open(sys.argv[1], encoding="utf-8") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    groups = {k: collections.defaultdict(lambda: [0.0, 0]) for k in ("device", "runtime", "cpu", "scopes", "device scopes")}
    first, last = float("inf"), 0.0
    for e in events:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        cat = e.get("cat", "")
        key = {"kernel": "device", "gpu_memcpy": "device", "gpu_memset": "device", "cuda_runtime": "runtime", "cpu_op": "cpu",
               "user_annotation": "scopes", "gpu_user_annotation": "device scopes"}.get(cat)
        if key is None:
            continue
        g = groups[key][e.get("name", "?")]
        g[0] += float(e["dur"])
        g[1] += 1
        first, last = min(first, float(e["ts"])), max(last, float(e["ts"]) + float(e["dur"]))
    if last > first:
        print(f"traced span: {(last - first) / 1000:.1f} ms")
    by_phase(events, top)
    host_by_phase(events, top)
    table("ssaviz's phases (RECORD_USER_SCOPE; the host's clock)", groups["scopes"], top)
    table("ssaviz's phases on the device (first kernel to last)", groups["device scopes"], top)
    table("Device kernels and copies", groups["device"], top)
    table("CUDA runtime calls (host side)", groups["runtime"], 12)
    table("CPU ops (inclusive: an op's time counts its children's)", groups["cpu"], top)


if __name__ == "__main__":
    main()
