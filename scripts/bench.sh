#!/usr/bin/env bash
# Builds (see bootstrap.sh) and runs the Google Benchmark binary. Extra arguments go to it,
# e.g. ./scripts/bench.sh --benchmark_filter=Matmul
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

./scripts/bootstrap.sh

bench=build/bench/gradlab_bench
if [[ ! -x "$bench" ]]; then
  echo "bench: $bench was not built (is GRADLAB_BUILD_BENCH=OFF in GRADLAB_CMAKE_ARGS?)" >&2
  exit 1
fi
exec "$bench" "$@"
