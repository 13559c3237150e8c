#!/usr/bin/env bash
# Builds (see bootstrap.sh) and runs build/gradlab with the given arguments; with none, the
# main job: `gradlab train` with the default copy-task configuration.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

./scripts/bootstrap.sh

if (($# == 0)); then
  set -- train
fi
exec build/gradlab "$@"
