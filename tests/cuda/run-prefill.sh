#!/bin/bash
# tests/cuda/run-prefill.sh — the prefill sessions' device call. Everything is
# built on the developer machine and carried (carry: [".carry-prefill"]):
#   nvcc -std=c++17 -O3 -lineinfo -gencode arch=compute_90,code=sm_90 -Ikernels \
#        kernels/*.cu tests/cuda/hone-cuda-check.cu -lcublas -lcublasLt -o .carry-prefill/hone-cuda-check
#   (the same with tests/cuda/hone-prefill-check.cu → .carry-prefill/hone-prefill-check)
#   and for the engine steps tests/cuda/make-bundle-shared.sh BUILD .carry-prefill
#   (a -Dcuda=enabled -Dgpu_archs=90 build: bundle.tar.xz with bin/hone).
# usage: tests/cuda/run-prefill.sh [steps…]; logs under $OUT.
#   session 2 (the default when no step is named): check bench2 sanitize2
#     check: hone-cuda-check --check; bench2: --prefill (sessions 1 and 2 round
#     robin, SM clock and power sampled every 250 ms into clocks.txt);
#     sanitize2: memcheck + racecheck of --check-prefill.
#   session 3: check3 first bench3 sanitize3 e2e-first e2e-ttft
#     check3: hone-prefill-check --check and hone-cuda-check --check-prefill;
#     first: a fresh process's first prefill with the warm-up on (modes 1, 2) and off
#       (4 layers of the 8B shape: the lazy loads do not depend on depth);
#     bench3: whole 2,048-token prefill round robin (attention v2 = session 2
#       vs v3), the per-op profile, attention alone (clocks logged);
#     sanitize3: memcheck + racecheck of hone-prefill-check --check-quick;
#     e2e-first: `hone bench` -p 2048 -n 1, 3 runs without warm-up runs, on a
#       4-layer 8B-shape GGUF, warm-up modes 1, 2 and off (first TTFT vs the others);
#     e2e-ttft: the same on the full 32-layer BF16 8B (TTFT at 2,048 tokens).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/hone-prefill-out}
mkdir -p "$OUT"
C=$PWD/.carry-prefill
# the harnesses write $OUT/results*.txt when OUT is in their environment: the
# device returns at most 8 files, so they run without it (their stdout is logged)
B="env -u OUT ${HONE_CHECK_BIN:-$C/hone-cuda-check}"
P="env -u OUT $C/hone-prefill-check"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv; } > "$OUT/env.txt" 2>&1
# engineer `staged`'s one-token GEMV (work in progress in the tree) failed its
# cudaFuncSetAttribute in call 1 (15:27 UTC): the head row uses the plain GEMV
export HONE_GEMV_STAGED=${HONE_GEMV_STAGED:-0}
rc=0
clocks_on () { echo "# $1" >> "$OUT/clocks.txt"; nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 250 >> "$OUT/clocks.txt" 2>&1 & smi=$!; }
clocks_off () { kill $smi 2>/dev/null; wait $smi 2>/dev/null; }
bundle () {
  [ -x $C/bin/hone ] || tar xJf $C/bundle.tar.xz -C $C || return 1
  export LD_LIBRARY_PATH=$C/lib:$LD_LIBRARY_PATH GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/hone-prefill-cache
  M=/dev/shm/hone-prefill; mkdir -p $M
}
for s in ${*:-check bench2 sanitize2}; do
  echo "== step $s ($(date -u +%T))" | tee -a "$OUT/env.txt"
  case $s in
    check)
      timeout 60 $B --check > "$OUT/check.txt" 2>&1 || rc=1
      grep -E "FAIL|checks:" "$OUT/check.txt" | tail -15 ;;
    bench2)
      clocks_on bench2
      HONE_GEMM_VERBOSE=1 OUT=$OUT timeout 80 $B --prefill > "$OUT/prefill.txt" 2>&1 || rc=1
      clocks_off
      cat "$OUT/prefill.txt" ;;
    sanitize2)
      timeout 40 compute-sanitizer --tool memcheck --print-limit 10 $B --check-prefill > "$OUT/memcheck.txt" 2>&1
      grep -E 'ERROR SUMMARY' "$OUT/memcheck.txt" || echo "memcheck: no summary (stopped by the time bound)"
      timeout 30 compute-sanitizer --tool racecheck --print-limit 10 $B --check-prefill > "$OUT/racecheck.txt" 2>&1
      echo "racecheck: $(grep -c 'Race reported' "$OUT/racecheck.txt") race reports; $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck.txt" || echo 'no summary')" ;;
    check3)
      timeout 40 $P --check > "$OUT/checks.txt" 2>&1 || rc=1
      timeout 30 $B --check-prefill >> "$OUT/checks.txt" 2>&1 || rc=1
      grep -E "FAIL|checks:" "$OUT/checks.txt" | tail -20 ;;
    first)
      for w in 1 2 0 1 2 0; do
        HONE_PREFILL_WARM=$w HONE_PREFILL_WARM_VERBOSE=1 timeout 30 $P --first 4 >> "$OUT/first.txt" 2>&1 || rc=1
      done
      grep -E "warm|first -" "$OUT/first.txt" ;;
    bench3)
      clocks_on bench3
      timeout 60 $P --bench > "$OUT/bench3.txt" 2>&1 || rc=1
      clocks_off
      cat "$OUT/bench3.txt"
      awk -F', ' '/^# / { on = $0 == "# bench3" } on && $3+0 > 600 { n++; c += $2 } END { if (n) printf "SM clock mean over %d samples above 600 W: %.0f MHz\n", n, c / n }' "$OUT/clocks.txt" ;;
    sanitize3)
      for t in memcheck racecheck; do
        echo "-- $t" >> "$OUT/sanitize.txt"
        timeout 30 env -u OUT compute-sanitizer --tool $t --print-limit 10 $C/hone-prefill-check --check-quick >> "$OUT/sanitize.txt" 2>&1
        grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Race reported' "$OUT/sanitize.txt" | tail -3
      done ;;
    e2e-first)
      bundle || { rc=1; continue; }
      timeout 40 $C/bin/hone gen-model --shape llama3-8b --type bf16 --layers 4 -q -o $M/l4.gguf 2>&1 | tail -2
      for w in 1 2 0; do
        echo "-- HONE_PREFILL_WARM=$w" >> "$OUT/e2e.txt"
        HONE_PREFILL_WARM=$w HONE_PREFILL_WARM_VERBOSE=1 timeout 40 $C/bin/hone bench -m $M/l4.gguf --device cuda:0 \
          -b 4520 -p 2048 -n 1 -w 0 -r 3 --json >> "$OUT/e2e.txt" 2>&1 || rc=1
      done
      grep -E "HONE_PREFILL|warm-up|\"ttft_ms\"" "$OUT/e2e.txt"
      python3 -c "
