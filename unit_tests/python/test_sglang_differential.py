"""kvcanary.sglang against the original system's torch references, byte for byte (CPU tensors).

Each stage draws KVCANARY_DIFF_CASES cases (default 1,000) with the original's own fixture helpers
(sglang/test/kernels/kv_canary/_fixtures.py, _canary_helpers.py): plan, write, verify, and multi-step
plan -> verify -> write chains. Both sides get identical inputs, outputs poisoned with identical garbage;
afterwards every output tensor (the untouched parts too), the canary buffer's bytes, the ring, its
count and both run counters must be equal. Ring rows are compared as a multiset where the SPEC leaves
their order open (SPEC-CANARY §1); on an overflowing ring the kept rows must be ones the reference
produced (from a second reference run with room for all of them).

Where kvcanary's SPEC deliberately differs from the original, the cases below stay inside the shared
contract and test_sglang_dropin.py checks kvcanary's side (bad rows, out-of-range slots, batch size).
"""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest

torch = pytest.importorskip("torch")

import sglang_original  # noqa: E402

CPU = torch.device("cpu")
CASES = int(os.environ.get("KVCANARY_DIFF_CASES", "1000"))
CHUNKS = 10

if sglang_original.root() is None:
    if os.environ.get("KVCANARY_REQUIRE_ORIGINAL"):
        raise RuntimeError("KVCANARY_REQUIRE_ORIGINAL is set but KVCANARY_SGLANG_ROOT has no sglang 0.5.23")
    pytest.skip("the original sglang package is not available (KVCANARY_SGLANG_ROOT)", allow_module_level=True)

O = sglang_original.load()
F, H = O.fixtures, O.helpers
import kvcanary.sglang as K  # noqa: E402


def cases(chunk):
    per = (CASES + CHUNKS - 1) // CHUNKS
    return range(chunk * per, min(CASES, (chunk + 1) * per))


def poison(rng, shape, dtype):
    g = torch.Generator().manual_seed(rng.randrange(1 << 62))
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, dtype=torch.uint8, generator=g)
    return torch.randint(-(1 << 40), 1 << 40, shape, dtype=torch.int64, generator=g).to(dtype)


def i64(values):
    return torch.tensor(values, dtype=torch.int64)


def equal(name, a, b, seed):
    a = a.cpu()
    assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), (
        f"case {seed}: {name} differs\n kvcanary: {a.tolist()}\n original: {b.tolist()}")


def check_ring(kv, ref, ref_all_rows, seed):
    """kv / ref: (ring, write_index, slot_run_counter, kernel_run_counter)."""
    kv = [t.cpu() for t in kv]
    equal("violation_write_index", kv[1], ref[1], seed)
    equal("slot_run_counter", kv[2], ref[2], seed)
    equal("kernel_run_counter", kv[3], ref[3], seed)
    count, capacity = int(ref[1][0]), kv[0].shape[0]
    before = ref_all_rows[0]
    held = max(0, min(count, capacity))
    start = max(0, min(before, capacity))
    equal("ring rows outside this call's", kv[0][:start], ref[0][:start], seed)
    equal("ring rows past the count (untouched)", kv[0][held:], ref[0][held:], seed)
    new_kv = Counter(tuple(r) for r in kv[0][start:held].tolist())
    if count <= capacity:
        assert new_kv == Counter(tuple(r) for r in ref[0][start:held].tolist()), f"case {seed}: ring rows differ"
    else:
        produced = Counter(tuple(r) for r in ref_all_rows[1])
        assert not (new_kv - produced), f"case {seed}: ring holds rows the original never produced"


class Log:
    """A FakeViolationLog pair: identical poisoned tensors on both sides."""

    def __init__(self, rng, capacity):
        ring = poison(rng, (capacity, 8), torch.int64)
        start = rng.choice([0, 0, 0, rng.randint(0, capacity + 2)])
        index = torch.tensor([start], dtype=torch.int32)
        srun, krun = i64([rng.randint(0, 1000)]), i64([rng.randint(0, 1000)])
        self.tensors = [ring, index, srun, krun]
        self.flag = torch.tensor([rng.choice([0, 1, 1])], dtype=torch.int32)

    def clone(self):
        return [t.clone() for t in self.tensors], self.flag.clone()


