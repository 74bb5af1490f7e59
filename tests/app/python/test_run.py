"""ssaviz.load_run: a training run's checkpoints on one text, stacked by step, each step equal to its
checkpoint analysed alone and to `ssaviz export --run`'s run.json; a broken checkpoint named and
skipped; on a Dask LocalCluster the same arrays as the serial run."""

import json
import os
import shutil
import struct
import warnings

import numpy as np
import pytest

import ssaviz
from conftest import run_cli

TEXT = "The cat sat on the mat and looked at the dog."


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """Three Pythia-shaped lit-gpt checkpoints (steps 100, 200, 300) and a truncated one (250)."""
    root = tmp_path_factory.mktemp("run")
    run = root / "run"
    run.mkdir()
    for seed in (1, 2, 3):
        run_cli("init-random", "--out", str(root / f"m{seed}"), "--family", "pythia", "--layout", "lit", "--layers", "2", "--heads", "2",
                "--embd", "32", "--query-form", "exp_exp,none", "--seed", str(seed))
    for f in ("lit_config.json", "vocab.json", "merges.txt"):
        shutil.copy(root / "m1" / f, run / f)
    for seed, step in ((1, 100), (2, 200), (3, 300)):
        shutil.copy(root / f"m{seed}" / "lit_model.pth", run / f"iter-{step:06d}-ckpt.pth")
    (run / "iter-000250-ckpt.pth").write_bytes((root / "m2" / "lit_model.pth").read_bytes()[:5000])
    return run


@pytest.fixture(scope="module")
def twin_dir(run_dir, tmp_path_factory):
    """A copy of the run, as its compare run (the run itself is refused as one)."""
    twin = tmp_path_factory.mktemp("twin") / "run"
    shutil.copytree(run_dir, twin)
    return twin


def serial(run_dir):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        analysis = ssaviz.load_run(run_dir).analyze(TEXT)
    return analysis, caught


def test_many_failing_steps_warn_twenty_times_and_count_the_rest(run_dir, tmp_path):
    """A run of thousands of broken steps warned once a step (9,999 warning blocks in a notebook):
    20, then one with the count; `failed` keeps every one, as the command line's 20 lines. Steps
    failing for a reason warned already (a run's folder without lit_config.json fails every step
    alike) are counted, not warned again: here five empty ones."""
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    for step in range(10, 15):
        (run / f"iter-{step:06d}-ckpt.pth").write_bytes(b"")
    for step in range(400, 400 + 30):  # each for a reason of its own: a header length past its end, another each
        (run / f"iter-{step:06d}-ckpt.pth").write_bytes(struct.pack("<Q", step))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        analysis = ssaviz.load_run(run).analyze(TEXT)
    assert len(analysis.failed) == 36 and list(analysis.steps) == [100, 200, 300]
    said = [str(w.message) for w in caught if "skipped" in str(w.message)]
    assert len(said) == 22, said[-3:]
    assert said[0].startswith("ssaviz: step 10 (iter-000010-ckpt.pth): ") and not any("step 11 " in s for s in said), said[:3]
    assert said[-2] == "ssaviz: 4 more steps skipped for a reason said above (RunAnalysis.failed lists every one)"
    assert said[-1] == "ssaviz: 12 more steps skipped (RunAnalysis.failed lists every one)"


