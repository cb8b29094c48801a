"""Datasets for training and evaluation: GSM8K, MATH-500, synthetic problems, or the user's own rows.

Every loader returns a ``datasets.Dataset`` with ``prompt``, ``question`` and ``answer`` (the gold in its kind's
form: a number in canonical form for GSM8K) columns, and ``answer_kind`` when the answers are not numbers
(:mod:`grpo_lite.data.answer_kinds`), or, for a task in TRL's shape (a ``prompt`` column and no answer column), the
rows as they are; a bad row is reported where it is (docs/internals.md, docs/datasets.md, docs/tasks.md).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from grpo_lite.data.answer_kinds import check_answer_kind, choose_answer_kind, column_kind, gold_error, read_gold
from grpo_lite.data.answers import gsm8k_gold
from grpo_lite.data.prompts import PromptStyle, build_messages, style_for_kind
from grpo_lite.data.synthetic import LEVELS, synthetic_problems
from grpo_lite.defaults import TRAINER
from grpo_lite.errors import ConfigError, DataError
from grpo_lite.settings import AnswerKind

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset


DatasetName = Literal["gsm8k", "synthetic", "math"]
DataSplit = Literal["train", "test"]
SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")  # the file types read, each by datasets' own builder
GSM8K_HUB_ID = "openai/gsm8k"
GSM8K_DIR_ENV = "GRPO_LITE_GSM8K_DIR"  # a folder with train.jsonl/test.jsonl, read instead of the hub
MATH_HUB_ID = "HuggingFaceH4/MATH-500"  # one split, test: 500 competition problems with LaTeX answers
MATH_DIR_ENV = "GRPO_LITE_MATH_DIR"  # a folder with test.jsonl (and train.jsonl, if any), read instead of the hub
_SPLITS: tuple[DataSplit, ...] = ("train", "test")
_SYNTHETIC_DEFAULT_N = TRAINER.synthetic_n


def _check_split(split: str) -> None:
    if split not in _SPLITS:
        raise ConfigError(f"unknown split {split!r}; valid splits: {', '.join(map(repr, _SPLITS))}")


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"limit must be a positive number of rows or None (all rows), got {limit!r}")


@dataclass(frozen=True)
class Row:
    """One row of the user's data and where a person finds it (``"path, line 3"``, ``"path, row 3"``)."""

    where: str
    data: dict[str, Any]


# ----------------------------------------------------------------------------- files
def _why_unreadable(path: Path, exc: Exception) -> str:
    """What is wrong with a file ``datasets`` refused; for JSON, the first line Python's parser refuses."""
    if isinstance(exc, UnicodeDecodeError):
        return f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
    if path.suffix.lower() not in (".json", ".jsonl"):
        return f"{path}: cannot read {path.suffix.lower()[1:]} ({type(exc).__name__}: {exc})"
    text = path.read_text(encoding="utf-8-sig")
    try:
        json.loads(text)
    except json.JSONDecodeError as whole:
        for number, line in enumerate(text.splitlines() if text.lstrip().startswith("{") else [], 1):
            try:
                if line.strip() and not isinstance(json.loads(line), dict):
                    return f"{path}, line {number}: expected a JSON object with named fields: {line.strip()[:80]!r}"
            except json.JSONDecodeError as bad:
                return f"{path}, line {number}: not valid JSON ({bad.msg}): {line.strip()[:80]!r}"
        return f"{path}: not valid JSON ({whole.msg} at line {whole.lineno}, column {whole.colno})"
    return f"{path}: expected a list of objects like [{{'question': ..., 'answer': ...}}] or JSON lines"


