#!/usr/bin/env bash
# Builds the gradlab executable alone (see bootstrap.sh; the tests and benchmarks are built by
# test.sh and bench.sh) and runs it with the given arguments; with none, the main job:
# `gradlab train` with the default copy-task configuration.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

./scripts/bootstrap.sh --target gradlab

if (($# == 0)); then
  set -- train
fi
exec build/gradlab "$@"
