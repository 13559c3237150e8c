#!/usr/bin/env bash
# Side-by-side benchmark of gradlab against libtorch (see BENCHMARKS.md), the one way to
# regenerate the table in BENCHMARKS.md:
#
#   ./scripts/bench.sh                     build with the libtorch benchmark, run every workload
#                                          at 1 and 2 threads, print the table, update BENCHMARKS.md
#   ./scripts/bench.sh --reps 3 --only mha faster partial runs (options of scripts/bench_table.py;
#                                          --no-doc leaves BENCHMARKS.md alone)
#   ./scripts/bench.sh --benchmark_filter=Matmul   gradlab's own micro-benchmarks only: Google
#                                          Benchmark flags pass through to gradlab_bench
#   ./scripts/bench.sh --gemm-libraries    only the matrix-product kernel against OpenBLAS, BLIS
#                                          and libxsmm, and the FMA peak, per instruction set
#                                          (scripts/bench_gemm_libraries.sh; about 5 minutes)
#   ./scripts/bench.sh --scaling           only the scaling of training on several processes
#                                          (scripts/bench_scaling.py; mpirun, about 3 minutes),
#                                          which a full run does last
#   ./scripts/bench.sh --isa avx2          the AVX2 path on an AVX-512 machine: both engines held
#                                          to their AVX2 kernels; its own table in BENCHMARKS.md
#                                          and build/bench/results/latest-avx2.*
#
# The workloads include a language model trained with configs/char.ini on the text of Debian's
# fortunes packages, gradlab against the PyTorch replica scripts/char_lm_torch.py (two seeds;
# about 15 minutes of the run; `--only char_lm` runs it alone, `--only '^(?!char_lm)'` all but it),
# and the research runs (grokking, MQAR at (256, 32), induction: `gradlab train --config` against
# the PyTorch replica scripts/research_torch.py, the steps to their targets in both; `--only
# research` runs them alone). Those take about 30 minutes, half of it MQAR's two whole runs
# (PyTorch's alone 12-20 minutes): `--research-whole '^(?!research/mqar)'` leaves them out.
#
# The build goes through scripts/bootstrap.sh with GRADLAB_BUILD_TORCH_BENCH=ON added to
# GRADLAB_CMAKE_ARGS; libtorch comes from Debian's libtorch-dev (without it, only the gradlab
# side runs). Raw samples: build/bench/results/latest.json; the generated section:
# build/bench/results/latest.md.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

if [[ "${1:-}" == --gemm-libraries ]]; then
  shift
  exec ./scripts/bench_gemm_libraries.sh "$@"
fi

micro=0
scaling_only=0
partial=0
results=latest
table_args=()
previous=""
for arg in "$@"; do
  [[ "$arg" == --benchmark_* ]] && micro=1
  [[ "$arg" == --only* ]] && partial=1
  [[ "$arg" == --isa=avx2 || ("$previous" == --isa && "$arg" == avx2) ]] && results=latest-avx2
  if [[ "$arg" == --scaling ]]; then
    scaling_only=1
  else
    table_args+=("$arg")
  fi
  previous="$arg"
done

if ((micro)); then
  ./scripts/bootstrap.sh
  bench=build/bench/gradlab_bench
  if [[ ! -x "$bench" ]]; then
    echo "bench: $bench was not built (is GRADLAB_BUILD_BENCH=OFF in GRADLAB_CMAKE_ARGS?)" >&2
    exit 1
  fi
  exec "$bench" "$@"
fi

GRADLAB_CMAKE_ARGS="${GRADLAB_CMAKE_ARGS:-} -DGRADLAB_BUILD_BENCH=ON -DGRADLAB_BUILD_TORCH_BENCH=ON" \
  ./scripts/bootstrap.sh

