#!/usr/bin/env bash
# Checks that gradlab.h is complete: every header `cmake --install` installs (autograd/, nn/,
# data/, io/, train/, interp/ but any hdf5/ folder and train/io/checkpoint_*) is reached from gradlab.h through its
# includes, or is listed in gradlab.h's comment as deliberately left out; and every listed entry
# exists.
#
#   ./scripts/check_umbrella_header.sh [C++ compiler]     (from the repository root)
set -euo pipefail

compiler="${1:-c++}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

# -MG: headers outside the repository (Eigen, HDF5) need not be found to list the ones inside.
reached="$("$compiler" -std=c++20 -I. -MM -MG -x c++ gradlab.h | tr ' \\' '\n\n' |
  grep -E '^(autograd|nn|data|io|train|interp)/' | sort -u)"
left_out="$(sed -nE 's#^//   ((autograd|nn|data|io|train|interp)/[^ ]*) .*#\1#p' gradlab.h)"

status=0
for entry in $left_out; do
  if [[ ! -e "$entry" ]]; then
    echo "gradlab.h lists $entry as left out, but there is no such file" >&2
    status=1
  fi
done
while IFS= read -r header; do
  grep -qxF "$header" <<< "$reached" && continue
  listed=0
  for entry in $left_out; do
    [[ "$header" == "$entry" || ("$entry" == */ && "$header" == "$entry"*) ]] && listed=1
  done
  if ((listed == 0)); then
    echo "$header is installed but neither reached from gradlab.h nor listed as left out" >&2
    status=1
  fi
done < <(find autograd nn data io train interp -name '*.h' -not -path '*/hdf5/*' -not -name 'checkpoint_sections.h' -not -name 'checkpoint_checks.h' | sort)
exit "$status"
