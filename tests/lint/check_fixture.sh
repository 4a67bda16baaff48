#!/usr/bin/env bash
# The include checker must fail on the fixture tree and report exactly the
# violations listed in expected.txt (so a checker that stops finding one fails).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
out="$(python3 "$here/../../tools/check-includes.py" "$here/include_fixture")"
rc=$?
if [[ $rc -ne 1 ]]; then
  echo "expected exit 1 from check-includes.py on the fixture, got $rc"; echo "$out"; exit 1
fi
if ! diff <(echo "$out") "$here/include_fixture/expected.txt"; then
  echo "check-includes.py output differs from include_fixture/expected.txt"; exit 1
fi
echo "check-includes.py reports the fixture's $(grep -c ': #include' "$here/include_fixture/expected.txt") violations"
