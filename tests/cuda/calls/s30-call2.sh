#!/bin/bash
# Session 30, call 2: the release checks of the final binary (tests/cuda/run-release.sh suite checks sanitize),
# then compute-sanitizer racecheck on the input prologue's checks, and the engine (BF16 and Q4_0 8B).
# Carry .carry-release (bundle.tar.xz and model/) and this script.
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
OUT=$W/rel tests/cuda/run-release.sh suite checks sanitize > $W/rel.txt 2>&1; el "run-release rc $?"; cat $W/rel.txt | tail -40
C=$PWD/.carry-release; B=$C/bin
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/xc
OUT= timeout 150 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-cuda-check --check-qnorm > $W/qn-race.txt 2>&1
el "racecheck check-qnorm rc $?: $(grep -E 'RACECHECK SUMMARY|^checks' $W/qn-race.txt | tr '\n' '|') $(grep -c '^PASS' $W/qn-race.txt) PASS"
OUT=$W/eng tests/cuda/run-release.sh engine > $W/eng.txt 2>&1; el "engine rc $?"; grep -E "s hone bench|TTFT|decode \(tok|roofline" $W/eng.txt | head -30
