#!/usr/bin/python3
"""Checks an `ssaviz export` folder with independent tools: numpy reads the .npy files and
recomputes metrics.json's per-head numbers from the maps; every SVG and the HTML parse as XML;
every PNG is a well-formed, decodable, non-blank image; CSV files equal the .npy slices.

usage: check_export.py DIR [--expect-cells N] [--svg-cell-limit 65536]
Prints one line per check group and exits non-zero on the first failure.
"""
import argparse
import csv
import glob
import json
import os
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

import numpy as np

SVG = "{http://www.w3.org/2000/svg}"


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def entropy(p):
    logs = np.log(np.where(p > 0, p, 1.0))
    return -(p * logs).sum(-1)


def check_numbers(d):
    m = json.load(open(os.path.join(d, "metrics.json")))
    a = np.load(os.path.join(d, "attention.npy"))
    v = np.load(os.path.join(d, "attention_compare.npy"))
    tq = np.load(os.path.join(d, "tau_q.npy"))
    tv = np.load(os.path.join(d, "tau_v.npy"))
    for array, name in ((a, "attention"), (v, "attention_vanilla"), (tq, "tau_q"), (tv, "tau_v")):
        if array.dtype != np.float32:
            fail("%s.npy has dtype %s, expected float32" % (name, array.dtype))
    a, v = a.astype(np.float64), v.astype(np.float64)
    L, H, T, _ = a.shape
    if tq.shape != (L, H, T) or tv.shape != (L, H, T) or v.shape != a.shape:
        fail("shapes: attention %s vanilla %s tau_q %s tau_v %s" % (a.shape, v.shape, tq.shape, tv.shape))
    if m["n_tokens"] != T or len(m["heads"]) != L * H:
        fail("metrics.json has n_tokens %d and %d heads, attention.npy %s" % (m["n_tokens"], len(m["heads"]), a.shape))
    for maps, name in ((a, "attention"), (v, "attention_vanilla")):
        if not np.allclose(maps.sum(-1), 1.0, atol=1e-4):
            fail(name + ": rows do not sum to 1")
        if np.abs(np.triu(maps, 1)).max() > 0:
            fail(name + ": weight above the diagonal (not causal)")
    worst = 0.0
    if T > 1:
        for head in m["heads"]:
            l, h = head["layer"], head["head"]
            for maps, side in ((a, "ssa"), (v, "comparison")):
                rows = maps[l, h, 1:, :]
                expected = {
                    "entropy": entropy(rows).mean(),
                    "max_weight": rows.max(-1).mean(),
                    "sink_mass": rows[:, 0].mean(),
                }
                for key, want in expected.items():
                    got = head[side][key]
                    worst = max(worst, abs(got - want))
                    if abs(got - want) > 1e-4:
                        fail("L%d H%d %s %s: metrics.json %.7f, numpy %.7f" % (l, h, side, key, got, want))
            for key, fn in (("mean", np.mean), ("min", np.min), ("max", np.max)):
                got, want = head["ssa"]["tau_q"][key], float(fn(tq[l, h]))
                worst = max(worst, abs(got - want))
                if abs(got - want) > 1e-5:
                    fail("L%d H%d tau_q %s: metrics.json %.7f, numpy %.7f" % (l, h, key, got, want))
    print("numbers ok: %d heads x %d tokens, worst |metrics.json - numpy| %.2e" % (L * H, T, worst))
    return a, v, T


def check_csv(d, a, v):
    files = sorted(glob.glob(os.path.join(d, "csv", "*.csv")))
    for path in files:
        name = os.path.basename(path)[:-4]
        vanilla = name.endswith("_compare")
        l, h = (int(x[1:]) for x in name.replace("_compare", "").split("_"))
        rows = open(path, encoding="utf-8").read().splitlines()
        values = np.array([[float(x) for x in row.rsplit(",", a.shape[-1])[1:]] for row in rows[1:]])
        want = (v if vanilla else a)[l, h]
        if values.shape != want.shape or np.abs(values - want).max() > 1e-6:
            fail(path + ": differs from the .npy slice")
    print("csv ok: %d files equal their .npy slices" % len(files))


