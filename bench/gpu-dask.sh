#!/usr/bin/env bash
# Call C on the GPU machine (after call A, bash bench/gpu.sh, on the same warm machine): export_batch
# on a Dask LocalCluster with a GPU per worker, issue 37's last unrun check, on Debian 12's Python
# 3.11 with numpy, dask and distributed carried in .gpu-py (bench/gpu-dask-kit.sh, run HERE, makes it;
# that machine's venv Python has no dask.distributed and no registry to get one from).
#   python  unpack .gpu-py into /opt/py (never into /) and import numpy, dask, distributed, psutil;
#   build   the Python module for that interpreter in build-gpu-py311 against the machine's LibTorch,
#           with the -dev packages call A unpacked into /opt/deps (as .gpu/device-build.sh builds);
#   check   bench/gpu_python.py with it: device="cuda" against "cpu", then export_batch with a
#           device per worker against the serial CPU batch.
# Each step logs to OUT/dask.txt as it goes.
#   usage: bash bench/gpu-dask.sh OUT      (from the project's root, on the GPU machine; carry [".gpu-py"])
#          SSAVIZ_DASK_STAGES="python build check" picks steps; SSAVIZ_DASK_PREFIX (/opt/py) where the kit
#          goes; SSAVIZ_DASK_DEVICE=cpu and SSAVIZ_DASK_BUILD=DIR (a build of this project for the kit's
#          Python) for a dry run elsewhere (bash bench/gpu-dask-kit.sh --emulate runs the python step).
set -uo pipefail
out=${1:?usage: bash bench/gpu-dask.sh OUT}
here=$(pwd)
stages=${SSAVIZ_DASK_STAGES:-python build check}
want() { [[ " $stages " == *" $1 "* ]]; }
prefix=${SSAVIZ_DASK_PREFIX:-/opt/py}
dev=${SSAVIZ_DASK_DEVICE:-cuda}
build=${SSAVIZ_DASK_BUILD:-build-gpu-py311}
work=/tmp/ssaviz-gpu
arch=x86_64-linux-gnu
mkdir -p "$out" "$work"
log="$out/dask.txt"
say() { echo "$*" | tee -a "$log"; }
stage() { say "== $(date +%T) $*"; }
py="$prefix/usr/bin/python3.11"
# The kit's libraries first (numpy's BLAS and LAPACK live under blas/ and lapack/, where Debian's
# alternatives would link them), then call A's /opt/deps.
kitlibs="$prefix/usr/lib/$arch:$prefix/usr/lib/$arch/blas:$prefix/usr/lib/$arch/lapack"
export LD_LIBRARY_PATH="$kitlibs:/opt/deps/usr/lib/$arch:${LD_LIBRARY_PATH:-}"

if want python; then
  stage "unpacking .gpu-py into $prefix"
  ls .gpu-py/*.deb >/dev/null 2>&1 || { say "gpu-dask: no .gpu-py/*.deb: carry .gpu-py in this call (bash bench/gpu-dask-kit.sh makes it)"; exit 2; }
  mkdir -p "$prefix"
  for f in .gpu-py/*.deb; do dpkg -x "$f" "$prefix"; done
  timeout 60 "$py" -c 'import sys, numpy, dask, distributed, psutil
print("python", sys.version.split()[0], "at", sys.prefix, "| numpy", numpy.__version__, "| dask", dask.__version__,
      "| distributed", distributed.__version__, "| psutil", psutil.__version__)' 2>&1 | tee -a "$log"
  [ "${PIPESTATUS[0]}" = 0 ] || { say "gpu-dask: the kit's Python does not import its packages here"; exit 1; }
fi

if want build; then
  stage "the Python module for $py into $build"
  [ -d /opt/deps/usr ] || { say "gpu-dask: no /opt/deps: call A (bash bench/gpu.sh OUT, carry .gpu) must run first on this warm machine"; exit 2; }
  SECONDS=0
  torch_cmake=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  torch_lib=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$torch_lib"
  export PKG_CONFIG_PATH=/opt/deps/usr/lib/$arch/pkgconfig:/opt/deps/usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/deps
  pkgconf=$(command -v pkg-config || command -v pkgconf || echo /opt/deps/usr/bin/pkgconf)
  timeout 120 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSSAVIZ_GUI=OFF -DSSAVIZ_TESTS=OFF \
    -DSSAVIZ_LIBTORCH="$torch_cmake" -DCMAKE_PREFIX_PATH=/opt/deps/usr -DPKG_CONFIG_EXECUTABLE="$pkgconf" \
    -DSSAVIZ_PYTHON="$py" -DPython3_EXECUTABLE="$py" -DPython3_INCLUDE_DIR="$prefix/usr/include/python3.11" \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DTORCH_CUDA_ARCH_LIST=9.0 >"$out/dask-configure.txt" 2>&1 ||
    { tail -n 30 "$out/dask-configure.txt" | tee -a "$log"; exit 1; }
  grep -h "Python module" "$out/dask-configure.txt" | tee -a "$log"
  timeout 300 cmake --build "$build" -j16 --target ssaviz ssaviz_python >"$out/dask-build.txt" 2>&1 ||
    { grep -E "error" "$out/dask-build.txt" | head -n 20 | tee -a "$log"; tail -n 10 "$out/dask-build.txt" | tee -a "$log"; exit 1; }
  say "built in $SECONDS s: $(ls "$build"/python/ssaviz/_ssaviz*.so)"
fi

if want check; then
  stage "bench/gpu_python.py on the kit's Python: $dev against the CPU, then export_batch on Dask with a device per worker"
  [ -n "${torch_lib:-}" ] || export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)"
  for _ in 1 2 3; do cat /usr/share/common-licenses/GPL-3 2>/dev/null || cat "$here/README.md"; done >"$work/long-dask.txt"
  cp -r "$here/assets/models/english/ssa" "$work/english-dask" 2>/dev/null
  PYTHONPATH="$build/python" timeout 240 "$py" -W ignore "$here/bench/gpu_python.py" "$work/english-dask" "$dev" "$work/long-dask.txt" "$work" 2>&1 |
    tee "$out/python311.txt" | tee -a "$log"
  say "gpu_python.py: rc ${PIPESTATUS[0]}"
fi
stage done
