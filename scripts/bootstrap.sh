#!/usr/bin/env bash
# Installs missing Debian packages (only when root), then configures and builds a Release
# build in build/ at the repository root. Safe to run again: apt is skipped when everything is
# installed, and CMake only rebuilds what changed.
#
# Extra configure arguments: GRADLAB_CMAKE_ARGS="-DGRADLAB_NATIVE=OFF -DGRADLAB_SANITIZE=ON"
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

packages=(
  cmake g++ make
  libeigen3-dev libboost-program-options-dev libhdf5-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3
)

missing=()
for pkg in "${packages[@]}"; do
  # dpkg -s also succeeds for removed packages whose config files remain; require "installed".
  if ! dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed$'; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} > 0)); then
  if [[ "$(id -u)" -ne 0 ]]; then
    echo "bootstrap: missing packages: ${missing[*]}" >&2
    echo "bootstrap: install them with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  echo "bootstrap: installing ${missing[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "bootstrap: all packages present, skipping apt"
fi

# Split GRADLAB_CMAKE_ARGS on whitespace into separate arguments.
extra_args=()
read -r -a extra_args <<<"${GRADLAB_CMAKE_ARGS:-}"

# Reconfiguring is cheap and picks up changed options and new source files.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${extra_args[@]}"
cmake --build build -j"$(nproc)"
