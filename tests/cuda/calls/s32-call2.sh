#!/bin/bash
# Session 32, call 2: main after the CPU-side changes of the session (thread pool claiming parts, the prompt
# attention's register tiles, chats past the context): the CUDA suites, which compare the CUDA backend with the
# CPU backend, and the sanitizer step (memcheck, racecheck) that call 1 left out.
# Carry .carry-release (tests/cuda/build-carry.sh) and this script.
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
OUT=$W/rel HONE_RACE_TIMEOUT=60 timeout 460 tests/cuda/run-release.sh suite sanitize > $W/rel.txt 2>&1; el "run-release rc $?"
tail -30 $W/rel.txt
