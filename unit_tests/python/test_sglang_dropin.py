"""kvcanary.sglang where kvcanary's SPEC deliberately differs from the original (each test names the SPEC
line and checks kvcanary's side), plus its argument rules, on torch CPU tensors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import kvcanary.sglang as K  # noqa: E402

CPU = torch.device("cpu")
ANCHOR_HASH = -2414019407054260458


def plans(vcap=64, wcap=8):
    return (K.VerifyPlan.allocate(verify_capacity=vcap, device=CPU),
            K.WritePlan.allocate(write_req_capacity=wcap, device=CPU))


def plan(vp, wp, rpi, prefix, extend, rtt, **extra):
    args = dict(swa_window_size=0, full_to_swa_index_mapping=None, req_to_verify_expected_tokens=None,
                req_to_verify_expected_tokens_valid_lens=None, kv_token_id_vs_position_offset=0)
    args.update(extra)
    K.launch_canary_plan_kernels(verify_plan_out=vp, write_plan_out=wp, req_pool_indices=torch.tensor(rpi),
                                 prefix_lens=torch.tensor(prefix), extend_seq_lens=torch.tensor(extend),
                                 req_to_token=rtt, verify_capacity=vp.verify_slot_indices.shape[0], **args)


def linear(rows, cols):
    return torch.arange(rows * cols, dtype=torch.int32).reshape(rows, cols)


def context(num_slots=16, capacity=16, sources=(), mode=K.RealKvHashMode.NONE, index_dtype=torch.int32):
    return K.VerifyOrWriteContext(
        canary_buf=torch.zeros(num_slots, 32, dtype=torch.uint8), kernel_kind=K.CanaryLaunchTag.HEAD_V_FULL,
        violation_ring=torch.zeros(capacity, 8, dtype=torch.int64),
        violation_write_index=torch.zeros(1, dtype=index_dtype), slot_run_counter=torch.zeros(1, dtype=torch.int64),
        kernel_run_counter=torch.zeros(1, dtype=torch.int64), real_kv_sources=tuple(sources), real_kv_hash_mode=mode,
        enable_chain_position_assert=torch.ones(1, dtype=torch.int32))


def test_bad_row_contributes_nothing_and_is_reported():
    # SPEC §4: a pool row outside req_to_token is a bad row (bit 1); the original indexes out of bounds.
    vp, wp = plans(16, 4)
    plan(vp, wp, [1, 9, 2], [2, 3, 2], [1, 1, 1], linear(3, 8))
    assert int(vp.verify_num_valid[0]) == 4
    assert wp.write_offsets[:4].tolist() == [0, 1, 1, 2]
    assert K.last_plan_status() == (1, 1)


def test_prefix_past_the_page_table_is_bit_2():
    # SPEC §4 bit 2: prefix_lens > max_seq_len; the original reads past the row.
    vp, wp = plans(64, 4)
    plan(vp, wp, [1], [9], [1], linear(3, 8))
    assert int(vp.verify_num_valid[0]) == 0 and K.last_plan_status() == (2, 0)


def test_no_batch_size_limit():
    # SPEC §4 "No limit on bs": the original's CUDA plan refuses more than 4096 rows.
    bs = 5000
    vp, wp = plans(bs * 2, bs)
    plan(vp, wp, [1 + r % 3 for r in range(bs)], [2] * bs, [1] * bs, linear(4, 8))
    assert int(vp.verify_num_valid[0]) == 2 * bs and int(wp.write_offsets[bs]) == bs
    assert K.last_plan_status() == (0, -1)


def test_lut_index_past_the_lut_is_clamped():
    # SPEC §4 "T": a value >= lut_len is clamped to lut_len - 1 (the original's reference raises).
    vp, wp = plans(16, 4)
    plan(vp, wp, [1], [3], [1], linear(4, 16), swa_window_size=2, full_to_swa_index_mapping=torch.tensor([7, 8, 9]))
    assert vp.verify_slot_indices[:2].tolist() == [9, 9] and wp.write_seed_slot_indices[0] == 9


def test_write_slot_past_the_buffer_is_an_out_of_range_row():
    # SPEC-CANARY §4 "Out of range": row (slot, pos, token, -1, running, -1, 64); the original writes past it.
    ctx = context(num_slots=8)
    _, wp = plans(4, 1)
    wp.write_offsets.copy_(torch.tensor([0, 1]))
    wp.write_seed_slot_indices.fill_(-1)
    wp.write_num_valid_reqs.fill_(1)
    K.launch_canary_write_kernel(context=ctx, plan=wp, input_ids=torch.tensor([12]), positions=torch.tensor([2]),
                                 out_cache_loc=torch.tensor([20]), enable_write_input_assert=False,
                                 expected_input_tokens=None, expected_input_positions=None)
    assert ctx.violation_write_index.tolist() == [1]
    assert ctx.violation_ring[0].tolist() == [1, 20, 2, 12, -1, ANCHOR_HASH, -1, int(K.FailReason.OUT_OF_RANGE)]
    assert ctx.canary_buf.count_nonzero() == 0 and ctx.slot_run_counter.tolist() == [0]


def test_verify_negative_slot_is_an_out_of_range_row():
    # SPEC-CANARY §5.3: slot < 0 -> row (index, exp_pos, -1, exp_tok, -1, -1, 64); the original reads row -1.
    ctx = context()
    vp, _ = plans(1)
    for name, value in (("verify_slot_indices", -3), ("verify_expected_tokens", 5), ("verify_expected_positions", 4),
                        ("verify_prev_slot_indices", -1)):
        getattr(vp, name).fill_(value)
    vp.verify_num_valid.fill_(1)
    K.launch_canary_verify_kernel(context=ctx, plan=vp, check_verify_expected_token=True)
    assert ctx.violation_ring[0].tolist() == [1, -3, 4, -1, 5, -1, -1, 64]


def test_int64_violation_write_index_is_used_in_place():
    ctx = context(index_dtype=torch.int64)
    vp, _ = plans(1)
    vp.verify_slot_indices.fill_(5)
    vp.verify_expected_positions.fill_(9)
    vp.verify_prev_slot_indices.fill_(-1)
    vp.verify_expected_tokens.fill_(-1)
    vp.verify_num_valid.fill_(1)
    K.launch_canary_verify_kernel(context=ctx, plan=vp, check_verify_expected_token=True)
    assert ctx.violation_write_index.tolist() == [1] and ctx.kernel_run_counter.tolist() == [1]


def test_original_argument_rules():
    vp, wp = plans()
    with pytest.raises(ValueError, match="full_to_swa_index_mapping"):
        plan(vp, wp, [1], [1], [1], linear(2, 4), swa_window_size=2)
    with pytest.raises(ValueError, match="verify_capacity"):
        K.launch_canary_plan_kernels(verify_plan_out=vp, write_plan_out=wp, req_pool_indices=torch.tensor([1]),
                                     prefix_lens=torch.tensor([1]), extend_seq_lens=torch.tensor([1]),
                                     req_to_token=linear(2, 4), swa_window_size=0, full_to_swa_index_mapping=None,
                                     verify_capacity=3, req_to_verify_expected_tokens=None,
                                     req_to_verify_expected_tokens_valid_lens=None, kv_token_id_vs_position_offset=0)
    with pytest.raises(TypeError):
        K.launch_canary_plan_kernels(vp, wp)  # keyword-only, as the original
    ctx = context()
    with pytest.raises(ValueError, match="expected input tensors are required"):
        K.launch_canary_write_kernel(context=ctx, plan=wp, input_ids=torch.zeros(1, dtype=torch.int64),
                                     positions=torch.zeros(1, dtype=torch.int64),
                                     out_cache_loc=torch.zeros(1, dtype=torch.int64), enable_write_input_assert=True,
                                     expected_input_tokens=None, expected_input_positions=None)
    with pytest.raises(TypeError, match=r"kvcanary\.plan: req_pool_indices must have dtype int64, got int32"):
        K.launch_canary_plan_kernels(verify_plan_out=vp, write_plan_out=wp,
                                     req_pool_indices=torch.tensor([1], dtype=torch.int32),
                                     prefix_lens=torch.tensor([1]), extend_seq_lens=torch.tensor([1]),
                                     req_to_token=linear(2, 4), swa_window_size=0, full_to_swa_index_mapping=None,
                                     verify_capacity=64, req_to_verify_expected_tokens=None,
                                     req_to_verify_expected_tokens_valid_lens=None, kv_token_id_vs_position_offset=0)
    with pytest.raises(ValueError, match="page_size"):
        K.RealKvSource(tensor=torch.zeros(4, 16, dtype=torch.uint8), page_size=0, num_bytes_per_token=16,
                       read_bytes=16)


def test_torch_tensors_are_used_in_place():
    vp, wp = plans(16, 4)
    pointers = [vp.verify_slot_indices.data_ptr(), wp.write_offsets.data_ptr()]
    plan(vp, wp, [2], [7], [1], linear(4, 16))
    assert vp.verify_slot_indices[:7].tolist() == list(range(32, 39))
    assert [vp.verify_slot_indices.data_ptr(), wp.write_offsets.data_ptr()] == pointers


def test_tensor_that_requires_grad_is_used_in_place_or_named():
    # torch 1.13 exports a tensor that requires grad through DLPack; torch 2.x refuses, and then the error
    # says why. Either way nothing is copied.
    import kvcanary as kc

    t = torch.zeros(4, 8, requires_grad=True)
    try:
        buf = kc.CanaryBuffer(t)
    except TypeError as e:
        assert "requires grad" in str(e)
    else:
        assert buf.num_slots == 4 and buf.records is t


def test_an_engine_process_exits_quietly():
    # Module-level state (per-stream status, bound objects) is gone before Kokkos finalizes: no message.
    import subprocess
    import sys

    code = ("import torch, kvcanary.sglang as s\n"
            "vp = s.VerifyPlan.allocate(verify_capacity=16, device=torch.device('cpu'))\n"
            "wp = s.WritePlan.allocate(write_req_capacity=4, device=torch.device('cpu'))\n"
            "s.launch_canary_plan_kernels(verify_plan_out=vp, write_plan_out=wp, req_pool_indices=torch.tensor([2]),"
            " prefix_lens=torch.tensor([3]), extend_seq_lens=torch.tensor([1]),"
            " req_to_token=torch.arange(64, dtype=torch.int32).reshape(4, 16), swa_window_size=0,"
            " full_to_swa_index_mapping=None, verify_capacity=16, req_to_verify_expected_tokens=None,"
            " req_to_verify_expected_tokens_valid_lens=None, kv_token_id_vs_position_offset=0)\n"
            "print(vp.verify_num_valid.item())\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout.strip(), result.stderr) == (0, "3", "")
