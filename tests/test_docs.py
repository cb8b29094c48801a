"""The docs stay true: rendered tables match the code, code blocks run, links resolve.

Conventions in README.md and docs/*.md:

- Every ```python block is executed (in a fresh namespace, in a temporary folder); a block whose first
  line starts with ``>>>`` is a doctest and its printed output is compared too.
- A block that cannot run here (it needs a GPU, the hub, a download or a user's file) is marked by an
  HTML comment on the line before its fence: ``<!-- not-run: needs a GPU -->``. The reason is required.
- In ```bash blocks, the cheap ``grpo-lite`` commands (``plan``, ``presets``, ``--version``, ``--help``)
  are run and must exit 0; training commands are not run here (the examples and the CLI tests run them).
- docs/cli.md and the API table of docs/quickstart.md are rendered from the code between
  ``<!-- NAME:start -->`` / ``<!-- NAME:end -->`` markers. Refresh them with
  ``python tests/doc_sections.py --update``.
"""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest
from doc_sections import (
    DOCS,
    PAGES,
    RENDERED,
    ROOT,
    code_blocks,
    error_sites,
    replace_sections,
    shell_commands,
    subparsers,
)

CHEAP_COMMANDS = ("plan", "presets")
ALL_BLOCKS = [b for page in PAGES for b in code_blocks(page)]
PYTHON_BLOCKS = [b for b in ALL_BLOCKS if b.lang == "python"]
BASH_BLOCKS = [b for b in ALL_BLOCKS if b.lang in ("bash", "sh", "console")]


@pytest.mark.parametrize("page", sorted(RENDERED), ids=lambda p: p.name)
def test_rendered_sections_are_fresh(page):
    text = page.read_text(encoding="utf-8")
    fresh = replace_sections(text, RENDERED[page]())
    assert fresh == text, f"{page.name} is stale: python tests/doc_sections.py --update"


