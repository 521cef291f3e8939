"""Drop-in for SGLang's kv_canary launchers (sglang.kernels.ops.kv_canary, sglang 0.5.23).

An engine that uses the original switches by changing its imports to ``kvcanary.sglang``: the same public
names, the same keyword-only signatures, the same tensors (torch, CPU or CUDA), the same bytes. Where
kvcanary's SPEC deliberately differs (docs/python.md, "The SGLang drop-in"):

* no batch-size limit (the original's CUDA plan stops at 4096 requests; SPEC §4 "No limit on bs");
* a bad plan row (pool row outside req_to_token, prefix past its width, ...) contributes nothing and is
  reported by ``last_plan_status()`` instead of being read out of bounds (SPEC §4);
* a LUT value index past the LUT is clamped (SPEC §4 "T"), where the original's reference raises;
* a slot, seed or predecessor outside the canary buffer gives an OUT_OF_RANGE (64) ring row instead of an
  out-of-bounds access (SPEC-CANARY §4, §5); ``FailReason.OUT_OF_RANGE`` names it;
* real-KV sources are checked against the canary buffer's slot count whatever the mode (SPEC-CANARY §3).

Everything runs on the tensors in place; CUDA calls run on torch's current stream and can be captured in
a ``torch.cuda.graph`` after one eager call on the capture stream.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import Final, Optional

import torch

from . import _api

# ---- consts (sglang.kernels.ops.kv_canary.consts) ----

CANARY_CHAIN_ANCHOR: Final[int] = 0xC0FFEE1234567890
REQ_POOL_IDX_PADDING: Final[int] = 0
TOKEN_TO_KV_SLOT_PADDING: Final[int] = 0

CANARY_FIELDS_PER_SLOT: Final[int] = 4
CANARY_FIELD_TOKEN: Final[int] = 0
CANARY_FIELD_POSITION: Final[int] = 1
CANARY_FIELD_PREV_HASH: Final[int] = 2
CANARY_FIELD_REAL_KV_HASH: Final[int] = 3
CANARY_SLOT_BYTES: Final[int] = CANARY_FIELDS_PER_SLOT * 8

VIOLATION_FIELDS: Final[int] = 8
VIOLATION_FIELD_KERNEL_KIND: Final[int] = 0
VIOLATION_FIELD_SLOT_IDX: Final[int] = 1
VIOLATION_FIELD_POSITION: Final[int] = 2
VIOLATION_FIELD_STORED_TOKEN: Final[int] = 3
VIOLATION_FIELD_EXPECTED_TOKEN: Final[int] = 4
VIOLATION_FIELD_STORED_CHAIN_HASH: Final[int] = 5
VIOLATION_FIELD_EXPECTED_AUX: Final[int] = 6
VIOLATION_FIELD_FAIL_REASON_BITS: Final[int] = 7

MAX_REAL_KV_SOURCES: Final[int] = 4
REAL_KV_SOURCE_FIELDS_PER_ENTRY: Final[int] = 3
REAL_KV_SOURCE_FIELD_PAGE_SIZE: Final[int] = 0
REAL_KV_SOURCE_FIELD_NUM_BYTES_PER_TOKEN: Final[int] = 1
REAL_KV_SOURCE_FIELD_READ_BYTES: Final[int] = 2


class FailReason(IntFlag):
    VERIFY_CHAIN_HASH_MISMATCH = 1 << 0
    VERIFY_POSITION_MISMATCH = 1 << 1
    VERIFY_REAL_KV_HASH_MISMATCH = 1 << 2
    WRITE_TOKEN_MISMATCH = 1 << 3
    WRITE_POSITION_MISMATCH = 1 << 4
    VERIFY_TOKEN_MISMATCH = 1 << 5
    OUT_OF_RANGE = 1 << 6  # kvcanary: an index outside the array it indexes (SPEC-CANARY §1)


class RealKvHashMode(IntEnum):
    NONE = 0
    PARTIAL = 1
    ALL = 2


# The original's name for kvcanary's KernelKind: the same tags and values (SPEC-CANARY §1).
CanaryLaunchTag = IntEnum("CanaryLaunchTag", [(k.name, int(k)) for k in _api.KernelKind], module=__name__)


_U64: Final[int] = (1 << 64) - 1


def splitmix64(value: int) -> int:
    """SPEC-CANARY §2 (the finaliser only), on unsigned 64-bit values."""
    x = value & _U64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _U64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _U64
    return x ^ (x >> 31)


def splitmix64_mix3(a: int, b: int, c: int) -> int:
    return splitmix64(splitmix64(splitmix64(a) ^ (b & _U64)) ^ (c & _U64))


# ---- the original's dataclasses ----

@dataclass(frozen=True, slots=True, kw_only=True)
class RealKvSource:
    """A paged KV tensor [rows, row] (any dtype; rows packed, stepped by stride(0)); a slot's bytes are
    row slot // page_size, bytes (slot % page_size) * num_bytes_per_token onwards (SPEC-CANARY §3)."""

    tensor: torch.Tensor
    page_size: int
    num_bytes_per_token: int
    read_bytes: int

    def __post_init__(self) -> None:
        where = "kv-canary: RealKvSource"
        if self.page_size < 1:
            raise ValueError(f"{where}.page_size is {self.page_size}, must be >= 1")
        if self.num_bytes_per_token <= 0 or self.num_bytes_per_token % 16:
            raise ValueError(f"{where}.num_bytes_per_token is {self.num_bytes_per_token}, "
                             "must be a positive multiple of 16")
        if not (0 < self.read_bytes <= self.num_bytes_per_token) or self.read_bytes % 16:
            raise ValueError(f"{where}.read_bytes is {self.read_bytes}, must be a positive multiple of 16 "
                             f"<= num_bytes_per_token ({self.num_bytes_per_token})")
        if self.tensor.ndim < 2:
            raise ValueError(f"{where}.tensor has shape {tuple(self.tensor.shape)}, must be at least 2-D")
        item = self.tensor.element_size()
        if (self.tensor.stride(0) * item) % 16:
            raise ValueError(f"{where}.tensor rows are {self.tensor.stride(0) * item} bytes apart, "
                             "must be a multiple of 16")
        if self.tensor.shape[1] * item < self.page_size * self.num_bytes_per_token:
            raise ValueError(f"{where}.tensor rows hold {self.tensor.shape[1] * item} bytes, page_size "
                             f"{self.page_size} x num_bytes_per_token {self.num_bytes_per_token} needs "
                             f"{self.page_size * self.num_bytes_per_token}")


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyOrWriteContext:
    canary_buf: torch.Tensor  # uint8 [num_slots, slot_stride_bytes]
    kernel_kind: CanaryLaunchTag
    violation_ring: torch.Tensor  # int64 [capacity, 8]
    violation_write_index: torch.Tensor  # int32 [1] (int64 accepted)
    slot_run_counter: torch.Tensor  # int64 [1]
    kernel_run_counter: torch.Tensor  # int64 [1]
    real_kv_sources: tuple
    real_kv_hash_mode: RealKvHashMode
    enable_chain_position_assert: torch.Tensor  # int32 [1]


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyPlan:
    verify_slot_indices: torch.Tensor
    verify_expected_tokens: torch.Tensor
    verify_expected_positions: torch.Tensor
    verify_prev_slot_indices: torch.Tensor
    verify_num_valid: torch.Tensor
    enable: torch.Tensor

    @staticmethod
    def allocation_bytes(verify_capacity: int) -> int:
        return 4 * verify_capacity * 8 + 2 * 4

    @classmethod
    def allocate(cls, *, verify_capacity: int, device: torch.device) -> "VerifyPlan":
        if verify_capacity <= 0:
            raise ValueError(f"kv-canary: VerifyPlan verify_capacity must be positive, got {verify_capacity}")
        e = lambda: torch.empty(verify_capacity, dtype=torch.int64, device=device)  # noqa: E731
        return cls(verify_slot_indices=e(), verify_expected_tokens=e(), verify_expected_positions=e(),
                   verify_prev_slot_indices=e(),
                   verify_num_valid=torch.empty(1, dtype=torch.int32, device=device),
                   enable=torch.ones(1, dtype=torch.int32, device=device))

    def zero_for_testing_(self) -> "VerifyPlan":
        self.verify_slot_indices.zero_()
        self.verify_expected_tokens.fill_(-1)
        self.verify_expected_positions.zero_()
        self.verify_prev_slot_indices.zero_()
        self.verify_num_valid.zero_()
        self.enable.zero_()
        return self


