"""Shared set-up of the Python module's tests (tests/CMakeLists.txt runs each file under pytest).

The environment names the build: PYTHONPATH holds build/python, SSAVIZ_BINARY the ssaviz binary
the module is compared with, SSAVIZ_TEST_OUT the folder the references and command-line models
were written to (CTest fixtures pytorch_ref, families_ref, cli_models), SSAVIZ_BUILD_DIR the build.
"""

import json
import os
import struct
import subprocess

import ssaviz  # first: it chooses OpenBLAS's kernels before numpy loads it, as in a user's `import ssaviz` (ssaviz/_blas.py)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BINARY = os.environ.get("SSAVIZ_BINARY", os.path.join(SOURCE, "build", "ssaviz"))
TEST_OUT = os.environ.get("SSAVIZ_TEST_OUT", os.path.join(SOURCE, "build", "tests"))
BUILD = os.environ.get("SSAVIZ_BUILD_DIR", os.path.join(SOURCE, "build"))

ENGLISH = os.path.join(SOURCE, "assets", "models", "english", "ssa")
ENGLISH_TWIN = os.path.join(SOURCE, "assets", "models", "english", "vanilla")
DEFAULT = os.path.join(BUILD, "models", "default")          # GPT-2 shaped, random, context 1024
SMALL = os.path.join(TEST_OUT, "cli", "small")              # 2 x 2, context 16
SMALL_TWIN = os.path.join(TEST_OUT, "cli", "twin")
FAMILIES = os.path.join(TEST_OUT, "families")
REFERENCE = os.path.join(TEST_OUT, "ref")

JOBS = [e["text"] for e in ssaviz._ssaviz.examples() if e["id"] == "english"][0]


def run_cli(*args, check=True):
    """The ssaviz binary: (exit code, stdout, stderr)."""
    p = subprocess.run([BINARY, *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"ssaviz {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p.returncode, p.stdout, p.stderr


def cli_error(*args):
    """The one-line message the command line fails with, without its "ssaviz: " prefix."""
    code, _, err = run_cli(*args, check=False)
    assert code in (2, 3), f"ssaviz {' '.join(args)} exited {code}: {err}"
    line = err.strip().splitlines()[-1]
    assert line.startswith("ssaviz: ")
    return line[len("ssaviz: "):]


def read_safetensors(path):
    """{name: float32 array} of a reference file (F32 only, as the references write)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        assert meta["dtype"] == "F32", name
        begin, end = meta["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=np.float32).reshape(meta["shape"])
    return out


def family(case):
    """(weights path, case.json, reference arrays) of a lit-gpt family case."""
    folder = os.path.join(FAMILIES, case)
    with open(os.path.join(folder, "case.json")) as f:
        meta = json.load(f)
    weights = os.path.join(folder, meta["weights"]) if isinstance(meta.get("weights"), str) else folder
    return weights, meta, read_safetensors(os.path.join(folder, "reference.safetensors"))


def require(path):
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: run the tests through ctest (its fixtures write it)")
    return path