def test_cli_doc_lists_every_command_and_every_flag_of_help():
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    from grpo_lite.cli import COMMANDS, build_parser

    top_flags = set(re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", build_parser().format_usage()))
    assert top_flags >= {"-h", "--version"} and all(f"`{f}`" in text for f in top_flags)
    for name, parser in subparsers().items():
        assert f"## grpo-lite {name}" in text
        flags = set(re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", parser.format_usage()))
        missing = sorted(f for f in flags if f"`{f}`" not in text)
        assert not missing, f"grpo-lite {name}: flags of --help missing from docs/cli.md: {missing}"
    assert list(subparsers()) == list(COMMANDS)
    assert build_parser().prog == "grpo-lite"


def test_every_python_block_runs_or_says_why_not():
    assert PYTHON_BLOCKS, "no python blocks found"
    for block in PYTHON_BLOCKS:
        assert block.not_run is None or len(block.not_run) >= 8, f"{block.id}: give a real reason to not run"


@pytest.fixture
def one_thread():
    """A tiny model gains nothing from threads; on shared cores they slow it down a lot."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("block", [b for b in PYTHON_BLOCKS], ids=lambda b: b.id)
def test_python_block(block, tmp_path, monkeypatch, one_thread):
    if block.not_run:
        pytest.skip(f"not run: {block.not_run}")
    monkeypatch.chdir(tmp_path)
    if block.code.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(block.code, {}, block.id, str(block.page), block.line)
        runner = doctest.DocTestRunner(verbose=False, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        report: list[str] = []
        failed, _ = runner.run(test, out=report.append)
        assert failed == 0, "".join(report)
    else:
        exec(compile(block.code, block.id, "exec"), {"__name__": "__doc_block__"})  # noqa: S102


CLI_COMMANDS = [(b, c) for b in BASH_BLOCKS if not b.not_run for c in shell_commands(b)]


def _cheap(words: list[str]) -> bool:
    return words[1] in CHEAP_COMMANDS or any(w in ("--help", "-h", "--version") for w in words)


@pytest.mark.parametrize("words", [c for _, c in CLI_COMMANDS if _cheap(c)], ids=lambda c: " ".join(c)[:60])
def test_cheap_cli_commands_in_the_docs_exit_0(words, tmp_path, monkeypatch, capsys):
    from grpo_lite.cli import main

    monkeypatch.chdir(tmp_path)
    try:
        code = main(words[1:])
    except SystemExit as exc:  # --help and --version exit through argparse
        code = exc.code or 0
    assert code == 0, capsys.readouterr().err


@pytest.mark.parametrize("words", [c for _, c in CLI_COMMANDS if not _cheap(c)], ids=lambda c: " ".join(c)[:60])
def test_every_documented_cli_command_parses(words):
    from grpo_lite.cli import build_parser

    args = build_parser().parse_args(words[1:])  # an unknown flag or bad value exits 2 here
    assert args.command == words[1]


def test_the_docs_run_some_cli_commands():
    cheap = [c[1] for _, c in CLI_COMMANDS if _cheap(c)]
    assert {"plan", "presets", "--version"} <= set(cheap)


LINK = re.compile(r"(?<!\\)\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a page: lower case, punctuation dropped, spaces to dashes."""
    heads = re.findall(r"^#+\s+(.*)$", page.read_text(encoding="utf-8"), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert not broken, f"{page.name}: broken links {broken}"


def test_every_doc_page_is_reachable_from_the_readme():
    seen, todo = set(), [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in seen or not page.is_file():
            continue
        seen.add(page)
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            path = target.partition("#")[0]
            if path.endswith(".md") and not re.match(r"^[a-z]+:", path):
                todo.append((page.parent / path).resolve())
    unreached = sorted(p.name for p in DOCS.glob("*.md") if p.resolve() not in seen)
    assert not unreached, f"pages no link leads to from README.md: {unreached}"


@pytest.mark.parametrize(("site", "fragment"), error_sites(), ids=lambda v: v if ".py:" in v else "")
def test_troubleshooting_lists_every_error_the_library_raises(site, fragment):
    text = (DOCS / "troubleshooting.md").read_text(encoding="utf-8").replace("`", "").replace("\\|", "|")
    assert fragment in " ".join(text.split()), f"{site}: add this error and its fix to docs/troubleshooting.md"


def test_error_sites_are_found():
    sites = error_sites()
    assert len(sites) > 50 and any("hardware.py" in s for s, _ in sites)


# ---- the docs speak of the project only ---------------------------------------------------------------
# README, the doc pages, the changelog and every docstring and comment of the package, the benchmarks and
# the examples: nothing a user of the repository does not have, no link that leaves it.
OUTSIDE_FILES = re.compile(r"\.\./shared|shared/reference|/work/")
SPOKEN = [
    *PAGES,
    ROOT / "CHANGELOG.md",
    *(p for folder in ("grpo_lite", "benchmarks", "examples") for p in sorted((ROOT / folder).rglob("*.py"))),
]


def _links_leaving(path: Path, text: str) -> list[str]:
    """URLs anywhere, and Markdown links whose target resolves outside the repository."""
    found = re.findall(r"\b[a-z][a-z0-9+.-]*://[^\s)\]>`'\"]+", text)
    if path.suffix == ".md":
        for target in LINK.findall(text):
            local = target.partition("#")[0]
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or (
                local and not (path.parent / local).resolve().is_relative_to(ROOT)
            ):
                found.append(target)
    return sorted(set(found))


@pytest.mark.parametrize("path", SPOKEN, ids=lambda p: str(p.relative_to(ROOT)))
def test_speaks_of_the_project_only(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert not OUTSIDE_FILES.findall(text), f"{path.name} names files outside the repository"
    assert not _links_leaving(path, text), f"{path.name} links outside the repository: {_links_leaving(path, text)}"


def test_a_link_leaving_the_repository_is_caught(tmp_path: Path) -> None:
    page = ROOT / "docs" / "page.md"  # not written: the text is checked as if it were this page
    assert _links_leaving(page, "[a](https://example.org) [b](../../elsewhere.md) [c](index.md) [d](#x)") == [
        "../../elsewhere.md",
        "https://example.org",
    ]
    assert OUTSIDE_FILES.findall("see ../shared/reference/cpu-facts.md")
