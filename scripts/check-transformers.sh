#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# check-transformers.sh — kvcanary on HF transformers' real continuous-batching engine (CPU, tiny random-weight
# models built from a config, no download of weights): pytest unit_tests/python/test_transformers_integration.py,
# and the torch-tensor tests on torch 2.11.
#
#   scripts/check-transformers.sh [PYTEST ARGS...]
#   scripts/check-transformers.sh --help      this text
#
# 1. A virtual environment build-py/venv-hf over Debian's python3 (no system packages: Debian's torch is 1.13)
#    with torch 2.11.0 and transformers 5.17.0 (the GPU machine's versions) from PyPI. PyPI's torch wheels are
#    CUDA builds; when the machine's CUDA 13 toolkit provides cudart/cublas/cudnn (ldconfig), only the torch
#    wheel and 3 small nvidia wheels are installed (--no-deps, ~760 MB); otherwise the full torch install.
#    psutil is required (continuous batching sizes its cache from it). docs/transformers.md has the numbers.
# 2. `pip install --no-build-isolation .` into it (the extension builds in build/py-*/, shared with
#    scripts/check-python.sh);
# 3. pytest: output bit-identical with and without the canary (Llama, Mistral, Qwen2 mixed), forks, a manager,
#    six engine faults planted in transformers' objects and caught in the step they become readable; and,
#    with this torch's DLPack C exchange table (torch >= 2.10), the array rules on torch tensors and the
#    SGLang drop-in (test_torch_arrays.py, test_sglang_dropin.py; check-python.sh runs them on torch 1.13).
# Environment: JOBS (default: nproc), KVCANARY_TORCH_FULL=1 forces the full torch install.
set -euo pipefail
KV_SCRIPT=check-transformers
# shellcheck source=lib/common.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh"

for arg in "$@"; do case $arg in -h|--help) kv_usage; exit 0 ;; esac; done

TORCH=2.11.0
TRANSFORMERS=5.17.0
kv_log "dependencies"
kv_deps cpu
dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q "install ok installed" || {
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >&2
}

VENV=$KV_ROOT/build-py/venv-hf
PIP=("$VENV/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir)
if ! "$VENV/bin/python" -c "import torch, transformers, psutil, pytest, nanobind, scikit_build_core
assert torch.__version__.startswith('$TORCH') and transformers.__version__ == '$TRANSFORMERS'" 2>/dev/null; then
  rm -rf "$VENV"
  kv_log "virtual environment $VENV: torch $TORCH, transformers $TRANSFORMERS"
  /usr/bin/python3 -m venv "$VENV"
  start=$(date +%s)
  if [ "${KVCANARY_TORCH_FULL:-0}" != 1 ] && ldconfig -p | grep -q 'libcudart.so.13' \
     && ldconfig -p | grep -q 'libcudnn.so.9'; then
    # the toolkit's CUDA libraries are found by the loader; torch only misses these three
    "${PIP[@]}" --no-deps "torch==$TORCH" nvidia-cufile==1.15.1.6 nvidia-cusparselt-cu13==0.8.0 \
      nvidia-nvshmem-cu13==3.4.5 >&2
    "${PIP[@]}" filelock typing-extensions sympy networkx jinja2 fsspec >&2
  else
    "${PIP[@]}" "torch==$TORCH" >&2
  fi
  "${PIP[@]}" numpy psutil pytest "transformers==$TRANSFORMERS" nanobind==3.1.0 scikit-build-core==1.1.2 >&2
  kv_log "installed in $(( $(date +%s) - start )) s"
  "$VENV/bin/python" -c "import torch; (torch.randn(2, 2) @ torch.randn(2, 2)).sum()" \
    || kv_die "torch $TORCH does not run in $VENV"
fi

kv_pip_install_self "$VENV/bin/pip"

kv_log "pytest"
cd "$KV_ROOT/unit_tests/python"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} \
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@" test_transformers_integration.py test_torch_arrays.py \
    test_sglang_dropin.py
