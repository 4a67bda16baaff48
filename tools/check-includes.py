#!/usr/bin/env python3
"""Checks every #include under src/ against the rules each module states.

Each src/<module>/README.md carries one machine-readable line:

    Includes (checked by tools/check-includes.py): modules core, store; libraries json, spdlog; no torch in spec.cc, pt_checkpoint.h

- "modules": the other src/ modules whose public headers files of this module
  may include (a module may always include its own headers).
- "libraries": the third-party libraries it may include (names from LIBRARIES
  below; the C++ and POSIX system headers are always allowed).
- "no <library> in <files>": files of the module that must not include that
  library even though the module may (e.g. torch-free headers in a torch
  module), directly or through the project headers they include, at any
  depth (the report names the chain); fnmatch patterns, and a pattern
  without '/' names only files at the module's top level ('*.h': the public
  headers, not internal/).
- "adapter": the module is a front end (the CLI, the HTTP server): a thin
  layer over the application layer (src/app) that parses, makes one call and
  prints or serialises.
- "composes <module> in <files>": files of an adapter that may include
  another adapter or a backend because they wire the program together
  (`kestrel serve` starts the HTTP server; main() registers the backends).
- "backend": the module implements engines the application layer reaches
  only through the slots a program fills (src/app/backends.h: LibTorch,
  ONNX Runtime). Only an adapter's composing files include its headers.
- "only <modules> include <files>": headers of the module that only the
  named modules (and the module itself) may include: mechanics whose use
  cases live in one layer above (data/version.h, a stored dataset version,
  is written and read by app::Datasets and the trainer, never by a front
  end).
  Clauses are separated by ';'.

Rules that hold for every module:
- `<module>/internal/...` headers are private: only files of <module> itself
  may include them (tests under tests/<module>/ may too).
- `<torch/torch.h>` is never included (it costs ~20 s a translation unit).
- An angle-bracket header that is neither a system header nor in LIBRARIES is
  an error, so a new dependency is a deliberate edit of this table.
- Layers: a module that is no adapter (the application layer and everything
  under it) includes no adapter and no backend; an adapter includes another
  adapter or a backend only in the files its "composes" clause names
  (docs/ARCHITECTURE.md "Layers").

Exit 0 when clean; otherwise one line per violation (file:line: what and why)
and exit 1. Usage: tools/check-includes.py [repo-root]
"""
import fnmatch
import os
import re
import sys

# library name -> include prefixes (a prefix ending in '/' matches a folder,
# otherwise the exact header name).
LIBRARIES = {
    "torch": ["torch/", "ATen/", "c10/"],
    "opencv": ["opencv2/"],
    "sqlite": ["sqlite3.h"],
    "libpq": ["libpq-fe.h"],
    "json": ["nlohmann/"],
    "spdlog": ["spdlog/"],
    "cli11": ["CLI/"],
    "yaml": ["yaml-cpp/"],
    "openssl": ["openssl/"],
    "pugixml": ["pugixml.hpp"],
    "curl": ["curl/"],
    "boost": ["boost/"],
    "onnx": ["onnx/"],
    "libarchive": ["archive.h", "archive_entry.h"],
    "libjpeg": ["jpeglib.h"],
    "libpng": ["png.h"],
}

# C and POSIX headers used with a ".h" (C++ standard headers have no dot).
SYSTEM_HEADERS_H = {
    "unistd.h", "signal.h", "fcntl.h", "malloc.h", "dirent.h", "errno.h",
    "poll.h", "pthread.h", "netdb.h", "spawn.h", "termios.h", "dlfcn.h",
    "execinfo.h", "pwd.h", "glob.h", "fnmatch.h", "time.h", "string.h",
    "stdlib.h", "stdio.h", "stdint.h", "limits.h", "sched.h", "syslog.h",
}
SYSTEM_PREFIXES = ("sys/", "arpa/", "netinet/", "linux/")

RULE_RE = re.compile(r"^Includes \(checked by tools/check-includes\.py\):\s*(.*)$")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def library_of(header):
    for name, prefixes in LIBRARIES.items():
        for p in prefixes:
            if (p.endswith("/") and header.startswith(p)) or header == p:
                return name
    return None


def is_system(header):
    if "." not in header and "/" not in header:
        return True  # <vector>, <string>, ...
    return header in SYSTEM_HEADERS_H or header.startswith(SYSTEM_PREFIXES)


