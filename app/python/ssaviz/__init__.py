"""ssaviz from Python: the engine of the ssaviz window and command line, in notebooks (SPEC section 8).

    import ssaviz
    m = ssaviz.load()                                   # the bundled model; or load(path, device="auto", **flags)
    a = m.analyze("The only way to do great work ...")  # compare="vanilla" | "local" | "unedited" | Model | path | None
    a.attention(0, 1)                                   # numpy float32 [T, T], a view of the analysis's memory
    a.tau_q, a.metrics["entropy"], a.loss               # numpy [L, H, T], ..., [T - 1]; ssaviz.quantities() lists them
    a.highlight()                                       # the paper's Figure 1, inline in a notebook
    a.export("out", formats=["npy", "png"])            # the files `ssaviz export` writes
    ssaviz.export_batch(texts, "out", model=m, client=dask_client)

Keyword flags are the command line's (`sink_eps=0.2` is `--sink-eps 0.2`), applied by the same
table; a bad value raises ValueError with the command line's message, a missing path
FileNotFoundError, an argument of the wrong type ArgumentTypeError (a TypeError and a ValueError).
"""

from . import _blas

_blas.choose()  # before numpy loads OpenBLAS: its kernels are chosen as it loads

import functools as _functools  # noqa: E402
import json as _json  # noqa: E402
import os as _os  # noqa: E402
import re as _re  # noqa: E402
import subprocess as _subprocess  # noqa: E402
import tempfile as _tempfile  # noqa: E402
import textwrap as _textwrap  # noqa: E402
from numbers import Integral as _Integral, Real as _Real  # noqa: E402

import numpy as _np  # noqa: E402

_here = _os.path.dirname(_os.path.abspath(__file__))
# SentencePiece runs in its own library beside the module (model/text/sentencepiece.cpp).
if _os.path.exists(_os.path.join(_here, "libssaviz_spm.so")):
    _os.environ.setdefault("SSAVIZ_SPM_LIBRARY", _os.path.join(_here, "libssaviz_spm.so"))

from . import _ssaviz  # noqa: E402

# Where numpy or torch loaded OpenBLAS before `import ssaviz` could choose its kernels (_blas.py)
# and it runs its generic SSE3 ones on a CPU newer than itself, say what to set.
if _ssaviz.faster_blas_kernels():
    import warnings as _warnings
    _warnings.warn(f"ssaviz: OpenBLAS runs its generic SSE3 kernels here, as it does not know this CPU; analyses run faster with "
                   f"OPENBLAS_CORETYPE={_ssaviz.faster_blas_kernels()} set before Python starts", RuntimeWarning, stacklevel=2)

__all__ = ["load", "Model", "Analysis", "Figure", "export_batch", "load_run", "Run", "RunAnalysis", "show", "examples", "quantities",
           "ArgumentTypeError"]


ArgumentTypeError = _ssaviz.ArgumentTypeError  # a TypeError and a ValueError: a wrong type, or a keyword a call does not take


#-----------------------------------------------------------------------------
# Arguments: Python values checked and spelled as the command line spells them
#-----------------------------------------------------------------------------

def _flag_value(where, name, value):
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        value = value.item()  # a numpy scalar as its Python value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _Integral):
        return str(int(value))
    if isinstance(value, _Real):  # a whole number as one: the flags that count (size=64.0) read "64.0" as no number
        value = float(value)
        return str(int(value)) if value.is_integer() and abs(value) < 2 ** 53 else repr(value)  # 1e308 as "1e+308", not 309 digits
    if isinstance(value, (str, _os.PathLike)):
        text = _os.fspath(value)
        if ("\0" if isinstance(text, str) else b"\0") in text:  # it would cut a path (config=, tokenizer=) short
            raise ValueError(f"{where}: {_shown(name)}= holds a NUL character, which no path or name can")
        return _fs(text)
    if isinstance(value, (list, tuple, range)):
        return ",".join(_flag_value(where, name, v) for v in value)
    raise ArgumentTypeError(f"{where}: {_shown(name)}= takes a string, number, bool or list, not {type(value).__name__}")


def _flags(where, flags):
    """Keyword flags as (name, value) strings; None leaves a flag out."""
    return [(name, _flag_value(where, name, value)) for name, value in flags.items() if value is not None]


def _int(where, name, value, bits=32):
    """An integer argument; beyond what the engine's integers hold it is out of range (ValueError
    naming it), never pybind11's TypeError listing C++ signatures."""
    if isinstance(value, bool) or not isinstance(value, _Integral):
        raise ArgumentTypeError(f"{where}: {name} must be an integer, not {type(value).__name__}")
    value = int(value)
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ValueError(f"{where}: {name} {value} is out of range")
    return value


def _whole(where, name, value):
    """A count given as the flags take one: an integer, or a whole number of another type (2.0, a
    numpy scalar), as export(png_scale=2.0) reads it."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        value = value.item()
    if isinstance(value, _Real) and not isinstance(value, (bool, _Integral)):
        if not float(value).is_integer():
            raise ValueError(f"{where}: {name} must be a whole number, not {_r(value)}")
        value = int(value)
    return _int(where, name, value)


def _position(where, value, n_tokens):
    """A token position; a negative one counts from the end, as Python's indexing (-1: the last)."""
    position = _int(where, "position", value)
    if not -n_tokens <= position < n_tokens:
        raise ValueError(f"{where}: position {position} is out of range (the text has {n_tokens} tokens)")
    return position + n_tokens if position < 0 else position


_MESSAGE_CHARS = 200  # what a message echoes of the caller's, at most, as the engine's messages cut it


def _cut(text):
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS] + "..."


def _r(value):
    """repr(value) as a message shows it: escaped by repr, at most 200 characters (a 100,000-character
    compare= made a message of 200,000)."""
    return _cut(repr(value))


def _shown(text):
    """A name from the caller as a message shows it, as the engine's messages do: C0 controls and
    DEL as \\xNN, C1 controls as \\u00NN, and the bidirectional controls as \\uNNNN (a traceback
    printed to a terminal would run them, or read reversed); at most 200 characters."""
    def one(c):
        code = ord(c)
        if code < 0x20 or code == 0x7F:
            return f"\\x{code:02x}"
        if 0x80 <= code < 0xA0 or 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069:
            return f"\\u{code:04x}"
        return c
    return _cut("".join(one(c) for c in str(text)))


def _str(where, name, value):
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{where}: {name} must be a string, not {type(value).__name__}")
    return value


def _bool(where, name, value):
    """A switch: True or False, and as the export keywords read one (the engine's rule), 1 / 0 and
    "true" / "false" (Run.analyze(lens=1) was refused where Run.export(lens=1) was taken)."""
    said = f"{where}: {name} is a switch: True or False (or 1 / 0, \"true\" / \"false\")"
    if isinstance(value, (list, tuple, range, dict, set, bytes, bytearray)) or value is None:  # the engine's rule reads one value
        raise ArgumentTypeError(f"{said}, not {type(value).__name__}")
    try:
        text = _flag_value(where, name, value)  # as an export keyword's switch is read: 1.0 and a 0-d numpy array too
    except ArgumentTypeError:
        raise ArgumentTypeError(f"{said}, not {type(value).__name__}") from None
    if text in ("true", "1", "false", "0"):
        return text in ("true", "1")
    raise ArgumentTypeError(f"{said}, not {_r(value)}")


def _fs(value):
    """A path (or a keyword) as the engine takes it: str, or bytes where it holds bytes that are not
    UTF-8 (os.fsdecode keeps them as surrogates, which a C++ string cannot take). Applied where a
    path crosses into the engine; Python's own file functions take the str."""
    if value is None:
        return None
    path = _os.fspath(value)
    if isinstance(path, str):
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            return _os.fsencode(path)
    return path


def _path(where, name, value):
    if isinstance(value, (str, _os.PathLike)):
        path = _os.fspath(value)
        # A NUL ends a path for the system: the engine would open what comes before it.
        if ("\0" if isinstance(path, str) else b"\0") in path:
            raise ValueError(f"{where}: {name} holds a NUL character, which no path can")
        return path
    raise ArgumentTypeError(f"{where}: {name} must be a path (str or os.PathLike), not {type(value).__name__}")


