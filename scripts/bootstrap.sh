#!/usr/bin/env bash
# Installs missing Debian packages (only when root), then configures and builds a Release
# build in build/ at the repository root. Safe to run again: apt is skipped when everything is
# installed, and CMake only rebuilds what changed.
#
# Extra configure arguments: GRADLAB_CMAKE_ARGS="-DGRADLAB_NATIVE=OFF -DGRADLAB_SANITIZE=ON"
#
# Options (used by test.sh and fuzz.sh for their second build directories):
#   --build-dir DIR      configure and build DIR instead of build/ (e.g. build-sanitize/)
#   --build-type TYPE    CMAKE_BUILD_TYPE (default Release)
#   --package PKG        also require the Debian package PKG (repeatable)
#   --target T           build only target T (repeatable; default: everything)
#   --packages-only      install the missing packages and stop (no configure, no build)
# GRADLAB_CMAKE_ARGS comes before the arguments given after `--`, so those win:
#   ./scripts/bootstrap.sh --build-dir build-sanitize --build-type Debug -- -DGRADLAB_SANITIZE=ON
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

packages=(
  cmake g++ make
  libeigen3-dev libboost-program-options-dev libhdf5-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  openmpi-bin libopenmpi-dev
  python3
  pybind11-dev python3-dev python3-numpy python3-pytest python3-hypothesis
  nlohmann-json3-dev libjs-chart.js chromium-headless-shell
)

build_dir=build
build_type=Release
packages_only=0
targets=()
script_args=()
while (($# > 0)); do
  case "$1" in
    --build-dir | --build-type | --package | --target)
      if (($# < 2)); then
        echo "bootstrap: $1 needs a value" >&2
        exit 2
      fi
      case "$1" in
        --build-dir) build_dir="$2" ;;
        --build-type) build_type="$2" ;;
        --package) packages+=("$2") ;;
        --target) targets+=(--target "$2") ;;
      esac
      shift 2
      ;;
    --packages-only)
      packages_only=1
      shift
      ;;
    --)
      shift
      script_args=("$@")
      break
      ;;
    *)
      echo "bootstrap: unknown option '$1'" >&2
      exit 2
      ;;
  esac
done

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

if ((packages_only)); then
  exit 0
fi

# Split GRADLAB_CMAKE_ARGS on whitespace into separate arguments.
extra_args=()
read -r -a extra_args <<<"${GRADLAB_CMAKE_ARGS:-}"

# Reconfiguring is cheap and picks up changed options and new source files.
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type" "${extra_args[@]}" \
  "${script_args[@]}"
cmake --build "$build_dir" -j"$(nproc)" "${targets[@]}"
