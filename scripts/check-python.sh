#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# check-python.sh — build and install the Python package from this checkout and run its tests.
#
#   scripts/check-python.sh [PYTEST ARGS...]
#   scripts/check-python.sh --help      this text
#
# 1. Dependencies: the C++ ones (scripts/setup-deps.sh cpu: the PIC Kokkos in ~/.cache/kokkos-deps), and
#    Debian's python3-venv, python3-dev, python3-numpy, python3-pytest and python3-torch (torch 1.13,
#    CPU) for /usr/bin/python3, installed only when missing;
# 2. a virtual environment build-py/venv over Debian's python3 (--system-site-packages: numpy, pytest,
#    torch) with nanobind and scikit-build-core from PyPI (the build backend; kvcanary needs neither
#    at run time);
# 3. the original system (sglang 0.5.23, its kv_canary references and test helpers) in a cache
#    (scripts/deps/setup-sglang-original.sh);
# 4. `pip install --no-build-isolation .` into that environment (the extension builds in build/py-*/);
# 5. pytest over unit_tests/python: the API on numpy over every host backend, the SGLang drop-in, and the
#    byte-for-byte differential suite against the original (KVCANARY_DIFF_CASES cases per stage, default
#    1,000). GPU tests are skipped here (no CUDA device).
# Environment: JOBS (default: nproc), KVCANARY_DIFF_CASES.
set -euo pipefail
KV_SCRIPT=check-python
# shellcheck source=lib/common.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh"

for arg in "$@"; do case $arg in -h|--help) kv_usage; exit 0 ;; esac; done

kv_log "dependencies"
KVCANARY_EXTRA_PACKAGES=$KV_PYTHON_PACKAGES kv_deps cpu
kv_python_env
VENV=$(dirname "$(dirname "$KV_PYTHON")")

kv_log "the original system (sglang 0.5.23)"
SGLANG_ROOT=$("$KV_ROOT/scripts/deps/setup-sglang-original.sh" "$VENV/bin/pip")

kv_pip_install_self "$VENV/bin/pip"

kv_log "pytest"
cd "$KV_ROOT/unit_tests/python"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} KVCANARY_SGLANG_ROOT=$SGLANG_ROOT KVCANARY_REQUIRE_ORIGINAL=1 \
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@" .
