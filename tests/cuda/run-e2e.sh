#!/bin/bash
# tests/cuda/run-e2e.sh — one GPU-machine call that builds nothing there:
# random-weight Llama-3-8B GGUFs made with `hone gen-model`, the engine's
# bench protocol through the real engine + CUDA backend (`hone bench`), then
# the kernel harness (checks + benchmarks) for comparison.
#
# Everything it runs is built on the developer machine and carried as
# build-cuda2/carry/bundle.tar.xz (bin/hone, bin/hone-cuda-check, lib/ with
# GLib & co. from Debian 12; cudart/cuBLAS come from the machine's CUDA 13):
#   meson setup build-cuda2 -Dgpu_archs=90 -Dgui=disabled -Dcuda=enabled -Dbuildtype=release
#   ninja -C build-cuda2 src/cli/hone
#   (hone-cuda-check: nvcc as in tests/run-cuda.sh), then tests/cuda/make-bundle.sh
# usage (device tool, carry build-cuda2/carry): tests/cuda/run-e2e.sh [steps…]
#   steps: check harness harness-old gen bench (default: all, in this order)
#   and (engineer gpusample) backend, bench-sampling, sanitize-sampling:
#   backend: bin/test-cuda-backend (the `cuda` suite) on the GGUF in $C/model;
#   bench-sampling: `hone bench` with the token sampled on the GPU vs on the
#   host (HONE_GPU_SAMPLING=0), same machine, same models, interleaved;
#   sanitize-sampling: compute-sanitizer memcheck over `hone run` (greedy and
#   the full sampling chain) on the carried model.
#   HONE_E2E_CARRY: the carried folder (default build-cuda2/carry).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/hone-e2e-out}
mkdir -p "$OUT"
C=${HONE_E2E_CARRY:-build-cuda2/carry}
case $C in /*) ;; *) C=$PWD/$C ;; esac
tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GSETTINGS_BACKEND=memory
# the measured read bandwidth (hone bench's roofline) is cached here
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/hone-e2e-cache}
H=$C/bin/hone
SMALL=$(ls $C/model/*.gguf 2>/dev/null | head -1)
# tmpfs: 20 GB of models without waiting on the disk for the fsync
M=${HONE_E2E_MODELS:-/dev/shm/hone-models}
avail=$(df --output=avail -k /dev/shm 2>/dev/null | tail -1)
[ -n "${HONE_E2E_MODELS:-}" ] || [ "${avail:-0}" -gt 26000000 ] || M=/tmp/hone-models
mkdir -p $M
steps=${*:-check harness harness-old gen bench}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
  nproc; free -g | head -2; df -h $M | tail -1
} 2>&1 | tee "$OUT/env.txt"

rc=0
for s in $steps; do
  case $s in
    gen)
      for t in bf16 q4_0; do
        timeout 200 $H gen-model --shape llama3-8b --type $t -o $M/llama3-8b-$t.gguf 2>&1 | tee -a "$OUT/gen.txt"
        [ ${PIPESTATUS[0]} = 0 ] || rc=1
      done
      ls -la $M | tee -a "$OUT/gen.txt" ;;
    bench)
      # The engine's protocol (512 prompt tokens, 128 generated, 5 runs after
      # 1 warm-up), then a short prompt whose mean decode context (~128)
      # matches the harness's ctx-128 row. Q4_0 also with the call-9 GEMV
      # defaults (PDL trigger at entry, call-3 launch shapes) for an A/B in
      # the same call.
      for t in bf16 q4_0; do
        for v in new old; do
          [ $t = bf16 ] && [ $v = old ] && continue
          if [ $v = old ]; then envs="HONE_PDL_TRIGGER=entry HONE_GEMV_PICK=3"; else envs="HONE_E2E_VARIANT=new"; fi
          for p in 512 64; do
            echo "== hone bench llama3-8b $t -p $p -n 128 ($envs)" | tee -a "$OUT/bench-e2e.txt"
            env $envs timeout 90 $H bench -m $M/llama3-8b-$t.gguf --device cuda:0 -b 4520 \
              -p $p -n 128 -r 5 -w 1 2>>"$OUT/bench-err.txt" | tee -a "$OUT/bench-e2e.txt"
            [ ${PIPESTATUS[0]} = 0 ] || rc=1
          done
        done
      done ;;
    backend)
      HONE_DEFAULT_MODEL=$SMALL G_DEBUG=gc-friendly timeout ${HONE_E2E_BACKEND_S:-60} $C/bin/test-cuda-backend --verbose \
        > "$OUT/backend.txt" 2>&1 || rc=1
      grep -E "^(ok|not ok)|^# [a-z]|Bail|ERROR" "$OUT/backend.txt" | cut -c1-220 ;;
    bench-sampling)
      # GPU sampling (as built) vs host sampling, interleaved; no -b: the
      # roofline is the measured read bandwidth (the first run measures and
      # caches it, the others read the cache)
      for t in bf16 q4_0; do
        for v in gpu host; do
          if [ $v = host ]; then envs="HONE_GPU_SAMPLING=0"; else envs="HONE_GPU_SAMPLING=1"; fi
          echo "== hone bench llama3-8b $t -p 512 -n 128 ($envs)" | tee -a "$OUT/bench-e2e.txt"
          env $envs timeout ${HONE_E2E_BENCH_S:-25} $H bench -m $M/llama3-8b-$t.gguf --device cuda:0 \
            -p 512 -n 128 -r ${HONE_E2E_RUNS:-3} -w 1 2>>"$OUT/bench-err.txt" | tee -a "$OUT/bench-e2e.txt"
          [ ${PIPESTATUS[0]} = 0 ] || rc=1
        done
      done
      cat $XDG_CACHE_HOME/hone/bandwidth.ini >> "$OUT/bench-e2e.txt" 2>/dev/null ;;
    sanitize-sampling)
      for a in "--temp 0" "--seed 7"; do
        echo "== compute-sanitizer hone run $a" >> "$OUT/sanitize.txt"
        timeout ${HONE_E2E_SANITIZE_S:-40} compute-sanitizer --tool memcheck --leak-check full --print-limit 20 \
          $H run -m $SMALL --device cuda:0 -n 12 $a --metrics -p "The printing press" >> "$OUT/sanitize.txt" 2>&1
        echo "rc $?" >> "$OUT/sanitize.txt"
      done
      grep -E "ERROR SUMMARY|LEAK SUMMARY|^rc" "$OUT/sanitize.txt" ;;
    check)
      OUT=/tmp timeout 200 $C/bin/hone-cuda-check --check > "$OUT/check.txt" 2>&1 || rc=1
      tail -3 "$OUT/check.txt" ;;
    harness)
      mkdir -p /tmp/h1; OUT=/tmp/h1 timeout 200 $C/bin/hone-cuda-check --bench > "$OUT/harness.txt" 2>&1 || rc=1
      grep -E "decode step|prefill" "$OUT/harness.txt" ;;
    harness-old)
      # the call-9 defaults, quick (PDL-on rows of BF16/Q4_0/Q4_1), for the A/B
      mkdir -p /tmp/h2
      HONE_PDL_TRIGGER=entry HONE_GEMV_PICK=3 OUT=/tmp/h2 timeout 200 $C/bin/hone-cuda-check --bench --quick > "$OUT/harness-old.txt" 2>&1 || rc=1
      grep -E "decode step|prefill" "$OUT/harness-old.txt" ;;
  esac
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv >> "$OUT/env.txt" 2>&1
exit $rc
