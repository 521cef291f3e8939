#!/usr/bin/env bash
# make-gpu-bundle.sh — on a networked Debian 12 machine, gather what scripts/gpu-check.sh needs on an
# offline CUDA node into .deps/ (git-ignored): the patched Kokkos source bundle (2.4 MB) and a
# sysroot of Debian's GoogleTest, Google Benchmark and nlohmann-json (10 MB), and the original system's
# kv_canary references and test helpers (sglang 0.5.23, 0.3 MB) for the Python GPU tests.
set -euo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)  # also through a symlink
"$ROOT/scripts/setup-deps.sh" cpu > /dev/null
mkdir -p "$ROOT/.deps/sysroot"
cp "$("$ROOT/scripts/deps/setup-kokkos.sh" bundle | tail -1)" "$ROOT/.deps/"
for package in libgtest-dev libgmock-dev googletest libbenchmark-dev libbenchmark1debian nlohmann-json3-dev; do
  dpkg -L "$package" | while read -r file; do
    if [ -f "$file" ]; then
      mkdir -p "$ROOT/.deps/sysroot$(dirname "$file")"
      cp -a "$file" "$ROOT/.deps/sysroot$file"
    fi
  done
done
rm -rf "$ROOT/.deps/sglang-0.5.23"
cp -a "$("$ROOT/scripts/deps/setup-sglang-original.sh" | tail -1)" "$ROOT/.deps/sglang-0.5.23"
du -sh "$ROOT/.deps"
