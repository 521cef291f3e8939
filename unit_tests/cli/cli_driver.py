#!/usr/bin/env python3
"""End-to-end checks of kvcanary (python3 stdlib only); ctest calls one mode per test.

  cli_driver.py plan    TOOL CASE.json [TOOL OPTIONS...]  `plan` prints a SPEC 5 plan that holds "_expected"
                                                          (from the file and from standard input alike)
  cli_driver.py canary  TOOL CASE.json [TOOL OPTIONS...]  the case's "_command" (verify, write, step) prints a
                                                          SPEC-CANARY 9 output that holds "_expected" (file and
                                                          stdin alike)
  cli_driver.py sequence TOOL CASE.json [TOOL OPTIONS...] the cases of "_sequence" in order, each taking the
                                                          canary_buffer printed by the one before (after
                                                          "_corrupt") when it has none; each output holds its
                                                          "_expected", and `check` agrees on each case
  cli_driver.py reject  TOOL CASE.json [TOOL OPTIONS...]  the case's "_command" (default plan) and `check` both
                                                          exit 2, one stderr line containing the case's
                                                          "_expect_error" ("_check_error" for check if given)
  cli_driver.py fails   TOOL TEXT ARGS...                 exit 2, nothing on stdout, one stderr line containing TEXT
  cli_driver.py prints  TOOL TEXT ARGS...                 exit 0, nothing on stderr, stdout containing TEXT
  cli_driver.py bounded TOOL MIB CASE TEXT COMMAND        `COMMAND CASE` peaks under MIB MiB of memory and exits 0
                                                          (TEXT "exit 0") or 2 with one stderr line containing
                                                          TEXT; CASE is a file or a name of LARGE_CASES, written
                                                          at test time (too big to commit)
  cli_driver.py work    TOOL CASE TEXT COMMAND...         each `COMMAND CASE` exits 0 (TEXT "exit 0") or 2 with one
                                                          stderr line containing TEXT; CASE a name of WORK_CASES
  cli_driver.py wait_policy TOOL USER EXPECTED ARGS...    with OMP_WAIT_POLICY=USER ("unset": without it), the
                                                          running `TOOL ARGS` has OMP_WAIT_POLICY=EXPECTED in the
                                                          environment its OpenMP runtime started with
  cli_driver.py threads TOOL USER ARGS...                 with OMP_NUM_THREADS=USER ("unset": without it), the running
                                                          `TOOL ARGS` has USER, or (unset) the free cores in [1, cores]
  cli_driver.py running TOOL MIB SECONDS ARGS...          `TOOL ARGS` in MIB + 1024 MiB of address space still runs
                                                          after SECONDS (or has exited 0), peaking under MIB MiB
  cli_driver.py starved TOOL MIB CASE COMMAND             `COMMAND CASE` in MIB MiB of address space exits 2 with
                                                          one stderr line saying "out of memory" (never aborts)
"""
import json
import os
import resource
import subprocess
import sys
import tempfile


class Failure(Exception):
    pass


def call(tool, args, stdin=None):
    p = subprocess.run([tool] + args, stdin=stdin, capture_output=True, timeout=300)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def show(rc, out, err):
    return "exit %d\n--- stdout ---\n%s\n--- stderr ---\n%s" % (rc, out[:4000], err[:4000])


def expect_one_error_line(what, rc, out, err, text):
    if rc != 2:
        raise Failure("%s: expected exit 2\n%s" % (what, show(rc, out, err)))
    if out:
        raise Failure("%s: expected nothing on stdout\n%s" % (what, show(rc, out, err)))
    if not err.endswith("\n") or err.count("\n") != 1:
        raise Failure("%s: expected exactly one line on stderr\n%s" % (what, show(rc, out, err)))
    if text not in err:
        raise Failure("%s: stderr lacks %r\n%s" % (what, text, show(rc, out, err)))


