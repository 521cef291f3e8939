"""Real bugs planted in HF transformers' continuous batching at run time (its BlockManager, block tables and cache
tensors are patched or edited; kvcanary's own code is never touched), each with its ground truth: the request that
will read corrupted KV and the first engine step whose pre-forward state holds the corruption where that request
reads it — the step in which the canary must report it.

    fault = KvByteFlip(at_step=5, which="k")
    fault.install(handle)                 # uses handle.on_step to watch the engine and strike
    model.generate_batch(...)
    fault.expected_step, fault.victim     # ground truth, once struck
    first = fault.first_detection(handle.report())

Steps are the handle's (1-based count of guarded forwards). Used by the tests, the example and the scripts.
"""

from __future__ import annotations

import random
from typing import Optional

from kvcanary import FailReason

__all__ = ["Fault", "KvByteFlip", "BlockTableOverwrite", "DoubleAllocation", "UseAfterFree", "StalePrefixHit",
           "OffloadedByteFlip", "ALL_FAULTS", "unpinned_offload_pool"]


def _slot(cache, rid: str, position: int) -> int:
    bs = cache.block_size
    return cache.group_cache_managers[0].block_table[rid][position // bs] * bs + position % bs


class Fault:
    """Base: subclasses strike in strike(); ground truth is (victim, expected_step, reasons)."""

    name = "fault"
    expected_reasons = 0  # bits that must be among the reported ones (0: any)

    def __init__(self, at_step: int = 5, seed: int = 0):
        self.at_step = at_step
        self.rng = random.Random(seed)
        self.struck_step: Optional[int] = None
        self.victim: Optional[str] = None
        self.victim_min_past: Optional[int] = None  # the victim reads the corruption once its past exceeds this
        self.armed_step: Optional[int] = None       # first step whose pre-forward state holds the corruption
        self.expected_step: Optional[int] = None
        self.detail = ""
        self.handle = None

    def install(self, handle) -> "Fault":
        self.handle = handle
        previous = handle.on_step

        def on_step(step, m, bd):
            if previous is not None:
                previous(step, m, bd)
            self._watch(step, m, bd)

        handle.on_step = on_step
        return self

    def _watch(self, step, m, bd):
        if self.struck_step is None and step >= self.at_step:
            if self.strike(step, m, bd):
                self.struck_step = step
        self.track(step, m, bd)
        if (self.expected_step is None and self.armed_step is not None and step >= self.armed_step
                and self.victim in m["rids"]):
            i = m["rids"].index(self.victim)
            if m["past"][i] > self.victim_min_past:
                self.expected_step = step

    def strike(self, step, m, bd) -> bool:
        raise NotImplementedError

    def track(self, step, m, bd) -> None:
        pass

    # helpers
    def _cache(self):
        return self.handle._cache

    def _long_runner(self, m, min_past):
        """A request of this batch with at least min_past tokens cached, preferring one with much left to do."""
        cands = [(p, rid) for rid, p in zip(m["rids"], m["past"]) if p >= min_past]
        return self.rng.choice(cands)[1] if cands else None

    def first_detection(self, report):
        """The first violation that names the victim (None when the canary missed it)."""
        for v in report.violations:
            if self.victim in v.request_ids:
                return v
        return None

    def check(self, report) -> str:
        """'' when the canary reported the victim at the expected step with the expected reasons, else why not."""
        if self.expected_step is None:
            return f"{self.name}: never became readable (struck at {self.struck_step}, victim {self.victim})"
        v = self.first_detection(report)
        if v is None:
            return f"{self.name}: missed (victim {self.victim}, expected at step {self.expected_step})"
        if v.step != self.expected_step:
            return f"{self.name}: found at step {v.step}, expected {self.expected_step}"
        if self.expected_reasons and not (v.reasons & self.expected_reasons):
            return f"{self.name}: reasons {v.reason_names}, expected {FailReason(self.expected_reasons)!r}"
        earlier = [x for x in report.violations if x.step is not None and x.step < self.expected_step]
        if earlier:
            return f"{self.name}: {len(earlier)} violations before the fault was readable: {earlier[0]}"
        return ""


class KvByteFlip(Fault):
    """One bit flipped in a key (or value) cache tensor of a fingerprinted layer, at a slot a running request has
    written and reads again: readable at once (this step's pre-forward state)."""

    name = "flipped byte in the K/V cache"
    expected_reasons = FailReason.VERIFY_REAL_KV_HASH

    def __init__(self, at_step=5, seed=0, which="k", layer=0):
        super().__init__(at_step, seed)
        self.which, self.layer = which, layer
        self.name = f"flipped byte in the {which.upper()} cache"

    def strike(self, step, m, bd):
        rid = self._long_runner(m, 2)
        if rid is None:
            return False
        cache = self._cache()
        p = m["past"][m["rids"].index(rid)] // 2
        slot = _slot(cache, rid, p)
        t = (cache.key_cache if self.which == "k" else cache.value_cache)[self.layer]
        row = t.view(t.shape[0], -1).view(__import__("torch").uint8)[slot]
        col = self.rng.randrange(row.numel())
        row[col] ^= 0x10
        self.victim, self.victim_min_past, self.armed_step = rid, p, step
        self.detail = f"slot {slot} (position {p} of {rid}) byte {col} of layer {self.layer}"
        return True


class BlockTableOverwrite(Fault):
    """A request's block-table entry 0 overwritten with another running request's live block: readable from the
    next step (this step's read indices were already built)."""

    name = "block-table entry overwritten"

    def strike(self, step, m, bd):
        cache = self._cache()
        bt = cache.group_cache_managers[0].block_table
        for rid in m["rids"]:
            mine = bt.get(rid, [])
            if len(mine) < 2:
                continue
            others = [b for o in m["rids"] if o != rid for b in bt.get(o, [])[:-1] if b not in mine]
            if others:
                new = self.rng.choice(others)
                self.detail = f"{rid} block 0: {mine[0]} -> {new}"
                mine[0] = new
                self.victim, self.victim_min_past, self.armed_step = rid, 0, step + 1
                return True
        return False


class _StolenBlock(Fault):
    """Base of faults that hand a victim's live block to the allocator: armed once another request writes into it."""

    def __init__(self, at_step=5, seed=0):
        super().__init__(at_step, seed)
        self.block = None

    def _victim_block(self, m):
        cache = self._cache()
        bm, bt, bs = cache._block_manager, cache.group_cache_managers[0].block_table, cache.block_size
        for rid, p in sorted(zip(m["rids"], m["past"]), key=lambda x: -x[1]):
            blocks = bt.get(rid, [])
            for k, b in enumerate(blocks[:-1]):  # complete blocks: the victim will not rewrite them
                blk = bm._id_to_block.get(b)
                if (blk is None or blk.ref_count == 1) and (k + 1) * bs <= p:
                    return rid, k, b
        return None

    def strike(self, step, m, bd):
        found = self._victim_block(m)
        if found is None:
            return False
        rid, k, b = found
        self.steal(rid, k, b)
        self.block, self.victim, self.victim_min_past = b, rid, k * self._cache().block_size
        return True

    def steal(self, rid, k, b) -> None:
        raise NotImplementedError

    def track(self, step, m, bd):
        if self.block is None or self.armed_step is not None:
            return
        bs = self._cache().block_size
        total = m["cu_q"][-1]
        written = bd["write_index"][0][:total] if not m["fast"] else None
        if written is None:
            return
        cu = m["cu_q"]
        for i, rid in enumerate(m["rids"]):
            if self.block in set((written[cu[i]:cu[i + 1]] // bs).tolist()):
                self.armed_step = step + 1
                self.detail += f"; {rid} writes into it at step {step}"
                return


class DoubleAllocation(_StolenBlock):
    """BlockManager.get_free_blocks hands out a block a running request still holds (it was never freed)."""

    name = "block handed to two running requests"

    def steal(self, rid, k, b):
        cache = self._cache()
        bm = cache._block_manager
        original, original_allocate = bm.get_free_blocks, cache.allocate_blocks
        requester = []

        def allocate_blocks(n_blocks, request_id, allocated_blocks):
            requester[:] = [request_id]
            return original_allocate(n_blocks, request_id, allocated_blocks)

        def get_free_blocks(n_blocks, last_block_id, shareable, group_id):
            got = original(n_blocks, last_block_id, shareable, group_id)
            if got and requester and requester[0] != rid:
                bm._uninit_block_ids.appendleft(got[0])  # undo one allocation, hand out the victim's block
                got[0] = b
                del bm.get_free_blocks                   # once
                del cache.allocate_blocks
            return got

        bm.get_free_blocks = get_free_blocks
        cache.allocate_blocks = allocate_blocks
        self.detail = f"block {b} (block {k} of {rid}) allocated again"


class UseAfterFree(_StolenBlock):
    """A running request's block freed behind its back (ref count dropped, block back on the free list) and then
    allocated to another request, while the first one keeps reading it."""

    name = "use after free"

    def steal(self, rid, k, b):
        bm = self._cache()._block_manager
        blk = bm._id_to_block.get(b)
        if blk is not None:
            bm.decrease_ref_count(b)
            if b in bm._init_block_ids:  # complete and hashed: evict it now, as a later allocation would
                bm._init_block_ids.pop(b)
                bm._hash_to_id.pop(blk.hash, None)
                bm._id_to_block.pop(b, None)
            else:
                bm._uninit_block_ids.remove(b)
        bm._uninit_block_ids.appendleft(b)  # next in line for the allocator
        self.detail = f"block {b} (block {k} of {rid}) freed while in use"


class StalePrefixHit(Fault):
    """BlockManager keeps a block's hash when it evicts the block (has_enough_free_blocks), so a later prompt with
    the same prefix matches a block whose content now belongs to another request. Needs a workload that evicts
    cached prefixes and then repeats one (tests: finish a prompt, fill the cache, send its prefix again)."""

    name = "stale prefix-cache hit"

    def __init__(self, at_step=1, seed=0):
        super().__init__(at_step, seed)
        self.evicted = {}   # block id -> hash kept by the bug
        self.reused = set()

    def strike(self, step, m, bd):
        cache = self._cache()
        bm = cache._block_manager
        fault = self
        orig_enough, orig_free = bm.has_enough_free_blocks, bm.get_free_blocks
        orig_match = cache.search_prefix_match

        def has_enough_free_blocks(n_blocks):
            before = dict(bm._hash_to_id)
            ok = orig_enough(n_blocks)
            for h, b in before.items():
                if h not in bm._hash_to_id:
                    bm._hash_to_id[h] = b       # the bug: the evicted block stays matchable
                    fault.evicted[b] = h
            return ok

        def get_free_blocks(n_blocks, last_block_id, shareable, group_id):
            got = orig_free(n_blocks, last_block_id, shareable, group_id)
            for b in got or []:
                if b in fault.evicted:
                    fault.reused.add(b)
            return got

        def search_prefix_match(request_id, prompt_ids):
            from transformers.generation.continuous_batching.cache_manager import Block

            for b in fault.reused:  # the bug keeps the evicted block's record too: it looks in use, not free
                if b not in bm._id_to_block:
                    bm._id_to_block[b] = Block(b, None, 0)
            n = orig_match(request_id, prompt_ids)
            blocks = cache.group_cache_managers[0].block_table.get(request_id, [])
            stale = [k for k, b in enumerate(blocks[: n // cache.block_size]) if b in fault.reused]
            if stale and fault.victim is None:
                fault.victim, fault.victim_min_past = request_id, stale[0] * cache.block_size
                fault.armed_step = fault.handle.steps + 1
                fault.detail = f"{request_id} matched block {blocks[stale[0]]} (its block {stale[0]}) after reuse"
            return n

        bm.has_enough_free_blocks = has_enough_free_blocks
        bm.get_free_blocks = get_free_blocks
        cache.search_prefix_match = search_prefix_match
        return True


class OffloadedByteFlip(Fault):
    """One bit flipped in the CPU swap pool (cpu_offload_space > 0) while a request's KV sits there: the engine
    restores the bad bytes into new blocks, readable in the step of the restore. Needs a cache small enough to
    offload (and, on a machine without CUDA, a pool that is not pinned)."""

    name = "flipped byte in an offloaded block"
    expected_reasons = FailReason.VERIFY_REAL_KV_HASH

    def strike(self, step, m, bd):
        from transformers.generation.continuous_batching import offloading_manager as om

        fault, cls = self, om.OffloadingManager
        inner = cls.__dict__["restore_scheduled_requests"]

        def restore_scheduled_requests(manager, requests_in_batch):
            for f in requests_in_batch:
                rid = f.state.request_id
                cpu_blocks = manager._request_id_to_cpu_blocks.get(rid) if f.state.is_cpu_offloaded else None
                if cpu_blocks and fault.victim is None and f.state.position_offset > 1:
                    token = min(f.state.position_offset - 1, manager.cache.block_size - 1) // 2
                    row = manager._cpu_key_cache[0][cpu_blocks[0], token].view(-1).view(__import__("torch").uint8)
                    col = fault.rng.randrange(row.numel())
                    row[col] ^= 0x08
                    fault.victim, fault.victim_min_past = rid, token
                    fault.armed_step = fault.handle.steps + 1
                    fault.detail = f"{rid}: CPU pool block {cpu_blocks[0]}, position {token}, byte {col} of layer 0"
                    setattr(cls, "restore_scheduled_requests", inner)  # once
            return inner(manager, requests_in_batch)

        cls.restore_scheduled_requests = restore_scheduled_requests
        return True


ALL_FAULTS = (KvByteFlip, BlockTableOverwrite, DoubleAllocation, UseAfterFree, StalePrefixHit, OffloadedByteFlip)


def run_stale_prefix_scenario(model, handle, seed: int = 7) -> StalePrefixHit:
    """The workload that makes a stale prefix hit possible, with the fault planted: a prompt finishes (its prefix
    blocks stay cached), a long request needs 22 of 24 blocks (the allocator evicts and reuses the last cached one),
    and the same prefix is sent while it runs (from the engine's thread, so the timing is exact)."""
    from transformers import ContinuousBatchingConfig, GenerationConfig

    r = random.Random(seed)
    vocab = model.config.vocab_size
    prefix = [r.randrange(vocab) for _ in range(48)]
    fault = StalePrefixHit().install(handle)
    manager = model.init_continuous_batching(
        generation_config=GenerationConfig(max_new_tokens=8, do_sample=False, eos_token_id=-1),
        continuous_batching_config=ContinuousBatchingConfig(block_size=16, num_blocks=24, max_batch_tokens=128))
    watch, sent = handle.on_step, []

    def send_again_once_reused(step, m, bd):
        watch(step, m, bd)
        if fault.reused and not sent:
            sent.append(True)
            manager.add_request(prefix + [4, 5, 6], request_id="again", max_new_tokens=8)

    manager.start()
    try:
        manager.add_request(prefix + [1, 2, 3], request_id="first", max_new_tokens=8)
        if manager.get_result(request_id="first", timeout=120) is None:
            raise RuntimeError("stale prefix scenario: no result for 'first'")
        handle.on_step = send_again_once_reused
        manager.add_request([r.randrange(vocab) for _ in range(200)], request_id="filler", max_new_tokens=152)
        for rid in ("filler", "again"):
            if manager.get_result(request_id=rid, timeout=300) is None:
                raise RuntimeError(f"stale prefix scenario: no result for {rid!r}")
    finally:
        manager.stop(block=True, timeout=60)
        handle.on_step = watch
    return fault


def unpinned_offload_pool(set_attribute=setattr) -> None:
    """transformers pins its CPU swap pool, which needs an NVIDIA driver: on a machine without one, give it plain
    host memory (its module's torch.empty loses pin_memory; nothing else changes). set_attribute: e.g. pytest's
    monkeypatch.setattr, to undo it after a test."""
    import torch
    from transformers.generation.continuous_batching import offloading_manager

    class Torch:
        def __getattr__(self, name):
            return getattr(torch, name)

        @staticmethod
        def empty(*args, pin_memory=False, **kwargs):
            return torch.empty(*args, **kwargs)

    set_attribute(offloading_manager, "torch", Torch())
