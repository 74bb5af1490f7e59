"""Every array the module hands out equals `ssaviz export`'s .npy byte for byte, and its exports and
figures equal the command line's files: on a GPT-2-shaped random model, the bundled English model
with its twin, the small command-line models, and lit-gpt Pythia and Llama checkpoints."""

import filecmp
import os

import numpy as np
import pytest

import ssaviz
from conftest import DEFAULT, ENGLISH, FAMILIES, ENGLISH_TWIN, JOBS, SMALL, SMALL_TWIN, family, require, run_cli

PROSE = ("Selective attention lets each query choose how sharp its attention is: a token far into a long "
         "text can still single out the one key it needs, where softmax attention spreads thin.")


def stacked(a, side):
    return np.stack([np.stack([a.attention(l, h, side) for h in range(a.n_head)]) for l in range(a.n_layer)])


def cli_npy(tmp_path, model, text, *flags):
    out = tmp_path / "cli"
    run_cli("export", "--model", model, "--text", text, "--out", str(out), "--format", "npy", *flags)
    return out


def expect_same_bytes(ours, path):
    theirs = np.load(path)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, path
    assert ours.tobytes() == theirs.tobytes(), f"{path}: max difference {np.abs(ours - theirs).max()}"


def expect_arrays_equal_export(a, out):
    expect_same_bytes(stacked(a, "ssa"), out / "attention.npy")
    expect_same_bytes(stacked(a, "compare"), out / "attention_compare.npy")
    expect_same_bytes(a.tau_q, out / "tau_q.npy")
    expect_same_bytes(a.tau_v, out / "tau_v.npy")
    expect_same_bytes(a.loss, out / "loss.npy")
    if a.loss_compare is None:
        assert not (out / "loss_compare.npy").exists()
    else:
        expect_same_bytes(a.loss_compare, out / "loss_compare.npy")


