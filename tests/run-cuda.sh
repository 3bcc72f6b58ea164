#!/bin/bash
# tests/run-cuda.sh — everything the GPU machine does in one call: build the
# kernels and the plain-CUDA check/bench harness with nvcc (no GLib needed),
# run the checks (each in its own process so a fault cannot hide the rest),
# then the benchmarks; logs and results under $OUT.
#   usage: tests/run-cuda.sh [check|bench|quick|all|sanitize|backend|w4|staged]...   (default: all)
#   staged: decode session 3 with the harness built here by .carry-staged/build.sh
#   (nvcc -std=c++17 -O3 -lineinfo -gencode arch=compute_90,code=sm_90 -Ikernels,
#   kernels/*.cu + tests/cuda/hone-cuda-check.cu, -lcublas -lcublasLt), carried:
#   checks, the decode benchmarks (old vs staged), then memcheck + racecheck of
#   the staged checks, each under a timeout so the call ends inside ~140 s.
#   backend: the GLib `cuda` suite test built on the developer machine
#   (build-cuda/tests/test-cuda-backend, carried) with its shared libraries
#   in .carry/lib and a model in .carry/model (see tests/bench/RESULTS-cuda.md).
#   env:   HONE_CUDA_ARCH (default 90), OUT (default /tmp/hone-cuda-out)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/hone-cuda-out}
mkdir -p "$OUT"
ARCH=${HONE_CUDA_ARCH:-90}
B=build-cuda-dev
mkdir -p $B
modes=${*:-all}

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
  nvcc --version | tail -1
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

