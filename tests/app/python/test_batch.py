"""ssaviz.export_batch writes what `ssaviz export --batch` writes (byte for byte), and on a Dask
LocalCluster of two worker processes the same files and a summary equal to the serial run's."""

import filecmp
import json
import math
import os
import warnings

import numpy as np
import pytest

import ssaviz
import ssaviz._batch
from conftest import ENGLISH, SMALL, SMALL_TWIN, require, run_cli

TEXTS = [
    {"name": "greeting", "text": "Hello there, world"},
    {"name": "numbers", "text": "one two three four"},
    {"name": "empty", "text": ""},
    {"name": "summary.json", "text": "a text named like the summary"},
    {"text": "no name at all"},
    {"name": "too long", "text": "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen"},
    {"name": "greeting", "text": "Hello again"},
    {"name": "unicode ünï", "text": "Grüße, 世界"},
]
FLAGS = dict(formats=["json", "npy", "csv", "png"], layers=[1], heads=[0], sink_eps=0.25)
CLI_FLAGS = ["--format", "json,npy,csv,png", "--layers", "1", "--heads", "0", "--sink-eps", "0.25"]


def all_files(root):
    out = []

    def walk(d, prefix=""):
        assert not d.left_only and not d.right_only, (prefix, d.left_only, d.right_only)
        out.extend(prefix + f for f in d.common_files)
        for name, sub in d.subdirs.items():
            walk(sub, prefix + name + "/")
    walk(root)
    return out