def test_each_step_equals_its_checkpoint_alone(run_dir):
    run = ssaviz.load_run(run_dir)
    assert run.steps == [100, 200, 250, 300] and len(run) == 4
    analysis, caught = serial(run_dir)
    assert list(analysis.steps) == [100, 200, 300]
    assert [f["step"] for f in analysis.failed] == [250]
    assert "iter-000250-ckpt.pth" in analysis.failed[0]["error"]
    assert any("step 250" in str(w.message) for w in caught)
    for k, step in enumerate(analysis.steps):
        with run.model(int(step)) as model:
            alone = model.analyze(TEXT)
            for name in ("entropy", "js", "sink_mass", "entropy_compare"):
                assert np.array_equal(analysis.arrays(name)[k], alone.metrics[name]), (step, name)
            assert np.array_equal(analysis.arrays("tau_q")[k], alone.tau_q)
            assert np.array_equal(analysis.arrays("loss")[k], alone.loss)
    assert analysis.head("entropy").shape == (3, 2, 2)
    assert analysis.loss_mean.shape == (3,)
    with pytest.raises(ValueError, match="step 7 is not one of the run's 4 steps"):
        run.model(7)
    with pytest.raises(ssaviz.ArgumentTypeError, match="step must be an integer, not str"):
        run.model("100")  # it said "step 100 is not one of the run's steps"
    with pytest.raises(ValueError, match="'nope' is not one of the run's arrays"):
        analysis.arrays("nope")
    # A step is no array's name (a bare KeyError: 250 is not one of the run's arrays): it says so, and where the step is.
    with pytest.raises(ssaviz.ArgumentTypeError, match=r"^RunAnalysis\.arrays\(\): takes an array's name .*not a step; .*step 250 is "
                                                       r"not one of the 3 steps analysed \(100, 200, 300\)$"):
        analysis.arrays(250)
    with pytest.raises(ssaviz.ArgumentTypeError, match=r"step 300's is arrays\(name\)\[2\]$"):
        analysis.head(np.int64(300))
    # The warning names the checkpoint as Run.export's and the command line's do; the engine's error its path.
    assert any(str(w.message).startswith("ssaviz: step 250 (iter-000250-ckpt.pth): ") for w in caught), [str(w.message) for w in caught]
    # run.json's names are the arrays' too.
    assert np.array_equal(analysis.arrays("js_divergence"), analysis.arrays("js"))
    assert np.array_equal(analysis.head("l1_distance"), analysis.head("l1"))
    assert np.array_equal(analysis.head("tau_q_mean"), analysis.head("tau_q"))  # run.json's head value
    with pytest.raises(ValueError, match="'js_temperature' is not one of the run's arrays"):  # the temperatures' part: with a base only
        analysis.head("js_temperature")


def test_the_same_numbers_as_export_run(run_dir, tmp_path):
    analysis, _ = serial(run_dir)
    code, _, err = run_cli("export", "--run", str(run_dir), "--text", TEXT, "--out", str(tmp_path / "out"), check=False)
    assert code == 3, err  # the truncated step
    timeline = json.loads((tmp_path / "out" / "run.json").read_text())
    assert [s["step"] for s in timeline["steps"]] == list(analysis.steps)
    for k, step in enumerate(timeline["steps"]):
        # metrics.json's head means (C++, float) against numpy's mean of the same rows.
        np.testing.assert_allclose(np.array(step["heads"]["entropy"], dtype=np.float64), analysis.head("entropy")[k], rtol=0, atol=1e-6)
        np.testing.assert_allclose(np.array(step["heads"]["sink_mass"], dtype=np.float64), analysis.head("sink_mass")[k], rtol=0, atol=1e-6)
        # tau_q's head value is every row's mean, as metrics.json's notes say (it left out row 1: 0.04 off).
        np.testing.assert_allclose(np.array(step["heads"]["tau_q_mean"], dtype=np.float64), analysis.head("tau_q")[k], rtol=0, atol=1e-5)
        np.testing.assert_allclose(np.array(step["heads"]["js_divergence"], dtype=np.float64), analysis.head("js_divergence")[k],
                                   rtol=0, atol=1e-6)
    sparse = analysis.steps_to_sparsity()
    want = np.array([[-1 if v is None else v for v in row] for row in timeline["steps_to_sparsity"]])
    assert np.array_equal(sparse, want)


def tree(root):
    """Every file under root: {relative path: bytes}."""
    return {os.path.relpath(os.path.join(d, f), root): open(os.path.join(d, f), "rb").read() for d, _, files in os.walk(root) for f in files}


EXPORT = dict(steps=[100, 300], formats="npy,json,png,svg")


def cli_export(run_dir, twin_dir, out):
    """`ssaviz export --run` of the fixture's run, against its copy as the compare run, steps 100 and 300 in full."""
    code, _, err = run_cli("export", "--run", str(run_dir), "--compare-run", str(twin_dir), "--text", TEXT, "--out", str(out),
                           "--steps", "100,300", "--format", "npy,json,png,svg", check=False)
    assert code == 3, err  # the truncated step
    return tree(out)


