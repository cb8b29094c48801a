"""GGUF export: round trips through transformers' own GGUF loader, the q/k layout, LoRA merge, carried
metadata, and the errors that leave nothing half-written.

The tiny model's q and k weights are scaled up (x8) so that attention is peaked: a wrong q/k layout then
moves the log-probs by ~0.4 instead of hiding in near-uniform attention (the negative control checks it).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("gguf")
torch = pytest.importorskip("torch")

from grpo_lite import ConfigError, ExportError, ModelError, export_gguf  # noqa: E402

TEXTS = ["<reasoning>\nTom has 12 apples + 5 = 17\n</reasoning>", "how many books does Ana have left? 45 and 7 more"]


@pytest.fixture(scope="module")
def sharp_model_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama with its q and k projections scaled by 8 (peaked attention)."""
    from transformers import AutoModelForCausalLM

    out = tmp_path_factory.mktemp("sharp") / "model"
    shutil.copytree(tiny_model_dir, out)
    model = AutoModelForCausalLM.from_pretrained(out)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(8)
            layer.self_attn.k_proj.weight.mul_(8)
    model.save_pretrained(out)
    return out


def _logprobs(model, tokenizer):  # noqa: ANN001, ANN202
    enc = tokenizer(TEXTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = torch.log_softmax(model(**enc).logits.float(), -1)
    return out[enc["attention_mask"].bool()]


def _read_back(path: Path):  # noqa: ANN202
    """The exported file as transformers' own GGUF loader reads it (model and tokenizer)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def _compare(model_dir: Path, gguf_path: Path) -> tuple[float, float]:
    """(max abs diff of log-probs, share of equal argmax tokens) between a folder and its GGUF."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ref = _logprobs(AutoModelForCausalLM.from_pretrained(model_dir).eval(), tokenizer)
    back, _ = _read_back(gguf_path)
    got = _logprobs(back, tokenizer)
    return (ref - got).abs().max().item(), (ref.argmax(-1) == got.argmax(-1)).float().mean().item()


@pytest.mark.parametrize(("quantization", "tolerance"), [("f16", 1e-2), ("q8_0", 5e-2)])
def test_tiny_model_round_trips_through_transformers_gguf_loader(sharp_model_dir, tmp_path, quantization, tolerance):
    path = export_gguf(sharp_model_dir, tmp_path / f"tiny-{quantization}.gguf", quantization)
    worst, same_argmax = _compare(sharp_model_dir, path)
    assert worst <= tolerance and same_argmax == 1.0, (worst, same_argmax)
    from transformers import AutoTokenizer

    ours = AutoTokenizer.from_pretrained(sharp_model_dir)
    _, theirs = _read_back(path)
    assert [theirs(t)["input_ids"] for t in TEXTS] == [ours(t)["input_ids"] for t in TEXTS]
    assert theirs.chat_template == ours.chat_template
    assert (theirs.bos_token, theirs.eos_token, theirs.pad_token) == (ours.bos_token, ours.eos_token, ours.pad_token)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary file left behind


def test_the_qk_layout_matters(sharp_model_dir, tmp_path, monkeypatch):
    """Negative control: without llama.cpp's q/k row order the round trip is far off (0.4 against 5e-4)."""
    from grpo_lite.export import tensors

    monkeypatch.setattr(tensors, "permute_rows", lambda weight, n_head: weight)
    worst, _ = _compare(sharp_model_dir, export_gguf(sharp_model_dir, tmp_path / "unpermuted.gguf", "f16"))
    assert worst > 0.1


def test_tensor_names_types_and_tied_embedding(sharp_model_dir, tmp_path):
    import gguf

    reader = gguf.GGUFReader(export_gguf(sharp_model_dir, tmp_path / "t.gguf", "q4_0"))
    kinds = {t.name: t.tensor_type.name for t in reader.tensors}
    assert "output.weight" not in kinds  # tied: llama.cpp reads token_embd for the output
    assert kinds["token_embd.weight"] == "Q8_0" and kinds["blk.0.attn_q.weight"] == "Q4_0"
    assert kinds["blk.1.ffn_norm.weight"] == "F32" and kinds["output_norm.weight"] == "F32"
    assert len(kinds) == 1 + 2 * 9 + 1
    fields = reader.fields
    assert fields["general.architecture"].contents() == "llama" and fields["general.file_type"].contents() == 2
    assert fields["general.type"].contents() == "model" and fields["general.name"].contents() == "model"  # the folder
    assert fields["llama.block_count"].contents() == 2 and fields["llama.attention.head_count_kv"].contents() == 2
    assert fields["tokenizer.ggml.model"].contents() == "gpt2" and fields["tokenizer.ggml.pre"].contents() == "gpt-2"
    types = fields["tokenizer.ggml.token_type"].contents()
    assert fields["tokenizer.ggml.tokens"].contents()[2] == "<|eot|>"
    assert types[:6] == [gguf.TokenType.CONTROL] * 6 and set(types[6:]) == {gguf.TokenType.NORMAL}  # the 6 specials


@pytest.mark.parametrize("quantization", ["f16", "q4_0"])
def test_every_tensor_lies_at_its_aligned_offset_as_the_writer_planned(sharp_model_dir, tmp_path, monkeypatch,
                                                                      quantization):  # fmt: skip
    """GGUF's layout read back: ``general.alignment`` absent or GGUF's default 32 (the spec asks for a multiple of 8;
    llama.cpp maps each tensor at its offset), the data section and every tensor at a multiple of it, one after the
    other in the writer's order with only the padding between, the file as long as the size plan said, and at each
    offset the bytes the writer was given."""
    import gguf
    import numpy as np

    from grpo_lite.export import gguf_file

    given: dict[str, np.ndarray] = {}
    writers: list = []
    add = gguf.GGUFWriter.add_tensor

    def keep(self, name, tensor, *args, **kwargs):  # noqa: ANN001, ANN202
        given[name] = tensor
        writers[:] = [self]
        return add(self, name, tensor, *args, **kwargs)

    monkeypatch.setattr(gguf.GGUFWriter, "add_tensor", keep)
    path = export_gguf(sharp_model_dir, tmp_path / "a.gguf", quantization)
    reader = gguf.GGUFReader(path)
    key = reader.fields.get("general.alignment")
    align = gguf.GGUF_DEFAULT_ALIGNMENT if key is None else int(key.contents())
    assert align == reader.alignment == 32
    planned = [(name, info.nbytes) for name, info in writers[0].tensors[0].items()]
    assert [(t.name, int(t.n_bytes)) for t in reader.tensors] == planned
    offsets = [int(t.data_offset) for t in reader.tensors]
    assert reader.data_offset % align == 0 and offsets[0] == reader.data_offset

    def padded(n: int) -> int:
        return -(-n // align) * align

    assert offsets == [offsets[0] + sum(padded(n) for _, n in planned[:i]) for i in range(len(planned))]
    assert path.stat().st_size == offsets[-1] + padded(planned[-1][1]) == gguf_file._file_bytes(writers[0])
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    for (name, size), offset in zip(planned, offsets):
        expected = np.asarray(gguf.LazyNumpyTensor.to_eager(given[name])).tobytes()
        assert raw[offset : offset + size].tobytes() == expected, name


@pytest.mark.parametrize("alignment", [None, 64, 1])
def test_the_size_plan_is_the_size_gguf_writes_for_every_kind_of_key(tmp_path, alignment):
    """The bytes a full disk's message asks for are the file's: a key of every GGUF value type (a source GGUF's
    carried keys can be any), arrays of strings, numbers and bytes, tensors whose sizes are not multiples of the
    alignment, and a custom alignment (1: no padding hides a byte counted wrong)."""
    import gguf
    import numpy as np

    from grpo_lite.export.gguf_file import _file_bytes

    writer = gguf.GGUFWriter(path=None, arch="llama")
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    kinds = gguf.GGUFValueType
    for kind, value in [(kinds.UINT8, 1), (kinds.INT8, -1), (kinds.UINT16, 2), (kinds.INT16, -2), (kinds.UINT32, 3),
                        (kinds.INT32, -3), (kinds.FLOAT32, 0.5), (kinds.BOOL, True), (kinds.STRING, "naïve"),
                        (kinds.UINT64, 4), (kinds.INT64, -4), (kinds.FLOAT64, 0.25)]:  # fmt: skip
        writer.add_key_value(f"test.{kind.name.lower()}", value, kind)
    writer.add_array("test.strings", ["a", "bcd", ""])
    writer.add_array("test.numbers", [1, 2, 3])
    writer.add_array("test.one", [5])
    writer.add_key_value("test.floats", [0.5, 1.5], kinds.ARRAY, sub_type=kinds.FLOAT32)
    writer.add_key_value("test.bytes", b"\x00\x01\x02", kinds.ARRAY)
    writer.add_key_value("test.int64s", [7, 8], kinds.ARRAY, sub_type=kinds.INT64)
    writer.add_tensor("a.weight", np.arange(3, dtype=np.float32))
    writer.add_tensor("bb.weight", np.ones((5, 1), dtype=np.float16))
    writer.add_tensor("c.weight", np.zeros(40, dtype=np.float32))
    planned, path = _file_bytes(writer), tmp_path / "keys.gguf"
    writer.write_header_to_file(path=path)
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()
    assert planned == path.stat().st_size
    assert {t.name: t.data.tolist() for t in gguf.GGUFReader(path).tensors}["a.weight"] == [0.0, 1.0, 2.0]


def _tensors(path: Path) -> dict[str, bytes]:
    import gguf

    return {t.name: bytes(t.data.tobytes()) for t in gguf.GGUFReader(path).tensors}


def test_a_lora_adapter_is_merged_first(sharp_model_dir, tmp_path):
    """The adapter is merged weight by weight as the file is written: the same tensors as PEFT's own
    merge_and_unload, and the GGUF's log-probs are the merged model's, not the base's."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_lite.export.source import lazily_mergeable

    base = AutoModelForCausalLM.from_pretrained(sharp_model_dir)
    peft = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False)
    )  # random A and B: the adapter moves the output
    adapter = tmp_path / "adapter"
    peft.save_pretrained(adapter)
    tokenizer = AutoTokenizer.from_pretrained(sharp_model_dir)
    tokenizer.save_pretrained(adapter)
    assert lazily_mergeable(peft)
    lazy = export_gguf(adapter, tmp_path / "lazy.gguf", "f16")
    merged_model = peft.merge_and_unload().eval()
    merged_dir = tmp_path / "merged"
    merged_model.save_pretrained(merged_dir)
    tokenizer.save_pretrained(merged_dir)
    assert _tensors(lazy) == _tensors(export_gguf(merged_dir, tmp_path / "merged.gguf", "f16"))
    back, _ = _read_back(lazy)
    got, merged = _logprobs(back, tokenizer), _logprobs(merged_model, tokenizer)
    plain = _logprobs(AutoModelForCausalLM.from_pretrained(sharp_model_dir).eval(), tokenizer)
    assert (merged - got).abs().max().item() <= 1e-2 < (plain - got).abs().max().item()
    dora = get_peft_model(
        AutoModelForCausalLM.from_pretrained(sharp_model_dir), LoraConfig(r=4, target_modules=["q_proj"], use_dora=True)
    )
    assert not lazily_mergeable(dora)  # left to PEFT's own merge


def test_train_exports_the_model_it_holds_without_changing_it(tiny_model_dir, tmp_path, monkeypatch):
    """train(export="gguf") reads the LoRA model in memory (nothing is loaded again): the same tensors as
    an export from disk, and the returned model is still the un-merged PeftModel, as saved."""
    from grpo_lite import train
    from grpo_lite.export.source import ExportSource

    def from_disk(self):  # noqa: ANN001, ANN202
        raise AssertionError("train() loaded the model again from disk")

    with monkeypatch.context() as patch:
        patch.setattr(ExportSource, "load_model", from_disk)
        result = train(
            str(tiny_model_dir),
            dataset="synthetic",
            output_dir=tmp_path / "run",
            max_steps=1,
            method="lora",
            num_generations=2,
            per_device_train_batch_size=2,
            max_completion_length=8,
            save_strategy="no",
            quiet=True,
            export="gguf",
        )
    assert result.exported.gguf == tmp_path / "run" / "final.gguf" and hasattr(result.model, "peft_config")
    assert _tensors(result.exported.gguf) == _tensors(export_gguf(tmp_path / "run", tmp_path / "disk.gguf"))
    from grpo_lite.evaluation import load_for_eval

    saved, _ = load_for_eval(tmp_path / "run" / "final")  # written before the export ran
    mine, theirs = result.model.state_dict(), saved.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)


def test_qwen2_round_trips_with_its_biases(tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(8)
            layer.self_attn.q_proj.bias.normal_(0, 0.5)
            layer.self_attn.k_proj.bias.normal_(0, 0.5)
    folder = tmp_path / "qwen"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    path = export_gguf(folder, tmp_path / "qwen.gguf", "f16")
    worst, same = _compare(folder, path)
    assert worst <= 1e-2 and same == 1.0
    import gguf

    names = {t.name for t in gguf.GGUFReader(path).tensors}
    assert {"output.weight", "blk.0.attn_q.bias", "blk.1.attn_k.bias"} <= names


def test_llama3_rope_scaling_is_written_as_rope_freqs():
    """llama.cpp divides each frequency by rope_freqs: that must give transformers' llama3 frequencies."""
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from grpo_lite.export.tensors import rope_freqs

    config = LlamaConfig(
        hidden_size=256,
        num_attention_heads=2,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    )
    scaled, _ = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
    plain = 1.0 / (500000.0 ** (torch.arange(0, 128, 2, dtype=torch.float32) / 128))
    assert torch.allclose(plain / rope_freqs(config), scaled, rtol=1e-5)
    assert rope_freqs(LlamaConfig(hidden_size=256, num_attention_heads=2)) is None


def _fake_run(tmp_path: Path, model_dir: Path, origin: Path | None) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copytree(model_dir, run / "final")
    record = {
        "model": str(origin) if origin else str(model_dir),
        "stop_strings": ["</answer>"],
        "prompt_style": {"system_prompt": "Answer.", "one_shot": False, "prefill": "", "examples": []},
    }
    (run / "run.json").write_text(json.dumps(record))
    return run


def test_metadata_of_the_source_gguf_is_carried_over(sharp_model_dir, tmp_path):
    """A run that started from a GGUF file: every key of that file is in the export, with its value."""
    import gguf

    origin = export_gguf(sharp_model_dir, tmp_path / "origin.gguf", "q4_0")
    _add_key(origin, "tokenizer.ggml.custom_marker", "carried")
    # an array whose item type a writer would not infer from its values (Python ints are written as INT32)
    _add_key(origin, "tokenizer.ggml.custom_ids", [1, 2, 3], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT64)
    run = _fake_run(tmp_path, sharp_model_dir, origin)
    out = export_gguf(run, quantization="q8_0")
    assert out == run / "final.gguf"
    source, exported = gguf.GGUFReader(origin).fields, gguf.GGUFReader(out).fields
    for key in source:
        if not key.startswith("GGUF.") and key != "general.file_type":
            assert exported[key].contents() == source[key].contents(), key
            assert exported[key].types == source[key].types, key  # the value types too, an array's items
    assert exported["tokenizer.ggml.custom_ids"].types == [gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT64]
    assert (
        exported["general.file_type"].contents() == 7
        and exported["tokenizer.ggml.custom_marker"].contents() == "carried"
    )


def _add_key(path: Path, key: str, value: Any, value_type: Any = None, item: Any = None) -> None:
    """Rewrite a GGUF file with one more key, a string unless ``value_type`` (and an array's ``item``) says otherwise (the
    tensors copied as they are)."""
    import gguf

    reader = gguf.GGUFReader(path)
    writer = gguf.GGUFWriter(path=None, arch=reader.fields["general.architecture"].contents())
    for name, field in reader.fields.items():
        if not name.startswith("GGUF.") and name != "general.architecture":
            kind = field.types[0]
            writer.add_key_value(
                name, field.contents(), kind, sub_type=field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
            )
    writer.add_key_value(key, value, value_type or gguf.GGUFValueType.STRING, sub_type=item)
    for t in reader.tensors:
        writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    writer.write_header_to_file(path=path.with_suffix(".new"))
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(path.with_suffix(".new"), path)


def test_a_tokenizer_the_export_cannot_write_is_named_by_its_folder(sharp_model_dir, tmp_path):
    model = tmp_path / "no-bpe"
    shutil.copytree(sharp_model_dir, model)
    (model / "tokenizer.json").unlink()
    with pytest.raises(
        ModelError, match=r"^cannot export the tokenizer of no-bpe to GGUF: this export writes byte-level"
    ):
        export_gguf(model, tmp_path / "t.gguf", "f16")
    assert not (tmp_path / "t.gguf").exists()


def test_a_source_gguf_that_does_not_match_the_model_is_refused(sharp_model_dir, tmp_path):
    from grpo_lite.tiny import build_tiny_model

    other = build_tiny_model(tmp_path / "three_layers", num_layers=3)
    origin = export_gguf(other, tmp_path / "other.gguf", "q8_0")
    run = _fake_run(tmp_path, sharp_model_dir, origin)
    with pytest.raises(ModelError, match="llama.block_count is 2 in the model's config and 3 in the file"):
        export_gguf(run)
    assert not (run / "final.gguf").exists()


def test_unsupported_architecture_is_refused_before_anything_is_loaded(tmp_path):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}))
    with pytest.raises(
        ModelError,
        match=r"^cannot export gpt2 to GGUF: its architecture GPT2LMHeadModel is not supported; this "
        "export writes LlamaForCausalLM",
    ):
        export_gguf(folder, tmp_path / "out.gguf")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpt2"]


