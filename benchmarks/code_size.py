"""The package's size and shape at a git revision: what a maintainer has to hold in their head.

Prints, for each revision given (default: the working tree), two counts: the lines, and the code lines (not blank,
not comment-only, not docstrings). Both for the package, its core (all but the optional parts: the simulation, the
export, the demo) and each folder of the package with its number of modules; then the imports inside functions
(of grpo_lite modules and of other packages), the five longest functions in code lines (of the body, below the signature), and the length of
``train()``'s body.

    python benchmarks/code_size.py                  # the working tree
    python benchmarks/code_size.py 0c35794 HEAD     # two revisions side by side (read with git show)
"""

from __future__ import annotations

import argparse
import ast
import io
import subprocess
import tokenize
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = ("grpo_lite/simulation/", "grpo_lite/export/", "grpo_lite/demo/", "grpo_lite/demo.py")
NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
    tokenize.ENCODING,
}
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def sources(revision: str | None) -> dict[str, str]:
    """Every ``grpo_lite/**/*.py`` file's text at ``revision`` (None: the working tree)."""
    if revision is None:
        return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in sorted(ROOT.glob("grpo_lite/**/*.py"))}
    names = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", revision, "grpo_lite"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return {
        n: subprocess.run(
            ["git", "show", f"{revision}:{n}"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        for n in names
        if n.endswith(".py")
    }


def code_lines(text: str, tree: ast.Module) -> set[int]:
    """The numbers of the lines that hold code: a token other than a comment, and not inside a docstring."""
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in NOT_CODE:
            lines.update(range(token.start[0], token.end[0] + 1))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, *FUNCTIONS)) and ast.get_docstring(node, clean=False):
            docstring = node.body[0]
            lines.difference_update(range(docstring.lineno, (docstring.end_lineno or docstring.lineno) + 1))
    return lines


def folder(name: str) -> str:
    """``grpo_lite/memory/meta/block.py`` -> ``memory/meta``; a top-level module -> ``(top level)``."""
    parent = str(Path(name).parent.relative_to("grpo_lite"))
    return "(top level)" if parent == "." else parent


def measure(files: dict[str, str]) -> dict[str, object]:
    lines: dict[str, tuple[int, int]] = {}
    inside = {"grpo_lite": 0, "other": 0}
    functions: list[tuple[int, int, str]] = []
    train_body = None
    for name, text in files.items():
        tree = ast.parse(text)
        code = code_lines(text, tree)
        lines[name] = (len(text.splitlines()), len(code))
        for node in ast.walk(tree):
            if not isinstance(node, FUNCTIONS):
                continue
            span = range(node.lineno, (node.end_lineno or node.lineno) + 1)
            body = range(node.body[0].lineno, span.stop)  # its code lines: the body's, not the signature's
            where = f"{name.removeprefix('grpo_lite/').removesuffix('.py')}.{node.name}"
            functions.append((len(code.intersection(body)), len(span), f"{where} (line {node.lineno})"))
            if node.name == "train" and name == "grpo_lite/training/pipeline.py":
                first = node.body[1] if ast.get_docstring(node) else node.body[0]
                train_body = (node.end_lineno or 0) - first.lineno + 1
            for sub in ast.walk(node):
                if isinstance(sub, ast.ImportFrom) and (sub.module or "").startswith("grpo_lite"):
                    inside["grpo_lite"] += 1
                elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                    inside["other"] += 1
    folders: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for name, (total, code) in lines.items():
        counts = folders[folder(name)]
        counts[0] += 0 if name.endswith("__init__.py") else 1
        counts[1] += total
        counts[2] += code
    core = [n for name, n in lines.items() if not name.startswith(OPTIONAL)]
    return {
        "package lines / code lines": both(lines.values()),
        "core lines / code lines": both(core),
        "modules": len(lines),
        "each folder: modules (not counting __init__), lines / code lines": [
            (f"{n:4d}  {both([(t, c)]):>15}", name) for name, (n, t, c) in sorted(folders.items())
        ],
        "imports inside functions (grpo_lite / other)": f"{inside['grpo_lite']} / {inside['other']}",
        "train() body lines (after its docstring)": train_body,
        "five longest functions: code lines of the body (lines with the signature)": [
            (f"{code:4d} ({total:4d})", where) for code, total, where in sorted(functions, reverse=True)[:5]
        ],
    }


def both(counts: Iterable[tuple[int, int]]) -> str:
    """``[(lines, code lines), ...]`` -> ``"21,317 / 14,675"``: the sums of each."""
    pairs = list(counts)
    return f"{sum(p[0] for p in pairs):,} / {sum(p[1] for p in pairs):,}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revisions", nargs="*", help="git revisions (default: the working tree)")
    args = parser.parse_args()
    for revision in args.revisions or [None]:
        print(f"## {revision or 'working tree'}")
        for key, value in measure(sources(revision)).items():
            if isinstance(value, list):
                print(f"{key}:")
                for figures, where in value:
                    print(f"  {figures}  {where}")
            else:
                print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
