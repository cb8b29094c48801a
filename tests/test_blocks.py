"""One decoder block traced from the model's own class (grpo_lite.memory.meta.block), and the planner scaling it."""

from __future__ import annotations

import pytest

from grpo_lite.errors import ConfigError
from grpo_lite.memory import blocks, tokens
from grpo_lite.memory.architectures import find_architecture
from grpo_lite.memory.estimate import FORMULAS, estimate
from grpo_lite.memory.meta import block
from grpo_lite.memory.models import transformers_config
from grpo_lite.memory.step_settings import StepSettings

LORA = dict(
    device="cuda",
    budget_gib=23.0,
    method="lora",
    per_device_train_batch_size=8,
    num_generations=8,
    max_completion_length=512,
    shared_prefix=False,
)


def _terms(name: str, **settings: object) -> tuple[block.BlockTerms, StepSettings]:
    arch = find_architecture(name)
    assert arch is not None
    s = StepSettings.resolve(**{**LORA, **settings})
    terms = block.traced_block_terms(arch, s)
    assert terms is not None
    return terms, s


def test_qwen3_keeps_more_than_the_llama_formula_says() -> None:
    """Qwen3's q/k norms keep fp32 copies of q and k: the simulation holds ~13% more at the blocks' backward than the
    Llama formula plans (Qwen3-0.6B, LoRA, no checkpointing); the traced block says more, by the norms' size."""
    terms, s = _terms("Qwen3-0.6B", gradient_checkpointing=False)
    arch = find_architecture("Qwen3-0.6B")
    seq, n = 768, 8 * 768
    formula, _ = tokens.per_layer_token_bytes(arch, s, seq)
    traced = terms.saved_at(seq, tokens=n)
    assert traced > 1.15 * formula
    qk_norms = 4 * (arch.q_dim + arch.kv_dim)  # the fp32 inputs the two norms keep, per token
    assert traced - formula == pytest.approx(qk_norms, rel=0.25)


def test_the_llama_block_traces_to_its_formula() -> None:
    """Where the formulas were written and checked (a Qwen2 block, full fine-tuning), the trace agrees."""
    terms, s = _terms("Qwen2.5-0.5B", method="full", gradient_checkpointing=False)
    formula, _ = tokens.per_layer_token_bytes(find_architecture("Qwen2.5-0.5B"), s, 768)
    assert terms.saved_at(768, tokens=8 * 768) == pytest.approx(formula, rel=0.02)
    assert "Qwen2DecoderLayer" in terms.how


def test_checkpointing_keeps_a_checkpoint_and_recomputes_in_backward() -> None:
    plain, _ = _terms("Qwen3-0.6B", gradient_checkpointing=False)
    ckpt, _ = _terms("Qwen3-0.6B", gradient_checkpointing=True)
    seq, n = 768, 8 * 768
    assert ckpt.saved_at(seq, tokens=n) < plain.saved_at(seq, tokens=n) / 10
    assert ckpt.backward_at(seq, tokens=n) > plain.saved_at(seq, tokens=n)  # the block is recomputed


def test_gemma2_traces_its_sliding_and_full_layers() -> None:
    terms, _ = _terms("gemma-2-2b", gradient_checkpointing=True)
    assert "Gemma2DecoderLayer" in terms.how and "2 layer kinds" in terms.how


def test_the_backward_plans_row_counts_and_lengths_it_was_not_traced_at() -> None:
    """Gemma 2's eager attention keeps ``S x S`` scores. With checkpointing under QLoRA the recomputed NF4 weights
    lead a block's backward at few tokens, the attention at many: traced one row at 256, 1024 and 4096 tokens, the
    plan for 8 rows of 768 (and 2 of 2048) must hold what those rows traced at once hold (one fit through the
    three high points planned 15% less at 8 x 768)."""
    terms, s = _terms("gemma-2-2b", method="qlora", gradient_checkpointing=True)
    arch = find_architecture("gemma-2-2b")
    config = transformers_config(arch)
    for kind in block._kinds(config):  # sliding and full attention hold the same below the window
        for seq, rows in ((768, 8), (2048, 2)):
            saved, timeline = block._trace(arch, s, config, dict(kind), seq, rows)
            assert saved == pytest.approx(terms.saved_at(seq, tokens=rows * seq))
            assert terms.backward_at(seq, tokens=rows * seq) == pytest.approx(max(timeline), rel=0.002)
    assert len(terms.backward) < 20  # only the moments that can lead are kept


def test_traces_are_cached_on_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    first, s = _terms("Qwen3-0.6B", gradient_checkpointing=True)
    monkeypatch.setattr(block, "_MEMORY", {})
    monkeypatch.setattr(block, "_trace_all", lambda *a: pytest.fail("traced again instead of reading the cache"))
    assert block.traced_block_terms(find_architecture("Qwen3-0.6B"), s) == first


def test_the_estimate_says_where_its_block_terms_come_from() -> None:
    traced = estimate("Qwen3-0.6B", blocks="auto", **LORA)
    plain = estimate("Qwen3-0.6B", blocks="formulas", **LORA)
    llama = estimate("Qwen2.5-0.5B", blocks="auto", **LORA)
    assert traced.block_terms.startswith("traced: Qwen3DecoderLayer") and plain.block_terms == FORMULAS
    assert llama.block_terms == FORMULAS  # auto keeps the formulas for the blocks they describe
    assert traced.phase_gib()["backward_layers"] > 1.05 * plain.phase_gib()["backward_layers"]


def test_cpu_plans_and_unknown_modes_keep_or_refuse() -> None:
    arch = find_architecture("Qwen3-0.6B")
    assert block.traced_block_terms(arch, StepSettings.resolve(device="cpu", method="lora")) is None
    assert blocks.block_source("formulas") is None
    with pytest.raises(ConfigError, match="blocks='fast' is not valid; choose one of auto, traced, formulas"):
        blocks.block_source("fast")  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_held_out_architecture_plans_what_the_simulation_holds() -> None:
    """OLMo 2 (post-norms, q/k norms over all heads) was never looked at while writing the tracer."""
    from grpo_lite.planning.choose import plan
    from grpo_lite.simulation.run import simulate

    the_plan = plan(
        "allenai/OLMo-2-0425-1B-Instruct",
        24,
        blocks="auto",
        method="lora",
        gradient_checkpointing=False,
        num_generations=8,
        max_completion_length=256,
    )
    assert the_plan.estimate.block_terms.startswith("traced: Olmo2DecoderLayer")
    sim = simulate(the_plan)
    assert sim.worst_error() < 0.05, [(c.phase, round(c.ratio, 3)) for c in sim.checks()]


def test_a_config_folder_traces_as_its_table_row(tmp_path) -> None:  # noqa: ANN001
    from grpo_lite.memory.models import resolve_model

    arch = find_architecture("OLMo-2-0425-1B")
    transformers_config(arch).save_pretrained(tmp_path)
    s = StepSettings.resolve(**{**LORA, "gradient_checkpointing": True})
    local = block.traced_block_terms(resolve_model(str(tmp_path)).arch, s)
    assert local is not None and local == block.traced_block_terms(arch, s)
