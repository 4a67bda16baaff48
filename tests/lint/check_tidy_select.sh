#!/usr/bin/env bash
# tools/tidy-changed.py (which files `scripts/lint.sh tidy` checks) on a
# throwaway git repository: every file without a baseline; after a recorded
# baseline, only the units whose source or project header changed
# (committed, uncommitted or untracked), whose compile command changed or
# which the baseline does not list, units ninja has no record of, and every
# file again when .clang-tidy or the clang-tidy version changes.
set -euo pipefail
tool="$(cd "$(dirname "$0")/../.." && pwd)/tools/tidy-changed.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
git init -q . && git config user.email t@t && git config user.name t
mkdir -p src/a src/b src/c build
echo 'int h();' >src/a/h.h
echo '#include "a/h.h"' >src/a/x.cc
echo 'int y();' >src/b/y.cc
echo 'int z();' >src/c/z.cc
echo 'Checks: -*' >.clang-tidy
cat >build/compile_commands.json <<JSON
[{"directory": "$tmp/build", "file": "$tmp/src/a/x.cc", "command": "c++ -I$tmp/src -o src/a/x.cc.o -c $tmp/src/a/x.cc"},
 {"directory": "$tmp/build", "file": "$tmp/src/b/y.cc", "command": "c++ -o src/b/y.cc.o -c $tmp/src/b/y.cc"},
 {"directory": "$tmp/build", "file": "$tmp/src/c/z.cc", "command": "c++ -o src/c/z.cc.o -c $tmp/src/c/z.cc"},
 {"directory": "$tmp/build", "file": "$tmp/other/w.cc", "command": "c++ -o other/w.cc.o -c $tmp/other/w.cc"}]
JSON
# ninja -t deps: z.cc.o has no valid record (it must always be checked).
cat >build/deps.txt <<DEPS
src/a/x.cc.o: #deps 3, deps mtime 1 (VALID)
    $tmp/src/a/x.cc
    /usr/include/stdio.h
    ../src/a/h.h

src/b/y.cc.o: #deps 2, deps mtime 1 (VALID)
    $tmp/src/b/y.cc
    $tmp/src/b/new.h

src/c/z.cc.o: #deps 1, deps mtime 1 (STALE)
    $tmp/src/c/z.cc
DEPS
printf 'build/\n' >.gitignore
git add -A && git commit -qm one
sel() { python3 "$tool" --build build --regex '/src/.*\.cc$' --deps-file build/deps.txt 2>/dev/null | tr '\n' ' '; }
expect() {
  local got; got=$(sel)
  if [[ "$got" != "$1" ]]; then echo "FAIL ($2): expected '$1', got '$got'"; exit 1; fi
  echo "ok: $2"
}
expect "all src/a/x.cc src/b/y.cc src/c/z.cc " "no baseline: every file in scope"
python3 "$tool" --record --build build --regex '/src/.*\.cc$' >/dev/null
git add .ci/tidy-baseline && git commit -qm baseline
expect "some src/c/z.cc " "nothing changed: only the unit without a dependency record"
echo 'int h2();' >>src/a/h.h
expect "some src/a/x.cc src/c/z.cc " "an uncommitted header change selects its includer"
git commit -qam header
expect "some src/a/x.cc src/c/z.cc " "a committed header change too"
git checkout -q HEAD~1 -- src/a/h.h && git commit -qam back
echo 'int n();' >src/b/new.h
expect "some src/b/y.cc src/c/z.cc " "an untracked header a unit depends on"
rm src/b/new.h
cp build/compile_commands.json build/cc.orig
sed -i 's#-o src/b/y.cc.o#-DNEW_FLAG -o src/b/y.cc.o#' build/compile_commands.json
expect "some src/b/y.cc src/c/z.cc " "a changed compile command (a CMakeLists.txt edit)"
cp build/cc.orig build/compile_commands.json
sed -i 's#^unit src/a/x.cc .*##' .ci/tidy-baseline
expect "some src/a/x.cc src/c/z.cc " "a unit the baseline does not list"
git checkout -q -- .ci/tidy-baseline
# Another checkout path: the recorded command hashes still match.
mv "$tmp" "$tmp.moved" && ln -s "$tmp.moved" "$tmp"
( cd "$tmp.moved" && sed -i "s#$tmp/#$tmp.moved/#g" build/compile_commands.json build/deps.txt &&
  got=$(python3 "$tool" --build build --regex '/src/.*\.cc$' --deps-file build/deps.txt 2>/dev/null | tr '\n' ' ') &&
  [[ "$got" == "some src/c/z.cc " ]] ) || { echo "FAIL: a clone at another path re-checks files"; rm -f "$tmp"; mv "$tmp.moved" "$tmp"; exit 1; }
rm -f "$tmp" && mv "$tmp.moved" "$tmp"
sed -i "s#$tmp.moved/#$tmp/#g" build/compile_commands.json build/deps.txt
echo "ok: a checkout at another path compares equal"
echo 'Checks: -*,bugprone-*' >.clang-tidy
expect "all src/a/x.cc src/b/y.cc src/c/z.cc " "a .clang-tidy change: every file"
git checkout -q -- .clang-tidy
sed -i 's/^clang-tidy .*/clang-tidy some other version/' .ci/tidy-baseline
expect "all src/a/x.cc src/b/y.cc src/c/z.cc " "another clang-tidy version: every file"
git checkout -q -- .ci/tidy-baseline
echo 'int h3();' >>src/a/h.h
if python3 "$tool" --record --build build --regex '/src/.*\.cc$' 2>/dev/null; then echo "FAIL: recorded over an uncommitted change under src/"; exit 1; fi
echo "ok: no record over uncommitted changes"
KESTREL_TIDY_FULL=1 expect "all src/a/x.cc src/b/y.cc src/c/z.cc " "KESTREL_TIDY_FULL=1"