def test_a_path_or_package_the_export_cannot_use_is_one_line_naming_it(sharp_model_dir, tmp_path, monkeypatch):
    with pytest.raises(ModelError) as refused:
        export_gguf(sharp_model_dir, tmp_path / "model.bin")
    assert str(refused.value) == f"the export path {str(tmp_path / 'model.bin')!r} must end in .gguf"
    with pytest.raises(ExportError) as refused:
        export_gguf(sharp_model_dir, tmp_path / "missing" / "model.gguf")
    assert str(refused.value) == (
        f"cannot write {tmp_path / 'missing' / 'model.gguf'}: the folder {tmp_path / 'missing'} does not exist; "
        "create it or pass another path"
    )
    monkeypatch.setitem(sys.modules, "gguf", None)  # not installed: importing it raises ImportError
    with pytest.raises(ModelError) as refused:
        export_gguf(sharp_model_dir, tmp_path / "model.gguf")
    assert str(refused.value) == "GGUF export needs the gguf package: pip install 'grpo-lite[gguf]'"
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def _interrupted_run(root: Path) -> Path:
    (root / "run").mkdir()
    (root / "run" / "run.json").write_text("{}")
    return root / "run"


def _empty_folder(root: Path) -> Path:
    (root / "empty").mkdir()
    return root / "empty"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda root: root / "missing", "no such folder"),
        (_interrupted_run, "has no final model"),
        (_empty_folder, "neither config.json"),
    ],
)
def test_a_missing_run_or_model_gets_a_clear_error(tmp_path, make, message):
    with pytest.raises(ModelError, match=message):
        export_gguf(make(tmp_path), tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()


def test_unknown_quantization_is_a_config_error(sharp_model_dir, tmp_path):
    with pytest.raises(ConfigError, match="choose one of f16, q8_0, q4_0"):
        export_gguf(sharp_model_dir, tmp_path / "x.gguf", "q4_k_m")  # type: ignore[arg-type]


def test_a_full_disk_leaves_no_partial_file_and_keeps_the_old_one(sharp_model_dir, tmp_path, monkeypatch):
    import gguf

    target = tmp_path / "model.gguf"
    target.write_bytes(b"the previous export")

    def full_disk(self, *, progress=False):  # noqa: ANN001, ANN202 - writes a little, then the disk is full
        self.fout[0].write(b"\0" * 4096)
        raise OSError(errno.ENOSPC, "No space left on device")

    from grpo_lite.export import gguf_file

    planned = []
    real = gguf_file._full_disk
    monkeypatch.setattr(
        gguf_file, "_full_disk", lambda path, files, held: planned.append(files) or real(path, files, held)
    )
    monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", full_disk)
    with pytest.raises(
        ExportError,
        match=r"the disk holding .* is full \(.* free, the export needs .*\): free .* or "
        r"export elsewhere with -o PATH .*; nothing was written there",
    ):
        export_gguf(sharp_model_dir, target, "q8_0")
    assert len(planned) == 1 and len(planned[0]) == 1  # what the export needs: the GGUF alone, no Modelfile to come
    assert target.read_bytes() == b"the previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.gguf"]


