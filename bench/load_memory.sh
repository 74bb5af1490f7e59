#!/bin/sh
# Peak resident memory of opening a BF16 model (issue 27: memory-mapped weights whose pages are
# dropped once converted), against the float32 weights it must hold and the file it reads.
# Usage: bench/load_memory.sh [SSAVIZ] [DIR]   (default build/ssaviz and a new scratch folder)
# Writes a random Llama (4 layers, 16 heads, 4 kv heads, width 1,024, MLP 2,816, BF16 on disk) as
# model.safetensors and as a lit-gpt lit_model.pth, runs `ssaviz info` on each under /usr/bin/time
# and prints the weights' sizes and the process's peak RSS, and that of a tiny model (LibTorch's
# start-up). Nothing is committed; DIR is left for a second run.
set -eu
SSAVIZ=${1:-build/ssaviz}
DIR=${2:-$(mktemp -d /tmp/ssaviz_load_memory.XXXXXX)}
peak() {  # the peak RSS of `ssaviz info --model $1`, in MB
    /usr/bin/time -f "%M" "$SSAVIZ" info --model "$1" 2>&1 >/dev/null | tail -1 | awk '{printf "%.1f", $1 / 1000}'
}
for layout in own lit; do
    MODEL=$DIR/llama_$layout
    [ -d "$MODEL" ] || "$SSAVIZ" init-random --family llama --layout $layout --layers 4 --heads 16 --kv-heads 4 --embd 1024 \
        --mlp 2816 --save-dtype bf16 --out "$MODEL" >/dev/null
    FILE=$(ls "$MODEL"/model.safetensors "$MODEL"/lit_model.pth 2>/dev/null | head -1)
    BYTES=$(stat -c %s "$FILE")
    echo "$(basename "$FILE"): $(awk "BEGIN{printf \"%.1f\", $BYTES / 1e6}") MB BF16 = $(awk "BEGIN{printf \"%.1f\", 2 * $BYTES / 1e6}") MB float32; info peak RSS $(peak "$MODEL") MB"
done
TINY=$DIR/tiny
[ -d "$TINY" ] || "$SSAVIZ" init-random --layers 1 --heads 1 --embd 8 --positions 8 --out "$TINY" >/dev/null
echo "a 1-layer width-8 GPT-2 (LibTorch's start-up, GPT-2's tokenizer): info peak RSS $(peak "$TINY") MB"
