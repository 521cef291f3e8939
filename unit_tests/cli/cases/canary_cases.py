"""The canary cases of the CLI (SPEC-CANARY sections 5, 8 and 9), written by make_cases.py.

canary/*.json      one verify, write or step case each ("_command"), with "_fact" and "_expected": the
                   output the SPEC says, computed here from section 2's hashes and section 7's line format
                   -- never by running the tool. Keys of "_expected" that are absent are not checked.
sequences/*.json   "_sequence": cases run one after another, each taking the canary_buffer the previous
                   one printed when it has none of its own (after "_corrupt": [[slot, field, value], ...]).
canary_reject/*.json   inputs that `_command` and `check` both refuse with exit 2 and one stderr line
                   containing "_expect_error" ("_check_error" for check when it differs).
"""

M64 = (1 << 64) - 1


def splitmix64(x):
    """SPEC-CANARY 2: the SplitMix64 finaliser only."""
    x &= M64
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    x ^= x >> 31
    return x


def s64(u):
    return u - (1 << 64) if u >= 1 << 63 else u


def mix3(a, b, c):
    return s64(splitmix64(splitmix64(splitmix64(a & M64) ^ (b & M64)) ^ (c & M64)))


ANCHOR = s64(splitmix64(0xC0FFEE1234567890))
# The SPEC's pinned values, so that a slip here cannot pass for the tool's.
assert splitmix64(0x9E3779B97F4A7C15) == 0xE220A8397B1DCDAF and splitmix64(1) == 0x5692161D100B05E5
assert ANCHOR == -2414019407054260458
assert mix3(ANCHOR, 100, 4) & M64 == 0x5022670B6356AF64 and mix3(ANCHOR, 7, 10) & M64 == 0x5E35681BCFCE7CF6
PINNED_BYTES = [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x81, 0x82, 0x84, 0x88, 0x90, 0xA0, 0xC0, 0xFF]
PINNED_FOLD = s64(0x6041580849E6407D)

KINDS = ["HEAD_K_FULL", "HEAD_V_FULL", "TAIL_K_FULL", "TAIL_V_FULL", "SWEEP_K_FULL", "SWEEP_V_FULL", "HEAD_K_SWA",
         "HEAD_V_SWA", "TAIL_K_SWA", "TAIL_V_SWA", "SWEEP_K_SWA", "SWEEP_V_SWA"]
REASONS = ["verify_chain_hash", "verify_position", "verify_real_kv_hash", "write_token", "write_position",
           "verify_token", "out_of_range", "verify_freed", "verify_slot_zero", "metadata_mismatch", "padding_slot_kv"]
CHAIN, POSITION, REAL_KV, WRITE_TOKEN, WRITE_POSITION, TOKEN, OUT_OF_RANGE, FREED, SLOT_ZERO = (1 << i for i in range(9))
FREED_TOKEN = -0x4652454544  # SPEC-CANARY 11.2: "FREED" in ASCII, negated


def line(row):
    """SPEC-CANARY 7, exactly."""
    kind, slot, position, stored, expected, chain, aux, bits = row
    reasons = "+".join(name for i, name in enumerate(REASONS) if bits >> i & 1) or "none"
    return ("kv_canary violation: launch_tag=%s fail_reason=%s slot_idx=%d position=%d stored_token=%d "
            "expected_token=%d stored_chain_hash=0x%016x expected_aux=0x%016x"
            % (KINDS[kind], reasons, slot, position, stored, expected, chain & M64, aux & M64))


def output(buffer=None, rows=(), count=None, capacity=1024, slot_runs=None, kernel_runs=1):
    """SPEC-CANARY 9's output: rows sorted, the report after the never-written filter."""
    rows = sorted(list(r) for r in rows)
    # SPEC-CANARY 7: the filter drops verify-stage rows of zero records; write (8, 16) and out_of_range (64)
    # rows are always kept.
    kept = [r for r in rows if not (r[3] == 0 and r[2] == 0 and r[5] == 0 and not r[7] & (8 | 16 | 64))]
    out = {"ring": {"count": len(rows) if count is None else count, "capacity": capacity, "rows": rows},
           "kernel_run_counter": kernel_runs, "report": [line(r) for r in kept],
           "report_dropped": len(rows) - len(kept)}
    if buffer is not None:
        out["canary_buffer"] = buffer
    if slot_runs is not None:
        out["slot_run_counter"] = slot_runs
    return out


def empty(n):
    return [[0, 0, 0, 0] for _ in range(n)]


def stamp(buffer, seed_hash, tokens, real_kv_hash=0):
    """Writes (slot, token, position) records chained from seed_hash, as SPEC-CANARY 4 does; returns the
    running hash after them."""
    running = seed_hash
    for slot, token, position in tokens:
        buffer[slot] = [token, position, running, real_kv_hash]
        running = mix3(running, token, position)
    return running