@dataclass(frozen=True, slots=True, kw_only=True)
class WritePlan:
    write_offsets: torch.Tensor
    write_seed_slot_indices: torch.Tensor
    write_num_valid_reqs: torch.Tensor

    @staticmethod
    def allocation_bytes(write_req_capacity: int) -> int:
        return (2 * write_req_capacity + 1) * 8 + 4

    @classmethod
    def allocate(cls, *, write_req_capacity: int, device: torch.device) -> "WritePlan":
        if write_req_capacity <= 0:
            raise ValueError(
                f"kv-canary: WritePlan write_req_capacity must be positive, got {write_req_capacity}")
        return cls(write_offsets=torch.empty(write_req_capacity + 1, dtype=torch.int64, device=device),
                   write_seed_slot_indices=torch.empty(write_req_capacity, dtype=torch.int64, device=device),
                   write_num_valid_reqs=torch.empty(1, dtype=torch.int32, device=device))

    def zero_for_testing_(self) -> "WritePlan":
        self.write_offsets.zero_()
        self.write_seed_slot_indices.zero_()
        self.write_num_valid_reqs.zero_()
        return self


# ---- bound kvcanary objects over the original's tensors, made once per object ----

class _Bound:
    """id(object) -> (object, bound kvcanary objects); holding the object keeps its id unique."""

    def __init__(self, size: int = 256):
        self._entries: "OrderedDict" = OrderedDict()
        self._size = size

    def get(self, key, owner, make):
        entry = self._entries.get(key)
        if entry is not None and entry[0] is owner:
            self._entries.move_to_end(key)
            return entry[1]
        value = make()
        self._entries[key] = (owner, value)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return value


