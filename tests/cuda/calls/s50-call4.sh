#!/bin/bash
# Session 50, call 4: kernel 2 reworked after call 3's ncu (scales and zero points through the shared stages, loaded
# three steps before use by thread-per-row loads; X read in its natural order and stored swizzled; the k split
# chosen by whole waves) against kernel 1 (HONE_W4_GEMM_KERNEL=1), with call 2's checks and benchmarks.
# Prediction: one layer's four GEMMs at 16 tokens 110 -> ~70 us, at 64 tokens 241 -> ~170 us (kernel 2).
# Then: the checks under both kernels, memcheck and racecheck of kernel 2, the whole hone-w4-check --check.
# Carry .carry-release.
# The commands are call 2's, run unchanged on the rebuilt tree:
exec bash tests/cuda/calls/s50-call2.sh
