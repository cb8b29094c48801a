"""Doc helpers for tests/test_docs.py: Markdown code blocks, and the doc sections rendered from the code.

- :func:`code_blocks` finds the fenced blocks of a page and the ``<!-- not-run: REASON -->`` marker
  above each; :func:`shell_commands` the ``grpo-lite`` commands of a shell block.
- :func:`cli_sections` renders docs/cli.md's tables from ``grpo_lite.cli.build_parser()``;
  :func:`api_sections` the public API table of docs/quickstart.md from ``grpo_lite.__all__``.
- :func:`error_sites` lists every error the package builds, with the literal part of its message.

Refresh the rendered sections with ``python tests/doc_sections.py --update``.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted([ROOT / "README.md", *DOCS.glob("*.md")])
NOT_RUN = re.compile(r"<!--\s*not-run:\s*(.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    """A fenced code block of a Markdown page."""

    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    not_run: str | None  # the reason given in a not-run marker, or None

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def code_blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page`` with its language and the not-run marker above it, if any."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        fence = lines[i].strip()
        if not fence.startswith("```"):
            i += 1
            continue
        start, lang = i, fence[3:].split()[0] if fence[3:].strip() else ""
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        before = next((text for text in reversed(lines[:start]) if text.strip()), "")
        marker = NOT_RUN.search(before)
        blocks.append(Block(page, start + 1, lang, "\n".join(body) + "\n", marker.group(1) if marker else None))
        i += 1
    return blocks


def shell_commands(block: Block) -> list[list[str]]:
    """The ``grpo-lite`` commands of a shell block (continuations joined, ``&&`` chains split, ``VAR=x`` dropped)."""
    out = []
    for line in block.code.replace("\\\n", " ").splitlines():
        command: list[str] = []
        for word in [*shlex.split(line, comments=True), "&&"]:
            if word in ("&&", "||", ";", "&", "|"):
                while command and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", command[0]):
                    command.pop(0)
                if command and command[0] == "grpo-lite":
                    out.append(command)
                command = []
            else:
                command.append(word)
    return out


def _cell(text: object) -> str:
    """Text safe in a Markdown table cell: no pipes, no newlines, no ``<word>`` read as an HTML tag."""
    return str(text).replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def _value_of(action: argparse.Action) -> str:
    if action.choices:
        return " \\| ".join(f"`{c}`" for c in action.choices)
    if action.nargs == 0:
        return "-"
    return f"`{action.metavar or action.dest.upper()}`"


def _default_of(action: argparse.Action) -> str:
    if action.default is None or action.default is False or action.default == argparse.SUPPRESS or action.nargs == 0:
        return "-"
    return f"`{action.default}`"


def _subcommand_action(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def subparsers() -> dict[str, argparse.ArgumentParser]:
    """``grpo-lite``'s subcommand name -> its parser, in ``--help`` order."""
    from grpo_lite.cli import build_parser

    return dict(_subcommand_action(build_parser()).choices)


def _command_section(name: str, parser: argparse.ArgumentParser) -> str:
    actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS]
    positionals = [a for a in actions if not a.option_strings]
    synopsis = " ".join(
        [
            f"grpo-lite {name}",
            *(
                f"{a.metavar or a.dest} [{a.metavar or a.dest} ...]" if a.nargs == "+" else a.metavar or a.dest
                for a in positionals
            ),
            "[options]",
        ]
    )
    rows = ["| argument | value | default | what it does |", "|---|---|---|---|"]
    for a in actions:
        flag = ", ".join(f"`{s}`" for s in a.option_strings) or f"`{a.metavar or a.dest}`"
        value = _value_of(a) if a.option_strings else "-"
        rows.append(f"| {flag} | {value} | {_default_of(a)} | {_cell(a.help)} |")
    return f"`{synopsis}`\n\n{_cell(parser.description)}\n\n" + "\n".join(rows)


def cli_sections() -> dict[str, str]:
    """Marker name -> Markdown rendered from ``grpo_lite.cli.build_parser()``."""
    from grpo_lite.cli import COMMANDS, build_parser

    top = build_parser()
    helps = {a.dest: a.help for a in _subcommand_action(top)._choices_actions}
    rows = ["| command | what it does |", "|---|---|"]
    rows += [f"| [`grpo-lite {n}`](#grpo-lite-{n}) | {_cell(helps[n])} |" for n in COMMANDS]
    rows += ["", "| option of `grpo-lite` itself | what it does |", "|---|---|"]
    for action in (a for a in top._actions if a.option_strings):
        rows.append(f"| {', '.join(f'`{o}`' for o in action.option_strings)} | {_cell(action.help)} |")
    sections = {"cli-commands": "\n".join(rows)}
    for name, parser in subparsers().items():
        sections[f"cli-{name}"] = _command_section(name, parser)
    return sections


