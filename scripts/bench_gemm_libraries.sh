#!/usr/bin/env bash
# gradlab's matrix-product kernel next to OpenBLAS, BLIS and libxsmm, and the FMA peak, on the
# processor's own instruction set and, on an AVX-512 processor, on AVX2 as well (every library
# held to its AVX2 kernels): the table of BENCHMARKS.md "Matrix products: our kernel or a
# library". Debian's libopenblas0-openmp, libblis4-openmp and libxsmm-dev are unpacked into
# build/bench/deps/gemm (nothing is installed). Run by `./scripts/bench.sh --gemm-libraries`;
# arguments go to gradlab_gemm_bench (e.g. --threads 1 --seconds 0.5).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

deps=build/bench/deps/gemm
multiarch="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
openblas="$deps/root/usr/lib/$multiarch/openblas-openmp/libopenblas.so.0"
blis="$deps/root/usr/lib/$multiarch/blis-openmp/libblis.so.4"
if [[ ! -e "$openblas" || ! -e "$blis" || ! -e "$deps/root/usr/include/libxsmm.h" ]]; then
  echo "bench: unpacking Debian's libopenblas0-openmp, libblis4-openmp and libxsmm-dev into $deps"
  mkdir -p "$deps"
  (cd "$deps" && rm -f ./*.deb &&
    apt-get download libopenblas0-openmp libblis4-openmp libxsmm-dev >download.log 2>&1 &&
    for deb in ./*.deb; do dpkg-deb -x "$deb" root; done) ||
    { echo "bench: could not fetch the libraries (see $deps/download.log)" >&2; exit 1; }
fi

GRADLAB_CMAKE_ARGS="${GRADLAB_CMAKE_ARGS:-} -DGRADLAB_BUILD_BENCH=ON -DGRADLAB_LIBXSMM_ROOT=$repo_root/$deps/root" \
  ./scripts/bootstrap.sh --target gradlab_gemm_bench
bench=build/bench/gradlab_gemm_bench

lscpu | sed -n 's/^Model name: *//p'
if grep -q avx512f /proc/cpuinfo; then
  echo
  # BLIS 0.9 does not know every AVX-512 processor (a Zen 5 got its generic kernels, at a sixth
  # of the speed): BLIS_ARCH_TYPE holds its arch_t number, 0 = skx (3 = haswell).
  echo "## AVX-512 (OpenBLAS and libxsmm: their own choice; BLIS_ARCH_TYPE=0, skx)"
  env -u OPENBLAS_CORETYPE -u GRADLAB_ISA -u LIBXSMM_TARGET BLIS_ARCH_TYPE=0 \
    "$bench" --openblas "$openblas" --blis "$blis" "$@"
fi
echo
echo "## AVX2 (GRADLAB_ISA=avx2, OPENBLAS_CORETYPE=Haswell, BLIS_ARCH_TYPE=3, LIBXSMM_TARGET=hsw)"
GRADLAB_ISA=avx2 OPENBLAS_CORETYPE=Haswell BLIS_ARCH_TYPE=3 LIBXSMM_TARGET=hsw \
  "$bench" --openblas "$openblas" --blis "$blis" "$@"
