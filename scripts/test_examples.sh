#!/usr/bin/env bash
# Installs the Release build (build/) into a temporary prefix, moves the prefix elsewhere (the
# package must not remember where it was installed), then configures, builds and runs every
# project in examples/ against it with find_package(gradlab) (custom_module registers a norm of
# its own, trains the copy model with it, reloads its checkpoint and checks its gradient). Then
# the adder runs again with a checkpoint directory and is sent SIGTERM once it has trained a
# step: it must stop with exit 0 and a checkpoint, which the installed gradlab inspects and
# decodes raw token ids with. The installed Python package (when built) draws a notebook view with
# its installed copy of the report's bundle. Fails on the first error.
#
#   ./scripts/test_examples.sh     (after ./scripts/bootstrap.sh)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

cmake --install build --prefix "$scratch/installed" > "$scratch/install.log"
mv "$scratch/installed" "$scratch/moved"
prefix="$scratch/moved"
"$prefix/bin/gradlab" --help > /dev/null
# The installed Python package draws a notebook view with the report's bundle installed beside it.
if grep -q "^GRADLAB_PYTHON:BOOL=ON" build/CMakeCache.txt; then
  site="$(sed -n 's/^GRADLAB_PYTHON_INSTALL_DIR:STRING=//p' build/CMakeCache.txt)"
  PYTHONPATH="$prefix/$site" /usr/bin/python3 -c '
import gradlab
html = gradlab.vis.heatmap([[1.0]], ["key"], ["query"])._repr_html_()
assert "GL.views" in html and "Chart" in html, "the notebook view lacks the bundle"
assert gradlab.__file__.startswith("'"$prefix"'"), gradlab.__file__'
fi

# Each project is one file: they are configured and built side by side, each on its own, as a
# user would build it (the cores are otherwise idle), then run one by one.
names=()
builds=()
for example in examples/*/; do
  # examples/python/ holds Python programs, which the Python pass runs.
  [[ -f "$example/CMakeLists.txt" ]] || continue
  name="$(basename "$example")"
  names+=("$name")
  { cmake -S "$example" -B "$scratch/build-$name" -DCMAKE_PREFIX_PATH="$prefix" &&
    cmake --build "$scratch/build-$name"; } > "$scratch/$name.log" 2>&1 &
  builds+=($!)
done
for i in "${!names[@]}"; do
  wait "${builds[$i]}" || { cat "$scratch/${names[$i]}.log"; exit 1; }
done
for name in "${names[@]}"; do
  echo "--- example $name"
  "$scratch/build-$name/$name"
done

echo "--- example adder, stopped by SIGTERM"
stopped="$scratch/adder-stopped"
"$scratch/build-adder/adder" "$stopped" > "$scratch/adder-stopped.log" &
adder_pid=$!
for _ in $(seq 600); do  # at most 30 s for the first step
  grep -q '^training$' "$scratch/adder-stopped.log" && break
  sleep 0.05
done
kill -TERM "$adder_pid"
status=0
wait "$adder_pid" || status=$?
cat "$scratch/adder-stopped.log"
if ((status != 0)) || ! grep -q '^stopped by a signal' "$scratch/adder-stopped.log"; then
  echo "test_examples: the adder did not stop on SIGTERM with exit 0 (exit $status)" >&2
  exit 1
fi
checkpoints=("$stopped"/step-*.h5)
[[ -f "${checkpoints[0]}" ]] || { echo "test_examples: no checkpoint in $stopped" >&2; exit 1; }
"$prefix/bin/gradlab" inspect "${checkpoints[0]}" > "$scratch/inspect.log"
for field in 'task  *program' 'model  *decoder' 'd-model  *64' 'vocab-size  *11' 'total parameters'; do
  grep -q "$field" "$scratch/inspect.log" ||
    { cat "$scratch/inspect.log"; echo "test_examples: inspect shows no '$field'" >&2; exit 1; }
done
"$prefix/bin/gradlab" predict --checkpoint "${checkpoints[0]}" --input "3 4 6 9 0"