def names_file(pattern, in_mod):
    """A 'no X in' pattern: with a '/' it matches the path inside the module,
    without one only files at the module's top level (so '*.h' means the
    public headers, not internal/*.h). fnmatch wildcards."""
    if "/" not in pattern and "/" in in_mod:
        return False
    return fnmatch.fnmatchcase(in_mod, pattern)


def includes_of(path):
    """[(line number, '<' or '"', header)] of a file's #include lines."""
    out = []
    for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
        m = INCLUDE_RE.match(line)
        if m:
            out.append((n, m.group(1), m.group(2)))
    return out


class LibraryReach:
    """Which project headers pull in a library, directly or through other
    project headers ("core/x.h" -> src/core/x.h): reach(header, lib) is the
    chain ["a/b.h", "c/d.h:12 includes <lib/h>"] of the first path found, or
    None when the header stays free of it. Memoised; include cycles end."""

    def __init__(self, src, modules):
        self.src, self.modules, self.memo = src, set(modules), {}

    def reach(self, header, lib, visiting=frozenset()):
        key = (header, lib)
        if key in self.memo:
            return self.memo[key]
        if header in visiting:
            return None
        path = os.path.join(self.src, header)
        found = None
        if os.path.isfile(path):
            for n, kind, inc in includes_of(path):
                if kind == "<":
                    if library_of(inc) == lib:
                        found = [f"{header}:{n} includes <{inc}>"]
                        break
                elif inc.split("/")[0] in self.modules:
                    sub = self.reach(inc, lib, visiting | {header})
                    if sub is not None:
                        found = [header] + sub
                        break
        self.memo[key] = found
        return found


