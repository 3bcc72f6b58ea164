#!/bin/bash
# tests/bench/run-awq-gpu.sh — AWQ calibration on the GPU machine: the `cuda`
# suite's test-cuda-awq (tiny models, then the default model's first layers)
# and the timing of the Llama-3-8B shape (128 × 512 tokens, random ids).
#
# Here (the developer machine):
#   meson setup build-calib -Dgpu_archs=90 -Dgui=disabled -Dbuildtype=release
#   ninja -C build-calib tests/test-cuda-awq
#   tests/bench/run-awq-gpu.sh bundle [HONE_CLI]     # → .carry-calib/bundle.tar.xz (+ model/)
#     HONE_CLI: a `hone` binary for gen-model (any build; CPU-only is fine)
#     model/: tests/cuda/shrink-gguf.py DEFAULT.gguf .carry-calib/model/smollm2-5l.gguf 5
# There (device tool, carry .carry-calib):
#   tests/bench/run-awq-gpu.sh [tiny] [model] [gen] [time] [time-bf16] [time-tf32] [sanitize]
#   time: the default GEMM operands (TF32); time-bf16/-tf32: those operands
#   env: LAYERS (8B layers generated and timed, default 32), EXPORT=1 (time also
#        writes the Q4_1 GGUF of the result), OUT
set -u
cd "$(dirname "$0")/../.."
C=$PWD/.carry-calib
if [ "${1:-}" = bundle ]; then
  H=${2:-build-lead/src/cli/hone}
  rm -rf $C/stage && mkdir -p $C/stage/bin $C/stage/lib
  strip -o $C/stage/bin/test-cuda-awq build-calib/tests/test-cuda-awq
  strip -o $C/stage/bin/hone "$H"
  for b in build-calib/tests/test-cuda-awq "$H"; do
    ldd $b | awk '/=> \// { print $3 }'
  done | sort -u \
    | grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda[^/]*|libcudart[^/]*|libcublas[^/]*|libcublasLt[^/]*|libnvidia[^/]*)\.so' \
    | while read -r l; do cp -L "$l" $C/stage/lib/; done
  tar cJf $C/bundle.tar.xz -C $C/stage bin lib
  rm -rf $C/stage
  ls -la $C/bundle.tar.xz $C/model
  exit 0
fi

OUT=${OUT:-/tmp/hone-awq-out}
mkdir -p "$OUT"
tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GSETTINGS_BACKEND=memory HONE_SOURCE_ROOT=$PWD
T=$C/bin/test-cuda-awq
L=${LAYERS:-32}
# tmpfs when it holds the model (16 GB for 32 layers) and the export
M=/dev/shm/hone-awq
avail=$(df --output=avail -k /dev/shm 2>/dev/null | tail -1)
[ "${avail:-0}" -gt $(( L * 700000 + 8000000 )) ] || M=/tmp/hone-awq
mkdir -p $M
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; nproc; df -h $M; } \
  > "$OUT/env.txt" 2>&1
rc=0
for s in ${*:-tiny model gen time-bf16 time-tf32}; do
  t0=$(date +%s)
  case $s in
    tiny)
      for p in /cuda-awq/rtn-exact/llama /cuda-awq/rtn-exact/qwen2-bf16 /cuda-awq/vs-cpu/llama-mha \
               /cuda-awq/vs-cpu/qwen2-bf16 /cuda-awq/vs-cpu/qwen3-f16 /cuda-awq/deterministic /cuda-awq/bad-input; do
        timeout 30 $T -p $p >> "$OUT/tiny.txt" 2>&1 || { rc=1; echo "FAILED $p" >> "$OUT/tiny.txt"; }
      done
      grep -E "^(ok|not ok)|FAILED|choices|ppl|ERROR|CRITICAL" "$OUT/tiny.txt" | head -60 ;;
    model)
      HONE_DEFAULT_MODEL=$C/model/smollm2-5l.gguf timeout 40 $T --model > "$OUT/model.txt" 2>&1 || rc=1
      grep -E "^(ok|not ok)|choices|ppl|ERROR|CRITICAL|layer" "$OUT/model.txt" | head -40 ;;
    gen)
      timeout 60 $C/bin/hone gen-model --shape llama3-8b --type bf16 --layers $L -o $M/8b-$L.gguf > "$OUT/gen.txt" 2>&1 || rc=1
      cat "$OUT/gen.txt" ;;
    time)
      HONE_AWQ_DEBUG=1 timeout 125 $T --time $M/8b-$L.gguf 128 512 ${EXPORT:+$M/8b-$L-awq.gguf} > "$OUT/time.txt" 2>&1 || rc=1
      grep -E "^awq: setup|layer (1|$L)/|calibrate|open|model |export" "$OUT/time.txt"; tail -9 "$OUT/time.txt" | head -8 ;;
    time-bf16|time-tf32)
      HONE_AWQ_GEMM=${s#time-} HONE_AWQ_DEBUG=1 timeout ${TIME_LIMIT:-60} $T --time $M/8b-$L.gguf 128 512 > "$OUT/$s.txt" 2>&1 || rc=1
      grep -E "^awq: setup|layer 1/|calibrate|open|model " "$OUT/$s.txt"; tail -9 "$OUT/$s.txt" | head -8 ;;
    sanitize|sanitize-bf16)
      [ $s = sanitize-bf16 ] && export HONE_AWQ_GEMM=bf16
      timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool memcheck $T -p /cuda-awq/deterministic \
        > "$OUT/$s.txt" 2>&1 || rc=1
      unset HONE_AWQ_GEMM
      tail -3 "$OUT/$s.txt" ;;
  esac
  echo "== $s: $(( $(date +%s) - t0 )) s"
done
exit $rc
