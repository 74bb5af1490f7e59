"""Bad arguments raise ValueError or FileNotFoundError with the command line's one-line message
(ArgumentTypeError, a TypeError and a ValueError, for a wrong type), never a crash: missing paths,
bad flag values, bad texts, out-of-range heads, a closed model, an analysis whose model is gone."""

import gc
import json
import os
import pathlib
import pickle
import re
import shutil
import struct

import numpy as np
import pytest

import ssaviz
from conftest import ENGLISH, SMALL, SMALL_TWIN, cli_error, require, run_cli

TEXT = "Hello there, world"
LONG = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen"


@pytest.fixture(scope="module")
def small():
    return ssaviz.load(require(SMALL))


def keyword_spelling(message):
    """The command line's message as Python says it: a leading flag as its keyword ("--sink-eps 2"
    reads "sink_eps 2")."""
    flag = re.match(r"--([a-z0-9-]+)", message)
    return flag.group(1).replace("-", "_") + message[flag.end():] if flag else message


def in_python_words(message):
    """The command line's advice as Python gives it: its keywords for the flags it names."""
    return message.replace("pass --truncate", "pass truncate=True").replace("use --device cpu or auto", 'use device="cpu" or "auto"')


def raises_like_cli(exc, call, *cli_args):
    with pytest.raises(exc) as info:
        call()
    assert str(info.value) == in_python_words(keyword_spelling(cli_error(*cli_args)))
    assert "--" not in str(info.value), str(info.value)
    return info.value


def test_missing_model_is_file_not_found():
    raises_like_cli(FileNotFoundError, lambda: ssaviz.load("/nonexistent/model"), "info", "--model", "/nonexistent/model")
    # A NUL ends a path for the system: named, not cut there (it opened what came before it).
    with pytest.raises(ValueError, match=r"^load\(\): path holds a NUL character"):
        ssaviz.load(SMALL + "\0x")
    # An empty path (an unset variable) is named: it opened the bundled model, as None does.
    with pytest.raises(ValueError, match=r"^load\(\): path is empty"):
        ssaviz.load("")
    with pytest.raises(ValueError, match=r"^load\(\): config= holds a NUL character"):
        ssaviz.load(SMALL, config=SMALL + "/config.json\0x")


def test_bad_load_flags(small, tmp_path):
    raises_like_cli(ValueError, lambda: ssaviz.load(SMALL, n_head="x"), "info", "--model", SMALL, "--n-head", "x")
    raises_like_cli(ValueError, lambda: ssaviz.load(SMALL, device="gpu"), "info", "--model", SMALL, "--device", "gpu")
    raises_like_cli(ValueError, lambda: ssaviz.load(SMALL, device="cuda:x"), "info", "--model", SMALL, "--device", "cuda:x")
    # A GPU past the machine's last (or any GPU, on a machine without one): the same error as the command line's.
    raises_like_cli(ValueError, lambda: ssaviz.load(SMALL, device="cuda:1023"), "info", "--model", SMALL, "--device", "cuda:1023")
    raises_like_cli(ValueError, lambda: ssaviz.load(SMALL, query_form="sideways"), "info", "--model", SMALL, "--query-form", "sideways")
    raises_like_cli(ValueError, lambda: ssaviz.load(SMALL, dtype="f64"), "info", "--model", SMALL, "--dtype", "f64")
    with pytest.raises(ValueError, match=r"load\(\) takes no keyword colour \(its keywords: .*dtype"):
        ssaviz.load(SMALL, colour="red")
    # A keyword a call does not take is a TypeError, as Python's own calls say it (and a ValueError, as it was).
    with pytest.raises(TypeError, match=r"load\(\) takes no keyword colour") as raised:
        ssaviz.load(SMALL, colour="red")
    assert type(raised.value) is ssaviz.ArgumentTypeError and type(raised.value).__module__ == "ssaviz"
    assert pickle.loads(pickle.dumps(raised.value)).args == raised.value.args  # as a Dask worker sends it back
    with pytest.raises(ValueError, match="takes no keyword text "):
        ssaviz.load(SMALL, text="hi")
    # The command line's --example is ssaviz.examples() here: said, not taken and ignored.
    with pytest.raises(ValueError, match=r"load\(\) takes no keyword example .*; ssaviz.examples\(\) gives each bundled example"):
        ssaviz.load(SMALL, example="english")
    with pytest.raises(ValueError, match=r"export\(\) takes no keyword example "):
        small.analyze("a b").export(str(tmp_path / "x"), example="english")
    assert not (tmp_path / "x").exists()


def test_bad_texts(small, tmp_path):
    raises_like_cli(ValueError, lambda: small.analyze(""), "tokenize", "--model", SMALL, "--text", "")
    with pytest.raises(ValueError) as info:  # the command line's words, its advice in Python's spelling
        small.analyze(LONG)
    assert str(info.value) == in_python_words(cli_error("tokenize", "--model", SMALL, "--text", LONG))
    assert str(info.value).endswith("; pass truncate=True to run it")
    # The same bytes as --text (as --text-file, the command line names the file).
    raises_like_cli(ValueError, lambda: small.analyze(b"ok \xff then"), "tokenize", "--model", SMALL, "--text", os.fsdecode(b"ok \xff then"))
    assert small.analyze(LONG, truncate=True).n_tokens == 16
    with pytest.raises(ValueError, match="not in the vocabulary"):
        small.analyze([1, 2, 999999])
    with pytest.raises(ValueError, match="ids are empty"):
        small.analyze([])