def _read_file(path: Path) -> list[Row]:
    """All rows of one file, read by ``datasets``' own builder, each with its location; DataError when unreadable."""
    suffix = path.suffix.lower()
    if not path.exists():
        raise DataError(f"{path}: file not found; pass an existing {'/'.join(SUFFIXES)} file or a train/test folder")
    if suffix not in SUFFIXES or not path.is_file():
        raise DataError(f"{path}: unsupported file type {suffix or '(none)'!r}; use one of {', '.join(SUFFIXES)}")
    lines = path.read_bytes().splitlines() if suffix == ".jsonl" else []
    if lines and lines[0].lstrip(b"\xef\xbb\xbf \t").startswith(b"["):  # datasets would read a JSON document
        raise DataError(f"{path}, line 1: expected a JSON object with named fields: {lines[0].strip()[:80]!r}")
    from datasets import load_dataset as hf_load_dataset  # heavy: datasets

    builders_log = logging.getLogger("datasets.packaged_modules")
    level = builders_log.level
    builders_log.setLevel(logging.CRITICAL)  # a builder logs a bad file's error before raising it: said once below
    try:  # streaming reads the file in place: nothing is copied into the datasets cache
        builder = "json" if suffix.startswith(".json") else suffix[1:]
        records = list(hf_load_dataset(builder, data_files=str(path), split="train", streaming=True))
    except Exception as exc:  # each builder raises its own types for a bad file; an empty one, StopIteration
        if path.read_bytes().strip():
            raise DataError(_why_unreadable(path, exc)) from None
        records = []
    finally:
        builders_log.setLevel(level)
    if not records:
        what = "has no rows" if path.read_bytes().strip() else "is empty"
        raise DataError(f"{path}: the file {what}; it needs one row per problem with 'question' and 'answer'")
    values = list(records[0].values())
    if suffix == ".json" and len(records) == 1 and all(isinstance(v, list) for v in values):
        if len(values) == 1 and all(isinstance(r, dict) for r in values[0]):
            records = values[0]  # {"data": [{...}, ...]}
        elif len({len(v) for v in values}) == 1:
            records = [dict(zip(records[0], row, strict=True)) for row in zip(*values, strict=True)]  # columns
    if suffix == ".jsonl":  # the 1-based line of each row: datasets skips blank lines
        numbers = [n for n, line in enumerate(lines, 1) if line.strip()]
        return [Row(f"{path}, line {n}", r) for n, r in zip(numbers, records, strict=False)]
    return [Row(f"{path}, row {i}", r) for i, r in enumerate(records, 1)]


