"""ssaviz.load_run: a training run as a timeline (SPEC section 11), here or on a dask.distributed cluster.

A run folder holds one model's checkpoints over training (lit-gpt iter-NNNNNN-ckpt.pth beside
lit_config.json, Hugging Face checkpoint-N/ folders); the engine finds them in step order, as
`ssaviz export --run` does. Run.analyze opens each checkpoint on its own (one model in memory at a
time in each process), runs the text and keeps its arrays, stacked by step. With a Dask client the
checkpoints are tasks, each worker opening its own; the results come back in step order.
"""

import json
import os
import shutil
from numbers import Integral

import numpy as np

from . import _fs, _python_words, _r, _ssaviz, _warn_failures


# With lens=True, SSA's lens of each step (Analysis.lens()'s arrays, named as `export --lens` names its files),
# and its comparison's and base's loss by layer and heads' attribution (run.json's lens_loss_compare, lens_loss_base).
_LENS_ARRAYS = {"lens_loss": "loss", "dla": "dla", "dla_mlp": "dla_mlp", "dla_embed": "dla_embed", "dla_const": "dla_const", "dla_logit": "logit"}
_LENS_SIDE_ARRAYS = {"lens_loss": "loss", "dla": "dla"}


def _analyze_step(step, path, device, flags, text, compare, truncate, base=None, lens=False):
    """One checkpoint on the text: (step, {name: array}, None) or (step, None, error). A checkpoint
    that does not open is the step's failure; what the text or the comparison make fail (a twin or
    base that does not open, a text the tokenizer refuses) would fail every step, and is raised.
    lens: SSA's lens arrays too (_LENS_ARRAYS)."""
    from . import Model
    from ._batch import _worker_threads
    _worker_threads()
    if compare == "base":  # what the step's folder lacks (lit_config.json, the tokenizer), read from the base's, as export --run does
        given = {k: os.fsdecode(v) for k, v in _ssaviz.hints_from_base(_fs(path), _fs(base or "")).items() if flags.get(k) is None}
        flags = {**flags, **given}
    try:
        model = Model(path, device, **flags)
    except (ValueError, OSError, RuntimeError) as e:  # a checkpoint the engine refuses: named, skipped
        return step, None, str(e)
    with model:
        model._live().set_run_step()  # the run's base for every step (a base/ inside one step's folder is passed over)
        a = model.analyze(text, compare=compare, truncate=truncate, base=base)  # overflowing: skipped below, said so
        if a._h.not_finite:  # a step that overflows (a run that diverged): skipped, as `export --run` skips it
            return step, None, a._h.not_finite
        arrays = {k: np.array(v) for k, v in a.metrics.items()}
        for name in ("tau_q", "tau_v", "loss", "loss_compare", "loss_base"):
            v = getattr(a, name)
            if v is not None:
                arrays[name] = np.array(v)
        arrays["ids"] = np.array(a.ids, dtype=np.int32)
        if lens:
            side = a.lens("ssa")
            arrays.update({name: np.array(side[key]) for name, key in _LENS_ARRAYS.items()})
            # The sides `export --run --lens` reads: the comparison (not the unedited model, SSA itself) and the base.
            others = (["compare"] if a.compare != "none" and a.comparison_kind != "unedited" else []) + (["base"] if a.comparison_kind == "base" else [])
            for other in others:
                side = a.lens(other)
                arrays.update({f"{name}_{other}": np.array(side[key]) for name, key in _LENS_SIDE_ARRAYS.items()})
        return step, arrays, None


def _export_step(step, path, full_out, device, load_flags, text, compare, base, ablate, truncate, export_flags):
    """One checkpoint on the text as `ssaviz export --run` analyses it: its result as JSON (a
    failure is inside it); with `full_out`, that checkpoint's whole export written there too.
    base: the base's folder with compare="base" ("": the one beside each checkpoint)."""
    from . import _fs
    from ._batch import _worker_threads
    _worker_threads()
    return _ssaviz.run_step(step, _fs(path), device, load_flags, text, _fs(compare), _fs(base), ablate, truncate, export_flags,
                            _fs(full_out))


def _run_map(client, fn, jobs, **kwargs):
    """fn(step, path, full_out, **kwargs) for each (step, path, full_out) job, in job order: here, or
    on the client's workers."""
    if client is None:
        return [fn(*job, **kwargs) for job in jobs]
    futures = client.map(fn, *zip(*jobs), pure=False, **kwargs)
    return client.gather(futures)


