#!/bin/bash
# tests/cuda/run-prefill.sh — the prefill session's one device call: the
# kernel checks, the prefill benchmarks (session 1 and 2 side by side, chosen
# by HONE_GEMM / HONE_ATTN_PREFILL in the same binary), and compute-sanitizer
# over the prefill checks. The harness is built on the developer machine:
#   nvcc -std=c++17 -O3 -lineinfo -gencode arch=compute_90,code=sm_90 -Ikernels \
#        kernels/*.cu tests/cuda/hone-cuda-check.cu -lcublas -lcublasLt -o .carry-prefill/hone-cuda-check
# and carried (carry: [".carry-prefill"]). Logs under $OUT.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/hone-prefill-out}
mkdir -p "$OUT"
B=${HONE_CHECK_BIN:-.carry-prefill/hone-cuda-check}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv; } > "$OUT/env.txt" 2>&1
if ldd $B | grep -q "not found"; then
  echo "carried binary does not run here; building" | tee -a "$OUT/env.txt"
  mkdir -p /tmp/pb && for f in kernels/*.cu tests/cuda/hone-cuda-check.cu; do
    nvcc -std=c++17 -O3 -lineinfo -gencode arch=compute_90,code=sm_90 -Ikernels -c $f -o /tmp/pb/$(basename $f .cu).o &
  done; wait
  nvcc -o /tmp/pb/hone-cuda-check /tmp/pb/*.o -lcublas -lcublasLt && B=/tmp/pb/hone-cuda-check
fi
rc=0
timeout 60 $B --check > "$OUT/check.txt" 2>&1 || rc=1
grep -E "FAIL|checks:" "$OUT/check.txt" | tail -15
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/clocks.txt" 2>&1 &
smi=$!
HONE_GEMM_VERBOSE=1 OUT=$OUT timeout 80 $B --prefill > "$OUT/prefill.txt" 2>&1 || rc=1
kill $smi 2>/dev/null
cat "$OUT/prefill.txt"
if [ "${HONE_SANITIZE:-1}" = 1 ]; then
  timeout 40 compute-sanitizer --tool memcheck --print-limit 10 $B --check-prefill > "$OUT/memcheck.txt" 2>&1
  tail -2 "$OUT/memcheck.txt"
  timeout 30 compute-sanitizer --tool racecheck --print-limit 10 $B --check-prefill > "$OUT/racecheck.txt" 2>&1
  tail -2 "$OUT/racecheck.txt"
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv >> "$OUT/env.txt" 2>&1
exit $rc
