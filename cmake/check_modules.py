#!/usr/bin/env python3
"""Holds every #include of the project's library, public headers and command
to the module table the build declares (cmake/MpiaccelModules.cmake).

A module's files (src/NAME/, and the public headers it owns) may include
  - headers of their own module,
  - headers of the modules it names in USES (the table is the direct
    dependency graph: what a module includes of another, it declares),
  - outside libraries (<...>).
A program's files (the mpiaccel command) may include every public header and
the internal headers of the modules it names. The umbrella header
(mpiaccel/mpiaccel.hpp) may include every public header.

An include never climbs out of its folder with "../": a path relative to
the including file would otherwise pass as the module's own.

Also checked: USES names known modules, declares nothing it does not
include, and has no cycle; every public header has one owner and is reached
from the umbrella header; and, with
--design, the table in docs/design.md between <!-- module-table --> and
<!-- /module-table --> is this one, row for row in the build's order, which
is a valid build order (each module below every module it uses).

A model family (a folder of src/models/families) is named as a string
literal only in its own folder: everything else asks the registry
(include/mpiaccel/model_family.hpp). Comments and module names
(register_module("mlp", ...)) do not count.

A config value is compared as text only in src/config: the config reads
each choice key's text once into its enum (include/mpiaccel/config_choices.hpp),
and everything else compares enums. A comparison (== or !=) with a string
literal that spells a choice value ("fsdp", "HYBRID_SHARD", "none") is refused
outside src/config, except in a family's transformers mapping (hf_*.cpp of
src/models/families), which compares transformers' config.json values.

Exit status 0 when all holds; 1 with one line per broken rule (file:line,
what it includes, whose that is, and what its module declares).
"""

import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
UMBRELLA = "mpiaccel.hpp"
SOURCE_SUFFIXES = (".cpp", ".hpp", ".h", ".cu", ".cuh")


class Entry:
    def __init__(self, kind, name, folder, uses, headers):
        self.kind, self.name, self.folder = kind, name, folder
        self.uses = [] if uses == "-" else uses.split(",")
        self.headers = [] if headers == "-" else headers.split(",")


def read_table(path):
    entries = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            words = line.split()
            if not words:
                continue
            if len(words) != 5 or words[0] not in ("module", "program"):
                sys.exit(f"{path}:{number}: not a module table row: {line.strip()}")
            entries[words[1]] = Entry(*words)
    return entries