def _every_row(key):
    """Whether a head's value averages every row (the catalogue's reading: the temperatures'), not
    a row metric's rows 2..T."""
    return any(key in (q["key"], q["python"]) and q["reading"] == "every_row" for q in _quantities())


def _quantities():
    from . import _CATALOGUE
    return _CATALOGUE["quantities"]


def _listed(steps):
    """Steps in a message: all of a few, the ends of many."""
    return ", ".join(map(str, steps)) if len(steps) <= 10 else f"{steps[0]}, {steps[1]}, ..., {steps[-1]}"


class RunAnalysis:
    """A text through every checkpoint of a run. steps: int64 [S], the steps analysed (a step that
    failed is in `failed`, not here). arrays(name) stacks that array of every step's analysis:
    Analysis.metrics's keys ([S, L, H, T] or [S, L, H]), tau_q, tau_v ([S, L, H, T]), loss,
    loss_compare, with a base loss_base ([S, T - 1]), analysed with lens=True SSA's lens: lens_loss
    ([S, L + 1, T - 1], the loss read after each layer), dla ([S, L, H, T - 1], each head's part of
    the next token's logit), dla_mlp, dla_embed, dla_const, dla_logit, and its comparison's and
    base's lens_loss_compare, dla_compare, lens_loss_base, dla_base; head(name) is a row metric's value per head,
    [S, L, H], as metrics.json's and run.json's (the mean over query rows 2..T; over every row for
    tau_q, tau_v and effective_qk_norm) (against a base head("js_total") is
    all that fine-tuning had changed by each step, head("js_drift") the other weights' part)."""

    def __init__(self, run, steps, arrays, failed):
        self.run = run
        self.steps = np.asarray(steps, dtype=np.int64)
        self._arrays = arrays
        self.failed = failed

    def __repr__(self):
        return f"<ssaviz.RunAnalysis {len(self.steps)} steps of {self.run.path!r}, {len(self.failed)} failed>"

    def keys(self):
        """The names arrays() and head() take (Analysis.metrics's keys, tau_q, tau_v, the losses, ids)."""
        return sorted(self._arrays[0]) if self._arrays else []

    def _key(self, where, name):
        """The array's key for `name` or the name metrics.json and run.json give it (js_divergence is js)."""
        from . import ArgumentTypeError
        if isinstance(name, Integral) and not isinstance(name, bool):  # a step: every step's array is stacked
            steps = [int(s) for s in self.steps]
            there = (f"step {name}'s is arrays(name)[{steps.index(name)}]" if name in steps else
                     f"step {name} is not one of the {len(steps)} steps analysed ({_listed(steps)})")
            raise ArgumentTypeError(f"{where}: takes an array's name (keys(): \"entropy\", \"tau_q\", ...), not a step; "
                                    f"each is stacked by step, and {there}")
        if not isinstance(name, str):
            raise ArgumentTypeError(f"{where}: name must be a string (keys()), not {type(name).__name__}")
        if not self._arrays:
            raise ValueError(f"{where}: no step of the run was analysed")
        if name in self._arrays[0]:
            return name
        from . import _python_key
        key = _python_key(name, lambda k: k in self._arrays[0])
        if key is not None:
            return key
        raise ValueError(f"{where}: {_r(name)} is not one of the run's arrays ({', '.join(self.keys())})")

    def arrays(self, name):
        """That array of every step analysed, stacked: [S, ...] (see keys()); step steps[k]'s is [k]."""
        key = self._key("RunAnalysis.arrays()", name)
        return np.stack([a[key] for a in self._arrays])

    def head(self, name):
        """A row metric's value per head, [S, L, H], as metrics.json's and run.json's: the mean over
        query rows 2..T (row 1 has one key), over every row for tau_q, tau_v and effective_qk_norm."""
        where = "RunAnalysis.head()"
        key = self._key(where, name)
        rows = self.arrays(key)
        lens = {**_LENS_ARRAYS, **{f"{n}_{side}": k for n, k in _LENS_SIDE_ARRAYS.items() for side in ("compare", "base")}}
        if key in lens:  # by position, not by query row (dla was [S, L, H, T - 1] and taken for a row metric)
            raise ValueError(f"{where}: {_r(name)} is the lens's, {list(rows.shape)} by position, not a row metric; "
                             f"arrays({_r(name)}).mean(axis=-1) is its mean over positions")
        if rows.ndim == 3 and rows.shape[1:] == self.arrays("tau_q").shape[1:3]:
            raise ValueError(f"{where}: {_r(name)} is [S, L, H], not a row metric; arrays({_r(name)}) is already per head")
        if rows.ndim != 4:
            raise ValueError(f"{where}: {_r(name)} is {list(rows.shape)}, not a row metric [S, L, H, T]")
        if _every_row(key):
            return rows.mean(axis=-1)
        return rows[..., 1:].mean(axis=-1) if rows.shape[-1] > 1 else np.full(rows.shape[:-1], np.nan, np.float32)

    @property
    def loss_mean(self):
        """[S]: each step's mean loss on the text."""
        return self.arrays("loss").mean(axis=-1)

    @property
    def lens_loss_mean(self):
        """[S, L + 1]: each step's mean loss read after the embeddings (0) and each layer (L: its own
        loss), as run.json's lens_loss; analysed with lens=True."""
        if self._arrays and "lens_loss" not in self._arrays[0]:
            raise ValueError("RunAnalysis.lens_loss_mean: the run was analysed without the lens: Run.analyze(text, lens=True)")
        return self.arrays("lens_loss").mean(axis=-1)

    def steps_to_sparsity(self, name="entropy"):
        """[L, H] int64: each head's first step whose mean `name` is below half of its value at the
        run's first analysed step; -1 where it never is (as run.json's steps_to_sparsity, null there)."""
        h = self.head(name)
        first = h[0]
        below = (h < 0.5 * first) & (first > 0)
        found = below.any(axis=0)
        return np.where(found, self.steps[below.argmax(axis=0)], -1)


