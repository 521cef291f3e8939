#!/usr/bin/env bash
# setup-deps.sh — install everything kvcanary needs on a Debian 12 machine, idempotently.
#
#   scripts/setup-deps.sh [cpu|cuda]   (default cpu)
#
# 1. apt packages (compiler toolchain, CMake, Ninja, GoogleTest, Google Benchmark, nlohmann-json),
#    installed only when one is missing, so a second run touches neither the network nor dpkg;
# 2. Kokkos 3.4.01 + Kokkos Kernels 3.4.01 built into a cache prefix by scripts/deps/setup-kokkos.sh
#    (a stamp file makes the second run a no-op).
# Prints the Kokkos prefix as its last line. KVCANARY_EXTRA_PACKAGES: more apt packages to install the same way.
set -euo pipefail
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)  # also through a symlink
FLAVOUR=${1:-cpu}
PACKAGES=(g++ make cmake ninja-build git xz-utils patch ca-certificates debian-archive-keyring
          libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev python3)
# More apt packages a caller needs (scripts/check-python.sh: Debian's python3-torch and friends).
read -r -a extra <<< "${KVCANARY_EXTRA_PACKAGES:-}"
PACKAGES+=("${extra[@]}")

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "[setup-deps] installing: ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

"$HERE/deps/setup-kokkos.sh" "$FLAVOUR" >&2
prefix=${KOKKOS_DEPS_PREFIX:-$HOME/.cache/kokkos-deps}/kokkos-3.4.01-$([ "$FLAVOUR" = cuda ] && echo cuda-sm90 || echo cpu)
echo "$prefix"
