#!/usr/bin/env bash
# Builds (see bootstrap.sh) and runs build/gradlab with the given arguments,
# e.g. ./scripts/run.sh gradcheck
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

./scripts/bootstrap.sh

if (($# == 0)); then
  # Default job: training once the driver has a `train` command; until then, the gradient check.
  if build/gradlab train --help >/dev/null 2>&1; then
    set -- train
  else
    set -- gradcheck
  fi
fi
exec build/gradlab "$@"
