#!/usr/bin/env bash
# Benchmark (not a test): the real window under Xvfb, typing one character every 100 ms into a
# text of about 256 and about 1,000 tokens, printing the UI's work per frame while the model runs
# and the keystroke-to-pixels latency (request to the frame that shows its result). The model is
# the build's random one (the default model's shape, 4 x 4 and width 128, with a context of 1,024;
# the bundled English model's context of 256 is too short for the second text).
#   usage: bench/gui_latency.sh [BUILD_DIR] [KEYS] [MODEL_DIR]
set -euo pipefail
build=${1:-build}
keys=${2:-40}
ssaviz="$build/ssaviz"
model=${3:-$build/models/default}
source_text=/usr/share/common-licenses/GPL-3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The first N words of the GPL, with N chosen so the text tokenizes to about the target.
make_text() {  # target_tokens out_file
    local target=$1 out=$2 words=$1
    for _ in 1 2 3 4 5 6; do
        tr -s ' \n\t' ' ' <"$source_text" | cut -d' ' -f1-"$words" >"$out"
        local tokens
        tokens=$("$ssaviz" tokenize --model "$model" --text-file "$out" --truncate | tail -n 1 | cut -d' ' -f1)
        # --truncate caps the count at the context: halve until it is below.
        if [ "$tokens" -ge 1024 ]; then words=$(( words / 2 )); else words=$(( words * target / tokens )); fi
    done
}

echo "ssaviz GUI latency: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for target in 256 1000; do
    make_text "$target" "$work/text.txt"
    echo "--- about $target tokens"
    out=$(xvfb-run -a -s "-screen 0 1600x1000x24" "$ssaviz" --model "$model" --text-file "$work/text.txt" --bench-typing "$keys")
    echo "$out"
    # A text the model refused (e.g. longer than its context) measures nothing: say so, and fail.
    if grep -q '^tokens 0,' <<<"$out"; then echo "gui_latency: no analysis of the text (see above)" >&2; exit 1; fi
done
