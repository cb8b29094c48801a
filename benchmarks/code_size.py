"""The package's size and shape at a git revision: what a maintainer has to hold in their head.

Prints, for each revision given (default: the working tree), the lines of the package and of its core (all but
the optional parts: the simulation, the export, the demo), the number of modules, imports inside functions
(of grpo_lite modules and of other packages), the ten longest functions, and the length of ``train()``'s body.

    python benchmarks/code_size.py                  # the working tree
    python benchmarks/code_size.py 0c35794 HEAD     # two revisions side by side (read with git show)
"""

from __future__ import annotations

import argparse
import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = ("grpo_lite/simulation/", "grpo_lite/export/", "grpo_lite/demo/", "grpo_lite/demo.py")


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


def measure(files: dict[str, str]) -> dict[str, object]:
    lines = {name: len(text.splitlines()) for name, text in files.items()}
    inside = {"grpo_lite": 0, "other": 0}
    functions: list[tuple[int, str]] = []
    train_body = None
    for name, text in files.items():
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            functions.append((length, f"{name}:{node.lineno} {node.name}"))
            if node.name == "train" and name == "grpo_lite/training/trainer.py":
                first = node.body[1] if ast.get_docstring(node) else node.body[0]
                train_body = (node.end_lineno or 0) - first.lineno + 1
            for sub in ast.walk(node):
                if isinstance(sub, ast.ImportFrom) and (sub.module or "").startswith("grpo_lite"):
                    inside["grpo_lite"] += 1
                elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                    inside["other"] += 1
    optional = sum(n for name, n in lines.items() if name.startswith(OPTIONAL))
    return {
        "package lines": sum(lines.values()),
        "core lines": sum(lines.values()) - optional,
        "modules": len(lines),
        "imports inside functions (grpo_lite / other)": f"{inside['grpo_lite']} / {inside['other']}",
        "train() body lines (after its docstring)": train_body,
        "ten longest functions": sorted(functions, reverse=True)[:10],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revisions", nargs="*", help="git revisions (default: the working tree)")
    args = parser.parse_args()
    for revision in args.revisions or [None]:
        print(f"## {revision or 'working tree'}")
        for key, value in measure(sources(revision)).items():
            if isinstance(value, list):
                print(f"{key}:")
                for length, where in value:
                    print(f"  {length:4d}  {where}")
            else:
                print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