def _text(where, value, each=False):
    """The text as UTF-8 bytes. A lone surrogate (a file read with errors="surrogateescape") is said
    in Python's words, its character (it was named as a UTF-8 byte the caller never had); with
    `each` (a batch's texts, each failing alone) it passes through, and the engine names the byte."""
    if isinstance(value, str):
        if each:
            return value.encode("utf-8", "surrogatepass")
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"{where}: text holds a lone surrogate, U+{ord(value[e.start]):04X} at character {e.start}: not Unicode "
                             "text (bytes read with errors=\"surrogateescape\"?)") from None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    raise ArgumentTypeError(f"{where}: text must be a str (or bytes), not {type(value).__name__}")


def _ablate(where, value):
    """--ablate's syntax, from "0:1,1:*=pos", a list of such items, or (layer, head) pairs."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, _Integral) for v in value):
        value = [value]
    if isinstance(value, (list, tuple)):
        items = []
        for item in value:
            if isinstance(item, str):
                items.append(item)
            elif isinstance(item, tuple) and len(item) == 2:  # the layer and head each checked, named ((1.5, 0) was "not tuple")
                head = "*" if isinstance(item[1], str) and item[1] == "*" or item[1] is None else _int(where, "ablate's head", item[1])
                items.append(f"{_int(where, 'ablate layer', item[0])}:{head}")
            else:
                raise ArgumentTypeError(f"{where}: ablate items are 'L:H' strings or (layer, head) pairs, not {type(item).__name__}")
        return ",".join(items)
    raise ArgumentTypeError(f"{where}: ablate must be a string like '0:1,1:*', a list of them or of (layer, head) pairs, not "
                            f"{type(value).__name__}")


def _base_arg(where, compare, base):
    """base= beside compare=: (the comparison, the base's folder or "" for the one beside the model)."""
    if base is None:
        return compare, ""
    if compare not in ("vanilla", "base"):
        raise ValueError(f"{where}: base= goes with compare=\"base\", not compare={_r(compare)}")
    if not isinstance(base, (str, _os.PathLike, Model)):
        raise ArgumentTypeError(f"{where}: base must be a folder, a checkpoint or a Model, not {type(base).__name__}")
    path = base.path if isinstance(base, Model) else _path(where, "base", base)
    if not path:  # as --base "" is refused: an unset variable took the base found beside the model
        raise ValueError(f"{where}: base is empty: name the base's folder (or use compare=\"base\" for the one beside the model)")
    return "base", path


# What each figure draws with, of an export's keywords (it took the rest and ignored them); a plot's
# by its name, as plot() takes it.
# Every figure's text: no_titles=True drops the titles (a paper's caption says what they show),
# text_scale=X sets the text X times its size (0.5 to 3), as export's no_titles= and text_scale=.
_TEXT_KEYWORDS = ("no_titles", "text_scale")
_FIGURE_KEYWORDS = {"heatmap()": ("colormap", "log", "size") + _TEXT_KEYWORDS, "heads_grid()": ("colormap", "log") + _TEXT_KEYWORDS,
                    "highlight()": ("temperature_scale",) + _TEXT_KEYWORDS, "lens_grid()": _TEXT_KEYWORDS}
# and their keywords besides _TEXT_KEYWORDS
_DLA_PLOTS = {"dla_bars": ("position", "target"), "dla_layers": ("position", "target"), "dla_heads": ("side",), "dla_heads_change": ()}
_RANK_PLOTS = ("head_impacts", "head_impacts_tokens", "head_impacts_drift_tokens")  # rank_heads()'s: _TEXT_KEYWORDS only
_PLOT_KEYWORDS = {name: keywords + _TEXT_KEYWORDS for name, keywords in {
    "dilution": (), "tau_q_histogram": (), "qk_spectrum": (), "sink_mass": ("sink_eps",),
    "finetune": ("log",), "fine-tune": ("log",), "fine_tune": ("log",),
    "finetune_loss": (), "fine-tune-loss": (), "fine_tune_loss": ()}.items()}


def _export_flags(where, flags, formats, layers, heads):
    """An export's keyword flags with its formats, layers and heads; format= (the command line's
    --format) is refused, naming formats= (it was taken and dropped: every default format written)."""
    if "format" in flags:
        raise ArgumentTypeError(f"{where} takes no keyword format: formats= names them, e.g. formats=['json', 'png']")
    if formats is not None and not isinstance(formats, (list, tuple, str)):
        raise ArgumentTypeError(f"{where}: formats must be a list of json, npy, csv, png, svg, html, not {type(formats).__name__}")
    if formats is not None and len(formats) == 0:
        raise ValueError(f"{where}: formats is empty: name one or more of json, npy, csv, png, svg, html")
    if isinstance(formats, (list, tuple)) and not all(isinstance(f, str) for f in formats):  # [b"json"] was named format=
        odd = next(f for f in formats if not isinstance(f, str))
        raise ArgumentTypeError(f"{where}: formats must be a list of json, npy, csv, png, svg, html, not one holding {type(odd).__name__}")
    if flags.get("dla_position") is not None:  # a position as plot(position=) takes it ([1] and "1" were taken as 1)
        flags = dict(flags, dla_position=_int(where, "dla_position", flags["dla_position"], bits=64))
    if flags.get("dla_target") is not None and not isinstance(flags["dla_target"], str):  # 3 read as the target '3'
        raise ArgumentTypeError(f"{where}: dla_target must be one of next, top, next-against-other, not {type(flags['dla_target']).__name__}")
    return _flags(where, dict(flags, format=formats, layers=layers, heads=heads))


def _figure_flags(where, flags, takes, arguments=None):
    """A figure's keyword flags, each one it draws with; another is a TypeError naming it.
    arguments: the export's keywords that are the figure's own arguments ({"highlight": "by"})."""
    for name in flags:
        if name not in takes:
            instead = f"; its {arguments[name]}= is an export's {name}=" if arguments and name in arguments else ""
            raise ArgumentTypeError(f"{where} takes no keyword {_shown(name)} (its keywords: {', '.join(takes) or 'none'}){instead}")
    return _flags(where, flags)


def _compare(where, value):
    """(a keyword or a twin's folder, the twin's load flags or None)."""
    if value is None:
        return "none", None
    if isinstance(value, Model):
        return value.path, _flags(where, value.flags)
    keywords = ", ".join(repr(k) for k in _ssaviz.compare_keywords())
    if isinstance(value, (str, _os.PathLike)):
        path = _path(where, "compare", value)
        accepted = _ssaviz.compare_keywords() + ["tau1", "none"]  # the keywords ParseCompare takes from Python
        if not isinstance(value, str) and path in accepted:
            path = _os.path.join(".", path)  # a path is a folder, even one named as a keyword
        # A bare word that is no keyword and no folder here may be a mistyped keyword as well as a
        # missing twin: the error names both.
        bare = isinstance(value, str) and _os.sep not in path and "/" not in path and not path.startswith(".")
        if bare and path not in accepted and not _os.path.exists(path):
            raise FileNotFoundError(f"{where}: compare={_r(path)} is not one of {keywords} (or 'tau1', or 'none' for no comparison), "
                                    f"and there is no twin folder {_r(path)}")
        return path, None
    raise ArgumentTypeError(f"{where}: compare must be {keywords}, a Model, a twin's folder or None, not {type(value).__name__}")


def _export_compare(where, value):
    """_compare for the exports: their files hold a comparison beside SSA, so not None ("none")."""
    kind, twin_flags = _compare(where, value)
    if kind == "none":
        raise ValueError(f"{where}: compare=None: an export writes a comparison beside SSA, as `ssaviz export` does; "
                         "compare=\"local\" (tau = 1 in each layer) costs no second forward pass")
    return kind, twin_flags


# How a call takes a base, where an engine's message says "maps base needs a base (...)": the
# engine says it as load()'s and analyze()'s arguments (app/python/module.cpp, InPythonWords).
_BASE_ARGUMENTS = "base=DIR, or compare=\"base\""


def _python_words(message, base=_BASE_ARGUMENTS):
    """An engine's message (a string, not raised) in the words its errors use; base: how the call
    takes a base, for "maps base needs a base (...)"."""
    return _ssaviz.python_words(message).replace(f"needs a base ({_BASE_ARGUMENTS})", f"needs a base ({base})")


_WARNED_FAILURES = 20  # as the command line's lines of skipped steps and texts


def _warn_failures(messages, what, listed, stacklevel=3, reasons=None):
    """One warning a failure up to _WARNED_FAILURES, then one saying how many more `what` (steps,
    texts) were skipped and where `listed` keeps every one (9,999 failing steps warned 9,999 times).
    reasons: each failure's reason without its step (its checkpoint's path taken out): one said
    already is not said again but counted (a run's folder without lit_config.json failed every step
    alike), as the command line's lines."""
    import warnings
    alike = 0
    if reasons:
        seen, kept, counted = set(), [], set()  # seen: the reasons warned; counted: those of the steps counted
        for message, reason in zip(messages, reasons):
            if reason in seen:
                alike += 1
                counted.add(reason)
                continue
            kept.append(message)
            if len(kept) <= _WARNED_FAILURES:
                seen.add(reason)
        messages = kept
    for message in messages[:_WARNED_FAILURES]:
        warnings.warn(message, stacklevel=stacklevel + 1)
    if alike:
        warnings.warn(f"ssaviz: {alike} more {what if alike > 1 else what.rstrip('s')} skipped for "
                      f"{'a reason' if len(counted) == 1 else 'reasons'} said above ({listed} lists every one)", stacklevel=stacklevel + 1)
    if len(messages) > _WARNED_FAILURES:
        warnings.warn(f"ssaviz: {len(messages) - _WARNED_FAILURES} more {what} skipped ({listed} lists every one)", stacklevel=stacklevel + 1)


def _saying_base(base):
    """Decorates a method whose errors (ValueError, OSError) say how it takes a base (`base`) where
    the engine's say load()'s and analyze()'s arguments."""
    def wrap(fn):
        @_functools.wraps(fn)
        def call(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except (ValueError, OSError) as e:
                if len(e.args) == 1 and isinstance(e.args[0], str):  # already in Python's words: only the base's
                    e.args = (e.args[0].replace(f"needs a base ({_BASE_ARGUMENTS})", f"needs a base ({base})"),)
                raise
        return call
    return wrap


#-----------------------------------------------------------------------------
# Models
#-----------------------------------------------------------------------------

def load(path=None, device="auto", **flags):
    """Opens a model: a folder or checkpoint file as `--model` takes it (None: the bundled model).
    device: "auto", "cpu", "cuda" or "cuda:N" (GPU N, from 0). flags: the model's command-line flags (dtype="bf16",
    n_head=12, query_form="exp_exp", ...)."""
    return Model(path, device, **flags)


def _reload(path, device, flags):
    return Model(path, device, **flags)


class Model:
    """A model open on one device, with the engine that keeps what the last analysis left behind:
    re-analysing an edited text computes only the rows from the first changed token."""

    def __init__(self, path=None, device="auto", **flags):
        where = "load()"
        if path is None:
            path = ""  # the bundled model
        else:
            path = _path(where, "path", path)
            if len(path) == 0:  # it opened the bundled model, as None does
                raise ValueError(f"{where}: path is empty (None, the default, opens the bundled model)")
        device = _str(where, "device", device)
        self._flags = dict(flags)
        self._core = _ssaviz.Model(_fs(path), device, _flags(where, flags))
        self._info = None

    def _live(self):
        if self._core.closed:
            raise ValueError("the model is closed")
        return self._core

    # Pickled as how it was opened, so that Dask workers open it themselves.
    def __reduce__(self):
        return (_reload, (self.path, self.requested_device, self._flags))

    # How it was opened, its shape, and whether close() freed it.
    path = property(lambda self: _os.fsdecode(self._core.path))
    device = property(lambda self: self._core.device_in_use, doc="where the model runs: \"cpu\", \"cuda:0\", ...")
    requested_device = property(lambda self: self._core.device, doc="as load() was asked: \"auto\", \"cpu\", \"cuda\" or \"cuda:N\"")
    flags = property(lambda self: dict(self._flags), doc="the load flags (dtype=, n_head=, ...)")
    n_layer = property(lambda self: self._core.n_layer)
    n_head = property(lambda self: self._core.n_head)
    closed = property(lambda self: self._core.closed)

    @property
    def info(self):
        """A dict, as `ssaviz info --json` prints it."""
        if self._info is None:
            self._info = _json.loads(self._core.info_json)
        return self._info

    def close(self):
        """Frees the weights now. Analyses keep their arrays, maps and figures; analyze() then raises."""
        self._core.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.closed else f"{self.n_layer} layers x {self.n_head} heads"
        return f"<ssaviz.Model {self.path!r} ({state})>"

    def _base(self, where, compare, base):
        """compare="base" / base=: tells the model which base to open; returns the comparison."""
        compare, base_dir = _base_arg(where, compare, base)
        if isinstance(compare, str) and compare == "base":
            self._live().set_base(_fs(base_dir))  # "": the base beside the model
        return compare

    def analyze(self, text, compare="vanilla", ablate=None, truncate=False, base=None, lens=False):
        """Every map, temperature, metric and prediction of a text (str, or a list of token ids).

        compare: "vanilla" (the tau = 1 counterfactual, a second forward pass), "local" (tau = 1 in
        each layer alone), "unedited" (the model without `ablate`'s what-ifs), "base" (a fine-tune
        against its base model: three sides, SSA, its weights at tau = 1 and the base, with
        `decomposition`), a twin Model or folder, or None (no comparison: the cheapest run).
        base: the base's folder or checkpoint (implies compare="base"; without it the base beside
        the model). ablate: what-ifs in --ablate's syntax ("0:1,1:*=pos") or (layer, head) pairs.
        truncate: keep the first tokens of a text longer than the context. lens=True: the logit lens
        and attribution now too, of SSA, its comparison and the base (as Run.analyze(lens=True) and
        `export --lens`; else a.lens() runs a side when first asked for). The engine runs without
        the GIL."""
        where = "analyze()"
        lens = _bool(where, "lens", lens)
        if lens and _ablate(where, ablate).strip():
            raise ValueError(f"{where}: lens=True runs the model as loaded: not with ablate=")
        compare = self._base(where, compare, base)
        kind, twin_flags = _compare(where, compare)
        spec = _ablate(where, ablate)
        truncate = _bool(where, "truncate", truncate)
        core = self._live()
        if isinstance(text, (list, tuple)) or (not isinstance(text, (str, bytes)) and hasattr(text, "dtype") and hasattr(text, "tolist")):
            # (numpy's str_ is a str with a dtype: a text, as read from an array of texts)
            ids = text.tolist() if hasattr(text, "tolist") else text
            if not isinstance(ids, (list, tuple)):  # a 0-d array: one number, not a list of ids
                raise ArgumentTypeError(f"{where}: text must be a str or a list of token ids, not a 0-d {type(text).__name__}")
            ids = list(ids)
            if ids and isinstance(ids[0], (str, bytes)):
                raise ArgumentTypeError(f"{where}: text must be one str (a list is token ids); for many texts, "
                                        "analyze each, or export_batch(texts, out)")
            for i in ids:
                _int(where, "each id", i, bits=64)
            handle = core.analyze_ids(ids, _fs(kind), twin_flags, spec, truncate)
        else:
            handle = core.analyze_text(_text(where, text), _fs(kind), twin_flags, spec, truncate)
        if handle.self_comparison_note:  # a model without temperatures against tau = 1: every difference 0
            import warnings
            warnings.warn(f"ssaviz: {where}: {handle.self_comparison_note}", stacklevel=2)
        if handle.not_finite and not core.run_step:  # NaN rows, whose JS read 0 ("no change"); a run's step is skipped, said so there
            import warnings
            warnings.warn(f"ssaviz: {where}: {handle.not_finite}; its rows' measures (entropy, JS, the decomposition) are not to be "
                          "read: export and the figures refuse it", RuntimeWarning, stacklevel=2)
        a = Analysis(handle, self)
        if lens:  # the sides `export --lens` reads: the comparison (not the unedited model, SSA itself) and the base
            a.lens("ssa")
            if a.compare != "none" and a.comparison_kind != "unedited":
                a.lens("compare")
            if a.comparison_kind == "base":
                a.lens("base")
        return a

    def tokenize(self, text, truncate=False):
        """(ids, pieces) as `ssaviz tokenize` lists them."""
        return self._live().tokenize(_text("tokenize()", text), _bool("tokenize()", "truncate", truncate))

    def generate(self, text, tokens, temperature=0, top_k=None, seed=None, ablate=None, truncate=False):
        """The continuation `ssaviz generate` prints: greedy at temperature 0, else drawn from
        softmax(logits / temperature) over the top_k most likely with a seed (the same tokens on
        every machine). Stops early when the context is full."""
        where = "generate()"
        flags = _flags(where, {"tokens": _int(where, "tokens", tokens), "temperature": temperature,
                               "top_k": None if top_k is None else _int(where, "top_k", top_k),
                               "seed": None if seed is None else _int(where, "seed", seed, bits=64)})
        return self._live().generate(_text(where, text), flags, _ablate(where, ablate), _bool(where, "truncate", truncate))


#-----------------------------------------------------------------------------
# The catalogue of quantities: what an analysis holds, named as the window, files and flags name it
#-----------------------------------------------------------------------------

_CATALOGUE = _json.loads(_ssaviz.catalogue_json())


def quantities():
    """What ssaviz shows, from its one catalogue (the window, `ssaviz export` and metrics.json use
    the same): a list of dicts with key, label, help, unit, scope ("token": [T - 1], "row":
    [L, H, T], "head": [L, H]), sides ("ssa", "comparison", "base"), head_values (the per-head numbers
    it gives: the Matrix tab's), python (its key in Analysis.metrics, or None), json (its name in
    metrics.json and run.json) and base_only (an analysis holds it only against a base)."""
    return [dict(q) for q in _CATALOGUE["quantities"]]


# A token colouring by its quantity's Python name where that differs (Analysis.metrics' "js": "js_divergence").
_COLORING_OF_PYTHON_KEY = {q["python"]: q["key"] for q in _CATALOGUE["quantities"]
                           if q["python"] and q["python"] != q["key"] and q["key"] in {c["key"] for c in _CATALOGUE["token_colorings"]}}


def _python_key(name, held):
    """The Python key of the quantity `name` names, where held(key): its key, metrics.json's or
    run.json's name, its head value's (tau_q_mean), or against a base (js_total held) its name in
    the decomposition (js_temperature is js: there SSA against tau = 1). None where none is held."""
    with_base = held("js_total")
    for q in _CATALOGUE["quantities"]:
        names = (q["key"], q["json"], q["head_value"]) + ((q["decomposition"],) if with_base else ())
        key = q["python"] or q["key"]  # tau_q, tau_v: arrays of their own, under their key
        if name in names and held(key):
            return key
    return None


class _Metrics(dict):
    """Analysis.metrics: arrays by their Python names; the names metrics.json, run.json and the
    command line give the same quantity read the same array (metrics["js_divergence"] is
    metrics["js"], "l1_distance" is "l1"), as RunAnalysis.arrays() reads them."""

    def _python_name(self, name):
        held = lambda key: dict.__contains__(self, key)
        key = _python_key(name, held)
        if key is None and isinstance(name, str):
            # A side's key as a file names it: heads.csv's "entropy_tau1" (against a base the
            # comparison is tau = 1), "js_divergence_compare", "sink_mass_base".
            sides = (("_tau1", "_compare"),) if held("js_total") else ()
            for suffix, ours in sides + (("_compare", "_compare"), ("_base", "_base")):
                if name.endswith(suffix) and len(name) > len(suffix):
                    stem = _python_key(name[:-len(suffix)], lambda k: held(k + ours))
                    if stem is not None:
                        return stem + ours
        return key

    def __missing__(self, name):
        python_name = self._python_name(name)
        if python_name is None:
            raise KeyError(name)
        return self[python_name]

    def get(self, name, default=None):
        return self[name] if name in self else default

    def __contains__(self, name):
        return dict.__contains__(self, name) or (isinstance(name, str) and self._python_name(name) is not None)


def _metrics_doc():
    shape = {"row": "[L, H, T]", "head": "[L, H]"}
    listed = [q for q in _CATALOGUE["quantities"] if q["python"]]
    width = max(len(q["python"]) for q in listed)
    lines = [f"    {q['python']:<{width}}  {shape[q['scope']]:<9}  {q['help']}" + (f", {q['unit']}" if q["unit"] else "")
             for q in listed]
    two_sided = ", ".join(q["python"] for q in listed if "comparison" in q["sides"])
    return ("dict of float32 arrays, one per quantity of ssaviz.quantities() that has one:\n" + "\n".join(lines) + "\n" +
            _textwrap.fill(f"The comparison's side as KEY_compare ({two_sided}). Without a comparison (compare=None) the "
                           "comparison's keys and those of SSA against it are absent. The names metrics.json and run.json give "
                           "read the same arrays (\"js_divergence\" is \"js\", \"l1_distance\" \"l1\"; against a base "
                           "\"js_temperature\" is \"js\", and heads.csv's KEY_tau1 is KEY_compare). js_total and js_drift only "
                           "against a base (base=), which adds the base's side as KEY_base and l1_total, l1_drift: the L1 of "
                           "js_total's and js_drift's rows.", 100))


def _highlight_doc():
    by = ", ".join(c["key"] for c in _CATALOGUE["token_colorings"])
    return _textwrap.fill(f"The text with each token coloured by `by` ({by}) over `scope`: \"model\", a layer, or (layer, head) "
                          "(the per-token losses have no scope). The paper's Figure 1; in a notebook an HTML page with values "
                          "on hover. A temperature is on the model's scale around 1 (temperature_scale=\"head\": the head's "
                          "own, as the window's View > Temperature scale per head).", 100)


#-----------------------------------------------------------------------------
# Analyses
#-----------------------------------------------------------------------------

class Analysis:
    """One text through one model and its comparison. Arrays are read-only numpy views of the
    analysis's own memory; they and the figures stay valid after the model is closed."""

    def __init__(self, handle, model):
        self._h = handle
        self.model = model

    def __repr__(self):
        return (f"<ssaviz.Analysis {self.n_tokens} tokens, {self.n_layer} x {self.n_head} heads, "
                f"compare={self.compare!r}>")

    # Shape and tokens.
    n_layer = property(lambda self: self._h.n_layer, doc="L: the model's layers")
    n_head = property(lambda self: self._h.n_head, doc="H: each layer's (query) heads")
    n_tokens = property(lambda self: self._h.n_tokens, doc="T: the tokens analysed")
    text = property(lambda self: self._h.text, doc="the analysed text (the decoded ids when ids were given)")
    ids = property(lambda self: self._h.ids, doc="each token's id in the model's vocabulary, [T]")
    pieces = property(lambda self: self._h.pieces, doc="each token as text (a partial UTF-8 character as U+FFFD)")
    piece_bytes = property(lambda self: self._h.piece_bytes, doc="each token's bytes")
    offsets = property(lambda self: self._h.offsets, doc="each token's byte range [begin, end) in the text")

    # What it was compared with, and how long the engine took.
    compare = property(lambda self: self._h.compare, doc="vanilla, local, unedited, twin, base or none")
    comparison_kind = property(lambda self: self._h.comparison_kind,
                               doc="as metrics.json names it: tau1, local, twin, unedited or base; none with compare=None")
    base_label = property(lambda self: self._h.base_label, doc="the base's folder (compare=\"base\"); empty otherwise")
    compare_label = property(lambda self: "" if self.compare == "none" else self._h.compare_label,
                             doc="the twin's folder (a twin); \"vanilla\" for a comparison of the model's own weights; \"\" with none")
    interventions = property(lambda self: self._h.interventions, doc="the what-ifs, in --ablate's syntax")
    device = property(lambda self: self._h.device, doc="where the engine ran: cpu or cuda:N")
    forward_ms = property(lambda self: self._h.forward_ms, doc="the forward passes' time, ms")
    metrics_ms = property(lambda self: self._h.metrics_ms, doc="the metrics' time, ms")
    engine_ms = property(lambda self: self._h.engine_ms, doc="the engine's calls (tokenizing and Analyze), ms")
    reused_rows = property(lambda self: self._h.reused_rows, doc="positions taken from the model's previous analysis")

    # Arrays: float32 [L, H, T] temperatures; [T - 1] losses (entry t - 1 is token t's).
    tau_q = property(lambda self: self._h.array("tau_q"), doc="[L, H, T]: each query's inverse temperature (1: vanilla)")
    tau_v = property(lambda self: self._h.array("tau_v"), doc="[L, H, T]: each key's value temperature (1: vanilla)")
    tau_q_position = property(lambda self: self._h.array("tau_q_position"), doc="1 + s ln i; ones without a position term")
    tau_q_token = property(lambda self: self._h.array("tau_q_token"), doc="tanh(w . z + b); zeros without a token term")
    tau_q_compare = property(lambda self: self._h.array("tau_q_compare"), doc="the comparison's tau_q; None without one")
    tau_v_compare = property(lambda self: self._h.array("tau_v_compare"), doc="the comparison's tau_v; None without one")
    loss = property(lambda self: self._h.array("loss"), doc="-ln p(token t | tokens before it), nats")
    loss_compare = property(lambda self: self._h.array("loss_compare"), doc="None without a comparison forward pass")
    rank = property(lambda self: self._h.array("rank"), doc="int32 [T - 1]: token t's rank among position t - 1's predictions (0: top)")
    rank_compare = property(lambda self: self._h.array("rank_compare"), doc="the comparison's rank; None without its forward pass")
    top_ids = property(lambda self: self._h.array("top_ids"), doc="int32 [T, K]: K = 10 (or the vocabulary, when smaller); each position's most likely next tokens")
    top_probs = property(lambda self: self._h.array("top_probs"), doc="float32 [T, K]: their probabilities")
    top_ids_compare = property(lambda self: self._h.array("top_ids_compare"), doc="the comparison's top_ids; None without its forward pass")
    top_probs_compare = property(lambda self: self._h.array("top_probs_compare"), doc="the comparison's top_probs; None without its forward pass")
    next_logits = property(lambda self: self._h.array("next_logits"), doc="[V]: the logits after the last token")
    # A fine-tune's base (compare="base"): its side, as the others; None otherwise.
    tau_q_base = property(lambda self: self._h.array("tau_q_base"), doc="the base's tau_q (ones for a vanilla base; an SSA base's own); None without a base")
    tau_v_base = property(lambda self: self._h.array("tau_v_base"), doc="the base's tau_v; None without a base")
    loss_base = property(lambda self: self._h.array("loss_base"), doc="the base's loss [T - 1]; None without a base")
    rank_base = property(lambda self: self._h.array("rank_base"), doc="the base's rank; None without a base")
    top_ids_base = property(lambda self: self._h.array("top_ids_base"), doc="the base's top_ids; None without a base")
    top_probs_base = property(lambda self: self._h.array("top_probs_base"), doc="the base's top_probs; None without a base")

    @property
    def decomposition(self):
        """compare="base": what fine-tuning changed, per head, as metrics.json's "decomposition"
        (numpy [L, H] arrays): js_total (SSA against the base) beside its parts, js_temperature (SSA
        against its weights at tau = 1) and js_drift (tau = 1 against the base), the same for L1,
        loss_mean of each side, and weights: how far fine-tuning moved the weights from the base's,
        ||W - W_base||_F / ||W_base||_F of each head's W_q, W_k, W_v, W_o ("q" .. "o": [L, H]), each
        layer's MLP ("mlp": [L]), its norms before the attention and the MLP ("norm_attention",
        "norm_mlp": [L]), the final norm ("norm_final") and the embeddings. None without a base."""
        d = _json.loads(self._h.decomposition_json)
        if d is None:
            return None
        def arrays(v, key=""):
            if isinstance(v, list):
                return _np.asarray(v, dtype=_np.float32)  # null: NaN
            if key in ("embeddings", "head", "norm_final") and v is None:  # a number not measured (a base of another vocabulary): NaN, as in the arrays
                return float("nan")
            return {k: arrays(x, k) for k, x in v.items()} if isinstance(v, dict) else v
        return arrays(d)

    def metrics(self):
        return _Metrics(self._h.metrics())
    metrics.__doc__ = _metrics_doc()
    metrics = property(metrics)

    def attention(self, layer, head, side="ssa"):
        """Head (layer, head)'s map, float32 [T, T] (row i: query i over keys 0..i); side "ssa",
        "compare" (also "tau1" where the comparison is tau = 1) or, with a base, "base"."""
        w = "attention()"
        return self._h.attention(_int(w, "layer", layer), _int(w, "head", head), _str(w, "side", side))

    def predictions(self, position, k=None, side="ssa"):
        """The k (at most 10, or the vocabulary; default that many) most likely tokens after
        `position` (-1: the last) as [(piece, probability), ...]."""
        w = "predictions()"
        k = min(10, self.top_ids.shape[1]) if k is None else _int(w, "k", k)
        return self._h.predictions(_position(w, position, self.n_tokens), k, _str(w, "side", side))

    # What each layer and head writes (SPEC section 10): the logit lens and direct logit
    # attribution, each side a forward pass of its own on the model as loaded, run when first asked
    # for and kept.
    def lens(self, side="ssa"):
        """The logit lens and attribution of one side ("ssa", "compare": tau = 1, the twin, or
        with a base its weights at tau = 1, or "base": the base's own) as numpy arrays: loss [L + 1, T - 1] (entry [l, t - 1]:
        token t's loss read after layer l; row L is `loss`), top_ids / top_probs [L + 1, T, k],
        dla [L, H, T - 1] (head (l, h)'s part, at position t - 1, of token t's logit), dla_mlp
        [L, T - 1], dla_embed, dla_const and logit [T - 1]; the parts sum to the logit. dla_divisor and
        dla_const_free [T - 1]: the final norm's divisor the parts were read through, and dla_const's
        share outside it (see dla_divisor)."""
        side = _str("lens()", "side", side)
        cache = self.__dict__.setdefault("_lens", {})
        if side not in cache:
            cache[side] = self._h.lens(side)
        return cache[side]

    def rank_heads(self, progress=True):
        """Each head's temperatures' part of the loss, as the window's What-ifs > Rank heads and
        `ssaviz export --rank-heads`: the text analysed once a head with that head at tau = 1 (tau_q and
        tau_v), on top of this analysis's what-ifs. A dict: baseline (the mean loss), what_ifs, mean_loss
        [L, H] and part [L, H] (baseline - mean_loss: below 0 where the head's temperatures lowered the
        loss, as the fine-tune's split reads; NaN for a head the what-ifs already set to tau = 1). One head
        at a time, so the parts need not add up to the temperatures' whole. part_tau_q and part_tau_v: the
        same with tau_q alone, or tau_v alone, at 1. Analysed beside a base (compare="base"), the drift's
        parts as well, the same way: part_drift [L, H] (the head's q, k, v and o weights from the base, its
        temperatures kept), part_drift_attention [L] (the layer's whole attention), part_drift_mlp [L] (the
        layer's MLP), part_drift_embeddings and part_drift_all (every weight); part_drift_path [1 + 2 L]
        with part_drift_path_names ("embeddings", "L0 attention", "L0 MLP", ...): the same parts one
        after another from the embeddings up, each on top of those before it, adding up to
        part_drift_all, and part_drift_path_top_down the same parts (same order) taken from the last MLP
        down, adding up to it too (where the two differ, the parts act together); None without a base.
        Where on the text: each part also token by token, its key with "_tokens" and a last axis of
        T - 1 (token t's at t - 1, as loss; their mean is the part): part_tokens [L, H, T - 1],
        part_tau_q_tokens, part_tau_v_tokens, part_drift_tokens [L, H, T - 1], part_drift_attention_tokens
        and part_drift_mlp_tokens [L, T - 1], part_drift_embeddings_tokens and part_drift_all_tokens
        [T - 1], part_drift_path_tokens and part_drift_path_top_down_tokens [1 + 2 L, T - 1]. Kept once
        measured.
        progress: a line on sys.stderr after each head; Ctrl+C stops between heads (KeyboardInterrupt)."""
        if "_ranked" not in self.__dict__:
            self._ranked = self._h.rank_heads(_bool("rank_heads()", "progress", progress))
        return self._ranked

    lens_loss = property(lambda self: self.lens()["loss"], doc="[L + 1, T - 1]: each token's loss read after each layer")
    dla = property(lambda self: self.lens()["dla"], doc="[L, H, T - 1]: each head's part of the next token's logit")
    dla_mlp = property(lambda self: self.lens()["dla_mlp"], doc="[L, T - 1]: each MLP's part")
    dla_embed = property(lambda self: self.lens()["dla_embed"], doc="[T - 1]: the embeddings' part")
    dla_const = property(lambda self: self.lens()["dla_const"], doc="[T - 1]: the biases' part (projections, final norm, head)")
    dla_logit = property(lambda self: self.lens()["logit"], doc="[T - 1]: the next token's logit, what the parts sum to (dla_logit.npy)")
    dla_divisor = property(lambda self: self.lens()["dla_divisor"],
                           doc="[T - 1]: the final norm's divisor the parts are read through (dla_divisor.npy): every part but "
                               "dla_const_free scales as 1 / divisor, so another side's parts through SSA's divisor are "
                               "parts * divisor_side / divisor_ssa (a part that wrote the same then reads the same)")
    dla_const_free = property(lambda self: self.lens()["dla_const_free"],
                              doc="[T - 1]: dla_const's part outside the divisor (the final norm's and the head's biases)")

    def _lens_of(self, side, key):
        """A side's lens array, None for a side the analysis lacks (as loss_compare and loss_base);
        side "tau1": the comparison where it is tau = 1 (SSA's weights, or the fine-tune's beside a base), as the _tau1 files."""
        if side == "tau1":
            if self.comparison_kind not in ("tau1", "base"):
                return None
            side = "compare"
        if side == "compare" and self.compare == "none":
            return None
        if side == "base" and self.comparison_kind != "base":
            return None
        return self.lens(side)[key]

    lens_loss_compare = property(lambda self: self._lens_of("compare", "loss"), doc="the comparison's lens_loss; None without one")
    dla_compare = property(lambda self: self._lens_of("compare", "dla"), doc="the comparison's dla; None without one")
    dla_mlp_compare = property(lambda self: self._lens_of("compare", "dla_mlp"), doc="the comparison's dla_mlp; None without one")
    dla_embed_compare = property(lambda self: self._lens_of("compare", "dla_embed"), doc="the comparison's dla_embed; None without one")
    dla_const_compare = property(lambda self: self._lens_of("compare", "dla_const"), doc="the comparison's dla_const; None without one")
    dla_logit_compare = property(lambda self: self._lens_of("compare", "logit"), doc="the comparison's dla_logit; None without one")
    lens_loss_base = property(lambda self: self._lens_of("base", "loss"), doc="the base's own lens_loss; None without a base")
    dla_base = property(lambda self: self._lens_of("base", "dla"), doc="the base's dla; None without a base")
    dla_mlp_base = property(lambda self: self._lens_of("base", "dla_mlp"), doc="the base's dla_mlp; None without a base")
    dla_embed_base = property(lambda self: self._lens_of("base", "dla_embed"), doc="the base's dla_embed; None without a base")
    dla_const_base = property(lambda self: self._lens_of("base", "dla_const"), doc="the base's dla_const; None without a base")
    dla_logit_base = property(lambda self: self._lens_of("base", "logit"), doc="the base's dla_logit; None without a base")
    dla_divisor_compare = property(lambda self: self._lens_of("compare", "dla_divisor"), doc="the comparison's dla_divisor; None without one")
    dla_divisor_base = property(lambda self: self._lens_of("base", "dla_divisor"), doc="the base's dla_divisor; None without a base")
    dla_const_free_compare = property(lambda self: self._lens_of("compare", "dla_const_free"), doc="the comparison's dla_const_free; None without one")
    dla_const_free_base = property(lambda self: self._lens_of("base", "dla_const_free"), doc="the base's dla_const_free; None without a base")
    # The tau = 1 side by its name, as the _tau1 files (beside a base the comparison is tau = 1): None
    # where the comparison is another (a twin, layer-local, unedited) or none.
    lens_loss_tau1 = property(lambda self: self._lens_of("tau1", "loss"), doc="tau = 1's lens_loss (lens_loss_tau1.npy); None where the comparison is not tau = 1")
    dla_tau1 = property(lambda self: self._lens_of("tau1", "dla"), doc="tau = 1's dla; None where the comparison is not tau = 1")
    dla_mlp_tau1 = property(lambda self: self._lens_of("tau1", "dla_mlp"), doc="tau = 1's dla_mlp; None where the comparison is not tau = 1")
    dla_embed_tau1 = property(lambda self: self._lens_of("tau1", "dla_embed"), doc="tau = 1's dla_embed; None where the comparison is not tau = 1")
    dla_const_tau1 = property(lambda self: self._lens_of("tau1", "dla_const"), doc="tau = 1's dla_const; None where the comparison is not tau = 1")
    dla_logit_tau1 = property(lambda self: self._lens_of("tau1", "logit"), doc="tau = 1's dla_logit; None where the comparison is not tau = 1")
    dla_divisor_tau1 = property(lambda self: self._lens_of("tau1", "dla_divisor"), doc="tau = 1's dla_divisor; None where the comparison is not tau = 1")
    dla_const_free_tau1 = property(lambda self: self._lens_of("tau1", "dla_const_free"), doc="tau = 1's dla_const_free; None where the comparison is not tau = 1")

    def lens_top(self, layer, position, k=5, side="ssa"):
        """The k (at most 5) most likely next tokens at `position` (-1: the last) read after `layer`
        (0: the embeddings, n_layer: the model's own) as [(piece, probability), ...]."""
        w = "lens_top()"
        layer, position, k = _int(w, "layer", layer), _position(w, position, self.n_tokens), _int(w, "k", k)
        lens = self.lens(side)
        if not 0 <= layer <= self.n_layer:
            raise ValueError(f"{w}: layer {layer} is out of range (0 to {self.n_layer})")
        if not 1 <= k <= lens["top_ids"].shape[2]:
            raise ValueError(f"{w}: k must be from 1 to {lens['top_ids'].shape[2]}")
        ids = [int(i) for i in lens["top_ids"][layer, position, :k]]
        probs = lens["top_probs"][layer, position, :k]
        return list(zip(self._h.id_pieces(ids), (float(p) for p in probs)))

    def attribute(self, position, token, side="ssa", through="own"):
        """Each part's share of the logit of `token` (an id, or a piece as ssaviz shows it: the
        text's pieces, lens_top()'s, predictions()', a stray byte as `tokenize` writes it, "\\xC2") at `position` (-1: the last token, T - 1, which
        predicts past the text; a.dla's -1 is T - 2, the last with a next token): a dict with heads
        [L, H], mlp [L], embed and const (floats), and logit, the logit they sum to (float32's
        rounding apart), as dla_at.json's; divisor, the side's final-norm divisor they were read
        through, and const_free, the constants' share outside it (every other part scales as
        1 / divisor). through="ssa" reads another side's parts through SSA's divisor, as the Lens tab
        and dla_at.json's through_ssa_divisor do, so that a part that wrote the same vector reads
        the same on both sides: then ssa_divisor, and final_norm, what the side's own divisor adds
        (the parts and final_norm sum to logit)."""
        w = "attribute()"
        if isinstance(token, str):
            token = self._piece_id(w, token)
        through = _str(w, "through", through)
        if through not in ("own", "ssa"):
            raise ValueError(f"{w}: through must be \"own\" or \"ssa\", not {_r(through)}")
        parts = self._h.attribute(_position(w, position, self.n_tokens), _int(w, "token", token), _str(w, "side", side), through == "ssa")
        L, H = self.n_layer, self.n_head
        n = L * H + L + 2
        out = {"heads": parts[:L * H].reshape(L, H), "mlp": parts[L * H:L * H + L], "embed": float(parts[n - 2]),
               "const": float(parts[n - 1]), "logit": float(parts[n]), "divisor": float(parts[n + 1]), "const_free": float(parts[n + 2])}
        if through == "ssa":
            out["ssa_divisor"], out["final_norm"] = float(parts[n + 3]), float(parts[n + 4])
        return out

    def _piece_id(self, w, piece):
        """The id whose piece is `piece` as ssaviz shows pieces. Where two ids show alike (a piece
        and its <0xNN> byte), the one in the text, else the one the piece tokenizes to; else the
        piece's tokenization where it is one id (the tokenizer's own spelling of it)."""
        if not piece:
            raise ValueError(f"{w}: the token is an empty piece: pass a piece as ssaviz shows it, or an id")
        try:
            piece.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{w}: the token {_r(piece)} is not valid UTF-8 text (a lone surrogate): pass a piece or an id") from None
        ids = list(self._h.piece_ids(piece))
        if not ids and _re.search(r"\\x[0-9A-Fa-f]{2}", piece):  # bytes as `tokenize` and the window write them: "\xC2", " \xF0\x9F"
            raw = _re.sub(rb"\\x([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), piece.encode("utf-8"))
            # The piece of those bytes; one byte's may be spelled <0xC2> (SentencePiece's byte fallback).
            ids = list(self._h.piece_ids(raw, True)) or (list(self._h.piece_ids(f"<0x{raw[0]:02X}>")) if len(raw) == 1 else [])
        if not ids and len(piece.encode("utf-8")) > 64:  # no piece is that long: not tokenized (past the context, it would say truncate=)
            raise ValueError(f"{w}: {_r(piece)} is no piece of the vocabulary (pass one piece or an id)")
        for narrower in (set(int(i) for i in self.ids), set(self.model.tokenize(piece)[0])):
            if len(ids) > 1:
                ids = [i for i in ids if i in narrower] or ids
        if len(ids) == 1:
            return ids[0]
        if ids:
            raise ValueError(f"{w}: {_r(piece)} is the piece of ids {', '.join(map(str, ids))}: pass the id")
        tokenized = self.model.tokenize(piece)[0]
        if len(tokenized) != 1:
            raise ValueError(f"{w}: {_r(piece)} is no piece of the vocabulary: it tokenizes to {len(tokenized)} tokens, "
                         "not one (pass one piece or an id)")
        return tokenized[0]

    # Figures: the renderer of `ssaviz export`'s PNG / SVG / HTML files.
    def heatmap(self, layer, head, map="ssa", **flags):
        """Head (layer, head)'s map as `ssaviz export` draws heatmaps/L{l}_H{h}.png; map "ssa",
        "compare" or "diff", and with a base "base" or "base_diff" (SSA - base); flags: colormap,
        log, size, and as every figure's no_titles, text_scale."""
        w = "heatmap()"
        flags = _figure_flags(w, flags, _FIGURE_KEYWORDS[w])
        return Figure(self._h.heatmap(_int(w, "layer", layer), _int(w, "head", head), _str(w, "map", map), flags), f"L{layer}_H{head}")

    def heads_grid(self, map="ssa", **flags):
        """Every head's map on one scale, layers as rows; flags: colormap, log, no_titles, text_scale."""
        w = "heads_grid()"
        return Figure(self._h.heads_grid(_str(w, "map", map), _figure_flags(w, flags, _FIGURE_KEYWORDS[w])), "heads_grid")

    def lens_grid(self, map="ssa", **flags):
        """The logit lens as `export --lens` draws it: map "ssa", "compare" or "base", that side's
        p of each token read after each layer, columns labelled with the token predicted (lens.png,
        lens_compare.png, lens_base.png); "diff" or "base_diff", SSA's loss of each token minus the
        comparison's or the base's (lens_diff.png,
        lens_diff_base.png: where in depth fine-tuning changed the prediction; blue where SSA
        predicts it better, as every loss change reads), on a symmetric scale
        whose ends are the 99th percentile of the cells' changes (the few beyond it in the end
        colours; the title gives the largest); beside a base "drift", tau = 1's loss minus the base's
        (lens_diff_drift.png: the other weights' drift), the three differences on one scale, as the
        export draws them. flags: no_titles, text_scale."""
        w = "lens_grid()"
        return Figure(self._h.lens_grid(_str(w, "map", map), _figure_flags(w, flags, _FIGURE_KEYWORDS[w])), "lens")

    def highlight(self, by="tau_q", scope="model", **flags):
        w = "highlight()"
        _figure_flags(w, flags, _FIGURE_KEYWORDS[w], {"highlight": "by", "highlight_scope": "scope"})
        if isinstance(scope, tuple):
            scope = ",".join(str(_int(w, "scope", v)) for v in scope)
        elif not isinstance(scope, str):
            scope = str(_int(w, "scope", scope))
        by = _str(w, "by", by)
        by = _COLORING_OF_PYTHON_KEY.get(by, by)  # metrics' name for it: by="js" is by="js_divergence"
        return Figure(self._h.highlight(_flags(w, dict(flags, highlight=by, highlight_scope=scope))), "highlight")
    highlight.__doc__ = _highlight_doc()

    def plot(self, name, **flags):
        """A Sparsity plot: "dilution", "tau_q_histogram", "qk_spectrum" or "sink_mass"; beside a base
        (compare="base"), "finetune" (also "fine-tune"; each head's JS change, the temperatures' part and the drift's) or
        "finetune_loss" (each token's loss change in the same two parts); the attribution's, as
        `export --lens` draws them: "dla_bars" / "dla_layers" (the logit of the token after position split
        by head / by layer on every side, position as a.dla's last axis counts it, -1 the default;
        target= "next" (the default), "top" (SSA's top prediction, at the last token too: -1 is then the
        last token) or "next-against-other" (the next token's logit less SSA's most likely other's), as
        export's dla_target=), "dla_heads"
        (side= "ssa", "compare" or "base": each head's mean part) and beside a base "dla_heads_change" (how
        far fine-tuning moved each head's part, |SSA - tau = 1| and |tau = 1 - base|, mean over positions); rank_heads()'s, as `export --rank-heads`
        draws them (measured first where rank_heads() has not run): "head_impacts" (each head's
        temperatures' part, beside a base the drift's parts and path), "head_impacts_tokens" (each head's
        part token by token) and beside a base "head_impacts_drift_tokens" (the drift's path token by
        token). flags: sink_eps for "sink_mass", log for "finetune", and for every plot no_titles, text_scale."""
        w = "plot()"
        name = _str(w, "name", name)
        if name in _RANK_PLOTS:
            text = _figure_flags(f"plot({_r(name)})", flags, _TEXT_KEYWORDS)
            self.rank_heads()
            return Figure(self._h.rank_figure(name, text), name)
        if name in _DLA_PLOTS:
            takes = _DLA_PLOTS[name] + _TEXT_KEYWORDS
            for keyword in flags:
                if keyword not in takes:
                    raise ArgumentTypeError(f"plot({_r(name)}) takes no keyword {_shown(keyword)} (its keywords: {', '.join(takes)})")
            text = _flags(w, {k: v for k, v in flags.items() if k in _TEXT_KEYWORDS})
            if name == "dla_heads":
                return Figure(self._h.dla_figure(name, _str(w, "side", flags.get("side", "ssa")), 0, "next", text), name)
            if name == "dla_heads_change":  # beside a base: each head's part, how far the temperatures and the drift moved it
                if self.comparison_kind != "base":
                    raise ValueError(f"plot({_r(name)}): the analysis has no base (analyze with compare=\"base\")")
                return Figure(self._h.dla_figure(name, "ssa", 0, "next", text), name)
            # A position as a.dla's last axis counts them: the one that predicts, its next token's logit
            # split (-1: the last that has a next token, T - 2); target="top" splits SSA's top prediction,
            # which the last token has too (-1: T - 1, what comes after the text), "next-against-other" the
            # next token's logit less SSA's most likely other token's, as --dla-target.
            target = _str(w, "target", flags.get("target", "next"))
            if target not in ("next", "top", "next-against-other"):
                raise ValueError(f"{w}: target {_r(target)} is not one of next, top, next-against-other")
            columns = self.n_tokens if target == "top" else self.n_tokens - 1
            position = _int(w, "position", flags.get("position", -1), bits=64)
            if columns < 1:
                raise ValueError(f"plot({_r(name)}): the attribution needs 2 tokens or more (a next token's logit)")
            if not -columns <= position < columns:
                what = ("the text's positions (the last: SSA's prediction after the text)" if target == "top"
                        else "the positions that predict a next token of the text (as a.dla's last axis)")
                raise ValueError(f"{w}: position {position} is out of range: 0 to {columns - 1}, {what}, or {-columns} to -1 from the end")
            return Figure(self._h.dla_figure(name, "", position % columns, target, text), name)
        takes = _PLOT_KEYWORDS.get(name)  # a name that is no plot: the engine names the plots
        return Figure(self._h.plot(name, _flags(w, flags) if takes is None else _figure_flags(f"plot({_r(name)})", flags, takes)), name)

    @_saying_base("analyze with base=DIR, or compare=\"base\"")
    def export(self, out, formats=None, layers=None, heads=None, **flags):
        """Writes what `ssaviz export` writes for this analysis into `out`: formats of json, npy,
        csv, png, svg, html (default all but csv); layers and heads: the per-head files' (all);
        flags: maps, colormap, log, size, png_scale, no_titles, text_scale, highlight, highlight_scope, temperature_scale, sink_eps,
        lens, dla_position and dla_target (with lens: whose logit dla_bars and dla_layers split, and where;
        dla_at.json), rank_heads (head_impacts.json / .csv / .png, as rank_heads())."""
        w = "export()"
        if "base" in flags:  # the analysis exports the sides it has: a base is chosen where it is made
            raise ValueError(f"{w}: base= goes with Model.analyze(text, base=...): an analysis exports the sides it was made with")
        self._h.export(_fs(_path(w, "out", out)), _export_flags(w, flags, formats, layers, heads))
        return _os.fspath(out)


#-----------------------------------------------------------------------------
# Figures
#-----------------------------------------------------------------------------

class Figure:
    """A figure from the export's renderer: shown inline by Jupyter (PNG and SVG; the highlight
    also as HTML with each token's value on hover), written by save()."""

    def __init__(self, handle, name):
        self._f = handle
        self.name = name

    width = property(lambda self: self._f.width)
    height = property(lambda self: self._f.height)
    title = property(lambda self: self._f.title)

    def __repr__(self):
        return f"<ssaviz.Figure {self.name} {self.width} x {self.height}>"

    def png(self, scale=1):
        """PNG bytes; scale: pixels per figure pixel, 1 to 4 (2 or 3 for print), as export's png_scale."""
        return self._f.png(_whole("png()", "scale", scale))

    def svg(self):
        return self._f.svg()

    def html(self):
        return self._f.html or None

    def _repr_png_(self):
        return self._f.png()

    def _repr_svg_(self):
        return self._f.svg()

    def _repr_html_(self):
        html = self._f.html
        if not html:
            return None
        # The standalone page in a frame of its own, so its styles stay out of the notebook's.
        import html as _html
        height = max(120, self.height + 40)
        return (f'<iframe srcdoc="{_html.escape(html, quote=True)}" style="width: 100%; height: {height}px; border: 0" '
                f'title="{_html.escape(self.title)}"></iframe>')

    def save(self, path, scale=1):
        """Writes .png, .svg or (a highlight) .html, by the path's extension; scale: a PNG's pixels per
        figure pixel, 1 to 4 (an SVG or a page is the same at any)."""
        path = _path("save()", "path", path)
        scale = _whole("save()", "scale", scale)
        ext = _os.path.splitext(path)[1].lower()
        if scale != 1 and ext != ".png":
            raise ValueError(f"save(): scale= is a PNG's: {_r(path)} is drawn at any size")
        if ext == ".png":
            data = self._f.png(scale)
        elif ext == ".svg":
            data = self._f.svg().encode("utf-8")
        elif ext in (".html", ".htm") and self._f.html:
            data = self._f.html.encode("utf-8")
        else:
            kinds = ".png, .svg" + (", .html" if self._f.html else "")
            raise ValueError(f"save(): {_r(path)}: a figure saves as {kinds}")
        _ssaviz.write_file(_fs(path), data)  # as an export writes: a temporary name renamed, never through a link
        return path


#-----------------------------------------------------------------------------
# The window, the bundled examples, batches
#-----------------------------------------------------------------------------

def _binary():
    for candidate in (_os.environ.get("SSAVIZ_BINARY"), _ssaviz.binary):
        if candidate and _os.access(candidate, _os.X_OK):
            return candidate
    import shutil
    found = shutil.which("ssaviz")
    if not found:
        raise FileNotFoundError("the ssaviz binary was not found (set SSAVIZ_BINARY)")
    return found


def show(model=None, text=None, **flags):
    """Opens the desktop window on the same model (its folder, device and flags) and text, and
    returns with its subprocess.Popen once it runs. flags: the window's (show="heads", ...).
    Raises RuntimeError where there is no display, or when the window exits at once (its error)."""
    where = "show()"
    if not _os.environ.get("DISPLAY") and not _os.environ.get("WAYLAND_DISPLAY"):
        raise RuntimeError(f"{where}: no display to open the window on ($DISPLAY and $WAYLAND_DISPLAY are unset); "
                           "use the figures (a.heatmap(...), a.export(...)) instead")
    if model is None or isinstance(model, (str, _os.PathLike)):
        model = load(model)
    if not isinstance(model, Model):
        raise ArgumentTypeError(f"{where}: model must be a Model or a path, not {type(model).__name__}")
    args = [_binary()] + list(model._core.window_args(_flags(where, flags)))
    text_file = None  # a long text's, removed once the window has read it (a copy of the text stayed in /tmp)
    if text is not None:
        data = _text(where, text)
        nul = data.find(b"\0")
        if nul >= 0:  # as the window refuses --text-file's (subprocess said "embedded null byte")
            raise ValueError(f"{where}: the text holds a NUL character at byte {nul} (the window's editor would hide what follows it)")
        if len(data) < 100_000:
            args += ["--text", data.decode("utf-8", "surrogateescape")]
        else:  # beyond what one argument may hold: a file the window reads at start
            with _tempfile.NamedTemporaryFile("wb", suffix=".txt", prefix="ssaviz-", delete=False) as f:
                f.write(data)
            args += ["--text-file", f.name]
            text_file = f.name

    def remove_text_file():
        if text_file:
            try:
                _os.remove(text_file)
            except OSError:
                pass

    errors = _tempfile.TemporaryFile()
    window = _subprocess.Popen(args, stdin=_subprocess.DEVNULL, stderr=errors, start_new_session=True)
    try:  # a window that cannot start (no GL, a bad flag) exits within moments: say why here
        code = window.wait(timeout=1.5)
    except _subprocess.TimeoutExpired:
        if text_file:  # the window reads it as it starts, before its GL context: gone once it has (a minute on)
            import atexit
            import threading
            import time
            started = time.monotonic()
            threading.Thread(target=lambda: (_wait_quietly(window, 60), remove_text_file()), daemon=True).start()
            # A script that ends sooner takes the thread with it: removed then, once the window has had time to read it.
            atexit.register(lambda: remove_text_file() if window.poll() is not None or time.monotonic() - started > 5 else None)
        return window
    remove_text_file()
    errors.seek(0)
    message = errors.read().decode("utf-8", "replace").strip().splitlines()
    if code != 0:
        raise RuntimeError(f"{where}: the window exited with code {code}" + (f": {message[-1]}" if message else ""))
    return window


def _wait_quietly(process, seconds):
    try:
        process.wait(timeout=seconds)
    except _subprocess.TimeoutExpired:
        pass


def examples():
    """The bundled examples by id ("english", "licenses", "graph", "graph-run", "passkey"): title,
    model and twin folders (a run's: its run folders; a fine-tune's: its base, "base"), text.
    A fine-tune against its base: load(x["model"]).analyze(x["text"], compare="base", base=x["base"])."""
    return {x["id"]: x for x in _ssaviz.examples()}


from ._batch import export_batch  # noqa: E402
from ._run import Run, RunAnalysis, load_run  # noqa: E402
