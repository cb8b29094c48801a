"""Tests for grpo_lite.data.loaders: GSM8K files, the user's own rows, the named-dataset registry.

Every row here is invented for the tests; real GSM8K rows are only read from a local folder ($GRPO_LITE_GSM8K_DIR).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from grpo_lite.data.loaders import DATASETS, GSM8K_DIR_ENV, load_dataset, load_gsm8k
from grpo_lite.data.prompts import PromptStyle, build_messages
from grpo_lite.data.synthetic import synthetic_problems
from grpo_lite.errors import ConfigError, DataError

ROWS = [
    {"question": "Ana has 3 kites and buys 4 more. How many kites?", "answer": "3 + 4 = 7\n#### 7"},
    {"question": "A shop sells 1,000 pens a day for 2 days. How many pens?", "answer": "1000 x 2 = 2000\n#### 2,000"},
    {"question": "Bo pays $12 for 3 books. What does one cost?", "answer": "12 / 3 = 4\n#### $4"},
]
PLAIN_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def write_jsonl(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_parquet(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.fixture
def no_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the hub unreachable, as on an offline machine without a cache (local files are read by datasets too)."""
    import datasets

    read = datasets.load_dataset

    def unreachable(name: str, *args: object, **kwargs: object) -> object:
        if name in ("json", "csv", "parquet"):
            return read(name, *args, **kwargs)
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    monkeypatch.delenv(GSM8K_DIR_ENV, raising=False)


# ----------------------------------------------------------------------------- load_gsm8k
def test_jsonl_gold_numbers_are_plain(tmp_path: Path) -> None:
    ds = load_gsm8k(source=write_jsonl(tmp_path / "train.jsonl", ROWS))
    assert ds.column_names == ["prompt", "question", "answer"]
    assert list(ds["answer"]) == ["7", "2000", "4"]
    assert ds["question"][1] == ROWS[1]["question"]
    assert ds["prompt"][0] == build_messages(ROWS[0]["question"])


def test_style_and_limit(tmp_path: Path) -> None:
    ds = load_gsm8k(source=write_jsonl(tmp_path / "x.jsonl", ROWS), style=PromptStyle.plain(), limit=2)
    assert ds.num_rows == 2
    assert [m["role"] for m in ds["prompt"][0]] == ["system", "user"]


@pytest.mark.parametrize("split", ["train", "test"])
def test_folder_picks_the_split_file(tmp_path: Path, split: str) -> None:
    write_jsonl(tmp_path / "train.jsonl", ROWS)
    write_jsonl(tmp_path / "test.jsonl", ROWS[2:])
    assert load_gsm8k(split, source=tmp_path).num_rows == {"train": 3, "test": 1}[split]


def test_folder_with_hub_style_parquet_shards(tmp_path: Path) -> None:
    write_parquet(tmp_path / "main" / "train-00000-of-00002.parquet", ROWS[:2])
    write_parquet(tmp_path / "main" / "train-00001-of-00002.parquet", ROWS[2:])
    write_parquet(tmp_path / "main" / "test-00000-of-00001.parquet", ROWS[:1])
    assert list(load_gsm8k(source=tmp_path)["answer"]) == ["7", "2000", "4"]
    assert list(load_gsm8k("test", source=str(tmp_path))["answer"]) == ["7"]


@pytest.mark.parametrize(
    "document",
    [
        ROWS,  # a list of objects
        {"data": ROWS},  # one key holding the list
        {"question": [r["question"] for r in ROWS], "answer": [r["answer"] for r in ROWS]},  # columns
    ],
    ids=["list", "wrapped", "columns"],
)
def test_json_documents(tmp_path: Path, document: object) -> None:
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    assert list(load_gsm8k(source=path)["answer"]) == ["7", "2000", "4"]


def test_json_lines_saved_as_json(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "rows.json", ROWS)
    assert load_gsm8k(source=path).num_rows == 3


