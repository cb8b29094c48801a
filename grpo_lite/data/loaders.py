"""Datasets for training and evaluation: GSM8K, MATH-500, synthetic problems, or the user's own rows.

Every loader returns a ``datasets.Dataset`` with ``prompt``, ``question`` and ``answer`` (the gold in its kind's
form: a number in canonical form for GSM8K) columns, and ``answer_kind`` when the answers are not numbers
(:mod:`grpo_lite.data.answer_kinds`), or, for a task in TRL's shape (a ``prompt`` column and no question column,
with or without answers), the rows as they are; the shape is decided once, here (:func:`load_task`). A local file
is read once by ``datasets``' builder into a memory-mapped arrow table; a bad row is reported where it is
(docs/internals.md, docs/datasets.md, docs/tasks.md).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from grpo_lite.data.answer_kinds import check_answer_kind, choose_answer_kind, column_kind, gold_error, read_gold
from grpo_lite.data.answers import gsm8k_gold
from grpo_lite.data.prompts import PromptStyle, Shape, build_messages, is_messages, style_for_kind
from grpo_lite.data.synthetic import LEVELS, synthetic_problems
from grpo_lite.defaults import TRAINER
from grpo_lite.errors import ConfigError, DataError
from grpo_lite.files import sampled_digest
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


def _check_split(split: str) -> None:
    if split not in _SPLITS:
        raise ConfigError(f"unknown split {split!r}; valid splits: {', '.join(map(repr, _SPLITS))}")


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"limit must be a positive number of rows or None (all rows), got {limit!r}")


# ----------------------------------------------------------------------------- files
@dataclass(frozen=True)
class Rows:
    """The rows of a source as datasets' builders read them (arrow, memory-mapped: not Python objects), and where a
    person finds each one."""

    data: Dataset
    parts: tuple[tuple[int, str, Path | None], ...]  # (first index, "where {}", a JSON-lines file to count lines in)

    def where(self, index: int) -> str:
        """``"path, line 3"``, ``"path, row 3"``: a JSON-lines row's line is counted when a message asks for it."""
        start, at, lines = next(part for part in reversed(self.parts) if part[0] <= index)
        return at.format(index - start + 1 if lines is None else _line_of(lines, index - start + 1))

    def __iter__(self) -> Iterator[Row]:
        rows, index = iter(self.data), 0
        while True:
            try:  # a JSON builder keeps text as it found it: it is decoded here, row by row
                data = next(rows)
            except StopIteration:
                return
            except UnicodeDecodeError as exc:
                raise DataError(f"{self.where(index)}: not UTF-8 text ({exc.reason}); save the file as UTF-8") from None
            yield Row(self, index, data)
            index += 1


@dataclass(frozen=True)
class Row:
    """One row of the user's data, read from its :class:`Rows` when it is reached."""

    rows: Rows
    index: int
    data: dict[str, Any]

    @property
    def where(self) -> str:
        return self.rows.where(self.index)


def _line_of(path: Path, number: int) -> int:
    """The line of a JSON-lines file that holds its ``number``-th row (datasets skips blank lines)."""
    with open(path, "rb") as f:
        rows = 0
        for line, text in enumerate(f, 1):
            rows += bool(text.strip())
            if rows == number:
                return line
    return number


def _has_rows(datasets: Any, builder: str, path: Path) -> bool:
    """Whether a file the builder refused holds a row, read by streaming up to the first one (a CSV file with
    only its header, a JSON-lines file of blank lines: none)."""
    try:
        return (
            next(iter(datasets.load_dataset(builder, data_files=str(path), split="train", streaming=True)), None)
            is not None
        )
    except Exception:  # unreadable: it is said as such
        return True


def _has_text(path: Path) -> bool:
    with open(path, "rb") as f:
        return any(chunk.strip() for chunk in iter(lambda: f.read(1 << 20), b""))


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


