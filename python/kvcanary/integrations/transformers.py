"""kvcanary for HF transformers' continuous batching (transformers >= 5.17: ``generate_batch``,
``ContinuousBatchingManager``), with no change to transformers' source.

    import kvcanary.integrations.transformers as kvt
    handle = kvt.attach(model)                       # or attach(manager); config: kvt.CanaryConfig(...)
    out = model.generate_batch(prompts, generation_config=..., continuous_batching_config=...)
    print(handle.report().summary())
    handle.detach()                                  # transformers' classes are as before

Every forward step of the engine (``ModelRunner.compute_batch``, wrapped on the class and routed to the handle
of the model it runs): before the forward, the batch's page table as the engine will read it (its
``read_index`` per layer group, or its ``block_table`` on the decode fast path) becomes a ``req_to_token`` row per
request, past length ``prefix_lens``, query length ``extend_seq_lens``, and every slot a request reads is
verified against a K and a V canary buffer (token, position, chain, real-KV fingerprint) with the request's
prompt + generated ids as expected tokens; after the forward the step's ``input_ids`` / ``position_ids`` are
stamped at its ``write_index`` slots, fingerprinting the engine's own key/value cache tensors in place. Forks
(``PagedAttentionCache.copy_cache``) copy the records with the blocks. Decisions: docs/transformers.md.
"""

from __future__ import annotations

import sys
import threading
from time import perf_counter
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import kvcanary
from kvcanary import FailReason, KernelKind, RealKvMode

from ._stages import StageGroup, poll

__all__ = ["CanaryConfig", "Handle", "Violation", "CanaryReport", "attach"]

WARMUP_PREFIX = "__warmup"


@dataclass
class CanaryConfig:
    """mode: 'none' (collect; rows read at report()), 'log' (each violation printed to `sink` in the step it is
    found), 'raise' (the step raises kvcanary.CanaryViolation in the engine, which fails that batch's requests).
    real_kv: 'all' (every byte of a slot's K/V row), 'partial' (its first 16 bytes) or 'none'.
    real_kv_layers: indices within a layer group whose cache tensors are fingerprinted (at most 4; default:
    first, last and two between). max_context / max_requests: the canary's page-table rows (default: the
    cache's pages and min(blocks, 256)). per_step: read the rings after every step, so that each violation
    carries its step and requests (one host read per step; False defers everything to report(), e.g. to
    measure overhead, and leaves step and requests unknown). timing: time the canary's work and the model's
    step on the engine's stream (CUDA events; host clock on CPU) into handle.timings. guard=False: map the
    steps but run no stage (the baseline of an overhead measurement)."""

    mode: str = "log"
    real_kv: str = "all"
    real_kv_layers: Optional[List[int]] = None
    max_context: Optional[int] = None
    max_requests: Optional[int] = None
    ring_capacity: int = 4096
    per_step: bool = True
    timing: bool = False
    guard: bool = True
    sink: Optional[Callable[[str], None]] = None

    def __post_init__(self):
        if self.mode not in ("none", "log", "raise"):
            raise ValueError(f"kvcanary CanaryConfig: mode must be 'none', 'log' or 'raise', got {self.mode!r}")
        if self.real_kv not in ("none", "partial", "all"):
            raise ValueError(f"kvcanary CanaryConfig: real_kv must be 'none', 'partial' or 'all', got {self.real_kv!r}")


@dataclass(frozen=True)
class Violation:
    """One ring row, attributed: the engine step (1-based count of guarded forwards) whose canary found it, the
    requests that read (HEAD_*) or wrote (TAIL_*) the slot in that step and the positions they expected there."""

    step: Optional[int]
    request_ids: tuple
    expected_positions: tuple
    kind: str
    slot: int
    stored_position: int
    stored_token: int
    expected_token: int
    reasons: int
    line: str

    @property
    def reason_names(self) -> List[str]:
        return [r.name.lower() for r in FailReason if self.reasons & r]

    def __str__(self) -> str:
        who = ",".join(self.request_ids) or "?"
        return f"step {self.step} request {who} expected_position {list(self.expected_positions)}: {self.line}"


