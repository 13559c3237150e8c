#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/README.md) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer in build-fuzz/, then fuzzes or replays them.
#
#   ./scripts/fuzz.sh SECONDS            fuzz each target for SECONDS, starting from the
#                                        committed corpus fuzz/corpus/<target>/; new inputs go
#                                        to build-fuzz/corpus/<target>/, crashes to
#                                        build-fuzz/crashes/<target>-*
#   ./scripts/fuzz.sh --replay           run each target once over fuzz/corpus/<target>/ and
#                                        stop (scripts/test.sh does this in CI)
#   ./scripts/fuzz.sh --build            build only
#   --target checkpoint|cli|intervene    (with any of the above) only this target
#   --jobs N                             (with SECONDS) N fuzzing processes per target
#   -- FLAGS...                          more libFuzzer flags, e.g. `600 -- -fork=1
#                                        -ignore_crashes=1` to go on after a crash
#
# A crash is reproduced with `build-fuzz/fuzz/fuzz_<target> <file>`. Once fixed, copy the file
# into fuzz/corpus/<target>/ (named regression-<what>) so that the replay keeps it fixed.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

usage() {
  sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

mode=""
seconds=0
jobs=1
targets=(checkpoint cli intervene)
extra_flags=()
while (($# > 0)); do
  case "$1" in
    --)
      shift
      extra_flags=("$@")
      break
      ;;
    --replay | --build) mode="${1#--}" ;;
    --target)
      (($# >= 2)) || usage
      case "$2" in
        checkpoint | cli | intervene) targets=("$2") ;;
        *) usage ;;
      esac
      shift
      ;;
    --jobs)
      (($# >= 2)) && [[ "$2" =~ ^[1-9][0-9]*$ ]] || usage
      jobs="$2"
      shift
      ;;
    *)
      [[ "$1" =~ ^[1-9][0-9]*$ ]] || usage
      mode=fuzz
      seconds="$1"
      ;;
  esac
  shift
done
[[ -n "$mode" ]] || usage

# clang 16 with its libFuzzer: Debian 12's default clang 14 cannot compile train/checkpoint.cpp
# (its lambdas capture structured bindings, a C++20 feature that clang has since version 16).
# OpenMP: Debian 12's libomp-16-dev conflicts with the default libomp-dev, so clang 16 uses
# LLVM 14's libomp (header and runtime; the libomp interface is the same). Tests and
# benchmarks are not built here.
build_targets=()
for t in "${targets[@]}"; do build_targets+=(--target "fuzz_$t"); done
build_targets+=(--target cli_dictionary)
packages=(--package clang-16 --package libclang-rt-16-dev --package libomp-14-dev)
./scripts/bootstrap.sh --packages-only "${packages[@]}"
omp_dir=/usr/lib/llvm-14/lib
omp_flags="-fopenmp=libomp -idirafter $(ls -d "$omp_dir"/clang/*/include 2>/dev/null | head -n1)"
./scripts/bootstrap.sh --build-dir build-fuzz --build-type Debug "${build_targets[@]}" -- \
  -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 "-DCMAKE_CXX_FLAGS_DEBUG=-g -O1" \
  "-DOpenMP_C_FLAGS=$omp_flags" "-DOpenMP_CXX_FLAGS=$omp_flags" -DOpenMP_C_LIB_NAMES=omp \
  -DOpenMP_CXX_LIB_NAMES=omp -DOpenMP_omp_LIBRARY="$omp_dir/libomp.so" \
  -DGRADLAB_FUZZ=ON -DGRADLAB_SANITIZE=ON -DGRADLAB_BUILD_TESTS=OFF -DGRADLAB_BUILD_BENCH=OFF \
  -DGRADLAB_MPI=OFF
if [[ "$mode" == build ]]; then
  exit 0
fi

# Leaks are bugs here too (libFuzzer checks every input), except libhdf5's own, which
# fuzz/lsan-suppressions.txt lists. A sanitizer report or a crash makes the fuzzer exit non-zero
# and write the input to the artifact prefix.
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$repo_root/fuzz/lsan-suppressions.txt:print_suppressions=0:${LSAN_OPTIONS:-}"

# Absolute paths: fuzz_cli works in a temporary directory of its own.
out="$repo_root/build-fuzz"
status=0
for t in "${targets[@]}"; do
  binary="$out/fuzz/fuzz_$t"
  corpus="$repo_root/fuzz/corpus/$t"
  dict="$repo_root/fuzz/$t.dict"
  if [[ "$t" == cli ]]; then
    # The commands and flags from the command table, then the values of fuzz/cli.dict.
    dict="$out/cli.dict"
    { "$out/fuzz/cli_dictionary" && cat "$repo_root/fuzz/cli.dict"; } >"$dict"
  fi
  # -timeout: an input that runs this long is a hang (e.g. a loop in a damaged file).
  # -malloc_limit_mb: a single allocation this large is a finding. Fuzzing allows 2.1 GB: the
  # checkpoint reader caps a tensor at 2^28 elements (2 GiB of float64), and may allocate that
  # for a chunked dataset, whose compressed size says nothing. The corpus holds small files only,
  # so the replay allows 512 MB (regression-contiguous-dataset-without-storage.h5 once made the
  # reader allocate 2 GiB before finding that the file does not hold the data).
  limit=2100
  if [[ "$mode" == replay ]]; then
    limit=512
  fi
  flags=(-timeout=20 -rss_limit_mb=4096 -malloc_limit_mb="$limit" -dict="$dict" "${extra_flags[@]}")
  if [[ "$mode" == replay ]]; then
    mapfile -t inputs < <(find "$corpus" -type f | sort)
    echo "fuzz.sh: replaying the ${#inputs[@]} inputs of fuzz/corpus/$t"
    if ! "$binary" "${flags[@]}" "${inputs[@]}" >"$out/replay-$t.log" 2>&1; then
      echo "fuzz.sh: fuzz_$t failed on its corpus; the end of build-fuzz/replay-$t.log:" >&2
      tail -n 60 "$out/replay-$t.log" >&2
      status=1
    else
      echo "fuzz.sh: fuzz_$t: all ${#inputs[@]} inputs pass"
    fi
  else
    mkdir -p "$out/corpus/$t" "$out/crashes"
    echo "fuzz.sh: fuzzing fuzz_$t for $seconds s ($jobs job(s))"
    extra=()
    if ((jobs > 1)); then
      extra=(-jobs="$jobs" -workers="$jobs")
    fi
    if ! "$binary" "${flags[@]}" -max_total_time="$seconds" -print_final_stats=1 \
      -artifact_prefix="$out/crashes/$t-" "${extra[@]}" "$out/corpus/$t" "$corpus"; then
      echo "fuzz.sh: fuzz_$t found a problem: see build-fuzz/crashes/" >&2
      status=1
    fi
  fi
done
exit "$status"
