"""CUDA tests (marked gpu; skipped without torch + a CUDA device): torch CUDA tensors through the API,
streams, the current device, a first use under capture, CuPy arrays, and a torch.cuda.graph capture of
plan -> verify -> write between torch ops replayed 8 times with refilled inputs, each replay equal to the
original's references (the drop-in's differential suite on CUDA is test_sglang_differential.py's
`cuda` parameters). Run on the device machine: `pytest -m gpu unit_tests/python`."""

from __future__ import annotations

import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import kvcanary as kc  # noqa: E402

pytestmark = pytest.mark.gpu


def cuda():
    return torch.device("cuda", torch.cuda.current_device())


def plan_args(device, bs=3, width=16, vcap=64, wcap=8, with_identities=False):
    gen = torch.Generator().manual_seed(bs)
    rtt = torch.randperm(4 * width, generator=gen).to(torch.int32).reshape(4, width)
    return dict(req_pool_indices=torch.tensor([1, 0, 3][:bs] + [2] * max(0, bs - 3), device=device),
                prefix_lens=torch.tensor([5, 99, 9][:bs] + [3] * max(0, bs - 3), device=device),
                extend_seq_lens=torch.tensor([2, 7, 1][:bs] + [1] * max(0, bs - 3), device=device),
                req_to_token=rtt.to(device),
                verify_plan=kc.VerifyPlan.allocate(vcap, with_identities=with_identities, device=device),
                write_plan=kc.WritePlan.allocate(wcap, with_identities=with_identities, device=device),
                status=kc.PlanStatus.allocate(device=device), workspace=kc.PlanWorkspace.allocate(64, device=device))


@pytest.mark.parametrize("algorithm", ["default", "portable", "cuda-persistent"])
def test_cuda_plan_equals_host_plan_and_keeps_the_current_device(algorithm):
    device = cuda()
    before = torch.cuda.current_device()
    on_gpu, on_host = plan_args(device), plan_args(torch.device("cpu"))
    kc.plan(algorithm=algorithm, **on_gpu)
    kc.plan(**on_host)
    torch.cuda.synchronize()
    assert torch.cuda.current_device() == before
    for name in ("verify_slot_indices", "verify_expected_positions", "verify_prev_slot_indices", "verify_num_valid",
                 "enable"):
        assert torch.equal(getattr(on_gpu["verify_plan"], name).cpu(), getattr(on_host["verify_plan"], name)), name
    for name in ("write_offsets", "write_seed_slot_indices", "write_num_valid_reqs"):
        assert torch.equal(getattr(on_gpu["write_plan"], name).cpu(), getattr(on_host["write_plan"], name)), name


@pytest.mark.parametrize("algorithm", ["default", "portable", "cuda-persistent"])
def test_cuda_plan_copies_identities_like_the_host(algorithm):
    # SPEC-CANARY §11.7: one more launch, reading the offsets every plan path leaves in the workspace.
    device = cuda()
    on_gpu, on_host = plan_args(device, with_identities=True), plan_args(torch.device("cpu"), with_identities=True)
    kc.plan(algorithm=algorithm, req_identities=torch.tensor([11, 12, -13], device=device), **on_gpu)
    kc.plan(req_identities=torch.tensor([11, 12, -13]), **on_host)
    torch.cuda.synchronize()
    assert on_host["write_plan"].write_identities[:3].tolist() == [11, 12, -13]
    for plan, name in (("verify_plan", "verify_identities"), ("write_plan", "write_identities")):
        assert torch.equal(getattr(on_gpu[plan], name).cpu(), getattr(on_host[plan], name)), name


def test_mixed_devices_are_refused():
    args = plan_args(cuda())
    args["prefix_lens"] = args["prefix_lens"].cpu()
    with pytest.raises(ValueError, match=r"kvcanary\.plan: prefix_lens is on cpu but req_pool_indices is on cuda"):
        kc.plan(**args)


def test_calls_follow_the_current_stream():
    device = cuda()
    s = torch.cuda.Stream(device)
    args = plan_args(device)
    with torch.cuda.stream(s):
        kc.plan(**args)
        n = args["verify_plan"].verify_num_valid.clone()  # ordered after the plan on s only
    s.synchronize()
    assert int(n[0]) == 14


