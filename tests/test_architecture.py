"""The package tree: no import circles (lazy and function-level imports included), imports run down
the pipeline, and the module map in docs/index.md matches the tree.

Files are split when they grow a second job, not to meet a line count: there is no size cap here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "grpo_lite"
# the stages in pipeline order; a module may import its own stage and the stages before it
STAGES = (
    "errors",
    "data",
    "rewards",
    "memory",
    "planning",
    "scale",
    "precision",
    "recipe",
    "export",
    "training",
    "simulation",
    "evaluation",
    "demo",
    "cli",
)
BASE = {
    "grpo_lite",
    "grpo_lite._version",
    "grpo_lite.errors",
    "grpo_lite.tiny",
    "grpo_lite.__main__",
    "grpo_lite.files",
    "grpo_lite.run_record",  # standard library only: the one reader of run.json, for the training and the export
    "grpo_lite.cache",  # standard library only, used by every stage
    "grpo_lite.training.run.lock",
}  # standard library and filelock only: a run's export holds the run's lock too
# The one import that runs back up, on purpose, inside the one function that traces (never at import time):
# the planner's traced block terms run a decoder block through the simulation's model build and GPU semantics.
# Moving the tracer below planning would move the simulation's build (the trainer's own model) down with it.
UPWARD = {("grpo_lite.memory.blocks", "grpo_lite.simulation.block")}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The grpo_lite module an import names: itself, or its parent when the last part is an attribute."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, known: dict[str, Path]) -> set[str]:
    """Every grpo_lite module that ``module`` imports anywhere: top level, in functions, under
    TYPE_CHECKING, or by name in a string (importlib.import_module / lazy tables)."""
    tree = ast.parse(known[module].read_text(encoding="utf-8"))
    package = module if known[module].name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"grpo_lite(\.\w+)+", node.value):
                names = [node.value]
        for name in names:
            target = _resolve(name, known)
            if target and target != module:
                found.add(target)
    return found


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
        for w in graph[v]:
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


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    graph = {m: imports_of(m, known) for m in known}
    # the root package's lazy table names every public module; those edges are the API, not a layer
    graph["grpo_lite"] = set()
    for m, deps in graph.items():  # importing a submodule runs its package's __init__ first: not a dependency
        graph[m] = {d for d in deps if not m.startswith(d + ".") and (m, d) not in UPWARD}
    return graph


def test_no_import_circles() -> None:
    cycles = _cycles(import_graph())
    assert not cycles, "import circles: " + "; ".join(" <-> ".join(c) for c in cycles)


def _stage(module: str) -> int:
    return STAGES.index(module.split(".")[1])


def test_arrows_run_down_the_pipeline() -> None:
    """No module imports a later stage (data never imports training, planning never imports cli)."""
    back = [
        f"{m} -> {d}"
        for m, deps in import_graph().items()
        if m not in BASE
        for d in deps
        if d not in BASE and _stage(d) > _stage(m)
    ]
    assert not back, "imports that run back up the pipeline: " + "; ".join(sorted(back))


def test_the_circle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_the_upward_import_is_the_lazy_one_it_names() -> None:
    """The edge UPWARD excuses is imported inside a function of its module, and nowhere at the top level."""
    for module, target in UPWARD:
        tree = ast.parse(_modules()[module].read_text(encoding="utf-8"))
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert not any(target in ast.unparse(n) for n in top)
        assert target in imports_of(module, _modules())


def test_lazy_and_function_level_imports_count() -> None:
    graph = import_graph()
    assert (
        "grpo_lite.training.trainer" in graph["grpo_lite.training.run.attempts"]
        or "grpo_lite.training.run.attempts" in graph["grpo_lite.training.trainer"]
    )
    assert "grpo_lite.planning.search" in graph["grpo_lite.planning.choose"]


def test_module_map_matches_the_tree() -> None:
    """docs/index.md lists every module of the package, and no module that is gone."""
    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    block = text.split("## How it flows", 1)[1].split("```", 2)[1]
    listed = {p for p in re.findall(r"(grpo_lite(?:/\w+)*/\w+\.py)", block)}
    actual = {str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent == PACKAGE}
    assert listed == actual, f"missing from docs/index.md: {sorted(actual - listed)}; gone: {sorted(listed - actual)}"
