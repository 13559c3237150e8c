#!/usr/bin/env bash
# Builds and runs the test suite, in three passes (what CI runs):
#
#   1. Release build in build/ (see bootstrap.sh): the whole suite; then the build installed into
#      a temporary prefix, and every project in examples/ built and run against it
#      (scripts/test_examples.sh).
#   2. Debug build with AddressSanitizer + UndefinedBehaviorSanitizer (GRADLAB_SANITIZE=ON) in
#      build-sanitize/, built in the background while pass 1 runs: the suite again (but the runs
#      listed below), with the sanitizer options below, in six processes, two at a time. Debug
#      keeps assertions (no NDEBUG); it compiles with -O1 instead of -O0, without which the
#      Eigen kernels make the sanitized suite too slow to run on every change, with -g1 instead
#      of -g (line tables for the sanitizers' stack traces, without the types and locals a
#      debugger needs: a third less compile time), and for the generic x86-64
#      target (GRADLAB_NATIVE=OFF), the kernels' variants for every instruction set included
#      (each runs where the processor has it). The tests' own files compile with -O0
#      (GRADLAB_TESTS_COMPILE_OPTIONS, tests/CMakeLists.txt): their time is the library's.
#      Without MPI (GRADLAB_MPI=OFF): Open MPI's own allocations would fail the leak check; the
#      tests that start gradlab under mpirun (tests/cli/test_mpi.cpp) run in pass 1. Without the
#      Python package (GRADLAB_PYTHON=OFF): a sanitized extension cannot load into an
#      interpreter built without the sanitizers; the Python tests run in pass 1.
#   3. The fuzz targets' committed corpus (fuzz/corpus/) replayed once under the same
#      sanitizers: the harnesses are built in build-sanitize/ as standalone replays
#      (GRADLAB_FUZZ_REPLAY, fuzz/README.md), so every input that once crashed stays fixed
#      without a clang build of the library. `scripts/fuzz.sh --replay` replays with the
#      libFuzzer build instead.
#
#   ./scripts/test.sh                  all three passes
#   ./scripts/test.sh --release-only   pass 1 only: the quick local loop
#   ./scripts/test.sh -R Softmax       other arguments go to ctest (passes 1 and 2; pass 2 then
#                                      runs a process per test)
#
# GRADLAB_CMAKE_ARGS (see bootstrap.sh) applies to every build; build-sanitize/ and build-fuzz/
# then add their own options.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

release_only=0
ctest_args=()
for arg in "$@"; do
  if [[ "$arg" == --release-only ]]; then
    release_only=1
  else
    ctest_args+=("$arg")
  fi
done

section() {
  if [[ -n "${section_name:-}" ]]; then
    echo "=== test.sh: $section_name: $((SECONDS - section_start)) s ==="
  fi
  section_name="$*"
  section_start=$SECONDS
  echo
  echo "=== test.sh: $* ==="
}

section "Release build and suite (build/)"
# The executable and the suite; the benchmarks are built by ./scripts/bench.sh. The tests' own
# files keep the build's -O3 here: at -O1, GCC 12 reports its own AVX-512 intrinsics, inlined
# from Eigen, as reading an uninitialised variable (a known false positive, fixed in GCC 13).
./scripts/bootstrap.sh --target gradlab --target gradlab_tests
if ((!release_only)); then
  # The sanitizer build of pass 2 starts now, in the background at a lower priority: it takes
  # the cores the suite, the Python tests and the examples leave idle (a fifth of the time,
  # serial links and configures, the suite's last tests) instead of waiting for them.
  sanitize_log="$repo_root/build/sanitize-build.log"
  # In a process group of its own (setsid), which the trap ends if this script stops first.
  setsid bash -c 'build_start=$SECONDS
    nice -n 10 ./scripts/bootstrap.sh --build-dir build-sanitize --build-type Debug -- \
      -DGRADLAB_SANITIZE=ON -DGRADLAB_NATIVE=OFF -DGRADLAB_BUILD_BENCH=OFF -DGRADLAB_MPI=OFF \
      -DGRADLAB_PYTHON=OFF -DGRADLAB_FUZZ_REPLAY=ON -DGRADLAB_TESTS_COMPILE_OPTIONS=-O0 \
      "-DCMAKE_CXX_FLAGS_DEBUG=-g1 -O1"
    status=$?
    echo "test.sh: the sanitizer build took $((SECONDS - build_start)) s beside passes 1-3"
    exit $status' >"$sanitize_log" 2>&1 &
  sanitize_build=$!
  trap 'kill -- -"$sanitize_build" 2>/dev/null || true' EXIT
fi
ctest --test-dir build --output-on-failure -j2 "${ctest_args[@]}"

section "Python package and its tests (build/python, tests/python)"
# Built for Debian's interpreter (CMakeLists.txt's default), whose numpy and pytest the tests
# use; skipped without pybind11 (GRADLAB_PYTHON is then OFF).
if grep -q "^GRADLAB_PYTHON:BOOL=ON" build/CMakeCache.txt; then
  cmake --build build -j2 --target gradlab_python
  GRADLAB_BUILD="$PWD/build" /usr/bin/python3 -m pytest -q tests/python
fi
# After the Python package: `cmake --install` installs it too.
section "Installed gradlab: examples/ built with find_package(gradlab)"
./scripts/test_examples.sh
if ((release_only)); then
  section "done"
  exit 0
fi

section "Debug + AddressSanitizer + UndefinedBehaviorSanitizer build and suite (build-sanitize/)"
if ! wait "$sanitize_build"; then
  cat "$sanitize_log"
  echo "test.sh: the sanitizer build failed (its log above: $sanitize_log)"
  exit 1