def test_first_use_under_capture_raises_and_eager_calls_still_work():
    device = cuda()
    args = plan_args(device)
    s = torch.cuda.Stream(device)
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="during CUDA-graph capture"):
        with torch.cuda.graph(g, stream=s):
            kc.plan(**args)
    kc.plan(**args)
    torch.cuda.synchronize()
    assert int(args["verify_plan"].verify_num_valid[0]) == 14


def test_read_report_refuses_inside_a_capture():
    device = cuda()
    ring = kc.ViolationRing.allocate(4, device=device)
    s = torch.cuda.Stream(device)
    with torch.cuda.stream(s):
        kc.read_report(ring)  # outside: fine
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="never inside a capture"):
        with torch.cuda.graph(g, stream=s):
            kc.read_report(ring)


def test_cupy_arrays_with_an_explicit_stream():
    cupy = pytest.importorskip("cupy")
    vp = kc.VerifyPlan.allocate(64, library="cupy")
    wp, st, ws = kc.WritePlan.allocate(8, library="cupy"), kc.PlanStatus.allocate(library="cupy"), \
        kc.PlanWorkspace.allocate(8, library="cupy")
    rtt = cupy.arange(64, dtype=cupy.int32).reshape(4, 16)
    s = cupy.cuda.Stream()
    kc.plan(req_pool_indices=cupy.array([2], cupy.int64), prefix_lens=cupy.array([7], cupy.int64),
            extend_seq_lens=cupy.array([1], cupy.int64), req_to_token=rtt, verify_plan=vp, write_plan=wp, status=st,
            workspace=ws, stream=s)
    s.synchronize()
    assert vp.verify_slot_indices[:7].get().tolist() == list(range(32, 39))


