#!/usr/bin/env python3
"""Runs one hostile-input case (tests/hostile/cases/<name>/case.json) against
the kestrel binary and checks what the case expects, plus the invariants that
hold for every command whatever its input:

  * the process exits by itself with a status below 128 (no abort, no
    signal, no hang past the step's timeout);
  * with --json, stdout is exactly one JSON document (errors included);
  * stdout stays under a bound (default 4 MiB) so output cannot explode.

Case format (all keys optional except "steps"):
  {
    "about": "what a hostile user does",
    "class": "which issue-10 class of defect this covers",
    "files": {"rel/path": "text"},      # written before the steps
    "files_hex": {"rel/path": "ff0a"},  # bytes, hex
    "steps": [
      {"run": ["--json", "dataset", "validate", "{work}/ds"],   # kestrel argv
       "exit": 1,                       # or [1, 2]; default: no check beyond < 128
       "findings": ["label.utf8"],      # check ids that must appear in the JSON
       "error_code": "usage",           # JSON error.code
       "stdout_contains": ["..."], "stderr_contains": ["..."],
       "stdout_max_bytes": 100000, "timeout_s": 60,
       "max_rss_mb": 500,               # the command's own peak RSS
       "json_len": {"jobs": 0}},        # a top-level JSON list and its length
      {"sh": "shell command"}           # setup step; must exit 0
    ],
    "absent": ["{work}/out"],           # paths that must not exist at the end
    "glob_absent": ["{work}/*.kestrel-tmp*"]
  }
Path keys in "files"/"files_hex" and argv strings are %-decoded into bytes
(so "%FF" is the raw byte 0xFF: names that are not UTF-8). Placeholders:
{work} (a fresh scratch folder), {home} ({work}/home, also KESTREL_HOME),
{case} (the case folder), {source} (the repository root), {kestrel} (the
binary under test, for shell steps that drive workers and send signals).
Exit 0 = pass, 1 = fail (with the reasons), 77 = skipped.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

DEFAULT_STDOUT_MAX = 4 << 20


def expand(s, ctx):
    for k, v in ctx.items():
        s = s.replace("{" + k + "}", v)
    return s


def to_bytes(s, ctx):
    """Placeholders first, then %XX escapes into raw bytes."""
    return urllib.parse.unquote_to_bytes(expand(s, ctx))


def count_findings(doc, check, acc):
    if isinstance(doc, dict):
        if doc.get("check") == check:
            acc[0] += 1
        for v in doc.values():
            count_findings(v, check, acc)
    elif isinstance(doc, list):
        for v in doc:
            count_findings(v, check, acc)


def json_error_code(doc):
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
        return doc["error"].get("code")
    return None


class Ran:
    pass


def run_measured(argv, env, cwd, timeout):
    """Runs argv; returns stdout, stderr, returncode (negative = signal) and
    the child's own peak RSS in MiB (wait4), or None after killing a hang."""
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    chunks = {"out": [], "err": []}

    def drain(stream, key):
        for block in iter(lambda: stream.read(65536), b""):
            chunks[key].append(block)

    readers = [threading.Thread(target=drain, args=(p.stdout, "out")),
               threading.Thread(target=drain, args=(p.stderr, "err"))]
    for t in readers:
        t.start()
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            break
        if time.monotonic() > deadline:
            os.killpg(p.pid, 9)
            os.wait4(p.pid, 0)
            p.returncode = -9
            for t in readers:
                t.join()
            return None
        time.sleep(0.02)
    p.returncode = os.waitstatus_to_exitcode(status)
    try:
        os.killpg(p.pid, 9)  # anything the command left running in its group
    except ProcessLookupError:
        pass
    for t in readers:
        t.join()
    r = Ran()
    r.stdout, r.stderr = b"".join(chunks["out"]), b"".join(chunks["err"])
    r.returncode = p.returncode
    r.peak_rss_mb = usage.ru_maxrss / 1024.0
    return r


