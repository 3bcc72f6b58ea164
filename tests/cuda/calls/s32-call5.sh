#!/bin/bash
# Session 32, call 5: main's engine figures on whatever card comes (BF16 and Q4_0 Llama-3-8B shape, decode and
# 2,048-token TTFT: run-release.sh engine), then the CPU attention A/B of call 4 again with more repetitions
# (call 4's rounds scattered by +-20 %), and the 0.6B model at the host's default thread count.
# Carry .carry-release (bundle.tar.xz, cpu.tar.xz, model/).
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
OUT=$W/rel timeout 280 tests/cuda/run-release.sh engine > $W/rel.txt 2>&1; el "run-release engine rc $?"
grep -E "rc|roofline|decode \(tok|TTFT" $W/rel.txt | head -24
C=$PWD/.carry-release; tar xJf $C/cpu.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/xc; B=$C/bin; X=$C/cpu
J () { python3 -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(*[d.get(k) for k in sys.argv[1:]])' "$@"; }
for r in 1 2 3 4; do
  for v in old new 8x2; do
    echo "attn r$r $v: $(timeout 20 $X/bench-attention-$v --keys 2048 --tokens 2048 --reps 10 --rounds 1 | J us_per_call) $(timeout 20 $X/bench-attention-$v --keys 2048 --tokens 2048 --reps 3 --rounds 1 --head-dim 128 --heads 32 --kv-heads 8 | J us_per_call)"
  done
done
el "attention done"
timeout 60 $B/hone gen-model --shape qwen3-0.6b --type q4_0 -q -o /dev/shm/q06.gguf > /dev/null 2>&1
for r in 1 2; do for v in old new; do
  echo "cpu r$r $v q06 p256 threads 16: $(timeout 60 $X/bench-cpu-$v /dev/shm/q06.gguf --prompt 256 --decode 64 --runs 2 --threads 16 | J threads prefill_tok_s decode_tok_s)"
done; done
el "done"
