#!/usr/bin/env python3
"""Writes the CLI's JSON case files (python3 stdlib only; rerun after editing, commit the output).

facts/*.json    one case per fact of SPEC section 6 (plus a few more SPEC section 4 rules), each with
                "_fact" (the SPEC row) and "_expected": the plan that `kvcanary plan` must print,
                written from the SPEC table and section 4 formulas -- never by running the tool.
                Keys of "_expected" that are absent are not checked; arrays are compared whole.
reject/*.json   inputs that must exit 2 with one stderr line containing "_expect_error".
malformed/*     texts that are not a JSON object (their expected errors are in ../CMakeLists.txt).
canary/, sequences/, canary_reject/, open_outcomes/   the verify, write and step cases of SPEC-CANARY
                (canary_cases.py); open_outcomes/: write calls whose outcome SPEC-CANARY 4 leaves open.
"""
import json
import os
import sys

import canary_cases

HERE = os.path.dirname(os.path.abspath(__file__))


def linear(rows, cols):
    """SPEC section 6: req_to_token "linear(R, L)" means rtt[rp][p] = rp*L + p."""
    return [[rp * cols + p for p in range(cols)] for rp in range(rows)]


def pool(rows=4, cols=16):
    """SPEC section 6: pool[rp][p] = rp*1000 + p."""
    return [[rp * 1000 + p for p in range(cols)] for rp in range(rows)]


def case(rpi, prefix, ext, rtt=None, vcap=64, wcap=4, **extra):
    """A case with SPEC section 6's defaults: capacities 64 / 4, no LUT, no pool, offset 0."""
    c = {"req_pool_indices": rpi, "prefix_lens": prefix, "extend_seq_lens": ext,
         "req_to_token": rtt if rtt is not None else linear(4, 16),
         "verify_capacity": vcap, "write_req_capacity": wcap}
    c.update(extra)
    return c


def verify(num_valid, slots, positions, prev, tokens=None, enable=1):
    return {"verify_num_valid": num_valid, "enable": enable, "verify_slot_indices": slots,
            "verify_expected_tokens": tokens if tokens is not None else [-1] * len(slots),
            "verify_expected_positions": positions, "verify_prev_slot_indices": prev}


def write(offsets, seeds, bs):
    return {"write_offsets": offsets, "write_seed_slot_indices": seeds, "write_num_valid_reqs": bs}


def ok_status():
    return {"input_error_bits": 0, "first_bad_row": -1}


def plan(v, w, s=None):
    return {"verify_plan": v, "write_plan": w, "status": s if s is not None else ok_status()}


def r(a, b):
    """Inclusive range a..b, as the SPEC table writes it."""
    return list(range(a, b + 1))


FACTS = {}

# ---- SPEC section 6, row by row ----
FACTS["extend_only_writes_no_verify_entries"] = (
    "extend only: linear(4,16); rpi [3], prefix [0], ext [5] -> num_valid 0; write_offsets [0,5,0,0,0]; seed [-1]",
    case([3], [0], [5]),
    plan(verify(0, [], [], []), write([0, 5, 0, 0, 0], [-1], 1)))

FACTS["decode_verifies_whole_prefix"] = (
    "decode: linear(4,16); rpi [2], prefix [7], ext [1] -> num_valid 7; slots 32..38; prev [-1,32..37]; seed [38]",
    case([2], [7], [1]),
    plan(verify(7, r(32, 38), r(0, 6), [-1] + r(32, 37)), write([0, 1, 0, 0, 0], [38], 1)))

FACTS["mixed_batch_offsets_and_total"] = (
    "mixed: linear(4,16), wcap 8; rpi [1,2,3], prefix [0,4,10], ext [8,1,1] -> write_offsets[0..3] [0,8,9,10]; "
    "num_valid 14",
    case([1, 2, 3], [0, 4, 10], [8, 1, 1], wcap=8),
    plan(verify(14, r(32, 35) + r(48, 57), r(0, 3) + r(0, 9), [-1] + r(32, 34) + [-1] + r(48, 56)),
         write([0, 8, 9, 10, 0, 0, 0, 0, 0], [-1, 35, 57], 3)))

