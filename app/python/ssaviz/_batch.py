"""ssaviz.export_batch: what `ssaviz export --batch` writes, here or on a dask.distributed cluster.

Each text is exported into OUT/<name> by the engine's own export, and its summary row comes back
as JSON; this process writes summary.json and summary.csv from the rows in the texts' order. On a
cluster the texts are Dask tasks: each worker opens the model once (a per-process cache keyed by
how the model was opened) and writes its texts' folders itself, so OUT must be a folder every
worker sees (one machine, or a shared filesystem). With devices=[...], each worker opens the
model on its own device of the list (a GPU per worker). The distribution is Dask's; nothing here
schedules, retries or moves data.
"""

import json
import os
import threading
import zlib
from collections import Counter
from collections.abc import Mapping

from . import _python_words, _r, _ssaviz, _warn_failures


def _list(where, name, value, of):
    """value as a list, for an argument that takes several (`name must be a list of OF`): one string
    or a value that does not iterate is an ArgumentTypeError."""
    from . import ArgumentTypeError
    if isinstance(value, (str, bytes)):
        raise ArgumentTypeError(f"{where}: {name} must be a list of {of}, not one {type(value).__name__}")
    try:
        return list(value)
    except TypeError:
        raise ArgumentTypeError(f"{where}: {name} must be a list of {of}, not {type(value).__name__}") from None


def _items(where, texts):
    """[(folder, line, text bytes)] with the folder names `ssaviz export --batch` gives."""
    from . import ArgumentTypeError, _text
    if isinstance(texts, Mapping):  # {name: text}: its keys were taken as the texts
        texts = list(texts.items())
    texts = _list(where, "texts", texts, "texts")
    names, bodies = [], []
    for t in texts:
        name = ""
        if isinstance(t, dict):
            if "text" not in t:
                raise ValueError(f"{where}: a text given as a dict needs a \"text\"")
            name, t = t.get("name", ""), t["text"]
        elif isinstance(t, tuple) and len(t) == 2:
            name, t = t
        if not isinstance(name, str):
            raise ArgumentTypeError(f"{where}: a text's name must be a string, not {type(name).__name__}")
        try:
            name.encode("utf-8")
        except UnicodeEncodeError as e:  # a lone surrogate: pybind11's TypeError listing C++ signatures
            raise ValueError(f"{where}: text {len(names) + 1}'s name {_r(name)} is not valid UTF-8 ({e.reason} at {e.start})") from None
        names.append(name)
        bodies.append(_text(where, t, each=True))
    if not bodies:
        raise ValueError(f"{where}: no texts")
    return list(zip(_ssaviz.folder_names(names), range(1, len(bodies) + 1), bodies))


# A worker's models, opened on its first text and kept for the rest (and later batches).
_models = {}
_models_lock = threading.Lock()
_opened = Counter()


def _worker_threads():
    """Inside a dask.distributed worker, computes on its threads_per_worker, not the machine's cores."""
    try:
        from distributed import get_worker
        worker = get_worker()
    except (ImportError, ValueError):
        return
    threads = getattr(getattr(worker, "state", None), "nthreads", None) or getattr(worker, "nthreads", None)
    if threads:
        _ssaviz.use_worker_threads(int(threads))


def _worker_model(spec):
    from . import Model
    path, device, flags = spec
    _worker_threads()
    key = (path, device, tuple(sorted((k, repr(v)) for k, v in flags.items())))
    with _models_lock:
        model = _models.get(key)
        if model is None or model.closed:
            model = _models[key] = Model(path, device, **flags)
            _opened[key] += 1
    return model


def worker_opens():
    """How many times this process opened each model for batches: {(path, device): count}."""
    with _models_lock:
        out = Counter()
        for (path, device, _), n in _opened.items():
            out[(path, device)] += n
        return dict(out)


def _devices(where, devices):
    """devices= as a list of device names, each one load() takes; None stays None."""
    from . import ArgumentTypeError
    if devices is None:
        return None
    devices = _list(where, "devices", devices, "devices (like [\"cuda:0\", \"cuda:1\"])")
    if not devices:
        raise ValueError(f"{where}: devices is empty")
    for d in devices:
        if not isinstance(d, str):
            raise ArgumentTypeError(f"{where}: a device must be a string (\"cuda:0\"), not {type(d).__name__}")
        _ssaviz.check_device(d)
    return devices


def _client(where, client):
    """`client` checked: None, or what a dask.distributed Client offers (map, submit, gather)."""
    from . import ArgumentTypeError
    if client is not None and not all(callable(getattr(client, name, None)) for name in ("map", "submit", "gather")):
        raise ArgumentTypeError(f"{where}: client must be a dask.distributed Client or None, not {type(client).__name__}")
    return client