def parse_rule(text, readme):
    """Returns (modules, libraries, {library: set(files)}, adapter, {module: set(files)},
    backend, {file pattern: set(modules)}) or raises ValueError."""
    modules, libraries, forbidden, adapter, composes, backend = set(), set(), {}, False, {}, False
    only = {}
    for clause in (c.strip() for c in text.split(";")):
        if not clause:
            continue
        if clause.startswith("modules"):
            modules |= {m.strip() for m in clause[len("modules"):].split(",") if m.strip() and m.strip() != "none"}
        elif clause.startswith("libraries"):
            libraries |= {x.strip() for x in clause[len("libraries"):].split(",") if x.strip() and x.strip() != "none"}
        elif clause == "adapter":
            adapter = True
        elif clause == "backend":
            backend = True
        elif clause.startswith("composes "):
            m = re.match(r"composes (\S+) in (.+)$", clause)
            if not m:
                raise ValueError(f"{readme}: cannot read clause '{clause}' (expected 'composes <module> in a.cc, b.cc')")
            composes.setdefault(m.group(1), set()).update(f.strip() for f in m.group(2).split(","))
        elif clause.startswith("only "):
            m = re.match(r"only (.+?) include (.+)$", clause)
            if not m:
                raise ValueError(f"{readme}: cannot read clause '{clause}' (expected 'only <module>, <module> include a.h, b.h')")
            readers = {x.strip() for x in m.group(1).split(",") if x.strip()}
            for f in (f.strip() for f in m.group(2).split(",")):
                only.setdefault(f, set()).update(readers)
        elif clause.startswith("no "):
            m = re.match(r"no (\S+) in (.+)$", clause)
            if not m:
                raise ValueError(f"{readme}: cannot read clause '{clause}' (expected 'no <library> in a.h, b.cc')")
            forbidden.setdefault(m.group(1), set()).update(f.strip() for f in m.group(2).split(","))
        else:
            raise ValueError(f"{readme}: unknown clause '{clause}' (expected modules / libraries / no X in ... / adapter / backend / composes X in ... / only X include ...)")
    for lib in libraries | set(forbidden):
        if lib not in LIBRARIES:
            raise ValueError(f"{readme}: unknown library '{lib}' (known: {', '.join(sorted(LIBRARIES))})")
    if composes and not adapter:
        raise ValueError(f"{readme}: 'composes' is for adapters (add the clause 'adapter')")
    return modules, libraries, forbidden, adapter, composes, backend, only


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    src = os.path.join(root, "src")
    modules = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    rules, errors = {}, []
    for mod in modules:
        readme = os.path.join("src", mod, "README.md")
        path = os.path.join(root, readme)
        lines = open(path, encoding="utf-8").read().splitlines() if os.path.exists(path) else []
        found = [RULE_RE.match(l) for l in lines]
        found = [m.group(1) for m in found if m]
        if len(found) != 1:
            errors.append(f"{readme}: needs exactly one 'Includes (checked by tools/check-includes.py): ...' line, has {len(found)}")
            continue
        try:
            rules[mod] = parse_rule(found[0], readme)
        except ValueError as e:
            errors.append(str(e))
        for other in rules.get(mod, (set(),))[0]:
            if other not in modules:
                errors.append(f"{readme}: names module '{other}', which is not a folder under src/")
    checked = 0
    reach = LibraryReach(src, modules)
    for mod in modules:
        if mod not in rules:
            continue
        allowed_mods, allowed_libs, forbidden, is_adapter, composes, _, _ = rules[mod]
        base = os.path.join(src, mod)
        for dirpath, _, files in os.walk(base):
            for f in sorted(files):
                if not f.endswith((".h", ".cc", ".hpp", ".cpp")):
                    continue
                full = os.path.join(dirpath, f)
                rel = os.path.relpath(full, root)
                in_mod = os.path.relpath(full, base)
                checked += 1
                for n, line in enumerate(open(full, encoding="utf-8", errors="replace"), 1):
                    m = INCLUDE_RE.match(line)
                    if not m:
                        continue
                    kind, header = m.groups()
                    close = ">" if kind == "<" else '"'
                    where = f"{rel}:{n}: #include {kind}{header}{close}"
                    if kind == '"':
                        first = header.split("/")[0]
                        if first not in modules:
                            continue  # a sibling file ("foo.h") or a generated header
                        if first != mod and first not in allowed_mods:
                            errors.append(f"{where}: module '{mod}' may not include '{first}' (src/{mod}/README.md)")
                        elif first != mod and first in rules and rules[first][3]:  # an adapter's header
                            if not is_adapter:
                                errors.append(f"{where}: '{mod}' is below the adapters and may include none ('{first}' is one)")
                            elif not any(names_file(p, in_mod) for p in composes.get(first, set())):
                                errors.append(f"{where}: adapter '{mod}' may include adapter '{first}' only where it composes the program (src/{mod}/README.md 'composes')")
                        elif first != mod and first in rules and rules[first][5]:  # a backend's header
                            if not is_adapter:
                                errors.append(f"{where}: '{mod}' may not include backend '{first}': a program's main() registers it (app/backends.h)")
                            elif not any(names_file(p, in_mod) for p in composes.get(first, set())):
                                errors.append(f"{where}: adapter '{mod}' may include backend '{first}' only where it composes the program (src/{mod}/README.md 'composes')")
                        if first != mod and first in rules and first in allowed_mods:
                            in_first = header[len(first) + 1:]
                            for pattern, readers in sorted(rules[first][6].items()):
                                if names_file(pattern, in_first) and mod not in readers:
                                    errors.append(f"{where}: only {', '.join(sorted(readers))} may include '{header}' "
                                                  f"(src/{first}/README.md 'only ... include')")
                        if "/internal/" in "/" + header and first != mod:
                            errors.append(f"{where}: '{first}/internal/' headers are private to src/{first}")
                        for lib in sorted(forbidden):
                            if not any(names_file(p, in_mod) for p in forbidden[lib]):
                                continue
                            chain = reach.reach(header, lib)
                            if chain is not None:
                                errors.append(f"{where}: {in_mod} must stay free of {lib} (src/{mod}/README.md): "
                                              + " -> ".join(chain))
                        continue
                    if header == "torch/torch.h":
                        errors.append(f"{where}: never <torch/torch.h> (~20 s a translation unit); include the torch/ headers needed")
                        continue
                    lib = library_of(header)
                    if lib is None:
                        if not is_system(header):
                            errors.append(f"{where}: unknown library header; add it to LIBRARIES in tools/check-includes.py")
                        continue
                    if lib not in allowed_libs:
                        errors.append(f"{where}: module '{mod}' may not use {lib} (src/{mod}/README.md)")
                    elif any(names_file(p, in_mod) for p in forbidden.get(lib, set())):
                        errors.append(f"{where}: {in_mod} must stay free of {lib} (src/{mod}/README.md)")
    for e in errors:
        print(e)
    if errors:
        print(f"check-includes: {len(errors)} violation(s) in {checked} files")
        return 1
    print(f"check-includes: {checked} files under src/ follow their module's include rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