def test_export_writes_what_the_command_line_writes(run_dir, twin_dir, tmp_path):
    want = cli_export(run_dir, twin_dir, tmp_path / "cli")
    assert {"run.json", "run.csv", "tau_q.npy", "compare-run/tau_q.npy", "curves/entropy.png", "curves/loss.svg",
            "step-000100/metrics.json", "compare-run/step-000300/attention.npy"} <= set(want)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        timeline = ssaviz.load_run(run_dir).export(TEXT, tmp_path / "py", compare_run=twin_dir, **EXPORT)
    got = tree(tmp_path / "py")
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name
    assert [s["step"] for s in timeline["steps"]] == [100, 200, 300]
    assert [f["step"] for f in timeline["failed"]] == [250]
    assert sum("step 250 (iter-000250-ckpt.pth)" in str(w.message) for w in caught) == 2  # the run's and the compare run's
    with pytest.raises(ValueError, match="step 7 is not one of the run's 4 steps"):
        ssaviz.load_run(run_dir).export(TEXT, tmp_path / "bad", steps=[7])
    # The run itself as its compare run (its folder, or the Run), refused as the command line's.
    for same in (run_dir, ssaviz.load_run(run_dir)):
        with pytest.raises(ValueError, match=r"^Run\.export\(\): compare_run '.*' is the run itself: a compare run is a second run"):
            ssaviz.load_run(run_dir).export(TEXT, tmp_path / "same", compare_run=same)
    assert not os.path.exists(tmp_path / "same")


