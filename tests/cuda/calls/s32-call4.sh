#!/bin/bash
# Session 32, call 4: the CPU backend on the GPU machine's host CPU (16 cores, another x86 core than the
# 2-vCPU VM's): which thread count the new default picks there, and before/after of this session's CPU changes.
#   bench-*-old: af46b0b (before the session's CPU changes); bench-*-new: main; bench-attention-8x2: main with
#   AVX-512 on the 8 x 2 tile (the form measured 5.7 % slower on the VM's half-rate 512-bit FMAs).
# All built here with -Dcuda=disabled --buildtype=release, carried in .carry-release/cpu/.
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
C=$PWD/.carry-release; tar xJf $C/bundle.tar.xz -C $C && tar xJf $C/cpu.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/xc; B=$C/bin; X=$C/cpu
lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|Flags" | sed 's/Flags:.*\(avx512[a-z_]*\).*/Flags: (has avx512)/' | cut -c1-120
echo "nproc $(nproc); cgroup: $(tr '\n' ' ' < /proc/self/cgroup | cut -c1-200); cpu.max: $(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo none)"
grep -o -w -E "avx512f|avx512_vnni|avx_vnni|avx512_bf16|amx_tile" /proc/cpuinfo | sort | uniq -c | tr '\n' ' '; echo
J () { python3 -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(*[d.get(k) for k in sys.argv[1:]])' "$@"; }
M3=/tmp/$(basename $(ls $C/model/*.gguf.xz | head -1) .xz); xz -dc $C/model/*.gguf.xz > $M3
timeout 120 $B/hone gen-model --shape qwen3-0.6b --type q4_0 -q -o /dev/shm/q06.gguf > /dev/null 2>&1; el "gen qwen3-0.6b q4_0 rc $?"
timeout 60 $B/hone bench -m $M3 --device cpu -p 16 -n 4 -r 1 -w 0 2>&1 | grep -E "roofline|CPU" | head -2
for r in 1 2 3; do
  for v in old new 8x2; do
    echo "attn $v default-shape 2048: $($X/bench-attention-$v --keys 2048 --tokens 2048 --reps 5 --rounds 1 | J isa threads us_per_call)"
    echo "attn $v llama-heads 2048:   $($X/bench-attention-$v --keys 2048 --tokens 2048 --reps 2 --rounds 1 --head-dim 128 --heads 32 --kv-heads 8 | J isa us_per_call)"
    echo "attn $v default-shape 2048 avx2: $($X/bench-attention-$v --keys 2048 --tokens 2048 --reps 5 --rounds 1 --isa avx2 | J us_per_call)"
  done
done
el "attention done"
for r in 1 2; do
  for v in old new; do
    for m in $M3 /dev/shm/q06.gguf; do
      echo "cpu $v $(basename $m) p256: $(timeout 120 $X/bench-cpu-$v $m --prompt 256 --decode 64 --runs 2 | J threads prefill_tok_s decode_tok_s)"
      echo "cpu $v $(basename $m) p2048: $(timeout 120 $X/bench-cpu-$v $m --prompt 2048 --decode 32 --runs 1 | J threads prefill_tok_s decode_tok_s)"
    done
  done
done
el "whole model done"
for t in 8 4; do echo "cpu new q06 p256 --threads $t: $(timeout 120 $X/bench-cpu-new /dev/shm/q06.gguf --prompt 256 --decode 64 --runs 2 --threads $t | J threads prefill_tok_s decode_tok_s)"; done
el "done"
