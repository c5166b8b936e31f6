#!/usr/bin/env python3
"""Checks that ARCHITECTURE.md's tables name every source and test file.

    tests/doc_tables.py              check this checkout
    tests/doc_tables.py --self-test  show that a missing or stale row is caught

The rules, kept plain so that a table row is all there is to fix:
- Layers table (under "## Layers"): every `src/DIR/NAME.rs` is named in the
  row whose first cell is `src/DIR/`, as `NAME` or `NAME.rs` in its second
  cell (a folder's `mod.rs` is covered by its row); every name in a second
  cell is a file there.
- Tests table (under "## Tests"): every `tests/*.rs` and every file under
  tests/ that tests/run.sh names is named in a first cell: as a path
  (`tests/http.rs`, or a glob such as `tests/init/*.sh`), or as a bare name
  after a path in the same cell, which takes that path's folder
  (`tests/http.rs`, `paths.rs`).
Exits 1 and names each missing or stale file.
"""

import fnmatch
import re
import sys
import tempfile
from pathlib import Path


def table(doc: str, heading: str):
    """The cells of each row of the first table under `## heading`."""
    lines = doc.split("\n")
    try:
        start = lines.index(f"## {heading}")
    except ValueError:
        return None
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|") and not re.match(r"^\|[-| ]+\|$", line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows.append(cells)
        elif rows and not line.startswith("|"):
            break
    return rows[1:]  # the header row is not a file


def names(cell: str):
    """The first word of each `code span` in a cell."""
    return [m.split()[0] for m in re.findall(r"`([^`]+)`", cell) if m.split()]


def layer_problems(root: Path, doc: str):
    rows = table(doc, "Layers")
    if rows is None:
        return ["ARCHITECTURE.md has no '## Layers' section"]
    listed = {}
    for cells in rows:
        if len(cells) >= 2 and names(cells[0]):
            folder = names(cells[0])[0]
            listed[folder] = {n[:-3] if n.endswith(".rs") else n for n in names(cells[1])}
    problems = []
    src = root / "src"
    for f in sorted(src.rglob("*.rs")):
        rel = f.relative_to(root)
        folder = rel.parent.as_posix() + "/"
        if f.name == "mod.rs" and folder in listed:
            continue
        if f.stem not in listed.get(folder, set()):
            where = f"the `{folder}` row" if folder in listed else f"a `{folder}` row"
            problems.append(f"{rel}: not in ARCHITECTURE.md's layer table (add `{f.stem}` to {where})")
    for folder, mods in sorted(listed.items()):
        for m in sorted(mods):
            if not (root / folder / f"{m}.rs").is_file() and not (root / folder / m / "mod.rs").is_file():
                problems.append(f"{folder}{m}.rs: in ARCHITECTURE.md's layer table, but no such file")
    return problems


def test_files(root: Path):
    """tests/*.rs, and the files under tests/ that tests/run.sh names."""
    found = {p.relative_to(root).as_posix() for p in (root / "tests").glob("*.rs")}
    run = root / "tests" / "run.sh"
    if run.is_file():
        code = "\n".join(line for line in run.read_text().split("\n") if not line.lstrip().startswith("#"))
        for m in re.findall(r"(?<![\w/.-])(tests/[\w./-]+\.\w+)", code):
            # tests/out/ holds what a run writes (its logs), not tests.
            if (root / m).is_file() and m != "tests/run.sh" and not m.startswith("tests/out/"):
                found.add(m)
    return sorted(found)


def test_problems(root: Path, doc: str):
    rows = table(doc, "Tests")
    if rows is None:
        return ["ARCHITECTURE.md has no '## Tests' section"]
    patterns = []
    for cells in rows:
        folder = ""
        for n in names(cells[0]):
            if "/" in n:
                folder = n.rsplit("/", 1)[0] + "/"
                patterns.append(n)
            elif folder:
                patterns.append(folder + n)
    return [
        f"{f}: not in ARCHITECTURE.md's tests table (add a row, or its name to a row of its folder)"
        for f in test_files(root)
        if not any(fnmatch.fnmatchcase(f, p) for p in patterns)
    ]


def check(root: Path, quiet=False) -> bool:
    doc = (root / "ARCHITECTURE.md").read_text()
    problems = layer_problems(root, doc) + test_problems(root, doc)
    for p in problems:
        print(p)
    if not problems and not quiet:
        n_src = len(list((root / "src").rglob("*.rs")))
        print(f"ARCHITECTURE.md names all {n_src} source files and {len(test_files(root))} test files")
    return not problems


def self_test() -> bool:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        for f in ("src/lib.rs", "src/net/mod.rs", "src/net/sock.rs", "tests/http.rs", "tests/paths.rs", "tests/init/a.sh"):
            (root / f).parent.mkdir(parents=True, exist_ok=True)
            (root / f).write_text("")
        (root / "tests/run.sh").write_text("tests/init/a.sh\n")
        layers = "## Layers\n\n| folder | modules | job |\n|---|---|---|\n| `src/` | `lib.rs` | x |\n| `src/net/` | `sock` | x |\n\n"
        tests = "## Tests\n\n| where | what |\n|---|---|\n| `tests/http.rs`, `paths.rs` | x |\n| `tests/init/*.sh` | x |\n"
        (root / "ARCHITECTURE.md").write_text(layers + tests)
        clean = check(root, quiet=True)
        (root / "src/net/idle.rs").write_text("")
        (root / "tests/head.rs").write_text("")
        missing = not check(root, quiet=True)
        (root / "src/net/idle.rs").unlink()
        (root / "tests/head.rs").unlink()
        (root / "src/net/sock.rs").unlink()
        stale = not check(root, quiet=True)
    print(
        f"self-test: complete tables {'pass' if clean else 'FAIL'}, missing files "
        f"{'caught' if missing else 'MISSED'}, a stale row {'caught' if stale else 'MISSED'}"
    )
    return clean and missing and stale


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(0 if self_test() else 1)
    sys.exit(0 if check(Path(__file__).resolve().parent.parent) else 1)
