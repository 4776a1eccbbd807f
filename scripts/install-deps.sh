#!/usr/bin/env bash
# Installs the Debian packages kairos builds and tests with, only those that are missing:
# the core's list below plus every plugins/*/debian-packages.txt (one package a line, # comments),
# plus any further lists given as arguments (benchmarks/sampling/debian-packages.txt, say). Then
# the browser tests' npm packages (plugins/runtime/tests/browser), when missing or not as pinned.
# Usage: scripts/install-deps.sh [extra-list.txt ...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(
  g++ cmake ninja-build pkg-config            # toolchain
  libboost-dev libfmt-dev nlohmann-json3-dev  # core: Boost.Hana, fmt, nlohmann_json
  doctest-dev libbenchmark-dev python3        # tests (python3 drives the end-to-end ones), benchmarks
  clang-format-14                             # the style test (.clang-format)
)
for list in "$root"/plugins/*/debian-packages.txt "$@"; do
  [ -f "$list" ] || continue
  while read -r package _; do
    [[ -z "$package" || "$package" == \#* ]] || packages+=("$package")
  done < "$list"
done
command -v npm >/dev/null || packages+=(npm)  # for the browser tests' packages, below

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[kairos] installing missing Debian packages: ${missing[*]}"
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    # A fresh Debian has no sudo: then the one thing to do is say what root must run.
    if ! command -v sudo >/dev/null; then
      echo "[kairos] not root and no sudo here; as root, run: apt-get install ${missing[*]}" >&2
      exit 1
    fi
    as_root=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# speedscope's app, which the browser tests open kairos's outputs in, at its pinned version.
browser="$root/plugins/runtime/tests/browser"
wanted=$(node -p "require('$browser/package.json').dependencies.speedscope")
installed=$(node -p "require('$browser/node_modules/speedscope/package.json').version" 2>/dev/null || true)
if [ "$installed" != "$wanted" ]; then
  echo "[kairos] installing the browser tests' npm packages (speedscope $wanted): npm ci in $browser"
  (cd "$browser" && npm ci --no-audit --no-fund)
fi