FACTS["padding_rows_are_never_inspected"] = (
    "padding: rpi [1,0,2], prefix [5,99,3], ext [1,99,1] -> num_valid 8; write_offsets[0..3] [0,1,1,2]; seed[1] -1 "
    "(the padding row's prefix 99 > max_seq_len 16 raises no error bit)",
    case([1, 0, 2], [5, 99, 3], [1, 99, 1]),
    plan(verify(8, r(16, 20) + r(32, 34), r(0, 4) + r(0, 2), [-1] + r(16, 19) + [-1, 32, 33]),
         write([0, 1, 1, 2, 0], [20, -1, 34], 3)))

FACTS["swa_window_keeps_real_predecessor"] = (
    "SWA clip: linear(4,512), identity LUT (2049), window 128, cap 512; rpi [1], prefix [200] -> num_valid 128; "
    "positions[0] 72; prev[0] 583",
    case([1], [200], [1], rtt=linear(4, 512), vcap=512, swa_window_size=128,
         full_to_swa_index_mapping=list(range(2049))),
    plan(verify(128, r(512 + 72, 512 + 199), r(72, 199), r(512 + 71, 512 + 198)), write([0, 1, 0, 0, 0], [711], 1)))

FACTS["swa_lut_translates_slots"] = (
    "SWA LUT: linear(4,16), LUT i+100 (65 entries), window 128; rpi [1], prefix [3] -> slots [116,117,118]; "
    "seed [118]",
    case([1], [3], [1], swa_window_size=128, full_to_swa_index_mapping=[i + 100 for i in range(65)]),
    plan(verify(3, [116, 117, 118], [0, 1, 2], [-1, 116, 117]), write([0, 1, 0, 0, 0], [118], 1)))

FACTS["swa_many_rows_total"] = (
    "SWA many: linear(4,2048), identity LUT (8193), window 128, caps 1024/8; rpi [1,2,3,1], "
    "prefix [50,128,200,1024] -> num_valid 434",
    case([1, 2, 3, 1], [50, 128, 200, 1024], [1, 1, 1, 1], rtt=linear(4, 2048), vcap=1024, wcap=8,
         swa_window_size=128, full_to_swa_index_mapping=list(range(8193))),
    plan(verify(434,
                r(2048, 2097) + r(4096, 4223) + r(6144 + 72, 6144 + 199) + r(2048 + 896, 2048 + 1023),
                r(0, 49) + r(0, 127) + r(72, 199) + r(896, 1023),
                [-1] + r(2048, 2096) + [-1] + r(4096, 4222) + r(6144 + 71, 6144 + 198) + r(2048 + 895, 2048 + 1022)),
         write([0, 1, 2, 3, 4, 0, 0, 0, 0], [2097, 4223, 6343, 3071], 4)))

FACTS["capacity_exact_fits"] = (
    "cap exact: rpi [1], prefix [4], cap 4 -> num_valid 4, enable 1 (equality fits)",
    case([1], [4], [1], vcap=4),
    plan(verify(4, r(16, 19), r(0, 3), [-1, 16, 17, 18]), write([0, 1, 0, 0, 0], [19], 1)))

FACTS["capacity_short_disables_verify"] = (
    "cap short: rpi [1], prefix [3], cap 2 -> num_valid 2, enable 0, arrays untouched (printed empty; "
    "`check` compares the untouched entries with the reference)",
    case([1], [3], [1], vcap=2),
    plan(verify(2, [], [], [], enable=0), write([0, 1, 0, 0, 0], [18], 1)))

FACTS["zero_extend_has_no_seeds"] = (
    "zero extend: rpi [1,2], prefix [4,6], ext [0,0] -> num_valid 10; write_offsets [0,0,0,...]; seeds [-1,-1]",
    case([1, 2], [4, 6], [0, 0]),
    plan(verify(10, r(16, 19) + r(32, 37), r(0, 3) + r(0, 5), [-1] + r(16, 18) + [-1] + r(32, 36)),
         write([0, 0, 0, 0, 0], [-1, -1], 2)))

FACTS["aggregate_batch"] = (
    "aggregate: linear(4,32), caps 128/8; rpi [1,2,3,1], prefix [0,3,8,15], ext [4,1,1,1] -> num_valid 26; "
    "write_offsets [0,4,5,6,7,0...]; seeds [-1,66,103,46]",
    case([1, 2, 3, 1], [0, 3, 8, 15], [4, 1, 1, 1], rtt=linear(4, 32), vcap=128, wcap=8),
    plan(verify(26, r(64, 66) + r(96, 103) + r(32, 46), r(0, 2) + r(0, 7) + r(0, 14),
                [-1, 64, 65] + [-1] + r(96, 102) + [-1] + r(32, 45)),
         write([0, 4, 5, 6, 7, 0, 0, 0, 0], [-1, 66, 103, 46], 4)))

