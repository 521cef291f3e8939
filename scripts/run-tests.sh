#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# run-tests.sh — build kvcanary and run its tests (the README's test command).
#
#   scripts/run-tests.sh [EXTRA CMAKE ARGS...]
#   scripts/run-tests.sh --help      this text
#
# On a fresh Debian 12 machine (root, or a user with sudo): installs the dependencies
# (scripts/setup-deps.sh cpu: apt packages + Kokkos/Kokkos Kernels 3.4.01 in ~/.cache/kokkos-deps),
# configures build/ (Ninja, Release), builds it and runs every test with ctest: the unit tests on
# Serial and on OpenMP with 1 and 2 threads, and the kvcanary CLI tests, $JOBS at a time.
# Exits non-zero when anything fails. A second run only rebuilds what changed.
#
# Environment: KVCANARY_BUILD_DIR (default: build), JOBS (default: nproc).
set -euo pipefail
KV_SCRIPT=run-tests
# shellcheck source=lib/common.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh"  # the real location, also through a symlink

for arg in "$@"; do case $arg in -h|--help) kv_usage; exit 0 ;; esac; done  # at once, before any build

kv_readme_configure "$@"
kv_log "build ($JOBS jobs)"
kv_build "$KV_BUILD_DIR"
kv_log "test"
cd "$KV_BUILD_DIR"
ctest --output-on-failure -j "$JOBS"  # the OpenMP tests reserve their threads (PROCESSORS)