def test_a_step_of_another_model_has_no_export(tmp_path):
    """steps="all" on a run with a step of another width: that step is skipped and has no folder (its
    export was written as it was analysed and stayed, beside run.json's saying it was skipped); the
    files are the command line's, byte for byte."""
    run = tmp_path / "run"
    for step, width in ((0, "16"), (5, "16"), (10, "32")):
        run_cli("init-random", "--out", str(run / f"checkpoint-{step}"), "--layers", "1", "--heads", "2", "--embd", width, "--seed", str(step + 1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        timeline = ssaviz.load_run(run).export(TEXT, tmp_path / "py", steps="all", formats="json")
    assert [s["step"] for s in timeline["steps"]] == [0, 5]
    assert sum("step 10 (checkpoint-10): has a width of 32; the run's first analysed step, 0 (checkpoint-0), has 16: another model" in str(w.message) for w in caught) == 1
    got = tree(tmp_path / "py")
    assert "step-000005/metrics.json" in got and not any(name.startswith("step-000010") for name in got)
    code, _, err = run_cli("export", "--run", str(run), "--text", TEXT, "--out", str(tmp_path / "cli"), "--steps", "all", "--format", "json",
                           check=False)
    assert code == 3, err
    want = tree(tmp_path / "cli")
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name


def test_the_lens_over_the_steps_is_the_command_lines(run_dir, tmp_path):
    """lens=True: each step's loss read after each layer in run.json and run_lens.csv, and step 300's
    lens files, byte for byte what `ssaviz export --run --lens` writes; after the last layer the
    step's own loss."""
    code, _, err = run_cli("export", "--run", str(run_dir), "--lens", "--text", TEXT, "--out", str(tmp_path / "cli"), "--steps", "300",
                           "--format", "npy,json,svg", check=False)
    assert code == 3, err  # the truncated step
    want = tree(tmp_path / "cli")
    assert {"run_lens.csv", "curves/lens_loss.svg", "step-000300/lens_loss.npy", "step-000300/lens_top.json"} <= set(want)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        timeline = ssaviz.load_run(run_dir).export(TEXT, tmp_path / "py", steps=[300], formats="npy,json,svg", lens=True)
    got = tree(tmp_path / "py")
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name
    for step in timeline["steps"]:
        assert len(step["lens_loss"]) == 3 and len(step["lens_loss_compare"]) == 3  # the embeddings and 2 layers; SSA and tau = 1
        assert abs(step["lens_loss"][-1] - step["loss"]) < 1e-5 and abs(step["lens_loss_compare"][-1] - step["loss_compare"]) < 1e-5
    # Step 300's numbers are its own lens's, as Analysis.lens gives it.
    lens = ssaviz.load_run(run_dir).model(300).analyze(TEXT).lens()
    np.testing.assert_allclose(timeline["steps"][-1]["lens_loss"], lens["loss"].mean(axis=1), rtol=0, atol=1e-5)
    # Run.analyze(lens=True): every step's lens arrays stacked, the same numbers.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ra = ssaviz.load_run(run_dir).analyze(TEXT, lens=True)
        plain = ssaviz.load_run(run_dir).analyze(TEXT)
    np.testing.assert_allclose(ra.lens_loss_mean, [s["lens_loss"] for s in timeline["steps"]], rtol=0, atol=1e-5)
    # tau = 1's too, as run.json's lens_loss_compare: the temperatures' part, layer by layer.
    np.testing.assert_allclose(ra.arrays("lens_loss_compare").mean(axis=-1), [s["lens_loss_compare"] for s in timeline["steps"]], rtol=0, atol=1e-5)
    np.testing.assert_array_equal(ra.arrays("dla_compare")[-1], ssaviz.load_run(run_dir).model(300).analyze(TEXT).lens("compare")["dla"])
    assert "lens_loss_base" not in ra.keys()  # no base
    T = len(ra.arrays("ids")[0])
    assert ra.arrays("dla").shape == (3, 2, 2, T - 1) and ra.arrays("lens_loss").shape == (3, 3, T - 1)
    for name, key in (("lens_loss", "loss"), ("dla", "dla"), ("dla_mlp", "dla_mlp"), ("dla_logit", "logit")):
        np.testing.assert_array_equal(ra.arrays(name)[-1], lens[key], err_msg=name)
    # The parts sum to the logit at every step (1e-4 logits).
    parts = ra.arrays("dla").sum(axis=(1, 2)) + ra.arrays("dla_mlp").sum(axis=1) + ra.arrays("dla_embed") + ra.arrays("dla_const")
    np.testing.assert_allclose(parts, ra.arrays("dla_logit"), rtol=0, atol=1e-4)
    with pytest.raises(ValueError, match=r"analysed without the lens: Run.analyze\(text, lens=True\)"):
        plain.lens_loss_mean
    # head() is a row metric's per head: the lens's arrays are by position (dla was taken for one,
    # lens_loss called [S, L, H]), and each message says what the array is.
    for name in ("dla", "lens_loss", "dla_compare"):
        with pytest.raises(ValueError, match=rf"RunAnalysis.head\(\): '{name}' is the lens's, \[3, .*\] by position, not a row metric"):
            ra.head(name)
    with pytest.raises(ValueError, match=r"RunAnalysis.head\(\): 'qk_opnorm' is \[S, L, H\], not a row metric; arrays\('qk_opnorm'\) is already"):
        ra.head("qk_opnorm")
    with pytest.raises(ValueError, match=rf"RunAnalysis.head\(\): 'loss' is \[3, {T - 1}\], not a row metric \[S, L, H, T\]"):
        ra.head("loss")
    assert "dla" not in plain.keys()
    # A switch as the export keywords read it: 1 / 0 and "true" / "false" too (lens=1 was refused here, taken by export).
    with pytest.raises(ValueError, match=r"Run.analyze\(\): lens is a switch: True or False \(or 1 / 0, \"true\" / \"false\"\), not 2$"):
        ssaviz.load_run(run_dir).analyze(TEXT, lens=2)
    with pytest.raises(ssaviz.ArgumentTypeError, match=r"Run.analyze\(\): lens is a switch: .*, not list$"):
        ssaviz.load_run(run_dir).analyze(TEXT, lens=[])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the truncated step
        off = ssaviz.load_run(run_dir).analyze(TEXT, lens="false")
    assert "dla" not in off.keys()
    np.testing.assert_array_equal(off.arrays("entropy"), plain.arrays("entropy"))


def test_a_run_against_a_base(run_dir, tmp_path):
    """base=: every step against a fine-tune's base, as `ssaviz export --run --base` (byte for byte);
    Run.analyze's head("js_total") and head("js_drift") are run.json's per-head decomposition."""
    base = tmp_path / "base"
    run_cli("init-random", "--out", str(base), "--family", "pythia", "--layout", "lit", "--layers", "2", "--heads", "2", "--embd", "32",
            "--query-form", "none", "--seed", "9")
    code, _, err = run_cli("export", "--run", str(run_dir), "--base", str(base), "--text", TEXT, "--out", str(tmp_path / "cli"),
                           "--steps", "300", "--format", "json,png", check=False)
    assert code == 3, err  # the truncated step
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        timeline = ssaviz.load_run(run_dir).export(TEXT, tmp_path / "py", steps=[300], formats="json,png", base=base)
        analysis = ssaviz.load_run(run_dir).analyze(TEXT, base=str(base))
    want, got = tree(tmp_path / "cli"), tree(tmp_path / "py")
    assert {"curves/js_total.png", "curves/js_drift.png", "step-000300/metrics.json"} <= set(want)
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name
    assert "js_total" in timeline["steps"][0]["heads"] and "entropy_base" in timeline["steps"][0]
    for k, step in enumerate(timeline["steps"]):
        for part in ("js_total", "js_drift"):
            np.testing.assert_allclose(np.array(step["heads"][part], dtype=np.float64), analysis.head(part)[k], rtol=0, atol=1e-6)
    # The decomposition's name for the temperatures' part reads the same array as run.json's.
    assert np.array_equal(analysis.head("js_temperature"), analysis.head("js_divergence"))
    assert analysis.arrays("loss_base").shape == (3, analysis.arrays("loss").shape[1])
    with pytest.raises(ValueError, match='base= goes with compare="base"'):
        ssaviz.load_run(run_dir).export(TEXT, tmp_path / "bad", compare="local", base=base)


def test_every_step_takes_the_runs_base(tmp_path):
    """compare="base" without base=: every step against the base beside the run, as `export --run`
    takes it; a base/ inside one step's own folder is passed over (Run.analyze took it as that step's,
    silently: its loss_base jumped)."""
    run = tmp_path / "run"
    for name, form, seed in (("checkpoint-1", "exp_exp,none", 1), ("checkpoint-2", "exp_exp,none", 2), ("base", "none", 9),
                             ("checkpoint-2/base", "none", 8)):
        run_cli("init-random", "--out", str(run / name), "--layers", "2", "--heads", "2", "--embd", "32", "--query-form", form,
                "--seed", str(seed))
    analysis = ssaviz.load_run(run).analyze(TEXT, compare="base")
    assert list(analysis.steps) == [1, 2] and not analysis.failed
    loss_base = analysis.arrays("loss_base")
    np.testing.assert_array_equal(loss_base[0], loss_base[1])  # one base, one text: the same losses
    alone = ssaviz.load(run / "base").analyze(TEXT, compare="none")
    np.testing.assert_allclose(loss_base[0], alone.loss, rtol=0, atol=1e-5)
    run_cli("export", "--run", str(run), "--compare", "base", "--text", TEXT, "--out", str(tmp_path / "cli"), "--format", "json")
    rows = json.loads((tmp_path / "cli" / "run.json").read_text())["steps"]
    for k, row in enumerate(rows):
        assert abs(row["loss_base"] - float(np.mean(loss_base[k]))) < 1e-5, (k, row["loss_base"])


def test_an_export_is_all_or_nothing_and_never_through_a_link(run_dir, tmp_path):
    """A link where a step's folder goes is refused before any checkpoint opens, one inside a step's
    folder when the run is put in place: OUT as it was either way, nothing written through the link
    (it wrote through both). What would fail every step (an empty text, a twin that does not open)
    raises once instead of skipping every step; arguments of the wrong type are named."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "metrics.json").write_text("precious")
    run = ssaviz.load_run(run_dir)
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(victim, out / "step-000100")
    with pytest.raises(OSError, match="is a symbolic link"):
        run.export(TEXT, out, steps=[100], formats=["json"])
    os.unlink(out / "step-000100")
    (out / "step-000300").mkdir()
    os.symlink(victim, out / "step-000300" / "heatmaps")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(OSError, match="step-000300/heatmaps' is a symbolic link"):
            run.export(TEXT, out, steps="all", formats=["json", "png"])
    assert sorted(os.listdir(victim)) == ["metrics.json"] and (victim / "metrics.json").read_text() == "precious"
    assert sorted(os.listdir(out)) == ["step-000300"], "a step or the staging folder was left behind"
    with pytest.raises(ValueError, match="text is empty"):
        run.analyze("")
    with pytest.raises(ValueError, match="no-such-twin"):
        run.export(TEXT, tmp_path / "twin", compare=str(tmp_path / "no-such-twin"))
    assert not os.path.exists(tmp_path / "twin" / "run.json")
    with pytest.raises(ValueError, match=r"longer than the model's context .*; pass truncate=True to run it$"):  # it said --truncate
        run.export("word " * 3000, tmp_path / "long")
    with pytest.raises(ssaviz.ArgumentTypeError, match="client must be a dask.distributed Client"):
        run.analyze(TEXT, client=5)
    with pytest.raises(ssaviz.ArgumentTypeError, match="steps must be"):
        run.export(TEXT, tmp_path / "bytes", steps=b"all")
    with pytest.raises(ValueError, match=r"Run\.export\(\) takes no keyword bogus_flag "):
        run.export(TEXT, tmp_path / "flag", bogus_flag=1)
    for lens in (True, "true", 1):
        with pytest.raises(ValueError, match=r"Run.export\(\): lens=True runs the model as loaded: not with ablate=$"):
            run.export(TEXT, tmp_path / "lens", lens=lens, ablate="0:0")
    for lens in (False, "false", 0):  # no lens, as the engine reads a switch: past that check, to the next
        with pytest.raises(ValueError, match=r"layer 99 is out of range"):
            run.export(TEXT, tmp_path / "lens", lens=lens, ablate="0:0", layers=[99])
    assert not os.path.exists(tmp_path / "lens")
    # A compare run that does not fit the base is named as the compare run (the message said "the model").
    wide = tmp_path / "wide"
    run_cli("init-random", "--out", str(wide), "--family", "pythia", "--layout", "lit", "--layers", "3", "--heads", "2", "--embd", "32",
            "--query-form", "exp_exp,none", "--seed", "9")
    (tmp_path / "wide_run").mkdir()
    for f in ("lit_config.json", "vocab.json", "merges.txt"):
        shutil.copy(wide / f, tmp_path / "wide_run" / f)
    shutil.copy(wide / "lit_model.pth", tmp_path / "wide_run" / "iter-000100-ckpt.pth")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"^Run.export\(\): compare_run '.*wide_run': base '.*m1' has 2 layers x 2 heads; the model has 3 x 2$"):
            run.export(TEXT, tmp_path / "wide_out", compare_run=tmp_path / "wide_run", base=run_dir.parent / "m1")
    assert not os.path.exists(tmp_path / "wide_out")
    # What picks a step's attribution: refused without the lens, and without steps= to act on (taken and ignored).
    with pytest.raises(ValueError, match=r"^Run.export\(\): dla_position picks the token .*: it needs lens=True$"):
        run.export(TEXT, tmp_path / "dla", dla_position=3)
    with pytest.raises(ValueError, match=r"^Run.export\(\): dla_target= picks what a step's attribution figures split, which only steps= exports hold: give steps=$"):
        run.export(TEXT, tmp_path / "dla", lens=True, dla_target="top")
    assert not os.path.exists(tmp_path / "dla")
    with pytest.raises(ValueError, match=r"layer 99 is out of range \(the model has 2\)"):  # taken and unused without steps=
        run.export(TEXT, tmp_path / "layers", layers=[99])
    assert not os.path.exists(tmp_path / "layers")
    # Inside the run's folder an export would become one of its steps (checkpoint-999/): a run's
    # export is refused anywhere inside, in the command line's words (where a new step was named
    # before the run), and a new step by any export (below).
    for inside in ("checkpoint-999", "exports"):
        with pytest.raises(ValueError, match=r"Run.export\(\): out '.*/" + inside + "' is inside the run folder"):
            run.export(TEXT, run_dir / inside, formats=["json"])
    assert not os.path.exists(run_dir / "checkpoint-999") and not os.path.exists(run_dir / "exports")


def test_a_run_whose_names_hold_control_characters_warns_in_one_escaped_line(run_dir, tmp_path):
    """A step's warning said the checkpoint's path as it is (a tab, a newline) before the engine's
    error, which names it escaped: the path once, escaped."""
    odd = tmp_path / "run\tof\nnight"
    shutil.copytree(run_dir, odd)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        analysis = ssaviz.load_run(odd).analyze(TEXT)
    assert [f["step"] for f in analysis.failed] == [250] and analysis.failed[0]["checkpoint"] == str(odd / "iter-000250-ckpt.pth")
    messages = [str(w.message) for w in caught if "step 250" in str(w.message)]
    assert len(messages) == 1 and "run\\tof\\nnight/iter-000250-ckpt.pth" in messages[0], messages
    assert not any(c in messages[0] for c in "\t\n"), messages


def test_what_a_run_cannot_do_is_said(run_dir, tmp_path):
    """A run of no checkpoint that opens, steps=[] and a Model as compare_run: each one clear error (a
    numpy error on the empty arrays; an export of no step; load_run()'s path must be a path)."""
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in ("lit_config.json", "vocab.json", "merges.txt"):
        shutil.copy(run_dir / f, broken / f)
    shutil.copy(run_dir / "iter-000250-ckpt.pth", broken / "iter-000250-ckpt.pth")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"^Run\.analyze\(\): no checkpoint of the run could be analysed \(1 failed; step 250: .*iter-000250"):
            ssaviz.load_run(broken).analyze(TEXT)
    run = ssaviz.load_run(run_dir)
    with pytest.raises(ValueError, match=r'^Run\.export\(\): steps is empty: "all", steps of the run \(100, 200, 250, 300\), or None'):
        run.export(TEXT, tmp_path / "none", steps=[])
    with pytest.raises(ssaviz.ArgumentTypeError, match=r"^Run\.export\(\): compare_run must be a second run, its folder or a Run "
                                                       r"\(ssaviz\.load_run\), not Model \(a Model is one model: a twin beside each step is compare=\)$"):
        run.export(TEXT, tmp_path / "model", compare_run=run.model(100))
    with pytest.raises(FileNotFoundError, match=r"^Run\.export\(\): compare_run: no such folder: "):
        run.export(TEXT, tmp_path / "missing", compare_run=tmp_path / "no-run")
    with pytest.raises(ssaviz.ArgumentTypeError, match=r"^Run\.export\(\): ablate"):  # ablate's own error, not the lens's
        run.export(TEXT, tmp_path / "missing", ablate=5, lens=True)
    assert not any(os.path.exists(tmp_path / name) for name in ("none", "model", "missing"))
    # What every step opens with, checked before the first here (each step failed on it, then "no
    # checkpoint could be analysed"): a device this machine lacks, a config= that is not there.
    for flags, message in ((dict(device="cuda:99"), r"^Run\.(analyze|export)\(\): device cuda:99: "),
                           (dict(config=str(tmp_path / "none.json")), r"^Run\.(analyze|export)\(\): config '.*none\.json' does not exist$")):
        device = flags.pop("device", "auto")
        elsewhere = ssaviz.load_run(run_dir, device, **flags)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # not one warning a step
            with pytest.raises(ValueError, match=message):
                elsewhere.analyze(TEXT)
            with pytest.raises(ValueError, match=message):
                elsewhere.export(TEXT, tmp_path / "elsewhere")
    assert not os.path.exists(tmp_path / "elsewhere")
    # A single model's export where it would become a new step of the run is refused as the command line's is.
    with pytest.raises(ValueError, match=r"would become a step of the run"):
        run.model(100).analyze(TEXT).export(run_dir / "checkpoint-999")
    assert not os.path.exists(run_dir / "checkpoint-999")
    # A compare run of another depth, as the command line's: refused, nothing written (its lens rows
    # were other layers', set beside the run's with no word).
    run_cli("init-random", "--out", str(tmp_path / "deep" / "checkpoint-0"), "--family", "pythia", "--layers", "3", "--heads", "2", "--embd", "32")
    with pytest.raises(ValueError, match=r"^Run\.export\(\): compare_run '.*deep' has 3 layers x 2 heads, the run 2 x 2: its layers and heads"):
        run.export(TEXT, tmp_path / "deep_out", compare_run=tmp_path / "deep", lens=True)
    assert not os.path.exists(tmp_path / "deep_out")


def test_not_a_run_is_one_clear_error(run_dir):
    with pytest.raises(ValueError, match="holds no checkpoints"):
        ssaviz.load_run(os.path.dirname(run_dir))
    with pytest.raises(FileNotFoundError, match="no such folder"):  # as a missing model is
        ssaviz.load_run(str(run_dir / "nothing"))
    # A flag every checkpoint would open with is checked at once: misspelt, it was every step's
    # failure ("0 steps, 4 failed"), then numpy's error on the empty arrays.
    with pytest.raises(ValueError, match="devce"):
        ssaviz.load_run(run_dir, devce="cpu")
    with pytest.raises(ValueError, match="f17"):
        ssaviz.load_run(run_dir, dtype="f17")


def test_dask_local_cluster_runs_the_checkpoints_on_its_workers(run_dir, twin_dir, tmp_path):
    distributed = pytest.importorskip("distributed")
    expected, _ = serial(run_dir)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            analysis = ssaviz.load_run(run_dir).analyze(TEXT, client=client)
            run_export = ssaviz.load_run(run_dir).export(TEXT, tmp_path / "dask", compare_run=twin_dir, client=client, **EXPORT)
    assert list(analysis.steps) == list(expected.steps)
    assert [f["step"] for f in analysis.failed] == [250]
    for name in expected.keys():
        assert np.array_equal(analysis.arrays(name), expected.arrays(name)), name
    # Run.export on the cluster: the command line's files, byte for byte.
    want = cli_export(run_dir, twin_dir, tmp_path / "cli")
    got = tree(tmp_path / "dask")
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name
    assert [s["step"] for s in run_export["steps"]] == [100, 200, 300]


def test_a_run_of_the_official_layout_reads_what_it_lacks_from_its_base(tmp_path):
    """The official fine-tune scripts write iter-*.pth alone (lit_config.json and the tokenizer stay in
    the base's folder): Run.analyze(base=) reads the base's for every step, with the numbers of the
    same run given them in its folder, as export --run --base does; without a base the reason is
    warned once and counted."""
    for name, form, seed in (("a", "exp_exp,none", "1"), ("b", "exp_exp,none", "2"), ("base", "none", "3")):
        run_cli("init-random", "--out", str(tmp_path / name), "--family", "pythia", "--layout", "lit", "--layers", "2",
                "--heads", "2", "--embd", "32", "--query-form", form, "--seed", seed)
    run, full = tmp_path / "run", tmp_path / "full"
    run.mkdir()
    full.mkdir()
    for step, name in ((100, "a"), (200, "b")):
        for into in (run, full):
            shutil.copy(tmp_path / name / "lit_model.pth", into / f"iter-{step:06d}-ckpt.pth")
    for f in ("lit_config.json", "vocab.json", "merges.txt"):
        shutil.copy(tmp_path / "base" / f, full / f)
    beside = ssaviz.load_run(run).analyze(TEXT, base=tmp_path / "base")
    given = ssaviz.load_run(full).analyze(TEXT, base=tmp_path / "base")
    assert list(beside.steps) == [100, 200] and not beside.failed
    for name in ("entropy", "js_total", "tau_q", "loss", "loss_base"):
        assert np.array_equal(beside.arrays(name), given.arrays(name)), name
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match=r"no checkpoint of the run could be analysed \(2 failed"):
            ssaviz.load_run(run).analyze(TEXT)
    said = [str(w.message) for w in caught if "skipped" in str(w.message)]
    assert len(said) == 2 and "a Run's base=DIR reads its base's for every step" in said[0], said
    assert said[1] == "ssaviz: 1 more step skipped for a reason said above (RunAnalysis.failed lists every one)"