_bound = _Bound()


class _StreamState:
    """Per (device, stream): the plan's status and workspace (the original has none) and the int64 shadow
    of an int32 violation_write_index (kvcanary's ring count is int64; SPEC-CANARY §1)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.status = _api.PlanStatus.allocate(device=device, library="torch")
        self.workspace = _api.PlanWorkspace.allocate(4096, device=device, library="torch")
        self.count = torch.zeros(1, dtype=torch.int64, device=device)

    def workspace_for(self, batch_size: int) -> _api.PlanWorkspace:
        if batch_size > self.workspace.max_batch_size:
            if self.device.type == "cuda" and torch.cuda.is_current_stream_capturing():
                raise RuntimeError(f"kvcanary.sglang: batch size {batch_size} is larger than any before this "
                                   "CUDA-graph capture; run one eager step at the captured batch size first")
            self.workspace = _api.PlanWorkspace.allocate(max(batch_size, 2 * self.workspace.max_batch_size),
                                                         device=self.device, library="torch")
        return self.workspace


_states: dict = {}


def _state(device: torch.device) -> _StreamState:
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (device.type, device.index, stream)
    state = _states.get(key)
    if state is None:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError("kvcanary.sglang: first use of this CUDA stream during graph capture; run one "
                               "eager plan/verify/write on it before capturing")
        state = _states[key] = _StreamState(device)
    return state


def last_plan_status(device: Optional[torch.device] = None) -> tuple:
    """(input_error_bits, first_bad_row) of the last plan on `device`'s current stream (SPEC §4); syncs."""
    state = _state(torch.device(device) if device is not None else torch.device("cpu"))
    return int(state.status.input_error_bits[0].item()), int(state.status.first_bad_row[0].item())