def test_cli_export_writes_the_file_and_the_modelfile(sharp_model_dir, tmp_path, capsys):
    from grpo_lite.cli import main

    run = _fake_run(tmp_path, sharp_model_dir, None)
    assert main(["export", str(run), "--gguf", "--quant", "f16"]) == 0
    out = capsys.readouterr().out
    assert f"GGUF: {run / 'final.gguf'} (f16," in out and "llama-cli -m" in out and "ollama create run" in out
    modelfile = (run / "final.Modelfile").read_text()
    assert 'FROM ./final.gguf\nSYSTEM """Answer."""\nPARAMETER temperature 0\nPARAMETER stop "</answer>"' in modelfile
    assert (run / "final.system_prompt.txt").read_text() == "Answer."
    assert main(["export", str(tmp_path / "nope"), "--gguf"]) == 2
    assert "error: cannot export" in capsys.readouterr().err


def test_the_printed_commands_run_as_printed_in_a_shell_for_paths_with_spaces(tmp_path):
    import shlex

    from grpo_lite.export.runtimes import RuntimeFiles, llama_cli_command

    folder = tmp_path / "My Runs" / "run 1"
    gguf, modelfile, system = (folder / f"my model.{ext}" for ext in ("gguf", "Modelfile", "system_prompt.txt"))
    files = RuntimeFiles(gguf, modelfile, system, llama_cli_command(gguf, system))
    by_runtime = dict(line.split(": ", 1) for line in files.lines())
    assert shlex.split(by_runtime["llama.cpp"]) == ["llama-cli", "-m", str(gguf), "--temp", "0", "-sysf", str(system)]
    create, then = by_runtime["Ollama"].strip().split(" && ")
    assert shlex.split(create) == ["ollama", "create", "run-1", "-f", str(modelfile)]
    assert shlex.split(then) == ["ollama", "run", "run-1"]