def check_shape(plan, path="plan"):
    """SPEC 5: verify arrays hold verify_num_valid entries when enable == 1, none when enable == 0."""
    v = plan["verify_plan"]
    n = v["verify_num_valid"] if v["enable"] == 1 else 0
    for key in ("verify_slot_indices", "verify_expected_tokens", "verify_expected_positions",
                "verify_prev_slot_indices"):
        if len(v[key]) != n:
            raise Failure("%s.verify_plan.%s has %d entries, expected %d" % (path, key, len(v[key]), n))
    w = plan["write_plan"]
    if len(w["write_seed_slot_indices"]) != w["write_num_valid_reqs"]:
        raise Failure("%s.write_plan.write_seed_slot_indices has %d entries, expected bs = %d"
                      % (path, len(w["write_seed_slot_indices"]), w["write_num_valid_reqs"]))
    for key in ("input_error_bits", "first_bad_row"):
        if not isinstance(plan["status"][key], int):
            raise Failure("%s.status.%s missing" % (path, key))


def first_mismatch(expected, actual, path):
    """Objects: every expected key must match (others are not checked); arrays and numbers: exactly."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return "%s: expected an object, got %r" % (path, actual)
        for key, value in expected.items():
            if key not in actual:
                return "%s.%s: missing" % (path, key)
            found = first_mismatch(value, actual[key], path + "." + key)
            if found:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return "%s: expected an array, got %r" % (path, actual)
        for i, (e, a) in enumerate(zip(expected, actual)):
            found = first_mismatch(e, a, "%s[%d]" % (path, i))
            if found:
                return found
        if len(expected) != len(actual):
            return "%s: %d entries, expected %d" % (path, len(actual), len(expected))
        return None
    if type(expected) is not type(actual) or expected != actual:
        return "%s: got %r, expected %r" % (path, actual, expected)
    return None


def one_json_line(tool, command, case, options):
    """`tool command [options] case`, which must exit 0 with one line of JSON and nothing on stderr; the same
    through standard input. Returns the parsed output and the text."""
    rc, out, err = call(tool, [command] + options + [case])
    if rc != 0 or err:
        raise Failure("%s: expected exit 0 and an empty stderr\n%s" % (command, show(rc, out, err)))
    if out.count("\n") != 1:
        raise Failure("%s: expected one line of JSON\n%s" % (command, show(rc, out, err)))
    with open(case, "rb") as f:  # the same through standard input
        stdin_rc, stdin_out, stdin_err = call(tool, [command] + options + ["-"], stdin=f)
    if (stdin_rc, stdin_out, stdin_err) != (rc, out, err):
        raise Failure("%s - < CASE differs from %s CASE\n%s" % (command, command, show(stdin_rc, stdin_out, stdin_err)))
    return json.loads(out), (rc, out, err)


def mode_plan(tool, case, options):
    with open(case) as f:
        expected = json.load(f)["_expected"]
    plan, shown = one_json_line(tool, "plan", case, options)
    check_shape(plan)
    for i, step in enumerate(plan.get("steps", [])):
        check_shape(step, "steps[%d]" % i)
    found = first_mismatch(expected, plan, "plan")
    if found:
        raise Failure("plan disagrees with SPEC: " + found + "\n" + show(*shown))


def check_canary_shape(output):
    """SPEC-CANARY 9: rows sorted, min(count, capacity) of them, one report line per row less those dropped."""
    ring = output["ring"]
    rows = ring["rows"]
    if len(rows) != min(ring["count"], ring["capacity"]):
        raise Failure("ring holds %d rows, expected min(count, capacity)" % len(rows))
    if any(len(row) != 8 for row in rows) or rows != sorted(rows):
        raise Failure("ring rows are not sorted rows of 8 fields")
    if len(output["report"]) + output["report_dropped"] != len(rows):
        raise Failure("report has %d lines and dropped %d, for %d rows"
                      % (len(output["report"]), output["report_dropped"], len(rows)))
    for key in ("slot_run_counter", "kernel_run_counter"):
        if not isinstance(output[key], int):
            raise Failure(key + " missing")


def run_canary(tool, command, case, expected, options):
    output, shown = one_json_line(tool, command, case, options)
    check_canary_shape(output)
    found = first_mismatch(expected, output, command)
    if found:
        raise Failure("%s disagrees with SPEC-CANARY: %s\n%s" % (command, found, show(*shown)))
    return output


def mode_canary(tool, case, options):
    with open(case) as f:
        document = json.load(f)
    run_canary(tool, document["_command"], case, document["_expected"], options)


def mode_sequence(tool, case, options):
    with open(case) as f:
        steps = json.load(f)["_sequence"]
    buffer = None
    with tempfile.TemporaryDirectory() as directory:
        for i, step in enumerate(steps):
            step = dict(step)
            if "canary_buffer" not in step:
                for slot, field, value in step.pop("_corrupt", []):
                    buffer[slot][field] = value
                step["canary_buffer"] = buffer
            path = os.path.join(directory, "step%d.json" % i)
            with open(path, "w") as f:
                json.dump(step, f)
            try:
                buffer = run_canary(tool, step["_command"], path, step.get("_expected", {}), options)["canary_buffer"]
                rc, out, err = call(tool, ["check"] + options + [path])
                if rc != 0 or err:
                    raise Failure("check: expected exit 0 (library and reference agree)\n" + show(rc, out, err))
            except Failure as failure:
                raise Failure("_sequence[%d]: %s" % (i, failure))


def mode_reject(tool, case, options):
    with open(case) as f:
        document = json.load(f)
    command = document.get("_command", "plan")
    for name, text in ((command, document["_expect_error"]),
                       ("check", document.get("_check_error", document["_expect_error"]))):
        rc, out, err = call(tool, [name] + options + [case])
        expect_one_error_line(name, rc, out, err, text)
    with open(case, "rb") as f:  # the same through standard input
        rc, out, err = call(tool, [command] + options + ["-"], stdin=f)
    expect_one_error_line(command + " -", rc, out, err, document["_expect_error"])


def decode_case(**changes):
    """SPEC 6's decode fact, as in cases/make_cases.py."""
    c = {"req_pool_indices": [2], "prefix_lens": [7], "extend_seq_lens": [1],
         "req_to_token": [[rp * 16 + p for p in range(16)] for rp in range(4)],
         "verify_capacity": 64, "write_req_capacity": 4}
    c.update(changes)
    return c