def test_bad_comparisons_and_ablations(small, tmp_path):
    out = str(tmp_path / "x")
    raises_like_cli(ValueError, lambda: small.analyze(TEXT, ablate="9:0"), "export", "--model", SMALL, "--text", TEXT, "--out", out,
                    "--ablate", "9:0")
    raises_like_cli(ValueError, lambda: small.analyze(TEXT, ablate="0:0=x0.5q"), "export", "--model", SMALL, "--text", TEXT, "--out", out,
                    "--ablate", "0:0=x0.5q")
    raises_like_cli(FileNotFoundError, lambda: small.analyze(TEXT, compare="/nonexistent/twin"), "export", "--model", SMALL,
                    "--text", TEXT, "--out", out, "--compare", "/nonexistent/twin")
    # A twin that fails to open leaves no twin behind.
    assert small.analyze(TEXT, compare=SMALL_TWIN).comparison_kind == "twin"
    with pytest.raises(FileNotFoundError):
        small.analyze(TEXT, compare="/nonexistent/twin")
    assert small.analyze(TEXT).comparison_kind == "tau1"
    with pytest.raises(ValueError, match="compare holds a NUL character"):
        small.analyze(TEXT, compare=SMALL_TWIN + "\0x")


def test_bad_export_and_figure_flags(small, tmp_path):
    a = small.analyze(TEXT)
    out = str(tmp_path / "out")
    common = ("export", "--model", SMALL, "--text", TEXT, "--out", out)
    raises_like_cli(ValueError, lambda: a.export(out, layers=[7]), *common, "--layers", "7")
    raises_like_cli(ValueError, lambda: a.export(out, heads="0,x"), *common, "--heads", "0,x")
    raises_like_cli(ValueError, lambda: a.export(out, formats=["npy", "gif"]), *common, "--format", "npy,gif")
    raises_like_cli(ValueError, lambda: a.export(out, sink_eps=2), *common, "--sink-eps", "2")
    raises_like_cli(ValueError, lambda: a.heatmap(0, 0, colormap="rainbow"), *common, "--colormap", "rainbow")
    raises_like_cli(ValueError, lambda: a.heatmap(0, 0, size=5), *common, "--size", "5")
    raises_like_cli(ValueError, lambda: a.heatmap(0, 0, text_scale=4), *common, "--text-scale", "4")
    raises_like_cli(ValueError, lambda: a.highlight(by="warmth"), *common, "--highlight", "warmth")
    raises_like_cli(ValueError, lambda: a.highlight(scope=(0, 9)), *common, "--highlight-scope", "0,9")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    raises_like_cli(ValueError, lambda: a.export(a_file), "export", "--model", SMALL, "--text", TEXT, "--out", str(a_file))
    with pytest.raises(ValueError, match="export\\(\\) takes no keyword compare \\(its keywords: layers, heads, formats, "):
        a.export(out, compare="local")
    # The command line's --format is formats= here: format= was taken and dropped (every default format written).
    for call in (lambda: a.export(tmp_path / "fmt", format="json"), lambda: ssaviz.export_batch(["x"], tmp_path / "fmt", model=small, format="json")):
        with pytest.raises(TypeError, match=r"takes no keyword format: formats= names them"):
            call()
    assert not (tmp_path / "fmt").exists()
    # formats= in its own words: a set, an empty list; an analysis's export takes no base= (nor lists it).
    with pytest.raises(TypeError, match=r"^export\(\): formats must be a list of json, npy, csv, png, svg, html, not set$"):
        a.export(tmp_path / "fmt", formats={"json"})
    with pytest.raises(ValueError, match=r"^export\(\): formats is empty"):
        a.export(tmp_path / "fmt", formats=[])
    with pytest.raises(TypeError) as unknown:
        a.export(tmp_path / "fmt", bogus=1)
    assert "dla_target" in str(unknown.value) and ", base," not in str(unknown.value), str(unknown.value)
    # Heatmaps past what a figure may be: a value (it was an OSError), in Python's words.
    with pytest.raises(ValueError, match=r"^size 8192 at png_scale=4 draws heatmaps past .*: a smaller size= or png_scale=$"):
        a.export(tmp_path / "fmt", formats=["png"], size=8192, png_scale=4)
    assert not (tmp_path / "fmt").exists()
    # How a model opens and what a run is are load()'s and load_run()'s: an export took and ignored them.
    for keyword in ("config", "tokenizer", "run", "compare_run", "steps"):
        with pytest.raises(ValueError, match=f"export\\(\\) takes no keyword {keyword} "):
            a.export(tmp_path / keyword, **{keyword: str(tmp_path)})
        with pytest.raises(ValueError, match=f"heatmap\\(\\) takes no keyword {keyword} "):
            a.heatmap(0, 0, **{keyword: str(tmp_path)})
    for keyword in ("format", "layers", "heads", "maps", "lens"):  # an export's, not a figure's look
        with pytest.raises(ValueError, match=f"heatmap\\(\\) takes no keyword {keyword} "):
            a.heatmap(0, 0, **{keyword: "1"})
        assert not (tmp_path / keyword).exists()
    # A switch is True or False (or 1 / 0, "true" / "false"): an empty list or string read as "on",
    # running the lens or the whole ranking.
    for call, name in ((lambda v: a.export(tmp_path / "sw", lens=v), "lens"), (lambda v: a.export(tmp_path / "sw", rank_heads=v), "rank_heads"),
                       (lambda v: ssaviz.export_batch(["a b"], tmp_path / "sw", model=small, lens=v), "lens")):
        for value, shown in (([], "''"), ("", "''"), ((), "''"), (2, "'2'"), ("yes", "'yes'")):
            with pytest.raises(ValueError, match=f"{name} is a switch: {shown} is not true or false"):
                call(value)
    assert not (tmp_path / "sw").exists()
    # What picks the attribution, without the lens, is refused (dla_target= was taken and ignored), and is a string.
    with pytest.raises(ValueError, match=r"dla_target picks whose logit .*: it needs lens=True"):
        a.export(tmp_path / "dla", dla_target="top")
    with pytest.raises(ValueError, match=r"dla_target picks whose logit .*: it needs lens=True"):
        ssaviz.export_batch(["a b"], tmp_path / "dla", model=small, dla_target="top")
    with pytest.raises(ssaviz.ArgumentTypeError, match=r"^export\(\): dla_target must be one of next, top, next-against-other, not int$"):
        a.export(tmp_path / "dla", lens=True, dla_target=3)
    assert not (tmp_path / "dla").exists()
    with pytest.raises(ValueError, match="plot 'pie'"):
        a.plot("pie")
    with pytest.raises(ValueError, match="plot 'pie'"):  # the name first, whatever the keywords
        a.plot("pie", size=64)
    with pytest.raises(ValueError, match="saves as"):
        a.heatmap(0, 0).save(tmp_path / "x.gif")
    # The path as every message shows a caller's text: escaped (an ESC sequence reached the
    # terminal raw) and cut at 200 characters (a 100,000-character path made a message as long).
    for path, scale in (("/tmp/x\x1b[2J\u202e.svg", 2), ("/tmp/x.\x1b[31m", 1), ("/tmp/" + "y" * 100000 + ".txt", 1)):
        with pytest.raises(ValueError) as e:
            a.heatmap(0, 0).save(path, scale=scale)
        assert "\x1b" not in str(e.value) and "\u202e" not in str(e.value) and len(str(e.value)) < 300, str(e.value)[:80]