@dataclass
class CanaryReport:
    steps: int = 0
    verified_slots: int = 0
    written_slots: int = 0
    violations: List[Violation] = field(default_factory=list)
    plan_errors: List[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.violations and not self.plan_errors

    def summary(self) -> str:
        return (f"kvcanary: {self.steps} engine steps guarded, {self.verified_slots} slot reads verified, "
                f"{self.written_slots} slot writes stamped, {len(self.violations)} violations")


# ---- class-level hooks, routed by model / cache identity ----

_LOCK = threading.RLock()
_HANDLES: Dict[int, "Handle"] = {}   # id(model) -> handle
_PATCHES: list = []                  # (owner, name, original) while any handle is attached


def _install_patches():
    from transformers.generation.continuous_batching import cache as cache_mod
    from transformers.generation.continuous_batching import model_runner as runner_mod
    from transformers.generation.continuous_batching import offloading_manager as offload_mod

    runner_cls, cache_cls = runner_mod.ModelRunner, cache_mod.PagedAttentionCache
    offload_cls = offload_mod.OffloadingManager
    orig_compute, orig_copy, orig_free = runner_cls.compute_batch, cache_cls.copy_cache, cache_cls.free_blocks
    orig_offload, orig_restore = offload_cls._offload_to_cpu, offload_cls.restore_scheduled_requests

    def compute_batch(self, model, batch_data):
        handle = _HANDLES.get(id(model))
        if handle is None:
            return orig_compute(self, model, batch_data)
        clock = handle._clock(self) if handle.config.timing else None
        on_stream = handle._on_compute_stream(self)  # the canary runs in order with the forward, on its stream
        if clock:
            t0, h0 = clock(), perf_counter()
        with on_stream():
            step = handle._before_forward(self, batch_data)
        if clock:
            t1, h1 = clock(), perf_counter()
        orig_compute(self, model, batch_data)
        if clock:
            t2, h2 = clock(), perf_counter()
        if step is not None:
            with on_stream():
                handle._after_forward(self, batch_data, step)
            if clock:
                t3, h3 = clock(), perf_counter()
                handle.timings.append((step["step"], step["cu_q"][-1], len(step["rids"]), t0, t1, t2, t3,
                                       h1 - h0 + h3 - h2))

    def copy_cache(self, list_source_blocks, list_forked_blocks):
        orig_copy(self, list_source_blocks, list_forked_blocks)
        for handle in list(_HANDLES.values()):
            if handle._cache is self:
                handle._copy_blocks(list_source_blocks, list_forked_blocks)

    def free_blocks(self, request_id):
        orig_free(self, request_id)
        for handle in list(_HANDLES.values()):
            if handle._cache is self:
                handle._release(request_id)

    def _offload_to_cpu(self, victims):
        handles = [h for h in _HANDLES.values() if h._cache is self.cache]
        saved = {v.request_id: [h._save_records(v.request_id) for h in handles] for v in victims}
        offloaded = orig_offload(self, victims)
        for rid in offloaded:  # the KV bytes went to the CPU pool: keep the records beside them
            for h, records in zip(handles, saved[rid]):
                h._offloaded[rid] = records
        return offloaded

    def restore_scheduled_requests(self, requests_in_batch):
        rids = [f.state.request_id for f in requests_in_batch if f.state.is_cpu_offloaded]
        orig_restore(self, requests_in_batch)
        for h in list(_HANDLES.values()):
            if h._cache is self.cache:
                for rid in rids:
                    h._restore_records(rid)

    for owner, name, new in ((runner_cls, "compute_batch", compute_batch), (cache_cls, "copy_cache", copy_cache),
                             (cache_cls, "free_blocks", free_blocks), (offload_cls, "_offload_to_cpu", _offload_to_cpu),
                             (offload_cls, "restore_scheduled_requests", restore_scheduled_requests)):
        _PATCHES.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, new)


def _remove_patches():
    while _PATCHES:
        owner, name, orig = _PATCHES.pop()
        setattr(owner, name, orig)


