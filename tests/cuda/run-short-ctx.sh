#!/bin/bash
# tests/cuda/run-short-ctx.sh — the short-context attention shape in the decode step (one GPU-machine call;
# RESULTS-cuda.md "Decode, session 4: short-context attention"). Carry the folder run-release.sh uses
# (HONE_RELEASE_CARRY, default .carry-release, built as tests/bench/RESULTS.md "Session 4" says).
#   table:  the suite and the harness's decode table (bounded rows = the short-context shape), then the
#           table again with the bound raised to 4,096 keys (where the shape stops paying);
#   engine: `hone bench` on generated 8B models, bound 2,048 vs 0 (off), alternating, two repetitions,
#           separate processes, at 900-1,020 and 1,800-1,920 keys of context.
#   usage there: tests/cuda/run-short-ctx.sh [table] [engine]
set -u
cd "$(dirname "$0")/../.."
C=${HONE_RELEASE_CARRY:-.carry-release}
case $C in /*) ;; *) C=$PWD/$C ;; esac
for step in ${*:-table engine}; do
  case $step in
    table)
      bash tests/cuda/run-release.sh suite decode 2>&1 | grep -v "^$"
      export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64
      echo "== HONE_ATTN_SHORT_CTX=4096 (the short-context shape up to 4k keys in the step)"
      HONE_ATTN_SHORT_CTX=4096 HONE_DECODE_DEFAULT_ONLY=1 timeout 100 $C/bin/hone-cuda-check --decode 2>&1 \
        | grep -E "^decode4" | grep -E "short|ctx  (1024|2048|4096)" | cut -c1-150 ;;
    engine)
      [ -x $C/bin/hone ] || tar xJf $C/bundle.tar.xz -C $C
      export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/xc
      M=/dev/shm/hone-short-ctx; mkdir -p $M
      for t in q4_0 bf16; do
        timeout 120 $C/bin/hone gen-model --shape llama3-8b --type $t -o $M/8b-$t.gguf > /dev/null 2>&1
        for p in 900 1800; do
          for rep in 1 2; do
            for sc in 2048 0; do
              r=$(HONE_ATTN_SHORT_CTX=$sc timeout 60 $C/bin/hone bench -m $M/8b-$t.gguf --device cuda:0 -p $p -n 120 \
                  -r 3 -w 1 2>&1 | grep -E "^decode \(tok/s\)")
              echo "engine $t short_ctx=$sc -p $p rep $rep: $r"
            done
          done
        done
        rm -f $M/8b-$t.gguf
      done ;;
  esac
done
