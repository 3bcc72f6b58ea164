#!/bin/bash
# Session 39, call 3: where the tree chain's ~23 µs go — HONE_CHAIN_TREE_PROBE stops it after the slices' load (1),
# after their sort (2), after the groups' merges (3), before the draw (4); 0 = whole. Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
for r in 1 2; do for pr in 0 1 2 3 4; do
  HONE_CHAIN_TREE_PROBE=$pr OUT= timeout 60 $B/hone-cuda-check --bench-sample > $W/sb-$pr.txt 2>&1
  el "probe $pr rc $?"; grep -E "CLI default\)|no top-k" $W/sb-$pr.txt | sed 's/  */ /g'
done; done
el done
