"""The stage calls an integration makes, in one place: one canary group = one plan, a K and a V canary buffer
verified together (HEAD_*), each written after the forward with its own real-KV sources (TAIL_*), one ring.

This is the only file that calls kvcanary.plan / verify / write / read_report. When the runtime's
``kvcanary.Canary`` (before_forward / after_forward / sweep) is bound in Python, it replaces this class and
nothing else changes.
"""

from __future__ import annotations

from typing import Sequence

import kvcanary
from kvcanary import KernelKind, RealKv, RealKvMode, RealKvSource

_KINDS = {  # (sliding?) -> verify K, verify V, write K, write V
    False: (KernelKind.HEAD_K_FULL, KernelKind.HEAD_V_FULL, KernelKind.TAIL_K_FULL, KernelKind.TAIL_V_FULL),
    True: (KernelKind.HEAD_K_SWA, KernelKind.HEAD_V_SWA, KernelKind.TAIL_K_SWA, KernelKind.TAIL_V_SWA),
}


def byte_rows(cache_tensor):
    """A [slots, heads, head_dim] cache tensor as [slots, row bytes] (a view of the same memory, any dtype)."""
    return cache_tensor.view(cache_tensor.shape[0], -1)


def real_kv_sources(tensors: Sequence, mode: RealKvMode) -> RealKv:
    """Up to 4 of the engine's cache tensors (rows = slots) as real-KV sources, read in place."""
    sources = []
    for t in tensors:
        rows = byte_rows(t)
        row_bytes = rows.shape[1] * rows.element_size()
        sources.append(RealKvSource(array=rows, page_size=1, bytes_per_token=row_bytes,
                                    read_bytes=16 if mode == RealKvMode.PARTIAL else row_bytes))
    return RealKv(mode=mode if sources else RealKvMode.NONE, sources=sources)


class StageGroup:
    """The canary of one engine layer group over `num_slots` cache rows.

    The caller fills `req_to_token` ([pool_rows, max_context] int32) and `expected_tokens` (same shape) in place,
    then calls head(...) before the forward and tail(...) after it. All arrays live on `device` (torch).
    """

    def __init__(self, *, num_slots: int, pool_rows: int, max_context: int, max_batch: int, max_tokens: int,
                 k_cache: Sequence, v_cache: Sequence, real_kv_mode: RealKvMode, sliding_window: int,
                 device, ring_capacity: int = 4096, expected_tokens=None):
        import torch

        self.device = device
        self.sliding = sliding_window > 0
        self.swa_window_size = sliding_window
        alloc = dict(device=device, library="torch")
        self.verify_plan = kvcanary.VerifyPlan.allocate(max_batch * max_context, **alloc)
        self.write_plan = kvcanary.WritePlan.allocate(max_batch, **alloc)
        self.status = kvcanary.PlanStatus.allocate(**alloc)
        self.workspace = kvcanary.PlanWorkspace.allocate(max_batch, **alloc)
        self.buffers = [kvcanary.CanaryBuffer.allocate(num_slots, **alloc) for _ in range(2)]
        self.real_kv = [real_kv_sources(k_cache, real_kv_mode), real_kv_sources(v_cache, real_kv_mode)]
        self.ring = kvcanary.ViolationRing.allocate(ring_capacity, **alloc)
        self.req_to_token = torch.zeros((pool_rows, max_context), dtype=torch.int32, device=device)
        # expected_tokens: another group's table to share (the same requests in the same rows), or a new one
        self.expected_tokens = (torch.full((pool_rows, max_context), -1, dtype=torch.int32, device=device)
                                if expected_tokens is None else expected_tokens)
        self.chain_position_assert = torch.ones((1,), dtype=torch.int32, device=device)
        self.lut = (torch.arange(num_slots, dtype=torch.int64, device=device) if self.sliding else None)
        self.token_staging = torch.zeros((3, max_tokens), dtype=torch.int64, device=device)
        self.kinds = _KINDS[self.sliding]
        # Host arrays: Serial. Engines call from their own threads, and Kokkos 3.4's OpenMP backend only runs
        # from the thread that initialized it ("in parallel or not initialized"); see docs/transformers.md.
        self.backend = "serial" if getattr(device, "type", device) == "cpu" else None

    def head(self, *, req_pool_indices, prefix_lens, extend_seq_lens, valid_lens) -> None:
        """Plan this step and verify every slot the batch reads against both canary buffers."""
        kvcanary.plan(req_pool_indices=req_pool_indices, prefix_lens=prefix_lens, extend_seq_lens=extend_seq_lens,
                      req_to_token=self.req_to_token, verify_plan=self.verify_plan, write_plan=self.write_plan,
                      status=self.status, workspace=self.workspace, swa_window_size=self.swa_window_size,
                      full_to_swa_index_mapping=self.lut, req_to_verify_expected_tokens=self.expected_tokens,
                      req_to_verify_expected_tokens_valid_lens=valid_lens, backend=self.backend)
        kvcanary.verify(verify_plan=self.verify_plan, buffer=self.buffers, ring=self.ring,
                        kernel_kind=[self.kinds[0], self.kinds[1]], real_kv=self.real_kv, backend=self.backend,
                        check_slot_zero=False)  # transformers' slot 0 is block 0's first token, not padding

    def tail(self, *, input_ids, positions, out_cache_loc) -> None:
        """Stamp the step's tokens into both buffers, with the real-KV fingerprint of the bytes just written."""
        n = input_ids.shape[0]
        st = self.token_staging[:, :n]
        st[0].copy_(input_ids)
        st[1].copy_(positions)
        st[2].copy_(out_cache_loc)
        kvcanary.write(write_plan=self.write_plan, input_ids=st[0], positions=st[1], out_cache_loc=st[2],
                       buffer=self.buffers, ring=self.ring, chain_position_assert=self.chain_position_assert,
                       kernel_kind=list(self.kinds[2:]), real_kv=self.real_kv, backend=self.backend)

    def copy_slots(self, src, dst) -> None:
        """Move records with the engine's own cache copies (forks, restores): rows dst <- rows src."""
        for buf in self.buffers:
            buf.records[dst] = buf.records[src]

    def read(self) -> "kvcanary.Report":
        return kvcanary.read_report(self.ring, keep_never_written=True)


def poll(groups: Sequence[StageGroup]):
    """[(ring count, plan input_error_bits, first_bad_row)] of every group, in one device->host read."""
    import torch

    flat = torch.cat([t for g in groups for t in (g.ring.count, g.status.input_error_bits,
                                                  g.status.first_bad_row)]).tolist()
    return [tuple(flat[3 * i:3 * i + 3]) for i in range(len(groups))]
