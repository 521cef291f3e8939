"""kvcanary: a whole KV-cache canary for LLM inference engines (plan -> verify -> write -> report).

Importing kvcanary starts nothing (engines fork after import): Kokkos starts on the first call, or on
``kvcanary.initialize(device=...)``, and stops at interpreter exit. ``kvcanary.Canary`` is the whole runtime
(plan, verify, write and the report pump of every buffer group, per step). Arrays are used in place, never copied
(numpy, torch CPU/CUDA, CuPy). ``kvcanary.sglang`` is a drop-in for SGLang's kv_canary launchers.
"""

from __future__ import annotations

import atexit as _atexit
import sys as _sys
from typing import Optional

from . import _core
from ._api import (  # noqa: F401
    CanaryBuffer,
    CanaryViolation,
    FailReason,
    KernelKind,
    PlanStatus,
    PlanWorkspace,
    RealKv,
    RealKvMode,
    RealKvSource,
    Report,
    VerifyPlan,
    ViolationRing,
    WritePlan,
    plan,
    read_report,
    verify,
    write,
)
from ._canary import (  # noqa: F401
    CachedPrefixes,
    Canary,
    CanaryConfig,
    CanaryNotRunningError,
    Capacities,
    EngineDimensions,
    ForwardBatch,
    ForwardTokens,
    GroupArrays,
    RuntimeReport,
)

__all__ = [
    "initialize", "finalize", "is_initialized", "backends", "prepare",
    "plan", "verify", "write", "read_report",
    "VerifyPlan", "WritePlan", "PlanStatus", "PlanWorkspace", "CanaryBuffer", "ViolationRing",
    "RealKv", "RealKvSource", "RealKvMode", "KernelKind", "FailReason", "Report", "CanaryViolation",
    "Canary", "CanaryConfig", "EngineDimensions", "Capacities", "ForwardBatch", "ForwardTokens", "CachedPrefixes",
    "GroupArrays", "RuntimeReport", "CanaryNotRunningError",
]


def initialize(device=None, *, num_threads: Optional[int] = None) -> None:
    """Start Kokkos now (else the first call does). device: a CUDA device index or torch.device (CUDA
    builds; default: the arrays' device at the first call); num_threads: host threads (default: the
    environment's). A second call is a no-op; a call after finalize() raises RuntimeError."""
    index = -1
    if device is not None:
        index = getattr(device, "index", device)
        if index is None:
            index = -1
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"kvcanary.initialize: device must be an int or a torch.device, got {device!r}")
    _core.initialize(index, -1 if num_threads is None else int(num_threads))


def finalize() -> None:
    """Stop Kokkos (also done at exit). Any later call raises RuntimeError."""
    _core.finalize()


def is_initialized() -> bool:
    return _core.is_initialized()


def backends() -> list:
    """The Kokkos backends of this build, e.g. ['serial', 'openmp'] or ['serial', 'cuda']."""
    return list(_core.backends())


def prepare(stream=None, *, device=None) -> None:
    """Make kvcanary ready to be captured on a CUDA stream (None: the current one of `device`): creates the
    stream's execution-space instance. One eager plan/verify/write on that stream does the same and also
    makes the stages' first launches; do one of them before torch.cuda.graph capture."""
    from . import _streams

    index = None if device is None else getattr(device, "index", device)
    if index is None:  # torch's current device when torch is loaded, else device 0
        torch = _sys.modules.get("torch")
        index = torch.cuda.current_device() if torch is not None and torch.cuda.is_available() else 0
    _core.prepare_stream(int(index), _streams.resolve(stream, int(index)))


# Handlers run last-registered-first: this one runs before those of anything imported earlier (torch).
_atexit.register(_core.finalize)