def png_pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(path + ": not a PNG signature")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if zlib.crc32(kind + body) & 0xFFFFFFFF != struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]:
            fail(path + ": bad CRC in chunk " + kind.decode())
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            if depth != 8 or color not in (2, 6):
                fail(path + ": unexpected PNG format")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    channels = 4 if color == 6 else 3
    if len(raw) != height * (1 + width * channels):
        fail(path + ": pixel data size does not match %dx%d" % (width, height))
    return width, height, raw


def check_images(d, T, expect_cells, cell_limit):
    pngs = sorted(glob.glob(os.path.join(d, "**", "*.png"), recursive=True))
    for path in pngs:
        width, height, raw = png_pixels(path)
        if width < 50 or height < 50 or len(set(raw)) < 8:
            fail(path + ": blank or tiny (%dx%d)" % (width, height))
    svgs = sorted(glob.glob(os.path.join(d, "**", "*.svg"), recursive=True))
    for path in svgs:
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as e:
            fail(path + ": not valid XML: %s" % e)
        if root.tag != SVG + "svg":
            fail(path + ": root is not <svg>")
        if "/heatmaps/" in path:
            # A side-by-side figure holds three maps (SSA | comparison | difference, or
            # SSA | tau = 1 | base), each drawn as a heatmap of its own.
            maps = 3 if path.endswith(("_side_by_side.svg", "_three_way.svg")) else 1
            cells = [e for e in root.iter(SVG + "rect") if e.get("class") == "cell"]
            images = [e for e in root.iter(SVG + "image")]
            if T * T <= cell_limit and len(cells) != maps * T * T:
                fail("%s: %d cell rectangles, expected %d" % (path, len(cells), maps * T * T))
            if T * T > cell_limit and (cells or len(images) != maps):
                fail("%s: a %dx%d map must embed %d image(s), found %d cells and %d images" % (path, T, T, maps, len(cells), len(images)))
            if expect_cells is not None and T * T <= cell_limit and len(cells) != maps * expect_cells:
                fail("%s: %d cells, expected %d" % (path, len(cells), maps * expect_cells))
    html = os.path.join(d, "highlight.html")
    if os.path.exists(html):
        text = open(html, encoding="utf-8").read()
        body = text[text.index("<html"):]
        try:
            root = ET.fromstring(body)
        except ET.ParseError as e:
            fail(html + ": not well-formed: %s" % e)
        spans = [e for e in root.iter() if e.tag.endswith("span") and e.get("title") is not None]
        if len(spans) != T:
            fail("%s: %d token spans, expected %d" % (html, len(spans), T))
    print("images ok: %d PNG decoded, %d SVG parsed%s" % (len(pngs), len(svgs), ", highlight.html parsed" if os.path.exists(html) else ""))