def on(device, value):
    return value.to(device) if isinstance(value, torch.Tensor) else value


def contexts(log, buf, kind, sources, mode, device=CPU):
    """(kvcanary context on `device`, original context, original context with a big ring) on one input."""
    out = []
    for module in (K, O.verify, O.verify):
        (ring, index, srun, krun), flag = log.clone()
        dev = device if module is K else CPU
        if len(out) == 2:  # the reference again, with room for every row (the overflow check)
            ring = torch.zeros((ring.shape[0] + 4096, 8), dtype=torch.int64)
        src_cls = K.RealKvSource if module is K else O.verify.RealKvSource
        srcs = tuple(src_cls(tensor=on(dev, s.tensor), page_size=s.page_size, num_bytes_per_token=s.num_bytes_per_token,
                             read_bytes=s.read_bytes) for s in sources)
        ctx = module.VerifyOrWriteContext(
            canary_buf=on(dev, buf.clone()), kernel_kind=module.CanaryLaunchTag(kind), violation_ring=on(dev, ring),
            violation_write_index=on(dev, index), slot_run_counter=on(dev, srun), kernel_run_counter=on(dev, krun),
            real_kv_sources=srcs, real_kv_hash_mode=(K.RealKvHashMode if module is K else O.consts.RealKvHashMode)(mode),
            enable_chain_position_assert=on(dev, flag))
        out.append(ctx)
    return out


def produced(all_context, log):
    """(the ring's count before the case, every row the reference produced since) from the big-ring run."""
    start = int(log.tensors[1][0])
    end = int(all_context.violation_write_index[0])
    return start, all_context.violation_ring[start:end].tolist()


def state(ctx):
    return (ctx.violation_ring, ctx.violation_write_index, ctx.slot_run_counter, ctx.kernel_run_counter)


def real_kv(rng, num_slots):
    count = rng.choice([0, 0, 1, 2, 4])
    mode = rng.choice([0, 1, 2]) if count else rng.choice([0, 0, 1])
    if count == 0:
        return (), mode
    sources = F.make_real_kv_sources(count=count, num_bytes_per_token=rng.choice([16, 32, 48]),
                                     page_size=rng.choice([1, 2, 4]), num_slots=num_slots, device=CPU, rng=rng,
                                     fill_strategy=rng.choice(["constant_per_source", "random_bytes"]),
                                     row_gap=rng.choice([0, 0, 16]))
    if mode == 2:  # ALL reads read_bytes, which may be less than the token's bytes
        sources = tuple(type(s)(tensor=s.tensor, page_size=s.page_size, num_bytes_per_token=s.num_bytes_per_token,
                                read_bytes=rng.choice(range(16, s.num_bytes_per_token + 1, 16))) for s in sources)
    return sources, mode


# ---------------------------------------------------------------- plan

def plan_inputs(rng):
    max_reqs, max_seq_len = rng.randint(2, 8), rng.randint(1, 40)
    rtt = F.make_req_to_token(kind=rng.choice(["linear", "sparse_permuted"]), max_reqs=max_reqs,
                              max_seq_len=max_seq_len, device=CPU, rng=rng)
    bs = rng.randint(1, 12)
    pad = F.make_padding_mask(bs=bs, kind=rng.choice(["none", "trailing", "interleaved"]), rng=rng)
    rpi = [0 if pad[r] else rng.randint(1, max_reqs - 1) for r in range(bs)]
    # Padding rows carry garbage: neither side may look at it.
    prefix = [rng.randint(-9, 10 ** 6) if pad[r] else rng.randint(0, max_seq_len) for r in range(bs)]
    extend = [rng.randint(-9, 10 ** 6) if pad[r] else rng.choice([0, 1, 1, 2, 3, -1, rng.randint(1, 300)])
              for r in range(bs)]
    swa = rng.choice([0, 0, rng.randint(1, max_seq_len + 2)])
    lut = None
    if swa > 0 or rng.random() < 0.2:
        lut = F.make_lut(kind=rng.choice(["identity", "shift", "permutation", "with_oob"]),
                         pool_size=max_reqs * max_seq_len, device=CPU, rng=rng)
    pool = valid = None
    if rng.random() < 0.5:
        cols = rng.randint(1, max_seq_len + 2)
        pool = torch.randint(-(1 << 31), (1 << 31) - 1, (max_reqs, cols), dtype=torch.int32,
                             generator=torch.Generator().manual_seed(rng.randrange(1 << 30)))
        valid = i64([rng.randint(0, cols) for _ in range(bs)])
    offset = rng.choice([0, 1])
    total = 0
    for r in range(bs):
        if rpi[r]:
            start = max(0, prefix[r] - swa) if swa > 0 else 0
            total += max(0, prefix[r] - start)
    vcap, wcap = F.derive_plan_capacity(kind=rng.choice(["loose", "tight_match", "under_by_one"]),
                                        total_verify=total, extras_count=0, bs=bs)
    if rng.random() < 0.3:
        wcap = bs
    return dict(req_pool_indices=i64(rpi), prefix_lens=i64(prefix), extend_seq_lens=i64(extend), req_to_token=rtt,
                swa_window_size=swa, full_to_swa_index_mapping=lut, verify_capacity=vcap,
                req_to_verify_expected_tokens=pool, req_to_verify_expected_tokens_valid_lens=valid,
                kv_token_id_vs_position_offset=offset), wcap


