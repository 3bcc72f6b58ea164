#!/bin/bash
# Session 53, call 5: a third block an SM for the 64-token tiles (call 3's ncu: two warps a scheduler, no eligible
# warp 68 % of the cycles; registers (210) and shared memory (106.5 KB) both cap it at 2 blocks). The variant
# (.carry-var/libhoneall.so: hone-k-gemm-w4.cu built with -DW4G_STAGES8=2 -DW4G_MINB8=3): 2 stages at NT = 8 (52 KB
# for Q4_0) and ptxas held to 168 registers (68-184 bytes of spills), so 3 blocks fit; against this build (4 stages,
# 2 blocks) in the same call. Predicted: 64-128-token GEMMs -5 to -20 % if latency hiding is what binds, worse if the
# one stage in flight exposes the loads or the spills land in the loop; 16 tokens unchanged (NT = 2 untouched).
# Checks (--gemm, memcheck) run on the variant first. Carry .carry-release and .carry-var.
set -u
. tests/cuda/calls/prelude.sh
mkdir -p $M/var; xz -dc .carry-var/libhoneall.so.xz > $M/var/libhoneall.so; VL=$M/var:$LD_LIBRARY_PATH
OUT= LD_LIBRARY_PATH=$VL timeout 60 $B/hone-w4-check --gemm > $W/var-gemm.txt 2>&1; el "var --gemm rc $?"; tail -1 $W/var-gemm.txt
for v in new var new var; do
  L=$LD_LIBRARY_PATH; [ $v = var ] && L=$VL
  OUT= LD_LIBRARY_PATH=$L timeout 100 $B/hone-kquant-check --bench-gemm >> $W/kq-gemm-$v.txt 2>&1; el "bench-gemm $v rc $?"
done
grep -E "gate\|up|down" $W/kq-gemm-new.txt | grep -E "n 1[26]8|n  64" | head -12 | sed 's/^/new /'
grep -E "gate\|up|down" $W/kq-gemm-var.txt | grep -E "n 1[26]8|n  64" | head -12 | sed 's/^/var /'
OUT= LD_LIBRARY_PATH=$VL timeout 150 $B/hone-w4-check --prefill-bench > $W/var-pb.txt 2>&1; el "var prefill-bench rc $?"; grep "one layer" $W/var-pb.txt
OUT= LD_LIBRARY_PATH=$VL timeout 150 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-w4-check --gemm > $W/var-memcheck.txt 2>&1
el "var memcheck rc $?"; tail -1 $W/var-memcheck.txt
el done