CASES = [
    # (id, model, text, analyze() arguments, the command line's flags)
    ("gpt2-random-vanilla", DEFAULT, PROSE, {}, []),
    ("gpt2-random-local", DEFAULT, PROSE, {"compare": "local"}, ["--compare", "local"]),
    ("small-twin", SMALL, "Hello there, world", {"compare": SMALL_TWIN}, ["--compare", SMALL_TWIN]),
    ("small-unedited-ablate", SMALL, "Hello there, world", {"compare": "unedited", "ablate": "1:0,0:*=pos"},
     ["--compare", "unedited", "--ablate", "1:0,0:*=pos"]),
    ("english-twin", ENGLISH, JOBS, {"compare": ENGLISH_TWIN}, ["--compare", ENGLISH_TWIN]),
    ("english-vanilla", ENGLISH, JOBS, {}, []),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_arrays_equal_the_command_lines_npy(tmp_path, case):
    _, model, text, kwargs, flags = case
    m = ssaviz.load(require(model))
    a = m.analyze(text, **kwargs)
    expect_arrays_equal_export(a, cli_npy(tmp_path, model, text, *flags))


@pytest.mark.parametrize("case", ["pythia", "llama"])
def test_lit_gpt_families_equal_the_command_line(tmp_path, case):
    weights, meta, _ = family(case)
    require(weights)
    twin = os.path.join(FAMILIES, meta["twin"]) if meta.get("twin") else None
    m = ssaviz.load(weights)
    text = "The quick brown fox jumps over the lazy dog, and the dog sleeps on."
    expect_arrays_equal_export(m.analyze(text), cli_npy(tmp_path / "vanilla", weights, text))
    if twin:
        expect_arrays_equal_export(m.analyze(text, compare=twin), cli_npy(tmp_path / "twin", weights, text, "--compare", twin))


def test_export_and_figures_equal_the_command_lines_files(tmp_path):
    m = ssaviz.load(ENGLISH)
    a = m.analyze(JOBS, compare=ssaviz.load(ENGLISH_TWIN), ablate="1:2")
    flags = ["--layers", "1", "--heads", "2,3", "--format", "json,npy,csv,png,svg,html", "--maps", "ssa,vanilla,diff",
             "--highlight", "loss_delta", "--colormap", "magma", "--log"]
    run_cli("export", "--model", ENGLISH, "--text", JOBS, "--compare", ENGLISH_TWIN, "--ablate", "1:2", "--out",
            str(tmp_path / "cli"), *flags)
    a.export(tmp_path / "py", formats=["json", "npy", "csv", "png", "svg", "html"], layers=[1], heads=[2, 3],
             maps="ssa,vanilla,diff", highlight="loss_delta", colormap="magma", log=True)
    cmp = filecmp.dircmp(tmp_path / "cli", tmp_path / "py")
    files = []

    def walk(d, prefix=""):
        assert not d.left_only and not d.right_only, (prefix, d.left_only, d.right_only)
        files.extend(prefix + f for f in d.common_files)
        for name, sub in d.subdirs.items():
            walk(sub, prefix + name + "/")
    walk(cmp)
    assert len(files) > 30
    for f in files:
        assert (tmp_path / "cli" / f).read_bytes() == (tmp_path / "py" / f).read_bytes(), f

    # The notebook figures are those files.
    cli = tmp_path / "cli"
    assert a.heatmap(1, 2, colormap="magma", log=True).png() == (cli / "heatmaps" / "L1_H2.png").read_bytes()
    assert a.heatmap(1, 3, map="diff", colormap="magma", log=True).svg() == (cli / "heatmaps" / "L1_H3_diff.svg").read_text()
    assert a.heads_grid(map="compare", colormap="magma", log=True).png() == (cli / "heads_grid_compare.png").read_bytes()
    h = a.highlight(by="loss_delta")
    assert h.png() == (cli / "highlight.png").read_bytes()
    assert h.svg() == (cli / "highlight.svg").read_text()
    assert h.html() == (cli / "highlight.html").read_text()
    assert a.plot("dilution").png() == (cli / "plots" / "dilution.png").read_bytes()


def test_a_lens_export_after_a_lens_equals_the_command_lines(tmp_path):
    # The engine keeps the last lens of a side: a second lens of the same text ran only its last
    # position again, as products of their own, and lens_top.json's probabilities there differed
    # from the command line's in their 6th digit (an export after analyze(lens=True) or a.lens()).
    m = ssaviz.load(ENGLISH)
    a = m.analyze(JOBS, lens=True)
    a.lens("compare")
    a.export(tmp_path / "py", formats=["json", "npy"], layers=[0], heads=[0], lens=True)
    run_cli("export", "--model", ENGLISH, "--text", JOBS, "--out", str(tmp_path / "cli"), "--format", "json,npy", "--layers", "0",
            "--heads", "0", "--lens")
    lens_files = sorted(f for f in os.listdir(tmp_path / "cli") if f.startswith(("lens_", "dla")))
    assert "lens_top.json" in lens_files and "lens_top_compare.json" in lens_files and len(lens_files) > 10, lens_files
    for f in lens_files:
        assert (tmp_path / "cli" / f).read_bytes() == (tmp_path / "py" / f).read_bytes(), f


def test_arrays_are_views_of_the_analysis(tmp_path):
    m = ssaviz.load(ENGLISH)
    a = m.analyze(JOBS)
    for arr in (a.tau_q, a.loss, a.metrics["entropy"], a.attention(0, 0)):
        assert not arr.flags.owndata and not arr.flags.writeable
        assert arr.base is not None
    # One head's map is the analysis's own host copy: asked twice, the same memory.
    p1 = a.attention(2, 1).__array_interface__["data"][0]
    p2 = a.attention(2, 1).__array_interface__["data"][0]
    assert p1 == p2
    assert a.tau_q.__array_interface__["data"][0] == a.tau_q.__array_interface__["data"][0]
    assert a.tau_q.shape == (m.n_layer, m.n_head, a.n_tokens) and a.tau_q.dtype == np.float32
    assert a.loss.shape == (a.n_tokens - 1,)