class Run:
    """A training run's checkpoints, in step order (ssaviz.load_run)."""

    def __init__(self, path, device="auto", **flags):
        from . import _flags, _fs, _path, _str
        where = "load_run()"
        self.path = _path(where, "path", path)
        self.device = _str(where, "device", device)
        _ssaviz.check_load_flags(self.device, _flags(where, flags), where)  # every step opens with them
        self.flags = flags
        if not os.path.lexists(self.path):
            raise FileNotFoundError(f"{where}: no such folder: {_r(self.path)}")
        found = _ssaviz.run_steps(_fs(self.path))
        self.steps = [step for step, _ in found]
        self.checkpoints = [os.fsdecode(checkpoint) for _, checkpoint in found]

    def __len__(self):
        return len(self.steps)

    def __repr__(self):
        return f"<ssaviz.Run {len(self.steps)} steps ({self.steps[0]} .. {self.steps[-1]}) of {self.path!r}>"

    def model(self, step):
        """The checkpoint of `step` as a Model."""
        from . import Model, _int
        step = _int("Run.model()", "step", step, bits=64)
        if step not in self.steps:
            raise ValueError(f"Run.model(): step {step} is not one of the run's {len(self.steps)} steps ({_listed(self.steps)})")
        return Model(self.checkpoints[self.steps.index(step)], self.device, **self.flags)

    def _check_open_here(self, where, client):
        """Without a client every step opens here: a device, dtype, config= or tokenizer= this
        process lacks is the call's error, before the first step (it was each step's, then "no
        checkpoint could be analysed"). A client's workers may have GPUs and files this one has not."""
        from . import _flags
        if client is None:
            _ssaviz.check_open_here(self.device, _flags(where, self.flags), where)

    def analyze(self, text, compare="vanilla", truncate=False, client=None, base=None, lens=False):
        """Every checkpoint on `text` (as Model.analyze), one model in memory at a time; with a
        dask.distributed `client`, the checkpoints run on its workers. A checkpoint that does not
        open or run, or has another shape than the first step's, is skipped with a warning and
        listed in `failed`. base: a fine-tune's base (as Model.analyze's; implies compare="base"),
        every step against it. lens=True: each step's lens too, SSA's, its comparison's and the base's
        (a forward pass more a side and step): arrays("lens_loss"), arrays("dla") ...,
        arrays("lens_loss_compare"), lens_loss_mean. Returns a RunAnalysis."""
        from . import _base_arg, _bool, _text
        from ._batch import _client
        where = "Run.analyze()"
        client = _client(where, client)
        self._check_open_here(where, client)
        text = _text(where, text)
        truncate = _bool(where, "truncate", truncate)
        lens = _bool(where, "lens", lens)
        compare, base_dir = _base_arg(where, compare, base)
        base = base_dir or None
        jobs = list(zip(self.steps, self.checkpoints))
        if client is None:
            results = [_analyze_step(step, path, self.device, self.flags, text, compare, truncate, base, lens) for step, path in jobs]
        else:
            futures = client.map(_analyze_step, [s for s, _ in jobs], [p for _, p in jobs], device=self.device, flags=self.flags,
                                 text=text, compare=compare, truncate=truncate, base=base, lens=lens, pure=False)
            results = sorted(client.gather(futures), key=lambda r: r[0])
        steps, arrays, failed, shape, said = [], [], [], None, []
        for (step, result, error), (_, path) in zip(results, jobs):
            if error is None and shape is not None and result["tau_q"].shape != shape:
                # As the command line says it: the step the others are set against, named.
                first = f"the run's first analysed step, {steps[0]} ({os.path.basename(first_path)})"
                (layers, heads, _), (L, H, _) = result["tau_q"].shape, shape
                error = (f"has {layers} layers x {heads} heads; {first}, has {L} x {H}" if (layers, heads) != (L, H)
                         else f"tokenises the text otherwise than {first}: another tokenizer")
            if error is not None:
                # The checkpoint by its name, as Run.export and the command line say it: the error names its path.
                said.append(f"ssaviz: step {step} ({os.path.basename(path)}): {error}; skipped")
                failed.append({"step": step, "checkpoint": path, "error": error})
                continue
            if shape is None:
                shape, first_path = result["tau_q"].shape, path
            steps.append(step)
            arrays.append(result)
        _warn_failures(said, "steps", "RunAnalysis.failed", stacklevel=2,
                       reasons=[_ssaviz.run_step_reason(f["error"], _fs(os.path.basename(os.fspath(f["checkpoint"])))) for f in failed])
        if not steps:  # as Run.export: a timeline of no step is an error, not arrays numpy cannot stack
            raise ValueError(f"{where}: no checkpoint of the run could be analysed ({len(failed)} failed; step {failed[0]['step']}: "
                             f"{failed[0]['error']})")
        return RunAnalysis(self, steps, arrays, failed)


    def export(self, text, out, steps=None, compare_run=None, compare="vanilla", ablate=None, truncate=False, formats=None,
               layers=None, heads=None, client=None, base=None, **flags):
        """Writes what `ssaviz export --run DIR --text TEXT --out OUT` writes, byte for byte: run.json,
        run.csv, tau_q.npy and, with "png" / "svg" among `formats`, the curves; for `steps` ("all" or a
        list of steps) each step's whole export as OUT/step-NNNNNN/. compare_run: a second run (a path
        or a Run) beside the first in every file, its files under OUT/compare-run/. With a
        dask.distributed `client` the checkpoints are its workers' tasks (each opening its own; OUT a
        folder every worker sees); the files are written here, from the steps in step order. A step
        that fails is named in a warning and in run.json's "failed". Returns run.json as a dict.
        compare (not None), ablate, truncate, base: as Model.analyze (against a base, run.json's and run.csv's
        heads gain js_total and js_drift, and the curves theirs); formats, layers, heads, flags: as
        Analysis.export. lens=True: each step's loss read after each layer (every side's) in run.json's
        rows (lens_loss, lens_loss_compare, lens_loss_base: [L + 1], 0 the embeddings, L the model's
        own), run_lens.csv and the lens_loss curve, and the chosen steps' lens files."""
        import json
        from . import ArgumentTypeError, Model, _ablate, _base_arg, _bool, _export_compare, _export_flags, _flag_value, _flags, _fs, _path, _text
        from ._batch import _client
        where = "Run.export()"
        spec = _ablate(where, ablate)  # first: ablate=5 is said as ablate's, not as the lens's
        # As `export --run --lens --ablate` is refused; lens="false" is no lens, as the engine reads a switch.
        if flags.get("lens") is not None and _flag_value(where, "lens", flags["lens"]) in ("true", "1") and ablate is not None:
            raise ValueError(f"{where}: lens=True runs the model as loaded: not with ablate=")
        client = _client(where, client)
        self._check_open_here(where, client)
        text = _text(where, text)
        out = _path(where, "out", out)
        truncate = _bool(where, "truncate", truncate)
        compare, base_dir = _base_arg(where, compare, base)
        kind, _ = _export_compare(where, compare)
        export_flags = _export_flags(where, flags, formats, layers, heads)
        other = None
        if isinstance(compare_run, (str, os.PathLike)):
            if not os.path.lexists(_path(where, "compare_run", compare_run)):
                raise FileNotFoundError(f"{where}: compare_run: no such folder: {_r(os.fspath(compare_run))}")
            other = Run(compare_run, self.device, **self.flags)
        elif isinstance(compare_run, Run) or compare_run is None:
            other = compare_run
        else:
            twin = " (a Model is one model: a twin beside each step is compare=)" if isinstance(compare_run, Model) else ""
            raise ArgumentTypeError(f"{where}: compare_run must be a second run, its folder or a Run (ssaviz.load_run), not "
                                    f"{type(compare_run).__name__}{twin}")
        if other is not None:
            _ssaviz.check_compare_run(_fs(self.path), _fs(other.path), where)
        _ssaviz.check_export(_fs(out), export_flags, where, runs=[_fs(r.path) for r in (self, other) if r is not None])
        chosen = self._chosen(where, steps)
        for name in ("dla_position", "dla_target"):  # as the command line: they act on the steps= exports alone
            if flags.get(name) is not None and not chosen:
                raise ValueError(f"{where}: {name}= picks what a step's attribution figures split, which only steps= exports hold: give steps=")
        load_flags = _flags(where, self.flags)
        common = dict(device=self.device, load_flags=load_flags, text=text, compare=kind, base=base_dir, ablate=spec, truncate=truncate,
                      export_flags=export_flags)
        runs = [(self, "")] + ([(other, "compare-run")] if other else [])
        # Where the files go is checked before any checkpoint is opened; they are written into a folder
        # of their own inside OUT (every worker sees it) and moved into place at the end, so a run that
        # stops leaves OUT as it was (as the command line's).
        folders = [os.path.join(sub, f"step-{s:06d}") for r, sub in runs for s in r.steps if s in chosen] + (["compare-run"] if other else [])
        out_existed = os.path.lexists(out)
        stage = _ssaviz.stage_run(_fs(out), [_fs(f) for f in folders], export_flags)  # held while it lives
        staged = stage.path
        try:
            results = []
            for r, sub in runs:
                # A chosen step's whole export is written as it is analysed, as the command line's (the
                # step analysed once); one of a step that then does not fit the run is removed by write_run.
                folder = os.path.join(os.fsdecode(staged), sub)
                jobs = [(s, p, os.path.join(folder, f"step-{s:06d}") if s in chosen else "") for s, p in zip(r.steps, r.checkpoints)]
                if client is not None and sub and any(s in chosen for s in r.steps):
                    # The run's folder (compare-run) is made here, before any worker runs: workers each
                    # checking their compare-run/step-N would make and remove a missing one under the
                    # others (as export_batch makes OUT).
                    os.makedirs(folder, exist_ok=True)
                try:
                    results.append(_run_map(client, _export_step, jobs, **common))
                except ValueError as e:  # what stops the compare run is said as its (a base of another shape than its steps)
                    if not sub:
                        raise
                    raise ValueError(f"{where}: compare_run {_r(os.fspath(r.path))}: {e}") from None
            report = _ssaviz.write_run(staged, _fs(self.path), results[0], _fs(other.path) if other else None, results[1] if other else [],
                                       export_flags, True)
            _warn_failures([f"ssaviz: {_python_words(message)}; skipped" for message in report["failed"]], "steps", "run.json's failed",
                           stacklevel=2, reasons=report["reasons"])
            _ssaviz.move_tree(staged, _fs(out))
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            if not out_existed:  # OUT too, when the run made it (and it is still empty)
                try:
                    os.rmdir(out)
                except OSError:
                    pass
            raise
        with open(os.path.join(out, "run.json"), encoding="utf-8") as f:
            return json.load(f)

    def _chosen(self, where, steps):
        """`steps` as a set: None (none), "all", or steps of the run."""
        from . import ArgumentTypeError, _int
        if steps is None:
            return set()
        if isinstance(steps, (bytes, bytearray)):
            raise ArgumentTypeError(f"{where}: steps must be \"all\" or a list of steps, not {type(steps).__name__}")
        if isinstance(steps, str):
            if steps != "all":
                raise ValueError(f"{where}: steps must be \"all\" or a list of the run's steps, not {_r(steps)}")
            return set(self.steps)
        try:
            steps = list(steps)
        except TypeError:
            raise ArgumentTypeError(f"{where}: steps must be \"all\" or a list of steps, not {type(steps).__name__}") from None
        chosen = set()
        for s in steps:
            s = _int(where, "a step", s, bits=64)
            if s not in self.steps:
                raise ValueError(f"{where}: steps: step {s} is not one of the run's {len(self.steps)} steps ({_listed(self.steps)})")
            chosen.add(s)
        if not chosen:
            raise ValueError(f"{where}: steps is empty: \"all\", steps of the run ({_listed(self.steps)}), or None (the default: "
                             "run.json and the curves without a step's whole export)")
        return chosen


def load_run(path, device="auto", **flags):
    """A training run (SPEC section 11): DIR's iter-NNNNNN-ckpt.pth files (beside lit_config.json)
    or checkpoint-N/ folders, in step order. device and flags: as ssaviz.load, for every checkpoint."""
    return Run(path, device, **flags)
