#!/usr/bin/env bash
# The window on a GPU machine (call B of two on the same warm machine), under a carried Xvfb: which
# GLX vendor draws it (NVIDIA's on the GPU, else Mesa's llvmpipe), then at GPT-2 small's shape (12 x 12,
# width 768, context 8,192) and about 8,000 tokens of text:
#   1. typing at the end (--bench-typing): frame work and keystroke-to-pixels latency;
#   2. switching heads (--bench-heads): the work of each frame that shows a new head;
#   3. screenshots of the heads tab, the SSA map and the difference map (--map diff);
#   4. typing in the middle and at the start.
# That machine has no X, no Mesa and no GL loader: bench/gpu-window-kit.sh (run HERE) puts Xvfb,
# xkbcomp, the XKB data, Mesa, GLVND and GLFW with what they load into .gpu-x/ (Debian 12's packages;
# libLLVM's Z3 into .gpu/x-debs, since all of it with the tree is over 60 MB) and the window's -dev
# packages into .gpu/gui-debs. Then, on one warm machine:
#   call A, carry [".gpu"]:   bash bench/gpu.sh OUT     its stage gui builds build-gpu-gui/ssaviz
#   call B, carry [".gpu-x", ".gpu/x-debs"]: bash bench/gpu-window.sh OUT
#   (a carried path does not stay on the machine for the next call, its build outputs do: so call B
#   carries .gpu/x-debs again; seen on an H200 on 2026-11-29, where call B with .gpu-x alone found none)
# This unpacks the packages into /opt/x (never into /), drops there every library whose soname the
# machine's ldconfig already knows (its newer ones win) but the GL stack, links /usr/bin/xkbcomp and
# /usr/lib/x86_64-linux-gnu/dri (where Xvfb looks for them) to /opt/x's when they are missing, and
# starts Xvfb. Each step is bounded by `timeout` and logs to OUT/window.txt as it goes (the X
# server's to OUT/xvfb.txt); pictures go to OUT/heads-8k.png and OUT/diff-8k.png.
#   usage: bash bench/gpu-window.sh OUT        (from the project's root, on the GPU machine, after call A)
#          SSAVIZ_WINDOW_STAGES="x vendor typing heads shots more" picks stages (all by default; x: Xvfb and glxinfo only);
#          SSAVIZ_WINDOW_DEVICE=cpu, SSAVIZ_WINDOW_BIN=build/ssaviz, SSAVIZ_WINDOW_MODEL=DIR and SSAVIZ_WINDOW_TOKENS=1000
#          (cuda, build-gpu-gui/ssaviz, /tmp/ssaviz-gpu/gpt2-small made as bench/gpu.sh makes it, and 8000 by default)
#          for a dry run elsewhere (bash bench/gpu-window-kit.sh --emulate); SSAVIZ_WINDOW_VENDORS="nvidia mesa"
#          the GLX vendors to try, in order; SSAVIZ_WINDOW_KEYS=15 and SSAVIZ_WINDOW_HEADS=20 the benchmarks' lengths.
set -uo pipefail
out=${1:?usage: bash bench/gpu-window.sh OUT}
here=$(pwd)
stages=${SSAVIZ_WINDOW_STAGES:-x vendor typing heads shots more}
want() { [[ " $stages " == *" $1 "* ]]; }
bin=${SSAVIZ_WINDOW_BIN:-build-gpu-gui/ssaviz}
dev=${SSAVIZ_WINDOW_DEVICE:-cuda}
tokens=${SSAVIZ_WINDOW_TOKENS:-8000}
keys=${SSAVIZ_WINDOW_KEYS:-15}
heads=${SSAVIZ_WINDOW_HEADS:-20}
work=/tmp/ssaviz-gpu
x=/opt/x
arch=x86_64-linux-gnu
[[ $bin == /* ]] || bin="$here/$bin"

if want vendor || want typing || want heads || want shots || want more; then
  if [ ! -x "$bin" ] || [ ! -d /opt/deps/usr ]; then
    echo "gpu-window: no $bin or no /opt/deps: call A (bash bench/gpu.sh OUT, carry .gpu, its stage gui) must run first on the same warm machine"
    exit 2
  fi
fi
if ! ls .gpu-x/*.deb >/dev/null 2>&1 || ! ls .gpu/x-debs/*.deb >/dev/null 2>&1; then
  echo "gpu-window: no .gpu-x/*.deb (carry .gpu-x in this call) or no .gpu/x-debs/*.deb (carry .gpu/x-debs in this call too): bash bench/gpu-window-kit.sh makes both"
  exit 2
fi
mkdir -p "$out" "$work/shots"
log="$out/window.txt"
say() { echo "$*" | tee -a "$log"; }
stage() { say "== $(date +%T) $*"; }
soname() {  # FILE: its DT_SONAME (else the name up to the major version)
  local s
  s=$(readelf -d "$1" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ -n "$s" ] || s=$(objdump -p "$1" 2>/dev/null | awk '$1 == "SONAME" {print $2}')
  [ -n "$s" ] || s=$(basename "$1" | sed -E 's/(\.so\.[0-9]+).*/\1/')
  echo "$s"
}

stage "unpacking .gpu-x and .gpu/x-debs into $x"
SECONDS=0
if [ ! -f "$x/.done" ]; then
  rm -rf "$x" && mkdir -p "$x"
  for f in .gpu/x-debs/*.deb .gpu-x/*.deb; do dpkg -x "$f" "$x" || say "dpkg -x $f failed"; done
  # The machine's own libraries (newer) win: drop ours where ldconfig knows the soname, but keep
  # the GL stack (GLVND's loaders must match each other and Mesa's libglapi its libGLX_mesa and driver).
  keep='^lib(GL|GLX|OpenGL|GLdispatch|EGL|GLESv1_CM|GLESv2|glapi|GLX_mesa|EGL_mesa|gbm)\.so\.'
  known=$(ldconfig -p | awk '/x86-64/ {print $1}' | sort -u)
  dropped=()
  for d in "$x/usr/lib/$arch" "$x/lib/$arch"; do
    for f in "$d"/*.so.*; do
      [ -f "$f" ] && [ ! -L "$f" ] || continue
      so=$(soname "$f")
      [[ $so =~ $keep ]] && continue
      if grep -qxF "$so" <<<"$known"; then
        rm -f "$f" "$d/$so"
        dropped+=("$so")
      fi
    done
  done
  say "the machine has (ldconfig), so $x does not: ${dropped[*]:-none}"
  touch "$x/.done"
fi
say "unpacked in $SECONDS s, $(du -sm "$x" | cut -f1) MB"
# Where the X server looks (compiled in): xkbcomp in /usr/bin, Mesa's drivers in /usr/lib/$arch/dri.
if [ ! -x /usr/bin/xkbcomp ]; then ln -sf "$x/usr/bin/xkbcomp" /usr/bin/xkbcomp && say "linked /usr/bin/xkbcomp to $x's"; fi
dri=/usr/lib/$arch/dri
if [ ! -e "$dri/swrast_dri.so" ]; then
  if [ -d "$dri" ] && [ ! -L "$dri" ]; then ln -sf "$x$dri/swrast_dri.so" "$dri/swrast_dri.so"; else ln -sfn "$x$dri" "$dri"; fi
  say "linked $dri's swrast_dri.so to $x's"
fi
# Libraries: /opt/x first, then .gpu/env.sh's (/opt/deps, PyTorch's), then the NVIDIA driver's.
[ -f .gpu/env.sh ] && source .gpu/env.sh || export LD_LIBRARY_PATH=/opt/deps/usr/lib/$arch:${LD_LIBRARY_PATH:-}
LD_LIBRARY_PATH=$x/usr/lib/$arch:$x/lib/$arch:$LD_LIBRARY_PATH
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
  [ -d "$d" ] && [[ ":$LD_LIBRARY_PATH:" != *":$d:"* ]] && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
done
LD_LIBRARY_PATH=$(sed -E 's/:+/:/g; s/^://; s/:$//' <<<"$LD_LIBRARY_PATH")  # an empty entry would be the current folder
export LD_LIBRARY_PATH LIBGL_DRIVERS_PATH=$x$dri XLOCALEDIR=$x/usr/share/X11/locale
say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
# NVIDIA's vendor libraries and their EGL configuration, where the driver's mount has them.
if [ -d /usr/local/nvidia ]; then
  command -v nvidia-smi >/dev/null && say "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n 1)"
  say "NVIDIA's GL libraries: $(ls /usr/local/nvidia/lib64 /usr/local/nvidia/lib 2>/dev/null | grep -E '^lib(GL|EGL|nvidia-(glcore|tls|glsi|egl))' | tr '\n' ' ')"
  say "NVIDIA's share: $(cd /usr/local/nvidia/share 2>/dev/null && find . -name '*.json' | tr '\n' ' ')"
  [ -d /usr/local/nvidia/share/glvnd/egl_vendor.d ] && export __EGL_VENDOR_LIBRARY_DIRS=/usr/local/nvidia/share/glvnd/egl_vendor.d
  [ -d /usr/local/nvidia/share/egl/egl_external_platform.d ] && export __EGL_EXTERNAL_PLATFORM_CONFIG_DIRS=/usr/local/nvidia/share/egl/egl_external_platform.d
fi
# What the window needs, resolved as it will be (a "not found" here is a missing package).
for f in "$x/usr/bin/Xvfb" "$x/usr/bin/xkbcomp" "$x$dri/swrast_dri.so" "$x/usr/lib/$arch/libGLX_mesa.so.0" \
  "$x/usr/lib/$arch/libglfw.so.3" "$bin"; do
  [ -e "$f" ] || continue
  missing=$(ldd "$f" 2>&1 | grep "not found" | awk '{print $1}' | tr '\n' ' ')
  say "ldd $(basename "$f"): ${missing:+NOT FOUND: }${missing:-all found}"
done
for v in /usr/local/nvidia/lib64/libGLX_nvidia.so.0 /usr/local/nvidia/lib/libGLX_nvidia.so.0; do
  [ -e "$v" ] && say "ldd $(basename "$v") ($v): $(ldd "$v" 2>&1 | grep -c "not found") not found"
done

stage "Xvfb"
n=87
while [ -e "/tmp/.X$n-lock" ] || [ -e "/tmp/.X11-unix/X$n" ]; do n=$((n + 1)); done
export DISPLAY=:$n
"$x/usr/bin/Xvfb" "$DISPLAY" -screen 0 1600x1000x24 -nolisten tcp +extension GLX -xkbdir "$x/usr/share/X11/xkb" >"$out/xvfb.txt" 2>&1 &
xpid=$!
trap 'kill "$xpid" 2>/dev/null; wait "$xpid" 2>/dev/null' EXIT
for _ in $(seq 100); do [ -S "/tmp/.X11-unix/X$n" ] && break; kill -0 "$xpid" 2>/dev/null || break; sleep 0.1; done
if [ ! -S "/tmp/.X11-unix/X$n" ]; then say "Xvfb did not start:"; tail -n 20 "$out/xvfb.txt" | tee -a "$log"; exit 1; fi
say "Xvfb on $DISPLAY (pid $xpid)"
# GLVND falls back to the X server's vendor (Mesa) when the one asked for fails: the renderer
# string says which one drew.
glxinfo=$x/usr/bin/glxinfo.$arch
renderer=()
usable=()
for v in ${SSAVIZ_WINDOW_VENDORS:-nvidia mesa}; do
  r=$(__GLX_VENDOR_LIBRARY_NAME=$v timeout -k 5 20 "$glxinfo" -B 2>&1 | tee -a "$log" | sed -n 's/.*OpenGL renderer string: //p')
  renderer+=("$v: ${r:-none}")
  say "glxinfo with __GLX_VENDOR_LIBRARY_NAME=$v: renderer ${r:-none (see above)}"
  if [ -n "$r" ] && { [ "$v" = mesa ] || ! grep -qiE "llvmpipe|softpipe|swrast" <<<"$r"; }; then usable+=("$v"); fi
done
say "GLX vendors that draw with their own renderer: ${usable[*]:-none}"

vendor=
if want vendor || want typing || want heads || want shots || want more; then
  stage "which GLX vendor draws the window: a screenshot of the bundled English model with each"
  for v in "${usable[@]}"; do
    rm -f "$work/probe-$v.png"
    __GLX_VENDOR_LIBRARY_NAME=$v timeout -k 5 45 "$bin" --model "$here/assets/models/english/ssa" --device "$dev" \
      --text "The window on a GPU machine." --screenshot "$work/probe-$v.png" --frames 5 >>"$log" 2>&1
    rc=$?
    say "vendor $v: ssaviz --screenshot rc $rc, PNG $([ -s "$work/probe-$v.png" ] && echo written || echo missing)"
    if [ $rc = 0 ] && [ -s "$work/probe-$v.png" ]; then vendor=$v; break; fi
  done
  if [ -z "$vendor" ]; then say "no GLX vendor opened the window (see $log and xvfb.txt)"; tail -n 20 "$out/xvfb.txt"; exit 1; fi
  export __GLX_VENDOR_LIBRARY_NAME=$vendor
  say "the window draws with __GLX_VENDOR_LIBRARY_NAME=$vendor (glxinfo: ${renderer[*]})"
fi
want typing || want heads || want shots || want more || exit 0

stage "the model and the text"
model=${SSAVIZ_WINDOW_MODEL:-$work/gpt2-small}
if [ ! -f "$model/model.safetensors" ]; then
  [ -n "${SSAVIZ_WINDOW_MODEL:-}" ] && { say "no model in $model"; exit 1; }
  timeout 180 "$bin" init-random --out "$model" --seed 1 --tokenizer "$here/assets/tokenizers/gpt2" --layers 12 --heads 12 \
    --embd 768 --positions 8192 >/dev/null || { say "init-random failed"; exit 1; }
fi
# bench/gpu.sh's long text (the GPL six times; the project's docs where the GPL is missing), cut at
# the end of token number $tokens.
if [ ! -s "$work/long.txt" ]; then
  for _ in 1 2 3 4 5 6; do cat /usr/share/common-licenses/GPL-3 2>/dev/null || cat "$here/README.md" "$here"/docs/*.md; done >"$work/long.txt"
fi
end=$("$bin" tokenize --model "$model" --text-file "$work/long.txt" --truncate | awk -v n=$((tokens - 1)) '$1 == n {split($3, r, "-"); print r[2]; exit}')
[ -n "$end" ] || { say "the text ($work/long.txt) or the model's context is shorter than $tokens tokens"; exit 1; }
text=$work/window-text.txt
head -c "$end" "$work/long.txt" >"$text"
count=$("$bin" tokenize --model "$model" --text-file "$text" | tail -n 1 | cut -d' ' -f1)
tag=$(( (count + 500) / 1000 ))k
say "model $model, device $dev, text $text: $count tokens"

failed=0
window() {  # SECONDS FLAGS...: the window on the model and text
  local limit=$1; shift
  say "\$ ssaviz --model M --device $dev --text-file T $*"
  SECONDS=0
  timeout -k 5 "$limit" "$bin" --model "$model" --device "$dev" --text-file "$text" "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  say "rc $rc in $SECONDS s"
  [ "$rc" = 0 ] || failed=1
}
if want typing; then
  stage "typing $keys characters at the end of $count tokens"
  window 90 --bench-typing "$keys" --bench-at end
fi
if want heads; then
  stage "selecting another head $heads times"
  window 90 --bench-heads "$heads"
fi
if want shots; then
  stage "screenshots: the heads tab with the SSA map, then the difference map"
  for map in ssa diff; do
    name=$([ $map = ssa ] && echo heads || echo diff)-$tag.png
    rm -f "$work/shots/$name"
    window 90 --tab heads --map "$map" --screenshot "$work/shots/$name" --frames 40
    if [ -s "$work/shots/$name" ]; then cp "$work/shots/$name" "$out/$name"; say "$name: $(du -k "$out/$name" | cut -f1) KB"; fi
  done
fi
if want more; then
  for at in middle start; do
    stage "typing $keys characters at the $at"
    window 90 --bench-typing "$keys" --bench-at "$at"
  done
fi
stage done
say "summary: vendor ${vendor:-?} (glxinfo ${renderer[*]}), $count tokens on $dev"
grep -E "^(== .*(typing|selecting)|keystroke to pixels|  where a shown keystroke|frame work|head switch)" "$log"
exit $failed
