#!/bin/bash
# Session 42, call 1: the sampler walk's levels histogram into each block's shared memory first (one L2 atomic a
# nonzero bucket a block, not one a bucket a warp), same binary A/B against session 41's form
# (HONE_SAMPLE_WALK_HIST=global). On an H200 the issue's goal rows run first (s40-call5's rows: no H200 has run main
# since session 37: BF16 87.6 / AWQ 58.0 / Q4_0 61.1 % of 4.52 TB/s). Carry .carry-release.
# (HONE_SAMPLE_WALK_HIST and the shared form were taken out after this call: it measured no faster.)
# Predictions (written before the call):
#  - --check-sample 8/8 under both forms (152 walked draws = the host's); racecheck of the chain's checks 0 hazards.
#  - --bench-sample, 128,256 logits: pure temperature walked 72 -> 45-55 us, top-p 0.95 walked 86 -> 55-65,
#    idle walk (T 0.3 top-p 0.9) and CLI defaults unchanged (35.8, 16.3) within 1 us; the global form as session 41.
#  - 8B Q4_0 `hone run` pure temperature 512 -> 515-522 tok/s (a ~20 us shorter step of ~1.95 ms), greedy unchanged.
#  - H200 goal rows (if one comes): within +-2 % of session 37's.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows ;; esac
for form in shared global; do
  HONE_SAMPLE_WALK_HIST=$form OUT= timeout 60 $B/hone-cuda-check --check-sample > $W/cs-$form.txt 2>&1
  el "check-sample [$form] rc $?: $(grep '^checks:' $W/cs-$form.txt)"; grep -E "^FAIL|past the 256" $W/cs-$form.txt | head -4
done
for r in 1 2; do for form in shared global; do
  HONE_SAMPLE_WALK_HIST=$form OUT= timeout 60 $B/hone-cuda-check --bench-sample > $W/bs-$form-$r.txt 2>&1
  el "bench-sample [$form] round $r rc $?"; grep -E "vocab 128256.*(walked|within|CLI default\)|greedy  )" $W/bs-$form-$r.txt | sed 's/  */ /g'
done; done
[ -f $M/q.gguf ] || { timeout 60 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf > /dev/null 2>&1; el "gen q4_0 rc $?"; }
for form in shared global shared; do for cfg in "--temp 0" "--top-k 0 --top-p 1 --min-p 0 --temp 1.0" "--top-k 0 --top-p 0.95 --min-p 0 --temp 1.0"; do
  HONE_SAMPLE_WALK_HIST=$form timeout 30 $B/hone run -m $M/q.gguf --device cuda:0 -p "Hello there, tell me a story." $cfg --seed 5 -n 256 --metrics > /dev/null 2> $W/run.txt
  el "run [$form] [$cfg] rc $?: $(grep -oE 'decode [0-9]+ tokens at [0-9.]+ tok/s' $W/run.txt)"
done; done
rm -f $M/q.gguf
OUT= timeout 250 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-cuda-check --check-sample-rows > $W/rc.txt 2>&1
el "racecheck check-sample-rows rc $?: $(grep -E 'RACECHECK SUMMARY|^checks' $W/rc.txt | tr '\n' '|')"
el done
