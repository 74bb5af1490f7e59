"""ssaviz.load_run: a training run as a timeline (SPEC section 11), here or on a dask.distributed cluster.

A run folder holds one model's checkpoints over training (lit-gpt iter-NNNNNN-ckpt.pth beside
lit_config.json, Hugging Face checkpoint-N/ folders); the engine finds them in step order, as
`ssaviz export --run` does. Run.analyze opens each checkpoint on its own (one model in memory at a
time in each process), runs the text and keeps its arrays, stacked by step. With a Dask client the
checkpoints are tasks, each worker opening its own; the results come back in step order.
"""

import warnings

import numpy as np

from . import _ssaviz


def _analyze_step(step, path, device, flags, text, compare, truncate):
    """One checkpoint on the text: (step, {name: array}, None) or (step, None, error)."""
    from . import Model
    from ._batch import _worker_threads
    _worker_threads()
    try:
        with Model(path, device, **flags) as model:
            a = model.analyze(text, compare=compare, truncate=truncate)
            arrays = {k: np.array(v) for k, v in a.metrics.items()}
            for name in ("tau_q", "tau_v", "loss", "loss_compare"):
                v = getattr(a, name)
                if v is not None:
                    arrays[name] = np.array(v)
            arrays["ids"] = np.array(a.ids, dtype=np.int32)
            return step, arrays, None
    except (ValueError, OSError, RuntimeError) as e:  # a checkpoint the engine refuses: named, skipped
        return step, None, str(e)


class RunAnalysis:
    """A text through every checkpoint of a run. steps: int64 [S], the steps analysed (a step that
    failed is in `failed`, not here). arrays(name) stacks that array of every step's analysis:
    Analysis.metrics's keys ([S, L, H, T] or [S, L, H]), tau_q, tau_v ([S, L, H, T]), loss,
    loss_compare ([S, T - 1]); head(name) is a row metric's mean over query rows 2..T, [S, L, H],
    as metrics.json's per-head numbers."""

    def __init__(self, run, steps, arrays, failed):
        self.run = run
        self.steps = np.asarray(steps, dtype=np.int64)
        self._arrays = arrays
        self.failed = failed

    def __repr__(self):
        return f"<ssaviz.RunAnalysis {len(self.steps)} steps of {self.run.path!r}, {len(self.failed)} failed>"

    def keys(self):
        return sorted(self._arrays[0]) if self._arrays else []

    def arrays(self, name):
        if not self._arrays:
            raise ValueError("no step of the run was analysed")
        if name not in self._arrays[0]:
            raise KeyError(f"{name!r} is not one of the run's arrays ({', '.join(self.keys())})")
        return np.stack([a[name] for a in self._arrays])

    def head(self, name):
        rows = self.arrays(name)
        if rows.ndim != 4:
            raise ValueError(f"{name!r} is [S, L, H], not a row metric; arrays({name!r}) is already per head")
        return rows[..., 1:].mean(axis=-1) if rows.shape[-1] > 1 else np.full(rows.shape[:-1], np.nan, np.float32)

    @property
    def loss_mean(self):
        """[S]: each step's mean loss on the text."""
        return self.arrays("loss").mean(axis=-1)

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
        from . import _path
        where = "load_run()"
        self.path = _path(where, "path", path)
        self.device = device
        self.flags = flags
        found = _ssaviz.run_steps(self.path)
        self.steps = [step for step, _ in found]
        self.checkpoints = [checkpoint for _, checkpoint in found]

    def __len__(self):
        return len(self.steps)

    def __repr__(self):
        return f"<ssaviz.Run {len(self.steps)} steps ({self.steps[0]} .. {self.steps[-1]}) of {self.path!r}>"

    def model(self, step):
        """The checkpoint of `step` as a Model."""
        from . import Model
        if step not in self.steps:
            raise ValueError(f"step {step} is not one of the run's {len(self.steps)} steps ({self.steps[0]} .. {self.steps[-1]})")
        return Model(self.checkpoints[self.steps.index(step)], self.device, **self.flags)

    def analyze(self, text, compare="vanilla", truncate=False, client=None):
        """Every checkpoint on `text` (as Model.analyze), one model in memory at a time; with a
        dask.distributed `client`, the checkpoints run on its workers. A checkpoint that does not
        open or run, or has another shape than the first step's, is skipped with a warning and
        listed in `failed`. Returns a RunAnalysis."""
        from . import _bool, _text
        where = "Run.analyze()"
        text = _text(where, text)
        truncate = _bool(where, "truncate", truncate)
        jobs = list(zip(self.steps, self.checkpoints))
        if client is None:
            results = [_analyze_step(step, path, self.device, self.flags, text, compare, truncate) for step, path in jobs]
        else:
            futures = client.map(_analyze_step, [s for s, _ in jobs], [p for _, p in jobs], device=self.device, flags=self.flags,
                                 text=text, compare=compare, truncate=truncate, pure=False)
            results = sorted(client.gather(futures), key=lambda r: r[0])
        steps, arrays, failed, shape = [], [], [], None
        for (step, result, error), (_, path) in zip(results, jobs):
            if error is None and shape is not None and result["tau_q"].shape != shape:
                error = f"has arrays of shape {result['tau_q'].shape}, the run's first step {shape}"
            if error is not None:
                warnings.warn(f"ssaviz: step {step} ({path}): {error}; skipped", stacklevel=2)
                failed.append({"step": step, "checkpoint": path, "error": error})
                continue
            shape = shape or result["tau_q"].shape
            steps.append(step)
            arrays.append(result)
        return RunAnalysis(self, steps, arrays, failed)


def load_run(path, device="auto", **flags):
    """A training run (SPEC section 11): DIR's iter-NNNNNN-ckpt.pth files (beside lit_config.json)
    or checkpoint-N/ folders, in step order. device and flags: as ssaviz.load, for every checkpoint."""
    return Run(path, device, **flags)