def test_a_figure_refuses_keywords_it_does_not_draw_with(small):
    """A figure took every export keyword and ignored those it does not draw with (highlight= beside
    by=, a heatmap's temperature_scale=, a plot's colormap= and size=): each is a TypeError naming it
    and listing the figure's own; those it uses still change the figure."""
    a = small.analyze(TEXT)
    refused = [(lambda: a.highlight(highlight="loss"), r"highlight\(\) takes no keyword highlight \(its keywords: temperature_scale, no_titles, "
                                                       r"text_scale\); "
                                                       r"its by= is an export's highlight="),
               (lambda: a.highlight(highlight_scope="0"), r"highlight\(\) takes no keyword highlight_scope .*its scope="),
               (lambda: a.highlight(size=64), r"highlight\(\) takes no keyword size \(its keywords: temperature_scale, no_titles, text_scale\)$"),
               (lambda: a.heatmap(0, 0, temperature_scale="head"), r"heatmap\(\) takes no keyword temperature_scale "
                                                                   r"\(its keywords: colormap, log, size, no_titles, text_scale\)$"),
               (lambda: a.heatmap(0, 0, sink_eps=0.2), r"heatmap\(\) takes no keyword sink_eps "),
               (lambda: a.plot("dilution", colormap="magma", size=64), r"plot\('dilution'\) takes no keyword colormap \(its keywords: no_titles, text_scale\)$"),
               (lambda: a.plot("sink_mass", log=True), r"plot\('sink_mass'\) takes no keyword log \(its keywords: sink_eps, no_titles, text_scale\)$"),
               (lambda: a.heads_grid(sink_eps=0.2), r"heads_grid\(\) takes no keyword sink_eps \(its keywords: colormap, log, no_titles, text_scale\)$"),
               (lambda: a.heads_grid(size=64), r"heads_grid\(\) takes no keyword size ")]
    for call, message in refused:
        with pytest.raises(TypeError, match=message):
            call()
    for keyword, value in (("colormap", "magma"), ("log", True), ("size", 64)):
        assert a.heatmap(0, 0, **{keyword: value}).png() != a.heatmap(0, 0).png(), keyword
    for keyword, value in (("colormap", "magma"), ("log", True)):
        assert a.heads_grid(**{keyword: value}).png() != a.heads_grid().png(), keyword
    assert a.highlight(temperature_scale="head").png() != a.highlight().png()
    assert a.plot("sink_mass", sink_eps=0.05).png() != a.plot("sink_mass").png()