def _split_files(folder: Path, split: DataSplit) -> list[Path]:
    """The files holding ``split`` in a folder: ``train.jsonl``..., else ``*train*.<ext>`` (also in ``main/``)."""
    for suffix in SUFFIXES:
        if (folder / f"{split}{suffix}").is_file():
            return [folder / f"{split}{suffix}"]
    for where in (folder, folder / "main"):
        found = sorted(p for p in where.glob(f"*{split}*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        if found:
            return found
    present = ", ".join(sorted(p.name for p in folder.iterdir())[:10]) or "nothing"
    raise DataError(
        f"{folder}: no {split} file found (looked for {split}.jsonl, {split}.json, {split}.parquet, {split}.csv "
        f"or *{split}*.<ext>, also in main/); the folder holds: {present}"
    )


def _read_source(source: str | os.PathLike[str], split: DataSplit) -> list[Row]:
    """The rows of a file (read whole, whatever ``split``), or of a folder's ``split`` file(s)."""
    path = Path(source).expanduser()
    files = _split_files(path, split) if path.is_dir() else [path]
    return [row for file in files for row in _read_file(file)]


# ----------------------------------------------------------------------------- the hub
def _hub_gsm8k(split: DataSplit) -> list[Row]:
    try:
        from datasets import load_dataset as hf_load_dataset  # heavy: datasets

        hub = hf_load_dataset(GSM8K_HUB_ID, "main", split=split)
    except Exception as exc:  # offline, not cached, hub errors: all mean "not available here"
        raise DataError(
            f"cannot load {GSM8K_HUB_ID} ({split}) from the Hugging Face hub or its local cache "
            f"({type(exc).__name__}: {str(exc)[:200]}); pass a local folder or file with GSM8K rows "
            f"(train.jsonl/test.jsonl) as the dataset (--dataset PATH; Python: dataset=PATH, or load_gsm8k(source=PATH)), "
            f"set {GSM8K_DIR_ENV}, or use the offline 'synthetic' dataset"
        ) from exc
    return [Row(f"{GSM8K_HUB_ID} {split}, row {i}", r) for i, r in enumerate(hub, 1)]


def _hub_math() -> list[Row]:
    try:
        from datasets import load_dataset as hf_load_dataset  # heavy: datasets

        hub = hf_load_dataset(MATH_HUB_ID, split="test")
    except Exception as exc:  # offline, not cached, hub errors: all mean "not available here"
        raise DataError(
            f"cannot load {MATH_HUB_ID} (test) from the Hugging Face hub or its local cache "
            f"({type(exc).__name__}: {str(exc)[:200]}); pass a local folder or file with its rows (test.jsonl with "
            f"'problem' and 'answer') as the dataset (--dataset PATH; Python: load_math(source=PATH)), or set "
            f"{MATH_DIR_ENV}"
        ) from exc
    return [Row(f"{MATH_HUB_ID} test, row {i}", r) for i, r in enumerate(hub, 1)]


def is_hub_id(name: str) -> bool:
    """Whether ``name`` is written as a hub dataset id, ``owner/name`` (not a path: no file suffix, no ``.``, ``~`` or
    ``/`` in front, one ``/``).

    >>> is_hub_id("trl-lib/DeepMath-103K"), is_hub_id("data/train.jsonl"), is_hub_id("./data/x"), is_hub_id("a/b/c")
    (True, False, False, False)
    """
    owner, sep, rest = name.partition("/")
    return (
        bool(sep and owner and rest)
        and "/" not in rest
        and not name.startswith((".", "~"))
        and (Path(rest).suffix.lower() not in SUFFIXES)
    )


def _hub_rows(hub_id: str, split: DataSplit) -> list[Row]:
    """A hub dataset's ``split``, as ``trl grpo --dataset_name`` loads it (``datasets.load_dataset``)."""
    try:
        from datasets import load_dataset as hf_load_dataset  # heavy: datasets

        hub = hf_load_dataset(hub_id, split=split)
    except Exception as exc:  # offline, not cached, hub errors: all mean "not available here"
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
        why = "HF_HUB_OFFLINE is set" if offline else f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
        raise DataError(
            f"dataset={hub_id!r} is a Hugging Face hub id and loading it needs the hub ({why}); pass a local copy: "
            f"save it where the hub is reachable (datasets.load_dataset({hub_id!r}, split={split!r})"
            ".to_json('train.jsonl')) and pass dataset='train.jsonl', or pass the datasets.Dataset itself"
        ) from None
    return [Row(f"{hub_id} {split}, row {i}", r) for i, r in enumerate(hub, 1)]


# ----------------------------------------------------------------------------- rows -> dataset
def _is_messages(prompt: Any) -> bool:
    if not isinstance(prompt, list) or not prompt:
        return False
    return all(isinstance(m, dict) and {"role", "content"} <= m.keys() for m in prompt)


def _question_of(value: Any) -> str | None:
    """The question text of a question/prompt cell: the text, or the last user message."""
    if _is_messages(value):
        value = next((m["content"] for m in reversed(value) if m["role"] == "user"), None)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _rows_to_dataset(out: list[dict[str, Any]], source: str) -> Dataset:
    from datasets import Dataset  # heavy: datasets

    try:
        return Dataset.from_list(out)
    except Exception as exc:  # pyarrow cannot unify a column's types across rows
        raise DataError(f"{source}: a column mixes types across rows ({type(exc).__name__}: {exc})") from None


def _task_dataset(rows: list[Row], source: str, *, skip_invalid: bool, limit: int | None) -> Dataset:
    """A task in TRL's shape: each row's ``prompt`` (text or messages) checked, every column kept as it is (the
    rewards read them); no gold is read, nothing is normalized."""
    out: list[dict[str, Any]] = []
    skipped: list[str] = []
    for row in rows:
        if limit is not None and len(out) == limit:
            break
        prompt = row.data.get("prompt")
        if _is_messages(prompt) or (isinstance(prompt, str) and prompt.strip()):
            out.append(row.data)
        elif skip_invalid:
            skipped.append(row.where)
        else:
            raise DataError(
                f"{row.where}: 'prompt' must be text or a list of {{'role', 'content'}} messages: {prompt!r:.80}; "
                "fix or remove the row, or pass skip_invalid=True (--skip-invalid) to skip it"
            )
    if skipped:
        warnings.warn(
            f"{source}: skipped {len(skipped)} row(s) without a usable prompt (first: {skipped[0]})", stacklevel=4
        )
    if not out:
        raise DataError(f"{source}: no usable rows (every row lacked a usable prompt)")
    return _rows_to_dataset(out, source)


_BUILT_COLUMNS = ("prompt", "question", "answer", "answer_kind")  # a row's own columns, built here, never copied


def has_gold(dataset: Dataset) -> bool:
    """Whether a loaded dataset's rows carry a gold ``answer`` (the question/answer form); a task in TRL's shape (a
    ``prompt`` column and the user's rewards) has none, and its prompts reach TRL as they are."""
    return "answer" in dataset.column_names


def _to_dataset(
    rows: list[Row],
    source: str,
    *,
    question_column: str,
    answer_column: str,
    kind: AnswerKind | None,
    style: PromptStyle | None,
    skip_invalid: bool,
    limit: int | None,
    keep_columns: bool,
    column_hint: str,
    gold: Callable[[Any], str | None] | None = None,
) -> Dataset:
    """Validate rows, read the golds in their kind (None: chosen from the golds), build prompts; a DataError names
    the bad row (``column_hint``: what to change for a missing column; ``keep_columns``: keep the rows' other
    columns, and take rows with a ``prompt`` and no answer column as a task in TRL's shape; ``gold``: how a gold is
    read, instead of the kind's reading)."""

    columns = list(dict.fromkeys(key for row in rows for key in row.data))
    if question_column not in columns and not (question_column == "question" and "prompt" in columns):
        raise DataError(f"{source}: no {question_column!r} column (columns: {', '.join(columns)}); {column_hint}")
    if answer_column not in columns and keep_columns and "prompt" in columns:
        return _task_dataset(rows, source, skip_invalid=skip_invalid, limit=limit)
    if answer_column not in columns:
        raise DataError(f"{source}: no {answer_column!r} column (columns: {', '.join(columns)}); {column_hint}")
    asked = question_column if question_column in columns else "prompt"
    named = [(row.where, row.data["answer_kind"]) for row in rows if row.data.get("answer_kind") is not None]
    kind = column_kind(named, kind) or choose_answer_kind(
        [(row.where, row.data.get(answer_column)) for row in rows], source
    )
    gold = gold or functools.partial(read_gold, kind=kind)
    tagged = {} if kind == "number" else {"answer_kind": kind}  # the correctness reward reads it; numbers: none
    style = style_for_kind(style, kind)  # the default system prompt asks for the kind's answer
    out: list[dict[str, Any]] = []
    skipped: list[str] = []
    for row in rows:
        if limit is not None and len(out) == limit:
            break
        question, answer = _question_of(row.data.get(asked)), gold(row.data.get(answer_column))
        prompt = row.data.get("prompt")
        if question is None:
            problem = f"{asked!r} is missing, empty or not text: {row.data.get(asked)!r:.80}"
        elif answer is None:
            problem = gold_error(kind, answer_column, row.data.get(answer_column))
        elif "prompt" in row.data and not (_is_messages(prompt) or (isinstance(prompt, str) and prompt.strip())):
            problem = f"'prompt' must be text or a list of {{'role', 'content'}} messages: {prompt!r:.80}"
        else:
            built = prompt if "prompt" in row.data else build_messages(question, style)
            extras = {k: v for k, v in row.data.items() if keep_columns and k not in _BUILT_COLUMNS}
            out.append({"prompt": built, "question": question, "answer": answer, **tagged, **extras})
            continue
        if not skip_invalid:
            raise DataError(
                f"{row.where}: {problem}; fix or remove the row, or pass skip_invalid=True (--skip-invalid) to skip it"
            )
        skipped.append(f"{row.where}: {problem}")
    if skipped:
        message = f"{source}: skipped {len(skipped)} row(s) without a usable question or answer (first: {skipped[0]})"
        warnings.warn(message, stacklevel=3)
    if not out:
        raise DataError(f"{source}: no usable rows (every row lacked a usable question or answer)")
    return _rows_to_dataset(out, source)


def load_gsm8k(
    split: DataSplit = "train",
    source: str | os.PathLike[str] | None = None,
    *,
    style: PromptStyle | None = None,
    skip_invalid: bool = False,
    limit: int | None = None,
) -> Dataset:
    """GSM8K with the gold number as ``answer``: the text after ``####``, without commas or ``$``.

    Args:
        split: ``"train"`` (7,473 rows) or ``"test"`` (1,319 rows).
        source: ``None``: the hub's ``openai/gsm8k`` (offline from the Hugging Face cache), or the folder in
            ``$GRPO_LITE_GSM8K_DIR``; a path: a file, or a folder with the split's file (docs/datasets.md).
        style: the prompt style of the ``prompt`` column. Default: ``PromptStyle()``.
        skip_invalid: skip rows without a gold number (one warning gives the count) instead of raising.
        limit: keep only the first ``limit`` usable rows.

    Returns:
        Columns ``prompt`` (conversational messages), ``question`` and ``answer``.

    Raises:
        DataError: the source is missing or unreadable, lacks ``question``/``answer``, or a row has no number
            after ``####`` (named by file and line).
        ConfigError: unknown split or a bad limit.
    """
    _check_split(split)
    _check_limit(limit)
    if source is None and os.environ.get(GSM8K_DIR_ENV):
        source = os.environ[GSM8K_DIR_ENV]
    rows = _hub_gsm8k(split) if source is None else _read_source(source, split)
    name = f"{GSM8K_HUB_ID} ({split})" if source is None else str(source)
    return _to_dataset(
        rows, name, question_column="question", answer_column="answer", kind="number", gold=gsm8k_gold,
        style=style, skip_invalid=skip_invalid, limit=limit, keep_columns=False,
        column_hint="GSM8K rows need 'question' and 'answer' (a worked solution ending in '#### <number>')",
    )  # fmt: skip


def load_math(
    split: DataSplit = "test",
    source: str | os.PathLike[str] | None = None,
    *,
    style: PromptStyle | None = None,
    skip_invalid: bool = False,
    limit: int | None = None,
) -> Dataset:
    """MATH-500: 500 competition problems whose ``answer`` is LaTeX (``\\frac{14}{3}``), compared as ``math``.

    Args:
        split: ``"test"``: the 500 problems. ``"train"``: a folder's train file when it has one; MATH-500 itself has
            only the test split, so ``"train"`` reads those same 500 rows (train on them to exercise a run, and
            evaluate elsewhere: there is no held-out part), with a warning.
        source: ``None``: the hub's ``HuggingFaceH4/MATH-500`` (offline from the Hugging Face cache), or the folder
            in ``$GRPO_LITE_MATH_DIR``; a path: a file, or a folder with ``test.jsonl`` (fields ``problem``,
            ``answer``).
        style: the prompt style of the ``prompt`` column. Default: ``PromptStyle()``.
        skip_invalid: skip rows whose answer math-verify cannot parse (one warning gives the count) instead of raising.
        limit: keep only the first ``limit`` usable rows.

    Returns:
        Columns ``prompt``, ``question`` (the problem), ``answer`` (the LaTeX answer, trimmed), ``answer_kind``.

    Raises:
        DataError: the source is missing or unreadable, lacks ``problem``/``answer``, or an answer does not parse.
        ConfigError: unknown split or a bad limit.
    """
    _check_split(split)
    _check_limit(limit)
    if source is None and os.environ.get(MATH_DIR_ENV):
        source = os.environ[MATH_DIR_ENV]
    path = None if source is None else Path(source).expanduser()
    own_train = path is not None and (not path.is_dir() or any(path.glob("*train*")))
    if split == "train" and not own_train:
        warnings.warn(f"{MATH_HUB_ID} has only a test split: training on its 500 problems", stacklevel=2)
    rows = _hub_math() if path is None else _read_source(path, split if own_train else "test")
    return _to_dataset(
        rows, f"{MATH_HUB_ID} (test)" if source is None else str(source), question_column="problem",
        answer_column="answer", kind="math", style=style, skip_invalid=skip_invalid, limit=limit,
        keep_columns=False, column_hint="MATH rows need 'problem' and 'answer' (the final answer, in LaTeX)",
    )  # fmt: skip


@dataclass(frozen=True)
class _Request:
    """What :func:`load_dataset` passes to a named dataset's loader."""

    split: DataSplit
    style: PromptStyle | None
    limit: int | None
    seed: int
    skip_invalid: bool
    levels: Sequence[int]


# The one registry of named datasets: name -> (description, loader). Docs and CLI read it. Their answers' kinds:
_KINDS: dict[DatasetName, AnswerKind] = {"gsm8k": "number", "synthetic": "number", "math": "math"}
DATASETS: dict[DatasetName, tuple[str, Callable[[_Request], Dataset]]] = {
    "gsm8k": (
        f"GSM8K grade-school math (hub {GSM8K_HUB_ID}, or the folder in ${GSM8K_DIR_ENV}); 7,473 train / 1,319 test",
        lambda q: load_gsm8k(q.split, style=q.style, skip_invalid=q.skip_invalid, limit=q.limit),
    ),
    "synthetic": (
        f"generated grade-school problems, levels 1-3, offline; {_SYNTHETIC_DEFAULT_N} unless limit= is given",
        lambda q: synthetic_problems(q.limit or _SYNTHETIC_DEFAULT_N, q.seed, q.levels, style=q.style, split=q.split),
    ),
    "math": (
        f"MATH-500 competition math, LaTeX answers (hub {MATH_HUB_ID}, or the folder in ${MATH_DIR_ENV}); 500 test",
        lambda q: load_math(q.split, style=q.style, skip_invalid=q.skip_invalid, limit=q.limit),
    ),
}


def load_dataset(
    spec: str | os.PathLike[str] | Dataset,
    split: DataSplit = "train",
    *,
    style: PromptStyle | None = None,
    prompt_column: str = "question",
    answer_column: str = "answer",
    limit: int | None = None,
    seed: int = 0,
    skip_invalid: bool = False,
    levels: Sequence[int] = LEVELS,
    answer_kind: AnswerKind | None = None,
) -> Dataset:
    """The one entry the trainer uses: a named dataset, a file or folder, or a ``datasets.Dataset``.

    Args:
        spec: ``"gsm8k"`` or ``"synthetic"`` (:data:`DATASETS`); a :data:`SUFFIXES` file or a folder with the
            split's file; or a ``datasets.Dataset``.
        split: ``"train"`` or ``"test"`` (named datasets and folders; a single file is read whole).
        style: the prompt style that builds ``prompt`` (rows with their own keep it). Default: ``PromptStyle()``.
        prompt_column: the user's column holding the question (else the last user message of ``prompt``).
        answer_column: the user's column holding the answer: a number (``"1,234"``, ``"$5"``, ``7``) or a worked
            solution ending in ``#### <number>``, LaTeX (``\\frac{3}{4}``), an option letter, or text.
        limit: keep only the first ``limit`` usable rows (for ``"synthetic"``: generate ``limit``).
        seed: the seed of ``"synthetic"``.
        skip_invalid: skip rows without a usable question or answer (with a warning) instead of raising.
        levels: the levels of ``"synthetic"``, a selection of ``(1, 2, 3)``.
        answer_kind: how answers compare: ``"number"``, ``"math"``, ``"choice"`` or ``"text"``
            (:mod:`grpo_lite.data.answer_kinds`). Default: the named dataset's; for other data, chosen from the golds
            (every gold a number: ``number``; LaTeX in the golds: ``math``; else ``text``).

    Returns:
        Columns ``prompt``, ``question``, ``answer`` (the gold in its kind's form: the canonical number for
        ``number``), ``answer_kind`` unless the kind is ``number``, plus the user's other columns (reward
        functions receive them as keyword arguments). Rows with a ``prompt`` and no ``answer_column`` are a
        task in TRL's shape: every column kept as it is, no answer asked for (:func:`has_gold`; docs/tasks.md).

    Raises:
        DataError: unknown name, missing/empty/unreadable file, missing columns, a bad row, golds of mixed kinds.
        ConfigError: unknown split, a bad limit, an unknown answer kind or one a named dataset's answers are not.

    >>> ds = load_dataset("synthetic", limit=3, seed=1)
    >>> ds.num_rows, ds.column_names[:3]
    (3, ['prompt', 'question', 'answer'])
    """
    from datasets import Dataset, DatasetDict, IterableDataset  # heavy: datasets

    _check_split(split)
    _check_limit(limit)
    check_answer_kind(answer_kind)
    kwargs: dict[str, Any] = {
        "question_column": prompt_column, "answer_column": answer_column, "kind": answer_kind, "style": style,
        "skip_invalid": skip_invalid, "limit": limit, "keep_columns": True,
        "column_hint": "rename those columns to 'question' and 'answer' in the file, or in Python load it with "
                       "load_dataset(path, prompt_column=..., answer_column=...) and pass the Dataset to train(); "
                       "or give a 'prompt' column and rewards that read your columns (docs/tasks.md)",
    }  # fmt: skip
    if isinstance(spec, Dataset):
        rows = [Row(f"dataset row {i}", r) for i, r in enumerate(spec.to_list(), 1)]
        if not rows:
            raise DataError("the dataset has no rows")
        return _to_dataset(rows, "the dataset", **kwargs)
    if isinstance(spec, (DatasetDict, IterableDataset)) or not isinstance(spec, (str, os.PathLike)):
        raise DataError(
            f"cannot load a {type(spec).__name__}: pass a name, a path or a datasets.Dataset "
            "(for a DatasetDict pick a split: ds['train'])"
        )
    if isinstance(spec, str) and spec in DATASETS:
        if answer_kind not in (None, _KINDS[spec]):
            raise ConfigError(f"{spec}'s answers are of kind {_KINDS[spec]!r}: leave answer_kind unset")
        return DATASETS[spec][1](_Request(split, style, limit, seed, skip_invalid, levels))
    path = Path(spec).expanduser()
    if not path.exists() and is_hub_id(str(spec)):
        return _to_dataset(_hub_rows(str(spec), split), str(spec), **kwargs)
    looks_like_path = path.suffix.lower() in SUFFIXES or os.sep in str(spec) or str(spec).startswith((".", "~"))
    if not path.exists() and not looks_like_path:
        names, kinds = ", ".join(repr(n) for n in DATASETS), "/".join(SUFFIXES)
        raise DataError(f"unknown dataset {str(spec)!r}; use one of {names}, or a path to a {kinds} file or a folder")
    return _to_dataset(_read_source(path, split), str(spec), **kwargs)