def test_bad_row_names_file_line_and_value(tmp_path: Path) -> None:
    rows = [ROWS[0], {"question": "No marker here?", "answer": "The answer is 5"}, ROWS[1]]
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(rows[0]) + "\n\n" + json.dumps(rows[1]) + "\n" + json.dumps(rows[2]) + "\n")
    expected = r"train\.jsonl, line 3: no usable number in 'answer': 'The answer is 5'.*skip_invalid=True"
    with pytest.raises(DataError, match=expected):
        load_gsm8k(source=path)


def test_skip_invalid_warns_with_the_count(tmp_path: Path) -> None:
    rows = [ROWS[0], {"question": "q?", "answer": "#### many"}, {"question": "", "answer": "#### 3"}, ROWS[2]]
    with pytest.warns(UserWarning, match=r"skipped 2 row\(s\).*line 2: no usable number"):
        ds = load_gsm8k(source=write_jsonl(tmp_path / "t.jsonl", rows), skip_invalid=True)
    assert list(ds["answer"]) == ["7", "4"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("train.jsonl", "", r"train\.jsonl: the file is empty"),
        ("train.jsonl", "\n  \n", r"the file is empty"),
        (
            "train.jsonl",
            '{"question": "a", "answer": "#### 1"}\n{"question": \n',
            r"train\.jsonl, line 2: not valid JSON",
        ),
        ("train.jsonl", '["a", "#### 1"]\n', r"line 1: expected a JSON object"),
        ("rows.json", '[{"question": "a",', r"rows\.json: not valid JSON \(.* at line 1"),
        ("rows.json", '"just text"', r"expected a list of objects"),
        (
            "train.jsonl",
            '{"answer": "#### 1"}\n',
            r"no 'question' column \(columns: answer\); GSM8K rows need 'question'",
        ),
        (
            "train.jsonl",
            '{"question": "a", "solution": "#### 1"}\n',
            r"no 'answer' column \(columns: question, solution\)",
        ),
        (
            "rows.txt",
            "question,answer\n",
            r"unsupported file type '\.txt'; use one of \.jsonl, \.json, \.parquet, \.csv",
        ),
    ],
)
def test_unreadable_files(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        load_gsm8k(source=path)


def test_a_bad_file_is_said_once(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """datasets' builder logs its own error before raising it; the DataError alone is shown."""
    path = tmp_path / "train.jsonl"
    path.write_text('{"question": "a", "answer": "#### 1"}\n{"question": \n', encoding="utf-8")
    with pytest.raises(DataError, match=r"line 2: not valid JSON"):
        load_gsm8k(source=path)
    assert capfd.readouterr().err == ""


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"nope\.jsonl: file not found; pass an existing"):
        load_gsm8k(source=tmp_path / "nope.jsonl")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    path.write_bytes(b'{"question": "caf\xe9", "answer": "#### 1"}\n')
    with pytest.raises(DataError, match="not UTF-8 text"):
        load_gsm8k(source=path)


def test_broken_parquet(tmp_path: Path) -> None:
    path = tmp_path / "train.parquet"
    path.write_bytes(b"not a parquet file at all")
    with pytest.raises(DataError, match=r"train\.parquet: cannot read parquet"):
        load_gsm8k(source=path)


def test_folder_without_the_split(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "train.jsonl", ROWS)
    with pytest.raises(DataError, match=r"no test file found \(looked for test\.jsonl.*holds: train\.jsonl"):
        load_gsm8k("test", source=tmp_path)


def test_every_row_invalid(tmp_path: Path) -> None:
    with pytest.warns(UserWarning), pytest.raises(DataError, match="no usable rows"):
        load_gsm8k(source=write_jsonl(tmp_path / "t.jsonl", [{"question": "q", "answer": "none"}]), skip_invalid=True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"split": "validation"}, "unknown split 'validation'; valid splits: 'train', 'test'"),
        ({"limit": 0}, "limit must be a positive number of rows or None"),
        ({"limit": 2.5}, "limit must be a positive number of rows or None"),
    ],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_gsm8k(source=write_jsonl(tmp_path / "t.jsonl", ROWS), **kwargs)


