"""Reading the user's files into located rows: JSON lines, JSON, parquet and CSV, or a folder's split.

:func:`read_source` reads a file whole (:func:`read_file`) or a folder's ``train``/``test`` file(s)
(:func:`split_files`) as :class:`Row` objects that know their file and line/row number, so that a bad row is
reported where it is. Used by :mod:`grpo_lite.data.loaders` (which re-exports :data:`SUFFIXES`, the file types
read); ``pyarrow`` is imported only to read parquet.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as tmp:
...     _ = (Path(tmp) / "train.jsonl").write_text('{"question": "1+1?", "answer": "2"}\\n\\n{"q": 3}\\n')
...     [row.where.split(", ")[-1] for row in read_source(tmp, "train")]
['line 1', 'line 3']
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from grpo_lite.errors import DataError

__all__ = ["SUFFIXES", "DataSplit", "Row", "read_file", "split_files", "read_source"]

DataSplit = Literal["train", "test"]
SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")


@dataclass(frozen=True)
class Row:
    """One row of the user's data and where it came from.

    Attributes:
        where: ``"path, line 3"`` or ``"path, row 3"``: where a person finds the row.
        data: the row's fields.
    """

    where: str
    data: dict[str, Any]


def _json_lines(path: Path, text: str) -> list[Row]:
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}, line {number}: not valid JSON ({exc.msg}): {line.strip()[:80]!r}") from None
        if not isinstance(data, dict):
            raise DataError(f"{path}, line {number}: expected a JSON object with named fields: {line.strip()[:80]!r}")
        rows.append(Row(f"{path}, line {number}", data))
    return rows


def _json_document(path: Path, text: str) -> list[Row]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if text.lstrip().startswith("{") and "\n" in text.strip():
            return _json_lines(path, text)  # JSON lines saved as .json
        raise DataError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(data) == 1 and lists and all(isinstance(r, dict) for r in lists[0]):
            data = lists[0]  # {"data": [{...}, ...]}
        elif data and len(lists) == len(data) and len({len(v) for v in lists}) == 1:
            data = [dict(zip(data, values, strict=True)) for values in zip(*data.values(), strict=True)]  # columns
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise DataError(f"{path}: expected a list of objects like [{{'question': ..., 'answer': ...}}] or JSON lines")
    return [Row(f"{path}, row {i}", r) for i, r in enumerate(data, 1)]


def read_file(path: Path) -> list[Row]:
    """All rows of one file, each with its location. Raises DataError for what cannot be read."""
    suffix = path.suffix.lower()
    if not path.exists():
        raise DataError(f"{path}: file not found; pass an existing {'/'.join(SUFFIXES)} file or a train/test folder")
    if suffix not in SUFFIXES or not path.is_file():
        raise DataError(f"{path}: unsupported file type {suffix or '(none)'!r}; use one of {', '.join(SUFFIXES)}")
    if suffix == ".parquet":
        import pyarrow.parquet as pq  # heavy: pyarrow

        try:
            records = pq.read_table(path).to_pylist()
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise DataError(f"{path}: cannot read parquet ({type(exc).__name__}: {exc})") from None
        rows = [Row(f"{path}, row {i}", r) for i, r in enumerate(records, 1)]
    else:
        try:
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        if not text.strip():
            raise DataError(f"{path}: the file is empty; it needs one row per problem with 'question' and 'answer'")
        if suffix == ".jsonl":
            rows = _json_lines(path, text)
        elif suffix == ".json":
            rows = _json_document(path, text)
        else:
            reader = csv.DictReader(text.splitlines())
            rows = [Row(f"{path}, line {reader.line_num}", dict(r)) for r in reader]
    if not rows:
        raise DataError(f"{path}: the file has no rows; it needs one row per problem with 'question' and 'answer'")
    return rows


def split_files(folder: Path, split: DataSplit) -> list[Path]:
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


def read_source(source: str | os.PathLike[str], split: DataSplit) -> list[Row]:
    """The rows of a file (read whole, whatever ``split``), or of a folder's ``split`` file(s).

    Raises:
        DataError: a missing, empty or unreadable file, or a folder without a ``split`` file.
    """
    path = Path(source).expanduser()
    if path.is_dir():
        return [row for file in split_files(path, split) for row in read_file(file)]
    return read_file(path)
