#!/usr/bin/env bash
# The device checks of issue 37, for a GPU machine (../shared/gpu/README.md: `bash .ci/cuda-compile`, then
# `bash ../shared/gpu/prepare` here, and since ssaviz reads tokenizer.json's normalizers with ICU, add Debian 12's ICU beside the kit:
# `(cd .gpu/debs && apt-get download libicu-dev libicu72)`; send .gpu/ along; the Python module
# builds there with the pybind11 headers its PyTorch ships). Builds ssaviz there against its CUDA PyTorch, then
#   0. the kernels against what they replace (ssaviz_fused_check): the fused row statistics, the
#      pooling, the attention rows' softmax, a map's extent, the attention rows fused (with its time
#      and the unfused way's at a block of 8,192 tokens);
#   1. exactness: every family's export on CUDA against the same export on the CPU (float32, and
#      the CUDA bf16 forward against the CUDA float32 one), a twin comparison and a base too; the
#      same with the fused temperatures (SSAVIZ_CUDA_TEMPERATURES=1; what-ifs too), and with the
#      softmax and row measures' kernel and the predictions' (SSAVIZ_CUDA_SOFTMAX_MEASURES=1
#      SSAVIZ_CUDA_PREDICTIONS=1; a twin, a base, blocks), and with the TF32 products
#      (SSAVIZ_PRODUCTS=tf32x3), and with the attention rows fused (SSAVIZ_FUSED_ATTENTION=1); at
#      8,192 tokens an edit at the end, a full analysis and an edit in the middle without them, with
#      the temperatures' and with all three, (full, middle) with the TF32 products too, and with
#      all of them and the rows fused (host ops, time), and that full analysis again in the fused
#      way's blocks before 2026-12-01 (SSAVIZ_DEVICE_BLOCK_MB=32); exactness.txt (and stages.txt) ends
#      with each switch's verdict: exact within issue 37's 1e-5, so it can be on by default, or not;
#   2. GPT-2 small's shape (12 x 12, width 768, context 8,192): full analysis, edits at the end,
#      middle and start, head map and bake, beside PyTorch CUDA doing the same work;
#   3. TinyLlama-1.1B's shape (BF16 weights): full analyses at 1,024 and 8,192 tokens, PyTorch CUDA
#      at 1,024 (its [L, 2, H, T, T] capture at 8,192 needs 380 GB).
# Each stage is bounded by `timeout` and writes its log under OUT as it goes, so a stage that runs
# out of time leaves the ones before it.
#   2b. (softmax, on request) the attention rows' CUDA softmax (on by default since 2026-11-29):
#       exactness with torch's softmax instead (SSAVIZ_CUDA_SOFTMAX=0), and the time on and off;
#   3b. the logit lens (whole, and one position from the kept stream) at GPT-2 small's shape;
#   3c. the Python module on the device (bench/gpu_python.py): load(device="cuda") and "cuda:N" for
#      each GPU against device="cpu", and export_batch with a device per Dask worker where
#      dask.distributed is installed; the host ops an analysis dispatches (SSAVIZ_BENCH_OPS=1);
#   3d. (blocks) the analysis's blocks of rows: the default, 256 MB, against 128 MB and 1 GB at
#       GPT-2 small's shape and TinyLlama's at 8,192 tokens (SSAVIZ_DEVICE_BLOCK_MB); the exact
#       stage also exports with 1 MB blocks (several a layer) against the CPU;
#   3e. (long) GPT-2 small's shape at 32,768 tokens: a full analysis, edits at the end, the
#       device's memory (SPEC: 32,768 tokens where memory allows; no PyTorch baseline: its capture
#       of every map would need 620 GB);
#   4. where the time goes: the 8,192-token analysis under nsys (when the machine has it; else
#      LibTorch's own profiler through ssaviz_bench's SSAVIZ_BENCH_TRACE, at 1,024 and 8,192 tokens
#      and for edits at 8,192, summarised by bench/trace_summary.py), the CUDA kernels ranked by time.
#   5. the window (gui): build-gpu-gui/ssaviz with SSAVIZ_GUI=ON, for bench/gpu-window.sh, the next call on the
#      same warm machine (its -dev packages are in .gpu/gui-debs once bench/gpu-window-kit.sh ran here).
#   6. (not here) the window, bench/gpu-window.sh (call B), and export_batch with a GPU per Dask
#      worker on a carried Python 3.11, bench/gpu-dask.sh (call C): each right after this call on the
#      same warm machine, with what bench/gpu-window-kit.sh and bench/gpu-dask-kit.sh gather here.
#   usage: bash bench/gpu.sh OUT            (from the project's root, on the GPU machine)
#          It writes some 20 files; where only a few come back (the device tool: 8), write them
#          elsewhere and pack them, under a `timeout` shorter than the call's so that the packing runs:
#          timeout 420 bash bench/gpu.sh /tmp/gpu-out; tar czf "$OUT/gpu-out.tgz" -C /tmp/gpu-out .
#          SSAVIZ_GPU_STAGES="fused exact small softmax lens python tiny blocks long profile gui" picks stages
#          (all but softmax by default);
#          SSAVIZ_GPU_SMALL_TOKENS=1024,4096, SSAVIZ_GPU_TINY_TOKENS="1024 8192" and SSAVIZ_GPU_TINY_BASELINE=1
#          (the defaults) the sizes, to fit what is left of a session's device time; the whole run
#          took about 6.5 minutes on an H200 with 16 cores (2026-11-29, with softmax; blocks and long,
#          since, add about 2-3 minutes, and TinyLlama's 8,192-token trace about half a minute), so give
#          the call a timeout of 540 s and stages to skip. A session's 15 minutes of device time count
#          the machine's start too: with the window (gui, call B), the lens and the Python module
#          measured on 2026-11-29, the next run's order is call A1 with
#          SSAVIZ_GPU_STAGES="fused exact small" (est. 4-5 minutes: the exact stage's exports, six at a time since 2026-12-01, and runs
#          of the unchecked kernels and the TF32 products, about 3 minutes), then at once A2 with
#          "tiny blocks profile" and SSAVIZ_GPU_TRACES="full:8192 kernels/full:8192 fused/full:8192 end:8192 tiny/full:8192"
#          (est. 4 minutes; the build is kept), then C (bench/gpu-dask.sh, est. 2 minutes), then give
#          the machine back; `long` (one process since 2026-12-01, est. about a minute) joins A2's list
#          when A1 took under 4 minutes. Stages run in this script's order whatever the list's, so a
#          call cut short loses its last ones (long runs before profile).
set -uo pipefail
stages=${SSAVIZ_GPU_STAGES:-fused exact small lens python tiny blocks long profile gui}
want() { [[ " $stages " == *" $1 "* ]]; }
out=${1:?usage: bash bench/gpu.sh OUT}
mkdir -p "$out"
here=$(pwd)
build=${SSAVIZ_GPU_BUILD:-build-gpu}
dev=${SSAVIZ_GPU_DEVICE:-cuda}   # cpu: a dry run of this script on a machine without a GPU
work=/tmp/ssaviz-gpu
mkdir -p "$work"
stage() { echo "== $(date +%T) $*" | tee -a "$out/stages.txt"; }