def without_tensors(folder, out, dropped):
    """A copy of an init-random model's weights and tokenizer without its config.json, the tensors
    whose names hold `dropped` left out."""
    os.makedirs(out)
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(folder, name), os.path.join(out, name))
    data = open(os.path.join(folder, "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header, body = json.loads(data[8:8 + n]), data[8 + n:]
    kept, chunks, at = {}, [], 0
    for name, meta in header.items():
        if name == "__metadata__" or dropped not in name:
            if name != "__metadata__":
                begin, end = meta["data_offsets"]
                chunks.append(body[begin:end])
                meta = dict(meta, data_offsets=[at, at + end - begin])
                at += end - begin
            kept[name] = meta
    text = json.dumps(kept).encode()
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))
    return out


def test_the_engines_advice_in_python_words(small, tmp_path):
    """The engine's errors said what to do in the command line's words (pass --truncate, --maps base
    needs a base (--base DIR, or --compare base), links inside --out, pass --heads N, or --config FILE):
    Python's are its keywords, from every call (one function of the engine's, for each kind of error). A float that is a whole number is that number (size=64.0 was refused
    as no heatmap side)."""
    a = small.analyze(TEXT)
    out = tmp_path / "out"
    calls = [
        (lambda: small.generate(LONG, tokens=2), ValueError, r"; pass truncate=True to run it$"),
        (lambda: small.tokenize(LONG), ValueError, r"; pass truncate=True to run it$"),
        (lambda: a.export(tmp_path / "file.txt"), ValueError, r"^out: '.*file\.txt' is a file, not a folder"),
        (lambda: a.export(""), ValueError, r"^out: it is empty: name the folder to write$"),  # it said "--out is empty"
        (lambda: a.export(out, maps="base"), OSError,
         r'^maps base needs a base \(analyze with base=DIR, or compare="base"\); nothing was written$'),
        (lambda: a.export(out, highlight="loss_base"), OSError, r'^highlight loss_base needs a base \(analyze with base=DIR, or compare="base"\)'),
        (lambda: ssaviz.export_batch([TEXT], out, model=small, maps="base_diff"), OSError,
         r'^maps base_diff needs a base \(base=DIR, or compare="base"\); nothing was written$'),
        (lambda: small.analyze(TEXT, compare="base"), ValueError, r"name it with base=DIR$"),
    ]
    (tmp_path / "file.txt").write_text("the user's\n")
    linked = tmp_path / "linked"
    linked.mkdir()
    os.symlink(tmp_path, linked / "heatmaps")
    calls.append((lambda: a.export(linked), OSError, r"is a symbolic link: ssaviz does not write through links inside the out= folder$"))
    model = tmp_path / "model"
    run_cli("init-random", "--out", str(model), "--layers", "2", "--heads", "2", "--embd", "32")
    vanilla = without_tensors(model, tmp_path / "vanilla", "ssa")  # n_embd 32: no head size of 64 to assume
    calls.append((lambda: ssaviz.load(vanilla), ValueError, r"cannot tell n_head .*; pass n_head=N$"))
    ssa = without_tensors(model, tmp_path / "ssa", "no tensor's name")
    calls.append((lambda: ssaviz.load(ssa), ValueError, r'so pass query_form="POSITION,TOKEN\[,COMBINE\]" \(e\.g\. "sigmoid,shared,sum"\)$'))
    lit = tmp_path / "lit"
    run_cli("init-random", "--out", str(lit), "--family", "pythia", "--layout", "lit", "--layers", "1", "--heads", "2", "--embd", "32")
    os.remove(lit / "lit_config.json")
    calls.append((lambda: ssaviz.load(lit), ValueError, r"needs its lit_config.json beside it, or config=FILE "))
    # A base found beside the model that does not fit it (it said "name the fine-tune's own with --base DIR").
    fine_tune = tmp_path / "fine_tune"
    run_cli("init-random", "--out", str(fine_tune), "--layers", "2", "--heads", "2", "--embd", "32")
    run_cli("init-random", "--out", str(fine_tune / "base"), "--layers", "1", "--heads", "2", "--embd", "32")
    calls.append((lambda: ssaviz.load(fine_tune).analyze(TEXT, compare="base"), ValueError,
                  r"\(found beside the model: name the fine-tune's own with base=DIR\)$"))
    for call, exc, message in calls:
        with pytest.raises(exc, match=message) as info:
            call()
        assert "--" not in str(info.value), str(info.value)
    assert not out.exists()
    # What the loader assumed is said in info["notes"] in the same words (it said pass --n-head N).
    wide = tmp_path / "wide"
    run_cli("init-random", "--out", str(wide), "--layers", "1", "--heads", "2", "--embd", "128")
    notes = ssaviz.load(without_tensors(wide, tmp_path / "wide_vanilla", "ssa")).info["notes"]
    assert "n_head 2 assuming GPT-2's head size of 64; pass n_head=N if that is wrong" in notes, notes
    assert a.heatmap(0, 0, size=64.0).png() == a.heatmap(0, 0, size=64).png()
    assert a.plot("sink_mass", sink_eps=np.float32(0.25)).png() == a.plot("sink_mass", sink_eps=0.25).png()
    # numpy's str_ is a str (a text read from an array of texts): it was taken for a 0-d array of ids.
    assert small.analyze(np.array([TEXT])[0]).ids == a.ids
    assert small.analyze(TEXT, truncate=np.bool_(False)).ids == a.ids
    for off in (0, 0.0, "false", np.array(False), np.int64(0)):  # a switch read as the export keywords read one
        assert small.analyze(TEXT, truncate=off).ids == a.ids, off