def plan_outputs(rng, vcap, wcap):
    return [poison(rng, (vcap,), torch.int64) for _ in range(4)] + [
        poison(rng, (1,), torch.int32), poison(rng, (1,), torch.int32), poison(rng, (wcap + 1,), torch.int64),
        poison(rng, (wcap,), torch.int64), poison(rng, (1,), torch.int32)]


def plan_pair(outputs, module_v, module_w, device=CPU):
    t = [x.clone().to(device) for x in outputs]
    return (module_v.VerifyPlan(verify_slot_indices=t[0], verify_expected_tokens=t[1], verify_expected_positions=t[2],
                                verify_prev_slot_indices=t[3], verify_num_valid=t[4], enable=t[5]),
            module_w.WritePlan(write_offsets=t[6], write_seed_slot_indices=t[7], write_num_valid_reqs=t[8]))


PLAN_FIELDS = ("verify_slot_indices", "verify_expected_tokens", "verify_expected_positions",
               "verify_prev_slot_indices", "verify_num_valid", "enable")
WRITE_FIELDS = ("write_offsets", "write_seed_slot_indices", "write_num_valid_reqs")


def compare_plans(kv, ref, seed):
    for name in PLAN_FIELDS:
        equal(name, getattr(kv[0], name), getattr(ref[0], name), seed)
    for name in WRITE_FIELDS:
        equal(name, getattr(kv[1], name), getattr(ref[1], name), seed)


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_plan_matches_original(chunk, device):
    for seed in cases(chunk):
        rng = random.Random(1_000_000 + seed)
        inputs, wcap = plan_inputs(rng)
        outputs = plan_outputs(rng, inputs["verify_capacity"], wcap)
        kv = plan_pair(outputs, K, K, device)
        ref = plan_pair(outputs, O.verify, O.write)
        K.launch_canary_plan_kernels(verify_plan_out=kv[0], write_plan_out=kv[1],
                                     **{k: on(device, v) for k, v in inputs.items()})
        O.plan_ref.launch_canary_plan_kernels_torch_reference(verify_plan_out=ref[0], write_plan_out=ref[1],
                                                              **inputs)
        compare_plans(kv, ref, seed)
        assert K.last_plan_status(torch.device(device)) == (0, -1), f"case {seed}: kvcanary flagged a good batch"


# ---------------------------------------------------------------- write