FACTS["pool_gives_expected_tokens"] = (
    "pool: pool[rp][p] = rp*1000+p (4x16); rpi [1,2], prefix [3,5], valid [16,16] -> tokens "
    "[1000,1001,1002,2000,...,2004]",
    case([1, 2], [3, 5], [1, 1], req_to_verify_expected_tokens=pool(),
         req_to_verify_expected_tokens_valid_lens=[16, 16]),
    plan(verify(8, r(16, 18) + r(32, 36), r(0, 2) + r(0, 4), [-1, 16, 17, -1] + r(32, 35),
                tokens=r(1000, 1002) + r(2000, 2004)),
         write([0, 1, 2, 0, 0], [18, 36], 2)))

FACTS["pool_draft_offset_shifts_tokens"] = (
    "pool, offset +1: same as pool with kv_token_id_vs_position_offset 1 -> tokens [1001,1002,1003,2001,...,2005]",
    case([1, 2], [3, 5], [1, 1], req_to_verify_expected_tokens=pool(),
         req_to_verify_expected_tokens_valid_lens=[16, 16], kv_token_id_vs_position_offset=1),
    plan(verify(8, r(16, 18) + r(32, 36), r(0, 2) + r(0, 4), [-1, 16, 17, -1] + r(32, 35),
                tokens=r(1001, 1003) + r(2001, 2005)),
         write([0, 1, 2, 0, 0], [18, 36], 2)))

FACTS["pool_valid_lens_cut_tokens"] = (
    "pool valid_lens: same pool; rpi [1,2], prefix [3,3], valid [2,4] -> [1000,1001,-1,2000,2001,2002]",
    case([1, 2], [3, 3], [1, 1], req_to_verify_expected_tokens=pool(),
         req_to_verify_expected_tokens_valid_lens=[2, 4]),
    plan(verify(6, r(16, 18) + r(32, 34), [0, 1, 2, 0, 1, 2], [-1, 16, 17, -1, 32, 33],
                tokens=[1000, 1001, -1, 2000, 2001, 2002]),
         write([0, 1, 2, 0, 0], [18, 34], 2)))

FACTS["pool_with_swa_window"] = (
    "pool + SWA: same pool, identity LUT (65), window 3; rpi [1], prefix [5], valid [4] -> positions [2,3,4]; "
    "tokens [1002,1003,-1]",
    case([1], [5], [1], swa_window_size=3, full_to_swa_index_mapping=list(range(65)),
         req_to_verify_expected_tokens=pool(), req_to_verify_expected_tokens_valid_lens=[4]),
    plan(verify(3, [18, 19, 20], [2, 3, 4], [17, 18, 19], tokens=[1002, 1003, -1]), write([0, 1, 0, 0, 0], [20], 1)))

FACTS["lut_clamps_large_slots"] = (
    "LUT clamp: linear(4,16), LUT [7,8,9], window 2; rpi [1], prefix [3] -> slots [9,9]; prev [9,9]; seed [9]",
    case([1], [3], [1], swa_window_size=2, full_to_swa_index_mapping=[7, 8, 9]),
    plan(verify(2, [9, 9], [1, 2], [9, 9]), write([0, 1, 0, 0, 0], [9], 1)))

FACTS["bad_row_reported_and_skipped"] = (
    "bad row: linear(3,8), cap 16; rpi [1,9,2], prefix [2,3,2], ext [1,1,1] -> num_valid 4; "
    "write_offsets [0,1,1,2,...]; bits 1; first_bad_row 1",
    case([1, 9, 2], [2, 3, 2], [1, 1, 1], rtt=linear(3, 8), vcap=16),
    plan(verify(4, [8, 9, 16, 17], [0, 1, 0, 1], [-1, 8, -1, 16]), write([0, 1, 1, 2, 0], [9, -1, 17], 3),
         {"input_error_bits": 1, "first_bad_row": 1}))

