#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# run-demo.sh — build the kvcanary tool and run its main job: the engine simulator with every fault
# class injected (the README's main command).
#
#   scripts/run-demo.sh [SIMULATE ARGS...]   e.g. --steps 5000, --backend serial, --faults rogue_write, --json
#   scripts/run-demo.sh --help               this text (the tool's own: build/src/cli/kvcanary --help)
#
# Installs the dependencies (scripts/setup-deps.sh cpu), configures build/ exactly as
# scripts/run-tests.sh does, builds only the kvcanary-cli target (the executable `kvcanary`) and runs
# `build/src/cli/kvcanary simulate --steps 3000 --swa 64 --spec-decode` on the default Kokkos backend: a simulated inference
# engine runs plan -> verify -> write every step, every KV-cache fault class is injected, and the report
# says per class what was caught, how fast, what was missed and what the canary cost. Exit status 1
# when a detectable fault was missed or a violation was left unexplained. Only the report goes to
# stdout; the dependency, CMake and build logs go to stderr. (`kvcanary demo` times the plan alone.)
#
# Environment: KVCANARY_BUILD_DIR (default: build), JOBS (default: nproc).
set -euo pipefail
KV_SCRIPT=run-demo
# shellcheck source=lib/common.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh"  # the real location, also through a symlink


for arg in "$@"; do case $arg in -h|--help) kv_usage; exit 0 ;; esac; done  # at once, before any build

# shellcheck disable=SC2119  # this script's arguments are not CMake arguments
kv_readme_configure
kv_log "build kvcanary ($JOBS jobs)"
kv_build "$KV_BUILD_DIR" kvcanary-cli
tool=$KV_BUILD_DIR/src/cli/kvcanary
[ -x "$tool" ] || kv_die "$tool was not built"
kv_log "$tool simulate --steps 3000 --swa 64 --spec-decode $*"
exec "$tool" simulate --steps 3000 --swa 64 --spec-decode "$@"