def write_case(rng):
    num_slots = rng.randint(8, 64)
    stride = rng.choice([32, 32, 40, 64])
    buf = poison(rng, (num_slots, stride), torch.uint8)
    nreq = rng.randint(0, 6)
    counts = [rng.randint(0, 6) for _ in range(nreq)]
    total = sum(counts)
    universe = list(range(num_slots))
    rng.shuffle(universe)
    take = min(total + nreq, num_slots)
    pool_slots = universe[:take]
    targets = pool_slots[:min(total, take)]
    while len(targets) < total:
        targets.append(-1)  # too few slots: skip the rest
    seeds = [rng.choice([-1, s]) for s in pool_slots[len(targets):]] + [-1] * nreq
    seeds = seeds[:nreq]
    loc = [s if rng.random() > 0.1 else -1 for s in targets] + [-1] * rng.randint(0, 3)
    n = len(loc)
    ids = [rng.choice([rng.randint(0, 50000), rng.randint(-(1 << 63), (1 << 63) - 1)]) for _ in range(n)]
    positions = []
    for r in range(nreq):
        p = rng.randint(0, 1000)
        for _ in range(counts[r]):
            positions.append(p if rng.random() > 0.15 else rng.randint(-5, 2000))
            p += 1
    positions += [rng.randint(0, 10) for _ in range(n - len(positions))]
    offsets = [0]
    for c in counts:
        offsets.append(offsets[-1] + c)
    num_valid = rng.choice([nreq, nreq, rng.randint(0, nreq), -1]) if nreq else rng.choice([0, 0, -1])
    cap = nreq + rng.choice([0, 0, 3])
    assert_input = rng.random() < 0.5
    exp_ids = [i if rng.random() > 0.2 else rng.randint(0, 99) for i in ids] if assert_input else None
    exp_pos = [p if rng.random() > 0.2 else p + 1 for p in positions] if assert_input else None
    return locals()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_write_matches_original(chunk, device):
    for seed in cases(chunk):
        rng = random.Random(2_000_000 + seed)
        c = write_case(rng)
        plan = H.make_write_plan(write_offsets=c["offsets"], seed_slot_indices=c["seeds"], num_valid_reqs=c["num_valid"],
                                 req_capacity=max(c["cap"], 1), device=CPU)
        plan.write_offsets[c["nreq"] + 1:] = 0
        plan.write_seed_slot_indices[c["nreq"]:] = -1
        sources, mode = real_kv(rng, c["num_slots"])
        log = Log(rng, rng.choice([0, 1, 4, 64]))
        kind = rng.randrange(12)
        kvc, refc, allc = contexts(log, c["buf"], kind, sources, mode, device)
        tensors = dict(input_ids=i64(c["ids"]), positions=i64(c["positions"]), out_cache_loc=i64(c["loc"]),
                       enable_write_input_assert=c["assert_input"],
                       expected_input_tokens=i64(c["exp_ids"]) if c["assert_input"] else None,
                       expected_input_positions=i64(c["exp_pos"]) if c["assert_input"] else None)
        kv_plan = K.WritePlan(write_offsets=plan.write_offsets.clone().to(device),
                              write_seed_slot_indices=plan.write_seed_slot_indices.clone().to(device),
                              write_num_valid_reqs=plan.write_num_valid_reqs.clone().to(device))
        K.launch_canary_write_kernel(context=kvc, plan=kv_plan, **{k: on(device, v) for k, v in tensors.items()})
        O.write_ref.launch_canary_write_kernel_torch_reference(context=refc, plan=plan, **tensors)
        O.write_ref.launch_canary_write_kernel_torch_reference(context=allc, plan=plan, **tensors)
        equal("canary_buf", kvc.canary_buf, refc.canary_buf, seed)
        check_ring(state(kvc), state(refc), produced(allc, log), seed)


# ---------------------------------------------------------------- verify