def attach(manager_or_model, config: Optional[CanaryConfig] = None) -> "Handle":
    """Guard the continuous-batching engine of a model (or of a ContinuousBatchingManager's model) until
    handle.detach(). Works for managers created before or after attach; one handle per model."""
    from transformers.generation.continuous_batching.continuous_api import ContinuousBatchingManager

    model = manager_or_model
    if isinstance(manager_or_model, ContinuousBatchingManager):
        model = manager_or_model.model
    if not hasattr(model, "generate_batch"):
        raise TypeError("kvcanary attach: expected a transformers model with continuous batching or a "
                        f"ContinuousBatchingManager, got {type(manager_or_model).__name__}")
    config = config or CanaryConfig()
    if not isinstance(config, CanaryConfig):
        raise TypeError(f"kvcanary attach: config must be a CanaryConfig, got {type(config).__name__}")
    with _LOCK:
        if id(model) in _HANDLES:
            raise ValueError("kvcanary attach: this model already has a canary attached; detach it first")
        if not _HANDLES:
            _install_patches()
        handle = Handle(model, config)
        _HANDLES[id(model)] = handle
    return handle


def _layers_to_fingerprint(group_size: int, wanted: Optional[List[int]]) -> List[int]:
    if wanted is not None:
        bad = [j for j in wanted if not 0 <= j < group_size]
        if bad or len(wanted) > 4:
            raise ValueError(f"kvcanary CanaryConfig: real_kv_layers must be at most 4 indices in [0, {group_size}), "
                             f"got {wanted}")
        return list(wanted)
    if group_size <= 4:
        return list(range(group_size))
    return sorted({0, group_size // 3, (2 * group_size) // 3, group_size - 1})


class Handle:
    """The canary of one model's continuous batching. report() / detach(); see the module doc."""

    def __init__(self, model, config: CanaryConfig):
        self.model = model
        self.config = config
        self._cache = None
        self._groups: List[StageGroup] = []
        self._rows: Dict[str, int] = {}       # request id -> canary page-table row (1-based: row 0 = padding)
        self._free_rows: List[int] = []
        self._filled: Dict[str, int] = {}     # request id -> expected tokens already in its row
        self._report = CanaryReport()
        self._reported_rows = 0
        self._step = 0
        self._attached = True
        self._last = None                     # the last step's mapping, for attribution
        self._offloaded: Dict[str, list] = {}  # request id -> its records while its KV sits in the CPU pool
        self.on_step: Optional[Callable] = None  # on_step(step, mapping, batch_data), pre-forward: for tools
        # config.timing: (step, tokens, requests, t0, t1, t2, t3, canary host seconds) per guarded step; t0..t3 on
        # the engine's stream (before / after the canary's pre-forward work, after the forward, after the write)
        self.timings: list = []
        self._ncols = 0                       # the canary page table's columns (max_context)
        self._pin = False                     # CUDA: the step's upload goes through pinned host memory
        self._arange = None                   # 0, 1, 2, ... on the device, for the scatters

    @staticmethod
    def _on_compute_stream(runner):
        import contextlib

        stream = runner.inputs_and_outputs.compute_stream
        if stream is None:
            return contextlib.nullcontext
        import torch

        return lambda: torch.cuda.stream(stream)

    def _clock(self, runner):
        """A timestamp on the engine's compute stream: CUDA events there, the host clock on CPU."""
        import time

        import torch

        stream = runner.inputs_and_outputs.compute_stream
        if not torch.cuda.is_available() or self.model.device.type != "cuda":
            return time.perf_counter

        def record():
            e = torch.cuda.Event(enable_timing=True)
            e.record(stream if stream is not None else torch.cuda.current_stream())
            return e
        return record

    def step_times_ms(self):
        """Per timed step: (step, tokens, requests, canary ms (before + after the forward), model step ms, canary
        host ms). The first two are on the engine's stream (CUDA events; the host clock on CPU): where the host
        is slower than the device, as in an eager engine, the stream waits for it and they equal host time. The
        last is the host clock around the canary's two calls."""
        out = []
        for step, tokens, reqs, t0, t1, t2, t3, host in self.timings:
            if isinstance(t0, float):
                head, model, tail = (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3
            else:
                t3.synchronize()
                head, model, tail = t0.elapsed_time(t1), t1.elapsed_time(t2), t2.elapsed_time(t3)
            out.append((step, tokens, reqs, head + tail, model, host * 1e3))
        return out

    # -- public --
    def report(self) -> CanaryReport:
        """Everything found so far (reads the rings; call between steps or after generation)."""
        with _LOCK:
            self._pump(self._step, None)
            return self._report

    def detach(self) -> None:
        """Stop guarding; transformers' classes get their original methods back when no canary is left."""
        with _LOCK:
            if not self._attached:
                return
            self._pump(self._step, None)
            self._attached = False
            _HANDLES.pop(id(self.model), None)
            if not _HANDLES:
                _remove_patches()

    @property
    def steps(self) -> int:
        return self._step

    # -- binding to a PagedAttentionCache (a new one per batch processor) --
    def _bind(self, cache):
        import torch

        cfg = self.config
        mode = {"none": RealKvMode.NONE, "partial": RealKvMode.PARTIAL, "all": RealKvMode.ALL}[cfg.real_kv]
        num_slots = cache.key_cache[0].shape[0]
        max_requests = cfg.max_requests or min(cache.num_blocks, 256)
        max_context = cfg.max_context or cache.num_pages
        layers = _layers_to_fingerprint(len(cache.key_cache), cfg.real_kv_layers)
        groups = []
        for cm in cache.group_cache_managers:  # groups share one expected-token table (same requests, same rows)
            window = getattr(cm, "sliding_window", None)
            sliding = type(cm).__name__.startswith("Sliding")
            groups.append(StageGroup(
                num_slots=num_slots, pool_rows=max_requests + 1, max_context=max_context, max_batch=max_requests + 1,
                max_tokens=cache.max_batch_tokens + 64, k_cache=[cache.key_cache[j] for j in layers],
                v_cache=[cache.value_cache[j] for j in layers], real_kv_mode=mode,
                # the engine reads the window's last W-1 positions before the step's own (cache.get_seqlens_k)
                sliding_window=(window - 1) if sliding else 0, device=cache.key_cache[0].device,
                ring_capacity=cfg.ring_capacity, expected_tokens=groups[0].expected_tokens if groups else None))
        self._pump(self._step, None)
        self._cache, self._groups = cache, groups
        self._rows, self._filled, self._free_rows = {}, {}, list(range(max_requests, 0, -1))
        self._torch = torch
        self._ncols = max_context
        self._pin = groups[0].device.type == "cuda"
        self._arange = None

    def _row_of(self, rid: str) -> int:
        row = self._rows.get(rid)
        if row is None:
            if not self._free_rows:
                raise RuntimeError(f"kvcanary: more than {self.config.max_requests or 'max_requests'} requests hold "
                                   "cache blocks; raise CanaryConfig.max_requests")
            row = self._rows[rid] = self._free_rows.pop()
            self._filled[rid] = 0
        return row

    def _release(self, rid: str) -> None:
        row = self._rows.pop(rid, None)
        if row is not None:
            self._free_rows.append(row)
            self._filled.pop(rid, None)

    def _copy_blocks(self, src_blocks, dst_blocks) -> None:
        torch, bs = self._torch, self._cache.block_size
        dev = self._groups[0].device
        offs = torch.arange(bs, device=dev)
        src = (torch.tensor(src_blocks, device=dev)[:, None] * bs + offs).reshape(-1)
        dst = (torch.tensor(dst_blocks, device=dev)[:, None] * bs + offs).reshape(-1)
        for g in self._groups:
            g.copy_slots(src, dst)

    def _block_slots(self, blocks):
        torch, bs = self._torch, self._cache.block_size
        dev = self._groups[0].device
        return (torch.tensor(blocks, dtype=torch.int64, device=dev)[:, None] * bs
                + torch.arange(bs, device=dev)).reshape(-1)

    def _save_records(self, rid):
        """Copies of the request's records, per layer group (taken before an offload frees its blocks)."""
        if self._cache is None:
            return None
        out = []
        for g, cm in enumerate(self._cache.group_cache_managers):
            blocks = list(cm.block_table.get(rid, []))
            slots = self._block_slots(blocks) if blocks else None
            out.append((len(blocks), [b.records[slots].clone() if blocks else None
                                      for b in self._groups[g].buffers]))
        return out

    def _restore_records(self, rid):
        """The engine copied an offloaded request's KV into new blocks with no forward: move its records too."""
        saved = self._offloaded.pop(rid, None)
        if not saved:
            return
        for g, (cm, (n, records)) in enumerate(zip(self._cache.group_cache_managers, saved)):
            blocks = list(cm.block_table.get(rid, []))[:n]
            if not blocks:
                continue
            slots = self._block_slots(blocks)
            for buf, rec in zip(self._groups[g].buffers, records):
                buf.records[slots] = rec[: slots.shape[0]]

    # -- one engine step --
    # Host work per step, kept small because an eager engine's step waits for it: the step's small integer arrays
    # (rows, lengths, the scatter segments, the newly known expected tokens) go to the device in ONE copy, from
    # pinned memory without a sync on CUDA; the page-table rows are filled by one gather/scatter per source index
    # tensor; per-step reads of the rings are one device->host read for all groups (see _pump).
    def _before_forward(self, runner, bd):
        with _LOCK:
            if not self._attached:
                return None
            io = runner.inputs_and_outputs
            io = io.io_pairs[io.current_pair].host_io if hasattr(io, "io_pairs") else io
            futures = list(io.requests_in_batch)
            if not futures or any(f.state.request_id.startswith(WARMUP_PREFIX) for f in futures):
                return None
            if runner.cache is not self._cache:
                self._bind(runner.cache)
            self._step += 1
            step = self._step
            rids = [f.state.request_id for f in futures]
            q = [int(f.query_length) for f in futures]
            past = [int(f.state.position_offset) - qi for f, qi in zip(futures, q)]
            cu_q = [0]
            for qi in q:
                cu_q.append(cu_q[-1] + qi)
            if not self.config.guard:  # the baseline of an overhead run: the step is timed, nothing else
                return dict(step=step, rids=rids, past=past, q=q, cu_q=cu_q)
            rows = [self._row_of(r) for r in rids]
            ncols = self._ncols
            too_long = [r for r, p, qi in zip(rids, past, q) if p + qi > ncols]
            if too_long:
                raise ValueError(f"kvcanary: request {too_long[0]} reaches past max_context={ncols}; "
                                 "raise CanaryConfig.max_context")
            upload = _Upload()
            rows_u, past_u, q_u = upload.add(rows), upload.add(past), upload.add(q)
            valid, expected = self._fill_expected(futures, rids, rows, past, upload)
            valid_u = upload.add(valid)
            fast = bool(getattr(io, "use_block_table", False)) and bd.get("block_table") is not None
            mapping = dict(step=step, rids=rids, rows=rows, past=past, q=q, cu_q=cu_q, fast=fast)
            if self.on_step is not None:
                self.on_step(step, mapping, bd)
            fills = [self._plan_rows(group, g, bd, mapping, upload) for g, group in enumerate(self._groups)]
            dev = upload.send(self._groups[0].device, self._pin)
            rows_t, past_t = dev(rows_u), dev(past_u)
            mapping.update(rows_t=rows_t, past_t=past_t)
            self._scatter(self._groups[0].expected_tokens, dev, expected)
            for g, (group, fill) in enumerate(zip(self._groups, fills)):
                self._fill_rows(group, g, bd, mapping, dev, fill)
                group.head(req_pool_indices=rows_t, prefix_lens=past_t, extend_seq_lens=dev(q_u),
                           valid_lens=dev(valid_u))
                w = group.swa_window_size
                self._report.verified_slots += sum(min(p, w) if w else p for p in past)
            self._last = mapping
            if self.config.per_step:
                self._pump(step, mapping)
            return mapping

    def _after_forward(self, runner, bd, mapping):
        with _LOCK:
            if not self._attached:
                return
            if not self.config.guard:
                return
            total = mapping["cu_q"][-1]
            ids = bd["input_ids"][0, :total]
            pos = bd["position_ids"][0, :total]
            mapping["loc"] = []
            for g, group in enumerate(self._groups):
                if mapping["fast"]:  # decode fast path: one token per request, at the slot of its past length
                    loc = group.req_to_token[mapping["rows_t"], mapping["past_t"]]
                else:
                    loc = bd["write_index"][g][:total]
                group.tail(input_ids=ids, positions=pos, out_cache_loc=loc)
                mapping["loc"].append(loc)
                self._report.written_slots += total
            if self.config.per_step:
                self._pump(mapping["step"], mapping)

    def _fill_expected(self, futures, rids, rows, past, upload):
        """Each request's newly known prompt / generated ids, appended to its expected-token row: one segment per
        request that has new ones (the values ride in the step's upload). Returns (valid lengths, segments)."""
        valid, segments = [], _Segments(upload)
        ncols = self._ncols
        vals = []
        for f, rid, row, p in zip(futures, rids, rows, past):
            st = f.state
            if p == 0:
                self._filled[rid] = 0  # (re)prefill from position 0, e.g. after a soft reset
            n = self._filled[rid]
            init, gen = st.initial_tokens, st.generated_tokens
            want = min(p, len(init) + len(gen))
            if want > n:
                segments.add(len(vals), row * ncols + n, want - n)
                if n < len(init):
                    vals.extend(init[n:want])
                if want > len(init):
                    vals.extend(gen[max(0, n - len(init)):want - len(init)])
                self._filled[rid] = n = want
            valid.append(n)
        segments.source = upload.add(vals)
        return valid, segments.close()

    def _scatter(self, dst, dev, segments, src=None):
        """dst.view(-1)[d_i + k] = src[s_i + k] for k < len_i over the segments: one repeat_interleave, one gather
        and one scatter on the device (src: the engine's index tensor, or the upload's values when None)."""
        if segments is None:
            return
        torch = self._torch
        src = dev(segments.source) if src is None else src
        idx = torch.repeat_interleave(dev(segments.table).view(-1, 2), dev(segments.lengths), dim=0,
                                      output_size=segments.total)
        idx += self._aranged(segments.total)[:, None]
        dst.view(-1)[idx[:, 1]] = src[idx[:, 0]].to(dst.dtype)

    def _aranged(self, n):
        if self._arange is None or self._arange.shape[0] < n:  # grows by doubling: contexts grow a token a step
            size = max(n, 4096, 2 * (0 if self._arange is None else self._arange.shape[0]))
            self._arange = self._torch.arange(size, dtype=self._torch.int64, device=self._groups[0].device)
        return self._arange[:n]

    def _plan_rows(self, group, g, bd, m, upload):
        """Host side of _fill_rows: the segments of the engine's index tensors that become page-table rows."""
        past, q, rows, ncols = m["past"], m["q"], m["rows"], self._ncols
        if m["fast"]:
            return None
        read = bd["read_index"][g]
        if group.sliding:
            w = group.swa_window_size  # W - 1 positions of the past are read
            n = [min(p, w) for p in past]
            window = None
            if read.numel():
                window, acc = _Segments(upload), 0
                for r, p, ni, qi in zip(rows, past, n, q):
                    window.add(acc, r * ncols + p - ni, ni)
                    acc += ni + qi
                window = window.close()
            new = _Segments(upload)
            for r, p, c, qi in zip(rows, past, m["cu_q"], q):
                new.add(c, r * ncols + p, qi)
            # the position before the window: a slot the rolling buffer may have reused, so its chain link is
            # not checked (0 = slot 0, never verified; see docs/transformers.md)
            pre = [r * ncols + p - ni - 1 for r, p, ni in zip(rows, past, n) if p - ni - 1 >= 0]
            return window, new.close(), upload.add(pre) if pre else None
        if not read.numel():
            return None
        full, acc = _Segments(upload), 0  # full attention: the slots of positions 0 .. past + q - 1, in request order
        for r, p, qi in zip(rows, past, q):
            full.add(acc, r * ncols, p + qi)
            acc += p + qi
        return full.close()

    def _fill_rows(self, group, g, bd, m, dev, fill):
        """The page-table rows this step reads, from the engine's own index tensors."""
        torch, q, rows_t = self._torch, m["q"], m["rows_t"]
        if m["fast"]:  # decode fast path (FA on CUDA): slots from block_table[g, i, p // bs]
            bs = self._cache.block_size
            bt = bd["block_table"][g, :len(q)].to(torch.int64)
            slots = (bt[:, :, None] * bs + self._aranged(bs)).reshape(len(q), -1)
            width = min(slots.shape[1], group.req_to_token.shape[1])
            group.req_to_token[rows_t, :width] = slots[:, :width].to(torch.int32)
            return
        if group.sliding:
            window, new, pre = fill
            self._scatter(group.req_to_token, dev, window, bd["read_index"][g])
            self._scatter(group.req_to_token, dev, new, bd["write_index"][g])
            if pre is not None:
                group.req_to_token.view(-1)[dev(pre)] = 0
            return
        self._scatter(group.req_to_token, dev, fill, bd["read_index"][g])

    # -- reports --
    def _pump(self, step, mapping) -> None:
        if not self._groups:
            return
        new_rows = []
        for group, (count, err, first) in zip(self._groups, poll(self._groups)):
            if count > group.ring._reported:
                rep = group.read()
                new_rows.extend((group, r, l) for r, l in zip(rep.rows, rep.lines))
            if err and mapping is not None:
                msg = f"step {step}: plan input_error_bits={err} first_bad_row={first}"
                self._report.plan_errors.append(msg)
                group.status.input_error_bits.zero_()
        self._report.steps = self._step
        if not new_rows:
            return
        found = [self._attribute(group, row, line, step if mapping is not None else None, mapping)
                 for group, row, line in new_rows]
        self._report.violations.extend(found)
        sink = self.config.sink or (lambda s: print(s, file=sys.stderr))
        if self.config.mode in ("log", "raise"):
            for v in found:
                sink(str(v))
        if self.config.mode == "raise" and mapping is not None:
            raise CanaryViolationInEngine(found)

    def _attribute(self, group, row, line, step, m) -> Violation:
        kind, slot, spos, stok, etok, _, _, bits = (int(x) for x in row)
        rids, positions = [], []
        if m is not None:
            if KernelKind(kind).name.startswith("HEAD"):
                rtt = group.req_to_token[m["rows_t"]].cpu()
                exp = group.expected_tokens[m["rows_t"]].cpu()
                w = group.swa_window_size
                for i, (rid, p) in enumerate(zip(m["rids"], m["past"])):
                    lo = max(0, p - w) if w else 0
                    hits = [lo + h for h in (rtt[i, lo:p] == slot).nonzero().flatten().tolist()]
                    if etok != -1:  # the reader whose expected token the row carries
                        hits = [h for h in hits if int(exp[i, h]) == etok]
                    hits = [h - lo for h in hits]
                    if hits:
                        rids.append(rid)
                        positions.extend(lo + h for h in hits)
            elif "loc" in m:
                loc = m["loc"][self._groups.index(group)].cpu()
                cu = m["cu_q"]
                for t in (loc == slot).nonzero().flatten().tolist():
                    i = max(j for j in range(len(m["rids"])) if cu[j] <= t)
                    rids.append(m["rids"][i])
                    positions.append(m["past"][i] + t - cu[i])
        return Violation(step=step, request_ids=tuple(rids), expected_positions=tuple(positions),
                         kind=KernelKind(kind).name, slot=slot, stored_position=spos, stored_token=stok,
                         expected_token=etok, reasons=bits, line=line)


class _Upload:
    """The small int64 arrays of one step, packed on the host and sent to the device in one copy (CUDA: from
    pinned memory, non-blocking; torch's pinned-memory cache keeps a block until its copy has run)."""

    def __init__(self):
        self.values: List[int] = []

    def add(self, values) -> slice:
        start = len(self.values)
        self.values.extend(values)
        return slice(start, len(self.values))

    def send(self, device, pin: bool):
        import torch

        host = torch.tensor(self.values, dtype=torch.int64, pin_memory=pin)
        on_device = host.to(device, non_blocking=True) if pin else host
        return on_device.__getitem__  # part (a slice from add) -> a view of the device copy


class _Segments:
    """Runs dst[d + k] = src[s + k], k < n, in one table: per run (s - o, d - o) and n, o being the run's start in
    their concatenation, so that the device computes every index as table[run] + k with one repeat_interleave."""

    def __init__(self, upload: _Upload):
        self.upload, self.pairs, self.lens, self.total = upload, [], [], 0
        self.table = self.lengths = self.source = None  # parts of the upload (source: values that ride in it)

    def add(self, s: int, d: int, n: int) -> None:
        if n > 0:
            self.pairs += (s - self.total, d - self.total)
            self.lens.append(n)
            self.total += n

    def close(self) -> Optional["_Segments"]:
        if not self.total:
            return None
        self.table, self.lengths = self.upload.add(self.pairs), self.upload.add(self.lens)
        return self


class CanaryViolationInEngine(kvcanary.CanaryViolation):
    """Raised inside the engine's step in mode 'raise'; transformers fails the batch's requests with it."""

    def __init__(self, violations: List[Violation]):
        self.violations = violations
        RuntimeError.__init__(self, "kvcanary: canary violations:\n" + "\n".join(str(v) for v in violations))
        self.rows, self.lines, self.report = [], [v.line for v in violations], None