def test_graph_of_plan_verify_write_between_torch_ops_replays_like_the_original():
    sglang_original = pytest.importorskip("sglang_original")
    if sglang_original.root() is None:
        pytest.skip("the original sglang package is not available (KVCANARY_SGLANG_ROOT)")
    O = sglang_original.load()
    import kvcanary.sglang as K

    device = cuda()
    rng = random.Random(7)
    max_reqs, width, bs, tokens_per_step = 4, 32, 3, 6
    rtt = torch.randperm(max_reqs * width, generator=torch.Generator().manual_seed(1)).to(torch.int32) + 1
    rtt = rtt.reshape(max_reqs, width)
    spare = max_reqs * width + 1  # slots no page-table entry names: where an engine bug writes
    num_slots = spare + width + 1
    expected = torch.randint(0, 50000, (max_reqs, width + 1), dtype=torch.int32)

    def make(module, dev):
        ctx = module.VerifyOrWriteContext(
            canary_buf=torch.zeros(num_slots, 32, dtype=torch.uint8, device=dev),
            kernel_kind=module.CanaryLaunchTag.HEAD_K_FULL,
            violation_ring=torch.zeros(256, 8, dtype=torch.int64, device=dev),
            violation_write_index=torch.zeros(1, dtype=torch.int32, device=dev),
            slot_run_counter=torch.zeros(1, dtype=torch.int64, device=dev),
            kernel_run_counter=torch.zeros(1, dtype=torch.int64, device=dev), real_kv_sources=(),
            real_kv_hash_mode=(K.RealKvHashMode if module is K else O.consts.RealKvHashMode).NONE,
            enable_chain_position_assert=torch.ones(1, dtype=torch.int32, device=dev))
        vp = (K.VerifyPlan if module is K else O.verify.VerifyPlan).allocate(verify_capacity=max_reqs * width,
                                                                            device=dev)
        wp = (K.WritePlan if module is K else O.write.WritePlan).allocate(write_req_capacity=bs, device=dev)
        return ctx, vp, wp

    kv, ref = make(K, device), make(O.verify, torch.device("cpu"))
    # Static inputs, refilled in place before each replay (the engine's staging buffers).
    static = dict(rpi=torch.zeros(bs, dtype=torch.int64, device=device),
                  prefix=torch.zeros(bs, dtype=torch.int64, device=device),
                  extend=torch.zeros(bs, dtype=torch.int64, device=device),
                  valid=torch.zeros(bs, dtype=torch.int64, device=device),
                  ids=torch.zeros(tokens_per_step, dtype=torch.int64, device=device),
                  pos=torch.zeros(tokens_per_step, dtype=torch.int64, device=device),
                  loc=torch.full((tokens_per_step,), -1, dtype=torch.int64, device=device))
    rtt_d, expected_d = rtt.to(device), expected.to(device)
    x = torch.ones(1024, device=device)

    def step(module, state, t, rtt_t, expected_t, launch_plan):
        ctx, vp, wp = state
        launch_plan(verify_plan_out=vp, write_plan_out=wp, req_pool_indices=t["rpi"], prefix_lens=t["prefix"],
                    extend_seq_lens=t["extend"], req_to_token=rtt_t, swa_window_size=0,
                    full_to_swa_index_mapping=None, verify_capacity=vp.verify_slot_indices.shape[0],
                    req_to_verify_expected_tokens=expected_t, req_to_verify_expected_tokens_valid_lens=t["valid"],
                    kv_token_id_vs_position_offset=0)
        (K.launch_canary_verify_kernel if module is K else O.verify_ref.launch_canary_verify_kernel_torch_reference)(
            context=ctx, plan=vp, check_verify_expected_token=True)
        (K.launch_canary_write_kernel if module is K else O.write_ref.launch_canary_write_kernel_torch_reference)(
            context=ctx, plan=wp, input_ids=t["ids"], positions=t["pos"], out_cache_loc=t["loc"],
            enable_write_input_assert=False, expected_input_tokens=None, expected_input_positions=None)

    def kv_step():
        y = x * 2  # a torch op before
        step(K, kv, static, rtt_d, expected_d, K.launch_canary_plan_kernels)
        return y + 1  # and after

    lengths = [0] * max_reqs

    def refill():
        rows = rng.sample(range(1, max_reqs), bs - 1) + [0]
        rng.shuffle(rows)
        ids, pos, loc, prefix, extend = [], [], [], [], []
        budget = tokens_per_step
        for rp in rows:
            n = 0 if rp == 0 else min(rng.randint(1, 3), budget, width - lengths[rp])
            prefix.append(lengths[rp] if rp else 0)
            extend.append(n)
            for p in range(lengths[rp], lengths[rp] + n):
                ids.append(int(expected[rp, p]))
                pos.append(p)
                loc.append(int(rtt[rp, p]) if rng.random() > 0.1 else spare + p)  # an engine bug now and then
            budget -= n
            if rp:
                lengths[rp] += n
        pad = tokens_per_step - len(ids)
        host = dict(rpi=rows, prefix=prefix, extend=extend,
                    valid=[lengths[rp] if rp else 0 for rp in rows],
                    ids=ids + [0] * pad, pos=pos + [0] * pad, loc=loc + [-1] * pad)
        for key, values in host.items():
            static[key].copy_(torch.tensor(values, dtype=torch.int64))
        return {key: torch.tensor(values, dtype=torch.int64) for key, values in host.items()}

    def compare(replay):
        torch.cuda.synchronize()
        ctx, vp, wp = kv
        rctx, rvp, rwp = ref
        for name in ("canary_buf", "violation_write_index", "slot_run_counter", "kernel_run_counter"):
            assert torch.equal(getattr(ctx, name).cpu(), getattr(rctx, name)), f"replay {replay}: {name}"
        count = min(int(rctx.violation_write_index[0]), 256)
        assert sorted(ctx.violation_ring[:count].cpu().tolist()) == sorted(rctx.violation_ring[:count].tolist())
        for name in ("verify_num_valid", "enable"):
            assert torch.equal(getattr(vp, name).cpu(), getattr(rvp, name)), f"replay {replay}: {name}"
        n = int(rvp.verify_num_valid[0])
        for name in ("verify_slot_indices", "verify_expected_tokens", "verify_expected_positions",
                     "verify_prev_slot_indices"):
            assert torch.equal(getattr(vp, name)[:n].cpu(), getattr(rvp, name)[:n]), f"replay {replay}: {name}"
        for name in ("write_offsets", "write_num_valid_reqs"):
            assert torch.equal(getattr(wp, name).cpu(), getattr(rwp, name)), f"replay {replay}: {name}"

    s = torch.cuda.Stream(device)
    s.wait_stream(torch.cuda.current_stream(device))
    host = refill()  # one eager warm-up step on the capture stream
    with torch.cuda.stream(s):
        kv_step()
    step(O.verify, ref, host, rtt, expected, O.plan_ref.launch_canary_plan_kernels_torch_reference)
    compare("warm-up")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        out = kv_step()
    before = torch.cuda.current_device()
    for replay in range(8):
        host = refill()
        g.replay()
        step(O.verify, ref, host, rtt, expected, O.plan_ref.launch_canary_plan_kernels_torch_reference)
        compare(replay)
        assert torch.equal(out, torch.full_like(out, 3.0))
    assert torch.cuda.current_device() == before
    assert int(kv[0].kernel_run_counter[0]) == 2 * 9 + 0  # verify + write per step, warm-up included