def test_hub_unreachable_says_what_to_do(no_hub: None) -> None:
    with pytest.raises(
        DataError, match=r"cannot load openai/gsm8k \(test\).*pass a local folder.*--dataset PATH.*'synthetic'"
    ):
        load_gsm8k("test")


def test_hub_rows_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    calls = []

    def fake(name: str, config: str, split: str) -> datasets.Dataset:
        calls.append((name, config, split))
        return datasets.Dataset.from_list(ROWS)

    monkeypatch.setattr(datasets, "load_dataset", fake)
    monkeypatch.delenv(GSM8K_DIR_ENV, raising=False)
    assert list(load_gsm8k("test")["answer"]) == ["7", "2000", "4"]
    assert calls == [("openai/gsm8k", "main", "test")]


def test_env_folder_replaces_the_hub(tmp_path: Path, no_hub: None, monkeypatch: pytest.MonkeyPatch) -> None:
    write_jsonl(tmp_path / "test.jsonl", ROWS[:2])
    monkeypatch.setenv(GSM8K_DIR_ENV, str(tmp_path))
    assert load_gsm8k("test").num_rows == 2
    assert load_dataset("gsm8k", "test", limit=1).num_rows == 1


# ----------------------------------------------------------------------------- load_dataset
def test_registry_names() -> None:
    assert list(DATASETS) == ["gsm8k", "synthetic", "math"]


def test_synthetic_by_name() -> None:
    ds = load_dataset("synthetic", "test", limit=5, seed=3, style=PromptStyle.plain())
    assert ds.to_list() == synthetic_problems(5, seed=3, style=PromptStyle.plain(), split="test").to_list()
    assert load_dataset("synthetic").num_rows == 200
    assert set(load_dataset("synthetic", limit=6, levels=(2,))["level"]) == {2}


def test_unknown_name_lists_the_names() -> None:
    with pytest.raises(DataError, match=r"unknown dataset 'gsm9k'; use one of 'gsm8k', 'synthetic', 'math', or a path"):
        load_dataset("gsm9k")


@pytest.mark.parametrize("spec", ["data/rows.jsonl", "rows.csv", "./somewhere"])
def test_missing_path(spec: str) -> None:
    with pytest.raises(DataError, match="file not found"):
        load_dataset(spec)


@pytest.mark.parametrize("spec", [42, ["a"]])
def test_wrong_spec_type(spec: object) -> None:
    with pytest.raises(DataError, match=f"cannot load a {type(spec).__name__}"):
        load_dataset(spec)  # type: ignore[arg-type]


def test_user_jsonl_numbers_are_normalized_and_columns_kept(tmp_path: Path) -> None:
    rows = [
        {"question": "q1", "answer": 7, "topic": "a"},
        {"question": "q2", "answer": 3.0, "topic": "b"},
        {"question": "q3", "answer": "1,234", "topic": "c"},
        {"question": "q4", "answer": "$5.50", "topic": "d"},
        {"question": "q5", "answer": "2 + 2 = 4\n#### 4", "topic": "e"},
    ]
    ds = load_dataset(write_jsonl(tmp_path / "mine.jsonl", rows))
    assert ds.column_names == ["prompt", "question", "answer", "topic"]
    assert list(ds["answer"]) == ["7", "3", "1234", "5.5", "4"]
    assert list(ds["topic"]) == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize("bad", ["seven", True, None, "4 apples"])
def test_user_answer_that_is_not_a_number(tmp_path: Path, bad: object) -> None:
    path = write_jsonl(tmp_path / "mine.jsonl", [{"question": "q1", "answer": 1}, {"question": "q2", "answer": bad}])
    with pytest.raises(DataError, match=r"mine\.jsonl, line 2: no usable number in 'answer'"):
        load_dataset(path, answer_kind="number")