def slot_hash(buffer, slot):
    return ANCHOR if slot < 0 else mix3(buffer[slot][2], buffer[slot][0], buffer[slot][1])


def vplan(slots, positions, prev, tokens=None, num_valid=None, enable=1):
    return {"verify_num_valid": len(slots) if num_valid is None else num_valid, "enable": enable,
            "verify_slot_indices": slots, "verify_expected_tokens": tokens or [-1] * len(slots),
            "verify_expected_positions": positions, "verify_prev_slot_indices": prev}


def wplan(offsets, seeds, bs=None):
    return {"write_offsets": offsets, "write_seed_slot_indices": seeds,
            "write_num_valid_reqs": len(seeds) if bs is None else bs}


def verify_case(buffer, plan, **extra):
    """A verify case; without a buffer (None), a sequence gives it the previous case's."""
    c = {"_command": "verify", "canary_buffer": buffer, "verify_plan": plan}
    if buffer is None:
        del c["canary_buffer"]
    return dict(c, **extra)


def write_case(buffer, plan, ids, positions, slots, **extra):
    return dict({"_command": "write", "canary_buffer": buffer, "write_plan": plan, "input_ids": ids,
                 "positions": positions, "out_cache_loc": slots}, **extra)


def source(rows, page_size=1, bytes_per_token=16, read_bytes=16):
    return {"page_size": page_size, "bytes_per_token": bytes_per_token, "read_bytes": read_bytes, "rows": rows}


CANARY = {}

# ---- SPEC-CANARY 5 ----
b = empty(6)
b[5] = [33, 0, ANCHOR, 0]
CANARY["verify_position_fact"] = (
    "5: slot 5 stamped (33, 0, anchor_hash), plan position 99, no expected token -> one row "
    "[kind, 5, 0, 33, -1, anchor, anchor, 2] and its 7 line",
    verify_case(b, vplan([5], [99], [-1])),
    output(b, [[0, 5, 0, 33, -1, ANCHOR, ANCHOR, POSITION]], slot_runs=1))
assert line([0, 5, 0, 33, -1, ANCHOR, ANCHOR, 2]) == (
    "kv_canary violation: launch_tag=HEAD_K_FULL fail_reason=verify_position slot_idx=5 position=0 stored_token=33 "
    "expected_token=-1 stored_chain_hash=0xde7fae23a9a1b716 expected_aux=0xde7fae23a9a1b716")

CANARY["verify_ring_overflow"] = (
    "5: a ring of capacity 4 and 10 violations -> count 10, 4 rows (one slot ten times, so the kept rows are known)",
    verify_case(b, vplan([5] * 10, [99] * 10, [-1] * 10), ring_capacity=4),
    output(b, [[0, 5, 0, 33, -1, ANCHOR, ANCHOR, POSITION]] * 4, count=10, capacity=4, slot_runs=10))

CANARY["verify_ring_capacity_zero_keeps_the_count"] = (
    "9: ring_capacity 0 keeps only the count",
    verify_case(b, vplan([5] * 3, [99] * 3, [-1] * 3), ring_capacity=0),
    output(b, [], count=3, capacity=0, slot_runs=3))

CANARY["verify_disabled"] = (
    "5: enable == 0 -> only kernel_run_counter moves (entries that would fire are not read)",
    verify_case(b, vplan([5, 9], [99, 1], [-1, -1], enable=0)),
    output(b, [], slot_runs=0))

b = empty(4)
b[2] = [7, 3, 12345, 0]
CANARY["verify_prev_zero_skips_chain"] = (
    "8: prev = 0 skips the chain check for any stored prev_hash; a position mismatch fires alone",
    verify_case(b, vplan([2], [4], [0])),
    output(b, [[0, 2, 3, 7, -1, 12345, 12345, POSITION]], slot_runs=1))

b = empty(4)
stamp(b, ANCHOR, [(1, 10, 0), (2, 11, 1), (3, 12, 2)])
good_chain = slot_hash(b, 2)
b[2][0] = 99
CANARY["verify_corrupted_predecessor_token"] = (
    "8: a corrupted predecessor token -> its successor gets bit 1 only",
    verify_case(b, vplan([1, 2, 3], [0, 1, 2], [-1, 1, 2])),
    output(b, [[0, 3, 2, 12, -1, good_chain, slot_hash(b, 2), CHAIN]], slot_runs=3))

b = empty(3)
stamp(b, ANCHOR, [(1, 42, 0)])
CANARY["verify_token_mismatch"] = (
    "8: stored token 42 with an expected token 99 -> bit 32 only, stored 42 and expected 99 in the row; "
    "kernel_kind TAIL_V_SWA (9) stamped in field 0",
    verify_case(b, vplan([1], [0], [-1], tokens=[99]), kernel_kind="TAIL_V_SWA"),
    output(b, [[9, 1, 0, 42, 99, ANCHOR, ANCHOR, TOKEN]], slot_runs=1))