def test_wrong_types_raise_argument_type_error(small):
    a = small.analyze(TEXT)
    calls = [
        lambda: ssaviz.load(3),
        lambda: ssaviz.load(SMALL, device=None),
        lambda: ssaviz.load(SMALL, n_head={"x": 1}),
        lambda: small.analyze(123),
        lambda: small.analyze(np.array(3)),  # a 0-d array: a bare TypeError ('int' object is not iterable)
        lambda: small.analyze(TEXT, truncate="yes"),
        lambda: small.analyze(TEXT, compare=3.5),
        lambda: small.analyze(TEXT, ablate=7),
        lambda: small.analyze(["a", "b"]),
        lambda: a.attention("0", 0),
        lambda: a.attention(0, 0.0),
        lambda: a.attention(0, 0, side=1),
        lambda: a.predictions(None),
        lambda: a.heatmap(0, 0, size=object()),
        lambda: a.export(None),
        lambda: ssaviz.export_batch("one text", "/tmp/x", model=small),
        lambda: ssaviz.export_batch(["one text"], "/tmp/x", model=3),  # a bare TypeError
        lambda: a.export("/tmp/x", formats=[b"json"]),  # it named format=, the keyword that is refused
    ]
    for call in calls:
        with pytest.raises(ssaviz.ArgumentTypeError) as info:
            call()
        assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
        assert "\n" not in str(info.value)
        assert "format=" not in str(info.value), info.value


def test_out_of_range_heads_and_positions(small):
    a = small.analyze(TEXT)
    with pytest.raises(ValueError, match=r"^layer 2 is out of range \(the model has 2\)$"):
        a.attention(2, 0)
    with pytest.raises(ValueError, match=r"^head -1 is out of range \(the model has 2\)$"):
        a.attention(0, -1)
    with pytest.raises(ValueError, match="out of range"):
        a.heatmap(0, 5)
    with pytest.raises(ValueError, match="side 'both'"):
        a.attention(0, 0, "both")
    with pytest.raises(ValueError, match=r"position 99 is out of range"):
        a.predictions(99)
    with pytest.raises(ValueError, match="k must be from 1 to 10"):
        a.predictions(0, k=11)
    assert len(a.predictions(-1, k=2)) == 2


def test_without_a_comparison(small, tmp_path):
    a = small.analyze(TEXT, compare=None)
    assert a.compare == "none" and a.comparison_kind == "none" and a.loss_compare is None and a.tau_q_compare is None
    assert "js" not in a.metrics and "entropy" in a.metrics
    assert a.lens_loss_compare is None and a.dla_compare is None and a.lens_loss_base is None and a.dla_embed_base is None and a.dla_logit_base is None
    for call in (lambda: a.attention(0, 0, "compare"), lambda: a.heatmap(0, 0, map="diff"), lambda: a.predictions(0, side="compare"),
                 lambda: a.export(tmp_path / "out")):
        with pytest.raises(ValueError, match="no comparison"):
            call()
    assert not (tmp_path / "out").exists()  # it wrote the layer-local comparison it had said was not there
    with pytest.raises(ValueError, match="compare=None: an export writes a comparison"):
        ssaviz.export_batch([TEXT], tmp_path / "batch", model=small, compare=None)


def test_a_nul_or_escape_in_a_name_is_escaped_in_the_message_not_cut_there(small):
    # The engine's messages are C strings: a NUL a user passed ended them ("plot 'dla").
    a = small.analyze(TEXT)
    calls = [(lambda: a.plot("dla\0bars\x1b[2J"), r"^plot 'dla\\x00bars\\x1b\[2J' is not one of "),
             (lambda: a.heatmap(0, 0, map="s\0sa"), r"^map 's\\x00sa' is not one of ssa"),
             (lambda: a.lens_top(0, 0, side="s\0sa"), r"^side 's\\x00sa' is not one of ssa"),
             (lambda: ssaviz.load(SMALL, **{"dty\0pe": "x"}), r"^load\(\) takes no keyword dty\\x00pe \(its keywords: "),
             (lambda: a.heatmap(0, 0, **{"x\0\x1b[31m\x7f\x85\u202e": 1}), r"^heatmap\(\) takes no keyword x\\x00\\x1b\[31m\\x7f\\u0085\\u202e \("),
             (lambda: a.plot("dla_bars", **{"p\0": 1}), r"^plot\('dla_bars'\) takes no keyword p\\x00 \("),
             (lambda: a.plot("sink_mass", **{"\x1b": 1}), r"^plot\('sink_mass'\) takes no keyword \\x1b \("),
             (lambda: a.plot("head_impacts", **{"\x1b": 1}), r"^plot\('head_impacts'\) takes no keyword \\x1b \("),
             # A keyword's value of the wrong type names the keyword escaped (it went out raw before the keyword was checked).
             (lambda: ssaviz.load(SMALL, **{"\x1b[31m\u202e": object()}), r"^load\(\): \\x1b\[31m\\u202e= takes a string, number"),
             (lambda: ssaviz.load(SMALL, **{"\x1b": "a\0"}), r"^load\(\): \\x1b= holds a NUL character")]
    for call, message in calls:
        with pytest.raises(ValueError, match=message) as info:
            call()
        assert not any(c in str(info.value) for c in "\0\x1b\x7f\x85\u202e"), repr(str(info.value))
    # A flag's value is a path or a name: said so, not that it must be a path.
    with pytest.raises(ValueError, match=r"^highlight\(\): highlight= holds a NUL character, which no path or name can$"):
        a.highlight(by="ta\0u")
    # What a message echoes is at most 200 characters (compare="x" * 100000 made one of 200,147).
    for call in (lambda: small.analyze(TEXT, compare="x" * 100000), lambda: ssaviz.load(SMALL, **{"x" * 100000: object()}),
                 lambda: ssaviz.load_run("x" * 100000)):
        with pytest.raises((ValueError, FileNotFoundError)) as info:
            call()
        assert len(str(info.value)) < 1000, len(str(info.value))


