#!/usr/bin/env python3
"""Every registered CTest test carries exactly one tier label: unit, e2e or slow.

Usage: tools/check-test-tiers.py BUILD_DIR
Reads `ctest --show-only=json-v1` (no test runs) and prints each test whose
tier is missing or ambiguous; exits 1 when there is one. docs/testing.md says
what each tier may do.
"""
import json
import subprocess
import sys

TIERS = {"unit", "e2e", "slow"}


def main() -> int:
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
    tests = json.loads(out).get("tests", [])
    bad = []
    counts = {t: 0 for t in TIERS}
    for t in tests:
        if t["name"].endswith("_NOT_BUILT"):
            bad.append(f"{t['name'][:-len('_NOT_BUILT')]}: not built, its tests unknown (build first: scripts/build.sh)")
            continue
        labels = set()
        for prop in t.get("properties", []):
            if prop.get("name") == "LABELS":
                labels.update(prop.get("value", []))
        tiers = labels & TIERS
        if len(tiers) != 1:
            bad.append(f"{t['name']}: labels {sorted(labels)} (want exactly one of unit, e2e, slow)")
        else:
            counts[tiers.pop()] += 1
    for line in bad:
        print(f"tiers: {line}")
    if not tests:
        print(f"tiers: no tests registered in {build} (build first: scripts/build.sh)")
        return 2
    print(f"tiers: {len(tests)} tests: {counts['unit']} unit, {counts['e2e']} e2e, {counts['slow']} slow"
          + (f"; {len(bad)} without exactly one tier" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