def _verify_plan(p: VerifyPlan) -> _api.VerifyPlan:
    return _bound.get(("v", id(p)), p, lambda: _api.VerifyPlan(
        verify_slot_indices=p.verify_slot_indices, verify_expected_tokens=p.verify_expected_tokens,
        verify_expected_positions=p.verify_expected_positions, verify_prev_slot_indices=p.verify_prev_slot_indices,
        verify_num_valid=p.verify_num_valid, enable=p.enable))


def _write_plan(p: WritePlan) -> _api.WritePlan:
    return _bound.get(("w", id(p)), p, lambda: _api.WritePlan(
        write_offsets=p.write_offsets, write_seed_slot_indices=p.write_seed_slot_indices,
        write_num_valid_reqs=p.write_num_valid_reqs))


def _context(c: VerifyOrWriteContext, state: _StreamState):
    """(buffer, ring, real_kv, count shadow or None) of a context on a stream."""

    def make():
        index = c.violation_write_index
        shadow = state.count if index.dtype == torch.int32 else None
        ring = _api.ViolationRing(rows=c.violation_ring, count=index if shadow is None else shadow,
                                  slot_run_counter=c.slot_run_counter, kernel_run_counter=c.kernel_run_counter)
        sources = tuple(c.real_kv_sources)
        if len(sources) > MAX_REAL_KV_SOURCES:
            raise ValueError(f"kv-canary: at most {MAX_REAL_KV_SOURCES} RealKvSource entries, got {len(sources)}")
        real_kv = _api.RealKv(mode=int(c.real_kv_hash_mode), sources=[
            _api.RealKvSource(array=s.tensor, page_size=s.page_size, bytes_per_token=s.num_bytes_per_token,
                              read_bytes=s.read_bytes) for s in sources]) if sources else None
        return _api.CanaryBuffer(c.canary_buf), ring, real_kv, shadow

    return _bound.get(("c", id(c), id(state)), c, make)


def _run_with_count(shadow: Optional[torch.Tensor], index: torch.Tensor, call) -> None:
    # An int32 violation_write_index runs through the stream's int64 shadow: two stream-ordered copies,
    # capturable like the call itself.
    if shadow is None:
        call()
        return
    shadow.copy_(index)
    call()
    index.copy_(shadow)


# ---- the launchers ----

def launch_canary_plan_kernels(
    *,
    verify_plan_out: VerifyPlan,
    write_plan_out: WritePlan,
    req_pool_indices: torch.Tensor,
    prefix_lens: torch.Tensor,
    extend_seq_lens: torch.Tensor,
    req_to_token: torch.Tensor,
    swa_window_size: int,
    full_to_swa_index_mapping: Optional[torch.Tensor],
    verify_capacity: int,
    req_to_verify_expected_tokens: Optional[torch.Tensor],
    req_to_verify_expected_tokens_valid_lens: Optional[torch.Tensor],
    kv_token_id_vs_position_offset: int,
) -> None:
    """Fill verify_plan_out and write_plan_out for one step (SPEC §4), on any batch size."""
    if swa_window_size > 0 and full_to_swa_index_mapping is None:
        raise ValueError("kv-canary: launch_canary_plan_kernels requires full_to_swa_index_mapping when "
                         "swa_window_size > 0")
    capacity = int(verify_plan_out.verify_slot_indices.shape[0])
    if verify_capacity != capacity:
        raise ValueError(f"kv-canary: launch_canary_plan_kernels verify_capacity={verify_capacity} does not "
                         f"match verify_plan_out.verify_slot_indices.shape[0]={capacity}")
    if req_to_verify_expected_tokens is not None and req_to_verify_expected_tokens_valid_lens is None:
        raise ValueError("kv-canary: launch_canary_plan_kernels requires req_to_verify_expected_tokens_valid_lens "
                         "when req_to_verify_expected_tokens is set")
    state = _state(verify_plan_out.verify_slot_indices.device)
    _api.plan(req_pool_indices=req_pool_indices, prefix_lens=prefix_lens, extend_seq_lens=extend_seq_lens,
              req_to_token=req_to_token, verify_plan=_verify_plan(verify_plan_out),
              write_plan=_write_plan(write_plan_out), status=state.status,
              workspace=state.workspace_for(int(req_pool_indices.shape[0])),
              swa_window_size=int(swa_window_size), full_to_swa_index_mapping=full_to_swa_index_mapping,
              req_to_verify_expected_tokens=req_to_verify_expected_tokens,
              req_to_verify_expected_tokens_valid_lens=(req_to_verify_expected_tokens_valid_lens
                                                        if req_to_verify_expected_tokens is not None else None),
              kv_token_id_vs_position_offset=int(kv_token_id_vs_position_offset))