stage build
SECONDS=0
if [ "$dev" = cuda ]; then
  bash .gpu/device-build.sh >"$out/build.txt" 2>&1 || { tail -n 60 "$out/build.txt"; exit 1; }
  echo "built in $SECONDS s" | tee -a "$out/stages.txt"
  cp build-gpu-configure.log "$out/" 2>/dev/null; grep -h "CUDA kernels" build-gpu-configure.log | tee -a "$out/stages.txt"
  source .gpu/env.sh
fi
py=${SSAVIZ_GPU_PYTHON:-$(command -v python3)}
# The comparisons and the baselines need numpy and torch: where the first python3 lacks them (a
# pyenv's on a CPU dry run), Debian's, which has both with python3-torch.
"$py" -c 'import numpy, torch' 2>/dev/null || { [ -x /usr/bin/python3 ] && py=/usr/bin/python3; }
{ nvidia-smi; lscpu | grep -E '^(Model name|CPU\(s\))'; "$py" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'; } >"$out/machine.txt" 2>&1
"$build/ssaviz" info --device "$dev" >"$out/info.txt" 2>&1
cat "$out/machine.txt" | grep -E "H100|H200|Model name|torch" | head -n 4
for _ in 1 2 3 4 5 6; do cat /usr/share/common-licenses/GPL-3 2>/dev/null || cat "$here/README.md"; done >"$work/long.txt"
head -c 2400 "$work/long.txt" >"$work/text.txt"
head -c 600 "$work/long.txt" >"$work/short.txt"

tok="$here/assets/tokenizers/gpt2"
small="$work/gpt2-small"  # GPT-2 small's shape, random weights (the small, lens and profile stages)
if want fused; then
stage "the kernels on $dev (row statistics, pooling, softmax, a map's extent) against their references"
timeout 60 "$build/ssaviz_fused_check" --device "$dev" >"$out/fused-check.txt" 2>&1
echo "ssaviz_fused_check: rc $?, $(tail -n 1 "$out/fused-check.txt")" | tee -a "$out/stages.txt"
fi
# The exactness exports run side by side, SSAVIZ_GPU_JOBS at a time (default 6 on a device, 2 on a
# CPU dry run): each is a small model, mostly its process's start, and a session's device minutes are
# few. exact_wait waits for them all and gathers their logs, in the order they started, into
# exactness-log.txt; nothing timed runs while they do.
jobs_max=${SSAVIZ_GPU_JOBS:-$([ "$dev" = cuda ] && echo 6 || echo 2)}
exact_started=0
exact() {  # NAME DEVICE TAG EXTRA...   writes $work/out-NAME-DEVICE-TAG (the settings in force are the caller's; NAME run: the run $work/run;
           # EXACT_TEXT=short.txt: the text's first 600 bytes)
  local name=$1 device=$2 tag=$3; shift 3
  local what=(--model "$work/$name"); [ "$name" = run ] && what=(--run "$work/run")
  exact_started=$((exact_started + 1))  # here, not inside $(...): a subshell's count is lost
  local log; printf -v log '%s/exact-%03d.log' "$work" "$exact_started"
  : >"$work/tried-$name-$device-$tag"  # compare_exports.py counts an export tried and not written as missing
  { timeout 40 "$build/ssaviz" export "${what[@]}" --device "$device" --text-file "$work/${EXACT_TEXT:-text.txt}" --truncate \
      --format npy,json --out "$work/out-$name-$device-$tag" "$@" >"$log" 2>&1 ||
      echo "export $name on $device $* failed" | tee -a "$log"; } &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
}
exact_wait() {
  wait
  cat "$work"/exact-*.log >>"$out/exactness-log.txt" 2>/dev/null
  rm -f "$work"/exact-*.log
}

if want exact; then
stage "exactness: $dev against the CPU"
rm -rf "$work"/out-* "$work"/tried-*  # a run before this one on the same machine: none of its exports count
mk() {  # NAME FLAGS...
  local name=$1; shift
  "$build/ssaviz" init-random --out "$work/$name" --tokenizer "$tok" --positions 1024 --layers 2 --heads 4 --embd 64 "$@" >/dev/null
}
mk gpt2 --seed 3
mk twin --seed 4
mk pythia --family pythia --seed 5
mk llama --family llama --kv-heads 2 --save-dtype bf16 --seed 6
mk mistral --family mistral --kv-heads 1 --seed 7
mk llama3 --family llama3 --kv-heads 2 --seed 8
cp -r "$here/assets/models/english/ssa" "$work/english"
for name in english gpt2 pythia llama mistral llama3; do
  exact "$name" cpu f32 --lens; exact "$name" "$dev" f32 --lens
done
exact gpt2 cpu twin --compare "$work/twin"; exact gpt2 "$dev" twin --compare "$work/twin"
exact gpt2 cpu base --base "$work/twin" --lens; exact gpt2 "$dev" base --base "$work/twin" --lens  # three sides: the base's maps, metrics and lens
exact gpt2 "$dev" bf16 --dtype bf16; exact llama "$dev" bf16 --dtype bf16
# What each head did and what a run did (since 2026-12-04, not yet run on a device): --rank-heads
# beside a base (a what-if a head, and the drift's parts: each head's, layer's and the embeddings'
# weights taken back from the base one at a time), the attribution of the next token and of SSA's
# top prediction, and a training run's timeline beside a base with every step's whole export (two
# checkpoint-N/ folders of GPT-2's shape), on the device against the same on the CPU.
# Also what no device ran yet: the ranking without a base, the next token against SSA's other at a
# position, a run beside a compare run, the layer-local comparison's lens, and a sliding window of 64
# keys on a text of some 600 tokens (a Hugging Face Mistral folder: the row measures count the keys
# a row sees, min(i, w)).
mk llama-base --family llama --kv-heads 2 --seed 9
mk mistral-window --family mistral --kv-heads 1 --seed 10 --layout hf
"$py" - "$work/mistral-window/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["sliding_window"] = 64; json.dump(c, open(sys.argv[1], "w"), indent=2)
EOF
rm -rf "$work/run" "$work/run2"; mkdir -p "$work/run" "$work/run2"
cp -r "$work/gpt2" "$work/run/checkpoint-100"; cp -r "$work/twin" "$work/run/checkpoint-200"
cp -r "$work/twin" "$work/run2/checkpoint-100"; cp -r "$work/gpt2" "$work/run2/checkpoint-200"
for d in $([ "$dev" = cpu ] && echo cpu || echo "cpu $dev"); do
  EXACT_TEXT=short.txt exact gpt2 "$d" rank-base --base "$work/twin" --lens --rank-heads --dla-target next  # some 30 analyses each
  EXACT_TEXT=short.txt exact llama "$d" rank-base --base "$work/llama-base" --lens --rank-heads --dla-target top
  EXACT_TEXT=short.txt exact llama "$d" rank --rank-heads --lens --dla-target next-against-other --dla-position 20
  exact run "$d" run --base "$work/twin" --lens --steps all
  exact run "$d" run-compare --compare-run "$work/run2" --lens --steps 200
  exact llama "$d" local --compare local --lens
  exact mistral-window "$d" window --lens
done
if [ "$dev" != cpu ]; then  # the window with the row measures' kernel, and with the rows fused
  SSAVIZ_CUDA_SOFTMAX_MEASURES=1 SSAVIZ_CUDA_PREDICTIONS=1 exact mistral-window "$dev" window-kernels --lens
  SSAVIZ_FUSED_ATTENTION=1 exact mistral-window "$dev" window-fused --lens
fi
[ "$dev" = cuda ] && exact gpt2 cuda f16 --dtype f16
# Blocks of 1 MB (several a layer at these sizes, where the default takes every row at once).
SSAVIZ_DEVICE_BLOCK_MB=1 exact gpt2 "$dev" blocks --lens
SSAVIZ_DEVICE_BLOCK_MB=1 exact llama "$dev" blocks --lens
SSAVIZ_DEVICE_BLOCK_MB=1 exact gpt2 "$dev" blocks-base --base "$work/twin" --lens
# The same with each block running the whole layer (the CPU's way), where a device's default runs
# a layer's weights over every new row at once (AnalyzeOptions::LayerProducts).
SSAVIZ_LAYER_PRODUCTS=blocks SSAVIZ_DEVICE_BLOCK_MB=1 exact llama "$dev" block-products --lens
SSAVIZ_LAYER_PRODUCTS=blocks SSAVIZ_DEVICE_BLOCK_MB=1 exact gpt2 "$dev" block-products-base --base "$work/twin" --lens
# The fused temperatures (temperatures_cuda.cu, off unless SSAVIZ_CUDA_TEMPERATURES=1 until checked
# here): every family's forms, and what-ifs that drop and scale terms against the CPU's same.
for name in english gpt2 pythia llama mistral llama3; do SSAVIZ_CUDA_TEMPERATURES=1 exact "$name" "$dev" temperatures --lens; done
exact gpt2 cpu what-ifs --ablate "0:1,1:0=tok,1:*=x0.5"
SSAVIZ_CUDA_TEMPERATURES=1 exact gpt2 "$dev" temperatures-what-ifs --ablate "0:1,1:0=tok,1:*=x0.5"
# The kernels not yet checked on a device besides the temperatures' (off until checked here): the
# softmax and the row measures in one (metrics_cuda.cu's SoftmaxAndCompareRows,
# SSAVIZ_CUDA_SOFTMAX_MEASURES=1) and the predictions' scan (TopLogits, SSAVIZ_CUDA_PREDICTIONS=1),
# each checked alone by ssaviz_fused_check: every family, a twin, a base (three maps), and 1 MB
# blocks (several a layer, rows from a later first row).
kernels() { SSAVIZ_CUDA_SOFTMAX_MEASURES=1 SSAVIZ_CUDA_PREDICTIONS=1 "$@"; }
for name in english gpt2 pythia llama mistral llama3; do kernels exact "$name" "$dev" kernels --lens; done
kernels exact gpt2 "$dev" kernels-twin --compare "$work/twin"
kernels exact gpt2 "$dev" kernels-base --base "$work/twin" --lens
SSAVIZ_DEVICE_BLOCK_MB=1 kernels exact llama "$dev" kernels-blocks --lens
# The TF32 products (linear.h's Tf32x3Matmul, off unless SSAVIZ_PRODUCTS=tf32x3 until checked here;
# ssaviz_fused_check checks the products alone): the weights' and the scores' products of at least
# 128 rows on TF32 tensor cores in three parts, against the CPU's float32.
tf32() { SSAVIZ_PRODUCTS=tf32x3 "$@"; }
for name in english gpt2 pythia llama mistral llama3; do tf32 exact "$name" "$dev" tf32x3 --lens; done
tf32 exact gpt2 "$dev" tf32x3-twin --compare "$work/twin"
tf32 exact gpt2 "$dev" tf32x3-base --base "$work/twin" --lens
SSAVIZ_DEVICE_BLOCK_MB=1 tf32 exact llama "$dev" tf32x3-blocks --lens
# The attention rows fused (fused_attention_torch.h: flash_kernels.cuh's kernel, which never writes
# the rows; off unless SSAVIZ_FUSED_ATTENTION=1 until checked here; ssaviz_fused_check checks the
# kernel alone): every family, a twin, a base (three sides) and 1 MB blocks, against the CPU.
fused() { SSAVIZ_FUSED_ATTENTION=1 "$@"; }
for name in english gpt2 pythia llama mistral llama3; do fused exact "$name" "$dev" fused --lens; done
fused exact gpt2 "$dev" fused-twin --compare "$work/twin"
fused exact gpt2 "$dev" fused-base --base "$work/twin" --lens
SSAVIZ_DEVICE_BLOCK_MB=1 fused exact llama "$dev" fused-blocks --lens
exact_wait
"$py" "$here/bench/compare_exports.py" "$work" "$dev" | tee "$out/exactness.txt"
sed -n '/^summary/,$p' "$out/exactness.txt" >>"$out/stages.txt"  # each switch's verdict
if [ "$dev" = cuda ]; then  # GPT-2 small's shape at 8,192 tokens with the unchecked kernels and without (host ops and time)
  [ -f "$small/model.safetensors" ] || "$build/ssaviz" init-random --out "$small" --seed 1 --tokenizer "$tok" \
    --layers 12 --heads 12 --embd 768 --positions 8192 >/dev/null
  speed=""  # a line a kind of run, "  end: 0 54.6 ms T 50.1 ms ...", for the summary below
  for what in end:5 full:2 middle:2; do  # ONLY:REPEATS
    ons="0 1 P F"; [ "${what%%:*}" = end ] && ons="0 T 1 F"
    speed+="${speed:+$'\n'}  ${what%%:*}:"
    for on in $ons; do  # none, (at the end) the temperatures' alone, all three, (P) and the TF32 products, (F) all and the rows fused
      t=$([ $on = 0 ] && echo 0 || echo 1) k=$([ $on = 0 ] || [ $on = T ] && echo 0 || echo 1)
      p=$([ $on = P ] || [ $on = F ] && echo tf32x3 || echo float32) f=$([ $on = F ] && echo 1 || echo 0)
      echo "SSAVIZ_CUDA_TEMPERATURES=$t SSAVIZ_CUDA_SOFTMAX_MEASURES=$k SSAVIZ_CUDA_PREDICTIONS=$k SSAVIZ_PRODUCTS=$p SSAVIZ_FUSED_ATTENTION=$f," \
        "--only ${what%%:*} of 8,192 tokens:" | tee -a "$out/stages.txt"
      SSAVIZ_FUSED_ATTENTION=$f SSAVIZ_PRODUCTS=$p SSAVIZ_CUDA_TEMPERATURES=$t SSAVIZ_CUDA_SOFTMAX_MEASURES=$k SSAVIZ_CUDA_PREDICTIONS=$k SSAVIZ_BENCH_OPS=1 timeout 60 \
        "$build/ssaviz_bench" --model "$small" --device "$dev" --only "${what%%:*}" --tokens 8192 --repeats "${what##*:}" --no-maps 2>&1 |
        grep -E "^median|^host ops dispatched \(the analysis|ssaviz::layer_pass|ssaviz::predictions" | tee "$work/speed.txt" | tee -a "$out/stages.txt"
      ms=$(sed -n 's/^median [a-z]*: \([0-9.]*\) ms.*/\1/p' "$work/speed.txt")
      speed+=" $on ${ms:-failed} ms"
    done
  done
  { echo "8,192 tokens, the median ms with each set of switches (0 none; T the temperatures' kernel; 1 the three kernels;"
    echo "P and the TF32 products; F and the rows fused):"; echo "$speed"; } | tee -a "$out/stages.txt"
  # The fused kernel's launches before 2026-12-01: the unfused way's 672-row blocks at 8,192 tokens,
  # which 32 MB blocks give the fused way's cells (13 launches a layer of 132 blocks, against two).
  echo "F in the fused way's old blocks (SSAVIZ_DEVICE_BLOCK_MB=32: 672 rows), --only full of 8,192 tokens:" | tee -a "$out/stages.txt"
  SSAVIZ_DEVICE_BLOCK_MB=32 SSAVIZ_FUSED_ATTENTION=1 SSAVIZ_PRODUCTS=tf32x3 SSAVIZ_CUDA_TEMPERATURES=1 SSAVIZ_CUDA_SOFTMAX_MEASURES=1 \
    SSAVIZ_CUDA_PREDICTIONS=1 timeout 60 "$build/ssaviz_bench" --model "$small" --device "$dev" --only full --tokens 8192 --repeats 2 \
    --no-maps 2>&1 | grep -E "^median" | tee -a "$out/stages.txt"
fi
fi

if want small; then
stage "GPT-2 small's shape on CUDA against PyTorch CUDA"
"$build/ssaviz" init-random --out "$small" --seed 1 --tokenizer "$tok" --layers 12 --heads 12 --embd 768 --positions 8192 >/dev/null
timeout 90 "$build/ssaviz_bench" --model "$small" --device "$dev" --python "$py" --tokens "${SSAVIZ_GPU_SMALL_TOKENS:-1024,4096}" --repeats 3 2>&1 | tee "$out/bench-small.txt"
timeout 90 "$build/ssaviz_bench" --model "$small" --device "$dev" --tokens 8192 --repeats 2 --no-baseline 2>&1 | tee -a "$out/bench-small.txt"
fi

# The attention rows' CUDA softmax (metrics_cuda.cu's MaskedSoftmaxRows, on unless SSAVIZ_CUDA_SOFTMAX=0;
# the exact stage's exports use it): every family's export with torch's softmax instead against the
# exact stage's CPU exports, then full analyses and edits with the kernel and without.
if want softmax; then
stage "torch's softmax instead of the CUDA one (SSAVIZ_CUDA_SOFTMAX=0) against the CPU, and both's time"
if [ -d "$work/out-gpt2-cpu-f32" ]; then
  for name in english gpt2 pythia llama mistral llama3; do SSAVIZ_CUDA_SOFTMAX=0 exact "$name" "$dev" softmax --lens; done
  SSAVIZ_CUDA_SOFTMAX=0 exact gpt2 "$dev" softmax-twin --compare "$work/twin"
  exact_wait
  "$py" "$here/bench/compare_exports.py" "$work" "$dev" softmax | tee "$out/softmax-exactness.txt"
  sed -n '/^summary/,$p' "$out/softmax-exactness.txt" >>"$out/stages.txt"
fi
[ -f "$small/model.safetensors" ] ||
  "$build/ssaviz" init-random --out "$small" --seed 1 --tokenizer "$tok" --layers 12 --heads 12 --embd 768 --positions 8192 >/dev/null
for what in ${SSAVIZ_GPU_SOFTMAX_RUNS:-full:1024 full:8192 end:8192 middle:8192}; do
  for on in 0 1; do
    echo "SSAVIZ_CUDA_SOFTMAX=$on --only ${what%%:*} --tokens ${what##*:}" | tee -a "$out/softmax-time.txt"
    SSAVIZ_CUDA_SOFTMAX=$on timeout 60 "$build/ssaviz_bench" --model "$small" --device "$dev" --only "${what%%:*}" --tokens "${what##*:}" \
      --repeats 3 2>&1 | tail -n 7 | tee -a "$out/softmax-time.txt"
  done
done
fi

if want lens; then
stage "the logit lens and one position's lens (RunLensAt) at GPT-2 small's shape on $dev"
[ -d "$small" ] || "$build/ssaviz" init-random --out "$small" --seed 1 --tokenizer "$tok" --layers 12 --heads 12 --embd 768 --positions 8192 >/dev/null
timeout 90 "$build/ssaviz_bench" --model "$small" --device "$dev" --only lens --tokens 1024 --repeats 1 --no-baseline 2>&1 | tee "$out/bench-lens.txt"
fi

if want python; then
stage "the Python module on $dev against the CPU, and the host's ops per analysis"
if [ -f "$build/python/ssaviz/__init__.py" ]; then
  cp -r "$here/assets/models/english/ssa" "$work/english-py" 2>/dev/null
  cp -r "$here/assets/models/english/vanilla" "$work/english-py-base" 2>/dev/null  # as a base: the lens, attribute() and rank_heads() beside it
  PYTHONPATH="$build/python" timeout 120 "$py" -W ignore "$here/bench/gpu_python.py" "$work/english-py" "$dev" "$work/long.txt" "$work" 1e-5 "$work/english-py-base" 2>&1 |
    tee "$out/python.txt"
else
  echo "no Python module in $build (see build-gpu-configure.log's \"Python module\" line)" | tee "$out/python.txt"
fi
[ -d "$small" ] || "$build/ssaviz" init-random --out "$small" --seed 1 --tokenizer "$tok" --layers 12 --heads 12 --embd 768 --positions 8192 >/dev/null
for n in 1024 8192; do
  SSAVIZ_BENCH_OPS=1 timeout 60 "$build/ssaviz_bench" --model "$small" --device "$dev" --only full --tokens "$n" --repeats 1 2>&1 |
    grep -A 40 "host ops" | head -n 40 >"$out/ops-full-$n.txt"
  echo "host ops, full analysis of $n tokens: $(head -n 1 "$out/ops-full-$n.txt")" | tee -a "$out/stages.txt"
done
fi

if want tiny; then
stage "TinyLlama's shape on CUDA"
tiny="$work/tinyllama"
timeout 120 "$build/ssaviz" init-random --out "$tiny" --family llama --layers 22 --heads 32 --kv-heads 4 --embd 2048 --mlp 5632 \
  --save-dtype bf16 --tokenizer "$tok" --positions 8192 >/dev/null
for T in ${SSAVIZ_GPU_TINY_TOKENS:-1024 8192}; do
  timeout 75 "$build/ssaviz_bench" --model "$tiny" --device "$dev" --only full --tokens "$T" --repeats 2 2>&1 | tail -n 3 | tee -a "$out/bench-tiny.txt"
done
# The same at 8,192 with the TF32 products and the unchecked kernels (the exact stage checks them).
echo "SSAVIZ_PRODUCTS=tf32x3 SSAVIZ_CUDA_TEMPERATURES=1 SSAVIZ_CUDA_SOFTMAX_MEASURES=1 SSAVIZ_CUDA_PREDICTIONS=1:" | tee -a "$out/bench-tiny.txt"
SSAVIZ_PRODUCTS=tf32x3 SSAVIZ_CUDA_TEMPERATURES=1 SSAVIZ_CUDA_SOFTMAX_MEASURES=1 SSAVIZ_CUDA_PREDICTIONS=1 timeout 75 "$build/ssaviz_bench" \
  --model "$tiny" --device "$dev" --only full --tokens 8192 --repeats 2 --no-baseline 2>&1 | tail -n 3 | tee -a "$out/bench-tiny.txt"
# And with the attention rows fused too (SSAVIZ_FUSED_ATTENTION=1: heads of 64, four query heads a
# key head).
echo "the same and SSAVIZ_FUSED_ATTENTION=1:" | tee -a "$out/bench-tiny.txt"
SSAVIZ_FUSED_ATTENTION=1 SSAVIZ_PRODUCTS=tf32x3 SSAVIZ_CUDA_TEMPERATURES=1 SSAVIZ_CUDA_SOFTMAX_MEASURES=1 SSAVIZ_CUDA_PREDICTIONS=1 timeout 75 \
  "$build/ssaviz_bench" --model "$tiny" --device "$dev" --only full --tokens 8192 --repeats 2 --no-baseline 2>&1 | tail -n 3 | tee -a "$out/bench-tiny.txt"
# An edit at the end: grouped kv heads with value temperatures, where each layer used to wait for
# the device twice (value_off.any().item(), repeat_interleave); none does now.
timeout 60 "$build/ssaviz_bench" --model "$tiny" --device "$dev" --only end --tokens 1024 --repeats 5 2>&1 | tail -n 2 | tee -a "$out/bench-tiny.txt"
"$build/ssaviz" tokenize --model "$tiny" --text-file "$work/long.txt" --truncate --json |
  "$py" -c 'import json,sys; print(" ".join(map(str, json.load(sys.stdin)["ids"])))' >"$work/ids.txt"
[ "${SSAVIZ_GPU_TINY_BASELINE:-1}" = 1 ] && timeout 60 "$py" "$here/bench/family_baseline.py" --model "$tiny" --ids "$work/ids.txt" --tokens 1024 --repeats 2 --device "$dev" 2>&1 |
  tail -n 3 | tee -a "$out/bench-tiny.txt"
fi

# The analysis's blocks of rows (SSAVIZ_DEVICE_BLOCK_MB; analysis_plan_torch.h's BlockBytes): the default,
# 256 MB (13 blocks a layer of GPT-2 small at 8,192 tokens), against 128 MB and 1 GB (fewer ops,
# more of the masked triangle multiplied); and "blocks", the default's size with each block running
# the whole layer (SSAVIZ_LAYER_PRODUCTS=blocks: the way before 2026-11-30, 18,600 host ops an
# analysis), where a device's default now runs a layer's weights over every new row at once. Each
# run's last line names its blocks and the device memory in use.
if want blocks; then
stage "the analysis's blocks of rows: 256 MB (the default) against 128 MB, 1 GB and each block the whole layer"
[ -f "$small/model.safetensors" ] ||
  "$build/ssaviz" init-random --out "$small" --seed 1 --tokenizer "$tok" --layers 12 --heads 12 --embd 768 --positions 8192 >/dev/null
for what in ${SSAVIZ_GPU_BLOCK_RUNS:-full:8192 middle:8192 tiny/full:8192}; do
  model=$small sizes="default 128 1024 blocks" repeats=3
  case $what in tiny/*) model="$work/tinyllama" what=${what#tiny/} sizes="default 1024 blocks" repeats=2 ;; esac
  [ -d "$model" ] || { echo "no $model for the blocks' run $what" | tee -a "$out/stages.txt"; continue; }
  for mb in $sizes; do
    label="$(basename "$model") --only ${what%%:*} --tokens ${what##*:}, blocks: $mb"
    echo "$label" >>"$out/blocks.txt"
    ( case $mb in default) ;; blocks) export SSAVIZ_LAYER_PRODUCTS=blocks ;; *) export SSAVIZ_DEVICE_BLOCK_MB=$mb ;; esac
      timeout 75 "$build/ssaviz_bench" --model "$model" --device "$dev" --only "${what%%:*}" --tokens "${what##*:}" --repeats $repeats \
        --no-maps 2>&1 | tail -n 4 >>"$out/blocks.txt" )
    echo "$label: $(grep "^median" "$out/blocks.txt" | tail -n 1)" | tee -a "$out/stages.txt"
  done
done
[ "$dev" = cuda ] && SSAVIZ_DEVICE_BLOCK_MB=1024 SSAVIZ_BENCH_OPS=1 timeout 60 "$build/ssaviz_bench" --model "$small" --device "$dev" --only full \
  --tokens 8192 --repeats 1 --no-maps 2>&1 | grep -m1 "host ops" | sed 's/^/1 GB blocks, 8,192 tokens: /' | tee -a "$out/stages.txt"
[ "$dev" = cuda ] && SSAVIZ_BENCH_OPS=1 timeout 60 "$build/ssaviz_bench" --model "$small" --device "$dev" --only full \
  --tokens 8192 --repeats 1 --no-maps 2>&1 | grep -m1 "host ops" | sed 's/^/256 MB blocks, 8,192 tokens: /' | tee -a "$out/stages.txt"
fi

# GPT-2 small's shape at 32,768 tokens, where memory allows (on the CPU's dry run: 2,048).
if want long; then
stage "GPT-2 small's shape at 32,768 tokens"
long="$work/gpt2-small-32k" n=${SSAVIZ_GPU_LONG_TOKENS:-32768}
[ "$dev" = cuda ] || n=${SSAVIZ_GPU_LONG_TOKENS:-2048}
[ -d "$long" ] || "$build/ssaviz" init-random --out "$long" --seed 1 --tokenizer "$tok" --layers 12 --heads 12 --embd 768 --positions 32768 >/dev/null
# One process: --only end makes the full analysis first (its time printed), then the edits, each with
# the shown head's map and the window's head view; the median line names the device's memory.
timeout 200 "$build/ssaviz_bench" --model "$long" --device "$dev" --only end --tokens "$n" --repeats 4 >"$out/long.txt" 2>&1
grep -E "^full analysis of|^median" "$out/long.txt" | sed "s/^/$n tokens: /" | tee -a "$out/stages.txt"
fi

if want profile && command -v nsys >/dev/null; then
stage "where the 8,192-token analysis spends its time (nsys)"
[ -d "$small" ] || "$build/ssaviz" init-random --out "$small" --seed 1 --tokenizer "$tok" --layers 12 --heads 12 --embd 768 --positions 8192 >/dev/null
timeout 90 nsys profile -o "$work/prof" --force-overwrite true -t cuda "$build/ssaviz_bench" --model "$small" --device "$dev" \
  --only full --tokens 8192 --repeats 2 >"$out/profile-log.txt" 2>&1
timeout 60 nsys stats -r cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum -f csv -o "$out/profile" "$work/prof.nsys-rep" >>"$out/profile-log.txt" 2>&1
ls "$out"/profile* | head
elif want profile; then
stage "where the time goes: LibTorch's profiler (no nsys here), its kernels ranked"
[ -d "$small" ] || "$build/ssaviz" init-random --out "$small" --seed 1 --tokenizer "$tok" --layers 12 --heads 12 --embd 768 --positions 8192 >/dev/null
# Each trace is ONLY:TOKENS of GPT-2 small's shape, or tiny/ONLY:TOKENS of TinyLlama's (made by the tiny stage).
# kernels/ONLY:TOKENS: with the unchecked kernels and the TF32 products on (the exact stage's);
# fused/ONLY:TOKENS: the same and the attention rows fused (SSAVIZ_FUSED_ATTENTION=1).
for what in ${SSAVIZ_GPU_TRACES:-full:1024 full:8192 end:8192 middle:8192 kernels/full:8192 fused/full:8192 tiny/full:1024 tiny/full:8192}; do
  model=$small name= on=0 f=0
  case $what in
    tiny/*) model="$work/tinyllama" name=tiny- what=${what#tiny/} ;;
    kernels/*) name=kernels- on=1 what=${what#kernels/} ;;
    fused/*) name=fused- on=1 f=1 what=${what#fused/} ;;
  esac
  [ -d "$model" ] || { echo "no $model for the trace $name$what" | tee -a "$out/stages.txt"; continue; }
  only=${what%%:*} n=${what##*:} name=$name${what%%:*}-${what##*:}
  p=$([ $on = 1 ] && echo tf32x3 || echo float32)
  SSAVIZ_FUSED_ATTENTION=$f SSAVIZ_PRODUCTS=$p SSAVIZ_CUDA_TEMPERATURES=$on SSAVIZ_CUDA_SOFTMAX_MEASURES=$on SSAVIZ_CUDA_PREDICTIONS=$on \
    SSAVIZ_BENCH_TRACE="$work/trace-$name.json" \
    timeout 90 "$build/ssaviz_bench" --model "$model" --device "$dev" --only "$only" --tokens "$n" --repeats 3 >"$out/trace-$name-log.txt" 2>&1
  timeout 60 "$py" bench/trace_summary.py "$work/trace-$name.json" >"$out/trace-$name.md" 2>&1
  echo "$name: $(grep -m1 median "$out/trace-$name-log.txt"); $(head -n 1 "$out/trace-$name.md")" | tee -a "$out/stages.txt"
done
fi
if want gui; then
stage "the window (SSAVIZ_GUI=ON) into build-gpu-gui, for bench/gpu-window.sh"
if [ "$dev" = cuda ]; then
  SECONDS=0
  (
    set -e
    # The window's -dev packages, kept out of /opt/deps (on every stage's library path) until now.
    for f in .gpu/gui-debs/*.deb; do dpkg -x "$f" /opt/deps; done
    export PKG_CONFIG_PATH=/opt/deps/usr/lib/x86_64-linux-gnu/pkgconfig:/opt/deps/usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/deps
    pkgconf=$(command -v pkg-config || command -v pkgconf || echo /opt/deps/usr/bin/pkgconf)
    [ -f build-gpu-gui/build.ninja ] || cmake -S . -B build-gpu-gui -G Ninja -DCMAKE_BUILD_TYPE=Release -DSSAVIZ_GUI=ON -DSSAVIZ_TESTS=OFF \
      -DSSAVIZ_LIBTORCH="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')" -DCMAKE_PREFIX_PATH=/opt/deps/usr \
      -DPKG_CONFIG_EXECUTABLE="$pkgconf" -DSSAVIZ_PYTHON="$(command -v python3)" -DCMAKE_CUDA_ARCHITECTURES=90 -DTORCH_CUDA_ARCH_LIST=9.0 \
      ${SSAVIZ_CMAKE_FLAGS:-}
    cmake --build build-gpu-gui -j16 --target ssaviz
  ) >"$work/build-gui.txt" 2>&1
  rc=$?
  echo "build-gpu-gui/ssaviz: rc $rc in $SECONDS s (log $work/build-gui.txt)" | tee -a "$out/stages.txt"
  [ $rc = 0 ] || grep -E "error|Could NOT|CMake Error" "$work/build-gui.txt" | head -n 20 | tee -a "$out/stages.txt"
else
  echo "skipped on $dev (a dry run builds nothing)" | tee -a "$out/stages.txt"
fi
fi
stage done
