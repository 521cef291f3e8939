#!/usr/bin/env python3
"""docs/perf holds only what the docs cite (STYLE: experiments that did not land are numbers and a sentence in
docs/perf-notes.md, not patches or raw dumps in the tree; issue 19 item 9):
  * every entry of docs/perf is a folder named by the commit of a run (7 hex digits) or a figure (.png);
  * every file in it is cited by a page (its path, its folder's path, or a {a,b} / * pattern that matches it);
  * every docs/perf path a page cites exists; no patch anywhere in it.
  check_perf_folder.py REPOSITORY_ROOT"""
import fnmatch
import os
import re
import sys

root = sys.argv[1]
perf = os.path.join(root, "docs", "perf")
pages = [os.path.join(root, "README.md"), os.path.join(root, "perf_tests", "README.md")]
pages += [os.path.join(root, "docs", name) for name in sorted(os.listdir(os.path.join(root, "docs")))
          if name.endswith(".md")]
for directory, _, names in os.walk(perf):
    pages += [os.path.join(directory, n) for n in names if n.endswith(".md")]

files = sorted(os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/")
               for d, _, names in os.walk(perf) for n in names)


def expand(pattern):
    """docs/perf/x/host_{serial,openmp}.json -> both names."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [e for alt in m.group(1).split(",") for e in expand(pattern[:m.start()] + alt + pattern[m.end():])]


cited = set()
for page in pages:
    if not os.path.exists(page):
        continue
    text = open(page, encoding="utf-8").read()
    for m in re.finditer(r"docs/perf/(?:\{[^{}\s]*\}|[^\s`)\]'\",;{])*", text):
        cited.update(expand(m.group(0).rstrip(".:")))
    if page.endswith(os.path.join("docs", os.path.basename(page))):  # relative links of docs/*.md
        for m in re.finditer(r"\]\((perf/[^)\s]+)\)", text):
            cited.add("docs/" + m.group(1))

problems = []
for entry in sorted(os.listdir(perf)):
    if not (re.fullmatch(r"[0-9a-f]{7}", entry) and os.path.isdir(os.path.join(perf, entry))) \
            and not entry.endswith(".png"):
        problems.append("docs/perf/%s: neither a run's folder named by its commit nor a figure" % entry)
for f in files:
    if f.endswith((".patch", ".diff")):
        problems.append(f + ": a patch (experiments are numbers and a sentence in docs/perf-notes.md)")
    if f.endswith(".md"):
        continue
    if not any(f == c or (c.endswith("/") and f.startswith(c)) or fnmatch.fnmatch(f, c) for c in cited):
        problems.append(f + ": cited by no page")
for c in sorted(cited):
    if c.rstrip("/") == "docs/perf":
        continue
    if not any(f == c or (c.endswith("/") and f.startswith(c)) or fnmatch.fnmatch(f, c) for f in files):
        problems.append(c + ": cited, but not in the tree")
for p in problems:
    print("FAILED: " + p)
print("%d files in docs/perf, %d cited paths, %d problems" % (len(files), len(cited), len(problems)))
sys.exit(1 if problems else 0)
