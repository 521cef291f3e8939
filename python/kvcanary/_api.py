"""The Pythonic API: bound objects for the buffers a step reuses, and plan / verify / write / read_report.

Every array is used where it is (numpy on the host backends; torch CPU/CUDA tensors and CuPy arrays
through DLPack): nothing is converted or copied. A bound object checks its arrays once; a step call then
imports only that step's arrays. See docs/python.md.
"""

from __future__ import annotations

import operator
import sys
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from typing import Any, List, Optional, Sequence, Tuple

from . import _core


class KernelKind(IntEnum):
    """The launch tag stamped in field 0 of every ring row (SPEC-CANARY §1)."""

    HEAD_K_FULL = 0
    HEAD_V_FULL = 1
    TAIL_K_FULL = 2
    TAIL_V_FULL = 3
    SWEEP_K_FULL = 4
    SWEEP_V_FULL = 5
    HEAD_K_SWA = 6
    HEAD_V_SWA = 7
    TAIL_K_SWA = 8
    TAIL_V_SWA = 9
    SWEEP_K_SWA = 10
    SWEEP_V_SWA = 11


class FailReason(IntFlag):
    """fail_reason_bits of a ring row (SPEC-CANARY §1); OUT_OF_RANGE is kvcanary's addition."""

    VERIFY_CHAIN_HASH = 1
    VERIFY_POSITION = 2
    VERIFY_REAL_KV_HASH = 4
    WRITE_TOKEN = 8
    WRITE_POSITION = 16
    VERIFY_TOKEN = 32
    OUT_OF_RANGE = 64


class RealKvMode(IntEnum):
    NONE = 0
    PARTIAL = 1
    ALL = 2


# ---- allocation: numpy on the host unless asked, torch for torch devices ----

def _is_torch_device(device) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(device, torch.device)


def _empty(shape, dtype: str, device, library: Optional[str], fill: Optional[int] = None):
    """An array of `shape` and `dtype` ('int32' / 'int64' / 'uint8'); zero-filled unless `fill`."""
    if library is None:
        if _is_torch_device(device) or (isinstance(device, str) and device.startswith("cuda")):
            library = "torch"
        else:
            library = "numpy"
    value = 0 if fill is None else fill
    if library == "numpy":
        import numpy as np

        if device not in (None, "cpu"):
            raise ValueError(f"kvcanary: numpy arrays live on the host, got device={device!r}")
        return np.full(shape, value, dtype=dtype)
    if library == "torch":
        import torch

        return torch.full(shape, value, dtype=getattr(torch, dtype), device=device or "cpu")
    if library == "cupy":
        import cupy

        return cupy.full(shape, value, dtype=dtype)
    raise ValueError(f"kvcanary: library must be 'numpy', 'torch' or 'cupy', got {library!r}")


# ---- bound objects ----

class VerifyPlan:
    """SPEC §3: four int64 arrays of one length (the verify capacity) and two int32 scalars; optionally
    verify_identities, int64 of that length too (SPEC-CANARY §11.7: the plan then takes req_identities)."""

    __slots__ = ("verify_slot_indices", "verify_expected_tokens", "verify_expected_positions",
                 "verify_prev_slot_indices", "verify_num_valid", "enable", "verify_identities", "_handle")

    def __init__(self, *, verify_slot_indices, verify_expected_tokens, verify_expected_positions,
                 verify_prev_slot_indices, verify_num_valid, enable, verify_identities=None):
        self._handle = _core.VerifyPlanHandle(verify_slot_indices, verify_expected_tokens,
                                              verify_expected_positions, verify_prev_slot_indices,
                                              verify_num_valid, enable, verify_identities)
        self.verify_slot_indices = verify_slot_indices
        self.verify_expected_tokens = verify_expected_tokens
        self.verify_expected_positions = verify_expected_positions
        self.verify_prev_slot_indices = verify_prev_slot_indices
        self.verify_num_valid = verify_num_valid
        self.enable = enable
        self.verify_identities = verify_identities

    @classmethod
    def allocate(cls, capacity: int, *, with_identities: bool = False, device=None,
                 library: Optional[str] = None) -> "VerifyPlan":
        if capacity < 0:
            raise ValueError(f"kvcanary.VerifyPlan.allocate: capacity must be >= 0, got {capacity}")
        e = lambda: _empty((capacity,), "int64", device, library)  # noqa: E731
        return cls(verify_slot_indices=e(), verify_expected_tokens=e(), verify_expected_positions=e(),
                   verify_prev_slot_indices=e(), verify_num_valid=_empty((1,), "int32", device, library),
                   enable=_empty((1,), "int32", device, library),
                   verify_identities=e() if with_identities else None)

    @property
    def capacity(self) -> int:
        return self._handle.capacity