# shrinking batch: two steps on one set of outputs; the second leaves seeds[3..7] as the first wrote them.
_first_seeds = [(rp * 16) + (rp - 1) for rp in range(1, 9)]  # row r: rp = r+1, prefix r+1 -> rtt[rp][rp-1]
FACTS["shrinking_batch_keeps_seeds_past_bs"] = (
    "shrinking batch: run bs 8, then bs 3 on the same plan -> write_offsets[4..] all 0; seeds[3..7] keep the first "
    "run's values",
    {"steps": [
        case(r(1, 8), r(1, 8), [1] * 8, rtt=linear(9, 16), wcap=8),
        case([1, 2, 3], [2, 2, 2], [1, 1, 1], rtt=linear(9, 16), wcap=8)]},
    None)
_second = plan(verify(6, [16, 17, 32, 33, 48, 49], [0, 1, 0, 1, 0, 1], [-1, 16, -1, 32, -1, 48]),
               dict(write([0, 1, 2, 3, 0, 0, 0, 0, 0], [17, 33, 49], 3),
                    write_seed_slot_indices_all=[17, 33, 49] + _first_seeds[3:]))
FACTS["shrinking_batch_keeps_seeds_past_bs"] = FACTS["shrinking_batch_keeps_seeds_past_bs"][:2] + ({
    "verify_plan": _second["verify_plan"], "write_plan": _second["write_plan"], "status": ok_status(),
    "steps": [
        {"verify_plan": {"verify_num_valid": 36, "enable": 1},
         "write_plan": dict(write(r(0, 8), _first_seeds, 8), write_seed_slot_indices_all=_first_seeds),
         "status": ok_status()},
        _second]},)

# ---- more SPEC section 4 rules ----
FACTS["negative_lengths_act_as_zero"] = (
    "SPEC 4: negative prefix and extend lengths act as 0 and are not errors",
    case([1, 2], [-3, 2], [-4, 2]),
    plan(verify(2, [32, 33], [0, 1], [-1, 32]), write([0, 0, 2, 0, 0], [-1, 33], 2)))

FACTS["bad_rows_report_prefix_and_pool_bits"] = (
    "SPEC 4: prefix_lens > max_seq_len is bit 2; a pool row outside the pool or valid_lens > pool_cols is bit 4",
    case([1, 3, 2, 1], [2, 17, 2, 2], [1, 1, 1, 1], req_to_verify_expected_tokens=pool(rows=2),
         req_to_verify_expected_tokens_valid_lens=[2, 2, 2, 17]),
    plan(verify(2, [16, 17], [0, 1], [-1, 16], tokens=[1000, 1001]), write([0, 1, 1, 1, 1], [17, -1, -1, -1], 4),
         {"input_error_bits": 6, "first_bad_row": 1}))

FACTS["lut_without_window_translates"] = (
    "SPEC 4: a LUT may be given with swa_window_size 0 (translation without a window)",
    case([1], [3], [1], full_to_swa_index_mapping=[i + 100 for i in range(65)]),
    plan(verify(3, [116, 117, 118], [0, 1, 2], [-1, 116, 117]), write([0, 1, 0, 0, 0], [118], 1)))

FACTS["lut_passes_negative_slots_and_clamps_large_ones"] = (
    "SPEC 4, T: a negative slot passes through the LUT unchanged; one >= lut_len reads the last entry",
    case([1], [3], [1], rtt=[[0, 0, 0], [-5, 70, 2]], full_to_swa_index_mapping=[10, 11, 12]),
    plan(verify(3, [-5, 12, 12], [0, 1, 2], [-1, -5, 12]), write([0, 1, 0, 0, 0], [12], 1)))

FACTS["empty_batch"] = (
    "SPEC 4 with bs 0: nothing to verify, write_offsets [0], write_num_valid_reqs 0",
    case([], [], [], wcap=0),
    plan(verify(0, [], [], []), write([0], [], 0)))

FACTS["null_optional_inputs_are_absent"] = (
    "SPEC 5: absent optional inputs may be null; null window and offset mean 0 (decode fact)",
    case([2], [7], [1], swa_window_size=None, full_to_swa_index_mapping=None, req_to_verify_expected_tokens=None,
         req_to_verify_expected_tokens_valid_lens=None, kv_token_id_vs_position_offset=None),
    plan(verify(7, r(32, 38), r(0, 6), [-1] + r(32, 37)), write([0, 1, 0, 0, 0], [38], 1)))

