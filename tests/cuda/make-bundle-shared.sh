#!/bin/bash
# tests/cuda/make-bundle-shared.sh — pack the GLib programs that run on the GPU
# machine into a bundle small enough for one device call (≤ 64 MiB with a
# model): libhone + the kernels go into ONE shared library (the CUDA fatbin
# then travels once, not once per program), and each program is relinked
# against it. Also packs the GLib & co. libraries the machine's image lacks.
#   usage: tests/cuda/make-bundle-shared.sh BUILD_DIR OUT_DIR [HARNESS…]
#   BUILD_DIR: a meson build with -Dcuda=enabled (e.g. -Dgpu_archs=90 -Dgui=disabled
#   -Dbuildtype=release) where `ninja src/cli/hone tests/test-cuda-backend
#   tests/test-cuda-awq` has run; HARNESS: a plain-CUDA harness, either a
#   binary copied to bin/ or its source (tests/cuda/hone-*-check.cu), which is
#   built here by nvcc for sm_${HONE_CUDA_ARCH:-90} and linked against libhoneall.so
#   (tests/cuda/build-carry.sh does all of this in one go).
#   Result: OUT_DIR/bundle.tar.xz with bin/ and lib/ (programs find lib/ by rpath).
set -eu
R=$(cd "$(dirname "$0")/../.." && pwd)   # the repository (kernel headers for the harnesses)
B=$(realpath "$1"); O=$(realpath -m "$2"); shift 2
S=$O/stage
rm -rf "$S" && mkdir -p "$S/bin" "$S/lib"
G="$(pkg-config --libs glib-2.0 gobject-2.0 gio-2.0 json-glib-1.0)"
CU=/usr/local/cuda/lib64
cd "$B"
g++ -shared -o "$S/lib/libhoneall.so" -Wl,--whole-archive src/core/libhone.a kernels/libhone-kernels.a \
  -Wl,--no-whole-archive -L$CU -lcudart $G -lm -ldl -pthread   # cuBLAS: opened at first use (hone-k-cublas.c)
# a program's own objects and static helper libraries, from its meson link line
objs () { ninja -t commands "$1" | tail -1 | tr ' ' '\n' | sed 's/^-Xlinker=//' \
          | grep -E '\.(o|a)$' | grep -Ev 'libhone\.a|libhone-kernels\.a'; }
for p in src/cli/hone tests/test-cuda-backend tests/test-cuda-awq; do
  [ -e "$p" ] || continue
  gcc -o "$S/bin/$(basename $p)" $(objs $p) -L"$S/lib" -lhoneall -L$CU -lcudart $G -lm -pthread \
      -Wl,-rpath,'$ORIGIN/../lib'
  strip "$S/bin/$(basename $p)"
done
cd - >/dev/null
ARCH=${HONE_CUDA_ARCH:-90}
pids=()
for h in "$@"; do
  case $h in
    *.cu) nvcc -std=c++17 -O3 -lineinfo -gencode arch=compute_$ARCH,code=sm_$ARCH ${NVCC_DEFS:-} -I"$R/kernels" "$h" \
            -o "$S/bin/$(basename "$h" .cu)" -L"$S/lib" -lhoneall \
            -Xlinker -rpath -Xlinker '$ORIGIN/../lib' & pids+=($!) ;;
    *) cp "$h" "$S/bin/" ;;
  esac
done
for p in "${pids[@]}"; do wait "$p"; done
ldd "$S"/bin/hone "$S/lib/libhoneall.so" | awk '/=> \// { print $3 }' | sort -u \
  | grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda[^/]*|libcudart[^/]*|libcublas[^/]*|libcublasLt[^/]*|libnvidia[^/]*|libhoneall)\.so' \
  | while read -r l; do cp -L "$l" "$S/lib/"; done
tar cJf "$O/bundle.tar.xz" -C "$S" bin lib
rm -rf "$S"
ls -la "$O/bundle.tar.xz"