def test_plausible_mistakes_are_named(small, tmp_path):
    with pytest.raises(ssaviz.ArgumentTypeError, match="for many texts, analyze each, or export_batch"):
        small.analyze(["one text", "another"])
    with pytest.raises(FileNotFoundError, match="compare='nope' is not one of 'vanilla', .*, and there is no twin folder 'nope'"):
        small.analyze(TEXT, compare="nope")
    assert small.analyze(TEXT, compare="none").compare == "none"  # a.compare's own value is taken back
    # A path is a folder, even one named as a keyword (pathlib.Path("none") ran with no comparison).
    with pytest.raises(FileNotFoundError):
        small.analyze(TEXT, compare=pathlib.Path("none"))
    with pytest.raises(ValueError, match="config.json: not a weights file"):
        ssaviz.load(os.path.join(SMALL, "config.json"))
    # The shape flags beside a config.json that names the shape: unused, and said so (it was silent), as the keyword.
    shaped = ssaviz.load(SMALL, query_form="exp_exp")
    assert any(note.startswith("query_form is not used: ") for note in shaped.info["notes"]), shaped.info["notes"]
    a = small.analyze(TEXT)
    assert a.comparison_kind == "tau1"
    assert np.array_equal(a.attention(0, 1, side="tau1"), a.attention(0, 1, side="compare"))
    with pytest.raises(ValueError, match="not one of ssa, compare$"):
        small.analyze(TEXT, compare="local").attention(0, 0, side="tau1")
    # A position counts from the end when negative, in every accessor that takes one.
    T = a.n_tokens
    assert a.lens_top(1, -1) == a.lens_top(1, T - 1)
    assert np.array_equal(a.attribute(-2, 3)["heads"], a.attribute(T - 2, 3)["heads"])
    with pytest.raises(ValueError, match=f"position {-T - 1} is out of range"):
        a.lens_top(1, -T - 1)
    # attribute()'s token as an odd piece: said in its words (pybind11's signatures, "pass
    # truncate=True" and a bare "text is empty" before).
    for piece, said in (("\udc80", r"the token '\\udc80' is not valid UTF-8 text"), ("\u202e" * 100000, r"is no piece of the vocabulary"),
                        ("", r"the token is an empty piece"), (-1, r"token -1 is not a token id")):
        with pytest.raises(ValueError, match=r"^attribute\(\): .*" + said):
            a.attribute(1, piece)
    # A text with a lone surrogate, said as its character (it was "not valid UTF-8 at byte 3", a byte
    # the caller never had).
    for call, where in ((lambda: small.analyze("ok \udcff"), "analyze"), (lambda: small.tokenize("ok \udcff"), "tokenize")):
        with pytest.raises(ValueError, match=rf"^{where}\(\): text holds a lone surrogate, U\+DCFF at character 3: not Unicode text"):
            call()


def test_a_closed_model_and_analyses_that_outlive_their_model(tmp_path):
    m = ssaviz.load(SMALL)
    a = m.analyze(TEXT)
    lensed = m.analyze(TEXT, lens=True)
    read = m.analyze(TEXT)
    read.dla  # the lens read once: kept with the analysis
    m.close()
    assert m.closed
    # Its lens figures from the lens it keeps (they ran the model again: "the model is closed", bare);
    # attributing a token runs the model, and says so with the call's name.
    for kept in (lensed, read):
        assert kept.lens_grid()._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"
        with pytest.raises(ValueError, match=r"^attribute\(\): the model is closed, and attributing a token runs it"):
            kept.attribute(1, 5)
    assert lensed.plot("dla_heads")._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"  # every side's lens ran with lens=True
    for never_run in (lambda: a.lens_grid(), lambda: read.plot("dla_heads")):  # read.dla ran SSA's alone; dla_heads' scale is every side's
        with pytest.raises(ValueError, match=r"the model is closed, and this analysis's lens was not run before"):
            never_run()
    for call in (lambda: m.analyze(TEXT), lambda: m.generate(TEXT, tokens=2), lambda: m.tokenize(TEXT)):
        with pytest.raises(ValueError, match="^the model is closed$"):
            call()
    m.close()  # twice is fine
    # The analysis keeps its arrays, maps, names and figures.
    assert a.attention(1, 1).shape == (a.n_tokens, a.n_tokens)
    assert len(a.predictions(0)) == 10
    assert a.heads_grid()._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"
    a.export(tmp_path / "after-close", formats=["npy"])

    # A model dropped with analyses alive: they keep it as long as they need it.
    b = ssaviz.load(SMALL).analyze(TEXT)
    gc.collect()
    assert np.isfinite(b.attention(1, 0)).all() and len(b.predictions(2)) == 10


