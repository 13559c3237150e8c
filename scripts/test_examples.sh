#!/usr/bin/env bash
# Installs the Release build (build/) into a temporary prefix, moves the prefix elsewhere (the
# package must not remember where it was installed), then configures, builds and runs every
# project in examples/ against it with find_package(gradlab). Fails on the first error.
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

for example in examples/*/; do
  name="$(basename "$example")"
  echo "--- example $name"
  cmake -S "$example" -B "$scratch/build-$name" -DCMAKE_PREFIX_PATH="$prefix" > "$scratch/$name.log" ||
    { cat "$scratch/$name.log"; exit 1; }
  cmake --build "$scratch/build-$name" -j2 >> "$scratch/$name.log" ||
    { cat "$scratch/$name.log"; exit 1; }
  "$scratch/build-$name/$name"
done