class WritePlan:
    """SPEC §3: write_offsets [capacity + 1], write_seed_slot_indices [capacity], int32 write_num_valid_reqs;
    optionally write_identities, int64 [capacity] (SPEC-CANARY §11.7: the plan then takes req_identities)."""

    __slots__ = ("write_offsets", "write_seed_slot_indices", "write_num_valid_reqs", "write_identities", "_handle")

    def __init__(self, *, write_offsets, write_seed_slot_indices, write_num_valid_reqs, write_identities=None):
        self._handle = _core.WritePlanHandle(write_offsets, write_seed_slot_indices, write_num_valid_reqs,
                                             write_identities)
        self.write_offsets = write_offsets
        self.write_seed_slot_indices = write_seed_slot_indices
        self.write_num_valid_reqs = write_num_valid_reqs
        self.write_identities = write_identities

    @classmethod
    def allocate(cls, capacity: int, *, with_identities: bool = False, device=None,
                 library: Optional[str] = None) -> "WritePlan":
        if capacity < 0:
            raise ValueError(f"kvcanary.WritePlan.allocate: capacity must be >= 0, got {capacity}")
        return cls(write_offsets=_empty((capacity + 1,), "int64", device, library),
                   write_seed_slot_indices=_empty((capacity,), "int64", device, library),
                   write_num_valid_reqs=_empty((1,), "int32", device, library),
                   write_identities=_empty((capacity,), "int64", device, library) if with_identities else None)

    @property
    def capacity(self) -> int:
        return self._handle.capacity


class PlanStatus:
    """SPEC §3 (kvcanary's addition): int32 input_error_bits and first_bad_row (-1 when none)."""

    __slots__ = ("input_error_bits", "first_bad_row", "_handle")

    def __init__(self, *, input_error_bits, first_bad_row):
        self._handle = _core.PlanStatusHandle(input_error_bits, first_bad_row)
        self.input_error_bits = input_error_bits
        self.first_bad_row = first_bad_row

    @classmethod
    def allocate(cls, *, device=None, library: Optional[str] = None) -> "PlanStatus":
        return cls(input_error_bits=_empty((1,), "int32", device, library),
                   first_bad_row=_empty((1,), "int32", device, library))


class PlanWorkspace:
    """Scratch of plan(), sized once for a maximum batch size (verify_offsets: max_batch_size + 1 int64)."""

    __slots__ = ("verify_offsets", "_handle")

    def __init__(self, *, verify_offsets):
        self._handle = _core.PlanWorkspaceHandle(verify_offsets)
        self.verify_offsets = verify_offsets

    @classmethod
    def allocate(cls, max_batch_size: int, *, device=None, library: Optional[str] = None) -> "PlanWorkspace":
        if max_batch_size < 0:
            raise ValueError(f"kvcanary.PlanWorkspace.allocate: max_batch_size must be >= 0, got {max_batch_size}")
        return cls(verify_offsets=_empty((max_batch_size + 1,), "int64", device, library))

    @property
    def max_batch_size(self) -> int:
        return self._handle.max_batch_size