def _read_file(path: Path) -> Rows:
    """One file read once, by ``datasets``' own builder into arrow (memory-mapped, not rows of Python objects),
    each row with its location; DataError when unreadable."""
    suffix = path.suffix.lower()
    if not path.exists():
        raise DataError(f"{path}: file not found; pass an existing {'/'.join(SUFFIXES)} file or a train/test folder")
    if suffix not in SUFFIXES or not path.is_file():
        raise DataError(f"{path}: unsupported file type {suffix or '(none)'!r}; use one of {', '.join(SUFFIXES)}")
    with open(path, "rb") as f:
        first = f.read(1 << 16).split(b"\n", 1)[0]
    if suffix == ".jsonl" and first.lstrip(b"\xef\xbb\xbf \t").startswith(b"["):  # datasets would read a document
        raise DataError(f"{path}, line 1: expected a JSON object with named fields: {first.strip()[:80]!r}")
    import datasets  # heavy: datasets

    builders_log = logging.getLogger("datasets.packaged_modules")
    level, bars = builders_log.level, datasets.is_progress_bar_enabled()
    builders_log.setLevel(logging.CRITICAL)  # a builder logs a bad file's error before raising it: said once below
    datasets.disable_progress_bars()
    try:
        builder = "json" if suffix.startswith(".json") else suffix[1:]
        data = datasets.load_dataset(builder, data_files=str(path), split="train")
    except Exception as exc:  # each builder raises its own types for a bad file, and for one without rows
        if _has_text(path) and _has_rows(datasets, builder, path):
            raise DataError(_why_unreadable(path, exc)) from None
        data = None
    finally:
        builders_log.setLevel(level)
        if bars:
            datasets.enable_progress_bars()
    if data is None or not data.num_rows:
        what = "has no rows" if _has_text(path) else "is empty"
        raise DataError(f"{path}: the file {what}; it needs one row per problem with 'question' and 'answer'")
    if suffix == ".json" and data.num_rows == 1:  # {"data": [{...}, ...]} or {"column": [...], ...}
        data = _json_document(data)
    return Rows(
        data, ((0, f"{path}, {'line' if suffix == '.jsonl' else 'row'} {{}}", path if suffix == ".jsonl" else None),)
    )


def _json_document(data: Dataset) -> Dataset:
    """A JSON file holding one object: its one list of rows, or its columns of equal length, as rows."""
    values = list(data[0].values())
    if not all(isinstance(v, list) for v in values):
        return data
    if len(values) == 1 and all(isinstance(r, dict) for r in values[0]):
        return data.from_list(values[0])
    if len({len(v) for v in values}) == 1:
        return data.from_dict(dict(zip(data.column_names, values, strict=True)))
    return data


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


def _read_source(source: str | os.PathLike[str], split: DataSplit) -> Rows:
    """The rows of a file (read whole, whatever ``split``), or of a folder's ``split`` file(s)."""
    path = Path(source).expanduser()
    parts = [_read_file(file) for file in (_split_files(path, split) if path.is_dir() else [path])]
    if len(parts) == 1:
        return parts[0]
    from datasets import concatenate_datasets  # heavy: datasets

    starts = [0]
    for part in parts[:-1]:
        starts.append(starts[-1] + part.data.num_rows)
    try:
        data = concatenate_datasets([part.data for part in parts])
    except Exception as exc:  # the files' columns differ
        raise DataError(f"{path}: its {split} files hold different columns ({type(exc).__name__}: {exc})") from None
    return Rows(data, tuple((start, *part.parts[0][1:]) for start, part in zip(starts, parts, strict=True)))


def data_fingerprint(spec: Any, split: DataSplit = "train") -> str | None:
    """The fingerprint of the files a dataset path reads (:func:`grpo_lite.files.sampled_digest`): a resume compares
    it with the run's, so that a file edited in place is not trained on as the same data. None for a named dataset,
    a ``datasets.Dataset`` or a path that reads nothing.

    >>> data_fingerprint("gsm8k") is None
    True
    """
    path = Path(spec).expanduser() if isinstance(spec, (str, os.PathLike)) and spec not in DATASETS else None
    if path is None or not path.exists():
        return None
    try:
        files = _split_files(path, split) if path.is_dir() else [path]
    except DataError:  # nothing to read: loading says so
        return None
    return sampled_digest(files)


