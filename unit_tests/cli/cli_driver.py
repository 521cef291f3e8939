#!/usr/bin/env python3
"""End-to-end checks of kvcanary-plan (python3 stdlib only); ctest calls one mode per test.

  cli_driver.py plan    TOOL CASE.json [TOOL OPTIONS...]  `run` prints a SPEC 5 plan that holds "_expected"
                                                          (from the file and from standard input alike)
  cli_driver.py reject  TOOL CASE.json [TOOL OPTIONS...]  `run` and `check` both exit 2, one stderr line
                                                          containing the case's "_expect_error"
  cli_driver.py fails   TOOL TEXT ARGS...                 exit 2, nothing on stdout, one stderr line containing TEXT
  cli_driver.py prints  TOOL TEXT ARGS...                 exit 0, nothing on stderr, stdout containing TEXT
"""
import json
import subprocess
import sys


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


def mode_plan(tool, case, options):
    with open(case) as f:
        expected = json.load(f)["_expected"]
    rc, out, err = call(tool, ["run"] + options + [case])
    if rc != 0 or err:
        raise Failure("run: expected exit 0 and an empty stderr\n" + show(rc, out, err))
    if out.count("\n") != 1:
        raise Failure("run: expected one line of JSON\n" + show(rc, out, err))
    plan = json.loads(out)
    check_shape(plan)
    for i, step in enumerate(plan.get("steps", [])):
        check_shape(step, "steps[%d]" % i)
    found = first_mismatch(expected, plan, "plan")
    if found:
        raise Failure("run disagrees with SPEC: " + found + "\n" + show(rc, out, err))
    with open(case, "rb") as f:  # the same through standard input
        stdin_rc, stdin_out, stdin_err = call(tool, ["run"] + options + ["-"], stdin=f)
    if (stdin_rc, stdin_out, stdin_err) != (rc, out, err):
        raise Failure("run - < CASE differs from run CASE\n" + show(stdin_rc, stdin_out, stdin_err))


def mode_reject(tool, case, options):
    with open(case) as f:
        text = json.load(f)["_expect_error"]
    for command in ("run", "check"):
        rc, out, err = call(tool, [command] + options + [case])
        expect_one_error_line(command, rc, out, err, text)
    with open(case, "rb") as f:  # the same through standard input
        rc, out, err = call(tool, ["run"] + options + ["-"], stdin=f)
    expect_one_error_line("run -", rc, out, err, text)


def main(argv):
    mode, tool = argv[1], argv[2]
    try:
        if mode == "plan":
            mode_plan(tool, argv[3], argv[4:])
        elif mode == "reject":
            mode_reject(tool, argv[3], argv[4:])
        elif mode == "fails":
            rc, out, err = call(tool, argv[4:])
            expect_one_error_line(" ".join(argv[4:]), rc, out, err, argv[3])
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