# Public names whose value has no docstring of its own (constants).
CONSTANTS = {"LADDER": "the presets plan() walks, best quality first ([presets.md](presets.md))"}


def _markdown(doc_line: str) -> str:
    """A docstring line in Markdown: Sphinx roles and double backticks become plain code spans."""
    return re.sub(r":\w+:`~?([^`]+)`", r"`\1`", doc_line).replace("``", "`")


def _kind_and_summary(name: str, value: object) -> tuple[str, str]:
    doc = (inspect.getdoc(value) or "").strip().splitlines()
    first = _markdown(doc[0]) if doc else ""
    if inspect.ismodule(value):
        return "module", first
    if inspect.isclass(value):
        return ("exception" if issubclass(value, BaseException) else "class"), first
    if callable(value):
        return "function", first
    if isinstance(value, tuple):
        return f"tuple of {len(value)} {type(value[0]).__name__}", CONSTANTS[name]
    return type(value).__name__, CONSTANTS[name]


def api_sections() -> dict[str, str]:
    """The public API table (``grpo_lite.__all__``), one row per name."""
    import grpo_lite

    rows = ["| name | kind | what it is |", "|---|---|---|"]
    for name in grpo_lite.__all__:
        if name == "__version__":
            rows.append("| `__version__` | str | the installed version, also `grpo-lite --version` |")
            continue
        kind, summary = _kind_and_summary(name, getattr(grpo_lite, name))
        rows.append(f"| `{name}` | {kind} | {_cell(summary)} |")
    return {"api-table": "\n".join(rows)}


def layers_sections() -> dict[str, str]:
    """The layers of the import contract in pyproject.toml, highest first, with their comments."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    layers = next(c for c in contracts["contracts"] if c["type"] == "layers")["layers"]
    lines = (ROOT / "pyproject.toml").read_text(encoding="utf-8").splitlines()
    notes = {}
    for line in lines:
        text, _, note = line.partition("#")
        name = text.strip().strip('",')
        if name in layers and note:
            notes[name] = note.strip()
    rows = [
        f"| {i} | {', '.join(f'`{part}`' for part in name.split(' | '))} | {notes.get(name, '')} |"
        for i, name in enumerate(layers, 1)
    ]
    return {
        "layers": "| # | layer (siblings never import each other) | what it holds |\n| --- | --- | --- |\n"
        + "\n".join(rows)
    }


RENDERED = {
    DOCS / "cli.md": cli_sections,
    DOCS / "quickstart.md": api_sections,
    DOCS / "architecture.md": layers_sections,
}


def replace_sections(text: str, sections: dict[str, str]) -> str:
    """Put each rendered section between its markers; a missing marker pair is an error."""
    for name, body in sections.items():
        start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
        if start not in text or end not in text:
            raise ValueError(f"markers {start} ... {end} are missing")
        head, rest = text.split(start, 1)
        text = f"{head}{start}\n{body}\n{end}{rest.split(end, 1)[1]}"
    return text


ERRORS = (
    "ConfigError",
    "DataError",
    "ModelError",
    "DoesNotFitError",
    "ExportError",
    "GrpoLiteError",
    "OutputDirError",
    "RewardError",
)


def _constant_parts(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _constant_parts(node.left) + _constant_parts(node.right)
    return []


def error_sites() -> list[tuple[str, str]]:
    """(``file:line``, the longest literal piece of the message) for each error the package builds."""
    sites = []
    for path in sorted((ROOT / "grpo_lite").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ERRORS and node.args:
                pieces = [" ".join(p.split()).strip(" :;,.") for p in _constant_parts(node.args[0])]
                if any(pieces):
                    sites.append((f"{path.relative_to(ROOT)}:{node.lineno}", max(pieces, key=len)))
    return sites


def main() -> int:
    parser = argparse.ArgumentParser(description="Refresh the doc sections rendered from the code.")
    parser.add_argument("--update", action="store_true", help="rewrite docs/cli.md and docs/quickstart.md")
    args = parser.parse_args()
    stale = []
    for page, render in RENDERED.items():
        text = page.read_text(encoding="utf-8")
        new = replace_sections(text, render())
        if new != text:
            stale.append(page.name)
            if args.update:
                page.write_text(new, encoding="utf-8")
    print(("updated: " if args.update else "stale: ") + (", ".join(stale) or "nothing"))
    return 1 if stale and not args.update else 0


if __name__ == "__main__":
    raise SystemExit(main())