# ----------------------------------------------------------------------------- the hub
def _hub_named(hub_id: str, config: str | None, split: DataSplit, instead: str) -> Rows:
    """A named dataset's ``split`` from the hub or its cache; DataError saying ``instead`` (what to pass offline)."""
    try:
        from datasets import load_dataset as hf_load_dataset  # heavy: datasets

        hub = hf_load_dataset(hub_id, config, split=split)
    except Exception as exc:  # offline, not cached, hub errors: all mean "not available here"
        raise DataError(
            f"cannot load {hub_id} ({split}) from the Hugging Face hub or its local cache "
            f"({type(exc).__name__}: {str(exc)[:200]}); {instead}"
        ) from exc
    return Rows(hub, ((0, f"{hub_id} {split}, row {{}}", None),))


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


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` is set now, as huggingface_hub reads it (its own constant is read once, at import)."""
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def needs_hub(hub_id: str, split: str, exc: Exception, named: str = "", instead: str = "") -> DataError:
    """The one line for a hub dataset that did not load here: it needs the hub, and how to pass a local copy.
    ``named``: how the user wrote it (default ``dataset='owner/name'``); ``instead``: where the copy goes."""
    why = "HF_HUB_OFFLINE is set" if hub_offline() else f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
    instead = instead or "pass dataset='train.jsonl', or pass the datasets.Dataset itself"
    return DataError(
        f"{named or f'dataset={hub_id!r}'} is a Hugging Face hub id and loading it needs the hub ({why}); pass a "
        f"local copy: save it where the hub is reachable (datasets.load_dataset({hub_id!r}, split={split!r})"
        f".to_json('train.jsonl')) and {instead}"
    )


def _hub_rows(hub_id: str, split: DataSplit) -> Rows:
    """A hub dataset's ``split``, as ``trl grpo --dataset_name`` loads it (``datasets.load_dataset``)."""
    try:
        from datasets import load_dataset as hf_load_dataset  # heavy: datasets

        hub = hf_load_dataset(hub_id, split=split)
    except Exception as exc:  # offline, not cached, hub errors: all mean "not available here"
        raise needs_hub(hub_id, split, exc) from None
    return Rows(hub, ((0, f"{hub_id} {split}, row {{}}", None),))


# ----------------------------------------------------------------------------- rows -> dataset
# The names TRL passes to a reward function itself: a column of one of these names would be lost or clash
TRL_REWARD_ARGUMENTS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric")


@dataclass(frozen=True)
class Loaded:
    """A dataset and what was decided once, when it loaded: its shape and the kind of its golds."""

    dataset: Dataset
    shape: Shape
    answer_kind: AnswerKind | None  # how the golds compare; None: none read (the ``"prompts"`` shape)


def _shape(columns: Sequence[str], question_column: str) -> Shape:
    """The one place a dataset's shape is decided: a ``prompt`` column without the question column is TRL's."""
    return "prompts" if "prompt" in columns and question_column not in columns else "questions"


def _prompt_problem(prompt: Any) -> str | None:
    """What is wrong with a ``prompt`` cell (None: text, or messages whose content is text)."""
    if isinstance(prompt, str) and prompt.strip():
        return None
    if not is_messages(prompt):
        return f"'prompt' must be text or a list of {{'role', 'content'}} messages: {prompt!r:.80}"
    for number, message in enumerate(prompt, 1):
        if not isinstance(message["content"], str):
            return (
                f"'prompt' message {number} has content {message['content']!r:.60}; write each message's content as "
                "text, e.g. {'role': 'user', 'content': 'What is 2 + 2?'}"
            )
    return None


def _check_columns(columns: Sequence[str], source: str) -> None:
    """Refuse a column named as an argument TRL passes to the rewards itself."""
    for column in columns:
        if column in TRL_REWARD_ARGUMENTS:
            raise DataError(
                f"{source}: the column {column!r} has the name of an argument TRL passes to reward functions itself; "
                f"rename it (e.g. to '{column}_') in the data and in the rewards that read it"
            )


def _question_of(value: Any) -> str | None:
    """The question text of a question/prompt cell: the text, or the last user message."""
    if is_messages(value):
        value = next((m["content"] for m in reversed(value) if m["role"] == "user"), None)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _rows_to_dataset(out: list[dict[str, Any]], source: str) -> Dataset:
    from datasets import Dataset  # heavy: datasets

    try:
        return Dataset.from_list(out)
    except Exception as exc:  # pyarrow cannot unify a column's types across rows
        raise DataError(f"{source}: a column mixes types across rows ({type(exc).__name__}: {exc})") from None


def _usable(
    rows: Rows, source: str, what: str, *, skip_invalid: bool, limit: int | None, read: Callable[[Row], Any]
) -> list[Any]:
    """What ``read`` makes of each row, up to ``limit`` rows; a row it refuses (a :class:`_Refused` naming the
    problem) raises, or with ``skip_invalid`` is skipped, one warning counting them (``what``: what they lacked)."""
    kept: list[Any] = []
    skipped: list[str] = []
    for row in rows:
        if limit is not None and len(kept) == limit:
            break
        value = read(row)
        if not isinstance(value, _Refused):
            kept.append(value)
        elif skip_invalid:
            skipped.append(f"{row.where}: {value.problem}")
        else:
            raise DataError(
                f"{row.where}: {value.problem}; fix or remove the row, or pass skip_invalid=True (--skip-invalid) to "
                "skip it"
            )
    if skipped:
        warnings.warn(
            f"{source}: skipped {len(skipped)} row(s) without a usable {what} (first: {skipped[0]})", stacklevel=4
        )
    if not kept:
        raise DataError(f"{source}: no usable rows (every row lacked a usable {what})")
    return kept


@dataclass(frozen=True)
class _Refused:
    """A row :func:`_usable` does not keep, and why."""

    problem: str


def _task_dataset(rows: Rows, source: str, *, skip_invalid: bool, limit: int | None) -> Dataset:
    """A task in TRL's shape: each row's ``prompt`` (text or messages) checked, the rows kept as they are (the
    rewards read them); no gold is read, nothing is normalized, nothing is copied but the rows skipped or cut."""

    def read(row: Row) -> int | _Refused:
        problem = _prompt_problem(row.data.get("prompt"))
        return row.index if problem is None else _Refused(problem)

    kept = _usable(rows, source, "prompt", skip_invalid=skip_invalid, limit=limit, read=read)
    return rows.data if len(kept) == rows.data.num_rows else rows.data.select(kept)


_BUILT_COLUMNS = ("prompt", "question", "answer", "answer_kind")  # a row's own columns, built here, never copied


def has_gold(dataset: Dataset) -> bool:
    """Whether a loaded dataset's rows carry a gold ``answer`` column (the correctness reward compares with it)."""
    return "answer" in dataset.column_names


def _to_dataset(
    rows: Rows,
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
) -> Loaded:
    """Questions: validate rows, read the golds in their kind (None: chosen from the golds), build prompts; a
    DataError names the bad row (``column_hint``: what to change for a missing column; ``keep_columns``: keep the
    rows' other columns; ``gold``: how a gold is read, instead of the kind's reading)."""
    columns = rows.data.column_names
    for column in (question_column, answer_column):
        if column not in columns:
            raise DataError(f"{source}: no {column!r} column (columns: {', '.join(columns)}); {column_hint}")
    named = [(row.where, row.data["answer_kind"]) for row in rows if row.data.get("answer_kind") is not None]
    kind = column_kind(named, kind) or choose_answer_kind(
        [(row.where, row.data.get(answer_column)) for row in rows], source
    )
    gold = gold or functools.partial(read_gold, kind=kind)
    tagged = {} if kind == "number" else {"answer_kind": kind}  # the correctness reward reads it; numbers: none
    style = style_for_kind(style, kind)  # the default system prompt asks for the kind's answer

    def read(row: Row) -> dict[str, Any] | _Refused:
        question, answer = _question_of(row.data.get(question_column)), gold(row.data.get(answer_column))
        prompt = row.data.get("prompt")  # rows of the user's own prompt keep it
        if question is None:
            return _Refused(f"{question_column!r} is missing, empty or not text: {row.data.get(question_column)!r:.80}")
        if answer is None:
            return _Refused(gold_error(kind, answer_column, row.data.get(answer_column)))
        if prompt is not None and (bad := _prompt_problem(prompt)):
            return _Refused(bad)
        built = prompt if prompt is not None else build_messages(question, style)
        extras = {k: v for k, v in row.data.items() if keep_columns and k not in _BUILT_COLUMNS}
        return {"prompt": built, "question": question, "answer": answer, **tagged, **extras}

    out = _usable(rows, source, "question or answer", skip_invalid=skip_invalid, limit=limit, read=read)
    return Loaded(_rows_to_dataset(out, source), "questions", kind)


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
    instead = (
        "pass a local folder or file with GSM8K rows (train.jsonl/test.jsonl) as the dataset (--dataset PATH; "
        f"Python: dataset=PATH, or load_gsm8k(source=PATH)), set {GSM8K_DIR_ENV}, or use the offline 'synthetic' "
        "dataset"
    )
    rows = _hub_named(GSM8K_HUB_ID, "main", split, instead) if source is None else _read_source(source, split)
    name = f"{GSM8K_HUB_ID} ({split})" if source is None else str(source)
    return _to_dataset(
        rows, name, question_column="question", answer_column="answer", kind="number", gold=gsm8k_gold,
        style=style, skip_invalid=skip_invalid, limit=limit, keep_columns=False,
        column_hint="GSM8K rows need 'question' and 'answer' (a worked solution ending in '#### <number>')",
    ).dataset  # fmt: skip


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
    instead = (
        "pass a local folder or file with its rows (test.jsonl with 'problem' and 'answer') as the dataset "
        f"(--dataset PATH; Python: load_math(source=PATH)), or set {MATH_DIR_ENV}"
    )
    rows = (
        _hub_named(MATH_HUB_ID, None, "test", instead)
        if path is None
        else _read_source(path, split if own_train else "test")
    )
    return _to_dataset(
        rows, f"{MATH_HUB_ID} (test)" if source is None else str(source), question_column="problem",
        answer_column="answer", kind="math", style=style, skip_invalid=skip_invalid, limit=limit,
        keep_columns=False, column_hint="MATH rows need 'problem' and 'answer' (the final answer, in LaTeX)",
    ).dataset  # fmt: skip


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
        f"generated grade-school problems, levels 1-3, offline; {TRAINER.synthetic_n} unless limit= is given",
        lambda q: synthetic_problems(q.limit or TRAINER.synthetic_n, q.seed, q.levels, style=q.style, split=q.split),
    ),
    "math": (
        f"MATH-500 competition math, LaTeX answers (hub {MATH_HUB_ID}, or the folder in ${MATH_DIR_ENV}); 500 test",
        lambda q: load_math(q.split, style=q.style, skip_invalid=q.skip_invalid, limit=q.limit),
    ),
}


def load_task(
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
) -> Loaded:
    """The one entry the trainer uses: a named dataset, a file or folder, or a ``datasets.Dataset``, with its shape
    (:data:`Shape`) and the kind of its golds, decided here once.

    Args:
        spec: ``"gsm8k"`` or ``"synthetic"`` (:data:`DATASETS`); a :data:`SUFFIXES` file or a folder with the
            split's file; or a ``datasets.Dataset``.
        split: ``"train"`` or ``"test"`` (named datasets and folders; a single file is read whole).
        style: the prompt style that builds ``prompt`` (rows with their own keep it). Default: ``PromptStyle()``.
        prompt_column: the user's column holding the question; without it, a ``prompt`` column is TRL's shape.
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
        Questions: columns ``prompt``, ``question``, ``answer`` (the gold in its kind's form: the canonical number
        for ``number``), ``answer_kind`` unless the kind is ``number``, plus the user's other columns (reward
        functions receive them as keyword arguments). Rows with a ``prompt`` column and no ``prompt_column`` are
        TRL's shape: the rows as written (with or without an answer column), nothing built or normalized
        (docs/datasets.md, docs/tasks.md).

    Raises:
        DataError: unknown name, missing/empty/unreadable file, missing columns, a column named as TRL's reward
            arguments, a bad row, golds of mixed kinds.
        ConfigError: unknown split, a bad limit, an unknown answer kind, one a named dataset's answers are not, or
            one asked of TRL's shape.

    >>> task = load_task("synthetic", limit=3, seed=1)
    >>> task.shape, task.answer_kind, task.dataset.column_names[:3]
    ('questions', 'number', ['prompt', 'question', 'answer'])
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
        if not spec.num_rows:
            raise DataError("the dataset has no rows")
        return _load(Rows(spec, ((0, "dataset row {}", None),)), "the dataset", kwargs)
    if isinstance(spec, (DatasetDict, IterableDataset)) or not isinstance(spec, (str, os.PathLike)):
        raise DataError(
            f"cannot load a {type(spec).__name__}: pass a name, a path or a datasets.Dataset "
            "(for a DatasetDict pick a split: ds['train'])"
        )
    if isinstance(spec, str) and spec in DATASETS:
        if answer_kind not in (None, _KINDS[spec]):
            raise ConfigError(f"{spec}'s answers are of kind {_KINDS[spec]!r}: leave answer_kind unset")
        return Loaded(
            DATASETS[spec][1](_Request(split, style, limit, seed, skip_invalid, levels)), "questions", _KINDS[spec]
        )
    path = Path(spec).expanduser()
    if not path.exists() and is_hub_id(str(spec)):
        return _load(_hub_rows(str(spec), split), str(spec), kwargs)
    looks_like_path = path.suffix.lower() in SUFFIXES or os.sep in str(spec) or str(spec).startswith((".", "~"))
    if not path.exists() and not looks_like_path:
        names, kinds = ", ".join(repr(n) for n in DATASETS), "/".join(SUFFIXES)
        raise DataError(f"unknown dataset {str(spec)!r}; use one of {names}, or a path to a {kinds} file or a folder")
    return _load(_read_source(path, split), str(spec), kwargs)


def _load(rows: Rows, source: str, kwargs: dict[str, Any]) -> Loaded:
    """The rows as their shape loads them: TRL's shape as written, else questions in the prompt style."""
    _check_columns(rows.data.column_names, source)
    if _shape(rows.data.column_names, kwargs["question_column"]) == "prompts":
        if kwargs["kind"] is not None:
            raise ConfigError(
                f"{source} has a 'prompt' column and goes to TRL as written, its answers compared by its rewards: "
                f"drop answer_kind={kwargs['kind']!r} (--answer-kind), or give a question column instead of 'prompt'"
            )
        return Loaded(
            _task_dataset(rows, source, skip_invalid=kwargs["skip_invalid"], limit=kwargs["limit"]), "prompts", None
        )
    return _to_dataset(rows, source, **kwargs)


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
    """A named dataset, a file or folder, or a ``datasets.Dataset``, loaded as :func:`load_task` loads it.

    >>> ds = load_dataset("synthetic", limit=3, seed=1)
    >>> ds.num_rows, ds.column_names[:3]
    (3, ['prompt', 'question', 'answer'])
    """
    return load_task(
        spec, split, style=style, prompt_column=prompt_column, answer_column=answer_column, limit=limit, seed=seed,
        skip_invalid=skip_invalid, levels=levels, answer_kind=answer_kind,
    ).dataset  # fmt: skip