class CanaryBuffer:
    """Canary records (SPEC-CANARY §1) over the caller's bytes: a 2-D array [num_slots, row] of any dtype whose
    rows hold >= 32 bytes, start 8-byte aligned and lie a multiple of 8 bytes apart (an engine's own buffer).
    Record s = (token, position, prev_hash, real_kv_hash) as four int64 at the start of row s."""

    __slots__ = ("records", "_handle")

    def __init__(self, records):
        self._handle = _core.CanaryBufferHandle(records)
        self.records = records

    @classmethod
    def allocate(cls, num_slots: int, *, stride_bytes: int = 32, device=None,
                 library: Optional[str] = None) -> "CanaryBuffer":
        if num_slots < 0:
            raise ValueError(f"kvcanary.CanaryBuffer.allocate: num_slots must be >= 0, got {num_slots}")
        return cls(_empty((num_slots, stride_bytes), "uint8", device, library))

    @property
    def num_slots(self) -> int:
        return self._handle.num_slots

    @property
    def stride_bytes(self) -> int:
        return self._handle.stride_bytes


class ViolationRing:
    """SPEC-CANARY §1: rows int64 [capacity, 8] filled once, int64 count (keeps growing) and run counters."""

    __slots__ = ("rows", "count", "slot_run_counter", "kernel_run_counter", "_handle", "_reported")

    def __init__(self, *, rows, count, slot_run_counter, kernel_run_counter):
        self._handle = _core.ViolationRingHandle(rows, count, slot_run_counter, kernel_run_counter)
        self.rows = rows
        self.count = count
        self.slot_run_counter = slot_run_counter
        self.kernel_run_counter = kernel_run_counter
        self._reported = 0

    @classmethod
    def allocate(cls, capacity: int, *, device=None, library: Optional[str] = None) -> "ViolationRing":
        if capacity < 0:
            raise ValueError(f"kvcanary.ViolationRing.allocate: capacity must be >= 0, got {capacity}")
        s = lambda: _empty((1,), "int64", device, library)  # noqa: E731
        return cls(rows=_empty((capacity, 8), "int64", device, library), count=s(), slot_run_counter=s(),
                   kernel_run_counter=s())

    @property
    def capacity(self) -> int:
        return self._handle.capacity


@dataclass(frozen=True)
class RealKvSource:
    """A paged KV tensor read as bytes [pages, row] (SPEC-CANARY §3); any dtype, rows packed."""

    array: Any
    page_size: int = 1
    bytes_per_token: int = 16
    read_bytes: int = 16


class RealKv:
    """Up to 4 real-KV sources folded into each record's real_kv_hash, in mode NONE / PARTIAL / ALL."""

    __slots__ = ("mode", "sources", "_handle")

    def __init__(self, *, mode=RealKvMode.NONE, sources: Sequence[RealKvSource] = ()):
        self.mode = RealKvMode(_integer(mode, "RealKv", "mode"))
        self.sources = tuple(sources)
        self._handle = _core.RealKvHandle(int(self.mode), [(s.array, _integer(s.page_size, "RealKv", "page_size"),
                                                       _integer(s.bytes_per_token, "RealKv", "bytes_per_token"),
                                                       _integer(s.read_bytes, "RealKv", "read_bytes"))
                                                      for s in self.sources])


def _integer(value, function: str, name: str, bits: int = 64) -> int:
    """An int argument as it is: any integer (int, numpy's, a 0-d integer tensor: operator.index), never a
    float or a string truncated or parsed; outside the C++ parameter's range is a ValueError."""
    if isinstance(value, bool):
        raise TypeError(f"kvcanary.{function}: {name} must be an int, got bool")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"kvcanary.{function}: {name} must be an int, got {type(value).__name__}") from None
    if not -2 ** (bits - 1) <= number < 2 ** (bits - 1):
        raise ValueError(f"kvcanary.{function}: {name} is {number}, outside int{bits}")
    return number


