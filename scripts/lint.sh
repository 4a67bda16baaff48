#!/usr/bin/env bash
# Source checks CI runs after the test suite (docs/ARCHITECTURE.md "Checks"):
#   1. include rules: every #include under src/ against its module README
#      (tools/check-includes.py; also a CTest, lint.include_rules);
#   2. formatting: every tracked C++ file matches .clang-format
#      (fix with: clang-format -i FILE);
#   3. clang-tidy (.clang-tidy) on the torch-free modules (core, store, data,
#      eval, jobs, app, server, export, tune, backend_onnx; src/server/api.cc left out,
#      see below),
#      any finding fails; needs the build's
#      compile_commands.json (run scripts/build.sh first);
#   4. test tiers: every CTest test has exactly one of the labels unit, e2e,
#      slow (tools/check-test-tiers.py; docs/testing.md);
#   5. threads: clang's thread-safety analysis (-Wthread-safety, errors) on
#      every src/ header that includes core/thread_annotations.h (alone) and
#      every torch-free src/ .cc that includes it or such a header:
#      GUARDED_BY state touched without its mutex, a REQUIRES
#      function called without it; and any plain std::mutex or
#      condition_variable declared under src/, which the analysis cannot
#      see (tools/check-thread-safety.py; its own test:
#      lint.thread_safety_finds_violations); needs clang++ and the
#      build's compile_commands.json.
#   ./scripts/lint.sh               # all five
#   ./scripts/lint.sh format        # one of: includes, format, tidy, tiers, threads
# Prints the seconds each step took (CI's time budget is tracked in docs/setup.md).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(includes format tiers threads tidy)
fail=0
for step in "${steps[@]}"; do
  start=$(date +%s)
  case "$step" in
    includes)
      python3 tools/check-includes.py . || fail=1
      ;;
    format)
      mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cpp' '*.hpp' | grep -v '^tests/lint/include_fixture/')
      if clang-format --dry-run --Werror "${files[@]}" 2>/tmp/kestrel-format.$$; then
        echo "format: ${#files[@]} files match .clang-format"
      else
        # --Werror makes each violation an "error:" line (a "warning:" without it).
        { grep -E ': (error|warning): ' /tmp/kestrel-format.$$ || cat /tmp/kestrel-format.$$; } |
          sed -E 's/: (error|warning): .*//' | cut -d: -f1 | sort | uniq -c |
          awk '{print "format: " $2 " (" $1 " places); fix with clang-format -i " $2}'
        fail=1
      fi
      rm -f /tmp/kestrel-format.$$
      ;;
    tidy)
      if [[ ! -f "$BUILD_DIR/compile_commands.json" ]]; then
        echo "tidy: no $BUILD_DIR/compile_commands.json (build first: scripts/build.sh)"; exit 2
      fi
      log=$(mktemp)
      # -quiet: findings only; the regex selects the torch-free modules' sources,
      # their internal/ parts included, and the torch-free .pt reader in model/internal.
      # Left out: src/server/api.cc, whose one clang-tidy run took 871 s of CPU
      # on this VM (every other file 1-30 s) — more than the rest of the step
      # together; the cause (a check on its route table of nested lambdas and
      # JSON initializer lists) is still to be found (docs/ARCHITECTURE.md).
      tidy_re='/src/((core|store|data|eval|jobs|app|export|tune|backend_onnx|backend_video)/(internal/)?[^/]*|model/internal/pt_[^/]*|server/(?!api\.cc$)[^/]*)\.cc$'
      # Only the files changed (with their headers) since the last clean run
      # recorded in .ci/tidy-baseline; every file when that cannot be trusted
      # (tools/tidy-changed.py says why; KESTREL_TIDY_FULL=1 forces it).
      sel=$(mktemp)
      if ! python3 tools/tidy-changed.py --build "$BUILD_DIR" --regex "$tidy_re" >"$sel"; then
        echo "tidy: tools/tidy-changed.py failed; checking every file"
        echo all >"$sel"
      fi
      mapfile -t tidy_files < <(tail -n +2 "$sel")
      if [[ "$(head -1 "$sel")" == all ]]; then
        run-clang-tidy -p "$BUILD_DIR" -j "$(nproc)" -quiet "$tidy_re" >"$log" 2>&1 || true
      elif [[ ${#tidy_files[@]} -gt 0 ]]; then
        # Anchored alternation of the chosen paths (run-clang-tidy matches its
        # regex against each compile_commands path). In the bracket expression
        # '[' comes last: '[.' would open a collating symbol in GNU sed.
        files_re="/($(printf '%s\n' "${tidy_files[@]}" | sed 's/[]\\.^$*+?(){}|[]/\\&/g' | paste -sd'|'))\$"
        run-clang-tidy -p "$BUILD_DIR" -j "$(nproc)" -quiet "$files_re" >"$log" 2>&1 || true
      fi
      rm -f "$sel"
      findings=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^/.*: (warning|error): ' | sort -u || true)
      if [[ -n "$findings" ]]; then
        echo "$findings"
        echo "tidy: $(wc -l <<<"$findings") finding(s); fix them or suppress one with // NOLINT(check) and a reason"
        fail=1
      else
        echo "tidy: clean (${#tidy_files[@]} files checked; src/server/api.cc left out)"
        if [[ "${KESTREL_TIDY_RECORD:-0}" == 1 ]]; then
          python3 tools/tidy-changed.py --record --build "$BUILD_DIR" --regex "$tidy_re" || fail=1
        fi
      fi
      rm -f "$log"
      ;;
    tiers)
      python3 tools/check-test-tiers.py "$BUILD_DIR" || fail=1
      ;;
    threads)
      rc=0
      python3 tools/check-thread-safety.py --build "$BUILD_DIR" --jobs "$(nproc)" || rc=$?
      [[ $rc -eq 2 ]] && exit 2
      [[ $rc -ne 0 ]] && fail=1
      ;;
    *) echo "lint: unknown step '$step' (includes, format, tidy, tiers, threads)"; exit 2 ;;
  esac
  echo "lint: $step took $(( $(date +%s) - start )) s"
done
exit $fail