def verify_case(rng):
    num_slots = rng.randint(8, 64)
    stride = rng.choice([32, 32, 48, 64])
    buf = torch.zeros((num_slots, stride), dtype=torch.uint8) if rng.random() < 0.5 else poison(
        rng, (num_slots, stride), torch.uint8)
    slots = list(range(1, num_slots))
    rng.shuffle(slots)
    entries = []  # (slot, position, prev, expected token)
    other = buf.clone()
    cursor = 0
    for _ in range(rng.randint(1, 4)):
        length = rng.randint(1, 10)
        chain = slots[cursor:cursor + length]
        cursor += len(chain)
        if not chain:
            break
        tokens = [rng.randint(0, 50000) for _ in chain]
        base = rng.choice([0, rng.randint(0, 100)])
        positions = list(range(base, base + len(chain)))
        H.stamp_clean_chain(cuda_buf=buf, ref_buf=other, slot_indices=chain, tokens=tokens, positions=positions,
                            real_kv_hashes=[rng.choice([0, rng.randint(0, 1 << 63)]) for _ in chain])
        first = rng.randint(0, len(chain) - 1) if rng.random() < 0.3 else 0
        for j in range(first, len(chain)):
            prev = chain[j - 1] if j > 0 else -1
            entries.append([chain[j], positions[j], prev, rng.choice([-1, tokens[j], tokens[j], rng.randint(0, 9)])])
    for e in entries:  # corruptions the plan or the buffer can carry
        roll = rng.random()
        if roll < 0.05:
            e[0] = 0
        elif roll < 0.1:
            e[2] = 0
        elif roll < 0.15:
            e[1] += rng.choice([-1, 1])
        elif roll < 0.2:
            e[2] = rng.randrange(num_slots)
    view = buf.view(torch.int64)
    for _ in range(rng.choice([0, 0, 1, 3])):
        view[rng.randrange(num_slots), rng.randrange(4)] = rng.randint(-(1 << 63), (1 << 63) - 1)
    n = len(entries)
    cap = n + rng.choice([0, 0, 2, 5])
    tail = [[rng.randrange(num_slots), rng.randint(0, 9), rng.randrange(-1, num_slots), -1] for _ in range(cap - n)]
    num_valid = rng.choice([n, n, n, cap, max(n - 1, 0), -1, cap + 7])
    enable = rng.choice([1, 1, 1, 1, 0])
    return buf, entries + tail, num_valid, enable, rng.random() < 0.7


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_verify_matches_original(chunk, device):
    for seed in cases(chunk):
        rng = random.Random(3_000_000 + seed)
        buf, rows, num_valid, enable, check_token = verify_case(rng)
        sources, mode = real_kv(rng, buf.shape[0])
        log = Log(rng, rng.choice([0, 1, 4, 64]))
        kvc, refc, allc = contexts(log, buf, rng.randrange(12), sources, mode, device)
        cap = max(len(rows), 1)
        columns = [i64([r[k] for r in rows] or [0]) for k in (0, 3, 1, 2)]
        plans = []
        for module, dev in ((K, device), (O.verify, CPU)):
            plans.append(module.VerifyPlan(
                verify_slot_indices=columns[0].to(dev), verify_expected_tokens=columns[1].to(dev),
                verify_expected_positions=columns[2].to(dev), verify_prev_slot_indices=columns[3].to(dev),
                verify_num_valid=torch.tensor([num_valid], dtype=torch.int32, device=dev),
                enable=torch.tensor([enable], dtype=torch.int32, device=dev)))
        assert plans[0].verify_slot_indices.shape[0] == cap
        K.launch_canary_verify_kernel(context=kvc, plan=plans[0], check_verify_expected_token=check_token)
        O.verify_ref.launch_canary_verify_kernel_torch_reference(context=refc, plan=plans[1],
                                                                 check_verify_expected_token=check_token)
        O.verify_ref.launch_canary_verify_kernel_torch_reference(context=allc, plan=plans[1],
                                                                 check_verify_expected_token=check_token)
        equal("canary_buf", kvc.canary_buf, refc.canary_buf, seed)
        for name in PLAN_FIELDS:
            equal(name, getattr(plans[0], name), getattr(plans[1], name), seed)
        check_ring(state(kvc), state(refc), produced(allc, log), seed)


# ---------------------------------------------------------------- chains: plan -> verify -> write, step after step

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_chains_match_original(chunk, device):
    for seed in cases(chunk):
        run_chain(random.Random(4_000_000 + seed), seed, device)


