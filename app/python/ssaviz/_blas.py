"""OpenBLAS's kernels for this process, chosen before OpenBLAS loads.

OpenBLAS reads OPENBLAS_CORETYPE once, as it loads (with numpy or LibTorch). Debian 12's 0.3.21
falls back to its generic SSE3 kernels, "Prescott", on a CPU newer than itself: on an Intel Xeon of
family 6, model 207, every product ran ~3x slower than under the SkylakeX kernels the CPU runs. The
command line starts itself again with the faster kernels (model::RestartWithFasterBlasKernels);
Python cannot, so `import ssaviz` asks a child process which kernels OpenBLAS picks here and, where
they are Prescott, sets the faster ones before anything loads it. Where OpenBLAS is loaded already
(numpy or torch imported first), ssaviz/__init__.py warns instead.
"""

import os
import subprocess
import sys

# Run in a child: the kernels OpenBLAS picks by itself, or nothing where the BLAS is another.
_ASK = """
import ctypes
for name in ("libopenblas.so.0", "libblas.so.3"):
    try:
        corename = ctypes.CDLL(name).openblas_get_corename
    except (OSError, AttributeError):
        continue
    corename.restype = ctypes.c_char_p
    print(corename().decode())
    break
"""


def kernels_for(flags):
    """The faster kernels a CPU with these /proc/cpuinfo flags runs: model::FasterBlasKernels's rule
    (the kernel lists only what the OS saves, so AVX-512 here is AVX-512 the OS runs)."""
    if {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return ""


def _read(path):
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(1 << 20)
    except OSError:
        return None


def choose():
    """Sets OPENBLAS_CORETYPE where OpenBLAS is not loaded yet and would run Prescott's kernels on a
    CPU that runs faster ones; leaves a value the user set, and every other case, alone."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return
    maps = _read("/proc/self/maps")
    if maps is None or "blas" in maps:  # loaded already, or no telling
        return
    flags = next((line.split(":", 1)[1].split() for line in (_read("/proc/cpuinfo") or "").splitlines()
                  if line.startswith("flags")), [])
    kernels = kernels_for(set(flags))
    if not kernels:
        return
    try:
        picked = subprocess.run([sys.executable, "-c", _ASK], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return
    if picked == "Prescott":
        os.environ["OPENBLAS_CORETYPE"] = kernels
