#!/usr/bin/env python3
"""Clang's thread-safety analysis over the annotated sources (STYLE.md rule 15).

Usage: tools/check-thread-safety.py [--build BUILD_DIR] [--jobs N] [FILE...]

Runs `clang++ -fsyntax-only -Wthread-safety -Werror=thread-safety` on each
file and prints every thread-safety diagnostic (GUARDED_BY state touched
without its mutex, a REQUIRES function called without it, a lock not
released; src/core/thread_annotations.h). Exits 0 when there is none, 1 when
there is one (or a file does not compile with clang), 2 when it cannot run
(no clang++, no compile_commands.json).

Without FILE: every header under src/ that includes
core/thread_annotations.h, on its own (its inline functions, also when no
source of src/ includes it, as core/fault_env.h), and every torch-free .cc
under src/ that includes the header, or one of those headers, directly.
That is where guarded state is touched: annotated classes keep their guarded
members private, so only their own .cc and the header's inline functions
can touch them (a LibTorch file that includes an annotated header only calls
its public functions, and parsing LibTorch would cost ~30 s a file). Flags
come from BUILD_DIR/compile_commands.json (the -D, -I, -isystem and -std
ones; GCC's warning and optimisation flags and its precompiled header are
left out); a header takes those of a torch-free .cc in its folder. A FILE
not in it (a test fixture) gets -std=c++20 -I src.

Plain standard mutexes are findings too: a std::mutex, recursive_mutex,
shared_mutex, timed_mutex or condition_variable(_any) declared in a checked
file, or (without FILE) anywhere under src/ but core/thread_annotations.h,
is reported as "plain std::mutex" — the analysis cannot see one, so the
state it guards would go unchecked (use the header's Mutex and CondVar). A
lock of a mutex owned by a library (LibTorch's generator mutex) declares
none and passes.

Only the stable -Wthread-safety group: -Wthread-safety-beta (lock order from
ACQUIRED_AFTER, among others) is still changing between clang versions, and
a check CI fails on must not.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = "core/thread_annotations.h"
CHECK_FLAGS = ["-fsyntax-only", "-Wno-everything", "-Wthread-safety", "-Werror=thread-safety"]


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return re.findall(r'^\s*#\s*include\s+"([^"]+)"', f.read(), re.M)


def annotated_files():
    """(src/**/*.h that include HEADER, src/**/*.cc that include HEADER or one of them)."""
    src = os.path.join(ROOT, "src")
    headers, sources = {}, []
    for dirpath, _, names in os.walk(src):
        for n in names:
            p = os.path.join(dirpath, n)
            if n.endswith(".h") and HEADER in includes(p):
                headers[os.path.relpath(p, src)] = p
            elif n.endswith(".cc"):
                sources.append(p)
    names = set(headers) | {HEADER}
    return sorted(headers.values()), sorted(p for p in sources if names & set(includes(p)))


PLAIN = re.compile(
    r"\bstd::(mutex|recursive_mutex|shared_mutex|timed_mutex|condition_variable_any|condition_variable)"
    r"\s+([A-Za-z_]\w*)\s*[;{(=,]"
)


def plain_mutexes(path):
    """'PATH:LINE:COL: error: ...' for each standard mutex or condition variable declared in path."""
    found = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            code = line.split("//", 1)[0]
            for m in PLAIN.finditer(code):
                found.append(
                    f"{path}:{n}:{m.start() + 1}: error: plain std::{m.group(1)} '{m.group(2)}' the analysis "
                    "cannot see; use core/thread_annotations.h's Mutex/CondVar and GUARDED_BY "
                    "[-Wkestrel-plain-mutex]\n"
                )
    return found


def all_sources():
    """Every .h and .cc under src/ but core/thread_annotations.h (which wraps the standard ones)."""
    out = []
    for dirpath, _, names in os.walk(os.path.join(ROOT, "src")):
        for n in names:
            p = os.path.join(dirpath, n)
            if n.endswith((".h", ".cc")) and not p.endswith(os.path.join("src", HEADER)):
                out.append(p)
    return sorted(out)


def is_torch(flags):
    return any("/torch/" in x for x in flags)


def compile_flags(compdb):
    """file -> the flags clang needs from its compile command."""
    flags = {}
    for e in compdb:
        args = e.get("arguments") or shlex.split(e["command"])
        keep, i = [], 1
        while i < len(args):
            a = args[i]
            if a in ("-isystem", "-I", "-D") and i + 1 < len(args):
                keep += [a, args[i + 1]]
                i += 2
                continue
            if a.startswith(("-D", "-I", "-std=", "-isystem")):
                keep.append(a)
            i += 1
        flags[os.path.realpath(os.path.join(e.get("directory", ""), e["file"]))] = keep
    return flags


def check(clang, path, flags):
    lang = ["-x", "c++"] if path.endswith(".h") else []  # a header on its own
    out = subprocess.run([clang, *CHECK_FLAGS, *flags, *lang, path], capture_output=True, text=True)
    return out.returncode, out.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    clang = shutil.which("clang++")
    if clang is None:
        print("threads: no clang++ on PATH (apt install clang)")
        return 2
    compdb_path = os.path.join(a.build, "compile_commands.json")
    known = {}
    if os.path.exists(compdb_path):
        with open(compdb_path, encoding="utf-8") as f:
            known = compile_flags(json.load(f))
    elif not a.files:
        print(f"threads: no {compdb_path} (build first: scripts/build.sh)")
        return 2
    fallback = ["-std=c++20", "-I", os.path.join(ROOT, "src")]
    files = [os.path.realpath(f) for f in a.files]
    flags = {f: known.get(f, fallback) for f in files}
    torch = []
    if not files:
        headers, sources = annotated_files()
        for h in headers:
            beside = [f for f in known if os.path.dirname(f) == os.path.dirname(h) and not is_torch(known[f])]
            flags[h] = known[min(beside)] if beside else fallback
            files.append(h)
        for f in sources:
            if is_torch(known.get(f, [])):
                torch.append(f)
            else:
                files.append(f)
                flags[f] = known.get(f, fallback)
    start = time.monotonic()
    failed = []
    plain = [x for f in (files if a.files else all_sources()) for x in plain_mutexes(f)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        runs = {f: pool.submit(check, clang, f, flags[f]) for f in files}
        for f, run in runs.items():
            rc, err = run.result()
            if rc != 0:
                failed.append(os.path.relpath(f, ROOT))
                sys.stdout.write(err)
    secs = time.monotonic() - start
    if plain:
        sys.stdout.write("".join(plain))
        print(f"threads: {len(plain)} plain standard mutex(es) or condition variable(s) the analysis cannot see")
    if failed:
        print(f"threads: {len(failed)} of {len(files)} files fail clang -Wthread-safety: {', '.join(failed)}")
    if plain or failed:
        return 1
    skipped = f"; LibTorch files that include them skipped: {len(torch)}" if torch else ""
    print(f"threads: {len(files)} files pass clang -Wthread-safety ({secs:.1f} s{skipped})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
