#!/bin/bash
# tests/cuda/run-release.sh — one GPU-machine call that checks everything the
# CUDA side has and measures the headline figures, building nothing there:
#   1. the `cuda` suite (test-cuda-backend: the default model's cut and tiny
#      models of every weight type, CPU vs CUDA);
#   2. each kernel harness's checks (f64 references, outputs poisoned):
#      hone-cuda-check, hone-attn-check, hone-kquant-check, hone-prefill-check,
#      hone-w4-check; compute-sanitizer memcheck + racecheck on small shapes
#      (attention, prefill, the epilogue-quantizing GEMVs, W4A16 mma, K-quant parts);
#   3. benchmarks: decode attention old vs new, prefill (2,048 tokens, per-op
#      profile), the whole decode step of the 8B shape for BF16/Q8_0/Q4_0/Q4_1
#      at ctx 128/4k/16k (CUDA graph, default kernels), then the engine end to
#      end on generated 8B models (`hone bench`: decode and 2,048-token TTFT).
# Built on the developer machine and carried in one folder C (default
# .carry-release): C/bundle.tar.xz from tests/cuda/make-bundle-shared.sh
# (bin/: hone, test-cuda-backend, test-cuda-awq and the nvcc-built harnesses
# linked against lib/libhoneall.so) and C/model/*.gguf (a cut of the default
# model: tests/cuda/shrink-gguf.py). Every step runs under a timeout and in its
# own process. $OUT gets three files (the device tool brings back at most 8): summary.txt,
# env.txt and logs.tar.gz — every step's logs, packed again after each step, so that a run
# cut short by its time limit still brings back what it wrote.
#   usage (device tool, carry C): tests/cuda/run-release.sh [steps…]
#   steps: suite checks sanitize attn prefill decode engine stream (default: all but stream, in this order)
#   stream: the streamed one-token step (hone-k-decode-stream.cu, off by default): its checks
#   (per-GEMV vs streamed with both loaders and on 2–3 blocks, same models), memcheck and
#   racecheck, the engine suite with it on, and the whole-step table with its variants and
#   per-block traces
set -u
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/hone-release-out}          # what comes back
mkdir -p "$R"
OUT=$(mktemp -d /tmp/hone-release-logs.XXXXXX)   # the logs (harnesses given OUT=$OUT write here too)
pack () { tar czf "$R/logs.tar.gz" -C "$OUT" . 2>/dev/null; }
trap 'pack; rm -rf "$OUT"' EXIT
C=${HONE_RELEASE_CARRY:-.carry-release}
case $C in /*) ;; *) C=$PWD/$C ;; esac
tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GSETTINGS_BACKEND=memory
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/hone-release-cache}
B=$C/bin
S=$R/summary.txt
MODEL=$(ls $C/model/*.gguf 2>/dev/null | head -1)
if [ -z "$MODEL" ] && Z=$(ls $C/model/*.gguf.xz 2>/dev/null | head -1) && [ -n "$Z" ]; then
  MODEL=/tmp/$(basename "$Z" .xz); xz -dc "$Z" > "$MODEL"   # build-carry.sh packs the cut with xz
fi
steps=${*:-suite checks sanitize attn prefill decode engine}
T0=$(date +%s)
note () { echo "$(( $(date +%s) - T0 ))s $*" | tee -a "$S"; }
# compute-sanitizer's own verdict in a log: its SUMMARY line and the count of reports (a harness prints its
# own PASS lines, so the log's last line is not the sanitizer's), or that the time bound stopped it first
san () { echo "$(grep -cE 'Race reported|Invalid|Error:' "$1") reports; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$1" | tail -1 || true)$(grep -qE 'ERROR SUMMARY|RACECHECK SUMMARY' "$1" || echo 'no summary (stopped by the time bound)')"; }
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
} > "$R/env.txt" 2>&1

for s in $steps; do
  case $s in
    suite)
      HONE_DEFAULT_MODEL=$MODEL G_DEBUG=gc-friendly timeout 200 $B/test-cuda-backend --verbose > "$OUT/suite.txt" 2>&1
      note "test-cuda-backend rc $?: $(grep -c '^ok' "$OUT/suite.txt") ok, $(grep -c '^not ok' "$OUT/suite.txt") not ok"
      grep -E "^not ok|ERROR|FAIL" "$OUT/suite.txt" | head -10
      G_DEBUG=gc-friendly timeout 200 $B/test-cuda-awq --verbose > "$OUT/suite-awq.txt" 2>&1
      note "test-cuda-awq rc $?: $(grep -c '^ok' "$OUT/suite-awq.txt") ok, $(grep -c '^not ok' "$OUT/suite-awq.txt") not ok"
      grep -E "^not ok|ERROR|FAIL" "$OUT/suite-awq.txt" | head -10 ;;
    checks)
      for h in "hone-cuda-check --check" "hone-cuda-check --check-prefill" "hone-attn-check --check" \
               "hone-kquant-check --check" "hone-prefill-check --check-quick" "hone-w4-check --check"; do
        set -- $h
        log="$OUT/check-${1#hone-}${2#--check}.txt"
        OUT= timeout ${HONE_CHECK_TIMEOUT:-240} $B/$1 $2 > "$log" 2>&1   # 120 s cut hone-cuda-check --check on an H100 (session 53)
        note "$h rc $?: $(grep -ciE '^(PASS|ok)' "$log") pass lines; $(grep -E 'checks?:|passed' "$log" | tail -1)"
        grep -E "^FAIL" "$log" | head -5
      done ;;
    sanitize)
      OUT= timeout 60 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-attn-check --small > "$OUT/san-attn-mem.txt" 2>&1
      note "memcheck attn: $(san "$OUT/san-attn-mem.txt")"
      OUT= timeout ${HONE_RACE_TIMEOUT:-60} compute-sanitizer --tool racecheck --print-limit 10 $B/hone-attn-check --small > "$OUT/san-attn-race.txt" 2>&1
      note "racecheck attn: $(san "$OUT/san-attn-race.txt")"
      OUT= HONE_CHECK_NO_TINY=1 timeout 90 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-cuda-check --check-prefill > "$OUT/san-prefill-mem.txt" 2>&1
      note "memcheck prefill kernels: $(san "$OUT/san-prefill-mem.txt")"
      for h in "hone-cuda-check --check-epiq" "hone-w4-check --mma" "hone-kquant-check --small"; do
        set -- $h
        log="$OUT/san-${1#hone-}${2#--}.txt"
        OUT= HONE_CHECK_NO_TINY=1 timeout 90 compute-sanitizer --tool memcheck --print-limit 10 $B/$1 $2 > "$log" 2>&1
        note "memcheck $h: $(san "$log")"
      done ;;
    attn)
      OUT=$OUT timeout 60 $B/hone-attn-check --bench > "$OUT/attn-bench.txt" 2>&1
      note "attention bench rc $?"; grep -iE "ctx|old|v3" "$OUT/attn-bench.txt" | head -30 ;;
    prefill)
      OUT=$OUT timeout 90 $B/hone-prefill-check --bench > "$OUT/prefill-bench.txt" 2>&1
      note "prefill bench rc $?"; tail -40 "$OUT/prefill-bench.txt" ;;
    decode)
      OUT=$OUT HONE_DECODE_DEFAULT_ONLY=1 timeout 150 $B/hone-cuda-check --decode > "$OUT/decode.txt" 2>&1
      note "decode step rc $?"; grep -E "^decode[34]" "$OUT/decode.txt" | cut -c1-140 ;;
    engine)
      M=/dev/shm/hone-models; mkdir -p $M
      for t in bf16 q4_0; do
        timeout 120 $B/hone gen-model --shape llama3-8b --type $t -o $M/8b-$t.gguf > "$OUT/gen-$t.txt" 2>&1
        note "gen-model $t rc $?"
        timeout 90 $B/hone bench -m $M/8b-$t.gguf --device cuda:0 -p 64 -n 128 -r 3 -w 1 > "$OUT/bench-$t-decode.txt" 2>&1
        note "hone bench $t -p 64 -n 128 rc $?"; tail -8 "$OUT/bench-$t-decode.txt"
        timeout 90 $B/hone bench -m $M/8b-$t.gguf --device cuda:0 -p 2048 -n 16 -r 3 -w 1 > "$OUT/bench-$t-ttft.txt" 2>&1
        note "hone bench $t -p 2048 -n 16 rc $?"; tail -8 "$OUT/bench-$t-ttft.txt"
        rm -f $M/8b-$t.gguf
      done ;;
    stream)
      OUT= timeout 120 $B/hone-cuda-check --check-stream > "$OUT/stream-check.txt" 2>&1
      rc=$?
      note "hone-cuda-check --check-stream rc $rc: $(tail -1 "$OUT/stream-check.txt")"
      grep -E "^FAIL" "$OUT/stream-check.txt" | head -5
      if [ $rc -eq 124 ]; then   # a hang: the rest would only hang again
        note "stream: checks timed out, the other stream steps skipped"; pack; continue
      fi
      OUT= HONE_CHECK_STREAM_MODES=2 timeout 150 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-cuda-check --check-stream > "$OUT/stream-memcheck.txt" 2>&1
      note "memcheck --check-stream: $(san "$OUT/stream-memcheck.txt")"
      OUT= HONE_CHECK_STREAM_MODES=2 timeout 150 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-cuda-check --check-stream > "$OUT/stream-racecheck.txt" 2>&1
      note "racecheck --check-stream: $(san "$OUT/stream-racecheck.txt")"
      HONE_DECODE_STREAM=1 HONE_DEFAULT_MODEL=$MODEL G_DEBUG=gc-friendly timeout 200 $B/test-cuda-backend --verbose > "$OUT/stream-suite.txt" 2>&1
      note "test-cuda-backend streamed rc $?: $(grep -c '^ok' "$OUT/stream-suite.txt") ok, $(grep -c '^not ok' "$OUT/stream-suite.txt") not ok"
      OUT=$OUT timeout 420 $B/hone-cuda-check --decode-stream > "$OUT/stream-decode.txt" 2>&1
      note "decode-stream rc $?"; grep -E "^stream" "$OUT/stream-decode.txt" | cut -c1-150 ;;
  esac
  pack
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv >> "$R/env.txt" 2>&1
pack
note "done"
