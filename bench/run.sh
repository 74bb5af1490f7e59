#!/usr/bin/env bash
# Benchmarks (not tests) for the long-context figures in the README, all on this machine:
#   1. ssaviz_bench: analysis, head map, bake and peak memory from 128 to 2,048 tokens on a model
#      of the default model's shape with a 2,048-token context, and on the bundled English model,
#      each beside the same work in PyTorch (bench/pytorch_baseline.py);
#   2. the real window under Xvfb zooming and panning a 2,048 x 2,048 map (--bench-zoom);
#   3. bench/gui_latency.sh: typing, frame times and keystroke-to-pixels;
#   4. bench/python_api.py: `import ssaviz` against the engine call, `ssaviz export` and PyTorch.
#   usage: bench/run.sh [BUILD_DIR] [DEVICE]      (DEVICE cpu or cuda; cuda adds 4,096 and 8,192 tokens)
set -euo pipefail
build=${1:-build}
device=${2:-cpu}
here=$(cd "$(dirname "$0")/.." && pwd)
long="$build/models/long"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The default model's shape (4 layers x 4 heads, width 128, GPT-2's tokenizer, seed 1234) with
# the context the SPEC's memory target names.
positions=2048
tokens=128,256,512,1024,2048
if [ "$device" = cuda ]; then positions=8192; tokens=$tokens,4096,8192; fi
"$build/ssaviz" init-random --out "$long" --seed 1234 --tokenizer "$here/assets/tokenizers/gpt2" --positions "$positions" >/dev/null

echo "== analysis against PyTorch, $long"
"$build/ssaviz_bench" --model "$long" --device "$device" --tokens "$tokens"
echo
echo "== analysis against PyTorch, the bundled English model (context 256)"
"$build/ssaviz_bench" --model "$here/assets/models/english/ssa" --device "$device" --tokens 64,128,256 --repeats 5

echo
echo "== zoom and pan a 2,048 x 2,048 map in the window (Xvfb, software GL)"
# The GPL repeated, cut to 2,048 tokens by --truncate's rule (the first tokens are kept).
for _ in 1 2 3; do cat /usr/share/common-licenses/GPL-3; done >"$work/long.txt"
"$build/ssaviz" tokenize --model "$long" --text-file "$work/long.txt" --truncate --json |
    /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); sys.stdout.buffer.write(open(sys.argv[1],"rb").read()[:d["offsets"][-1][1]])' "$work/long.txt" \
    >"$work/text.txt"
xvfb-run -a -s "-screen 0 1600x1000x24" "$build/ssaviz" --model "$long" --device "$device" --text-file "$work/text.txt" --bench-zoom 300

echo
echo "== typing (bench/gui_latency.sh)"
bash "$here/bench/gui_latency.sh" "$build"

if [ -d "$build/python/ssaviz" ]; then
  echo
  echo "== import ssaviz: analyze against the engine call, ssaviz export and PyTorch (bench/python_api.py)"
  /usr/bin/python3 "$here/bench/python_api.py" --build "$build" --tokens 64,256,1024
  /usr/bin/python3 "$here/bench/python_api.py" --build "$build" --model "$here/assets/models/english/ssa" --tokens 64,128,256
fi