def check_head_impacts(d, drift_all_is_base):
    """--rank-heads' parts token by token: head_impacts_tokens.npy [3, L, H, T - 1] averages to
    head_impacts.json's part, part_tau_q and part_tau_v (NaN where those are null), and
    head_impacts_drift_tokens.npy's rows to head_impacts_drift.csv's part_drift, row by row; with
    drift_all_is_base (every head at tau = 1 beside a vanilla base) the last row, every weight from
    the base, is loss.npy - loss_base.npy token by token."""
    ranked = json.load(open(os.path.join(d, "head_impacts.json")))
    loss = np.load(os.path.join(d, "loss.npy"))
    parts = np.load(os.path.join(d, "head_impacts_tokens.npy"))
    if parts.dtype != np.float32 or parts.shape[0] != 3 or parts.shape[3] != loss.shape[0] or ranked["by_token"]["tokens"] != loss.shape[0]:
        fail("head_impacts_tokens.npy is %s %s beside %d tokens' losses" % (parts.dtype, parts.shape, loss.shape[0]))
    for k, key in enumerate(["part", "part_tau_q", "part_tau_v"]):
        whole = np.array([[np.nan if x is None else x for x in row] for row in ranked[key]], dtype=np.float64)
        if not np.array_equal(np.isnan(whole), np.isnan(parts[k]).all(-1)) or np.isnan(parts[k]).any(-1).sum() != np.isnan(whole).sum():
            fail("head_impacts_tokens.npy[%d] is NaN where %s is not null, or the other way" % (k, key))
        diff = np.nanmax(np.abs(parts[k].astype(np.float64).mean(-1) - whole), initial=0.0)
        if diff > 1e-5:
            fail("head_impacts_tokens.npy[%d]'s mean over tokens is %s's to %g" % (k, key, diff))
    print("ok: head_impacts_tokens.npy %s, its means the parts" % (parts.shape,))
    if ranked["drift"] is None:
        return
    rows = list(csv.DictReader(open(os.path.join(d, "head_impacts_drift.csv"))))
    drift = np.load(os.path.join(d, "head_impacts_drift_tokens.npy"))
    if drift.shape != (len(rows), loss.shape[0]) or np.any(drift[0] != 0):
        fail("head_impacts_drift_tokens.npy is %s for %d rows (its first, none, all 0)" % (drift.shape, len(rows)))
    for k, row in enumerate(rows):
        if abs(drift[k].astype(np.float64).mean() - float(row["part_drift"])) > 1e-5:
            fail("head_impacts_drift_tokens.npy's row %d (%s %s %s) averages %g, the CSV says %s" %
                 (k, row["part"], row["layer"], row["head"], drift[k].mean(), row["part_drift"]))
    # The path's parts, one after another from the embeddings up and then from the top down, each
    # way adding up to every weight's, token by token; the JSON's path holds both, part by part.
    kinds = [row["part"] for row in rows]
    whole = kinds.index("all")
    L = len(ranked["drift"]["mlp"])
    up = [k for k, kind in enumerate(kinds) if kind.startswith("path_") and not kind.startswith("path_down_")]
    down = [k for k, kind in enumerate(kinds) if kind.startswith("path_down_")]
    for name, path, first, last in (("up", up, "path_embeddings", "path_mlp"), ("top down", down, "path_down_mlp", "path_down_embeddings")):
        if len(path) != 1 + 2 * L or kinds[path[0]] != first or kinds[path[-1]] != last:
            fail("head_impacts_drift.csv's path %s is %s" % (name, [kinds[k] for k in path]))
        diff = np.abs(drift[path].astype(np.float64).sum(0) - drift[whole]).max()
        if diff > 1e-4 or abs(float(rows[path[-1]]["mean_loss"]) - float(rows[whole]["mean_loss"])) > 1e-5:
            fail("the path %s adds up to all's token by token to %g, its last loss %s against all's %s" %
                 (name, diff, rows[path[-1]]["mean_loss"], rows[whole]["mean_loss"]))
    steps = ranked["drift"]["path"]
    for k, step in enumerate(steps):
        row = rows[down[len(steps) - 1 - k]]  # the top-down rows in the order they are taken
        if (row["layer"] or None) != (None if k == 0 else str((k - 1) // 2)) or abs(step["part_drift_top_down"] - float(row["part_drift"])) > 1e-6:
            fail("head_impacts.json's path %s top down is %s, the CSV's row %s" % (step["part"], step["part_drift_top_down"], row))
    if drift_all_is_base:
        base = np.load(os.path.join(d, "loss_base.npy"))
        diff = np.abs(drift[whole] - (loss - base)).max()
        if diff > 1e-4:
            fail("every weight from the base, token by token, is loss - loss_base to %g" % diff)
    print("ok: head_impacts_drift_tokens.npy %s, its rows the CSV's" % (drift.shape,))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--expect-cells", type=int)
    p.add_argument("--svg-cell-limit", type=int, default=65536)
    p.add_argument("--head-impacts", action="store_true", help="check --rank-heads' files alone")
    p.add_argument("--drift-all-is-base", action="store_true", help="with --head-impacts: every head at tau = 1 beside a vanilla base")
    args = p.parse_args()
    if args.head_impacts:
        return check_head_impacts(args.dir, args.drift_all_is_base)
    a, v, T = check_numbers(args.dir)
    check_csv(args.dir, a, v)
    check_images(args.dir, T, args.expect_cells, args.svg_cell_limit)


if __name__ == "__main__":
    main()