def overflowing_model(folder, seed):
    """A 2 x 2 model whose tau_q overflows: each layer's beta (read as linear, query_form
    "linear,none") set to 3e38, finite in the file."""
    run_cli("init-random", "--out", str(folder), "--family", "pythia", "--layers", "2", "--heads", "2", "--embd", "16",
            "--query-form", "linear,none", "--seed", seed)
    path = folder / "model.safetensors"
    data = bytearray(path.read_bytes())
    n = struct.unpack("<Q", data[:8])[0]
    for name, meta in json.loads(data[8:8 + n]).items():
        if name.endswith("attn.beta"):
            begin = 8 + n + meta["data_offsets"][0]
            data[begin:begin + 4] = struct.pack("<f", 3e38)
    path.write_bytes(bytes(data))
    return folder


def test_no_figure_or_export_of_a_non_finite_analysis(tmp_path):
    """Issue 38: a lit checkpoint whose beta (3e38, read as linear) overflows tau_q: `ssaviz export`
    refuses it with exit 3 (what the file holds), and Python's figures refuse it too (ValueError)
    instead of drawing a normal-looking picture."""
    folder = overflowing_model(tmp_path / "overflow", "5")
    text = "one two three four five six seven eight"
    code, _, err = run_cli("export", "--model", str(folder), "--query-form", "linear,none", "--text", text, "--out", str(tmp_path / "out"),
                           check=False)
    assert code == 3 and "not finite" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out" / "metrics.json").exists()
    # Its arrays are there to read, with a warning: NaN rows measure as numbers (their JS as 0, "no change").
    with pytest.warns(RuntimeWarning, match=r"^ssaviz: analyze\(\): the analysis is not finite .*; its rows' measures .* are not to be read"):
        a = ssaviz.load(str(folder), query_form="linear,none").analyze(text)
    for figure in (lambda: a.heatmap(0, 0), lambda: a.highlight(), lambda: a.heads_grid()):
        with pytest.raises(ValueError, match="not finite"):
            figure()
    # info's slope table says 3e38 in significant digits (fixed ones ran past its cells' buffer:
    # "3000000005497755757778039942811", a number 10^7 times smaller).
    _, out, _ = run_cli("info", "--model", str(folder), "--query-form", "linear,none")
    table = out[out.index("layer  beta"):]
    assert "3e+38" in table and not re.search(r"\d{12}", table), table
    # Nor a continuation predicted from NaN logits (greedy wrote id 0 again and again, exit 0).
    code, out, err = run_cli("generate", "--model", str(folder), "--query-form", "linear,none", "--text", text, "--tokens", "3", check=False)
    assert code == 3 and "is not finite" in err and len(err.strip().splitlines()) == 1 and not out, (code, out, err)
    with pytest.raises(ValueError, match="is not finite"):
        ssaviz.load(str(folder), query_form="linear,none").generate(text, tokens=3)