def test_numpy_arrays_still_work_in_a_cuda_build():
    vp = kc.VerifyPlan.allocate(8, library="numpy")
    kc.plan(req_pool_indices=np.array([1], np.int64), prefix_lens=np.array([2], np.int64),
            extend_seq_lens=np.array([1], np.int64), req_to_token=np.arange(8, dtype=np.int32).reshape(2, 4),
            verify_plan=vp, write_plan=kc.WritePlan.allocate(1), status=kc.PlanStatus.allocate(),
            workspace=kc.PlanWorkspace.allocate(1))
    assert vp.verify_slot_indices[:2].tolist() == [4, 5]


def canary_run(device, graph=False):
    """test_canary.py's three steps (a stale K record before the third) through kvcanary.Canary on torch
    tensors of `device`; with graph, each step's before_forward is one torch.cuda.graph replay over static
    batch buffers refilled in place (the Canary's stream is the capture stream)."""
    from test_canary import POOL, REQS, STEPS, dims, req_to_token, step_arrays

    table = req_to_token()
    k = torch.zeros((POOL, 32), dtype=torch.uint8, device=device)
    v = torch.zeros_like(k)
    stream = torch.cuda.Stream() if graph else None
    canary = kc.Canary(req_to_token=torch.from_numpy(table).to(device), target=kc.GroupArrays(k=k, v=v),
                       report_mode="none", dimensions=dims(), stream=stream)
    arrays = [step_arrays(table, *step) for step in STEPS]
    as_torch = lambda d: {n: torch.from_numpy(a).to(device) for n, a in d.items()}  # noqa: E731
    rows = []
    if graph:  # static buffers of the largest step, padded with pool row 0 and zero lengths
        tokens = max(len(t["input_ids"]) for _, t in arrays)
        static = {n: torch.zeros(REQS if n in ("req_pool_indices", "prefix_lens", "extend_seq_lens") else tokens,
                                 dtype=torch.int64, device=device)
                  for n in ("req_pool_indices", "prefix_lens", "extend_seq_lens", "input_ids", "positions",
                            "out_cache_loc")}
        batch = kc.ForwardBatch(req_pool_indices=static["req_pool_indices"], prefix_lens=static["prefix_lens"],
                                extend_seq_lens=static["extend_seq_lens"],
                                tokens=kc.ForwardTokens(input_ids=static["input_ids"], positions=static["positions"],
                                                        out_cache_loc=static["out_cache_loc"]))
        with torch.cuda.stream(stream):
            canary.before_forward(batch)  # warm-up on the capture stream (all-padding batch)
        stream.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            canary.before_forward(batch)
    for n, (b, t) in enumerate(arrays):
        if n == 2:
            k.view(torch.int64)[int(table[1, 1]), 0] += 1
        if graph:
            for name, a in list(b.items()) + list(t.items()):
                static[name].zero_()
                static[name][:len(a)] = torch.from_numpy(a).to(device)
            torch.cuda.synchronize()
            g.replay()
            stream.synchronize()
        else:
            canary.before_forward(kc.ForwardBatch(**as_torch(b), tokens=kc.ForwardTokens(**as_torch(t))))
        rows += canary.end_step().rows
    rows += canary.flush().rows
    return k.cpu().numpy(), v.cpu().numpy(), rows


def test_canary_on_cuda_equals_the_host_eager_and_in_a_graph():
    k_host, v_host, rows_host = canary_run(torch.device("cpu"))
    assert len(rows_host) == 1
    for graph in (False, True):
        k, v, rows = canary_run(cuda(), graph=graph)
        assert np.array_equal(k, k_host) and np.array_equal(v, v_host) and rows == rows_host, graph


def test_canary_report_calls_refuse_inside_a_capture():
    from test_canary import dims, req_to_token

    stream = torch.cuda.Stream()
    canary = kc.Canary(req_to_token=torch.from_numpy(req_to_token()).to(cuda()), report_mode="none",
                       dimensions=dims(), stream=stream)
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="never inside a CUDA-graph capture"):
        with torch.cuda.graph(g, stream=stream):
            canary.end_step()