fi
tail -n 1 "$sanitize_log"
# Leak detection stays on, with the suppressions for libhdf5's own leaks in
# fuzz/lsan-suppressions.txt (OpenMP's libgomp needs none). A report makes the process exit 86
# (not 1, which tests of runtime failures expect from gradlab) and halts at the first error.
# The tests start the sanitized gradlab binary as a child process, which inherits these.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:exitcode=86:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=86:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$repo_root/fuzz/lsan-suppressions.txt:print_suppressions=0:${LSAN_OPTIONS:-}"
# Left to the Release pass, where they run too: what repeats, under the sanitizers, code that
# cheaper tests of this pass already reach.
# - DefaultRun.*: two whole fixture runs; other tests train the same models.
# - KernelsUnder.*: the kernel tests again under each lower kernel variant (240 CPU-s here);
#   KernelVariants.* runs every variant's kernels, one by one, in this pass.
# - GradientCheckCoverage.*: the gradient checks once more, to see which ops they reach (a
#   property of the code, not of memory).
# - Training runs to a result (FitTest.StopsAtTheTarget, TrainTest.EndToEnd*, Entropy.*,
#   Threads.OneAndTwoThreadsGiveTheSameLossesEveryStep, ModularTraining.Grokking*,
#   MqarTraining.*, InductionTraining.*, TmsTraining.* (10k steps to the pentagon),
#   LongContext.TrainsAboveTheScoreLimit*: a step of an 8192-token model, whose tiled kernel the
#   kernel tests run here at small sizes) and
#   FaultInjection.* (processes killed at random moments): the steps, evaluations and saves they
#   run are the other tests' too.
# - The command line's usage errors and help (*UsageError*, *Help*: a process started per bad
#   flag, a sixth of this pass): what they run is the commands' parsing, which the fuzz corpus
#   replay of pass 3 runs under the same sanitizers, every command's, in one process.
# - SweepCli.MakesTheRunsOfTrainInParallelAndResumes: 14 tiny training processes (4 CPU-s
#   here, mostly starting processes and saving checkpoints), each a run other tests check.
# - Report.OpensInAHeadlessBrowser: most of its time is Chromium's, which no sanitizer watches;
#   the report's making runs here in ReportPage.* and ReportRun.*.
release_only_tests=('DefaultRun.*' 'KernelsUnder.*' 'GradientCheckCoverage.*'
  'FitTest.StopsAtTheTarget' 'TrainTest.EndToEnd*' 'Entropy.*'
  'Threads.OneAndTwoThreadsGiveTheSameLossesEveryStep' 'ModularTraining.Grokking*'
  'MqarTraining.*' 'InductionTraining.*' 'LongContext.TrainsAboveTheScoreLimit*' 'FaultInjection.*'
  'SweepCli.MakesTheRunsOfTrainInParallelAndResumes' '*UsageError*' '*Help*'
  'Report.OpensInAHeadlessBrowser' 'TmsTraining.*')
if ((${#ctest_args[@]})); then
  # A selection (./scripts/test.sh -R Softmax): through ctest, a process per test.
  exclude=$(printf '%s\n' "${release_only_tests[@]}" | sed 's/\./\\./g; s/\*/.*/g; s/^/^/; s/$/$/' | paste -sd'|')
  ctest --test-dir build-sanitize --output-on-failure -j2 --timeout 900 -E "$exclude" \
    "${ctest_args[@]}"
else
  # The whole suite in six processes, two at a time (GoogleTest's shards), rather than ctest's
  # process per test: a sanitized test binary takes a third of a second of CPU to start, which
  # for 700 tests was a third of this pass; six shards keep both cores busy to the end. The
  # tests that need a fresh process start one.
  export filter="-$(IFS=:; echo "${release_only_tests[*]}")" shards=6
  mkdir -p build-sanitize/Testing
  run_shard() {
    # In the directory ctest would run it in; the status in a file, as xargs keeps only the worst.
    (cd build-sanitize/tests && GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$1 timeout 1800 \
      ./gradlab_tests --gtest_filter="$filter" >"../Testing/shard-$1.log" 2>&1)
    echo $? >"build-sanitize/Testing/shard-$1.status"
  }
  export -f run_shard
  seq 0 $((shards - 1)) | xargs -P 2 -I{} bash -c 'run_shard {}'
  shard_failed=0
  for ((shard = 0; shard < shards; ++shard)); do
    if [[ "$(cat "build-sanitize/Testing/shard-$shard.status")" == 0 ]]; then
      grep -E '^\[  PASSED  \]|^\[  SKIPPED \] [0-9]' "build-sanitize/Testing/shard-$shard.log" |
        sed "s/^/shard $shard: /"
    else
      echo "test.sh: shard $shard of the sanitized suite failed; its log:"
      cat "build-sanitize/Testing/shard-$shard.log"
      shard_failed=1
    fi
  done
  ((shard_failed == 0))
fi

section "fuzz corpus replay under the sanitizers (build-sanitize/fuzz/)"
# As fuzz.sh --replay's -malloc_limit_mb=512: one allocation above it is a finding.
export ASAN_OPTIONS="max_allocation_size_mb=512:$ASAN_OPTIONS"
for target in checkpoint cli intervene; do
  # Absolute paths: replay_cli and replay_intervene work in temporary directories of their own.
  mapfile -t inputs < <(find "$repo_root/fuzz/corpus/$target" -type f | sort)
  echo "test.sh: replaying the ${#inputs[@]} inputs of fuzz/corpus/$target"
  build-sanitize/fuzz/replay_$target "${inputs[@]}"
done
section "done"
