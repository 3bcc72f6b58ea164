#!/bin/bash
# Session 27, call 2: the merged main (c7c1cb7 + 039f361): the release checks, then the sampler's routing.
set -u
W=$OUT; export OUT
OUT=$W/rel timeout 470 tests/cuda/run-release.sh suite checks sanitize
C=$PWD/.carry-release; export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory
for m in 0 1; do
  HONE_SAMPLE_CHAIN_MANY=$m OUT= timeout 30 $C/bin/hone-cuda-check --check-sample > $W/cs-many$m.txt 2>&1
  echo "check-sample HONE_SAMPLE_CHAIN_MANY=$m rc $?: $(grep -E '^checks:' $W/cs-many$m.txt)"; grep FAIL $W/cs-many$m.txt | head -5
done
OUT= timeout 30 $C/bin/hone-cuda-check --bench-sample > $W/sb.txt 2>&1; echo "bench-sample rc $?"
grep "vocab 128256: chain" $W/sb.txt | sed 's/  */ /g'