def _worker_devices(client, devices):
    """{worker address: device}: the cluster's workers in address order, devices[k % len] for the k-th."""
    workers = sorted(client.scheduler_info().get("workers", {}))
    return {address: devices[k % len(devices)] for k, address in enumerate(workers)}


def _device_here(model_spec, by_worker, devices):
    """The model spec with this worker's device: its own from by_worker, or for a worker that
    joined after the batch was submitted, one of devices picked by its address."""
    if not devices:
        return model_spec
    from distributed import get_worker
    address = get_worker().address
    device = by_worker.get(address) or devices[zlib.crc32(address.encode()) % len(devices)]
    path, _, flags = model_spec
    return path, device, flags


def _export_one(item, out, model_spec, compare, twin_flags, flags, ablate, truncate, by_worker=None, devices=None, base=None):
    name, line, text = item
    model = _worker_model(_device_here(model_spec, by_worker or {}, devices))
    from . import _fs
    if base is not None:
        model._live().set_base(_fs(base))  # the worker's model is shared by the batches it runs: set each time
    row, error = model._live().export_text(name, line, text, _fs(out), flags, _fs(compare), twin_flags, ablate, truncate)
    return name, line, row, error


def export_batch(texts, out, model=None, formats=None, client=None, compare="vanilla", ablate=None, truncate=False,
                 layers=None, heads=None, devices=None, base=None, **flags):
    """Exports every text as `ssaviz export --batch` does: OUT/<name>/ per text (names from
    {"name": ..., "text": ...} dicts, (name, text) pairs or a {name: text} dict, else text_0001, ...), and
    OUT/summary.json and summary.csv comparing them. A text that cannot run (empty, too long) is
    skipped with a warning and listed under "failed". Returns the summary as a dict.

    model: a Model, a path, or None (the bundled model). client: a dask.distributed Client; the
    texts then run on its workers, each opening the model once. devices: with a client, the
    devices its workers open the model on, one each in turn (["cuda:0", "cuda:1"]: a GPU per
    worker on a machine with two; worker k, in the order of the workers' addresses, takes
    devices[k % len(devices)]); None: the model's own device on every worker. formats, layers,
    heads, flags: as Analysis.export; compare (not None: the files hold a comparison), ablate, truncate, base: as Model.analyze."""
    from . import ArgumentTypeError, Model, _ablate, _base_arg, _bool, _export_compare, _export_flags, _flags, _fs, _path, load
    where = "export_batch()"
    out = _path(where, "out", out)
    items = _items(where, texts)
    export_flags = _export_flags(where, flags, formats, layers, heads)
    kind, twin_flags = _export_compare(where, compare)
    base_dir = None
    if base is not None:  # a fine-tune against this base: three sides in every text's files
        kind, base_dir = _base_arg(where, compare, base)
        twin_flags = None
    spec = _ablate(where, ablate)
    truncate = _bool(where, "truncate", truncate)
    _ssaviz.check_export(_fs(out), export_flags, where, [name for name, _, _ in items])
    if model is not None and not isinstance(model, (Model, str, os.PathLike)):
        raise ArgumentTypeError(f"{where}: model must be a Model, a path or None, not {type(model).__name__}")
    devices = _devices(where, devices)
    if devices is not None and client is None:
        raise ValueError(f"{where}: devices is for a Dask client's workers; without a client, load the model on the device "
                         "you want (ssaviz.load(path, device=...))")
    client = _client(where, client)

    if client is None:
        m = model if isinstance(model, Model) else load(model)
        core = m._live()
        if base_dir is not None:
            core.set_base(_fs(base_dir))
        results = [(name, line) + tuple(core.export_text(name, line, text, _fs(out), export_flags, _fs(kind), twin_flags, spec, truncate))
                   for name, line, text in items]
    else:
        if isinstance(model, Model):
            model_spec = (model.path, model.requested_device, model.flags)
        else:
            model_spec = ("" if model is None else os.fspath(model), "auto", {})
        # OUT is made here, before any worker runs: workers checking a missing OUT at once would
        # each make and remove it under the others.
        os.makedirs(out, exist_ok=True)
        by_worker = _worker_devices(client, devices) if devices else None
        futures = client.map(_export_one, items, out=out, model_spec=model_spec, compare=kind, twin_flags=twin_flags,
                             flags=export_flags, ablate=spec, truncate=truncate, by_worker=by_worker, devices=devices,
                             base=base_dir, pure=False)
        results = client.gather(futures)

    rows, failures, said = [], [], []
    for name, line, row, error in results:
        if error:
            said.append(f"ssaviz: text {line} ({name}): {_python_words(error)}")
            failures.append(json.dumps({"name": name, "line": line, "error": error}))
        else:
            rows.append(row)
    _warn_failures(said, "texts", "summary.json's failed", stacklevel=2)
    os.makedirs(out, exist_ok=True)
    _ssaviz.write_summary(_fs(out), rows, failures)
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        return json.load(f)
