"""The layers of docs/architecture.md, kept by reading every import of the package.

Each group of modules has a rank; a module imports modules of its own group or of a
lower rank only, and two groups of one rank never import each other. A few further
rules ride on top (the engine imports no statistics; reports read records). Imports
under TYPE_CHECKING and inside functions count for the layers: they couple the code
as much as any other. For cycles, only what runs at import time counts.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import eigenjury

PACKAGE = Path(eigenjury.__file__).parent

# Bottom to top. Modules of one group may import each other.
# Modules at the bottom, importing only each other: the base every layer may use.
BASE = {
    "_version",
    "errors",
    "exit_codes",
    "files",
    "lazy",
    "names",
    "processes",
    "config",
    "reply_features",
}
RANKS: dict[str, int] = {
    "base": 0,
    "stats": 1,
    "models": 1,
    "records": 2,
    "engine": 3,
    "verdict_files": 3,
    "batch": 4,
    "contracts": 5,
    "bounds": 6,
    "peer": 7,
    "reports": 8,
    "view": 9,
    "integrations": 9,
    "testing": 9,
    "jobs": 10,
    "commands": 11,
    "cli": 12,
    "__main__": 13,
    "": 13,  # the package face, eigenjury/__init__.py
}
# Rules beyond the ranks: (importing group, imported group) pairs that are forbidden.
FORBIDDEN = {("engine", "stats"), ("verdict_files", "engine"), ("verdict_files", "records")}
# What reports may read: records, base modules, and themselves.
RECORD_MODULES = {"records", "contracts.record", "peer.record", "bounds.record"}
# Reports that write a run's files beside its record read that run's own tables, which
# no record holds (the verdict table, the released scores, the contract's criteria).
RUN_WRITERS = {
    ("reports.ranking.html", "peer.run"),
    ("reports.ranking.html", "verdict_files"),
    ("reports.bounds", "bounds.apply"),
    ("reports.bounds", "bounds.scores"),
    ("reports.grading", "contracts.schema"),
}


def module_name(path: Path) -> str:
    """`peer.run` for src/eigenjury/peer/run.py; "" for the package face."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def group(module: str) -> str:
    top = module.split(".")[0]
    return "base" if top in BASE else top


def _target(module: str, name: str | None = None) -> str | None:
    """The package module an import names (without "eigenjury."), or None if outside."""
    if module != "eigenjury" and not module.startswith("eigenjury."):
        return None
    inner = module.removeprefix("eigenjury").removeprefix(".")
    if name is not None and (sub := f"{inner}.{name}".lstrip(".")) in MODULES:
        return sub
    return inner


def imports(path: Path, *, import_time_only: bool = False) -> Iterator[str]:
    """The package modules `path` imports. `import_time_only`: those that run when it is
    imported (not under TYPE_CHECKING, not inside a function)."""

    def visit(nodes: list[ast.stmt]) -> Iterator[str]:
        for node in nodes:
            if isinstance(node, ast.Import):
                yield from filter(None, (_target(a.name) for a in node.names))
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                yield from filter(None, (_target(node.module, a.name) for a in node.names))
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                if not import_time_only:
                    yield from visit(node.body)
                yield from visit(node.orelse)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if not import_time_only:
                    yield from visit(list(ast.walk(node))[1:])  # type: ignore[arg-type]
            elif isinstance(node, ast.ClassDef | ast.If | ast.Try | ast.With):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    children = getattr(node, field, [])
                    for child in children:
                        if isinstance(child, ast.ExceptHandler):
                            yield from visit(child.body)
                        else:
                            yield from visit([child])

    yield from visit(ast.parse(path.read_text(encoding="utf-8")).body)


def problem(importer: str, imported: str) -> str | None:
    """Why `importer` may not import `imported`, or None if it may."""
    mine, theirs = group(importer), group(imported)
    if mine == theirs:
        return None
    if (mine, theirs) in FORBIDDEN:
        return f"{mine} imports no {theirs}"
    reads = imported in RECORD_MODULES or RANKS[theirs] == 0
    run_writer = any(importer == a and imported.startswith(b) for a, b in RUN_WRITERS)
    if mine == "reports" and not reads and not run_writer:
        return "reports read records only"
    if RANKS[theirs] > RANKS[mine]:
        return f"{mine} (rank {RANKS[mine]}) is below {theirs} (rank {RANKS[theirs]})"
    if RANKS[theirs] == RANKS[mine]:
        return f"{mine} and {theirs} share a rank and stay apart"
    return None


def test_every_module_has_a_layer() -> None:
    assert {group(m) for m in MODULES} <= RANKS.keys()


def test_no_module_imports_across_its_layer() -> None:
    crossings = [
        f"{module} imports {target}: {why}"
        for module, path in MODULES.items()
        for target in imports(path)
        if (why := problem(module, target)) is not None
    ]
    assert crossings == []


def test_nothing_imports_in_a_cycle_at_import_time() -> None:
    graph = {m: set(imports(p, import_time_only=True)) & MODULES.keys() for m, p in MODULES.items()}
    done: set[str] = set()

    def walk(module: str, path: tuple[str, ...]) -> None:
        if module in path:
            pytest.fail("import cycle: " + " -> ".join((*path[path.index(module) :], module)))
        if module in done:
            return
        for target in sorted(graph[module]):
            if target != module:
                walk(target, (*path, module))
        done.add(module)

    for module in sorted(graph):
        walk(module, ())


@pytest.mark.parametrize(
    ("importer", "imported", "why"),
    [
        ("stats.btd", "peer.run", "stats (rank 1) is below peer (rank 7)"),
        ("stats.btd", "models.spec", "stats and models share a rank and stay apart"),
        ("engine.engine", "stats.bootstrap", "engine imports no stats"),
        ("contracts.run", "reports.grading", "contracts (rank 5) is below reports (rank 8)"),
        ("reports.kit", "peer.fitting", "reports read records only"),
        ("reports.kit", "peer.record", None),
        ("peer.style_check", "bounds.neighbours", None),
        ("bounds.scores", "contracts.record", None),
    ],
)
def test_the_rules_name_what_they_forbid(importer: str, imported: str, why: str | None) -> None:
    """The checker itself: a forbidden import is caught, with the rule it breaks."""
    assert problem(importer, imported) == why