def run_chain(rng, seed, device=CPU):
    max_reqs, max_seq_len = rng.randint(2, 5), rng.randint(4, 24)
    rtt = F.make_req_to_token(kind=rng.choice(["linear", "sparse_permuted"]), max_reqs=max_reqs,
                              max_seq_len=max_seq_len, device=CPU, rng=rng)
    pool_size = max_reqs * max_seq_len
    swa = rng.choice([0, 0, rng.randint(1, max_seq_len)])
    lut = F.make_lut(kind=rng.choice(["identity", "shift", "permutation"]), pool_size=pool_size, device=CPU,
                     rng=rng) if swa else None
    num_slots = pool_size + (101 if lut is not None else 1)
    tokens = torch.randint(0, 50000, (max_reqs, max_seq_len + 1), dtype=torch.int32,
                           generator=torch.Generator().manual_seed(rng.randrange(1 << 30)))
    offset = rng.choice([0, 1])
    sources, mode = real_kv(rng, num_slots)
    log = Log(rng, rng.choice([4, 64, 256]))
    log.flag.fill_(1)
    kvc, refc, allc = contexts(log, torch.zeros((num_slots, 32), dtype=torch.uint8), rng.randrange(12), sources, mode,
                               device)
    vcap, wcap = 8 * max_seq_len, 8
    outputs = plan_outputs(rng, vcap, wcap)
    kv_plans, ref_plans = plan_pair(outputs, K, K, device), plan_pair(outputs, O.verify, O.write)
    lengths = [0] * max_reqs
    for step in range(rng.randint(2, 5)):
        live = [rp for rp in range(1, max_reqs) if lengths[rp] < max_seq_len]
        rng.shuffle(live)
        batch = live[:rng.randint(1, max(1, len(live)))] if live else []
        rows = []
        for rp in batch:
            extend = min(rng.choice([1, 1, 2, 4, 8]), max_seq_len - lengths[rp])
            rows.append((rp, lengths[rp], extend))
        pads = rng.randint(0, 2)
        rows += [(0, rng.randint(0, 99), rng.randint(0, 99))] * pads
        rng.shuffle(rows)
        rpi, prefix, extend = (i64([r[k] for r in rows] or [0]) for k in range(3))
        if not rows:
            rpi, prefix, extend = i64([0]), i64([0]), i64([0])
        valid = i64([lengths[r[0]] + r[2] + offset if r[0] else 0 for r in rows] or [0])
        inputs = dict(req_pool_indices=rpi, prefix_lens=prefix, extend_seq_lens=extend, req_to_token=rtt,
                      swa_window_size=swa, full_to_swa_index_mapping=lut, verify_capacity=vcap,
                      req_to_verify_expected_tokens=tokens, req_to_verify_expected_tokens_valid_lens=valid,
                      kv_token_id_vs_position_offset=offset)
        K.launch_canary_plan_kernels(verify_plan_out=kv_plans[0], write_plan_out=kv_plans[1],
                                     **{k: on(device, v) for k, v in inputs.items()})
        O.plan_ref.launch_canary_plan_kernels_torch_reference(verify_plan_out=ref_plans[0],
                                                              write_plan_out=ref_plans[1], **inputs)
        compare_plans(kv_plans, ref_plans, seed)
        check = rng.random() < 0.8
        K.launch_canary_verify_kernel(context=kvc, plan=kv_plans[0], check_verify_expected_token=check)
        for ctx in (refc, allc):
            O.verify_ref.launch_canary_verify_kernel_torch_reference(context=ctx, plan=ref_plans[0],
                                                                     check_verify_expected_token=check)
        # The step's flat token arrays, in plan order; SWA slots translated by the caller (as the original's).
        ids, pos, loc = [], [], []
        for rp, start, count in zip(rpi.tolist(), prefix.tolist(), extend.tolist()):
            if rp == 0:
                continue
            for p in range(start, start + count):
                ids.append(int(tokens[rp, p + offset]) if p + offset <= max_seq_len else 7)
                pos.append(p)
                slot = int(rtt[rp, p])
                loc.append(int(lut[slot]) if lut is not None else slot)
        tail = rng.randint(0, 2)
        ids, pos, loc = ids + [0] * tail, pos + [0] * tail, loc + [-1] * tail
        write = dict(input_ids=i64(ids or [0]), positions=i64(pos or [0]), out_cache_loc=i64(loc or [-1]),
                     enable_write_input_assert=False, expected_input_tokens=None, expected_input_positions=None)
        K.launch_canary_write_kernel(context=kvc, plan=kv_plans[1], **{k: on(device, v) for k, v in write.items()})
        for ctx in (refc, allc):
            O.write_ref.launch_canary_write_kernel_torch_reference(context=ctx, plan=ref_plans[1], **write)
        equal(f"step {step} canary_buf", kvc.canary_buf, refc.canary_buf, seed)
        check_ring(state(kvc), state(refc), produced(allc, log), seed)
        for rp, _, count in rows:
            if rp:
                lengths[rp] += count
        if rng.random() < 0.3:  # a fault between steps, the same on both sides
            slot, field = rng.randrange(1, num_slots), rng.randrange(4)
            value = rng.randint(-(1 << 63), (1 << 63) - 1)
            for ctx in (kvc, refc, allc):
                ctx.canary_buf.view(torch.int64)[slot, field] = value