def _handle(value, cls, function: str, name: str):
    if isinstance(value, cls):
        return value._handle
    raise TypeError(f"kvcanary.{function}: {name} must be a kvcanary.{cls.__name__}, got {type(value).__name__}")


def _kind(value, function: str) -> int:
    if isinstance(value, str):
        try:
            return int(KernelKind[value])
        except KeyError:
            raise ValueError(f"kvcanary.{function}: kernel_kind {value!r} is not a launch tag") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"kvcanary.{function}: kernel_kind must be a KernelKind, got {type(value).__name__}")
    return int(value)


# ---- the stages ----

def plan(*, req_pool_indices, prefix_lens, extend_seq_lens, req_to_token, verify_plan: VerifyPlan,
         write_plan: WritePlan, status: PlanStatus, workspace: PlanWorkspace, swa_window_size: int = 0,
         full_to_swa_index_mapping=None, req_to_verify_expected_tokens=None,
         req_to_verify_expected_tokens_valid_lens=None, kv_token_id_vs_position_offset: int = 0,
         req_identities=None, algorithm: str = "default", backend: Optional[str] = None, stream=None) -> None:
    """Build the step's VerifyPlan and WritePlan (SPEC §4) into the bound outputs.

    req_identities (int64 [bs], SPEC-CANARY §11.7): each request's identity (0 = none), copied into the
    plans' verify_identities / write_identities; given exactly when both plans were allocated with_identities.

    Host arrays: runs on `backend` ('serial', 'openmp'; None = the build's default host backend) and has
    finished on return. CUDA arrays: enqueued on `stream` (None = the framework's current stream), no sync.
    Host-side errors raise ValueError / TypeError before anything is written; data errors go to `status`.
    """
    _core.plan(req_pool_indices, prefix_lens, extend_seq_lens, req_to_token,
               _handle(verify_plan, VerifyPlan, "plan", "verify_plan"),
               _handle(write_plan, WritePlan, "plan", "write_plan"),
               _handle(status, PlanStatus, "plan", "status"),
               _handle(workspace, PlanWorkspace, "plan", "workspace"),
               _integer(swa_window_size, "plan", "swa_window_size", 32), full_to_swa_index_mapping,
               req_to_verify_expected_tokens, req_to_verify_expected_tokens_valid_lens,
               _integer(kv_token_id_vs_position_offset, "plan", "kv_token_id_vs_position_offset", 32), req_identities,
               algorithm, backend, stream)


def _targets(buffers, kernel_kind, real_kv, function: str):
    if isinstance(buffers, CanaryBuffer):
        buffers, kinds, kvs = [buffers], [kernel_kind], [real_kv]
    else:
        buffers = list(buffers)
        kinds = list(kernel_kind) if isinstance(kernel_kind, (list, tuple)) else [kernel_kind] * len(buffers)
        kvs = list(real_kv) if isinstance(real_kv, (list, tuple)) else [real_kv] * len(buffers)
        if len(kinds) != len(buffers) or len(kvs) != len(buffers):
            raise ValueError(f"kvcanary.{function}: give one kernel_kind and one real_kv per buffer")
    return [(_handle(b, CanaryBuffer, function, "buffer"), _kind(k, function),
             None if r is None else _handle(r, RealKv, function, "real_kv")) for b, k, r in zip(buffers, kinds, kvs)]