import json,re,sys
t=open('$OUT/e2e.txt').read()
for part in t.split('-- HONE_PREFILL_WARM=')[1:]:
    j=json.loads(part[part.index('{'):part.rindex('}')+1])
    print('warm', part[0], 'TTFT per run (ms):', [round(r['ttft_ms'],2) for r in j['per_run']])
" 2>&1 | tee -a "$OUT/env.txt" ;;
    e2e-ttft)
      bundle || { rc=1; continue; }
      timeout 60 $C/bin/hone gen-model --shape llama3-8b --type bf16 -q -o $M/l32.gguf 2>&1 | tail -2
      clocks_on e2e
      HONE_PREFILL_WARM_VERBOSE=1 timeout 60 $C/bin/hone bench -m $M/l32.gguf --device cuda:0 -b 4520 -p 2048 -n 1 \
        -w 0 -r 5 --json > "$OUT/e2e-ttft.json" 2>&1 || rc=1
      clocks_off
      python3 -c "
import json
t=open('$OUT/e2e-ttft.json').read()
j=json.loads(t[t.index('{'):t.rindex('}')+1])
print('32 layers BF16, 2048 tok: TTFT per run (ms):', [round(r['ttft_ms'],2) for r in j['per_run']], 'median', j['ttft_ms'])
" 2>&1 | tee -a "$OUT/env.txt"
      grep "warm-up" "$OUT/e2e-ttft.json" ;;
    *) echo "unknown step $s"; rc=1 ;;
  esac
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv >> "$OUT/env.txt" 2>&1
exit $rc
