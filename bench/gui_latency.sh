#!/usr/bin/env bash
# Benchmark (not a test): the real window under Xvfb typing one character every 100 ms at the end,
# in the middle and at the start of texts of about 256, 1,000 and 2,000 tokens, printing the UI's
# work per frame and the keystroke-to-pixels latency (request to the frame that shows its result,
# split into waiting for the worker, tokenizing, the engine, the shown head's maps and the answer
# to pixels);
# then selecting another head 20 times at about 2,000 tokens (the work of each frame that shows a
# new head: map rebuild, bake, upload). The model is the build's random one in the default model's
# shape (4 x 4, width 128) with a context of 2,048.
#   usage: bench/gui_latency.sh [BUILD_DIR] [KEYS] [MODEL_DIR]
set -euo pipefail
build=${1:-build}
keys=${2:-40}
ssaviz="$build/ssaviz"
here=$(cd "$(dirname "$0")/.." && pwd)
model=${3:-$build/models/long}
source_text=/usr/share/common-licenses/GPL-3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ ! -f "$model/config.json" ]; then
    "$ssaviz" init-random --out "$model" --seed 1234 --tokenizer "$here/assets/tokenizers/gpt2" --positions 2048 >/dev/null
fi

# The first N words of the GPL (repeated), with N chosen so the text tokenizes to about the target.
for _ in 1 2 3; do tr -s ' \n\t' ' ' <"$source_text"; done >"$work/source.txt"
make_text() {  # target_tokens out_file
    local target=$1 out=$2 words=$1
    for _ in 1 2 3 4 5 6; do
        cut -d' ' -f1-"$words" "$work/source.txt" >"$out"
        local tokens
        tokens=$("$ssaviz" tokenize --model "$model" --text-file "$out" --truncate | tail -n 1 | cut -d' ' -f1)
        # --truncate caps the count at the context: halve until it is below.
        if [ "$tokens" -ge 2048 ]; then words=$(( words / 2 )); else words=$(( words * target / tokens )); fi
    done
}

window() { xvfb-run -a -s "-screen 0 1600x1000x24" "$ssaviz" --model "$model" --text-file "$work/text.txt" "$@"; }

echo "ssaviz GUI latency: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for target in 256 1000 2000; do
    make_text "$target" "$work/text.txt"
    for at in end middle start; do
        echo "--- about $target tokens, typing at the $at"
        out=$(window --bench-typing "$keys" --bench-at "$at")
        echo "$out"
        # A text the model refused (e.g. longer than its context) measures nothing: say so, and fail.
        if grep -q '^tokens 0,' <<<"$out"; then echo "gui_latency: no analysis of the text (see above)" >&2; exit 1; fi
    done
done
echo "--- about 2000 tokens, selecting another head"
window --bench-heads 20