@pytest.mark.parametrize("bad", ["seven", "4 apples"])
def test_a_number_and_a_word_among_the_golds_are_mixed_kinds(tmp_path: Path, bad: str) -> None:
    path = write_jsonl(tmp_path / "mine.jsonl", [{"question": "q1", "answer": 1}, {"question": "q2", "answer": bad}])
    expected = (
        rf"mine\.jsonl: the golds mix kinds: line 1 is a number \(1\), line 2 is text \('{bad}'\); pass answer_kind"
    )
    with pytest.raises(DataError, match=expected):
        load_dataset(path)


def test_user_csv_with_other_column_names(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text('problem,solution\n"Add 2, 3",5\nDouble 4,8\n', encoding="utf-8")
    ds = load_dataset(path, prompt_column="problem", answer_column="solution")
    assert list(ds["question"]) == ["Add 2, 3", "Double 4"]
    assert list(ds["answer"]) == ["5", "8"]
    with pytest.raises(
        DataError,
        match=r"no 'question' column \(columns: problem, solution\); rename those columns to 'question' and 'answer'.*or give a 'prompt' column",
    ):
        load_dataset(path)


def test_csv_with_a_header_only(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text("question,answer\n", encoding="utf-8")
    with pytest.raises(DataError, match="the file has no rows"):
        load_dataset(path)


def test_dataset_object_gets_prompts_and_keeps_columns() -> None:
    from datasets import Dataset

    rows = Dataset.from_dict({"question": ["q1", "q2"], "answer": ["#### 1,000", "2"], "id": [10, 11]})
    ds = load_dataset(rows, style=PromptStyle.plain())
    assert ds.column_names == ["prompt", "question", "answer", "id"]
    assert list(ds["answer"]) == ["1000", "2"] and list(ds["id"]) == [10, 11]
    assert ds["prompt"][1] == build_messages("q2", PromptStyle.plain())


@pytest.mark.parametrize(
    "prompt",
    [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 6 x 7?"}], "What is 6 x 7?"],
    ids=["messages", "text"],
)
def test_a_prompt_column_with_an_answer_goes_as_written(prompt) -> None:
    from datasets import Dataset

    from grpo_lite.data.loaders import load_task

    rows = [{"prompt": prompt, "answer": "1,234", "solution": "#### 1,234"}]
    task = load_task(Dataset.from_list(rows))
    assert (task.shape, task.answer_kind) == ("prompts", None)
    assert task.dataset.to_list() == rows  # no question added, no system prompt, the answer as written


def test_a_question_column_beside_a_prompt_column_is_the_question_answer_shape() -> None:
    from datasets import Dataset

    from grpo_lite.data.loaders import load_task

    prompt = [{"role": "user", "content": "What is 6 x 7?"}]
    task = load_task(Dataset.from_list([{"prompt": prompt, "question": "What is 6 x 7?", "answer": "1,234"}]))
    assert (task.shape, task.answer_kind) == ("questions", "number")
    assert task.dataset[0]["prompt"] == prompt and task.dataset[0]["answer"] == "1234"  # the gold read as a number


def test_answer_kind_asked_of_a_prompt_column_is_refused() -> None:
    from datasets import Dataset

    with pytest.raises(ConfigError, match=r"has a 'prompt' column and goes to TRL as written.*drop answer_kind='text'"):
        load_dataset(Dataset.from_list([{"prompt": "q", "answer": "a"}]), answer_kind="text")


def test_dataset_with_a_bad_prompt_cell() -> None:
    from datasets import Dataset

    with pytest.raises(DataError, match=r"dataset row 1: 'prompt' must be text or a list"):
        load_dataset(Dataset.from_list([{"question": "q", "prompt": "", "answer": "1"}]))


def test_dataset_dict_needs_a_split() -> None:
    from datasets import Dataset, DatasetDict

    with pytest.raises(DataError, match=r"cannot load a DatasetDict.*ds\['train'\]"):
        load_dataset(DatasetDict({"train": Dataset.from_list(ROWS)}))


def test_path_object_and_limit(tmp_path: Path) -> None:
    ds = load_dataset(write_jsonl(tmp_path / "mine.jsonl", ROWS), limit=1)
    assert list(ds["answer"]) == ["7"]


@pytest.mark.parametrize("gold", ["#### 2e3", "#### 1e400", "#### 1 000", 1e400])
def test_a_gold_answer_in_another_notation_is_refused_naming_the_row(tmp_path: Path, gold: object) -> None:
    rows = [{"question": "q1", "answer": "#### 7"}, {"question": "q2", "answer": gold}]
    path = write_jsonl(tmp_path / "gold.jsonl", rows)
    with pytest.raises(DataError, match=r"gold\.jsonl, line 2: no usable number in 'answer'") as caught:
        load_gsm8k(source=path)
    assert "\n" not in str(caught.value)


# ----------------------------------------------------------------------------- the real GSM8K rows
def _gsm8k_dir() -> Path:
    env = os.environ.get(GSM8K_DIR_ENV)
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data" / "gsm8k"


@pytest.mark.gsm8k
@pytest.mark.parametrize(("split", "rows", "commas"), [("train", 7473, 79), ("test", 1319, 14)])
def test_every_gsm8k_gold_is_a_plain_number(split: str, rows: int, commas: int) -> None:
    folder = _gsm8k_dir()
    path = folder / f"{split}.jsonl"
    if not path.is_file():
        pytest.skip(f"GSM8K {split}.jsonl not found in {folder} (set {GSM8K_DIR_ENV} to a folder holding it)")
    ds = load_gsm8k(split, source=path)
    assert ds.num_rows == rows
    bad = [a for a in ds["answer"] if not PLAIN_NUMBER.match(a)]
    assert not bad
    with open(path, encoding="utf-8") as f:
        raw = [json.loads(line)["answer"].rsplit("####", 1)[1].strip() for line in f if line.strip()]
    with_commas = [i for i, gold in enumerate(raw) if "," in gold]
    assert len(with_commas) == commas  # 93 golds in all are written with thousands commas
    assert all(ds["answer"][i] == raw[i].replace(",", "") for i in with_commas)


# ----------------------------------------------------------------------------- docs stay in step with the registries
def test_docs_list_every_named_dataset_and_style() -> None:
    from grpo_lite.data.prompts import PROMPT_STYLES
    from grpo_lite.data.synthetic import TEMPLATES

    docs = (Path(__file__).resolve().parents[1] / "docs" / "datasets.md").read_text(encoding="utf-8")
    for name in (*DATASETS, *PROMPT_STYLES):
        assert f"| `{name}` |" in docs, name
    assert f"one of {len(TEMPLATES)} story *templates*" in docs


# ----------------------------------------------------------------------------- prompts pinned as they were
GSM8K_PROMPT = (
    "<|system|>\nRespond in the following format:\n<reasoning>\nyour step-by-step reasoning\n</reasoning>\n"
    "<answer>\nthe final answer, a number only\n</answer><|eot|>\n<|user|>\nA baker fills 4 trays with 9 rolls each. "
    "She sells 23 rolls in the morning. How many rolls does she have left?<|eot|>\n<|assistant|>\n<reasoning>\n"
    "The baker makes 4 x 9 = 36 rolls.\nAfter selling 23 of them, she has 36 - 23 = 13 rolls left.\n</reasoning>\n"
    "<answer>\n13\n</answer><|eot|>\n<|user|>\nAna has 3 kites and buys 4 more. How many kites?<|eot|>\n"
    "<|assistant|>\n<reasoning>\n"
)


def test_a_gsm8k_prompt_renders_byte_for_byte_as_before(tmp_path: Path, tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    from grpo_lite.data.prompts import apply_prompt_style

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    folder = write_jsonl(tmp_path / "gsm8k" / "train.jsonl", ROWS).parent
    for rows in (load_gsm8k("train", source=folder), load_dataset(str(folder))):
        ds = apply_prompt_style(rows, tokenizer)
        assert ds.column_names == ["prompt", "question", "answer", "prefill"]
        assert ds[0]["prompt"] == GSM8K_PROMPT and ds[0]["answer"] == "7"


def test_the_demos_rows_are_as_before() -> None:
    import hashlib

    ds = load_dataset("synthetic", split="train", style=PromptStyle.one_step(), limit=8, seed=0)
    assert ds.column_names == ["prompt", "question", "answer", "level"]
    assert hashlib.sha256(json.dumps(ds.to_list(), sort_keys=True).encode()).hexdigest()[:16] == "7767ae3201c9caef"


# ----------------------------------------------------------------------------- what TRL would trip on, said at load
@pytest.mark.parametrize("content", [None, [{"type": "text", "text": "What is 2 + 2?"}]], ids=["null", "parts"])
@pytest.mark.parametrize("columns", [{}, {"question": "What is 2 + 2?", "answer": "4"}], ids=["task", "question"])
def test_a_message_whose_content_is_not_text_is_one_line_naming_its_row(tmp_path: Path, content, columns) -> None:
    good = {"prompt": [{"role": "user", "content": "What is 1 + 1?"}], **columns}
    bad = {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": content}], **columns}
    path = write_jsonl(tmp_path / "task.jsonl", [good, bad])
    with pytest.raises(DataError, match=r"task\.jsonl, line 2: 'prompt' message 2 has content .*; write each "
                                        r"message's content as text, e\.g\. \{'role': 'user', 'content'"):  # fmt: skip
        load_dataset(str(path))
    assert load_dataset(str(write_jsonl(tmp_path / "ok.jsonl", [good, good]))).num_rows == 2  # text content loads


@pytest.mark.parametrize(
    "column", ["prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric"]
)
def test_a_column_named_as_trls_reward_arguments_is_refused(tmp_path: Path, column: str) -> None:
    rows = [{"prompt": "Say hi", column: "x"}]
    with pytest.raises(DataError, match=rf"task\.jsonl: the column '{column}' has the name of an argument TRL "
                                        rf"passes to reward functions itself; rename it \(e\.g\. to '{column}_'\)"):  # fmt: skip
        load_dataset(str(write_jsonl(tmp_path / "task.jsonl", rows)))
    with pytest.raises(DataError, match=rf"the column '{column}'"):  # the question/answer shape too
        load_dataset(str(write_jsonl(tmp_path / "task.jsonl", [{"question": "q", "answer": "1", column: "x"}])))
    for near in (f"{column}_", "completion", "prompt_id"):  # the names beside them load
        assert (
            near
            in load_dataset(str(write_jsonl(tmp_path / "ok.jsonl", [{"prompt": "Say hi", near: "x"}]))).column_names
        )


def test_a_file_is_read_once_by_the_builder_into_arrow_not_into_python_rows(tmp_path: Path, monkeypatch) -> None:
    import datasets
    from datasets.table import MemoryMappedTable

    rows = [{"prompt": [{"role": "user", "content": f"Reverse {i}: " + "abcdefgh" * 60}], "id": i} for i in range(2000)]
    path = write_jsonl(tmp_path / "big.jsonl", rows)
    whole_reads: list[str] = []
    for name in ("read_bytes", "read_text"):
        original = getattr(Path, name)

        def counted(self, *args, _original=original, **kwargs):
            whole_reads.append(str(self))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Path, name, counted)
    builds: list[dict] = []
    build = datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: builds.append(k) or build(*a, **k))
    ds = load_dataset(str(path))
    assert str(path) not in whole_reads  # never read whole into Python
    assert [k.get("streaming", False) for k in builds] == [False]  # one read, by the builder, into arrow
    assert isinstance(ds.data, MemoryMappedTable) and ds.cache_files  # the rows stay in the memory-mapped table
    assert ds.num_rows == 2000 and ds[1999] == rows[1999]
    few = load_dataset(str(path), limit=3)  # a limit selects rows of that table: it copies none
    assert isinstance(few.data, MemoryMappedTable) and few.to_list() == rows[:3]