CANARY["verify_token_check_off"] = (
    "5: check_expected_token false -> exp_tok -1, no token check",
    verify_case(b, vplan([1], [0], [-1], tokens=[99]), check_expected_token=False),
    output(b, [], slot_runs=1))

CANARY["verify_slot_zero_check"] = (
    "11.3: check_slot_zero true, an entry of slot 0 -> (0, exp_pos, -1, exp_tok, -1, prev, 256), nothing read",
    verify_case(b, vplan([0], [5], [3], tokens=[9]), check_slot_zero=True),
    output(b, [[0, 0, 5, -1, 9, -1, 3, SLOT_ZERO]], slot_runs=1))

CANARY["verify_slot_zero_check_off"] = (
    "5: without check_slot_zero (the default) slot 0 is skipped",
    verify_case(b, vplan([0], [5], [3], tokens=[9])),
    output(b, [], slot_runs=1))

freed = [[0, 0, 0, 0], [FREED_TOKEN, 0, ANCHOR, 17], [0, 0, 0, 0]]
CANARY["verify_freed_check"] = (
    "11.2: check_freed true, a FREED record at its own position and chain -> bit 128 alone, epoch in expected_aux",
    verify_case(freed, vplan([1], [0], [-1], tokens=[42]), check_freed=True),
    output(freed, [[0, 1, 0, FREED_TOKEN, 42, ANCHOR, 17, FREED]], slot_runs=1))

# SPEC-CANARY 11.7: a request's identity masks every chain link with splitmix64(id).
MASK7 = s64(splitmix64(7))
assert MASK7 & M64 == 0x12AE30237B17DF14
masked = empty(4)
link = ANCHOR ^ MASK7
for slot, token, position in [(1, 101, 0), (2, 202, 1), (3, 303, 2)]:
    masked[slot] = [token, position, link, 0]
    link = mix3(link, token, position) ^ MASK7
assert masked[1][2] & M64 == 0xCCD19E00D2B66802 and masked[3][2] & M64 == 0xA9CDB353ACF9E6A2
CANARY["write_identity_masks_every_link"] = (
    "11.7: write_identities [7] -> every stored prev_hash is the predecessor's hash XOR splitmix64(7)",
    write_case(empty(4), dict(wplan([0, 3], [-1]), write_identities=[7]), [101, 202, 303], [0, 1, 2], [1, 2, 3]),
    output(masked, [], slot_runs=3))

plain = empty(4)
stamp(plain, ANCHOR, [(1, 101, 0), (2, 202, 1), (3, 303, 2)])
CANARY["verify_identity_of_another_request"] = (
    "11.7: records of identity 0 verified at identity 7 -> bit 1 on every entry, expected link XOR the mask",
    verify_case(plain, dict(vplan([1, 2, 3], [0, 1, 2], [-1, 1, 2], tokens=[101, 202, 303]), verify_identities=[7, 7, 7])),
    output(plain, [[0, s, plain[s][1], plain[s][0], plain[s][0], plain[s][2], slot_hash(plain, s - 1 if s > 1 else -1) ^ MASK7,
                    CHAIN] for s in (1, 2, 3)], slot_runs=3))

CANARY["verify_out_of_range"] = (
    "5: slot >= num_slots, slot < 0, prev >= num_slots -> (index, exp_pos, -1, exp_tok, -1, -1, 64), nothing read",
    verify_case(b, vplan([9, -3, 1], [5, 6, 0], [-1, -1, 7], tokens=[70, 71, 42])),
    output(b, [[0, 9, 5, -1, 70, -1, -1, OUT_OF_RANGE], [0, -3, 6, -1, 71, -1, -1, OUT_OF_RANGE],
               [0, 7, 0, -1, 42, -1, -1, OUT_OF_RANGE]], slot_runs=3))

CANARY["verify_never_written_rows_dropped_from_report"] = (
    "7: a never-written record (token, position, prev_hash 0) verified at position 3 -> a row (bits 1 and 2) that "
    "the report drops and counts",
    verify_case(empty(3), vplan([2], [3], [-1])),
    output(empty(3), [[0, 2, 0, 0, -1, 0, ANCHOR, CHAIN | POSITION]], slot_runs=1))

CANARY["verify_40000_entries"] = (
    "8: 40,000 verify entries -> slot_run_counter 40,000 (slot 0: skipped, no row)",
    verify_case(empty(2), vplan([0] * 40000, [0] * 40000, [-1] * 40000)),
    output(empty(2), [], slot_runs=40000))