def run_step(i, step, ctx, kestrel, env, problems):
    where = f"step {i + 1}"
    timeout = step.get("timeout_s", 60)
    if "sh" in step:
        cmd = expand(step["sh"], ctx)
        r = subprocess.run(["bash", "-c", cmd], env=env, cwd=ctx["work"], capture_output=True, timeout=timeout)
        if r.returncode != 0:
            problems.append(f"{where}: setup shell step failed ({r.returncode}): {cmd}\n"
                            f"{r.stderr.decode(errors='replace')[-2000:]}")
        return
    argv = [to_bytes(a, ctx) for a in step["run"]]
    shown = " ".join(a.decode("utf-8", errors="backslashreplace") for a in argv)
    where = f"{where} (kestrel {shown})"
    r = run_measured([kestrel.encode()] + argv, env, ctx["work"], timeout)
    if r is None:
        problems.append(f"{where}: still running after {timeout} s (hang)")
        return
    out, err = r.stdout, r.stderr
    err_text = err.decode("utf-8", errors="replace")
    tail = f"\n  stderr: {err_text[-1500:]}" if err_text else ""
    if r.returncode < 0 or r.returncode >= 128:
        problems.append(f"{where}: died with status {r.returncode} (signal/abort){tail}")
        return
    want = step.get("exit")
    if want is not None:
        allowed = want if isinstance(want, list) else [want]
        if r.returncode not in allowed:
            problems.append(f"{where}: exit {r.returncode}, expected {allowed}{tail}")
    if "max_rss_mb" in step and r.peak_rss_mb > step["max_rss_mb"]:
        problems.append(f"{where}: peak RSS {r.peak_rss_mb:.0f} MiB, bound {step['max_rss_mb']} MiB")
    limit = step.get("stdout_max_bytes", DEFAULT_STDOUT_MAX)
    if len(out) > limit:
        problems.append(f"{where}: stdout is {len(out)} bytes, bound {limit}")
    is_json = step.get("json", b"--json" in argv)
    doc = None
    if is_json:
        try:
            doc = json.loads(out.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            problems.append(f"{where}: --json stdout is not exactly one JSON document ({e}); "
                            f"stdout starts {out[:300]!r}{tail}")
    for check in step.get("findings", []):
        if doc is None:
            problems.append(f"{where}: no JSON document to look for finding '{check}' in")
            continue
        acc = [0]
        count_findings(doc, check, acc)
        if acc[0] == 0:
            problems.append(f"{where}: finding '{check}' not reported; stdout starts {out[:600]!r}")
    for key, n in step.get("json_len", {}).items():
        got = doc.get(key) if isinstance(doc, dict) else None
        if not isinstance(got, list) or len(got) != n:
            problems.append(f"{where}: JSON '{key}' should be a list of {n}; got {str(got)[:300]}")
    if "error_code" in step:
        got = json_error_code(doc)
        if got != step["error_code"]:
            problems.append(f"{where}: JSON error.code {got!r}, expected {step['error_code']!r}")
    out_text = out.decode("utf-8", errors="replace")
    for s in step.get("stdout_contains", []):
        if expand(s, ctx) not in out_text:
            problems.append(f"{where}: stdout lacks {s!r}; stdout starts {out_text[:600]!r}")
    for s in step.get("stderr_contains", []):
        if expand(s, ctx) not in err_text:
            problems.append(f"{where}: stderr lacks {s!r}; stderr: {err_text[-1500:]!r}")
    for s in step.get("stdout_lacks", []):
        if expand(s, ctx) in out_text:
            problems.append(f"{where}: stdout contains {s!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kestrel", required=True)
    ap.add_argument("--case", required=True, help="case folder")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    a = ap.parse_args()
    case_dir = os.path.abspath(a.case)
    with open(os.path.join(case_dir, "case.json"), encoding="utf-8") as f:
        case = json.load(f)
    work = tempfile.mkdtemp(prefix="kestrel-hostile-")
    source = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    ctx = {"work": work, "home": os.path.join(work, "home"), "case": case_dir, "source": source,
           "kestrel": os.path.abspath(a.kestrel)}
    env = dict(os.environ)
    env["KESTREL_HOME"] = ctx["home"]
    env.pop("KESTREL_DB", None)
    problems = []
    try:
        for key, text in case.get("files", {}).items():
            p = os.path.join(work.encode(), to_bytes(key, ctx))
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(expand(text, ctx).encode("utf-8"))
        for key, hexdata in case.get("files_hex", {}).items():
            p = os.path.join(work.encode(), to_bytes(key, ctx))
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(bytes.fromhex(hexdata))
        for i, step in enumerate(case["steps"]):
            run_step(i, step, ctx, a.kestrel, env, problems)
            if problems and step.get("sh"):
                break  # later steps depend on the setup
        for p in case.get("absent", []):
            if os.path.lexists(to_bytes(p, ctx)):
                problems.append(f"{expand(p, ctx)} exists but must not (partial output left behind)")
        for pattern in case.get("glob_absent", []):
            hits = glob.glob(expand(pattern, ctx))
            if hits:
                problems.append(f"left behind: {hits}")
    finally:
        if a.keep or os.environ.get("KESTREL_HOSTILE_KEEP"):
            print(f"scratch kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    name = os.path.basename(case_dir)
    if problems:
        print(f"FAIL {name}: {case.get('about', '')}")
        for p in problems:
            print("  - " + p)
        return 1
    print(f"ok {name}: {case.get('about', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
