"""The package tree: no import circle anywhere (imports inside functions and under TYPE_CHECKING included), and the
module map in docs/architecture.md matches the tree.

Which way imports run (the pipeline's layers, the core apart from the optional parts and the CLI) is checked by
the import-linter contracts in pyproject.toml (``lint-imports``, run by .ci/run), on the same graph.
Files are split when they grow a second job, not to meet a line count: there is no size cap here; a folder holds
at most 12 modules."""

from __future__ import annotations

import re
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "grpo_lite"


def import_graph(package: str = "grpo_lite") -> dict[str, set[str]]:
    """Every module of ``package`` -> the modules of it that it imports: at the top, in functions, under
    TYPE_CHECKING (grimp's graph, as import-linter reads it)."""
    graph = grimp.build_graph(package, cache_dir=None)
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles() -> None:
    cycles = _cycles(import_graph())
    assert not cycles, "import circles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_circle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_a_circle_closed_inside_a_function_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The import that closes a circle may sit inside a function or under TYPE_CHECKING: the graph has it."""
    pkg = tmp_path / "circle_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def traced():\n    from circle_pkg.high import run\n\n    return run\n")
    (pkg / "high.py").write_text("from circle_pkg.low import traced\n\n\ndef run():\n    return traced\n")
    (pkg / "typed.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from circle_pkg.high import run\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = import_graph("circle_pkg")
    assert "circle_pkg.high" in graph["circle_pkg.typed"]
    assert _cycles(graph) == [["circle_pkg.high", "circle_pkg.low"]]


def test_function_level_imports_count_in_the_package() -> None:
    graph = import_graph()
    assert "grpo_lite.training.run.checkpoints" in graph["grpo_lite.training.run.folder"]  # inside check_disk()
    assert "grpo_lite.planning.search" in graph["grpo_lite.planning.choose"]


def test_module_map_matches_the_tree() -> None:
    """docs/architecture.md lists every module of the package, and no module that is gone."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## The module map", 1)[1].split("```", 2)[1]
    listed = {p for p in re.findall(r"(grpo_lite(?:/\w+)*/\w+\.py)", block)}
    actual = {str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent == PACKAGE}
    assert listed == actual, (
        f"missing from docs/architecture.md: {sorted(actual - listed)}; gone: {sorted(listed - actual)}"
    )


def test_no_folder_holds_more_than_twelve_modules() -> None:
    """A folder of the package holds at most 12 modules (its __init__.py aside): a larger one splits into a
    subpackage with one job (as memory/meta/ and memory/measured/)."""
    folders: dict[str, int] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            folder = str(path.parent.relative_to(ROOT))
            folders[folder] = folders.get(folder, 0) + 1
    assert folders["grpo_lite/memory"] >= 10  # counted where the modules are
    assert {folder: n for folder, n in folders.items() if n > 12} == {}
