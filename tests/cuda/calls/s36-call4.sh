#!/bin/bash
# Session 36, call 4: the CUDA suites on the final code — test-cuda-backend (the AWQ case's deferred load now also
# checks the upload's progress ends at exactly 1: it counts the bytes it reads, the Q4Z rows made for AWQ linears,
# not the file's size) and test-cuda-awq (GPU calibration). Carry .carry-release.
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
C=$PWD/.carry-release
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/hc HONE_SOURCE_ROOT=$PWD
MODEL=/tmp/smollm2-3l.gguf; xz -dc $C/model/*.gguf.xz > $MODEL
for t in test-cuda-backend test-cuda-awq; do
  HONE_DEFAULT_MODEL=$MODEL timeout 200 $C/bin/$t --verbose > $W/$t.txt 2>&1
  el "$t rc $?: $(grep -c '^ok' $W/$t.txt) ok, $(grep -c '^not ok' $W/$t.txt) not ok"; grep -E "^not ok|ERROR" $W/$t.txt | head
done
