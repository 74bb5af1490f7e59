"""The module's API against the command line and its promises: info, tokenize and generate as the
commands print them, the incremental path, the GIL released while the engine runs, figures for
Jupyter, show() starting the window, pickling a Model."""

import json
import os
import pickle
import stat
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import ssaviz
from conftest import DEFAULT, ENGLISH, JOBS, SMALL, SOURCE, require, run_cli


def test_info_tokenize_generate_as_the_command_line_prints_them():
    m = ssaviz.load(require(ENGLISH))
    assert m.info == json.loads(run_cli("info", "--model", ENGLISH, "--json")[1])
    ids, pieces = m.tokenize(JOBS)
    cli = json.loads(run_cli("tokenize", "--model", ENGLISH, "--text", JOBS, "--json")[1])
    assert ids == cli["ids"] and pieces == cli["pieces"]
    a = m.analyze(JOBS)
    assert a.ids == cli["ids"] and a.pieces == cli["pieces"] and a.offsets == [tuple(o) for o in cli["offsets"]]
    assert b"".join(a.piece_bytes) == JOBS.encode()
    for kwargs, flags in (({}, []), ({"temperature": 0.8, "top_k": 20, "seed": 7}, ["--temperature", "0.8", "--top-k", "20", "--seed", "7"]),
                          ({"temperature": 0.8, "seed": 3_000_000_000}, ["--temperature", "0.8", "--seed", "3000000000"]),  # past 2**31 as the flag
                          ({"ablate": "0:*"}, ["--ablate", "0:*"])):
        ours = m.generate("The only way to", tokens=12, **kwargs)
        theirs = json.loads(run_cli("generate", "--model", ENGLISH, "--text", "The only way to", "--tokens", "12", "--json", *flags)[1])
        assert ours == theirs["text"], kwargs
        if not kwargs:  # the continuation as appended to the prompt: the first word's space kept (SentencePiece's ▁)
            assert ours.startswith(" ") and m.tokenize("The only way to" + ours)[0][:theirs["prompt_tokens"]] == m.tokenize("The only way to")[0], ours


