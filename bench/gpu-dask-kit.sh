#!/usr/bin/env bash
# Run HERE (Debian 12, with a package registry), from the project's root: what lets the GPU machine
# run issue 37's last unrun check, export_batch on a Dask LocalCluster with a GPU per worker
# (bench/gpu_python.py's last part). That machine's Python is a venv's 3.12 with a CUDA PyTorch and
# no dask.distributed, and it reaches no package registry; distributed needs psutil, a C extension,
# which Debian builds for its own 3.11 only. So the check runs on Debian 12's Python 3.11, carried:
#   .gpu-py/ = python3.11 with its standard library and headers, numpy, dask and distributed with
#              every module they import, and the C libraries those link that an Ubuntu 24.04 may
#              lack (Debian 12's packages, unpacked there under /opt/py, never into /).
# bench/gpu-dask.sh (call C, carry [".gpu-py"], on the machine call A left warm: /opt/deps and the
# torch it found are still there) builds the Python module for that 3.11 against the machine's
# LibTorch and runs bench/gpu_python.py with it.
# This adds /.gpu-py/ to .git/info/exclude, checks that every library the kit's programs and
# extensions need is in the kit or is glibc, libstdc++, libgcc_s or zlib (or one of the few any
# Ubuntu has: OpenSSL 3, libffi 8, expat, SQLite, liblzma, libbz2, libuuid), and prints the call's size.
#   usage: bash bench/gpu-dask-kit.sh
#          --emulate: then runs bench/gpu-dask.sh's python and check steps here with the kit's
#          interpreter unpacked under /tmp/gpu-dask-emu (its own prefix, not Debian's /usr) and
#          build/'s module, on the CPU.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
arch=x86_64-linux-gnu
packages=(
  python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libpython3.11-dev python3.11-dev libpython3.11
  python3-numpy libblas3 liblapack3 libgfortran5 libquadmath0
  python3-distributed python3-dask python3-toolz python3-cloudpickle python3-fsspec python3-partd python3-locket python3-yaml libyaml-0-2
  python3-packaging python3-click python3-psutil python3-tornado python3-msgpack python3-sortedcontainers python3-tblib python3-zict
  python3-heapdict python3-jinja2 python3-markupsafe python3-urllib3 python3-importlib-metadata python3-zipp python3-pkg-resources
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf .gpu-py
mkdir -p .gpu-py
(cd .gpu-py && apt-get download "${packages[@]}" >"$tmp/apt.log" 2>&1) || { cat "$tmp/apt.log"; exit 1; }
exclude="$(git rev-parse --git-common-dir)/info/exclude"
mkdir -p "$(dirname "$exclude")"
grep -qx /.gpu-py/ "$exclude" 2>/dev/null || echo /.gpu-py/ >>"$exclude"

# Every NEEDED library of the kit's ELF files, followed: in the kit, or the base any Ubuntu has.
mkdir -p "$tmp/py"
for f in .gpu-py/*.deb; do dpkg -x "$f" "$tmp/py"; done
libdirs=("$tmp/py/usr/lib/$arch" "$tmp/py/lib/$arch" "$tmp/py/usr/lib/$arch/blas" "$tmp/py/usr/lib/$arch/lapack")
base_re='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|libz|libssl|libcrypto|libffi|libexpat|libsqlite3|liblzma|libbz2|libuuid)\.so'
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
missing=()
# Not checked: the standard library's modules for terminals and old databases (curses, readline,
# dbm, gdbm, nis, crypt, tkinter), which nothing the check runs imports.
unused_re='/lib-dynload/(_curses|_curses_panel|readline|_dbm|_gdbm|nis|_crypt|_tkinter)\.'
while IFS= read -r -d '' f; do
  [[ $f =~ $unused_re ]] && continue
  head -c 4 "$f" 2>/dev/null | grep -q ELF || continue
  for so in $(needed "$f"); do
    [[ $so =~ $base_re ]] && continue
    found=0
    for d in "${libdirs[@]}"; do [ -e "$d/$so" ] && found=1; done
    [ $found = 1 ] || missing+=("$so (${f#"$tmp/py"})")
  done
done < <(find "$tmp/py" -type f \( -name '*.so*' -o -path '*/bin/*' \) -print0)
echo "== libraries the kit's programs and extensions need that are neither in it nor in any Ubuntu: ${missing[*]:-none}"
mb() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1e6}'; }
tree=$(git ls-files -z | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
kit=$(du -sb .gpu-py | cut -f1)
echo "== sizes: the tree $(mb "$tree") MB, .gpu-py $(mb "$kit") MB: call C carries $(mb $((tree + kit))) MB of 67.1 (64 MiB)"
[ ${#missing[@]} = 0 ] || exit 1

if [ "${1:-}" = --emulate ]; then
  # This machine's Python is Debian's 3.11 too, so build/'s module (SSAVIZ_PYTHON=/usr/bin/python3)
  # loads in the kit's interpreter: the python and check steps run as on the GPU machine, on the CPU.
  echo "== emulating call C here: the kit under /tmp/gpu-dask-emu, build/'s Python module, the CPU"
  rm -rf /tmp/gpu-dask-emu /tmp/gpu-dask-emu-out
  env -u PYTHONPATH SSAVIZ_DASK_PREFIX=/tmp/gpu-dask-emu SSAVIZ_DASK_STAGES="python check" SSAVIZ_DASK_DEVICE=cpu SSAVIZ_DASK_BUILD=build \
    bash bench/gpu-dask.sh /tmp/gpu-dask-emu-out
fi
