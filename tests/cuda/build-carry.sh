#!/bin/bash
# tests/cuda/build-carry.sh — build, on the developer machine, everything one
# GPU-machine call runs, and pack it into the folder the device tool carries:
#   1. a meson build (default build-dev: -Dcuda=enabled -Dgpu_archs=90
#      -Dgui=disabled -Dbuildtype=release), its hone, test-cuda-backend and
#      test-cuda-awq;
#   2. tests/cuda/make-bundle-shared.sh: libhone + kernels as one libhoneall.so,
#      the programs relinked against it, the plain-CUDA harnesses built by nvcc
#      against it, GLib & co. → CARRY/bundle.tar.xz (≈ 16 MB);
#   3. tests/cuda/hone-chain-bench.cu and hone-f16act-probe.cu by nvcc → CARRY/*.xz;
#      tests/cuda/keep-file-pages.c → CARRY/keep-file-pages.so (an LD_PRELOAD shim for memory A/Bs);
#   4. the default model's cut (tests/cuda/shrink-gguf.py, 2 layers), xz-packed
#      so tree + bundle + model stay under the tool's 64 MiB carry limit (a
#      4-layer cut left less than 0.1 MB in session 23; in session 50 the 3-layer
#      cut, 35 MB, put tree + carry 0.2 MB over it):
#      CARRY/model/smollm2-2l.gguf.xz (run-release.sh and the run scripts unpack
#      the first CARRY/model/*.gguf.xz; an older cut there is used as is).
#   usage: tests/cuda/build-carry.sh        env: BUILD, CARRY (default .carry-release),
#          HARNESSES (default: the five harnesses run-release.sh runs), NO_MODEL=1,
#          TRACE=1 (a measurement build: -Dkernel_trace=true, the harnesses with
#          -DHONE_K_TRACE; HONE_TRACE_STEP then writes kernel timelines — use its own BUILD)
set -eu
cd "$(dirname "$0")/../.."
B=${BUILD:-build-dev}
C=${CARRY:-.carry-release}
H=${HARNESSES:-hone-cuda-check hone-w4-check hone-attn-check hone-kquant-check hone-prefill-check}
T=false; [ -n "${TRACE:-}" ] && T=true && export NVCC_DEFS=-DHONE_K_TRACE
[ -d "$B" ] || meson setup "$B" -Dcuda=enabled -Dgpu_archs=${HONE_CUDA_ARCH:-90} -Dgui=disabled -Dbuildtype=release \
                 -Dkernel_trace=$T
meson configure "$B" -Dkernel_trace=$T
# ninja does not see the kernels' headers: meson 1.0 gives nvcc no depfile
# flags (nvcc -MD would name it X.cu.d, the rule reads X.cu.o.d), so a changed
# .cuh/.h leaves stale objects behind. Rebuild every kernel when one is newer.
lib="$B/kernels/libhone-kernels.a"
if [ -e "$lib" ] && [ -n "$(find kernels \( -name '*.cuh' -o -name '*.h' \) -newer "$lib" | head -1)" ]; then
  touch kernels/*.cu
fi
ninja -C "$B" src/cli/hone tests/test-cuda-backend tests/test-cuda-awq
mkdir -p "$C"
srcs=""; for h in $H; do srcs="$srcs tests/cuda/$h.cu"; done
tests/cuda/make-bundle-shared.sh "$B" "$C" $srcs
# the launch-structure floor and the 16-bit-input GEMV probe (plain CUDA, no libhone): CARRY/*.xz
for p in hone-chain-bench hone-f16act-probe; do
  nvcc -O3 -std=c++17 -arch=sm_${HONE_CUDA_ARCH:-90} -Ikernels -Itests/cuda -o "$C/$p" "tests/cuda/$p.cu"
  xz -T2 -9 -f "$C/$p"
done
# a no-op hone_file_pages_release to LD_PRELOAD: the same binaries with the model-page release off (A/B of memory)
gcc -shared -fPIC -O2 -Wall -o "$C/keep-file-pages.so" tests/cuda/keep-file-pages.c
if [ -z "${NO_MODEL:-}" ] && ! ls "$C"/model/*.gguf.xz > /dev/null 2>&1; then
  M=$(.ci/fetch-model | tail -1) || { echo "build-carry: could not fetch the default model; bundle only" >&2; exit 0; }
  python3 -c "import gguf" 2>/dev/null || python3 -m pip install --quiet gguf
  mkdir -p "$C/model"
  python3 tests/cuda/shrink-gguf.py "$M" "$C/model/smollm2-2l.gguf" 2
  xz -T2 -9e "$C/model/smollm2-2l.gguf"
fi
ls -la "$C" "$C/model" 2>/dev/null || true