def launch_canary_verify_kernel(*, context: VerifyOrWriteContext, plan: VerifyPlan,
                                check_verify_expected_token: bool) -> None:
    """Verify one canary buffer against a VerifyPlan (SPEC-CANARY §5)."""
    if len(context.real_kv_sources) > MAX_REAL_KV_SOURCES:
        raise ValueError(f"kv-canary: at most {MAX_REAL_KV_SOURCES} RealKvSource entries supported, "
                         f"got {len(context.real_kv_sources)}")
    state = _state(context.canary_buf.device)
    buffer, ring, real_kv, shadow = _context(context, state)
    vp = _verify_plan(plan)
    _run_with_count(shadow, context.violation_write_index, lambda: _api.verify(
        verify_plan=vp, buffer=buffer, ring=ring, kernel_kind=int(context.kernel_kind),
        check_expected_token=bool(check_verify_expected_token), real_kv=real_kv,
        check_slot_zero=False, check_freed=False))  # the original's §5, without the v2 checks of §11


def launch_canary_write_kernel(
    *,
    context: VerifyOrWriteContext,
    plan: WritePlan,
    input_ids: torch.Tensor,
    positions: torch.Tensor,
    out_cache_loc: torch.Tensor,
    enable_write_input_assert: bool,
    expected_input_tokens: Optional[torch.Tensor],
    expected_input_positions: Optional[torch.Tensor],
) -> None:
    """Write the step's canary records into one canary buffer per a WritePlan (SPEC-CANARY §4)."""
    if len(context.real_kv_sources) > MAX_REAL_KV_SOURCES:
        raise ValueError(f"kv-canary: at most {MAX_REAL_KV_SOURCES} RealKvSource entries supported, "
                         f"got {len(context.real_kv_sources)}")
    if enable_write_input_assert:
        if expected_input_tokens is None or expected_input_positions is None:
            raise ValueError("kv-canary: expected input tensors are required when enable_write_input_assert=True")
    elif expected_input_tokens is not None or expected_input_positions is not None:
        raise ValueError("kv-canary: expected input tensors must be None when enable_write_input_assert=False")
    state = _state(context.canary_buf.device)
    buffer, ring, real_kv, shadow = _context(context, state)
    wp = _write_plan(plan)
    _run_with_count(shadow, context.violation_write_index, lambda: _api.write(
        write_plan=wp, input_ids=input_ids, positions=positions, out_cache_loc=out_cache_loc, buffer=buffer,
        ring=ring, chain_position_assert=context.enable_chain_position_assert,
        expected_input_ids=expected_input_tokens if enable_write_input_assert else None,
        expected_positions=expected_input_positions if enable_write_input_assert else None,
        kernel_kind=int(context.kernel_kind), real_kv=real_kv))


__all__ = [
    "launch_canary_plan_kernels", "launch_canary_write_kernel", "launch_canary_verify_kernel", "VerifyPlan",
    "WritePlan", "RealKvSource", "VerifyOrWriteContext", "CanaryLaunchTag", "FailReason", "RealKvHashMode",
    "CANARY_CHAIN_ANCHOR", "CANARY_SLOT_BYTES", "VIOLATION_FIELDS", "splitmix64", "splitmix64_mix3",
    "last_plan_status",
]
