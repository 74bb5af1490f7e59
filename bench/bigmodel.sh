#!/usr/bin/env bash
# Benchmark (not a test), issue 27: the window on a random model of TinyLlama-1.1B's shape (22
# layers x 32 heads, 4 kv heads, width 2,048, MLP 5,632, BF16 on disk; GPT-2's tokenizer, so a
# vocabulary of 50,257 instead of 32,000), under Xvfb on the machine's cores:
#   open      --bench-open at ~1,024 tokens: process start to the model loaded, the first map and
#             the predictions shown; the first analysis's progress; frame work while the model
#             runs; resident memory (the loader's peak, and the peak from the model loaded on)
#   global    the same at ~512 tokens with --global-pass: the global tau = 1 pass on request
#   typing    --bench-typing at the end of ~512 tokens: keystroke to pixels
#   heads     --bench-heads at ~512 and ~1,024 tokens: the frame that shows another head
#   pictures  the Heads and Matrix tabs (704 heads) as PNGs in OUT_DIR, to look at
# The model is written once to MODEL_DIR (default /tmp/ssaviz-tinyllama, ~2.2 GB; never commit it).
#   usage: bench/bigmodel.sh [BUILD_DIR] [MODEL_DIR] [OUT_DIR] [KEYS]
set -euo pipefail
build=${1:-build}
model=${2:-/tmp/ssaviz-tinyllama}
out=${3:-/tmp/ssaviz-bigmodel}
keys=${4:-10}
ssaviz="$build/ssaviz"
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
if [ ! -f "$model/lit_config.json" ]; then
    "$ssaviz" init-random --family llama --layers 22 --heads 32 --kv-heads 4 --embd 2048 --mlp 5632 --save-dtype bf16 \
        --tokenizer "$here/assets/tokenizers/gpt2" --positions 2048 --out "$model" >/dev/null
fi

# The first N words of the GPL (repeated), N chosen so the text tokenizes to about the target.
for _ in 1 2 3; do tr -s ' \n\t' ' ' </usr/share/common-licenses/GPL-3; done >"$work/source.txt"
make_text() {  # target_tokens out_file
    local target=$1 out=$2 words=$1
    for _ in 1 2 3 4; do
        cut -d' ' -f1-"$words" "$work/source.txt" >"$out"
        local tokens
        tokens=$("$ssaviz" tokenize --model "$model" --text-file "$out" --truncate | tail -n 1 | cut -d' ' -f1)
        words=$(( words * target / tokens ))
    done
}
# Past 512: crossing a multiple of 256 tokens re-pools every thumbnail (a full attention pass over the
# kept q and k, ~3 s here), which typing at the end of exactly 512 tokens would measure as a keystroke.
make_text 520 "$work/t512.txt"
make_text 1024 "$work/t1024.txt"

window() { xvfb-run -a -s "-screen 0 1600x1000x24" "$ssaviz" --model "$model" "$@"; }

echo "ssaviz big model: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$ssaviz" info --model "$model" | grep -E '^(family|parameters)'
echo "--- open, about 1,024 tokens"
window --text-file "$work/t1024.txt" --bench-open
echo "--- the global tau=1 pass on request, about 512 tokens"
window --text-file "$work/t512.txt" --bench-open --global-pass
echo "--- typing at the end of about 512 tokens"
window --text-file "$work/t512.txt" --bench-typing "$keys"
for t in 512 1024; do
    echo "--- about $t tokens, selecting another head"
    window --text-file "$work/t$t.txt" --bench-heads 20
done
for tab in heads matrix; do
    window --text-file "$work/t512.txt" --show "$tab" --screenshot "$out/$tab.png" --frames 10 >/dev/null
done
echo "pictures: $out/heads.png $out/matrix.png (load now $(cut -d' ' -f1-3 /proc/loadavg))"