def test_a_run_step_that_overflows_fails_as_it_would_alone(tmp_path):
    """Round twenty-seven: a run's step whose analysis is not finite (a run that diverged) is named
    and skipped, exit 3, as `export --model` of it alone refuses it; it went into the run with exit
    0, a finite JS beside its NaN entropy on the curves. Python's Run.analyze lists it in failed."""
    run = tmp_path / "run"
    for step, seed in (("checkpoint-100", "5"), ("checkpoint-300", "7")):
        run_cli("init-random", "--out", str(run / step), "--family", "pythia", "--layers", "2", "--heads", "2", "--embd", "16",
                "--query-form", "linear,none", "--seed", seed)
    overflowing_model(run / "checkpoint-200", "6")
    text = "one two three four five six seven eight"
    out = tmp_path / "out"
    code, _, err = run_cli("export", "--run", str(run), "--query-form", "linear,none", "--text", text, "--out", str(out),
                           "--format", "json,svg", check=False)
    assert code == 3 and "step 200 (checkpoint-200)" in err and "not finite" in err, err
    timeline = json.loads((out / "run.json").read_text())
    assert [s["step"] for s in timeline["steps"]] == [100, 300]
    assert [f["step"] for f in timeline["failed"]] == [200]
    csv = (out / "run.csv").read_text()
    assert ",200," not in csv and ",300," in csv, csv
    # --steps all: the other steps' exports written, this one named (it stopped the run, exit 1).
    code, _, err = run_cli("export", "--run", str(run), "--query-form", "linear,none", "--text", text, "--out", str(tmp_path / "all"),
                           "--format", "json", "--steps", "all", check=False)
    assert code == 3 and "not finite" in err, err
    assert (tmp_path / "all" / "step-000300" / "metrics.json").exists()
    assert not (tmp_path / "all" / "step-000200").exists()
    ra = ssaviz.load_run(str(run), query_form="linear,none").analyze(text)
    assert list(ra.steps) == [100, 300]
    assert [f["step"] for f in ra.failed] == [200] and "not finite" in ra.failed[0]["error"]
    # A base that overflows is refused, exit 3, naming it (its NaN maps were written beside a
    # finite-looking JS); against a run it fails every step, so the run stops, said once.
    base = run / "checkpoint-200"
    code, _, err = run_cli("export", "--model", str(run / "checkpoint-100"), "--base", str(base), "--query-form", "linear,none",
                           "--text", text, "--out", str(tmp_path / "based"), "--format", "json,npy", check=False)
    assert code == 3 and "the base's" in err and "the base overflows" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "based").exists()
    clean = tmp_path / "clean_run"
    shutil.copytree(run / "checkpoint-100", clean / "checkpoint-100")
    shutil.copytree(run / "checkpoint-300", clean / "checkpoint-300")
    code, _, err = run_cli("export", "--run", str(clean), "--base", str(base), "--query-form", "linear,none", "--text", text,
                           "--out", str(tmp_path / "based_run"), "--format", "json", check=False)
    assert code == 3 and err.count("the base overflows") == 1, err


def test_bad_names_are_echoed_short_and_pairs_and_bases_checked(small):
    """Round twenty-seven: a bad side, map or plot name is echoed cut, as every other message cuts
    what it echoes (4,099 characters of it came back); a (layer, head) pair of the wrong types names
    the element ("not tuple" of a tuple); base="" is refused as --base "" is (it took the base beside
    the model)."""
    a = small.analyze(TEXT)
    for call in (lambda: a.attention(0, 0, side="y" * 10000), lambda: a.lens("z" * 10000), lambda: a.heatmap(0, 0, map="q" * 10000),
                 lambda: a.plot("p" * 10000)):
        with pytest.raises(ValueError) as e:
            call()
        assert 40 < len(str(e.value)) < 800, len(str(e.value))
    with pytest.raises(ssaviz.ArgumentTypeError, match="ablate layer must be an integer, not float"):
        small.analyze(TEXT, ablate=[(1.5, 0)])
    with pytest.raises(ssaviz.ArgumentTypeError, match="ablate layer must be an integer, not str"):
        small.analyze(TEXT, ablate=[("a", 0)])
    assert small.analyze(TEXT, ablate=[(1, "*")]).interventions == small.analyze(TEXT, ablate="1:*").interventions
    with pytest.raises(ValueError, match="base is empty"):
        small.analyze(TEXT, base="")
    # A piece with a stray byte, as `tokenize` writes it (" \xF0\x9F\x98": a space and the first
    # three bytes of an emoji), names its token (it "tokenizes to 11 tokens").
    e = small.analyze("a \U0001F600 b")
    assert e.piece_bytes[1] == b" \xf0\x9f\x98"
    assert e.attribute(0, " \\xF0\\x9F\\x98")["embed"] == e.attribute(0, int(e.ids[1]))["embed"]


def test_a_named_tokenizer_is_never_ignored(tmp_path):
    """Issue 38: --tokenizer naming a file, a missing folder or a folder without tokenizer files is a
    one-line error (exit 3), not GPT-2's bundled tokenizer."""
    empty = tmp_path / "empty"
    empty.mkdir()
    afile = tmp_path / "file.txt"
    afile.write_text("not a tokenizer")
    for where, words in ((tmp_path / "missing", "missing' does not exist"), (afile, "file.txt' is not a folder"), (empty, "holds no tokenizer files")):
        code, _, err = run_cli("info", "--model", SMALL, "--tokenizer", str(where), check=False)
        assert code == 3 and words in err and len(err.strip().splitlines()) == 1, err
    # A model with tokenizer files of its own: the flag named too (it said "model folder 'empty'").
    code, _, err = run_cli("tokenize", "--model", ENGLISH, "--tokenizer", str(empty), "--text", "hi", check=False)
    assert code == 3 and f"--tokenizer '{empty}' holds no tokenizer files" in err, err
    # init-random reads its tokenizer before it writes anything.
    code, _, err = run_cli("init-random", "--out", str(tmp_path / "new"), "--tokenizer", str(empty), check=False)
    assert code == 3 and not (tmp_path / "new").exists(), err


def test_integers_past_the_engines_are_a_value_error():
    """Issue 38: attention(0, 2**63) and ids of 2**64 are ValueErrors naming the argument, not
    pybind11's TypeError listing C++ signatures."""
    m = ssaviz.load(require(SMALL))
    a = m.analyze("one two three")
    with pytest.raises(ValueError, match=r"attention\(\): head 9223372036854775808 is out of range"):
        a.attention(0, 2**63)
    with pytest.raises(ValueError, match="each id 18446744073709551616 is out of range"):
        m.analyze([1, 2, 2**64])
