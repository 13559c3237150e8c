#!/usr/bin/env bash
# Builds (see bootstrap.sh) and runs the test suite. Extra arguments go to ctest,
# e.g. ./scripts/test.sh -R Softmax
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

./scripts/bootstrap.sh
exec ctest --test-dir build --output-on-failure -j2 "$@"