class Checker:
    def __init__(self, root, entries):
        self.root, self.entries = root, entries
        self.modules = {n: e for n, e in entries.items() if e.kind == "module"}
        self.errors = []
        self.used = {n: set() for n in entries}  # the modules each one really includes
        self.header_owner = {}
        for module in self.modules.values():
            for header in module.headers:
                if header in self.header_owner:
                    self.fail(f"include/mpiaccel/{header}: owned by both {self.header_owner[header]} "
                              f"and {module.name}; name it in the HEADERS of one")
                self.header_owner[header] = module.name
        self.folder_owner = {}
        for entry in entries.values():
            top = entry.folder.split("/")
            if top[0] == "src":
                self.folder_owner[top[1]] = entry.name

    def fail(self, message):
        self.errors.append(message)

    def check_table(self):
        for entry in self.entries.values():
            for use in entry.uses:
                if use not in self.modules:
                    self.fail(f"{entry.name} USES '{use}', which is no module "
                              f"(modules: {' '.join(sorted(self.modules))})")
        self.check_cycles()

    def check_cycles(self):
        state = {}

        def visit(name, path):
            if state.get(name) == "done":
                return
            if state.get(name) == "open":
                cycle = path[path.index(name):] + [name]
                self.fail("module cycle: " + " -> ".join(cycle))
                return
            state[name] = "open"
            for use in self.modules[name].uses if name in self.modules else []:
                if use in self.modules:
                    visit(use, path + [name])
            state[name] = "done"

        for name in self.modules:
            visit(name, [])

    def check_umbrella_reaches_all(self):
        """Every public header is reached from the umbrella header."""
        folder = os.path.join(self.root, "include", "mpiaccel")
        reached, todo = set(), [UMBRELLA]
        while todo:
            header = todo.pop()
            path = os.path.join(folder, header)
            if header in reached or not os.path.exists(path):
                continue  # version.hpp is generated into the build tree
            reached.add(header)
            for line in open(path, errors="replace"):
                match = INCLUDE.match(line)
                if match and match.group(2).startswith("mpiaccel/"):
                    todo.append(match.group(2)[len("mpiaccel/"):])
        for header in sorted(os.listdir(folder)):
            if header.endswith(".hpp") and header not in reached:
                self.fail(f"include/mpiaccel/{header}: not reached from include/mpiaccel/{UMBRELLA}, "
                          f"which is the whole public API; include it there")

    def check_public_headers(self):
        folder = os.path.join(self.root, "include", "mpiaccel")
        for header in sorted(os.listdir(folder)):
            if not header.endswith(".hpp"):
                continue
            path = os.path.join(folder, header)
            if header == UMBRELLA:
                self.check_file(path, None, umbrella=True)
                continue
            owner = self.header_owner.get(header)
            if owner is None:
                self.fail(f"include/mpiaccel/{header}: owned by no module; name it in the "
                          f"HEADERS of the module that implements it")
                continue
            self.check_file(path, self.entries[owner], public=True)

    def check_folders(self):
        for entry in self.entries.values():
            base = os.path.join(self.root, entry.folder)
            if not os.path.isdir(base):
                self.fail(f"{entry.folder}: the folder of {entry.kind} {entry.name} does not exist")
                continue
            for folder, _, files in sorted(os.walk(base)):
                for name in sorted(files):
                    if name.endswith(SOURCE_SUFFIXES):
                        self.check_file(os.path.join(folder, name), entry)

    def owner_of(self, target, including_dir):
        """The table entry that owns an included path, or None (outside)."""
        if target.startswith("mpiaccel/"):
            header = target[len("mpiaccel/"):]
            return "public", self.header_owner.get(header, "?" if header != UMBRELLA else UMBRELLA)
        if os.path.exists(os.path.join(including_dir, target)):
            return "local", None
        top = target.split("/")[0]
        if top in self.folder_owner and "/" in target:
            return "internal", self.folder_owner[top]
        return "outside", None

    def check_file(self, path, entry, public=False, umbrella=False):
        shown = os.path.relpath(path, self.root)
        with open(path, errors="replace") as f:
            lines = f.readlines()
        for number, line in enumerate(lines, 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            bracket, target = match.groups()
            where = f"{shown}:{number}: #include {bracket}{target}{'>' if bracket == '<' else chr(34)}"
            if bracket == '"' and ".." in target.split("/"):
                self.fail(f"{where}: an include climbs out of its folder with '../'; name the "
                          f"header by its module's path (\"module/file.hpp\", \"mpiaccel/file.hpp\")")
                continue
            kind, owner = self.owner_of(target, os.path.dirname(path))
            if kind in ("outside", "local"):
                continue
            if owner == "?":
                self.fail(f"{where}: no public header of that name is owned by a module")
                continue
            if umbrella:
                if kind != "public":
                    self.fail(f"{where}: the umbrella header includes only public headers")
                continue
            if owner == UMBRELLA:
                self.fail(f"{where}: only users include the umbrella header; include what is used")
                continue
            if public and kind == "internal":
                self.fail(f"{where}: a public header includes an internal one "
                          f"(src/ is not installed)")
                continue
            self.check_use(where, entry, kind, owner)

    def check_use(self, where, entry, kind, owner):
        if owner == entry.name:
            return
        if entry.kind == "program" and kind == "public":
            return
        self.used[entry.name].add(owner)
        if owner in entry.uses:
            return
        uses = " ".join(entry.uses) or "nothing"
        self.fail(f"{where}: that is module {owner}'s, but {entry.kind} {entry.name} uses "
                  f"{uses}; add {owner} to its USES if the dependency is meant "
                  f"(and to docs/design.md), or move the code")

    def check_unneeded(self):
        for entry in self.entries.values():
            for use in entry.uses:
                if use in self.modules and use not in self.used[entry.name]:
                    self.fail(f"{entry.folder}: {entry.kind} {entry.name} USES {use} but includes "
                              f"nothing of it; remove it from USES (and docs/design.md)")

    def check_family_names(self):
        families_dir = os.path.join(self.root, "src", "models", "families")
        if not os.path.isdir(families_dir):
            return
        families = sorted(d for d in os.listdir(families_dir) if os.path.isdir(os.path.join(families_dir, d)))
        literal = re.compile(r'"(' + "|".join(map(re.escape, families)) + r')"')
        for top in ("src", "include", "tools"):
            for folder, _, files in os.walk(os.path.join(self.root, top)):
                for name in sorted(files):
                    if name.endswith(SOURCE_SUFFIXES):
                        self.check_family_literals(os.path.join(folder, name), families_dir, literal)

    def check_family_literals(self, path, families_dir, literal):
        relative = os.path.relpath(path, self.root)
        with open(path, errors="replace") as f:
            for number, line in enumerate(f, 1):
                code = re.sub(r"//.*$", "", line)
                code = re.sub(r'register_module\(\s*"[^"]*"', "", code)
                for match in literal.finditer(code):
                    family = match.group(1)
                    own = os.path.join(families_dir, family) + os.sep
                    if not path.startswith(own):
                        self.fail(f"{relative}:{number}: \"{family}\": a model family's name outside its folder "
                                  f"(src/models/families/{family}); ask the registry "
                                  f"(include/mpiaccel/model_family.hpp) instead")

    def check_config_values(self):
        choices_header = os.path.join(self.root, "include", "mpiaccel", "config_choices.hpp")
        if not os.path.isfile(choices_header):
            return
        text = open(choices_header).read()
        tables = re.findall(r"MPIACCEL_CHOICES\((.*?)\);", text, re.S)
        spellings = {name for table in tables for name in re.findall(r'"([^"]+)"', table)}
        quoted = "|".join(map(re.escape, sorted(spellings, key=len, reverse=True)))
        compared = re.compile(r'(?:==|!=)\s*"(' + quoted + r')"|"(' + quoted + r')"\s*(?:==|!=)')
        for top in ("src", "tools"):
            for folder, _, files in os.walk(os.path.join(self.root, top)):
                relative_folder = os.path.relpath(folder, self.root)
                if relative_folder == os.path.join("src", "config") or \
                        relative_folder.startswith(os.path.join("src", "config") + os.sep):
                    continue
                for name in sorted(files):
                    in_family = relative_folder.startswith(os.path.join("src", "models", "families"))
                    if not name.endswith(SOURCE_SUFFIXES) or (in_family and name.startswith("hf_")):
                        continue
                    self.check_value_comparisons(os.path.join(folder, name), compared)

    def check_value_comparisons(self, path, compared):
        relative = os.path.relpath(path, self.root)
        with open(path, errors="replace") as f:
            for number, line in enumerate(f, 1):
                code = re.sub(r"//.*$", "", line)
                for match in compared.finditer(code):
                    value = match.group(1) or match.group(2)
                    self.fail(f"{relative}:{number}: compares with \"{value}\", a config value's text; the "
                              f"config holds it as an enum (include/mpiaccel/config_choices.hpp): compare "
                              f"with the enum, or resolve the text in src/config")

    def check_design(self, path):
        text = open(path).read()
        block = re.search(r"<!-- module-table -->(.*?)<!-- /module-table -->", text, re.S)
        if not block:
            self.fail(f"{path}: no <!-- module-table --> block")
            return
        documented = {}
        for row in block.group(1).splitlines():
            cells = [c.strip().strip("`") for c in row.strip().strip("|").split("|")]
            if len(cells) < 2 or not re.fullmatch(r"[a-z_]+", cells[0]) or cells[1] == "uses":
                continue
            documented[cells[0]] = set(re.findall(r"[a-z_]+", cells[1].replace("—", "")))
        shown = os.path.relpath(path, self.root)
        self.check_design_order(shown, documented)
        for name, entry in self.entries.items():
            if name not in documented:
                self.fail(f"{shown}: the module table has no row for {name}")
            elif documented[name] != set(entry.uses):
                self.fail(f"{shown}: the module table says {name} uses "
                          f"{' '.join(sorted(documented[name])) or 'nothing'}; the build declares "
                          f"{' '.join(sorted(entry.uses)) or 'nothing'}")
        for name in documented.keys() - self.entries.keys():
            self.fail(f"{shown}: the module table names {name}, which the build does not declare")


    def check_design_order(self, shown, documented):
        """The documented rows are a build order, and the build's own."""
        seen = set()
        for name, uses in documented.items():
            for use in sorted(uses - seen):
                if use in documented:
                    self.fail(f"{shown}: the module table lists {name} above {use}, which it uses; "
                              f"a module's row goes below every module it uses")
            seen.add(name)
        built = [n for n, e in self.entries.items() if e.kind == "module"]
        listed = [n for n in documented if n in self.modules]
        if [n for n in built if n in documented] != listed:
            self.fail(f"{shown}: the module table's order ({' '.join(listed)}) is not the build's "
                      f"({' '.join(built)}, the foreach of the top CMakeLists.txt); list them alike")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", required=True, help="the module table the build wrote")
    parser.add_argument("--root", required=True, help="the source tree")
    parser.add_argument("--design", help="docs/design.md, whose module table must match")
    parser.add_argument("--stamp", help="file to touch when everything holds")
    args = parser.parse_args()
    checker = Checker(args.root, read_table(args.table))
    checker.check_table()
    checker.check_public_headers()
    checker.check_umbrella_reaches_all()
    checker.check_folders()
    checker.check_unneeded()
    checker.check_family_names()
    checker.check_config_values()
    if args.design:
        checker.check_design(args.design)
    for error in checker.errors:
        print(f"module check: {error}", file=sys.stderr)
    if checker.errors:
        print(f"module check: {len(checker.errors)} broken rule(s); the table is "
              f"cmake/MpiaccelModules.cmake's USES, the order docs/design.md", file=sys.stderr)
        return 1
    if args.stamp:
        with open(args.stamp, "w") as f:
            f.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
