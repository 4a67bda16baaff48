#!/usr/bin/env bash
# The thread-safety check (tools/check-thread-safety.py, `scripts/lint.sh
# threads`) must fail on the fixture and report exactly the errors listed in
# thread_fixture/expected.txt: the eight misused locks (guarded state read or
# written without its mutex, a REQUIRES call and a CondVar wait without it, an
# EXCLUDES call with it held, a plain std::mutex the analysis cannot see), and
# nothing about the correctly locked code beside them (so a check that stops
# finding one, or a Mutex/CondVar the analysis misreads, fails).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
out="$(python3 "$here/../../tools/check-thread-safety.py" --build /nonexistent "$here/thread_fixture/unguarded.cc")"
rc=$?
if [[ $rc -ne 1 ]]; then
  echo "expected exit 1 from check-thread-safety.py on the fixture, got $rc"; echo "$out"; exit 1
fi
# "PATH:LINE:COL: error: MESSAGE [-Werror,...]" -> "unguarded.cc:LINE: MESSAGE"
got="$(grep -E ': error: ' <<<"$out" | sed -E 's#^.*/([^/:]+):([0-9]+):[0-9]+: error: (.*) \[-W[^]]*\]$#\1:\2: \3#')"
if ! diff <(echo "$got") "$here/thread_fixture/expected.txt"; then
  echo "check-thread-safety.py errors differ from thread_fixture/expected.txt:"; echo "$out"; exit 1
fi
echo "check-thread-safety.py reports the fixture's $(wc -l <"$here/thread_fixture/expected.txt") lock misuses"