case " $modes " in *" check "*|*" bench "*|*" all "*|*" quick "*|*" decode "*|*" sanitize "*) need_build=1 ;; *) need_build=0 ;; esac
if [ $need_build = 1 ]; then
flags="-std=c++17 -O3 -lineinfo -gencode arch=compute_${ARCH},code=sm_${ARCH} -Ikernels"
t0=$(date +%s)
pids=()
for f in kernels/*.cu tests/cuda/hone-cuda-check.cu; do
  o=$B/$(basename "$f" .cu).o
  nvcc $flags -Xptxas -v -c "$f" -o "$o" > "$B/$(basename "$f" .cu).ptxas" 2>&1 &
  pids+=($!)
done
ok=1
for p in "${pids[@]}"; do wait "$p" || ok=0; done
cat $B/*.ptxas > "$OUT/ptxas.txt"
if [ $ok = 0 ] || ! nvcc -o $B/hone-cuda-check $B/*.o -lcublas; then
  echo "BUILD FAILED"; grep -B2 -A5 error "$OUT/ptxas.txt" | head -60; exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s"
grep -E "spill (stores|loads)" "$OUT/ptxas.txt" | grep -v " 0 bytes spill stores, 0 bytes spill loads" | sort | uniq -c | head
fi

rc=0
for m in $modes; do
  case $m in
    check|all) OUT=$OUT $B/hone-cuda-check --check 2>&1 | tee "$OUT/check.txt"; [ ${PIPESTATUS[0]} = 0 ] || rc=1 ;;
  esac
  case $m in
    bench|all) cp "$OUT/results.txt" "$OUT/check-results.txt" 2>/dev/null
               OUT=$OUT $B/hone-cuda-check --bench 2>&1 | tee "$OUT/bench.txt"; [ ${PIPESTATUS[0]} = 0 ] || rc=1 ;;
    quick) OUT=$OUT $B/hone-cuda-check --bench --quick 2>&1 | tee "$OUT/bench.txt" ;;
    decode) # decode session 2: per-GEMV table, norm forms, prefetch diagnostic, whole step per variant (~50 s)
            OUT=$OUT $B/hone-cuda-check --decode 2>&1 | tee "$OUT/decode.txt" ;;
    backend) # the test binary and its libraries travel as .carry/bundle.tar.xz (bin/, lib/)
             [ -f .carry/bundle.tar.xz ] && tar xJf .carry/bundle.tar.xz -C .carry
             T=.carry/bin/test-cuda-backend; [ -x $T ] || T=build-cuda/tests/test-cuda-backend
             if [ -x $T ]; then
               LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} \
               HONE_DEFAULT_MODEL=${HONE_DEFAULT_MODEL:-$(ls $PWD/.carry/model/*.gguf | head -1)} \
               GSETTINGS_BACKEND=memory G_DEBUG=gc-friendly \
               timeout 300 $T --verbose 2>&1 | tee "$OUT/backend.txt"
               [ ${PIPESTATUS[0]} = 0 ] || rc=1
             else echo "no test-cuda-backend carried"; rc=1; fi ;;
    w4) # W4A16 (AWQ) checks, benchmarks, then memcheck over the checks: hone-w4-check built on the
        # developer machine and carried in .carry-w4a16/ (tests/cuda/hone-w4-check.cu says how)
        W=.carry-w4a16/hone-w4-check
        OUT=$OUT timeout 300 $W 2>&1 | tee "$OUT/w4.txt"; [ ${PIPESTATUS[0]} = 0 ] || rc=1
        OUT= timeout 120 compute-sanitizer --tool memcheck --print-limit 20 $W --check > "$OUT/w4-sanitize.txt" 2>&1
        tail -4 "$OUT/w4-sanitize.txt" ;;
    attn) # decode attention v3 vs session 2's: hone-attn-check built on the developer machine and carried in
          # .carry-attn/ (tests/cuda/hone-attn-check.cu says how), checks + benchmarks, then memcheck on small shapes
          A=.carry-attn/hone-attn-check
          OUT=$OUT timeout 45 $A --bench 2>&1 | tee "$OUT/attn-bench.txt"; [ ${PIPESTATUS[0]} = 0 ] || rc=1
          OUT=$OUT timeout 50 $A --check 2>&1 | tee "$OUT/attn-check.txt"; [ ${PIPESTATUS[0]} = 0 ] || rc=1
          OUT= timeout 40 compute-sanitizer --tool memcheck --print-limit 20 $A --small > "$OUT/attn-sanitize.txt" 2>&1
          tail -4 "$OUT/attn-sanitize.txt" ;;
    staged) S=.carry-staged/bin/hone-cuda-check
            t0=$(date +%s)
            # smoke first: if the staged kernel fails or hangs, keep the call's time for a memcheck of it
            OUT= timeout 10 $S --check-staged > "$OUT/smoke.txt" 2>&1; src=$?; echo "staged checks rc=$src ($(( $(date +%s) - t0 )) s)"
            grep -E "^FAIL|FATAL|checks:" "$OUT/smoke.txt" | head -20
            if [ $src != 0 ]; then
              OUT= timeout 60 compute-sanitizer --tool memcheck --print-limit 10 $S --check-staged \
                > "$OUT/memcheck.txt" 2>&1; tail -40 "$OUT/memcheck.txt"; exit 1
            fi
            OUT= timeout ${STAGED_DECODE_S:-65} $S --decode > "$OUT/decode.txt" 2>&1; echo "decode rc=$? ($(( $(date +%s) - t0 )) s)"
            OUT= timeout ${STAGED_CHECK_S:-35} $S --check > "$OUT/check.txt" 2>&1; echo "check rc=$? ($(( $(date +%s) - t0 )) s)"
            grep -E "^FAIL|FATAL|checks:" "$OUT/check.txt" | head -20
            OUT= timeout ${STAGED_SAN_S:-12} compute-sanitizer --tool memcheck --print-limit 10 $S --check-staged \
              > "$OUT/memcheck.txt" 2>&1; echo "memcheck rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E 'ERROR SUMMARY' "$OUT/memcheck.txt" || echo "no summary"
            HONE_CHECK_NO_TINY=1 OUT= timeout ${STAGED_RACE_S:-15} compute-sanitizer --tool racecheck --racecheck-report hazard \
              --print-limit 10 $S --check-staged > "$OUT/racecheck.txt" 2>&1; echo "racecheck rc=$? ($(( $(date +%s) - t0 )) s)"
            echo "$(grep -c 'Race reported' "$OUT/racecheck.txt") race reports; $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck.txt" || echo no summary)"
            grep -E "^(decode3|qkv|o |gate|down|lm_head)" "$OUT/decode.txt" | cut -c1-165 ;;
    sanitize) timeout 200 compute-sanitizer --tool memcheck --print-limit 20 $B/hone-cuda-check --check > "$OUT/sanitize.txt" 2>&1
              tail -5 "$OUT/sanitize.txt" ;;
  esac
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv >> "$OUT/env.txt" 2>&1
exit $rc