torch_bench=build/bench/gradlab_torch_bench
torch_ld_path=""
if [[ -x "$torch_bench" ]]; then
  # Debian's libtorch calls whatever libblas.so.3 the alternatives system selects. When that is
  # not OpenBLAS (e.g. the netlib reference BLAS, about 1 GFLOP/s), point libtorch at an OpenBLAS
  # for these runs only: an installed one, else Debian's libopenblas0-openmp unpacked into the
  # build tree (nothing is installed).
  if ! "$torch_bench" --probe | grep -q '"openblas_core": "[^"]'; then
    multiarch="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
    for dir in "/usr/lib/$multiarch/openblas-openmp" "/usr/lib/$multiarch/openblas-pthread"; do
      if [[ -e "$dir/libblas.so.3" ]]; then
        torch_ld_path="$dir"
        break
      fi
    done
    deps=build/bench/deps
    if [[ -z "$torch_ld_path" ]]; then
      local_dir="$deps/root/usr/lib/$multiarch/openblas-openmp"
      if [[ ! -e "$local_dir/libblas.so.3" ]]; then
        echo "bench: libtorch's BLAS is not OpenBLAS; unpacking Debian's libopenblas0-openmp into $deps"
        mkdir -p "$deps"
        if (cd "$deps" && rm -f ./*.deb && apt-get download libopenblas0-openmp >download.log 2>&1 &&
          dpkg-deb -x ./libopenblas0-openmp_*.deb root); then
          :
        else
          echo "bench: could not fetch libopenblas0-openmp (see $deps/download.log)" >&2
        fi
      fi
      [[ -e "$local_dir/libblas.so.3" ]] && torch_ld_path="$(cd "$local_dir" && pwd)"
    fi
    if [[ -z "$torch_ld_path" ]]; then
      echo "bench: warning: libtorch runs on its default BLAS, not OpenBLAS: its GEMM numbers" \
        "are not a fair reference" >&2
    fi
  fi
fi

# The language-model workload's text: the plain-text files of Debian's fortunes packages
# (2.5 MB of English), installed ones or the packages unpacked into the build tree, joined in
# name order (their .dat indexes and .u8 links left out).
lm_text=build/bench/deps/fortunes.txt
if [[ ! -s "$lm_text" ]]; then
  fortunes_dir=/usr/share/games/fortunes
  if [[ ! -e "$fortunes_dir/cookie" ]]; then
    mkdir -p build/bench/deps/fortunes
    (cd build/bench/deps/fortunes && rm -f ./*.deb &&
      apt-get download fortunes fortunes-min >download.log 2>&1 &&
      for deb in ./*.deb; do dpkg-deb -x "$deb" root; done) ||
      echo "bench: could not fetch the fortunes packages (see build/bench/deps/fortunes)" >&2
    fortunes_dir=build/bench/deps/fortunes/root/usr/share/games/fortunes
  fi
  if [[ -e "$fortunes_dir/cookie" ]]; then
    (cd "$fortunes_dir" && LC_ALL=C ls | grep -v '\.' | xargs cat) >"$lm_text"
  fi
fi
lm_args=()
[[ -s "$lm_text" ]] && lm_args=(--lm-data "$lm_text")

mkdir -p build/bench/results
if ((!scaling_only)); then
  /usr/bin/python3 scripts/bench_table.py --build build --torch-ld-path "$torch_ld_path" \
    "${lm_args[@]}" \
    --json "build/bench/results/$results.json" --markdown "build/bench/results/$results.md" \
    --doc BENCHMARKS.md "${table_args[@]}"
fi
# Training on several processes: the same text (a GPL text every Debian system has, if the
# fortunes could not be fetched), through mpirun; a full native run ends with it.
if ((!scaling_only)) && { ((partial)) || [[ "$results" != latest ]]; }; then
  exit 0
fi
if [[ -x build/bench/gradlab_allreduce_bench ]]; then
  scaling_text="$lm_text"
  [[ -s "$scaling_text" ]] || scaling_text=/usr/share/common-licenses/GPL-3
  doc_args=(--doc BENCHMARKS.md)
  for arg in "${table_args[@]}"; do [[ "$arg" == --no-doc ]] && doc_args=(); done
  /usr/bin/python3 scripts/bench_scaling.py --build build --text "$scaling_text" \
    --json build/bench/results/scaling.json --markdown build/bench/results/scaling.md \
    "${doc_args[@]}"
else
  echo "bench: no gradlab_allreduce_bench (a build without MPI): the scaling table is skipped" >&2
fi
