#!/usr/bin/env python3
"""Checks that the modules under src/ import each other without a cycle,
both module by module and folder by folder (a folder is a layer).

    tests/layers.py              check src/, print the layers bottom-up
    tests/layers.py --self-test  show that a cycle is caught

An edge is any `crate::`, `super::` or `self::` path outside `#[cfg(test)]`
code, in a `use` tree or inline. Exits 1 and names each cycle's edges with
FILE:LINE when there is one.
"""

import re
import sys
import tempfile
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def module_of(src: Path, f: Path) -> tuple:
    parts = list(f.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("lib", "main") and len(parts) == 1:
        return ()
    if parts[-1] == "mod":
        parts.pop()
    return tuple(parts)


def strip(text: str) -> str:
    """Drops comments, strings and test modules, keeping line numbers."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\])*"', lambda m: "\n" * m.group(0).count("\n"), text)
    cut = re.search(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text)
    if cut:
        text = text[: cut.start()]
    return text


def use_paths(tree: str):
    """Expands a use tree (`a::{b, c::{d}}`) into its paths."""
    tree = tree.strip()
    if not tree:
        return
    depth, start = 0, None
    for i, c in enumerate(tree):
        if c == "{":
            if depth == 0:
                start = i
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and start is not None:
                prefix = tree[:start].rstrip(":").strip()
                inner, parts, d, last = tree[start + 1 : i], [], 0, 0
                for j, ch in enumerate(inner):
                    d += ch == "{"
                    d -= ch == "}"
                    if ch == "," and d == 0:
                        parts.append(inner[last:j])
                        last = j + 1
                parts.append(inner[last:])
                for p in parts:
                    for sub in use_paths(p):
                        yield (prefix + "::" + sub) if prefix and sub != "self" else (prefix or sub)
                return
    yield re.sub(r"\s+as\s+\w+$", "", tree)


def references(text: str):
    """(line, path) for every path that names a module of this crate."""
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        line = text.count("\n", 0, m.start()) + 1
        for p in use_paths(m.group(1)):
            yield line, p
    for m in re.finditer(rf"(?<![:\w])((?:crate|super|self)(?:::{IDENT})+)", text):
        yield text.count("\n", 0, m.start()) + 1, m.group(1)


def resolve(here: tuple, path: str, modules: set):
    segs = [s for s in path.replace(" ", "").split("::") if s]
    if not segs or segs[0] not in ("crate", "super", "self"):
        return None
    base = list(here)
    while segs and segs[0] in ("super", "self", "crate"):
        s = segs.pop(0)
        if s == "crate":
            base = []
        elif s == "super":
            base = base[:-1]
    full = base + segs
    for n in range(len(full), -1, -1):
        if tuple(full[:n]) in modules:
            return tuple(full[:n])
    return None


def graph(src: Path):
    files = sorted(src.rglob("*.rs"))
    mods = {module_of(src, f): f for f in files}
    edges = {}
    for m, f in mods.items():
        text = strip(f.read_text())
        for line, p in references(text):
            to = resolve(m, p, set(mods))
            if to is None or to == m or to == m[: len(to)]:
                continue  # itself, or a module declaring its own children
            edges.setdefault((m, to), f"{f.relative_to(src.parent)}:{line}")
    return set(mods), edges


def cycles(nodes, edges):
    """Strongly connected components with more than one node (Tarjan)."""
    succ = {n: [] for n in nodes}
    for a, b in edges:
        succ[a].append(b)
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for n in sorted(nodes):
        if n not in index:
            visit(n)
    return out


def name(m: tuple) -> str:
    return "::".join(m) or "crate"


def check(src: Path, quiet=False) -> bool:
    nodes, edges = graph(src)
    ok = True
    levels = [
        ("module", nodes, edges),
        (
            "folder",
            {m[:1] for m in nodes},
            {(a[:1], b[:1]): w for (a, b), w in edges.items() if a[:1] != b[:1]},
        ),
    ]
    for level, ns, es in levels:
        for comp in cycles(ns, es):
            ok = False
            print(f"import cycle between {level}s: {', '.join(map(name, comp))}")
            inside = set(comp)
            for (a, b), where in sorted(es.items()):
                if a in inside and b in inside:
                    print(f"  {name(a)} -> {name(b)}  ({where})")
    if ok and not quiet:
        folders = {m[:1] for m in nodes} - {()}
        deps = {f: {b[:1] for (a, b) in edges if a[:1] == f and b[:1] != f} - {()} for f in folders}
        order, done = [], set()
        while len(done) < len(folders):
            ready = sorted(f for f in folders - done if deps[f] <= done)
            order.append(ready)
            done |= set(ready)
        print("layers, each using only those above it:")
        for ready in order:
            print("  " + ", ".join(name(f) for f in ready))
        print(f"no import cycle among {len(nodes)} modules, nor among the {len(folders)} at the top")
    return ok


def self_test() -> bool:
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "src"
        (src / "a").mkdir(parents=True)
        (src / "lib.rs").write_text("mod a;\nmod b;\n")
        (src / "a" / "mod.rs").write_text("pub mod x;\n")
        (src / "a" / "x.rs").write_text("use crate::b::{self, Thing};\n")
        (src / "b.rs").write_text("pub fn f() { super::a::x::g() }\n")
        found_cycle = not check(src, quiet=True)
        (src / "b.rs").write_text("pub fn f() {}\n#[cfg(test)]\nmod tests { use crate::a::x; }\n")
        clean = check(src, quiet=True)
    print(f"self-test: cycle {'caught' if found_cycle else 'MISSED'}, clean tree {'passes' if clean else 'FAILS'}")
    return found_cycle and clean


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(0 if self_test() else 1)
    src = Path(__file__).resolve().parent.parent / "src"
    sys.exit(0 if check(src) else 1)
