#!/usr/bin/env python3
"""syntax_check.py MODE BUILD_DIR OVERLAY_DIR JOBS SOURCE...

Compiles each SOURCE with the flags (include directories, definitions, -std) of the compile command that
BUILD_DIR's compile_commands.json has for it or, for a source the build did not compile (the drivers of
a backend the packaged Kokkos lacks, the CUDA ones), for the nearest source in the same directory or a
parent one (the same target, or its neighbour), with OVERLAY_DIR first on the include path (Kokkos'
generated config headers with other settings: see scripts/check-kokkos-versions.sh).
MODE host:       the build's compiler, -fsyntax-only -fopenmp.
MODE cuda:NVCC:  NVCC -x cu for sm_90 (Kokkos' CUDA flags), -c into /dev/null: host and device code are
                 compiled, nothing is linked; device code unoptimized (-Xcicc -O0 -Xptxas -O0: whether it
                 compiles does not depend on it, and NVVM + ptxas were ~60% of a unit's compile).
Prints one line per source, exits 1 when any fails (its first error lines are printed)."""
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys


def command_for(source, by_file, by_dir):
    entry, directory = by_file.get(source), os.path.dirname(source)
    while entry is None and len(directory) > 1:
        entry, directory = by_dir.get(directory), os.path.dirname(directory)
    if entry is None:
        return None
    argv = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    flags, skip = [], False
    for arg in argv[1:]:
        if skip:
            flags.append(arg)
            skip = False
        elif arg in ("-I", "-isystem", "-D"):
            flags.append(arg)
            skip = True
        elif arg.startswith(("-I", "-isystem", "-D", "-std=")):
            flags.append(arg)
    if MODE == "host":
        command = [argv[0], "-I" + OVERLAY, "-fopenmp", "-fsyntax-only"] + flags + [source]
    else:
        nvcc = MODE.split(":", 1)[1]
        command = [nvcc, "-I" + OVERLAY, "-x", "cu", "-arch=sm_90", "--extended-lambda",
                   "--expt-relaxed-constexpr", "-Xcicc", "-O0", "-Xptxas", "-O0"] + flags
        command += ["-c", source, "-o", os.devnull]
    return command, entry["directory"]


def check(source):
    found = command_for(source, BY_FILE, BY_DIR)
    if found is None:
        return source, False, "no compile command for it or its directory in compile_commands.json"
    argv, directory = found
    run = subprocess.run(argv, cwd=directory, capture_output=True, text=True)
    errors = [line for line in run.stderr.splitlines() if "error" in line]
    return source, run.returncode == 0, "\n".join(errors[:8])


if __name__ == "__main__":
    MODE, build, OVERLAY, jobs, sources = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
    with open(os.path.join(build, "compile_commands.json")) as db:
        entries = json.load(db)
    for e in entries:
        e["file"] = os.path.realpath(os.path.join(e["directory"], e["file"]))
    BY_FILE = {e["file"]: e for e in entries}
    BY_DIR = {}
    for e in entries:
        BY_DIR.setdefault(os.path.dirname(e["file"]), e)
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for source, ok, errors in pool.map(check, [os.path.realpath(s) for s in sources]):
            print(f"  {'ok    ' if ok else 'FAILED'} {os.path.relpath(source)}", flush=True)
            if not ok:
                failed += 1
                print(errors, flush=True)
    print(f"{'syntax' if MODE == 'host' else 'CUDA compile'} check: {len(sources) - failed} of {len(sources)} translation units compile")
    sys.exit(1 if failed else 0)
