#!/usr/bin/env python3
"""Which translation units `scripts/lint.sh tidy` must check.

clang-tidy's findings on a file are a function of the file, the headers it
includes, the compile command, the .clang-tidy configuration and the
clang-tidy version. `.ci/tidy-baseline` records a commit at which every file
in the tidy scope was checked clean, with the clang-tidy version that checked
it, and each unit's compile command (a hash, with the source and build
directories written as placeholders so clones at other paths compare). A
translation unit whose source, project headers and compile command are
unchanged since that commit cannot have gained a finding, so only the others
are checked:

  * the whole scope when there is no usable baseline (missing file, a commit
    that is not an ancestor of HEAD or absent from a shallow clone, another
    clang-tidy version), when .clang-tidy changed, or when
    KESTREL_TIDY_FULL=1;
  * otherwise each unit whose source or any header under the source tree
    changed since the baseline (committed, uncommitted or untracked), read from
    ninja's dependency log of the build, whose compile command differs from
    the recorded one, or which the baseline does not list; a unit ninja has
    no record of is checked too.

Generated headers under the build directory are not compared (their content
is the version string and the web bundle's file list).

  tidy-changed.py --build DIR --regex RE [--baseline FILE] [--deps-file F]
      prints "all" or "some", then one repository-relative source per line,
      and the reason on stderr.
  tidy-changed.py --record --build DIR --regex RE [--baseline FILE]
      writes the baseline at HEAD (run it only after a clean check of what
      the selection chose); refuses when the tree has changes under
      src/ or in the tidy configuration (the recorded commit must be what
      was checked).
"""
import argparse
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys

FULL_TRIGGERS = re.compile(r'^\.clang-tidy$')


