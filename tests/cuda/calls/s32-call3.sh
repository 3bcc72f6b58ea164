#!/bin/bash
# Session 32, call 3: the __syncwarp in session 2's decode attention kernel (attn_decode_kernel) that call 2's
# racecheck flagged (m_s read by every lane, then replaced by lane 0 with only shuffles between): the attention
# checks, then racecheck of `hone-attn-check --small` to its summary.
# Carry .carry-release (tests/cuda/build-carry.sh) and this script.
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
C=$PWD/.carry-release; tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64; B=$C/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
OUT= timeout 120 $B/hone-attn-check --check > $W/attn-check.txt 2>&1; el "hone-attn-check --check rc $?: $(tail -1 $W/attn-check.txt)"
OUT= timeout 300 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-attn-check --small > $W/race.txt 2>&1
el "racecheck rc $?: $(grep -c 'Race reported' $W/race.txt) race reports; $(grep -E 'RACECHECK SUMMARY' $W/race.txt || echo 'no summary')"
grep -A1 "Race reported" $W/race.txt | head -6
