#!/bin/bash
# Session 32, call 7: how the CPU backend scales with threads on the GPU machine's 16-core host (call 4: prefill of a
# Qwen3-0.6B-shaped Q4_0 model only 3.2x faster at 16 threads than at 2). Whole model (bench-cpu) and the attention
# alone (bench-attention, that model's heads) at 1-16 threads, two rounds; a perf profile at 16 threads if perf is
# there. Carry .carry-release (bundle.tar.xz, cpu.tar.xz).
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
C=$PWD/.carry-release; tar xJf $C/bundle.tar.xz -C $C && tar xJf $C/cpu.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/xc; B=$C/bin; X=$C/cpu
J () { python3 -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(*[d.get(k) for k in sys.argv[1:]])' "$@"; }
lscpu | grep -E "Model name|MHz" | head -3
timeout 60 $B/hone gen-model --shape qwen3-0.6b --type q4_0 -q -o /dev/shm/q06.gguf > /dev/null 2>&1; el "gen rc $?"
for r in 1 2; do
  for t in 1 2 4 8 16; do
    echo "r$r t$t whole p512: $(timeout 60 $X/bench-cpu-new /dev/shm/q06.gguf --prompt 512 --decode 16 --runs 1 --threads $t | J prefill_tok_s decode_tok_s prefill_cpu_ms_per_tok)"
    echo "r$r t$t attn p512:  $(timeout 30 $X/bench-attention-new --keys 512 --tokens 512 --head-dim 128 --heads 16 --kv-heads 8 --threads $t --reps 3 --rounds 1 | J us_per_call)"
  done
done
el "scaling done"
if command -v perf > /dev/null; then
  perf record -q -o /tmp/p.data -- $X/bench-cpu-new /dev/shm/q06.gguf --prompt 512 --decode 1 --runs 2 --threads 16 > /dev/null 2>&1
  perf report -i /tmp/p.data --no-children --sort symbol 2>/dev/null | grep -v "^#" | grep "%" | head -20
else
  echo "no perf"
fi
el "done"
