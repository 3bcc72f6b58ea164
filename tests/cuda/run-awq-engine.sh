#!/bin/bash
# tests/cuda/run-awq-engine.sh — AWQ folders through the engine on the GPU machine (one device call):
#   small:    a 2-layer Qwen3-0.6B-shaped random model exported by `hone quantize --rtn -f awq` on the CPU
#             and on the GPU (the two exports must be byte-identical), then `hone run` greedy and
#             `hone ppl` on --device cpu and cuda:0;
#   bench:    the Llama-3-8B shape as AWQ g128 (gen-model BF16 → quantize --rtn → `hone bench`);
#   sanitize: compute-sanitizer memcheck + leak check over `hone run` of a 2-layer AWQ g64 folder on
#             cuda:0 (long prompt: dequant + GEMM prefill; W4A16 decode; greedy and GPU-sampled).
# Built here and carried (device tool, carry: [DIR]): tests/cuda/make-bundle-shared.sh BUILD DIR
#   usage there: HONE_E2E_CARRY=DIR tests/cuda/run-awq-engine.sh [small] [bench] [sanitize]
set -u
cd "$(dirname "$0")/../.."
C=${HONE_E2E_CARRY:-.carry-lead}
case $C in /*) ;; *) C=$PWD/$C ;; esac
tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/xc
export HONE_SOURCE_ROOT=$PWD
H=$C/bin/hone; S=/dev/shm/hone-awq-e2e; mkdir -p $S
head -c 1200 README.md > $S/text.txt
t0=$(date +%s); st () { echo "== $1: $(( $(date +%s) - t0 )) s"; }
for step in ${*:-small bench sanitize}; do
  case $step in
    small)
      $H gen-model --shape qwen3-0.6b --type f16 --layers 2 -o $S/m.gguf -q
      HONE_AWQ_DEVICE=cpu timeout 60 $H quantize -m $S/m.gguf --rtn -f awq -o $S/m-awq -q
      timeout 60 $H quantize -m $S/m.gguf --rtn -f awq -o $S/m-awq-gpu -q
      cmp $S/m-awq/model.safetensors $S/m-awq-gpu/model.safetensors && echo "RTN export: GPU == CPU (byte-identical)"
      for d in cpu cuda:0; do
        timeout 60 $H run -m $S/m-awq --device $d -p "The quick brown fox jumps over" -n 32 --temp 0 --json > $S/run.json
        echo "run $d: $(python3 -c "import json; print(json.load(open('$S/run.json'))['generated_tokens'])")"
        timeout 60 $H ppl --device $d $S/m-awq $S/text.txt 2>&1 | tail -1
      done; st small ;;
    bench)
      timeout 60 $H gen-model --shape llama3-8b --type bf16 -o $S/8b.gguf -q
      timeout 120 $H quantize -m $S/8b.gguf --rtn -g 128 -f awq -o $S/8b-awq -q
      rm -f $S/8b.gguf
      for p in 64 512; do
        timeout 80 $H bench -m $S/8b-awq --device cuda:0 -p $p -n 128 -r 5 -w 1 2>&1 | tail -9
      done; st bench ;;
    sanitize)
      $H gen-model --shape qwen3-0.6b --type f16 --layers 2 -o $S/m.gguf -q
      HONE_AWQ_DEVICE=cpu timeout 60 $H quantize -m $S/m.gguf --rtn -g 64 -f awq -o $S/m-awq64 -q
      P="$(head -c 600 $S/text.txt)"
      CS=/usr/local/cuda/bin/compute-sanitizer
      timeout 100 $CS --tool memcheck --leak-check full --print-limit 10 $H run -m $S/m-awq64 --device cuda:0 \
        -p "$P" -n 24 --temp 0 2>&1 | tail -3
      timeout 100 $CS --tool memcheck --leak-check full --print-limit 10 $H run -m $S/m-awq64 --device cuda:0 \
        -p "short" -n 24 --temp 0.8 --top-p 0.9 --top-k 40 --repeat-penalty 1.1 --seed 7 2>&1 | tail -3
      st sanitize ;;
  esac
done