# ---- SPEC-CANARY 4 and 8: write ----
b = empty(4)
b[3] = [42, 0, ANCHOR, 0]
CANARY["write_seed_minus_one"] = (
    "8: write, seed -1, slot 3, token 42, position 0 -> buf[3] = (42, 0, anchor_hash, 0)",
    write_case(empty(4), wplan([0, 1], [-1]), [42], [0], [3]),
    output(b, [], slot_runs=1))

b = empty(8)
b[7] = [100, 4, ANCHOR, 0]
after = [row[:] for row in b]
after[2] = [5, 5, s64(0x5022670B6356AF64), 0]
CANARY["write_chained_to_seed"] = (
    "8: seed slot 7 stamped (100, 4, anchor_hash), write slot 2 -> buf[2].prev_hash = 0x5022670B6356AF64",
    write_case(b, wplan([0, 1], [7]), [5], [5], [2]),
    output(after, [], slot_runs=1))

b = empty(6)
b[4] = [1, 0, ANCHOR, 0]
CANARY["write_negative_slot_skipped"] = (
    "8: out_cache_loc = [4, -1] -> slot_run_counter 1 (the token at -1: no store, no count, no chain step)",
    write_case(empty(6), wplan([0, 2], [-1]), [1, 2], [0, 1], [4, -1]),
    output(b, [], slot_runs=1))

b = empty(6)
stamp(b, ANCHOR, [(1, 1, 0), (2, 2, 1)])
stamp(b, ANCHOR, [(3, 3, 0), (4, 4, 1), (5, 5, 2)])
CANARY["write_two_requests"] = (
    "8: offsets [0, 2, 5] -> slot_run_counter 5, two chains",
    write_case(empty(6), wplan([0, 2, 5], [-1, -1]), [1, 2, 3, 4, 5], [0, 1, 0, 1, 2], [1, 2, 3, 4, 5]),
    output(b, [], slot_runs=5))

CANARY["write_no_valid_requests"] = (
    "8: write_num_valid_reqs = 0 -> kernel_run_counter 1, nothing else",
    write_case(empty(3), wplan([0, 2], [-1], bs=0), [1, 2], [0, 1], [1, 2]),
    output(empty(3), [], slot_runs=0))

b = empty(3)
stamp(b, ANCHOR, [(1, 42, 0)])
CANARY["write_input_assert_token"] = (
    "8: input assert token 42 vs 99 -> one row, bits 8, stored token 42",
    write_case(empty(3), wplan([0, 1], [-1]), [42], [0], [1], expected_input_ids=[99], expected_positions=[0]),
    output(b, [[0, 1, 0, 42, 99, ANCHOR, 0, WRITE_TOKEN]], slot_runs=1))

b = empty(3)
stamp(b, ANCHOR, [(1, 5, 7)])
CANARY["write_input_assert_position"] = (
    "8: input assert position 7 vs 0 -> bits 16, stored 7",
    write_case(empty(3), wplan([0, 1], [-1]), [5], [7], [1], expected_input_ids=[5], expected_positions=[0]),
    output(b, [[0, 1, 7, 5, 5, ANCHOR, 0, WRITE_POSITION]], slot_runs=1))

b = empty(4)
b[1] = [9, 4, ANCHOR, 0]
after = [row[:] for row in b]
running = stamp(after, slot_hash(b, 1), [(2, 8, 7)])
CANARY["write_chain_position_assert"] = (
    "4: seed at position 4, token at 7 -> row (slot, 7, token, token, running, 5, 16), stored all the same",
    write_case(b, wplan([0, 1], [1]), [8], [7], [2]),
    output(after, [[0, 2, 7, 8, 8, slot_hash(b, 1), 5, WRITE_POSITION]], slot_runs=1))

CANARY["write_chain_position_assert_off"] = (
    "4: chain_position_assert 0 -> no row",
    write_case(b, wplan([0, 1], [1]), [8], [7], [2], chain_position_assert=0),
    output(after, [], slot_runs=1))

# A zero seed record chains to mix3(0, 0, 0) = 0: token 0 at position 0 then stores (0, 0, 0, 0) and its write
# rows carry token, position and chain hash 0 -- a real store's rows, which the never-written filter keeps.
assert mix3(0, 0, 0) == 0
CANARY["write_rows_of_a_zero_seed_chain_are_kept_in_the_report"] = (
    "7: the never-written filter is for verify-stage rows only: token 0 at position 0 chained to a zero seed "
    "record, expected token 9 -> rows bits 8 and 16 with token, position and chain hash 0, both reported",
    write_case(empty(3), wplan([0, 1], [2]), [0], [0], [1], expected_input_ids=[9], expected_positions=[0]),
    output(empty(3), [[0, 1, 0, 0, 9, 0, 0, WRITE_TOKEN], [0, 1, 0, 0, 0, 0, 1, WRITE_POSITION]], slot_runs=1))