def test_import_chooses_openblas_kernels_before_numpy_loads_them():
    """OpenBLAS falls back to its generic SSE3 kernels ("Prescott") on a CPU newer than itself, and
    reads OPENBLAS_CORETYPE only as it loads: `import ssaviz` first sets the kernels the CPU runs
    (ssaviz/_blas.py), so no CPU with AVX2 and FMA computes with Prescott's unasked; imported after
    numpy, ssaviz says what to set, exactly where numpy's OpenBLAS runs Prescott's on such a CPU."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    corename = ("import ctypes\nf = ctypes.CDLL('libopenblas.so.0').openblas_get_corename\n"
                "f.restype = ctypes.c_char_p\nprint(f().decode())")

    def child(code):
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr
        return p.stdout.strip(), p.stderr

    alone, _ = child(corename)  # OpenBLAS's own choice, numpy and ssaviz aside
    if not alone:
        pytest.skip("the BLAS is not OpenBLAS")
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    faster = ssaviz._blas.kernels_for(set(flags))
    chosen, err = child("import ssaviz\n" + corename)
    assert chosen == (faster if alone == "Prescott" and faster else alone), (alone, faster, chosen)
    assert "OPENBLAS_CORETYPE" not in err, err
    _, late = child("import warnings\nwarnings.simplefilter('always')\nimport numpy\nimport ssaviz")
    assert (f"OPENBLAS_CORETYPE={faster} set before Python starts" in late) == (alone == "Prescott" and bool(faster)), late


def test_a_model_without_temperatures_compared_with_itself_is_named():
    """A fine-tune's base opened alone has no temperatures: against tau = 1 it is its own comparison,
    every difference 0. analyze() warns, in Python's words, as `ssaviz export` notes it; not with
    compare=None, nor for a model with temperatures."""
    import warnings
    vanilla = ssaviz.load(os.path.join(os.path.dirname(ENGLISH), "vanilla"))
    with pytest.warns(UserWarning, match=r"analyze\(\): every temperature of the SSA side is 1 .*\(compare=DIR\).* compare=None analyses it alone"):
        a = vanilla.analyze(JOBS, compare="local")
    assert np.abs(a.metrics["js"]).max() < 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vanilla.analyze(JOBS, compare=None)
        ssaviz.load(ENGLISH).analyze(JOBS)


def test_an_edit_takes_the_incremental_path():
    m = ssaviz.load(require(DEFAULT))
    text = "The model keeps what each position left behind. " * 8
    first = m.analyze(text)
    assert first.reused_rows == 0
    edited = m.analyze(text + "One more sentence.")
    assert edited.reused_rows >= first.n_tokens - 1
    full = ssaviz.load(DEFAULT).analyze(text + "One more sentence.")
    assert np.abs(edited.attention(3, 2) - full.attention(3, 2)).max() <= 1e-5
    assert np.abs(edited.tau_q - full.tau_q).max() <= 1e-5
    # Another comparison starts afresh; the same one again reuses.
    assert m.analyze(text, compare="local").reused_rows == 0
    assert m.analyze(text, compare="local").reused_rows > 0


def test_analyze_releases_the_gil():
    m = ssaviz.load(require(DEFAULT))
    text = "Attention, temperature and the residual stream. " * 90  # ~900 tokens
    m.analyze("warm up")
    done = threading.Event()
    result = {}

    def work():
        result["a"] = m.analyze(text, compare="vanilla")
        done.set()

    t = threading.Thread(target=work)
    start = time.perf_counter()
    t.start()
    spins = 0
    while not done.is_set():
        spins += 1  # Python runs here only while the engine has let go of the GIL
    t.join()
    elapsed = time.perf_counter() - start
    assert result["a"].n_tokens > 500
    assert elapsed > 0.05, "the analysis was too quick to tell"
    assert spins > 1000, f"only {spins} loop turns in {elapsed:.2f} s: the GIL was held"


def test_two_threads_share_one_model_safely():
    m = ssaviz.load(require(SMALL))
    texts = [f"text number {k} here" for k in range(12)]
    out = {}

    def work(k):
        out[k] = m.analyze(texts[k]).tau_q.copy()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, text in enumerate(texts):
        assert np.abs(out[k] - ssaviz.load(SMALL).analyze(text).tau_q).max() <= 1e-5


def test_figures_for_jupyter(tmp_path):
    a = ssaviz.load(require(ENGLISH)).analyze(JOBS)
    for fig in (a.heatmap(1, 2), a.heatmap(0, 0, map="diff", log=True), a.heads_grid(), a.highlight(), a.plot("sink_mass")):
        png = fig._repr_png_()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
        svg = fig._repr_svg_()
        assert "<svg" in svg[:400] and svg.rstrip().endswith("</svg>")
        assert fig.width > 100 and fig.height > 50
    h = a.highlight(by="tau_q", scope=(1, 2))
    html = h._repr_html_()
    assert html.startswith("<iframe srcdoc=") and "title=" in html
    assert a.heatmap(0, 0)._repr_html_() is None
    for ext in ("png", "svg"):
        path = h.save(tmp_path / f"h.{ext}")
        assert os.path.getsize(path) > 500
    assert open(h.save(tmp_path / "h.html"), encoding="utf-8").read() == h.html()
    # For print: a PNG scale draws the figure N times larger, as export's png_scale writes it.
    def size(png):
        return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    fig = a.heatmap(1, 2)
    assert size(fig.png()) == (fig.width, fig.height)
    assert size(fig.png(scale=2)) == (2 * fig.width, 2 * fig.height)
    assert size(open(fig.save(tmp_path / "x3.png", scale=3), "rb").read()) == (3 * fig.width, 3 * fig.height)
    a.export(tmp_path / "x2", formats=["png"], layers=[1], heads=[2], png_scale=2)
    assert (tmp_path / "x2" / "heatmaps" / "L1_H2.png").read_bytes() == fig.png(scale=2)
    for bad, error in ((0, ValueError), (5, ValueError), (1.5, ValueError), ("2", TypeError), (True, TypeError)):
        with pytest.raises(error, match="scale"):
            fig.png(scale=bad)
    # A whole number of any type, as export(png_scale=2.0) takes it (png(scale=2.0) was refused).
    assert fig.png(scale=2.0) == fig.png(scale=np.int64(2)) == fig.png(scale=2)
    with pytest.raises(ValueError, match="scale= is a PNG's"):
        fig.save(tmp_path / "x.svg", scale=2)
    with pytest.raises(TypeError, match="takes no keyword png_scale"):
        a.heatmap(1, 2, png_scale=2)
    # For a paper whose captions say what the figures show, set in one column: no titles (the SVG's
    # <title> keeps it) and text twice its size, the bytes export writes with those flags.
    paper = a.heatmap(1, 2, no_titles=True, text_scale=2)
    a.export(tmp_path / "x4", formats=["svg"], layers=[1], heads=[2], no_titles=True, text_scale=2)
    assert (tmp_path / "x4" / "heatmaps" / "L1_H2.svg").read_text() == paper.svg()
    where = "layer 1, head 2"
    assert fig.svg().count(where) == 2 and paper.svg().count(where) == 1  # drawn and in <title>; in <title> only
    assert paper.width > fig.width  # labels twice as wide
    for name in ("dilution", "sink_mass"):
        assert a.plot(name, no_titles=True).svg().count("first-token mass" if name == "sink_mass" else "dilution") == 1, name
    with pytest.raises(ValueError, match=r"^text_scale '4' is not a number from 0.5 to 3$"):
        a.highlight(text_scale=4)
    # A head's own temperature scale (the window's View > Temperature scale per head) says so under its bar.
    own = a.highlight(by="tau_q", scope=(1, 2), temperature_scale="head")
    assert "own scale" in own.html()
    assert "own scale" not in h.html()
    with pytest.raises(ValueError, match="^temperature_scale 'layer' is not one of model, head"):
        a.highlight(temperature_scale="layer")


def test_show_starts_the_window_and_returns_once_it_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("DISPLAY", os.environ.get("DISPLAY") or ":99")
    log = tmp_path / "argv.json"
    fake = tmp_path / "fake-ssaviz"
    fake.write_text(f"#!/usr/bin/python3\nimport json, sys, time\njson.dump(sys.argv[1:], open({str(log)!r}, 'w'))\ntime.sleep(5)\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("SSAVIZ_BINARY", str(fake))
    m = ssaviz.load(require(SMALL), dtype="bf16")
    start = time.perf_counter()
    p = ssaviz.show(m, "Hello there", show="heads")
    assert time.perf_counter() - start < 3.0 and p.poll() is None
    for _ in range(100):
        if log.exists() and log.stat().st_size:
            break
        time.sleep(0.05)
    args = json.loads(log.read_text())
    p.kill()
    p.wait()
    assert args[:2] == ["--model", SMALL] and "--text" in args and args[args.index("--text") + 1] == "Hello there"
    assert args[args.index("--dtype") + 1] == "bf16" and args[args.index("--show") + 1] == "heads"
    # The real binary takes that command line (--help parses every flag first, then exits).
    code, out, err = run_cli(*args, "--help", check=False)
    assert code == 0, err


def test_show_leaves_no_copy_of_a_long_text(tmp_path, monkeypatch):
    """A text past what an argument holds goes through a file the window reads as it starts: removed
    then (every call left a copy of the text in the temporary folder for good). A NUL is refused in
    show()'s words, as the window refuses it (subprocess said "embedded null byte")."""
    monkeypatch.setenv("DISPLAY", os.environ.get("DISPLAY") or ":99")
    log = tmp_path / "read.json"
    fake = tmp_path / "fake-ssaviz"
    fake.write_text("#!/usr/bin/python3\nimport json, sys, time\nf = sys.argv[sys.argv.index('--text-file') + 1]\n"
                    f"json.dump([f, len(open(f, 'rb').read())], open({str(log)!r}, 'w'))\ntime.sleep(2)\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("SSAVIZ_BINARY", str(fake))
    m = ssaviz.load(require(SMALL))
    text = "a long text " * 10000
    p = ssaviz.show(m, text)
    p.wait()
    path, size = json.loads(log.read_text())
    assert size == len(text)
    for _ in range(100):
        if not os.path.exists(path):
            break
        time.sleep(0.05)
    assert not os.path.exists(path), path
    with pytest.raises(ValueError, match=r"^show\(\): the text holds a NUL character at byte 1 "):
        ssaviz.show(m, "a\0b")


def test_show_raises_where_the_window_cannot_open(tmp_path, monkeypatch):
    """Issue 34: show() without a display, or with a window that exits at once, raises in the caller."""
    m = ssaviz.load(require(SMALL))
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(RuntimeError, match="no display"):
        ssaviz.show(m)
    monkeypatch.setenv("DISPLAY", ":99")
    fake = tmp_path / "failing-ssaviz"
    fake.write_text("#!/usr/bin/python3\nimport sys\nsys.stderr.write('ssaviz: cannot open a window: no GLX\\n')\nsys.exit(3)\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("SSAVIZ_BINARY", str(fake))
    with pytest.raises(RuntimeError, match="exited with code 3: ssaviz: cannot open a window: no GLX"):
        ssaviz.show(m)


def test_a_split_characters_byte_is_named_as_tokenize_spells_it():
    """A piece that is one byte of a character split over pieces (GPT-2's id 160, the byte 0xE4) is
    named \\xE4 in the lens's lists and predictions, as `tokenize` spells it (every such piece read
    U+FFFD alike), and attribute() takes that name."""
    m = ssaviz.load(require(SMALL))
    a = m.analyze("The cat sat on the mat.")
    assert a._h.id_pieces([160, 464]) == ["\\xE4", "The"]
    by_name, by_id = a.attribute(2, "\\xE4"), a.attribute(2, 160)
    assert np.array_equal(by_name["heads"], by_id["heads"]) and by_name["logit"] == by_id["logit"]


def test_a_model_pickles_as_how_it_was_opened():
    m = ssaviz.load(require(SMALL), n_head=2)
    copy = pickle.loads(pickle.dumps(m))
    assert copy.path == m.path and copy.flags == {"n_head": 2}
    assert np.array_equal(copy.analyze("Hello").tau_q, m.analyze("Hello").tau_q)


def test_bundled_examples_and_default_model():
    examples = ssaviz.examples()
    assert examples["english"]["text"].startswith("The only way to do great work")
    assert os.path.isdir(examples["english"]["model"]) and os.path.isdir(examples["english"]["twin"])
    assert ssaviz.load().path.endswith(os.path.join("english", "ssa"))
    # The fine-tune's example: its base is the English twin it started from, and the split adds up.
    ft = examples["licenses"]
    assert ft["base"] == examples["english"]["twin"] and ft["twin"] == ""
    a = ssaviz.load(ft["model"]).analyze(ft["text"], compare="base", base=ft["base"])
    loss = a.decomposition["loss_mean"]
    assert loss["ssa"] < loss["base"] - 1.0  # the fine-tune learned its domain (the card: 5.037 to 3.022)
    assert abs((loss["ssa"] - loss["tau1"]) + (loss["tau1"] - loss["base"]) - (loss["ssa"] - loss["base"])) < 1e-9
    # The decomposition's name of the temperatures' part reads the metrics' array of it.
    assert np.array_equal(a.metrics["js_temperature"], a.metrics["js"])
    head_means = a.metrics["js"][:, :, 1:].mean(axis=-1)
    np.testing.assert_allclose(head_means, a.decomposition["js_temperature"], rtol=0, atol=1e-6)

    # attribute() takes a piece as ssaviz shows it. This SentencePiece tokenizer spells "." alone as
    # "▁." (id 1772, another token): the piece is the text's, and lens_top()'s pieces are taken too.
    t = a.n_tokens - 2
    assert a.pieces[t + 1] == "." and a.model.tokenize(".")[0] != [int(a.ids[t + 1])]
    assert np.array_equal(a.attribute(t, ".")["mlp"], a.attribute(t, int(a.ids[t + 1]))["mlp"])
    for piece, _ in a.lens_top(a.n_layer, t):
        a.attribute(t, piece)
    # A byte-fallback piece is named by its spelling, as lens_top() and predictions() name it: "#"
    # and "<0x23>" are two ids (the byte's read as "#" too, and "#" had to be given as an id).
    hash_piece, hash_byte = list(a._h.piece_ids("#")), list(a._h.piece_ids("<0x23>"))
    assert len(hash_piece) == 1 and len(hash_byte) == 1 and hash_piece != hash_byte
    assert a._h.id_pieces(hash_byte) == ["<0x23>"]
    assert a.attribute(t, "<0x23>")["embed"] == a.attribute(t, hash_byte[0])["embed"] != a.attribute(t, "#")["embed"]
    # A stray byte as `tokenize` and the window write it ("\xC2", the first of the two bytes of "©")
    # is taken too (it was "no piece of the vocabulary: it tokenizes to 4 tokens").
    c = ssaviz.load(ft["model"]).analyze("Copyright \u00a9 2024")
    at = [k for k, b in enumerate(c.piece_bytes) if b == b"\xc2"]
    assert len(at) == 1, c.piece_bytes
    assert c.attribute(at[0] - 1, "\\xC2")["embed"] == c.attribute(at[0] - 1, int(c.ids[at[0]]))["embed"]
    assert c.attribute(at[0] - 1, "\\xc2")["embed"] == c.attribute(at[0] - 1, int(c.ids[at[0]]))["embed"]


def test_a_model_computes_on_every_usable_core_by_default(monkeypatch):
    """Issue 39: without SSAVIZ_THREADS a model computes on the process's usable cores (its CPU
    affinity mask, or a cgroup quota where one is lower), and m.info says so."""
    monkeypatch.delenv("SSAVIZ_THREADS", raising=False)
    runtime = ssaviz.load(ENGLISH).info["runtime"]
    cores = len(os.sched_getaffinity(0))
    assert runtime["threads"] <= cores
    if "quota" not in runtime["threads_why"]:
        assert runtime["threads"] == cores, runtime
        assert runtime["threads_why"] == f"{cores} core{'s' if cores > 1 else ''} in the CPU affinity mask"
    monkeypatch.setenv("SSAVIZ_THREADS", "1")
    one = ssaviz.load(ENGLISH).info["runtime"]
    assert (one["threads"], one["threads_why"]) == (1, "SSAVIZ_THREADS=1"), one


def test_the_catalogue_names_the_metrics_and_the_docs():
    """ssaviz.quantities() is the catalogue the window and the files list from: Analysis.metrics has
    exactly its Python keys (two-sided ones also with _compare), and the docs list them. Against a
    base also the base-only ones (js_total, js_drift: the catalogue said they had no Python key),
    the base's side of those it has, and l1_total, l1_drift."""
    catalogue = ssaviz.quantities()
    listed = [q for q in catalogue if q["python"]]
    want = {q["python"] for q in listed if not q["base_only"]} | {q["python"] + "_compare" for q in listed if "comparison" in q["sides"]}
    a = ssaviz.load(require(ENGLISH)).analyze(JOBS)
    assert set(a.metrics) == want
    ab = ssaviz.load(ENGLISH).analyze(JOBS, base=os.path.join(os.path.dirname(ENGLISH), "vanilla"))
    assert {q["key"] for q in catalogue if q["base_only"]} == {"js_total", "js_drift", "weights_q", "weights_k", "weights_v", "weights_o"}
    assert set(ab.metrics) == (want | {q["python"] for q in listed} | {q["python"] + "_base" for q in listed if "base" in q["sides"]} |
                               {"l1_total", "l1_drift"})
    for name in ("js_total", "js_drift", "l1_total", "l1_drift"):
        assert name in ssaviz.Analysis.metrics.__doc__, name
    a = ab
    for q in listed:
        assert a.metrics[q["python"]].shape == ((a.n_layer, a.n_head, a.n_tokens) if q["scope"] == "row" else (a.n_layer, a.n_head))
        assert q["python"] in ssaviz.Analysis.metrics.__doc__
    metrics = a.metrics
    for q in listed:  # metrics.json's and run.json's names read the same array
        for name in {q["key"], q["json"]} - {None, ""}:
            assert name in metrics and metrics[name] is metrics[q["python"]] and metrics.get(name) is metrics[q["python"]], name
    assert "js_divergence" in metrics and metrics.get("no_such_metric") is None and "no_such_metric" not in metrics
    with pytest.raises(KeyError):
        metrics["no_such_metric"]
    colorings = [c["key"] for c in ssaviz._CATALOGUE["token_colorings"]]
    assert colorings[:3] == ["tau_q", "tau_v", "entropy"] and "loss_delta" in colorings
    for key in colorings:
        assert key in ssaviz.Analysis.highlight.__doc__
    assert a.highlight(by="loss_delta").width > 0
    # by= takes metrics' name for a colouring too ("js" was refused while a.metrics["js"] is it).
    assert a.highlight(by="js").svg() == a.highlight(by="js_divergence").svg()


def test_the_temperature_slopes_are_the_models_position_term():
    """Issue 34: m.info's temperature_slopes (beta, s per layer) give tau_q's position term the
    engine computes, 1 + s ln i, at every position; `ssaviz info` prints them."""
    m = ssaviz.load(require(ENGLISH))
    slopes = m.info["temperature_slopes"]
    assert slopes["form"] == m.info["query_temperature"]["position"] and len(slopes["layers"]) == m.n_layer
    a = m.analyze(JOBS, compare=None)
    i = np.arange(1, a.n_tokens + 1, dtype=np.float64)
    for layer in slopes["layers"]:
        s = np.array(layer["s"], dtype=np.float64)
        want = np.broadcast_to(1 + s[:, None] * np.log(i)[None, :], (a.n_head, a.n_tokens))
        np.testing.assert_allclose(a.tau_q_position[layer["layer"]], want, atol=1e-5)
        assert np.allclose(layer["tau_q_at"]["1024"], 1 + s * np.log(1024), atol=1e-5)
    printed = run_cli("info", "--model", ENGLISH)[1]
    assert "tau_q(i) = 1 + s ln i" in printed and "tau@1024" in printed
    # The table's columns line up: each layer's cells start where the header's do.
    lines = printed.splitlines()
    header = next(k for k, line in enumerate(lines) if line.split()[:2] == ["layer", "beta"])
    rows = lines[header:header + 1 + m.n_layer]

    def starts(line):
        return [k for k in range(1, len(line)) if line[k] != " " and line[k - 1] == " "]

    assert all(starts(row)[1:] == starts(rows[0])[1:] for row in rows[1:]), "\n".join(rows)  # the layer column is right-aligned
    assert all(row == row.rstrip() for row in rows)
    # A fine-tune's per-head slopes of about 6e-4 are printed apart where they differ (they read
    # "0.0006..0.0006"), to three significant digits.
    licenses = os.path.join(os.path.dirname(os.path.dirname(ENGLISH)), "licenses", "ssa")
    info = ssaviz.load(require(licenses)).info["temperature_slopes"]["layers"]
    printed = run_cli("info", "--model", licenses)[1].splitlines()
    header = next(k for k, line in enumerate(printed) if line.split()[:2] == ["layer", "beta"])
    for layer, line in zip(info, printed[header + 1:]):
        lo, _, hi = line.split()[2].partition("..")
        assert float(lo) == pytest.approx(min(layer["s"]), rel=2e-3) and float(hi or lo) == pytest.approx(max(layer["s"]), rel=2e-3), line
        assert (hi != "" and lo != hi) if min(layer["s"]) != max(layer["s"]) else hi == "", line


def test_the_first_figure_is_laid_out_with_the_fonts():
    """A process's first figure is measured with the figure fonts, as every later one and the export
    (it was laid out with the fallback metrics: 910 x 856 where the others are 900 x 848)."""
    code = (f"import ssaviz; a = ssaviz.load({DEFAULT!r}).analyze('The keeper lit the lamp and watched the ships'); "
            "first = a.heatmap(0, 0).svg(); print(first == a.heatmap(0, 0).svg())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_compare_base_gives_three_sides_and_the_decomposition(tmp_path):
    """Issue 34: base= (or compare="base") analyses a fine-tune against its base; the decomposition
    is the per-head mean over rows 2..T of the rows' JS and L1, and each side's mean loss."""
    base = os.path.join(os.path.dirname(ENGLISH), "vanilla")
    m = ssaviz.load(require(ENGLISH))
    a = m.analyze(JOBS, base=base)
    assert (a.compare, a.comparison_kind) == ("base", "base") and os.path.samefile(a.base_label, base)
    d = a.decomposition
    for part, rows in (("total", "js_total"), ("temperature", "js"), ("drift", "js_drift")):
        assert d["js_" + part].shape == (a.n_layer, a.n_head)
        np.testing.assert_allclose(d["js_" + part], a.metrics[rows][:, :, 1:].mean(-1), atol=1e-6)
    assert abs(d["loss_mean"]["base"] - a.loss_base.mean()) < 1e-5 and a.loss_base.shape == a.loss.shape
    assert d["base_temperatures"] is None  # a vanilla base (one trained with SSA names its own: "tau_v", ...)
    assert a.attention(0, 0, side="base").shape == (a.n_tokens, a.n_tokens)
    assert a.attention(0, 0, side="tau1").shape == (a.n_tokens, a.n_tokens)
    # Each side's own next tokens (side="base" gave SSA's).
    for side, probs in (("ssa", a.top_probs), ("tau1", a.top_probs_compare), ("base", a.top_probs_base)):
        np.testing.assert_array_equal([p for _, p in a.predictions(3, k=3, side=side)], probs[3][:3], err_msg=side)
    assert not np.array_equal(a.top_probs_base[3][:3], a.top_probs[3][:3])
    assert "entropy_base" in a.metrics and a.tau_q_base is not None
    # The base's maps and SSA - base as figures, only beside a base.
    for name in ("base", "base_diff"):
        assert a.heatmap(0, 0, map=name).width > 0 and a.heads_grid(map=name).width > 0
    # The middle side by the name its files have (_tau1), as attention(side="tau1") takes it.
    assert a.heatmap(0, 0, map="tau1").svg() == a.heatmap(0, 0, map="compare").svg()
    assert a.heads_grid(map="tau1").svg() == a.heads_grid(map="compare").svg()
    # What fine-tuning changed, head by head and token by token: export's figures.
    a.export(tmp_path / "finetune", formats=["svg"])
    for name in ("finetune", "finetune_loss"):
        assert a.plot(name).svg() == (tmp_path / "finetune" / (name + ".svg")).read_text(), name
    # On a log scale as the Fine-tune tab draws it (it was linear whatever log= said).
    a.export(tmp_path / "finetune_log", formats=["svg"], log=True)
    logged = a.plot("finetune", log=True).svg()
    assert logged == (tmp_path / "finetune_log" / "finetune.svg").read_text()
    assert logged != a.plot("finetune").svg() and "nats (log scale)" in logged
    # Its cells in two significant digits, as the log scale tells them apart (a coloured 4.1e-05 read "0.000").
    for v in np.concatenate([np.ravel(a.decomposition["js_temperature"]), np.ravel(a.decomposition["js_drift"])]):
        assert f">{float(v):#.2g}<" in logged, v
    assert a.plot("fine-tune").svg() == a.plot("finetune").svg()  # as the tab is spelt
    assert a.plot("fine-tune", log=True).svg() == logged
    with pytest.raises(TypeError, match=r"plot\('finetune_loss'\) takes no keyword log \(its keywords: no_titles, text_scale\)"):
        a.plot("finetune_loss", log=True)  # drawn on a linear scale whatever log said
    # The base's lens is the base model's own: the same numbers as loading the base alone.
    alone = ssaviz.load(base).analyze(JOBS, compare=None)  # no temperatures: against tau = 1 it would be itself
    np.testing.assert_array_equal(a.lens_loss_base, alone.lens_loss)
    np.testing.assert_array_equal(a.dla_base, alone.dla)
    np.testing.assert_array_equal(a.dla_mlp_base, alone.dla_mlp)
    assert np.abs(a.lens_loss_base - a.lens_loss).max() > 1e-3, "the base is its own model"
    # The base's QK spectrum is the base's own; how far each head's weights moved, in metrics and decomposition alike.
    for key in ("qk_opnorm", "qk_eig_mean", "qk_eig_var"):
        np.testing.assert_array_equal(a.metrics[key + "_base"], alone.metrics[key], err_msg=key)
    moved = a.decomposition["weights"]
    for part in "qkvo":
        np.testing.assert_array_equal(a.metrics["weights_" + part], moved[part], err_msg=part)
        assert moved[part].shape == (a.n_layer, a.n_head) and (moved[part] > 0).all(), part
    assert moved["mlp"].shape == (a.n_layer,) and moved["embeddings"] > 0
    assert moved["norm_attention"].shape == (a.n_layer,) and np.isfinite(moved["norm_final"])
    # A side's keys as heads.csv names them read the same arrays (entropy_tau1 was a KeyError).
    np.testing.assert_array_equal(a.metrics["entropy_tau1"], a.metrics["entropy_compare"])
    assert "js_divergence_tau1" not in a.metrics and "entropy_twin" not in a.metrics
    # The other sides' lens runs on first use with the Model's comparison as it is: after a later
    # analysis with another, the error names both as metrics.json's comparison_kind does.
    fresh = m.analyze(JOBS, base=base)
    m.analyze(JOBS)
    with pytest.raises(ValueError, match=r"^this analysis compared with base and the model has since analysed with tau1 \(a later analysis\)"):
        fresh.dla_base
    # analyze(lens=True) runs the three sides' lens at once, as Run.analyze(lens=True) does (analyze had no lens keyword).
    eager = m.analyze(JOBS, base=base, lens=True)
    assert sorted(eager.__dict__["_lens"]) == ["base", "compare", "ssa"]
    np.testing.assert_array_equal(eager.lens_loss_base, a.lens_loss_base)
    np.testing.assert_array_equal(eager.dla_compare, a.dla_compare)
    with pytest.raises(ValueError, match=r"^analyze\(\): lens=True runs the model as loaded: not with ablate=$"):
        m.analyze(JOBS, lens=True, ablate="0:0")
    # The lens as figures: the files export --lens writes, SSA - base among them.
    a.export(tmp_path / "lens", formats=["svg"], lens=True)
    for name, figure in (("ssa", "lens"), ("compare", "lens_tau1"), ("tau1", "lens_tau1"), ("base", "lens_base"), ("diff", "lens_diff"),
                         ("base_diff", "lens_diff_base"), ("drift", "lens_diff_drift")):
        assert a.lens_grid(map=name).svg() == (tmp_path / "lens" / (figure + ".svg")).read_text(), name
    # The attribution's figures too, as plot()s (only export(lens=True) drew them).
    for name, figure, flags in (("dla_bars", "dla_bars", {}), ("dla_layers", "dla_layers", {}), ("dla_heads", "dla_heads", {}),
                                ("dla_heads", "dla_heads_tau1", {"side": "compare"}), ("dla_heads", "dla_heads_base", {"side": "base"}),
                                ("dla_bars", "dla_bars", {"position": a.n_tokens - 2}), ("dla_heads_change", "dla_heads_change", {})):
        assert a.plot(name, **flags).svg() == (tmp_path / "lens" / (figure + ".svg")).read_text(), (name, flags)
    # For a paper's column, without titles and with larger text: the same files as the export's.
    a.export(tmp_path / "lens_paper", formats=["svg"], lens=True, no_titles=True, text_scale=2)
    assert a.lens_grid(map="base_diff", no_titles=True, text_scale=2).svg() == (tmp_path / "lens_paper" / "lens_diff_base.svg").read_text()
    for name, flags in (("dla_layers", {}), ("dla_heads", {"side": "base"})):
        figure = name + ("_base" if flags else "")
        assert a.plot(name, no_titles=True, text_scale=2, **flags).svg() == (tmp_path / "lens_paper" / (figure + ".svg")).read_text(), name
    # A position as a.dla's last axis and attribute() count it: the one that predicts the token after it.
    third = a.plot("dla_bars", position=3).svg()
    assert "token 4 " in third and third != (tmp_path / "lens" / "dla_bars.svg").read_text()
    # export(dla_position=) draws the files at that position, as `export --dla-position` does.
    a.export(tmp_path / "lens3", formats=["svg"], lens=True, dla_position=3)
    assert (tmp_path / "lens3" / "dla_bars.svg").read_text() == third
    assert (tmp_path / "lens3" / "dla_layers.svg").read_text() == a.plot("dla_layers", position=3).svg()
    with pytest.raises(ValueError, match=rf"^dla_position 99 is out of range: 0 to {a.n_tokens - 2}, the positions that predict"):
        a.export(tmp_path / "lens4", formats=["svg"], lens=True, dla_position=99)
    with pytest.raises(ValueError, match=r"^dla_position picks the token .*: it needs lens=True$"):
        a.export(tmp_path / "lens4", formats=["svg"], dla_position=1)
    for odd in ([1], "1", 1.0, True):  # a position as plot(position=) takes it ([1] was taken as 1)
        with pytest.raises(ssaviz.ArgumentTypeError, match=r"dla_position must be an integer"):
            a.export(tmp_path / "lens4", formats=["svg"], lens=True, dla_position=odd)
    assert not (tmp_path / "lens4").exists()
    assert a.plot("dla_layers", position=-2).svg() == a.plot("dla_layers", position=a.n_tokens - 3).svg()
    assert "token 1 " in a.plot("dla_bars", position=0).svg()
    for bad in (a.n_tokens - 1, -a.n_tokens, 99):
        with pytest.raises(ValueError, match=rf"position {bad} is out of range: 0 to {a.n_tokens - 2}, the positions that predict"):
            a.plot("dla_layers", position=bad)
    with pytest.raises(TypeError, match=r"plot\('dla_bars'\) takes no keyword side \(its keywords: position, target, no_titles, text_scale\)"):
        a.plot("dla_bars", side="base")
    # target= / dla_target=: whose logit the bars split, as the Lens tab's Attribute and --dla-target.
    # SSA's top prediction, by default at the last token (what comes after the text): dla_at.json's
    # parts are attribute()'s of that token on every side (1e-5), the figures plot()'s.
    a.export(tmp_path / "lens_top", formats=["svg", "json"], lens=True, dla_target="top")
    at = json.loads((tmp_path / "lens_top" / "dla_at.json").read_text())
    assert at["position"] == a.n_tokens - 1 and at["target"] == "top" and at["versus"] is None
    assert at["attributed"]["piece"] == a.lens_top(a.n_layer, a.n_tokens - 1, k=1)[0][0]
    def parts(side):  # dla_at.json's side, or attribute()'s dict: heads, MLPs, embeddings, biases
        return np.concatenate([np.ravel(side["heads"]), side["mlp"], [side["embed"], side["const"]]])
    for side, name in zip(at["sides"], ("ssa", "compare", "base")):
        attributed = a.attribute(a.n_tokens - 1, at["attributed"]["id"], side=name)
        np.testing.assert_allclose(parts(side), parts(attributed), atol=1e-5, err_msg=name)
        # The logit they sum to, as dla_at.json's (the parts' float32 sum within its rounding).
        assert abs(attributed["logit"] - side["logit"]) <= 1e-5 * max(1, abs(side["logit"])), name
        assert abs(float(np.sum(parts(attributed), dtype=np.float64)) - attributed["logit"]) <= 1e-4 * max(1, abs(attributed["logit"])), name
    assert (tmp_path / "lens_top" / "dla_bars.svg").read_text() == a.plot("dla_bars", target="top").svg()
    assert (tmp_path / "lens_top" / "dla_layers.svg").read_text() == a.plot("dla_layers", target="top", position=-1).svg()
    assert "top prediction" in a.plot("dla_bars", target="top", position=3).svg()
    # The next token against SSA's other: the difference of the two tokens' attribute() parts.
    a.export(tmp_path / "lens_versus", formats=["json"], lens=True, dla_target="next-against-other", dla_position=3)
    versus = json.loads((tmp_path / "lens_versus" / "dla_at.json").read_text())
    assert versus["attributed"]["id"] == a.ids[4] and versus["versus"]["id"] != a.ids[4]
    for side, name in zip(versus["sides"], ("ssa", "compare", "base")):
        want = parts(a.attribute(3, versus["attributed"]["id"], side=name)) - parts(a.attribute(3, versus["versus"]["id"], side=name))
        np.testing.assert_allclose(parts(side), want, atol=1e-4, err_msg=name)
    assert "logit difference" in a.plot("dla_layers", target="next-against-other", position=3).svg()
    with pytest.raises(ValueError, match=r"target 'second' is not one of next, top, next-against-other"):
        a.plot("dla_bars", target="second")
    with pytest.raises(ValueError, match=r"dla_target 'second' is not one of next, top, next-against-other"):
        a.export(tmp_path / "lens5", formats=["json"], lens=True, dla_target="second")
    with pytest.raises(ValueError, match=rf"position {a.n_tokens} is out of range: 0 to {a.n_tokens - 1}, the text's positions"):
        a.plot("dla_bars", target="top", position=a.n_tokens)
    # lens_top.json names each piece as lens_top() and predictions() do: as it would continue the
    # text, its leading space kept (SentencePiece's ' be' was 'be' in the file).
    a.export(tmp_path / "lens_json", formats=["json"], lens=True)
    spaced = 0
    for side, suffix in (("ssa", ""), ("compare", "_tau1"), ("base", "_base")):
        top = json.loads((tmp_path / "lens_json" / f"lens_top{suffix}.json").read_text())["top"]
        for layer in (0, a.n_layer):
            for position in range(a.n_tokens):
                want = [(e["piece"], e["p"]) for e in top[layer][position]]
                got = a.lens_top(layer, position, k=len(want), side=side)
                assert [p for p, _ in got] == [p for p, _ in want], (side, layer, position)
                spaced += sum(p.startswith(" ") for p, _ in want)
    assert spaced > 0
    plain = m.analyze(JOBS)
    assert plain.lens_loss_base is None and plain.dla_base is None  # as loss_base: it raised
    with pytest.raises(ValueError, match="map 'base_diff': the analysis has no base"):
        plain.lens_grid(map="base_diff")
    assert plain.decomposition is None and plain.loss_base is None and plain.comparison_kind == "tau1"
    with pytest.raises(ValueError, match="map 'base_diff': the analysis has no base"):
        plain.heads_grid(map="base_diff")
    with pytest.raises(ValueError, match="plot 'finetune': the analysis has no base"):
        plain.plot("finetune")
    one = m.analyze("a", base=base)  # one token: no next token's loss to split (the figure read "nan")
    assert one.n_tokens == 1
    for name in ("finetune", "finetune_loss"):
        with pytest.raises(ValueError, match=f"plot '{name}': what fine-tuning changed needs 2 tokens or more"):
            one.plot(name)
    for by in ("js_total", "js_drift", "loss_base"):  # js_total and js_drift drew n/a everywhere
        with pytest.raises(ValueError, match=f"highlight by {by}: the analysis has no base"):
            plain.highlight(by=by)
    with pytest.raises(ValueError, match="base= goes with"):
        m.analyze(JOBS, compare="local", base=base)


def test_folders_whose_names_are_not_utf8(tmp_path):
    """A folder name is bytes: one that is not UTF-8 (str from os.fsdecode, with surrogates) opens,
    compares, exports, saves, runs and batches as any other, and comes back as the same str."""
    root = os.fsdecode(os.fsencode(str(tmp_path)) + b"/x\xff")
    ft, base, run = root + "/ft", root + "/ft/base", root + "/run"
    common = ["--family", "pythia", "--layout", "lit", "--layers", "2", "--heads", "2", "--embd", "32"]
    run_cli("init-random", "--out", ft, *common, "--query-form", "exp_exp,none", "--seed", "1")
    run_cli("init-random", "--out", base, *common, "--query-form", "none", "--seed", "2")
    os.makedirs(run)
    for f in ("lit_config.json", "vocab.json", "merges.txt"):
        with open(ft + "/" + f, "rb") as src, open(run + "/" + f, "wb") as dst:
            dst.write(src.read())
    os.link(ft + "/lit_model.pth", run + "/iter-000100-ckpt.pth")

    m = ssaviz.load(ft)
    assert m.path == ft
    assert m.info["dir"] == os.fsencode(ft).decode("utf-8", "replace")  # JSON: U+FFFD for the byte
    a = m.analyze("The cat sat on the mat.", compare="base")
    assert set(a.decomposition) >= {"js_total", "js_temperature", "js_drift"}
    assert m.analyze("The cat sat.", compare=ssaviz.load(base)).ids == m.analyze("The cat sat.", compare=base).ids
    assert a.export(root + "/out", formats=["json"]) == root + "/out"
    assert sorted(os.listdir(root + "/out")) == ["metrics.json", "tokens.json"]
    figure = root + "/finetune.svg"
    assert a.plot("finetune").save(figure) == figure and os.path.getsize(figure) > 1000
    # A figure replaces a link at its path, never writing through it.
    with open(root + "/kept.txt", "w") as f:
        f.write("kept")
    os.symlink(root + "/kept.txt", root + "/link.svg")
    a.plot("finetune").save(root + "/link.svg")
    assert not os.path.islink(root + "/link.svg") and open(root + "/kept.txt").read() == "kept"

    r = ssaviz.load_run(run)
    assert r.path == run and r.checkpoints == [run + "/iter-000100-ckpt.pth"]
    assert list(r.analyze("The cat sat.").steps) == [100]
    assert len(r.export("The cat sat.", root + "/run-out", steps="all")["steps"]) == 1
    assert os.path.isdir(root + "/run-out/step-000100")
    summary = ssaviz.export_batch(["one text", "two texts"], root + "/batch", model=ft, compare=base, formats=["json"])
    assert len(summary["texts"]) == 2 and summary["failed"] == []


def test_a_vocabulary_smaller_than_the_top_k(tmp_path):
    """The graph model's vocabulary is 8 pieces, fewer than the 10 predictions a position keeps:
    top_ids is [T, 8] (it was strided by 10: rows shifted, predictions() refused) and predictions()
    gives the same top piece as the lens's last layer."""
    m = ssaviz.load(require(os.path.join(SOURCE, "assets", "models", "graph", "ssa")))
    a = m.analyze("ABCDEFAB")
    assert a.top_ids.shape == (a.n_tokens, 8) and a.top_probs.shape == (a.n_tokens, 8)
    np.testing.assert_allclose(a.top_probs.sum(axis=1), 1.0, atol=1e-5)  # the whole vocabulary
    for position in (0, 1, -1):
        got = a.predictions(position, k=5)
        assert got[0][0] == a.lens_top(a.n_layer, position, k=1)[0][0]  # the same top piece (rows were shifted)
        np.testing.assert_allclose([p for _, p in got], a.top_probs[position][:5], atol=0)
    with pytest.raises(ValueError, match="k must be from 1 to 8"):
        a.predictions(0, k=9)
    assert len(a.predictions(-1)) == 8  # the default k: 10, or the whole vocabulary when smaller (it was refused)
    # compare="none" (a.compare's own spelling) is no way around the export's refusal.
    with pytest.raises(ValueError, match="compare=None: an export writes a comparison"):
        ssaviz.export_batch(["ABCD"], tmp_path / "batch", model=m, compare="none")
    assert not (tmp_path / "batch").exists()


def test_rank_heads_is_each_heads_what_if_and_the_command_lines(tmp_path, capsys):
    """Each head's temperatures' part of the loss: the loss with that head's what-if (ablate="L:H"), minus
    the analysis's loss; export(rank_heads=True) writes the same numbers, as `ssaviz export --rank-heads`."""
    m = ssaviz.load(require(ENGLISH))
    a = m.analyze(JOBS)
    ranked = a.rank_heads()
    L, H = a.tau_q.shape[:2]
    # Its progress on sys.stderr (a notebook shows it), head by head; none when asked for none.
    said = capsys.readouterr().err
    assert f"rank_heads: 1/{L * H} heads, L0 H0" in said and said.endswith(f"rank_heads: {L * H}/{L * H} heads, L{L - 1} H{H - 1}   \n")
    quiet = m.analyze(JOBS).rank_heads(progress=False)
    assert capsys.readouterr().err == "" and np.array_equal(quiet["part"], ranked["part"])
    assert ranked["part"].shape == (L, H) and ranked["mean_loss"].shape == (L, H) and ranked["what_ifs"] == ""
    assert abs(ranked["baseline"] - float(np.mean(a.loss, dtype=np.float64))) < 1e-5
    for layer, head in ((0, 0), (L - 1, H - 1)):
        alone = float(np.mean(m.analyze(JOBS, ablate=f"{layer}:{head}").loss, dtype=np.float64))
        assert abs(ranked["mean_loss"][layer, head] - alone) < 1e-5, (layer, head)
        assert abs(ranked["part"][layer, head] - (ranked["baseline"] - alone)) < 1e-5, (layer, head)  # below 0: they lowered it
    # Token by token: that what-if's loss against the analysis's, token t's at t - 1 (as loss).
    by_token = a.loss - m.analyze(JOBS, ablate=f"{L - 1}:{H - 1}").loss
    assert ranked["part_tokens"].shape == (L, H, len(a.loss)) and np.abs(ranked["part_tokens"][L - 1, H - 1] - by_token).max() < 1e-5
    assert np.ptp(ranked["part"]) > 1e-4, "the heads differ"
    for key, alone in (("part_tau_q", "q"), ("part_tau_v", "v")):  # a head's part, its tau_q's and its tau_v's one at a time
        loss = float(np.mean(m.analyze(JOBS, ablate=f"1:2={alone}").loss, dtype=np.float64))
        assert abs(ranked[key][1, 2] - (ranked["baseline"] - loss)) < 1e-5, key
    assert a.rank_heads() is ranked  # kept
    # On top of the analysis's own what-ifs, whatever the model analysed since.
    on_top = m.analyze(JOBS, ablate="1:0").rank_heads()
    assert on_top["what_ifs"] == "1:0" and np.isnan(on_top["part"][1, 0]) and abs(on_top["mean_loss"][1, 0] - on_top["baseline"]) < 1e-6
    a.export(tmp_path / "x", formats=["json"], rank_heads=True)
    written = json.load(open(tmp_path / "x" / "head_impacts.json"))
    assert np.allclose(np.array(written["part"], dtype=np.float64), ranked["part"], atol=1e-7, rtol=0)
    assert ranked["part_drift"] is None and ranked["part_drift_all"] is None and written["drift"] is None  # no base
    # Beside a base, the drift's parts too. With every head at tau = 1 and every weight from the
    # (vanilla) base, the model is the base: part_drift_all is the loss minus the base's.
    base = os.path.join(os.path.dirname(ENGLISH), "vanilla")
    L_ = ",".join(f"{layer}:*" for layer in range(L))
    vanilla = m.analyze(JOBS, base=base, ablate=L_)
    drift = vanilla.rank_heads(progress=False)
    assert drift["part_drift"].shape == (L, H) and drift["part_drift_mlp"].shape == (L,)
    assert abs(drift["part_drift_all"] - (drift["baseline"] - float(np.mean(vanilla.loss_base, dtype=np.float64)))) < 2e-5
    assert np.all(np.isfinite(drift["part_drift"])) and np.ptp(drift["part_drift"]) > 1e-4 and np.isfinite(drift["part_drift_embeddings"])
    assert drift["part_drift_attention"].shape == (L,) and abs(drift["drift_baseline"] - drift["baseline"]) < 1e-5
    assert np.abs(drift["part_drift_all_tokens"] - (vanilla.loss - vanilla.loss_base)).max() < 1e-4  # token by token
    assert drift["part_drift_mlp_tokens"].shape == (L, len(vanilla.loss)) and np.isnan(drift["part_tokens"]).all()  # all at tau = 1 already
    assert np.abs(drift["part_drift_tokens"].mean(-1, dtype=np.float64) - drift["part_drift"]).max() < 1e-5
    # Along the layers, each part on top of those before it, one way and the other: each adds up to every weight's.
    assert drift["part_drift_path_names"][:3] == ["embeddings", "L0 attention", "L0 MLP"] and drift["part_drift_path"].shape == (1 + 2 * L,)
    for way in ("part_drift_path", "part_drift_path_top_down"):
        assert abs(float(drift[way].sum(dtype=np.float64)) - drift["part_drift_all"]) < 1e-5, way
        assert np.abs(drift[way + "_tokens"].sum(0, dtype=np.float64) - drift["part_drift_all_tokens"]).max() < 1e-4, way
    assert not np.array_equal(drift["part_drift_path"], drift["part_drift_path_top_down"])
    # Against the base the analysis was made with, whatever the model analysed since (another
    # comparison left it without a base, and every drift part came back None).
    beside = m.analyze(JOBS, base=base)
    m.analyze(JOBS, compare="local")
    later = beside.rank_heads(progress=False)
    assert later["part_drift"] is not None and abs(later["drift_baseline"] - float(np.mean(beside.loss, dtype=np.float64))) < 1e-5
    # rank_heads()'s figures as plot()s: the bytes export(rank_heads=True) draws, from the measures kept.
    beside.export(tmp_path / "ranked", formats=["svg"], rank_heads=True)
    for name in ("head_impacts", "head_impacts_tokens", "head_impacts_drift_tokens"):
        assert beside.plot(name).svg() == (tmp_path / "ranked" / (name + ".svg")).read_text(), name
    beside.export(tmp_path / "ranked_paper", formats=["svg"], rank_heads=True, no_titles=True, text_scale=1.5)
    for name in ("head_impacts", "head_impacts_tokens", "head_impacts_drift_tokens"):
        assert beside.plot(name, no_titles=True, text_scale=1.5).svg() == (tmp_path / "ranked_paper" / (name + ".svg")).read_text(), name
    with pytest.raises(ValueError, match=r"^plot\('head_impacts_drift_tokens'\): the drift's parts need a base"):
        a.plot("head_impacts_drift_tokens")
    with pytest.raises(ValueError, match=r"every head is at tau = 1 by the what-ifs already"):
        vanilla.plot("head_impacts_tokens")
    assert not (tmp_path / "ranked_vanilla").exists()
    vanilla.export(tmp_path / "ranked_vanilla", formats=["svg"], rank_heads=True)
    assert not (tmp_path / "ranked_vanilla" / "head_impacts_tokens.svg").exists()
    with pytest.raises(TypeError, match=r"plot\('head_impacts'\) takes no keyword log \(its keywords: no_titles, text_scale\)"):
        a.plot("head_impacts", log=True)
    with pytest.raises(ValueError, match=r"export_batch\(\): not with rank_heads="):
        ssaviz.export_batch(["a text", "another"], tmp_path / "b", model=m, formats=["json"], rank_heads=True)
    assert not (tmp_path / "b").exists()


def test_ctrl_c_stops_a_ranking_between_heads(tmp_path):
    """Ctrl+C (SIGINT) stops rank_heads() and export(rank_heads=True) between heads with
    KeyboardInterrupt, well before the last head, and the export writes nothing (it ranked every
    head first). 144 heads at three analyses each of three times JOBS took 7 s here (a 2-core AMD
    EPYC); the signal comes at 0.5 s."""
    out = tmp_path / "stopped"
    code = f"""
import os, signal, threading, time, ssaviz
a = ssaviz.load({DEFAULT!r}).analyze({JOBS * 3!r})
for name, call in (("rank_heads", lambda: a.rank_heads(progress=False)),
                   ("export", lambda: a.export({str(out)!r}, formats=["json"], rank_heads=True))):
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    try:
        call()
        print(name, "finished")
    except KeyboardInterrupt:
        print(name, "stopped after %.1f s" % (time.monotonic() - start))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    for name, line in zip(("rank_heads", "export"), lines):
        assert line.startswith(name + " stopped after "), done.stdout
        assert float(line.split()[-2]) < 3.0, done.stdout
    assert not out.exists() or not any(out.iterdir()), list(out.iterdir())