def zeros(n):
    return "[" + ",".join(["0"] * n) + "]"


# The hostile cases of issue 10 item 5, and the largest cases the limits accept (docs/cli-limits.md).
LARGE_CASES = {
    # 658 KB, 2^26 verify entries: printed 1.37 GB from a 12.5 GB peak
    "verify_entries_2p26": lambda: json.dumps({
        "req_pool_indices": [1] * 1024, "prefix_lens": [65536] * 1024, "extend_seq_lens": [1] * 1024,
        "req_to_token": [[0] * 65536, list(range(65536))], "verify_capacity": 2 ** 26, "write_req_capacity": 1024}),
    # write capacity 2^24: ~0.5 GB more with every step
    "steps_at_write_capacity_2p24": lambda: json.dumps({"steps": [decode_case(write_req_capacity=2 ** 24)] * 40}),
    # a first row of 100k entries reserved rows x 100k (40 GB) before the rows were checked
    "ragged_rows_after_a_long_one": lambda: json.dumps(decode_case(req_to_token=[[0] * 100000] + [[]] * 99999)),
    # 6 steps at the write limit: 2^26 entries printed, one step at a time
    "steps_at_output_limit": lambda: json.dumps({"steps": [decode_case(write_req_capacity=2 ** 22)] * 6}),
    # 2^23 verify entries and write capacity 2^22, from a small file
    "verify_and_write_at_limit": lambda: json.dumps({
        "req_pool_indices": [1] * 128, "prefix_lens": [65536] * 128, "extend_seq_lens": [1] * 128,
        "req_to_token": [[0] * 65536, list(range(65536))], "verify_capacity": 2 ** 23, "write_req_capacity": 2 ** 22}),
    # every limit at once: a 32 MiB input (16.6 Mi cells), 8.3 Mi verify entries, write capacity 2^22
    "every_limit_at_once": lambda: (
        '{"req_pool_indices": [1], "prefix_lens": [8300000], "extend_seq_lens": [1], "verify_capacity": %d, '
        '"write_req_capacity": %d, "req_to_token": [%s, %s]}' % (2 ** 23, 2 ** 22, zeros(8300000), zeros(8300000))),
    # the costliest document to read (issue 19 item 7): 32 MiB of 31-deep {"": {"": ...}} chains, about
    # 35 bytes of heap for each byte of text (docs/cli-limits.md states 1.1 GiB)
    "nested_objects_at_input_limit": lambda: "[" + ",".join(
        ['{"":' * 30 + "{}" + "}" * 30] * ((32 << 20) // 153)) + "]",
}


def canary_buffer_text(slots, first=None):
    """A canary_buffer of `slots` zero records ("[0,0,0,0]": 10 bytes a slot), slot 1 set to `first`."""
    records = ["[0,0,0,0]"] * slots
    if first is not None:
        records[1] = json.dumps(first)
    return "[" + ",".join(records) + "]"


def compact(values):
    return json.dumps(values, separators=(",", ":"))


def verify_plan_text(entries, slot, position):
    return ('{"verify_num_valid": %d, "enable": 1, "verify_slot_indices": %s, "verify_expected_tokens": %s, '
            '"verify_expected_positions": %s, "verify_prev_slot_indices": %s}'
            % (entries, compact([slot] * entries), compact([-1] * entries), compact([position] * entries),
               compact([-1] * entries)))


# The largest canary cases the limits accept (docs/cli-limits.md), and one past them.
LARGE_CASES.update({
    # 2^21 + 1 slots: refused before the records are converted
    "canary_slots_above_limit": lambda: '{"canary_buffer": %s, "verify_plan": %s}' % (
        canary_buffer_text(2 ** 21 + 1), verify_plan_text(1, 1, 0)),
    # 2^21 slots and a full ring of 2^20 rows (2^20 + 5 violations, each with its report line): 30 MB of text
    "verify_at_canary_limits": lambda: '{"canary_buffer": %s, "ring_capacity": %d, "verify_plan": %s}' % (
        canary_buffer_text(2 ** 21, [5, 0, 0, 0]), 2 ** 20, verify_plan_text(2 ** 20 + 5, 1, 99)),
    # step at every limit: 2^23 verify entries, write capacity 2^22, 2^21 slots, a full ring of 2^20 rows
    "step_at_every_limit": lambda: (
        '{"req_pool_indices": %s, "prefix_lens": %s, "extend_seq_lens": %s, "req_to_token": [%s, %s], '
        '"verify_capacity": %d, "write_req_capacity": %d, "canary_buffer": %s, "ring_capacity": %d, '
        '"input_ids": %s, "positions": %s, "out_cache_loc": %s}'
        % (json.dumps([1] * 128), json.dumps([65536] * 128), json.dumps([1] * 128), zeros(65536),
           json.dumps(list(range(65536))), 2 ** 23, 2 ** 22, canary_buffer_text(2 ** 21), 2 ** 20,
           json.dumps(list(range(128))), json.dumps([65536] * 128), json.dumps(list(range(128))))),
})


def overlapping_write(requests, tokens):
    """issue 19 item 1: write_offsets [0, N, 0, N, ...], every other request walks the same N tokens again."""
    offsets = [0 if r % 2 == 0 else tokens for r in range(requests + 1)]
    return compact({"canary_buffer": [[0, 0, 0, 0]] * 8, "input_ids": [1] * tokens, "positions": [0] * tokens,
                    "out_cache_loc": [1 + i % 7 for i in range(tokens)],
                    "write_plan": {"write_offsets": offsets, "write_seed_slot_indices": [-1] * requests,
                                   "write_num_valid_reqs": requests}})


def folding_verify(entries, bytes_per_token):
    """issue 19 item 1: every verify entry folds one large real-KV token (slot 1 again and again)."""
    return '{"canary_buffer": [[0,0,0,0],[0,0,0,0]], "verify_plan": %s, "real_kv": {"mode": "all", "sources": ' \
           '[{"page_size": 2, "bytes_per_token": %d, "read_bytes": %d, "rows": [%s]}]}}' % (
               verify_plan_text(entries, 1, 0), bytes_per_token, bytes_per_token, zeros(2 * bytes_per_token))


# The work bound (docs/cli-limits.md): small cases whose work is multiplied, just past and at the limits.
WORK_CASES = {
    "overlapping_write_past_limit": lambda: overlapping_write(3800, 9000),  # 1900 x 9000 > 2^24 tokens walked
    "overlapping_write_at_limit": lambda: overlapping_write(3728, 9000),    # 1864 x 9000 <= 2^24
    "folding_verify_past_limit": lambda: folding_verify(2 ** 14 + 1, 2 ** 16),  # > 2^30 bytes folded
}


def mode_work(tool, case, text, commands):
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, case + ".json")
        with open(path, "w") as f:
            f.write(WORK_CASES[case]())
        for command in commands:
            rc, out, err = call(tool, [command, path])
            if text == "exit 0":
                if rc != 0 or err:
                    raise Failure("%s: expected exit 0 and an empty stderr\n%s" % (command, show(rc, out[:200], err)))
            else:
                expect_one_error_line(command + " " + case, rc, out, err, text)


def running_environment(tool, env, args, name, accept):
    """Polls the environment of the running `tool args` (/proc/PID/environ: the same pid after execv) until
    its value of `name` satisfies accept(value); raises Failure with the last value seen after 20 s."""
    import time
    p = subprocess.Popen([tool] + args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen = None
    try:
        deadline = time.time() + 20
        while time.time() < deadline and p.poll() is None:
            try:
                with open("/proc/%d/environ" % p.pid, "rb") as f:
                    values = [v.split(b"=", 1)[1].decode() for v in f.read().split(b"\0")
                              if v.startswith(name.encode() + b"=")]
                seen = values[0] if values else None
            except OSError:
                pass
            if seen is not None and accept(seen):
                return
            time.sleep(0.02)
    finally:
        p.kill()
        p.wait()
    raise Failure("the running tool's environment holds %s=%r" % (name, seen))


def with_variable(name, user):
    env = dict(os.environ)
    env.pop(name, None)
    if user != "unset":
        env[name] = user
    return env


def mode_wait_policy(tool, user, expected, args):
    """The tool re-executes itself with OMP_WAIT_POLICY=passive unless the user set one (issue 19 item 8): the
    running image's environment must hold `expected`."""
    running_environment(tool, with_variable("OMP_WAIT_POLICY", user), args, "OMP_WAIT_POLICY",
                        lambda value: value == expected)


def mode_threads(tool, user, args):
    """Unless the user set OMP_NUM_THREADS, the tool re-executes itself with the cores the load average leaves
    free, in [1, usable cores] (issue 19 item 8); a user's value is kept as given."""
    cores = len(os.sched_getaffinity(0))
    accept = (lambda value: value == user) if user != "unset" else (
        lambda value: value.isdigit() and 1 <= int(value) <= cores)
    running_environment(tool, with_variable("OMP_NUM_THREADS", user), args, "OMP_NUM_THREADS", accept)


def run_limited(tool, command, case, address_mib, keep_stdout):
    """`tool command CASE` under an address-space limit (so that a regression fails fast instead of exhausting
    the machine); returns its exit status, stdout (when kept), stderr and peak resident memory in MiB."""
    limit = int(address_mib) << 20

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    with tempfile.TemporaryDirectory() as directory:
        path = case
        if case in LARGE_CASES:
            path = os.path.join(directory, case + ".json")
            with open(path, "w") as f:
                f.write(LARGE_CASES[case]())
        p = subprocess.run([tool, command, path], stdout=subprocess.PIPE if keep_stdout else subprocess.DEVNULL,
                           stderr=subprocess.PIPE, preexec_fn=limit_memory, timeout=300)
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    return p.returncode, (p.stdout or b"").decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), peak_mib


def mode_bounded(tool, mib, case, text, command):
    # address space runs ahead of resident memory (thread stacks, malloc arenas): 1 GiB of headroom
    rc, out, err, peak_mib = run_limited(tool, command, case, int(mib) + 1024, text != "exit 0")
    if text == "exit 0":
        if rc != 0 or err:
            raise Failure("expected exit 0 and an empty stderr\n" + show(rc, "(not kept)", err))
    else:
        expect_one_error_line(command + " " + case, rc, out, err, text)
    if peak_mib > int(mib):
        raise Failure("peak resident memory %.0f MiB, above the %s MiB bound" % (peak_mib, mib))
    print("peak resident memory %.0f MiB (bound %s MiB)" % (peak_mib, mib))


def mode_running(tool, mib, seconds, args):
    """A long run (simulate --steps 10^8) whose memory must not grow with the steps (issue 19 item 2)."""
    limit = (int(mib) + 1024) << 20

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    p = subprocess.Popen([tool] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=limit_memory)
    try:
        _, err = p.communicate(timeout=float(seconds))
        if p.returncode != 0:
            raise Failure("expected it to run on\n" + show(p.returncode, "(not kept)", err.decode("utf-8", "replace")))
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    if peak_mib > int(mib):
        raise Failure("peak resident memory %.0f MiB, above the %s MiB bound" % (peak_mib, mib))
    print("peak resident memory %.0f MiB (bound %s MiB)" % (peak_mib, mib))


def mode_starved(tool, address_mib, case, command):
    rc, out, err, _ = run_limited(tool, command, case, address_mib, True)
    expect_one_error_line("%s %s in %s MiB" % (command, case, address_mib), rc, out, err, "out of memory")


def main(argv):
    mode, tool = argv[1], argv[2]
    try:
        if mode == "plan":
            mode_plan(tool, argv[3], argv[4:])
        elif mode == "canary":
            mode_canary(tool, argv[3], argv[4:])
        elif mode == "sequence":
            mode_sequence(tool, argv[3], argv[4:])
        elif mode == "reject":
            mode_reject(tool, argv[3], argv[4:])
        elif mode == "fails":
            rc, out, err = call(tool, argv[4:])
            expect_one_error_line(" ".join(argv[4:]), rc, out, err, argv[3])
        elif mode == "bounded":
            mode_bounded(tool, argv[3], argv[4], argv[5], argv[6])
        elif mode == "work":
            mode_work(tool, argv[3], argv[4], argv[5:])
        elif mode == "wait_policy":
            mode_wait_policy(tool, argv[3], argv[4], argv[5:])
        elif mode == "threads":
            mode_threads(tool, argv[3], argv[4:])
        elif mode == "running":
            mode_running(tool, argv[3], argv[4], argv[5:])
        elif mode == "starved":
            mode_starved(tool, argv[3], argv[4], argv[5])
        elif mode == "prints_every_time":  # N runs (a race must not decide it), each: exit 0, the text
            for run in range(int(argv[3])):
                rc, out, err = call(tool, argv[5:])
                if rc != 0 or err or argv[4] not in out:
                    raise Failure("run %d: expected exit 0, an empty stderr and %r on stdout\n%s"
                                  % (run + 1, argv[4], show(rc, out, err)))
        elif mode == "prints":
            rc, out, err = call(tool, argv[4:])
            if rc != 0 or err or argv[3] not in out:
                raise Failure("expected exit 0, an empty stderr and %r on stdout\n%s" % (argv[3], show(rc, out, err)))
        else:
            raise Failure("unknown mode " + mode)
    except Failure as failure:
        print("FAILED: " + str(failure))
        return 1
    print("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