def verify(*, verify_plan: VerifyPlan, buffer, ring: ViolationRing, kernel_kind=KernelKind.HEAD_K_FULL,
           check_expected_token: bool = True, check_slot_zero: bool = True, check_freed: bool = True,
           real_kv: Optional[RealKv] = None, algorithm: str = "default",
           backend: Optional[str] = None, stream=None) -> None:
    """Check every entry of the plan against one canary buffer, or a list of up to 4 sharing the plan
    (then kernel_kind and real_kv may be lists too); violations go to `ring` (SPEC-CANARY §5).
    check_slot_zero / check_freed are the v2 checks of SPEC-CANARY §11.3 / §11.2, on as in C++; turn
    check_slot_zero off for an engine whose slot 0 holds real tokens (it is not a padding slot).
    A plan with verify_identities expects each entry's chain link masked by its request's identity
    (SPEC-CANARY §11.7): a record another identity wrote fails the chain check (bit 1)."""
    _core.verify(_handle(verify_plan, VerifyPlan, "verify", "verify_plan"),
                 _targets(buffer, kernel_kind, real_kv, "verify"),
                 _handle(ring, ViolationRing, "verify", "ring"), bool(check_expected_token),
                 bool(check_slot_zero), bool(check_freed), algorithm, backend, stream)


def write(*, write_plan: WritePlan, input_ids, positions, out_cache_loc, buffer, ring: ViolationRing,
          chain_position_assert, expected_input_ids=None, expected_positions=None,
          kernel_kind=KernelKind.HEAD_K_FULL, real_kv: Optional[RealKv] = None, algorithm: str = "default",
          backend: Optional[str] = None, stream=None) -> None:
    """Stamp the step's tokens into one canary buffer, or a list of up to 4 sharing the plan and the tokens
    (the K and V halves: read once; then kernel_kind and real_kv may be lists too) (SPEC-CANARY §4).
    Token arrays: int64, or all int32. chain_position_assert: an int32 scalar array (a device flag, so a
    captured graph can toggle it). A plan with write_identities masks every chain link a request stores
    with its identity's mask (SPEC-CANARY §11.7; identity 0 stores the original's records)."""
    _core.write(_handle(write_plan, WritePlan, "write", "write_plan"), input_ids, positions, out_cache_loc,
                expected_input_ids, expected_positions, chain_position_assert,
                _targets(buffer, kernel_kind, real_kv, "write"), _handle(ring, ViolationRing, "write", "ring"),
                algorithm, backend, stream)


class CanaryViolation(RuntimeError):
    """Raised by read_report(mode='raise') when the ring holds new violations; carries the report."""

    def __init__(self, report: "Report"):
        self.report = report
        self.rows = report.rows
        self.lines = report.lines
        super().__init__("kvcanary: canary violations: " + report.summary + "".join("\n" + l for l in report.lines))


@dataclass(frozen=True)
class Report:
    """One read of a ring (SPEC-CANARY §7): the kept rows and their lines, and the counts."""

    rows: List[Tuple[int, ...]]
    lines: List[str]
    count: int
    capacity: int
    overflowed: bool
    lost_to_overflow: int
    first_row: int
    rows_read: int
    dropped: int
    slot_run_counter: int
    kernel_run_counter: int
    summary: str = field(repr=False)

    @property
    def next_row(self) -> int:
        """The already_reported of the next read of the same ring."""
        return self.first_row + self.rows_read


def read_report(ring: ViolationRing, *, already_reported: Optional[int] = None, keep_never_written: bool = False,
                mode: str = "none", stream=None) -> Report:
    """Copy the ring to the host (this waits: call it between steps, never inside a graph capture) and
    report rows [already_reported, min(count, capacity)). already_reported=None continues after the last
    read_report of this ring object. mode: 'none' returns; 'log' prints each line to stderr; 'raise'
    raises CanaryViolation when there are rows."""
    if mode not in ("none", "log", "raise"):
        raise ValueError(f"kvcanary.read_report: mode must be 'none', 'log' or 'raise', got {mode!r}")
    handle = _handle(ring, ViolationRing, "read_report", "ring")
    first = ring._reported if already_reported is None else _integer(already_reported, "read_report", "already_reported")
    report = Report(**_core.read_report(handle, first, bool(keep_never_written), stream))
    ring._reported = report.next_row
    if mode == "log":
        for line in report.lines:
            print(line, file=sys.stderr)
    elif mode == "raise" and report.rows:
        raise CanaryViolation(report)
    return report
