#!/usr/bin/env bash
# Benchmark (not a test): the real window under Xvfb, typing one character every 100 ms into a
# text of about 256 and about 1,000 tokens (the default model's context is 1,024), printing the
# UI's work per frame while the model runs and the keystroke-to-pixels latency (request to the
# frame that shows its result).
#   usage: bench/gui_latency.sh [BUILD_DIR] [KEYS]
set -euo pipefail
build=${1:-build}
keys=${2:-40}
ssaviz="$build/ssaviz"
source_text=/usr/share/common-licenses/GPL-3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The first N words of the GPL, with N chosen so the text tokenizes to about the target.
make_text() {  # target_tokens out_file
    local target=$1 out=$2 words=$1
    for _ in 1 2 3 4 5 6; do
        tr -s ' \n\t' ' ' <"$source_text" | cut -d' ' -f1-"$words" >"$out"
        local tokens
        tokens=$("$ssaviz" tokenize --text-file "$out" --truncate | tail -n 1 | cut -d' ' -f1)
        # --truncate caps the count at the context: halve until it is below.
        if [ "$tokens" -ge 1024 ]; then words=$(( words / 2 )); else words=$(( words * target / tokens )); fi
    done
}

echo "ssaviz GUI latency: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for target in 256 1000; do
    make_text "$target" "$work/text.txt"
    echo "--- about $target tokens"
    xvfb-run -a -s "-screen 0 1600x1000x24" "$ssaviz" --text-file "$work/text.txt" --bench-typing "$keys"
done
