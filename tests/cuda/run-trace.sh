#!/bin/bash
# tests/cuda/run-trace.sh — one GPU-machine call that records kernel timelines
# of the one-token decode step of the 8B shape (measurement only):
#   per variant, the step bench of the trace build (its own step times, which
#   the instrumentation slows a little) and one replay at 128 keys traced per
#   block (kernels/hone-k-trace.cuh), then tests/cuda/trace-summary.py on it.
# Carry C (default .carry-trace): C/bundle.tar.xz from
#   TRACE=1 BUILD=build-trace CARRY=.carry-trace NO_MODEL=1 tests/cuda/build-carry.sh
# $OUT gets summary.txt (every variant's step table and trace summary) and
# traces.tar.xz (the CSVs and logs).
#   usage (device tool, carry C): tests/cuda/run-trace.sh [variant…]
#   variant: <harness type>[:bound|:tiny][@<env>=<value>] — Q4_0, Q4_1, Q8_0, BF16
#   (hone-cuda-check --decode) or AWQ (hone-w4-check --bench); :bound the graph
#   bounded to 2k keys as the engine captures it there, :tiny bounded to 256 keys
#   (the tiny attention kernel) as it captures it up to there; @HONE_PDL_TRIGGER=late
#   (say) an environment setting for this variant (several: @A=1@B=2; HONE_TRACE_CTX=<keys>
#   replays the traced step at that context instead of 128).
#   Default: Q4_0:tiny AWQ:tiny BF16:tiny Q8_0:tiny
set -u
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/hone-trace-out}
mkdir -p "$R"
W=$(mktemp -d /tmp/hone-trace.XXXXXX)
trap 'tar cJf "$R/traces.tar.xz" -C "$W" . 2>/dev/null; rm -rf "$W"' EXIT
C=${HONE_TRACE_CARRY:-.carry-trace}
case $C in /*) ;; *) C=$PWD/$C ;; esac
[ -d "$C/bin" ] || tar xJf "$C/bundle.tar.xz" -C "$C" || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
S=$R/summary.txt
variants=${*:-Q4_0:tiny AWQ:tiny BF16:tiny Q8_0:tiny}
n=0
for v in $variants; do
  n=$((n + 1))
  spec=${v%%@*}; setting=; [ "$spec" != "$v" ] && setting=${v#*@}
  type=${spec%%:*}
  d=$W/$n-${spec/:/-}${setting:+-${setting//[^A-Za-z0-9_]/_}}
  mkdir -p "$d"
  envs=(OUT="$d" HONE_TRACE_STEP="$spec")
  if [ -n "$setting" ]; then IFS=@ read -ra sets <<< "$setting"; envs+=("${sets[@]}"); fi
  if [ "$type" = AWQ ]; then
    cmd=(env "${envs[@]}" HONE_W4_STEP_ONLY=1 timeout 300 "$C/bin/hone-w4-check" --bench)
  else
    cmd=(env "${envs[@]}" HONE_DECODE_TYPES="$type" HONE_DECODE_DEFAULT_ONLY=1 timeout 300 "$C/bin/hone-cuda-check" --decode)
  fi
  echo "== $v: ${cmd[*]}" | tee -a "$S"
  "${cmd[@]}" > "$d/log.txt" 2>&1
  echo "rc $?" | tee -a "$S"
  grep -E "step|HONE_TRACE|FAIL|FATAL" "$d/log.txt" | head -40 | tee -a "$S"
  for t in "$d"/trace-*.csv; do
    [ -e "$t" ] || continue
    python3 "$(dirname "$0")/trace-summary.py" "$t" >> "$S" 2>&1 || echo "(no python3 here: summarize $t after the call)" >> "$S"
    xz -T4 "$t"
  done
done
