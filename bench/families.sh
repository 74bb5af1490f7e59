#!/usr/bin/env bash
# The families against PyTorch (issue 25): a Pythia-160M-shaped and a TinyLlama-shaped random model
# (GPT-2's tokenizer, so vocabularies of 50,257; TinyLlama's weights BF16 on disk), each analysed by ssaviz (ssaviz_bench, whole
# Engine::Analyze: both passes, metrics, predictions) and by bench/family_baseline.py (the same
# work in batched float32 torch ops) in the same run, 2 threads each.
#   usage: bench/families.sh [BUILD_DIR] [TOKENS]       (TOKENS default 1024)
set -euo pipefail
build=${1:-build}
tokens=${2:-1024}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for _ in 1 2 3; do cat /usr/share/common-licenses/GPL-3; done >"$work/long.txt"

run() {  # NAME INIT-RANDOM-FLAGS...
  local name=$1
  shift
  echo "== $name"
  "$build/ssaviz" init-random --out "$work/$name" --tokenizer "$here/assets/tokenizers/gpt2" --positions 2048 "$@" >/dev/null
  "$build/ssaviz" info --model "$work/$name" | grep -E '^(family|parameters)'
  "$build/ssaviz" tokenize --model "$work/$name" --text-file "$work/long.txt" --truncate --json |
    /usr/bin/python3 -c 'import json,sys; print(" ".join(map(str, json.load(sys.stdin)["ids"])))' >"$work/ids.txt"
  "$build/ssaviz_bench" --model "$work/$name" --tokens "$tokens" --threads 2 --repeats 1 --no-baseline | grep -E '^\| [0-9]' | head -1
  /usr/bin/python3 "$here/bench/family_baseline.py" --model "$work/$name" --ids "$work/ids.txt" --tokens "$tokens" --threads 2 --repeats 1
  rm -rf "${work:?}/$name"
}
run pythia-160m --family pythia --layers 12 --heads 12 --embd 768
run tinyllama --family llama --layers 22 --heads 32 --kv-heads 4 --embd 2048 --mlp 5632 --save-dtype bf16