def test_cli_export_prints_its_lines_only(sharp_model_dir, tmp_path, capsys, recwarn):
    # the libraries' noise is filtered as around train(): transformers' bars, the is_gradient_checkpointing warning
    from grpo_lite.cli import main

    run = _fake_run(tmp_path, sharp_model_dir, None)
    recwarn.clear()
    assert main(["export", str(run), "--gguf", "--quant", "f16"]) == 0
    captured = capsys.readouterr()
    assert "Loading weights" not in captured.err and "%|" not in captured.err, captured.err
    assert not [w for w in recwarn if issubclass(w.category, FutureWarning)], [str(w.message) for w in recwarn]
    assert captured.out.startswith(f"GGUF: {run / 'final.gguf'}")


def test_train_refuses_an_unknown_export_before_touching_the_folder(tiny_model_dir, tmp_path):
    from grpo_lite import train

    (tmp_path / "keep.txt").write_text("an earlier run")
    with pytest.raises(ConfigError, match="export='onnx' is not valid"):
        train(str(tiny_model_dir), output_dir=tmp_path, overwrite=True, export="onnx")  # type: ignore[arg-type]
    assert (tmp_path / "keep.txt").read_text() == "an earlier run"


def test_the_export_runs_around_the_pipeline_not_inside_it(tmp_path):
    """grpo_lite.train takes export= (its arguments are the pipeline's, with export in place of the pipeline's
    ``after`` hook, and its docstring says what export writes); the pipeline itself has no export argument: an
    export= given to it is an unknown setting, refused before anything is written, and it never imports the export."""
    import inspect
    import subprocess
    import sys

    import grpo_lite
    from grpo_lite.training import pipeline

    public, core = inspect.signature(grpo_lite.train).parameters, inspect.signature(pipeline.train).parameters
    assert public["export"].default is None and public["export"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "export" not in core and "after" not in public
    assert [name for name in public if name != "export"] == [name for name in core if name != "after"]
    assert '    export: ``"gguf"`` also writes ``final.gguf``' in (grpo_lite.train.__doc__ or "")
    assert "    export:" not in (pipeline.train.__doc__ or "")
    with pytest.raises(ConfigError, match=r"unknown training setting\(s\): 'export'"):
        pipeline.train("Qwen2.5-0.5B-Instruct", output_dir=tmp_path / "run", export="gguf")
    assert not (tmp_path / "run").exists()
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, grpo_lite.training.pipeline; print(sorted(sys.modules))"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "grpo_lite.training.attempts" in loaded and "grpo_lite.export" not in loaded


@pytest.mark.slow
def test_llama_cpp_decodes_the_tiny_export_like_transformers(sharp_model_dir, tmp_path):
    """llama.cpp itself reads the file: the same 24 greedy tokens as transformers' reader of the same file.

    Needs a llama.cpp build (``LLAMA_CPP_BUILD`` names its folder, with ``bin/llama-completion``;
    docs/export.md says how to build one); skipped without it.
    """
    import subprocess

    binary = Path(os.environ.get("LLAMA_CPP_BUILD", "/nonexistent")) / "bin" / "llama-completion"
    if not binary.is_file():
        pytest.skip("no llama.cpp build: set LLAMA_CPP_BUILD to a folder with bin/llama-completion")
    path = export_gguf(sharp_model_dir, tmp_path / "tiny.gguf", "f16")
    prompt = "<reasoning>\nAna sells 45 books and Tom has 12 apples"
    model, tokenizer = _read_back(path)
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    out = model.generate(ids, max_new_tokens=24, min_new_tokens=24, do_sample=False, pad_token_id=0)
    ours = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    (tmp_path / "prompt.txt").write_text(prompt + "\n")
    done = subprocess.run(
        [
            str(binary),
            "-m",
            str(path),
            "-f",
            str(tmp_path / "prompt.txt"),
            "-n",
            "24",
            "--temp",
            "0",
            "--ignore-eos",
            "-no-cnv",
            "--no-display-prompt",
            "--no-warmup",
            "--simple-io",
            "--no-escape",
            "-t",
            "1",
            "-c",
            "256",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == ours + "\n\n" and len(ours) > 10, (done.stdout, ours)  # llama-completion ends with 2 newlines


def test_export_docs_name_what_the_code_supports():
    from grpo_lite.export.hparams import supported_text
    from grpo_lite.export.tensors import QUANTIZATIONS
    from grpo_lite.export.vocab import PRE_TOKENIZERS

    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "export.md").read_text().split())
    assert supported_text() in text
    assert all(f"| `{q}`" in text for q in QUANTIZATIONS) and all(f"`{p}`" in text for p in PRE_TOKENIZERS.values())