def git(root, *args, check=True):
    r = subprocess.run(['git', '-C', root, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {r.stderr.strip()}")
    return r


def tidy_version():
    try:
        r = subprocess.run(['clang-tidy', '--version'], capture_output=True, text=True)
    except FileNotFoundError:
        return 'none'
    for line in r.stdout.splitlines():
        if 'version' in line.lower():
            return line.strip()
    return r.stdout.strip()


def read_baseline(path):
    fields = {}
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line or line.startswith('#'):
                    continue
                key, _, value = line.partition(' ')
                if key == 'unit':
                    parts = value.split()
                    if len(parts) != 2:
                        return None, f"{path}:{n}: 'unit' needs a path and a command hash"
                    fields.setdefault('units', {})[parts[0]] = parts[1]
                elif key in ('commit', 'clang-tidy'):
                    fields[key] = value.strip()
                else:
                    return None, f"{path}:{n}: unknown field '{key}'"
    except FileNotFoundError:
        return None, f"no {path}"
    if 'commit' not in fields or not re.fullmatch(r'[0-9a-f]{40}', fields['commit']):
        return None, f"{path}: field 'commit' must be a 40-hex commit"
    return fields, None


def changed_paths(root, commit):
    diff = git(root, 'diff', '--name-only', commit, '--').stdout.split()
    untracked = git(root, 'ls-files', '--others', '--exclude-standard').stdout.split()
    return set(diff) | set(untracked)


def parse_deps(text, build_dir, root):
    """ninja -t deps output -> {object path: [repository-relative deps]}."""
    deps, current = {}, None
    root = os.path.realpath(root)
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(' '):
            obj, _, rest = line.partition(':')
            current = obj if 'VALID' in rest else None
            if current is not None:
                deps[current] = []
            continue
        if current is None:
            continue
        p = line.strip()
        full = os.path.realpath(p if os.path.isabs(p) else os.path.join(build_dir, p))
        if full.startswith(root + os.sep):
            deps[current].append(os.path.relpath(full, root))
    return deps


def scope_units(root, build, regex):
    """[(repository-relative source, [its object paths in the build dir], command hash)].

    A source compiled into several targets (src/core's files also go into
    the embedding library) has several compile commands: the hash covers them
    all, sorted, so the order compile_commands.json lists them in does not matter.
    """
    with open(os.path.join(build, 'compile_commands.json')) as f:
        entries = json.load(f)
    scope_re = re.compile(regex)
    real_root, real_build = os.path.realpath(root), os.path.realpath(build)
    by_src = {}
    for e in entries:
        if not scope_re.search(e['file']):
            continue
        argv = shlex.split(e['command'])
        obj = argv[argv.index('-o') + 1] if '-o' in argv else None
        # The build directory first: it may lie inside the source tree.
        command = e['command'].replace(real_build, '@BUILD@').replace(real_root, '@SRC@')
        command = command.replace(os.path.abspath(build), '@BUILD@').replace(os.path.abspath(root), '@SRC@')
        src = os.path.relpath(os.path.realpath(e['file']), real_root)
        objs, commands = by_src.setdefault(src, ([], []))
        objs.append(obj)
        commands.append(command)
    units = []
    for src, (objs, commands) in sorted(by_src.items()):
        digest = hashlib.sha256('\n'.join(sorted(commands)).encode()).hexdigest()[:16]
        units.append((src, objs, digest))
    return units


def select(args):
    root = git('.', 'rev-parse', '--show-toplevel').stdout.strip()
    units = scope_units(root, args.build, args.regex)

    def everything(reason):
        print(f"tidy: every file in scope ({len(units)}): {reason}", file=sys.stderr)
        print('all')
        for src, _, _ in units:
            print(src)

    if os.environ.get('KESTREL_TIDY_FULL') == '1':
        return everything('KESTREL_TIDY_FULL=1')
    baseline, why = read_baseline(os.path.join(root, args.baseline))
    if baseline is None:
        return everything(why)
    commit = baseline['commit']
    if git(root, 'merge-base', '--is-ancestor', commit, 'HEAD', check=False).returncode != 0:
        return everything(f"baseline {commit[:12]} is not an ancestor of HEAD (or not in this clone)")
    if baseline.get('clang-tidy') != tidy_version():
        return everything(f"baseline checked with '{baseline.get('clang-tidy')}', this is '{tidy_version()}'")
    changed = changed_paths(root, commit)
    triggers = sorted(p for p in changed if FULL_TRIGGERS.match(p))
    if triggers:
        return everything(f"{', '.join(triggers[:3])} changed since the baseline {commit[:12]}")
    if args.deps_file:
        with open(args.deps_file) as f:
            deps_text = f.read()
    else:
        deps_text = subprocess.run(['ninja', '-C', args.build, '-t', 'deps'], capture_output=True,
                                   text=True, check=True).stdout
    deps = parse_deps(deps_text, args.build, root)
    recorded = baseline.get('units', {})
    chosen, unknown, flags = [], 0, 0
    for src, objs, digest in units:
        records = [deps.get(obj) if obj else None for obj in objs]
        d = None if any(r is None for r in records) else [p for r in records for p in r]
        if d is None:
            unknown += 1
            chosen.append(src)
        elif recorded.get(src) != digest:
            flags += 1
            chosen.append(src)
        elif src in changed or any(p in changed for p in d):
            chosen.append(src)
    print(f"tidy: {len(chosen)} of {len(units)} files changed since the clean baseline {commit[:12]} "
          f"(source or headers; {flags} by compile command or new; {unknown} without a dependency record)",
          file=sys.stderr)
    print('some')
    for src in chosen:
        print(src)


def record(args):
    root = git('.', 'rev-parse', '--show-toplevel').stdout.strip()
    dirty = git(root, 'status', '--porcelain', '--', 'src', '.clang-tidy', 'CMakeLists.txt', 'cmake').stdout
    if dirty.strip():
        sys.exit("tidy-changed: not recorded: uncommitted changes under src/ or in the tidy configuration:\n"
                 + dirty)
    head = git(root, 'rev-parse', 'HEAD').stdout.strip()
    units = scope_units(root, args.build, args.regex)
    path = os.path.join(root, args.baseline)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        f.write("# Written by `KESTREL_TIDY_RECORD=1 scripts/lint.sh tidy` after a clean run:\n"
                "# every file in the tidy scope had no finding at this commit (tools/tidy-changed.py).\n"
                f"commit {head}\nclang-tidy {tidy_version()}\n")
        for src, _, digest in units:
            f.write(f"unit {src} {digest}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    print(f"tidy: baseline recorded at {head[:12]} in {args.baseline}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build')
    ap.add_argument('--regex', help='the tidy scope, a Python regex over compile_commands file paths')
    ap.add_argument('--baseline', default='.ci/tidy-baseline')
    ap.add_argument('--deps-file', help='ninja -t deps output to read instead of running ninja (tests)')
    ap.add_argument('--record', action='store_true')
    args = ap.parse_args()
    if not args.regex:
        ap.error('--regex is required')
    return record(args) if args.record else select(args)


if __name__ == '__main__':
    main()
