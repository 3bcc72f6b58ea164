#!/bin/bash
# tests/cuda/make-bundle.sh — pack what tests/cuda/run-e2e.sh runs on the GPU
# machine: bin/hone (from build-cuda2), bin/hone-cuda-check (nvcc build as in
# tests/run-cuda.sh) and the shared libraries they need that the machine's
# image may lack (GLib & co.; not libc/libstdc++/CUDA, which it has, newer).
#   usage: tests/cuda/make-bundle.sh [HARNESS_BINARY]
set -eu
cd "$(dirname "$0")/../.."
C=build-cuda2/carry
H=${1:-build-cuda2/harness/hone-cuda-check}
rm -rf $C/stage && mkdir -p $C/stage/bin $C/stage/lib
strip -o $C/stage/bin/hone build-cuda2/src/cli/hone
cp $H $C/stage/bin/hone-cuda-check
ldd build-cuda2/src/cli/hone | awk '/=> \// { print $3 }' \
  | grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda[^/]*|libcudart[^/]*|libcublas[^/]*|libcublasLt[^/]*|libnvidia[^/]*)\.so' \
  | while read -r l; do cp -L "$l" $C/stage/lib/; done
tar cJf $C/bundle.tar.xz -C $C/stage bin lib
rm -rf $C/stage
ls -la $C/bundle.tar.xz; tar tJf $C/bundle.tar.xz