FACTS["valid_lens_ignored_without_pool"] = (
    "SPEC 4: without a pool, valid_lens is ignored, whatever its length (decode fact)",
    case([2], [7], [1], req_to_verify_expected_tokens_valid_lens=[1, 2, 3]),
    plan(verify(7, r(32, 38), r(0, 6), [-1] + r(32, 37)), write([0, 1, 0, 0, 0], [38], 1)))

FACTS["huge_verify_capacity_is_not_preallocated"] = (
    "CLI: verify_capacity 2^31-1 is accepted and prints the decode fact (the CLI allocates only what the batch "
    "can use)",
    case([2], [7], [1], vcap=2 ** 31 - 1),
    plan(verify(7, r(32, 38), r(0, 6), [-1] + r(32, 37)), write([0, 1, 0, 0, 0], [38], 1)))

FACTS["extend_past_int32_is_bit_8"] = (
    "SPEC 4 (issue 10): extend_seq_lens > 2^31-1 is bit 8, so two INT64_MAX extends no longer wrap write_offsets",
    case([1, 2, 3], [2, 3, 1], [2 ** 63 - 1, 2 ** 63 - 1, 2], wcap=3),
    plan(verify(1, [48], [0], [-1]), write([0, 0, 0, 2], [-1, -1, 48], 3),
         {"input_error_bits": 8, "first_bad_row": 0}))

FACTS["int64_min_prefix_with_window_does_not_overflow"] = (
    "SPEC 4 (issue 10): prefix INT64_MIN with a window and a bad row elsewhere: window_start 0, nothing verified, "
    "no out-of-bounds read in the reference (check agreed on it only after the fix)",
    case([1, 99, 2], [-2 ** 63, 4, 2], [1, 1, 1], rtt=[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], vcap=16, wcap=3,
         swa_window_size=1, full_to_swa_index_mapping=list(range(12))),
    plan(verify(1, [9], [1], [8]), write([0, 1, 1, 2], [-1, -1, 9], 3),
         {"input_error_bits": 1, "first_bad_row": 1}))

# ---- rejected inputs: exit 2, one stderr line containing _expect_error ----
DECODE = case([2], [7], [1])


DROP = canary_cases.DROP


def decode_with(**changes):
    return canary_cases.changed(DECODE, **changes)