b = empty(4)
running = stamp(b, ANCHOR, [(1, 1, 0)])
CANARY["write_out_of_range_slot"] = (
    "4: a slot >= num_slots -> (slot, pos, token, -1, running, -1, 64), skipped like a negative slot "
    "(no store, no chain step, prev_pos stays)",
    write_case(empty(4), wplan([0, 3], [-1]), [1, 2, 3], [0, 1, 1], [1, 9, 2]),
    output([b[0], b[1], [3, 1, running, 0], b[3]], [[0, 9, 1, 2, -1, running, -1, OUT_OF_RANGE]], slot_runs=2))

b = empty(4)
stamp(b, ANCHOR, [(1, 6, 3)])
CANARY["write_out_of_range_seed"] = (
    "4: a seed >= num_slots -> one row (seed, -1, -1, -1, anchor_hash, -1, 64); the chain starts from anchor_hash "
    "with no position assert",
    write_case(empty(4), wplan([0, 1], [12]), [6], [3], [1]),
    output(b, [[0, 12, -1, -1, -1, ANCHOR, -1, OUT_OF_RANGE]], slot_runs=1))

b = empty(4)
running = stamp(b, ANCHOR, [(1, 1, 0), (2, 2, 1)])
CANARY["write_out_of_range_token_index"] = (
    "4: a token index outside [0, num_tokens) -> one row (i, -1, -1, -1, running, -1, 64); the request stops there",
    write_case(empty(4), wplan([0, 4], [-1]), [1, 2], [0, 1], [1, 2]),
    output(b, [[0, 2, -1, -1, -1, running, -1, OUT_OF_RANGE]], slot_runs=2))

KV = {"mode": "all", "sources": [source([[0] * 16, PINNED_BYTES])]}
b = empty(2)
b[1] = [4, 0, ANCHOR, PINNED_FOLD]
CANARY["write_real_kv_pinned_fold"] = (
    "3: one source whose 16 bytes at slot 1 are the pinned ones, read_bytes 16 -> real_kv_hash 0x6041580849E6407D",
    write_case(empty(2), wplan([0, 1], [-1]), [4], [0], [1], real_kv=KV),
    output(b, [], slot_runs=1))

CANARY["write_real_kv_mode_none"] = (
    "3: mode none -> fold 0 (the sources are still checked)",
    write_case(empty(2), wplan([0, 1], [-1]), [4], [0], [1], real_kv=dict(KV, mode="none")),
    output([[0, 0, 0, 0], [4, 0, ANCHOR, 0]], [], slot_runs=1))

# ---- step: plan -> verify -> write ----
RTT = [[0] * 8, [1, 2, 3, 4, 5, 6, 7, 0], [0] * 8]


def step_case(prefix, extend, ids, positions, slots, buffer=None, **extra):
    c = {"_command": "step", "req_pool_indices": [1], "prefix_lens": [prefix], "extend_seq_lens": [extend],
         "req_to_token": RTT, "verify_capacity": 16, "write_req_capacity": 2,
         "input_ids": ids, "positions": positions, "out_cache_loc": slots}
    if buffer is not None:
        c["canary_buffer"] = buffer
    c.update(extra)
    return c


b = empty(8)
stamp(b, ANCHOR, [(1, 10, 0), (2, 11, 1)])
CANARY["step_out_of_range_slots"] = (
    "9: step with a page table pointing past the buffer (slot 9 of 8) and a write past it -> OUT_OF_RANGE rows "
    "from verify (the entry), write's seed (the chain starts from anchor_hash) and the token",
    step_case(2, 1, [12], [2], [20], b, req_to_token=[[0] * 4, [1, 9, 3, 4], [0] * 4], kernel_kind="HEAD_V_FULL"),
    dict(output(b, [[1, 9, 1, -1, -1, -1, -1, OUT_OF_RANGE], [1, 9, -1, -1, -1, ANCHOR, -1, OUT_OF_RANGE],
                    [1, 20, 2, 12, -1, ANCHOR, -1, OUT_OF_RANGE]], slot_runs=2, kernel_runs=2),
         verify_plan=vplan([1, 9], [0, 1], [-1, 1]),
         write_plan={"write_offsets": [0, 1, 0], "write_seed_slot_indices": [9], "write_num_valid_reqs": 1}))