def serial(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = ssaviz.export_batch(TEXTS, tmp_path / "serial", model=ssaviz.load(require(SMALL)), **FLAGS)
    return summary, caught


def test_a_batch_against_a_base(tmp_path):
    """base=: every text's files hold the three sides, byte for byte as `ssaviz export --batch --base`
    writes them (base= was passed over: tau = 1's two sides were written); an analysis exports the
    sides it was made with, so Analysis.export(base=) is refused."""
    texts = TEXTS[:2]
    lines = tmp_path / "texts.jsonl"
    lines.write_text("".join(json.dumps(t) + "\n" for t in texts))
    run_cli("export", "--model", require(SMALL), "--batch", "--text-file", str(lines), "--base", require(SMALL_TWIN), "--out", str(tmp_path / "cli"),
            "--format", "json")
    model = ssaviz.load(SMALL)
    summary = ssaviz.export_batch(texts, tmp_path / "py", model=model, formats=["json"], base=SMALL_TWIN)
    assert "js_total" in summary["texts"][0]
    metrics = json.loads((tmp_path / "py" / "greeting" / "metrics.json").read_text())
    assert metrics["comparison_kind"] == "base" and "decomposition" in metrics
    files = all_files(filecmp.dircmp(tmp_path / "cli", tmp_path / "py"))
    assert "greeting/metrics.json" in files
    for f in files:
        assert (tmp_path / "cli" / f).read_bytes() == (tmp_path / "py" / f).read_bytes(), f
    with pytest.raises(ValueError, match='base= goes with compare="base"'):
        ssaviz.export_batch(texts, tmp_path / "bad", model=model, compare="local", base=SMALL_TWIN)
    with pytest.raises(ValueError, match="base= goes with Model.analyze"):
        model.analyze("Hello there").export(tmp_path / "one", base=SMALL_TWIN)


def test_a_highlight_too_large_is_that_texts_failure(tmp_path):
    """A text whose highlight cannot be drawn at text_scale= and png_scale= is that text's failure,
    before its analysis, as the command line's batch has it; the others are written, with the
    summary (it stopped the batch with an OSError naming --png-scale, the texts after it unwritten)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = ssaviz.export_batch(["hello there", "x\n" * 300, "hello"], tmp_path / "out", model=ssaviz.load(ENGLISH), formats=["png", "json"],
                                      text_scale=3, png_scale=4, truncate=True, layers=[0], heads=[0])
    assert [t["name"] for t in summary["texts"]] == ["text_0001", "text_0003"]
    assert [f["name"] for f in summary["failed"]] == ["text_0002"]
    error = summary["failed"][0]["error"]
    assert "draws a highlight" in error and "png_scale=4 and text_scale=3" in error and "--" not in error, error
    assert (tmp_path / "out" / "summary.json").exists() and (tmp_path / "out" / "text_0003" / "highlight.png").exists()
    assert len(caught) == 1 and "text_0002" in str(caught[0].message)


def test_serial_batch_equals_the_command_lines(tmp_path):
    lines = tmp_path / "texts.jsonl"
    lines.write_text("".join(json.dumps(t) + "\n" for t in TEXTS))
    code, stdout, stderr = run_cli("export", "--model", SMALL, "--batch", "--text-file", str(lines), "--out", str(tmp_path / "cli"),
                                   *CLI_FLAGS, check=False)
    assert code == 3, stderr  # two texts could not run
    summary, caught = serial(tmp_path)
    assert [f["name"] for f in summary["failed"]] == ["empty", "too_long"]
    assert len(caught) == 2 and "text is empty" in str(caught[0].message)
    names = [t["name"] for t in summary["texts"]]
    assert names[:5] == ["greeting", "numbers", "summary.json_2", "text_0005", "greeting_2"] and names[5].startswith("unicode_")
    # The lines are the texts' places in the list, as they are the lines of the --batch file.
    assert [t["line"] for t in summary["texts"]] == [1, 2, 4, 5, 7, 8]
    files = all_files(filecmp.dircmp(tmp_path / "cli", tmp_path / "serial"))
    assert "summary.json" in files and "greeting/heatmaps/L1_H0.png" in files and len(files) > 40
    for f in files:
        assert (tmp_path / "cli" / f).read_bytes() == (tmp_path / "serial" / f).read_bytes(), f


def test_lens_in_a_batch_and_an_export_equals_the_command_lines(tmp_path):
    """lens=True: each text's lens files and the summary's loss by layer, byte for byte the
    command line's --lens (both sides), a text of one token's too (a lone export's files, no loss by
    layer); an analysis's export(lens=True) the same files."""
    texts = TEXTS[:2] + [{"name": "one", "text": "a"}]
    lines = tmp_path / "texts.jsonl"
    lines.write_text("".join(json.dumps(t) + "\n" for t in texts))
    run_cli("export", "--model", SMALL, "--batch", "--text-file", str(lines), "--out", str(tmp_path / "cli"), "--format", "npy,json",
            "--lens")
    m = ssaviz.load(require(SMALL))
    summary = ssaviz.export_batch(texts, tmp_path / "py", model=m, formats=["npy", "json"], lens=True)
    files = all_files(filecmp.dircmp(tmp_path / "cli", tmp_path / "py"))
    for name in ("lens_loss.npy", "lens_loss_compare.npy", "dla.npy", "lens_top.json"):
        assert "greeting/" + name in files, name
    for f in files:
        assert (tmp_path / "cli" / f).read_bytes() == (tmp_path / "py" / f).read_bytes(), f
    row = summary["texts"][0]
    assert len(row["lens_loss"]) == m.n_layer + 1 and len(row["lens_loss_compare"]) == m.n_layer + 1
    assert "one/lens_top.json" in files and summary["texts"][2]["lens_loss"] == []
    a = m.analyze(texts[0]["text"])
    a.export(tmp_path / "one", formats=["npy"], lens=True)
    for name in ("lens_loss.npy", "dla.npy", "dla_mlp_compare.npy"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "py" / "greeting" / name).read_bytes(), name
    with pytest.raises(ValueError, match="as loaded"):
        ssaviz.export_batch(texts, tmp_path / "ablated", model=m, lens=True, ablate="0:1")


def test_bad_devices_for_the_workers(tmp_path):
    """devices=: a list of load()'s device names, for a client's workers only; checked before any text runs."""
    out = tmp_path / "never"
    with pytest.raises(ssaviz.ArgumentTypeError, match="devices must be a list"):
        ssaviz.export_batch(TEXTS[:1], out, model=SMALL, devices="cuda:0", client=object())
    with pytest.raises(ssaviz.ArgumentTypeError, match="a device must be a string"):
        ssaviz.export_batch(TEXTS[:1], out, model=SMALL, devices=[0], client=object())
    with pytest.raises(ValueError, match="devices is empty"):
        ssaviz.export_batch(TEXTS[:1], out, model=SMALL, devices=[], client=object())
    with pytest.raises(ValueError, match=r"^device 'gpu:1' is not one of auto, cpu, cuda or cuda:N"):
        ssaviz.export_batch(TEXTS[:1], out, model=SMALL, devices=["cuda:1", "gpu:1"], client=object())
    with pytest.raises(ValueError, match="without a client, load the model on the device"):
        ssaviz.export_batch(TEXTS[:1], out, model=SMALL, devices=["cpu"])
    # A name that is not UTF-8 (a lone surrogate) is named; it was pybind11's TypeError of C++ signatures.
    with pytest.raises(ValueError, match=r"text 2's name 'a\\udcff' is not valid UTF-8"):
        ssaviz.export_batch([TEXTS[0], ("a\udcff", "ABC")], out, model=SMALL)
    assert not out.exists()


def test_a_link_at_a_texts_folder_is_refused(tmp_path):
    """A link where a text's sub-folder goes is refused before any text runs, never written through."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "metrics.json").write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(victim, out / "mine")
    with pytest.raises(OSError, match="mine' is a symbolic link"):
        ssaviz.export_batch([{"name": "fine", "text": "one text"}, {"name": "mine", "text": "hi there"}], out, model=SMALL,
                            formats=["json"])
    assert sorted(os.listdir(victim)) == ["metrics.json"] and (victim / "metrics.json").read_text() == "precious"
    assert sorted(os.listdir(out)) == ["mine"]


def close(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)
    return a == b


def test_dask_local_cluster_runs_the_texts_on_its_workers(tmp_path):
    distributed = pytest.importorskip("distributed")
    expected, _ = serial(tmp_path)
    model = ssaviz.load(require(SMALL))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            summary = ssaviz.export_batch(TEXTS, tmp_path / "dask", model=model, client=client, **FLAGS)
            again = ssaviz.export_batch(TEXTS[:2], tmp_path / "dask-again", model=model, client=client, **FLAGS)
        opens = client.run(ssaviz._batch.worker_opens)
        # A device per worker (GPUs on a machine with them; here two spellings of the CPU): the
        # k-th worker by address opens the model on devices[k].
        devices = ["cpu", "auto"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            per_device = ssaviz.export_batch(TEXTS, tmp_path / "per-device", model=model, client=client, devices=devices,
                                             formats=["json"])
        opens_after = client.run(ssaviz._batch.worker_opens)
        by_worker = ssaviz._batch._worker_devices(client, devices)
        chosen = client.run(ssaviz._batch._device_here, ("m", "auto", {}), by_worker, devices)
        pids = client.run(__import__("os").getpid)
    # Real worker processes ran the texts, each opening the model once for both batches.
    assert len(set(pids.values())) == 2 and __import__("os").getpid() not in pids.values()
    counts = [n for worker in opens.values() for n in worker.values()]
    assert counts and all(n == 1 for n in counts), opens
    assert all(key == (SMALL, "auto") for worker in opens.values() for key in worker)
    assert len(again["texts"]) == 2
    assert len(per_device["texts"]) + len(per_device["failed"]) == len(TEXTS)
    for k, address in enumerate(sorted(opens_after)):
        new = set(opens_after[address]) - set(opens[address])
        assert new <= {(SMALL, devices[k])}, (address, opens_after)
        assert opens_after[address].get((SMALL, devices[k]), 0) <= 1
    assert {address: spec[1] for address, spec in chosen.items()} == {a: devices[k] for k, a in enumerate(sorted(chosen))}
    # The merged summary is the serial run's.
    assert summary["failed"] == expected["failed"]
    assert len(summary["texts"]) == len(expected["texts"])
    for got, want in zip(summary["texts"], expected["texts"]):
        assert got.keys() == want.keys()
        for key in want:
            assert close(got[key], want[key]), (want["name"], key, got[key], want[key])
    # And the same files, every text's folder included.
    files = all_files(filecmp.dircmp(tmp_path / "serial", tmp_path / "dask"))
    assert "greeting/attention.npy" in files and "text_0005/tokens.json" in files
    # Each worker saw other texts before these (the incremental path), so equal within float rounding.
    for f in files:
        if f.endswith(".npy"):
            a, b = np.load(tmp_path / "serial" / f), np.load(tmp_path / "dask" / f)
            assert a.shape == b.shape and np.allclose(a, b, rtol=0, atol=1e-5), f


def test_a_dask_worker_computes_on_its_threads_not_the_machines(tmp_path, monkeypatch):
    """Issue 39: a worker process opens the model with its threads_per_worker, not every core."""
    distributed = pytest.importorskip("distributed")
    monkeypatch.delenv("SSAVIZ_THREADS", raising=False)  # the workers inherit this environment
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ssaviz.export_batch(TEXTS[:1], tmp_path / "share", model=SMALL, client=client, formats=["json"])
        runtime = client.run(lambda: json.loads(ssaviz._ssaviz.runtime_json()))
    (worker,) = runtime.values()
    assert worker["threads"] == 1, worker
    assert "threads_per_worker" in worker["threads_why"], worker


def test_a_dict_of_texts_names_each_by_its_key(tmp_path):
    """{name: text}: each text's folder is its key (the keys were taken as the texts, and exported)."""
    summary = ssaviz.export_batch({"cat": "The cat sat on the mat.", "dog": "A dog ran in the park."}, tmp_path / "out",
                                  model=SMALL, formats=["json"])
    assert [t["name"] for t in summary["texts"]] == ["cat", "dog"]
    tokens = json.loads((tmp_path / "out" / "dog" / "tokens.json").read_text())
    assert "".join(tokens["pieces"]).replace("\u0120", " ").startswith("A dog"), tokens["pieces"]