REJECT = {
    "missing_prefix_lens": (decode_with(prefix_lens=DROP), "prefix_lens: required key is missing"),
    "missing_req_to_token": (decode_with(req_to_token=DROP), "req_to_token: required key is missing"),
    "missing_verify_capacity": (decode_with(verify_capacity=DROP), "verify_capacity: required key is missing"),
    "missing_write_req_capacity": (decode_with(write_req_capacity=DROP),
                                   "write_req_capacity: required key is missing"),
    "null_required_key": (decode_with(extend_seq_lens=None), "extend_seq_lens: expected an array"),
    "string_in_prefix_lens": (decode_with(prefix_lens=["7"]), "prefix_lens[0]: expected an int64 integer"),
    "float_in_extend_seq_lens": (decode_with(extend_seq_lens=[1.5]), "extend_seq_lens[0]: expected an int64 integer"),
    "integral_float_capacity": (decode_with(verify_capacity=64.0), "verify_capacity: expected an int64 integer"),
    "boolean_in_req_pool_indices": (decode_with(req_pool_indices=[True]),
                                    "req_pool_indices[0]: expected an int64 integer"),
    "scalar_instead_of_array": (decode_with(prefix_lens=7), "prefix_lens: expected an array"),
    "array_instead_of_scalar": (decode_with(swa_window_size=[1]), "swa_window_size: expected an int32 integer"),
    "prefix_len_beyond_int64": (decode_with(prefix_lens=[2 ** 63]), "prefix_lens[0]: 9223372036854775808 is out of "
                                                                   "int64 range"),
    "slot_beyond_int32": (decode_with(req_to_token=[[0] * 16, [0, 1, 2, 2 ** 31] + [0] * 12, [0] * 16, [0] * 16]),
                          "req_to_token[1][3]: 2147483648 is out of int32 range"),
    "pool_token_below_int32": (decode_with(req_to_verify_expected_tokens=[[-2 ** 31 - 1]],
                                           req_to_verify_expected_tokens_valid_lens=[1]),
                               "req_to_verify_expected_tokens[0][0]: -2147483649 is out of int32 range"),
    "window_beyond_int32": (decode_with(swa_window_size=2 ** 32), "swa_window_size: 4294967296 is out of int32 range"),
    "offset_beyond_int32": (decode_with(kv_token_id_vs_position_offset=2 ** 31),
                            "kv_token_id_vs_position_offset: 2147483648 is out of int32 range"),
    "ragged_req_to_token": (decode_with(req_to_token=[[0] * 16, [0] * 16, [0] * 15, [0] * 16]),
                            "req_to_token[2]: has 15 entries but req_to_token[0] has 16"),
    "ragged_pool": (decode_with(req_to_verify_expected_tokens=[[1, 2], [3]],
                                req_to_verify_expected_tokens_valid_lens=[1]),
                    "req_to_verify_expected_tokens[1]: has 1 entries"),
    "flat_req_to_token": (decode_with(req_to_token=list(range(64))), "req_to_token[0]: expected a row"),
    "unknown_key": (decode_with(swa_window=128), "swa_window: unknown key"),
    "unknown_key_with_control_bytes": (decode_with(**{"x\x1b[2J\x07": 1}), "x\\x1b[2J\\x07: unknown key"),
    "write_req_capacity_below_batch": (case([1, 2, 3], [1, 1, 1], [1, 1, 1], wcap=2),
                                       "write_req_capacity is 2 but the batch has 3 rows"),
    "negative_window": (decode_with(swa_window_size=-1, full_to_swa_index_mapping=[0]), "swa_window_size is -1"),
    "window_without_lut": (decode_with(swa_window_size=8), "full_to_swa_index_mapping is missing"),
    "empty_lut": (decode_with(full_to_swa_index_mapping=[]), "full_to_swa_index_mapping is empty"),
    "pool_without_valid_lens": (decode_with(req_to_verify_expected_tokens=pool()),
                                "req_to_verify_expected_tokens_valid_lens is missing"),
    "valid_lens_of_wrong_length": (decode_with(req_to_verify_expected_tokens=pool(),
                                               req_to_verify_expected_tokens_valid_lens=[16, 16]),
                                   "req_to_verify_expected_tokens_valid_lens has 2 entries but req_pool_indices has 1"),
    "per_row_inputs_of_different_lengths": (decode_with(prefix_lens=[7, 7]),
                                            "prefix_lens has 2 entries but req_pool_indices has 1"),
    "negative_verify_capacity": (decode_with(verify_capacity=-1), "verify_capacity is -1"),
    "negative_write_req_capacity": (case([], [], [], wcap=-1), "write_req_capacity is -1"),
    "verify_capacity_beyond_int32": (decode_with(verify_capacity=10 ** 12), "must fit in int32"),
    "verify_capacity_as_exponent_float": (decode_with(verify_capacity=1e12),
                                          "verify_capacity: expected an int64 integer"),
    "write_req_capacity_beyond_cli_limit": (decode_with(write_req_capacity=10 ** 12),
                                            "above kvcanary's limit of 4194304"),
    # capacity + 1 was computed before the limit was checked: signed overflow (UBSan) at INT64_MAX
    "write_req_capacity_at_int64_max": (decode_with(write_req_capacity=2 ** 63 - 1),
                                        "write_req_capacity is 9223372036854775807, above kvcanary's limit"),
    "verify_arrays_beyond_cli_limit": (case([1] * 1025, [8192] * 1025, [1] * 1025, rtt=[[0] * 8192, [0] * 8192],
                                            vcap=2 ** 31 - 1, wcap=1025),
                                       "above kvcanary's limit of 8388608"),
    "output_beyond_cli_limit": ({"steps": [decode_with(write_req_capacity=2 ** 22)] * 8},
                                "array entries over 8 steps, above kvcanary's limit of 67108864"),
    "req_to_token_without_rows": (decode_with(req_to_token=[]), "req_to_token is 0 x 0"),
    "req_to_token_without_columns": (decode_with(req_to_token=[[], []]), "req_to_token is 2 x 0"),
    "steps_with_different_capacities": ({"steps": [DECODE, decode_with(verify_capacity=32)]},
                                        "steps[1].verify_capacity: 32 differs from steps[0]'s 64"),
    "steps_not_an_array": ({"steps": 5}, "steps: expected a non-empty array"),
    "steps_with_a_bad_step": ({"steps": [DECODE, decode_with(prefix_lens=["x"])]},
                              "steps[1].prefix_lens[0]: expected an int64 integer"),
    "steps_with_a_rejected_step": ({"steps": [DECODE, decode_with(swa_window_size=-2,
                                                                  full_to_swa_index_mapping=[0])]},
                                   "steps[1]: kvcanary::plan: swa_window_size is -2"),
}


