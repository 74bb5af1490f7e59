#!/usr/bin/env python3
"""Per-head summary table (markdown) of an `ssaviz export --format json` folder, for the model card.

usage: head_summary.py EXPORT_DIR
Columns, per layer and head, for the SSA model and its comparison (the vanilla twin when the
export used --compare): mean entropy (nats), spikiness (1 = uniform row, lower = spikier),
sink mass and whether it is a sink head (mean weight on the first token > 0.3), and the range
of tau_q over the text's tokens.
"""
import json
import sys

metrics = json.load(open(sys.argv[1] + "/metrics.json"))
print("| layer.head | entropy SSA / twin | spikiness SSA / twin | sink mass SSA / twin | tau_q min..max (mean) |")
print("|---|---|---|---|---|")
for h in metrics["heads"]:
    s, c = h["ssa"], h["comparison"]
    sink = lambda m: f"{m['sink_mass']:.2f}{' (sink)' if m['sink_head'] else ''}"
    tau = s["tau_q"]
    print(f"| {h['layer']}.{h['head']} | {s['entropy']:.2f} / {c['entropy']:.2f} | {s['spikiness']:.3f} / {c['spikiness']:.3f} "
          f"| {sink(s)} / {sink(c)} | {tau['min']:.2f}..{tau['max']:.2f} ({tau['mean']:.2f}) |")
ratio = metrics["sink_ratio"]
print(f"\nSink heads: {ratio['ssa']:.0%} of SSA's, {ratio['comparison']:.0%} of the twin's "
      f"({metrics['n_tokens']} tokens, eps {metrics['sink_epsilon']:.1f}).")