# ---- sequences: each case takes the canary_buffer the previous one printed ----
# SPEC-CANARY 4 leaves these write calls' outcome open: `check` must accept every outcome it allows, whatever
# order a parallel backend's requests take (no "_expected": the output is not unique).
OPEN = {}
OPEN["seed_is_another_requests_target"] = (
    "4: request 1's seed slot 4 is request 0's target in the same call: request 1 chains to slot 4's record "
    "before or after request 0's store, either is allowed (issue 19, ~1 check in 5 said DISAGREE on OpenMP)",
    write_case([[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [9, 47, 0, 0]], wplan([0, 1, 2], [-1, 4]),
               [7, 8], [239, 48], [4, 2]))
# Many requests each seeded on another's target, in both directions, so that two threads cannot both keep
# the serial order.
_pairs = 24
_buffer = [[0, 0, 0, 0]] + [[100 + s, 10 + s, 0, 0] for s in range(1, 2 * _pairs + 1)]
_seeds = [-1] * (2 * _pairs)
_slots = []
for _r in range(2 * _pairs):
    _slots.append(_r + 1)  # request r stores slot r + 1
for _p in range(_pairs):
    _seeds[_p] = _pairs + _p + 1      # request p (first half) seeds on request pairs + p's target
    _seeds[_pairs + _p] = _p + 1      # and request pairs + p on request p's
OPEN["seeds_crossing_between_requests"] = (
    "4: 48 requests, each seeded on a slot another request stores in the same call (in both directions)",
    write_case(_buffer, wplan(list(range(2 * _pairs + 1)), _seeds), [500 + r for r in range(2 * _pairs)],
               [11 + s for s in _slots], _slots))

SEQUENCES = {}

b = empty(43)
b[42] = [7, 10, ANCHOR, 0]
after = [row[:] for row in b]
stamp(after, slot_hash(b, 42), [(s, t, p) for s, t, p in zip(range(5), [101, 202, 303, 404, 505], range(11, 16))])
assert after[0][2] & M64 == 0x5E35681BCFCE7CF6
SEQUENCES["seed_42_write_then_verify_clean"] = (
    "8: seed slot 42 stamped (7, 10, anchor_hash), tokens 101..505 at positions 11..15 into slots 0..4 -> first "
    "stored prev_hash 0x5E35681BCFCE7CF6; a verify of those 5 entries -> no row",
    [dict(write_case(b, wplan([0, 5], [42]), [101, 202, 303, 404, 505], list(range(11, 16)), list(range(5))),
          _expected=output(after, [], slot_runs=5)),
     dict(verify_case(None, vplan(list(range(5)), list(range(11, 16)), [42, 0, 1, 2, 3],
                                  tokens=[101, 202, 303, 404, 505])),
          _expected=output(after, [], slot_runs=5))])

after = empty(4)
stamp(after, ANCHOR, [(1, 1, 0), (2, 2, 1), (3, 3, 2)])
running = [ANCHOR, slot_hash(after, 1), slot_hash(after, 2)]
SEQUENCES["input_assert_all_wrong_then_verify_clean"] = (
    "8: all three tokens wrong -> 3 rows (bits 8), and a later verify of them is clean (the chain follows actual "
    "values)",
    [dict(write_case(empty(4), wplan([0, 3], [-1]), [1, 2, 3], [0, 1, 2], [1, 2, 3], expected_input_ids=[7, 8, 9],
                     expected_positions=[0, 1, 2]),
          _expected=output(after, [[0, 1 + i, i, 1 + i, 7 + i, running[i], i, WRITE_TOKEN] for i in range(3)],
                           slot_runs=3)),
     dict(verify_case(None, vplan([1, 2, 3], [0, 1, 2], [-1, 1, 2], tokens=[1, 2, 3])),
          _expected=output(after, [], slot_runs=3))])

flipped = [row[:] for row in KV["sources"][0]["rows"]]
flipped[1][5] ^= 0x10
b = empty(2)
b[1] = [4, 0, ANCHOR, PINNED_FOLD]
SEQUENCES["real_kv_byte_flipped_after_write"] = (
    "8: a byte of a real-KV source flipped after the write -> verify bit 4 only (and none before the flip)",
    [dict(write_case(empty(2), wplan([0, 1], [-1]), [4], [0], [1], real_kv=KV), _expected=output(b, [], slot_runs=1)),
     dict(verify_case(None, vplan([1], [0], [-1], tokens=[4]), real_kv=KV), _expected=output(b, [], slot_runs=1)),
     dict(verify_case(None, vplan([1], [0], [-1], tokens=[4]), real_kv={"mode": "all", "sources": [source(flipped)]}),
          _expected=output(b, [[0, 1, 0, 4, 4, ANCHOR, ANCHOR, REAL_KV]], slot_runs=1))])

# A prefill of 3 tokens into slots 1..3, then a decode step that verifies them (with an expected-token pool)
# and writes slot 4. RTT row 1 maps positions 0..6 to slots 1..7.
POOL = {"req_to_verify_expected_tokens": [[0] * 8, [10, 11, 12, 13, 0, 0, 0, 0], [0] * 8],
        "req_to_verify_expected_tokens_valid_lens": [0]}
after1 = empty(8)
stamp(after1, ANCHOR, [(1, 10, 0), (2, 11, 1), (3, 12, 2)])
after2 = [row[:] for row in after1]
stamp(after2, slot_hash(after1, 3), [(4, 13, 3)])
STEP1 = dict(step_case(0, 3, [10, 11, 12], [0, 1, 2], [1, 2, 3], empty(8)),
             _expected=dict(output(after1, [], slot_runs=3, kernel_runs=2),
                            verify_plan=vplan([], [], []),
                            write_plan={"write_offsets": [0, 3, 0], "write_seed_slot_indices": [-1],
                                        "write_num_valid_reqs": 1}))
STEP2_PLAN = {"verify_plan": vplan([1, 2, 3], [0, 1, 2], [-1, 1, 2], tokens=[10, 11, 12]),
              "write_plan": {"write_offsets": [0, 1, 0], "write_seed_slot_indices": [3], "write_num_valid_reqs": 1}}
step2 = dict(step_case(3, 1, [13], [3], [4]), **dict(POOL, req_to_verify_expected_tokens_valid_lens=[4]))
SEQUENCES["step_prefill_then_decode_clean"] = (
    "9: step 1 writes a 3-token prefill, step 2 plans a decode, verifies the prefix (positions, chain, expected "
    "tokens from a pool) clean and writes the next token chained to it",
    [STEP1, dict(step2, _expected=dict(output(after2, [], slot_runs=4, kernel_runs=2), **STEP2_PLAN))])

corrupt = [row[:] for row in after1]
corrupt[2][0] = 99
after2c = [row[:] for row in corrupt]
stamp(after2c, slot_hash(corrupt, 3), [(4, 13, 3)])
SEQUENCES["step_detects_a_corrupted_record"] = (
    "9: the same two steps with slot 2's token overwritten between them -> step 2's verify reports slot 2 "
    "(bit 32: stored 99, expected 11) and slot 3 (bit 1: its predecessor's hash changed); the write goes on",
    [STEP1, dict(step2, _corrupt=[[2, 0, 99]],
                 _expected=dict(output(after2c, [[0, 2, 1, 99, 11, slot_hash(after1, 1), slot_hash(after1, 1), TOKEN],
                                                 [0, 3, 2, 12, 12, slot_hash(after1, 2), slot_hash(corrupt, 2), CHAIN]],
                                       slot_runs=4, kernel_runs=2), **STEP2_PLAN))])

# ---- rejected inputs: _command and check both exit 2 with one line ----
V = verify_case(empty(3), vplan([1], [0], [-1]))
W = write_case(empty(3), wplan([0, 1], [-1]), [4], [0], [1])
S = step_case(0, 1, [4], [0], [1], empty(8))
DROP = object()


def changed(base, **changes):
    """A copy of `base` with keys changed, or removed where the value is DROP."""
    c = dict(base)
    for key, value in changes.items():
        if value is DROP:
            del c[key]
        else:
            c[key] = value
    return c


def kv(**changes):
    return {"mode": "all", "sources": [changed(source([[0] * 16] * 3), **changes)]}


CANARY_REJECT = {
    "unknown_kernel_kind": (changed(V, kernel_kind="HEAD_Q_FULL"), "kernel_kind: unknown launch tag \"HEAD_Q_FULL\""),
    "kernel_kind_as_a_number": (changed(W, kernel_kind=0), "kernel_kind: expected a launch tag name"),
    "ragged_canary_buffer": (changed(V, canary_buffer=[[0, 0, 0, 0], [0, 0, 0], [0, 0, 0, 0]]),
                             "canary_buffer[1]: has 3 entries, must have 4"),
    "canary_buffer_not_rows": (changed(W, canary_buffer=[0, 0, 0, 0]), "canary_buffer[0]: expected a row"),
    "hash_beyond_int64": (changed(V, canary_buffer=[[0, 0, 0, 0], [0, 0, 2 ** 63, 0], [0, 0, 0, 0]]),
                          "canary_buffer[1][2]: 9223372036854775808 is out of int64 range"),
    "hash_as_a_float": (changed(V, canary_buffer=[[0, 0, 0, 0], [0, 0, 1.5, 0], [0, 0, 0, 0]]),
                        "canary_buffer[1][2]: expected an int64 integer"),
    "missing_canary_buffer": (changed(W, canary_buffer=DROP), "canary_buffer: required key is missing"),
    "negative_ring_capacity": (changed(V, ring_capacity=-1), "ring_capacity: -1 is negative"),
    "ring_capacity_beyond_cli_limit": (changed(S, ring_capacity=2 ** 20 + 1),
                                       "ring_capacity: 1048577 is above kvcanary's limit of 1048576"),
    "verify_arrays_of_different_lengths": (
        changed(V, verify_plan=dict(vplan([1, 2], [0, 1], [-1, 1]), verify_expected_positions=[0])),
        "verify_plan.verify_expected_positions: has 1 entries but verify_slot_indices has 2"),
    "verify_plan_missing_enable": (changed(V, verify_plan=changed(vplan([1], [0], [-1]), enable=DROP)),
                                   "verify_plan.enable: required key is missing"),
    "check_expected_token_not_a_boolean": (changed(V, check_expected_token=1),
                                           "check_expected_token: expected true or false"),
    "token_arrays_of_different_lengths": (changed(W, positions=[0, 1]),
                                          "positions: has 2 entries but input_ids has 1"),
    "step_token_arrays_of_different_lengths": (changed(S, out_cache_loc=[]),
                                               "out_cache_loc: has 0 entries but input_ids has 1"),
    "expected_ids_without_positions": (changed(W, expected_input_ids=[4]),
                                       "expected_input_ids: is given without expected_positions"),
    "expected_positions_of_wrong_length": (changed(W, expected_input_ids=[4], expected_positions=[0, 0]),
                                           "expected_positions: has 2 entries but input_ids has 1"),
    "token_beyond_int64": (changed(W, input_ids=[2 ** 63]), "input_ids[0]: 9223372036854775808 is out of int64"),
    "empty_write_offsets": (changed(W, write_plan=wplan([], [], bs=0)), "write_plan.write_offsets: is empty"),
    "too_few_seeds": (changed(W, write_plan=wplan([0, 1, 1], [-1], bs=2)),
                      "fewer than min(write_num_valid_reqs, write_req_capacity) = 2"),
    "too_many_seeds": (changed(W, write_plan=wplan([0, 1], [-1, -1], bs=1)), "more than write_req_capacity 1"),
    "chain_position_assert_beyond_int32": (changed(W, chain_position_assert=2 ** 31),
                                           "chain_position_assert: 2147483648 is out of int32 range"),
    "check_expected_token_in_a_write_case": (changed(W, check_expected_token=True),
                                             "check_expected_token: unknown key"),
    "real_kv_read_bytes_not_a_multiple_of_16": (changed(V, real_kv=kv(read_bytes=8)),
                                                "real_kv.sources[0].read_bytes is 8"),
    "real_kv_source_too_small": (changed(W, real_kv=kv(rows=[[0] * 16] * 2)),
                                 "real_kv.sources[0].bytes has 2 rows, fewer than the 3"),
    "real_kv_row_too_short": (changed(V, real_kv=kv(bytes_per_token=32, read_bytes=16)),
                              "page_size * bytes_per_token is 1 x 32, more than the 16 bytes of a row"),
    "real_kv_ragged_rows": (changed(V, real_kv=kv(rows=[[0] * 16, [0] * 16, [0] * 15])),
                            "real_kv.sources[0].rows[2]: has 15 entries but"),
    "real_kv_byte_beyond_255": (changed(V, real_kv=kv(rows=[[0] * 16, [256] + [0] * 15, [0] * 16])),
                                "real_kv.sources[0].rows[1][0]: 256 is out of byte range"),
    "real_kv_unknown_mode": (changed(V, real_kv={"mode": "some", "sources": []}),
                             "real_kv.mode: expected \"none\", \"partial\" or \"all\""),
    "real_kv_five_sources": (changed(V, real_kv={"mode": "all", "sources": [source([[0] * 16] * 3)] * 5}),
                             "real_kv.sources: has 5 sources, at most 4"),
    "real_kv_checked_in_mode_none": (changed(W, real_kv=dict(kv(page_size=0), mode="none")),
                                     "real_kv.sources[0].page_size is 0"),
    "real_kv_source_without_rows": (changed(V, real_kv=kv(rows=DROP)),
                                    "real_kv.sources[0].rows: required key is missing"),
    "real_kv_not_an_object": (changed(V, real_kv=[1]), "real_kv: expected an object"),
    "step_plan_rejected_by_the_library": (changed(S, req_pool_indices=[1, 1, 1], prefix_lens=[0] * 3,
                                                  extend_seq_lens=[1] * 3),
                                          "write_req_capacity"),
    "step_missing_plan_key": (changed(S, req_to_token=DROP), "req_to_token: required key is missing"),
    # check tells the kind by the keys: its message differs from the command's
    "verify_and_write_plan_in_one_case": (dict(changed(V, write_plan=wplan([0], [])),
                                               _check_error="holds both verify_plan and write_plan"),
                                          "write_plan: unknown key"),
    "verify_case_without_verify_plan": (dict(changed(V, verify_plan=DROP), _check_error="req_pool_indices: required"),
                                        "verify_plan: required key is missing"),
}