def dump(document):
    """One key per line at the top (and per step), values compact: readable diffs, small files."""
    def compact(value):
        return json.dumps(value, separators=(", ", ": "))

    def obj(o, indent):
        pad = " " * indent
        lines = []
        for key, value in o.items():
            if key == "steps" and isinstance(value, list) and all(isinstance(s, dict) for s in value):
                inner = ",\n".join(pad + "    " + obj(step, indent + 4).lstrip() for step in value)
                lines.append(pad + "  " + json.dumps(key) + ": [\n" + inner + "\n" + pad + "  ]")
            else:
                lines.append(pad + "  " + json.dumps(key) + ": " + compact(value))
        return pad + "{\n" + ",\n".join(lines) + "\n" + pad + "}"

    return (obj(document, 0) if isinstance(document, dict) else compact(document)) + "\n"


def main():
    for sub in ("facts", "reject", "malformed", "canary", "sequences", "canary_reject"):
        os.makedirs(os.path.join(HERE, sub), exist_ok=True)
    for name, (fact, inputs, expected) in FACTS.items():
        document = {"_fact": fact}
        document.update(inputs)
        document["_expected"] = expected
        with open(os.path.join(HERE, "facts", name + ".json"), "w") as f:
            f.write(dump(document))
    for name, (inputs, error) in REJECT.items():
        document = dict(inputs, _expect_error=error) if isinstance(inputs, dict) else inputs
        with open(os.path.join(HERE, "reject", name + ".json"), "w") as f:
            f.write(dump(document))
    for name, (fact, inputs, expected) in canary_cases.CANARY.items():
        with open(os.path.join(HERE, "canary", name + ".json"), "w") as f:
            f.write(dump(dict({"_fact": fact}, **inputs, _expected=expected)))
    os.makedirs(os.path.join(HERE, "open_outcomes"), exist_ok=True)
    for name, (fact, inputs) in canary_cases.OPEN.items():
        with open(os.path.join(HERE, "open_outcomes", name + ".json"), "w") as f:
            f.write(dump(dict({"_fact": fact}, **inputs)))
    for name, (fact, steps) in canary_cases.SEQUENCES.items():
        with open(os.path.join(HERE, "sequences", name + ".json"), "w") as f:
            f.write(dump({"_fact": fact, "_sequence": steps}))
    for name, (inputs, error) in canary_cases.CANARY_REJECT.items():
        with open(os.path.join(HERE, "canary_reject", name + ".json"), "w") as f:
            f.write(dump(dict(inputs, _expect_error=error)))
    # Texts that are not JSON objects: their expected errors are in CMakeLists.txt.
    malformed = {
        "malformed_json.json": '{"req_pool_indices": [2], "prefix_lens": [7,\n',
        "empty_file.json": "",
        "top_level_array.json": "[1, 2]\n",
        "deeply_nested.json": "[" * 100000 + "]" * 100000 + "\n",  # would overflow a recursive walk
        # nlohmann stops at a NUL byte: what follows it must not be ignored
        "nul_then_garbage.json": dump(DECODE) + "\0garbage",
        "nul_then_second_case.json": dump(DECODE) + "\0" + dump(decode_with(prefix_lens=[3])),
        # nlohmann keeps the last of duplicate keys, even over an earlier value of the wrong type
        "duplicate_key.json": '{"prefix_lens": "seven",' + dump(DECODE)[1:],
        "duplicate_key_in_a_comment.json": dump(dict(DECODE, _note={"a": 1})).replace('{"a": 1}', '{"a": 1, "a": 2}'),
    }
    for name, text in malformed.items():
        with open(os.path.join(HERE, "malformed", name), "w") as f:
            f.write(text)
    print("wrote %d fact cases, %d rejected and %d malformed inputs, %d canary cases, %d sequences and %d rejected "
          "canary inputs under %s" % (len(FACTS), len(REJECT), len(malformed), len(canary_cases.CANARY),
                                      len(canary_cases.SEQUENCES), len(canary_cases.CANARY_REJECT), HERE),
          file=sys.stderr)


if __name__ == "__main__":
    main()
