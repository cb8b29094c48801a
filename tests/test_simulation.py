"""The GPU step simulated at full size on the meta device, and the planner held to it.

Full-size simulations take seconds each (5-20 s on 2 busy cores, most of it building the model on meta; the
first pays the imports). The stored rows of docs/memory_simulation.json are checked against the current
planner without simulating (milliseconds), so a planner change that leaves the simulation is caught at once.
"""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path

import pytest
import torch

from grpo_lite.errors import ConfigError
from grpo_lite.memory import terms, tokens
from grpo_lite.memory.estimate import estimate
from grpo_lite.memory.meta.attention import choose_kernel
from grpo_lite.planning import hardware
from grpo_lite.planning.choose import plan
from grpo_lite.planning.hardware import Extras
from grpo_lite.simulation.result import TOLERANCE, planned_tensor_bytes

ROOT = Path(__file__).resolve().parents[1]
STORED = json.loads((ROOT / "docs" / "memory_simulation.json").read_text(encoding="utf-8"))["rows"]
HELD_OUT = json.loads((ROOT / "docs" / "memory_heldout.json").read_text(encoding="utf-8"))["rows"]  # no term tuned
PLAIN = Extras(liger_kernel=False, vllm=False, galore_torch=True, bitsandbytes=True, deepspeed=False)


@pytest.fixture(autouse=True)
def _plain_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan as benchmarks/gpu_sim.py does: bitsandbytes and galore-torch, no liger-kernel, no vLLM."""
    monkeypatch.setattr(hardware, "installed_extras", lambda: PLAIN)


_CACHE: dict[str, object] = {}


def _simulate(model: str, budget: float, **kwargs: object):  # noqa: ANN202
    """One simulation per configuration for the whole module (they take seconds)."""
    from grpo_lite.simulation.run import simulate

    key = json.dumps([model, budget, kwargs], sort_keys=True)
    if key not in _CACHE:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(hardware, "installed_extras", lambda: PLAIN)
            _CACHE[key] = simulate(plan(model, budget, **kwargs))
    return _CACHE[key]


def _held(sim) -> None:  # noqa: ANN001
    checks = sim.checks()
    assert {c.phase for c in checks} >= {"generation", "backward_head", "backward_layers"}
    for c in checks:
        assert abs(c.ratio - 1) <= TOLERANCE, (c.phase, c.planned, c.measured)
    forward = next(p for p in sim.phases if p.name == "forward")
    assert forward.peak_bytes <= sim.estimate.peak.total_bytes  # the forward never outgrows the planned peak


# ---- the planner held to full-size simulations ------------------------------------------------------------------


def test_llama_8b_qlora_on_a_16_gb_card() -> None:
    sim = _simulate("meta-llama/Llama-3.1-8B-Instruct", 16)
    assert sim.preset == "qlora"
    _held(sim)
    assert sim.choices.attention["efficient"] > 0 and "flash" not in sim.choices.attention  # padded batches
    assert "Triton path" in sim.choices.lm_head and "8-bit state, paged" in sim.choices.optimizer
    import bitsandbytes as bnb  # a real 4-bit load later in this process must not find bitsandbytes' code map on meta

    assert all(code.device.type == "cpu" for code in bnb.functional.name2qmap.values())


def test_qwen_1_5b_lora_on_a_6_gb_card_with_the_shared_prefix() -> None:
    _held(_simulate("Qwen/Qwen2.5-1.5B-Instruct", 6, method="lora", shared_prefix=True))


def test_llama_1b_with_the_plan_train_makes_for_a_16_gb_card() -> None:
    sim = _simulate("meta-llama/Llama-3.2-1B-Instruct", 16, shared_prefix=True)
    assert sim.preset == "full-8bit"
    _held(sim)
    assert "foreach" not in sim.choices.optimizer and "slices" in sim.choices.optimizer


def test_qwen_7b_galore_fits_24_gb_and_agrees() -> None:
    sim = _simulate("Qwen/Qwen2.5-7B-Instruct", 24, method="galore")
    assert sim.preset == "galore"
    _held(sim)
    assert "layer-wise" in sim.choices.optimizer


def test_a_dropped_term_fails_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    sim = _simulate("meta-llama/Llama-3.1-8B-Instruct", 16)
    settings = {k: getattr(sim.estimate.settings, k) for k in sim.estimate.settings.keys()}
    assert sim.agrees(estimate(sim.estimate.arch, **settings))
    with monkeypatch.context() as mp:  # the plan without its KV cache
        mp.setattr(terms, "kv_cache", lambda arch, s, **kw: terms.Term(0.0, "dropped"))
        no_kv = estimate(sim.estimate.arch, **settings)
    assert not sim.agrees(no_kv)
    assert next(c for c in sim.checks(no_kv) if c.phase == "generation").ratio > 1 + TOLERANCE
    with monkeypatch.context() as mp:  # the plan without its activations
        mp.setattr(tokens, "activations", lambda arch, s, **kw: terms.Term(0.0, "dropped"))
        no_acts = estimate(sim.estimate.arch, **settings)
    assert not sim.agrees(no_acts)
    assert next(c for c in sim.checks(no_acts) if c.phase == "backward_head").ratio > 1 + TOLERANCE


# ---- the stored table against the current planner -------------------------------------------------------------


def test_the_stored_rows_cover_the_ladder_at_full_size() -> None:
    assert len(STORED) >= 10
    presets = {r["preset"] for r in STORED}
    assert presets >= {"full-8bit", "galore", "lora", "qlora"}
    models = " ".join(r["model"] for r in STORED)
    for name in (
        "Llama-3.2-1B",
        "Llama-3.2-3B",
        "Llama-3.1-8B",
        "Qwen2.5-14B",
        "Qwen2.5-1.5B",
        "Qwen2.5-7B",
        "Qwen2.5-0.5B",
    ):
        assert name in models
    assert {r["shared_prefix"] for r in STORED} == {True, False}
    shapes = [r["shape"] for r in STORED]
    assert any(s.startswith("4 x") for s in shapes) and any(s.startswith("16 x") for s in shapes)
    assert any("+ 256," in s for s in shapes) and any("+ 1024," in s for s in shapes)


@pytest.mark.parametrize("row", STORED, ids=lambda r: r["label"])
def test_the_planner_still_agrees_with_each_stored_simulation(row: dict) -> None:
    kwargs = dict(row["plan_kwargs"])
    the_plan = plan(kwargs.pop("model"), kwargs.pop("budget"), **kwargs)
    assert the_plan.preset.name == row["preset"]
    for phase, (_, simulated) in row["phases"].items():
        planned = sum(planned_tensor_bytes(the_plan.estimate, phase).values())
        assert abs(simulated / planned - 1) <= TOLERANCE, (phase, planned, simulated)


def test_the_docs_table_is_rendered_from_the_stored_rows() -> None:
    from tools.doc_tables import SIMULATION_END, SIMULATION_START, simulation_markdown

    page = (ROOT / "docs" / "memory.md").read_text(encoding="utf-8")
    table = page.split(SIMULATION_START, 1)[1].split(SIMULATION_END, 1)[0].strip()
    fresh = simulation_markdown([_gpu_sim().replan(r) for r in STORED])  # type: ignore[attr-defined]
    assert table == fresh, "stale: python benchmarks/gpu_sim.py --show --write"


# ---- the held-out rows: no term was tuned on them ---------------------------------------------------------------


def _gpu_sim() -> object:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_sim
    finally:
        sys.path.pop(0)
    return gpu_sim


def test_the_held_out_rows_cover_every_new_architecture_and_method() -> None:
    ran = [r for r in HELD_OUT if "error" not in r]
    assert len(ran) == len(HELD_OUT) >= 18
    for name in (
        "Qwen3",
        "gemma-2",
        "gemma-3",
        "Mistral-7B-Instruct-v0.1",
        "Phi-3-mini",
        "Phi-4-mini",
        "SmolLM3",
        "granite-3.1",
        "OLMo-2",
    ):
        assert {r["checkpointing"] for r in ran if name in r["model"]} == {True, False}, name
    presets = [r["preset"] for r in ran]
    assert all(presets.count(p) >= 2 for p in ("full", "full-8bit", "galore", "lora", "qlora"))
    assert not {r["label"] for r in HELD_OUT} & {r["label"] for r in STORED}
    assert not {r["model"] for r in HELD_OUT} & {r["model"] for r in STORED}  # other architectures altogether


@pytest.mark.parametrize("row", HELD_OUT, ids=lambda r: r["label"])
def test_the_planner_holds_each_held_out_row_to_its_stored_simulation(row: dict) -> None:
    """The current planner's tensor bytes, phase by phase, within the 5% band of what the full-size simulation of
    the row measured (stored; no term was tuned on these rows): a planner change that leaves them fails here."""
    kwargs = dict(row["plan_kwargs"])
    the_plan = plan(kwargs.pop("model"), kwargs.pop("budget"), **kwargs)
    assert the_plan.preset.name == row["preset"]
    for phase, (_, simulated) in row["phases"].items():
        planned = sum(planned_tensor_bytes(the_plan.estimate, phase).values())
        assert abs(simulated / planned - 1) <= TOLERANCE, (phase, planned, simulated)


def test_the_held_out_table_is_rendered_from_the_stored_rows() -> None:
    from tools.doc_tables import HELD_OUT_END, HELD_OUT_START, held_out_markdown

    page = (ROOT / "docs" / "memory.md").read_text(encoding="utf-8")
    table = page.split(HELD_OUT_START, 1)[1].split(HELD_OUT_END, 1)[0].strip()
    assert table == held_out_markdown([_gpu_sim().replan(r) for r in HELD_OUT]), (  # type: ignore[attr-defined]
        "stale: python benchmarks/gpu_sim.py --held-out --show --write"
    )


@pytest.mark.slow
@pytest.mark.parametrize("label", ["gemma-3-1b-it lora, ckpt off"])
def test_a_held_out_row_simulates_as_stored(label: str) -> None:
    """Gemma 3 LoRA without checkpointing: planned without the shared prefix, as training runs it (planned with
    packing, before the planner asked the trainer's rule, it was far below the simulation)."""
    row = next(r for r in HELD_OUT if r["label"] == label)
    kwargs = dict(row["plan_kwargs"])
    sim = _simulate(kwargs.pop("model"), kwargs.pop("budget"), **kwargs)
    assert not sim.estimate.settings.shared_prefix
    for check in sim.checks():
        planned, simulated = row["phases"][check.phase]
        assert round(check.planned) == planned and abs(check.measured / simulated - 1) <= 0.005, check.phase
        assert abs(check.ratio - 1) <= TOLERANCE, check.phase


# ---- the GPU's choices ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arch,dtype,head_dim,masked,grad,kernel",
    [
        ("sm86", torch.bfloat16, 64, False, True, "flash"),  # no padding: flash, native grouped-query attention
        ("sm86", torch.bfloat16, 128, True, True, "efficient"),  # a padding mask: the memory-efficient kernel
        ("sm80", torch.float32, 64, False, True, "efficient"),  # flash takes 16-bit inputs only
        (
            "sm86",
            torch.bfloat16,
            200,
            False,
            True,
            "efficient",
        ),  # sm86/89 flash refuses head dims in (192, 224] to train
        ("sm80", torch.bfloat16, 200, False, True, "flash"),
        ("sm86", torch.bfloat16, 60, True, False, "math"),  # not aligned to 8
    ],
)
def test_the_attention_kernel_follows_torchs_cuda_dispatch(
    arch,
    dtype,
    head_dim,
    masked,
    grad,  # noqa: ANN001
    kernel,
) -> None:
    assert choose_kernel(arch, dtype, head_dim=head_dim, masked=masked, requires_grad=grad) == kernel


def test_autocast_emulation_casts_matmuls_caches_leaves_and_can_be_suspended() -> None:
    from grpo_lite.memory.meta import autocast as amp

    x = torch.empty(4, 8, device="meta", dtype=torch.bfloat16)
    w = torch.nn.Parameter(torch.empty(16, 8, device="meta"))  # an fp32 LoRA-like weight
    with amp.CudaAutocast(torch.bfloat16) as mode:
        assert torch.nn.functional.linear(x, w).dtype == torch.bfloat16
        assert len(mode._cache) == 1 and torch.nn.functional.linear(x, w) is not None and len(mode._cache) == 1
        assert torch.softmax(x, -1).dtype == torch.float32 and x.exp().dtype == torch.float32
        with amp.suspended():
            assert torch.nn.functional.linear(x.float(), w).dtype == torch.float32
    assert torch.nn.functional.linear(x.float(), w).dtype == torch.float32 and amp.active() is None


def test_cuda_semantics_puts_everything_back() -> None:
    import torch.nn.functional as F
    import trl.kernels.chunked_logprob as chunked

    from grpo_lite.memory.meta.cuda import cuda_semantics

    before = (
        F.scaled_dot_product_attention,
        chunked._use_triton,
        torch.is_autocast_enabled,
        hasattr(chunked, "triton"),
    )
    with cuda_semantics("sm86") as choices:
        assert F.scaled_dot_product_attention is not before[0] and chunked._use_triton(torch.device("meta"))
    assert (
        F.scaled_dot_product_attention,
        chunked._use_triton,
        torch.is_autocast_enabled,
        hasattr(chunked, "triton"),
    ) == before
    assert "Triton path" in choices.lm_head


def test_trl_head_code_that_changed_is_not_patched(monkeypatch: pytest.MonkeyPatch) -> None:
    import trl.kernels.chunked_logprob as chunked

    from grpo_lite.memory.meta import cuda

    monkeypatch.setattr(cuda, "TRL_HEAD_SOURCE", "0" * 16)
    with warnings.catch_warnings(record=True) as caught, cuda.cuda_semantics("sm86") as choices:
        warnings.simplefilter("always")
        assert not chunked._use_triton(torch.device("meta"))  # TRL's own torch fold runs
    assert "torch fold" in choices.lm_head and any("not the code" in str(w.message) for w in caught)


def test_what_the_simulation_does_not_cover_is_refused() -> None:
    from grpo_lite.simulation.run import simulate

    with pytest.raises(ConfigError, match="CPU plan"):
        simulate(plan("Qwen2.5-0.5B", 8, device="cpu"))
    with pytest.raises(ConfigError, match="gpu='sm75' is not simulated"):
        simulate(plan("Qwen2.5-0.5B", 8), gpu="sm75")  # type: ignore[arg-type]


def test_plan_simulate_json_on_a_tiny_model(tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from grpo_lite.cli import plan as plan_cli

    parser = argparse.ArgumentParser(prog="grpo-lite")
    plan_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(
        [
            "plan",
            str(tiny_model_dir),
            "--budget-gb",
            "4",
            "--simulate",
            "--no-padding",
            "--set",
            "num_generations=4",
            "--set",
            "max_completion_length=16",
            "--set",
            "shared_prefix=false",
            "--json",
        ]
    )
    assert plan_cli.run(args) == 0
    data = json.loads(capsys.readouterr().out)["simulated"]
    assert set(data["phases"]) >= {"generation", "forward", "backward_head", "backward_layers"}
    assert all(p["simulated"] > 0 for p in data["phases"].values())
    assert data["gpu"]["padded"] is False and "flash" in data["gpu"]["attention"]  # no mask: flash


# ---- sliding-window models -------------------------------------------------------------------------------------


def _sliding_configs(root: Path) -> dict[str, Path]:
    """Tiny config.json folders from transformers' own config classes (Mistral with and without a window, Gemma 3)."""
    from transformers import Gemma3TextConfig, MistralConfig

    small = dict(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=512
    )
    configs = {f"mistral-{w}": MistralConfig(num_hidden_layers=2, sliding_window=w, **small) for w in (16, 32, None)}
    configs["gemma3"] = Gemma3TextConfig(num_hidden_layers=6, sliding_window=16, **small)  # 5 sliding, 1 full
    for name, config in configs.items():
        config.save_pretrained(root / name)
    return {name: root / name for name in configs}


def test_sliding_window_models_simulate_with_the_cache_transformers_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grpo_lite.simulation import step
    from grpo_lite.simulation.run import simulate

    caches = []
    grow = step._grow_cache
    monkeypatch.setattr(step, "_grow_cache", lambda cache, *a: (grow(cache, *a), caches.append(cache)))
    prompt, completion, n = 8, 248, 4
    kept = {}
    for name, folder in _sliding_configs(tmp_path).items():
        sim = simulate(
            plan(
                str(folder),
                8,
                method="lora",
                max_prompt_length=prompt,
                max_completion_length=completion,
                num_generations=n,
                shared_prefix=False,
            )
        )
        assert next(p for p in sim.phases if p.name == "generation").peak_bytes > 0
        kept[name] = [
            (layer.is_sliding, layer.get_seq_length(), layer.keys.size(-2), layer.keys.untyped_storage().nbytes())
            for layer in caches[-1].layers
        ]
    row = n * 2 * 16 * 2  # one cached token of one layer: sequences x kv heads x head dim x bf16
    tokens = prompt + completion  # the cache after the last decoding step
    assert kept["mistral-None"] == [(False, tokens, tokens, tokens * row)] * 2
    # a sliding layer keeps window - 1 tokens of a window-sized storage, whatever the length decoded
    assert kept["mistral-16"] == [(True, tokens, 15, 16 * row)] * 2
    assert kept["mistral-32"] == [(True, tokens, 31, 32 * row)] * 2
    assert kept["gemma3"] == [(True, tokens, 15, 16 * row)] * 5 + [(False, tokens, tokens, tokens * row)]


def test_the_plan_packs_the_prompt_only_where_training_will(tmp_path: Path) -> None:
    """The planner and the trainer decide with one rule: a sliding layer, or a window shorter than the sequence."""
    from transformers import AutoConfig, AutoModelForCausalLM, MistralConfig

    from grpo_lite.training.step.shared_prefix import unsupported_reason

    folders = _sliding_configs(tmp_path)
    MistralConfig(
        num_hidden_layers=2,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        vocab_size=512,
        sliding_window=512,
    ).save_pretrained(tmp_path / "mistral-512")
    folders["mistral-512"] = tmp_path / "mistral-512"
    prompt, completion, n = 8, 248, 4  # 256 tokens: longer than 16 and 32, shorter than 512
    ids = torch.randint(1, 500, (prompt,)).repeat(n, 1)
    batch = (
        torch.cat([ids, torch.randint(1, 500, (n, completion))], 1),
        torch.ones(n, prompt + completion, dtype=torch.long),
    )
    planned = {}
    for name, folder in folders.items():
        the_plan = plan(
            str(folder), 8, method="lora", max_prompt_length=prompt, max_completion_length=completion, num_generations=n
        )
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder), attn_implementation="sdpa")
        trained = unsupported_reason(model, *batch, completion)
        planned[name] = the_plan.estimate.settings.shared_prefix
        assert planned[name] == (trained is None), name
        assert any(
            r.startswith("shared_prefix planned off: training turns it off for this model (sliding-window attention")
            for r in the_plan.reasons
        ) == (not planned[name])
    assert planned == {
        "mistral-16": False,
        "mistral-32": False,
        "mistral-None": True,
        "gemma3": False,
        "mistral-512": True,
    }
    off = {
        key: plan(str(folders["gemma3"]), 8, method="lora", num_generations=n, **key_value)
        for key, key_value in (("default", {}), ("asked off", {"shared_prefix": False}))
    }
    assert off["default"].estimate.total_bytes == off["asked off"].estimate.total_bytes  # what training runs
    assert not any("training turns it off" in r for r in off["asked off"].reasons)  # the user turned it off


def test_a_failure_on_meta_is_one_line_that_says_what_to_do(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grpo_lite.errors import SimulationError
    from grpo_lite.simulation import step
    from grpo_lite.simulation.run import simulate

    def broken(*_: object) -> None:
        raise RuntimeError("Attempting to broadcast a dimension of length 257\nmore")

    monkeypatch.setattr(step, "_grow_cache", broken)
    with pytest.raises(
        SimulationError,
        match=r"running the step failed at tests/test_simulation.py:\d+ \(broken\): "
        r"RuntimeError: Attempting to broadcast .* 257\. The plan .* drop "
        r"--simulate",
    ) as caught:
        simulate(plan(str(tiny_model_dir), 4, num_generations=4, max_completion_length=16))
    assert "\n" not in str(caught.value)


# ---- the trainer's own code on the trainer's batch --------------------------------------------------------------


def test_batch_data_keeps_the_values_that_decide_shapes() -> None:
    from grpo_lite.simulation.data import BatchData

    with BatchData() as data:
        mask = data.place(torch.tensor([[0, 1, 1], [1, 1, 1]]))
        hidden = torch.empty(2, 3, 8, device="meta")  # the model's: no values
        assert hidden[mask.bool()].shape == (5, 8)  # the true positions of the batch's mask
        assert torch.unique(data.place(torch.tensor([3, 3, 4])), return_inverse=True)[1].tolist() == [0, 0, 1]
        assert bool(mask[:, -1].all()) and not bool(mask[:, 0].all()) and int(mask.sum()) == 5
        assert math.isnan(float(hidden.sum())) and data.guessed == 1  # a value from the model: none, counted
        assert hidden[torch.isnan(hidden)].shape == (48,) and data.guessed == 2  # a model-made mask: every position


def _spy(monkeypatch: pytest.MonkeyPatch, owner: object, name: str, seen: list) -> None:
    original = getattr(owner, name)

    def spy(*args: object, **kwargs: object) -> object:
        out = original(*args, **kwargs)
        seen.append((args, kwargs, out))
        return out

    monkeypatch.setattr(owner, name, spy)


def test_the_step_runs_trls_loss_and_the_shared_prefix_packing_on_the_trainers_batch(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trl

    from grpo_lite.simulation.run import simulate
    from grpo_lite.training.step import shared_prefix

    losses: list = []
    packs: list = []
    _spy(monkeypatch, trl.GRPOTrainer, "_compute_loss", losses)
    _spy(monkeypatch, shared_prefix, "pack_groups", packs)
    the_plan = plan(
        str(tiny_model_dir),
        4,
        num_generations=4,
        per_device_train_batch_size=8,
        max_prompt_length=24,
        max_completion_length=16,
        shared_prefix=True,
        gradient_accumulation_steps=1,
    )
    simulate(the_plan)
    b, p, c, g = 8, 24, 16, 4
    assert len(losses) == 2  # TRL's own loss ran: the warm-up step, then the measured one
    (_, model, inputs), _, loss = losses[-1]  # the measured micro-batch, as TRL's loss received it
    assert model is not None and loss.device.type == "meta" and loss.requires_grad
    assert inputs["prompt_ids"].shape == (b, p) and inputs["completion_ids"].shape == (b, c)
    # the shared-prefix packing ran on that batch: one row per prompt, its g completions after it
    packed = packs[-1][2]
    assert packed.input_ids.shape == (b // g, p + g * c)
    assert packed.allowed.shape == (b // g, 1, p + g * c, p + g * c) and packed.allowed.device.type == "meta"
    assert packed.hidden_index.shape == (b * c,)  # every completion token scored (each completion at its maximum)


def test_a_trl_loss_that_reads_more_stops_the_simulation_with_its_name(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trl

    from grpo_lite.errors import SimulationError
    from grpo_lite.simulation.run import simulate

    monkeypatch.setattr(trl.GRPOTrainer, "_compute_loss", _a_newer_loss)
    with pytest.raises(
        SimulationError,
        match=r"loss reads new_knob, which the simulation does not set .*drop "
        r"--simulate",
    ):
        simulate(plan(str(tiny_model_dir), 4, num_generations=4, max_completion_length=16))


def _a_newer_loss(self, model, inputs):  # noqa: ANN001, ANN202 - a TRL release whose loss reads a new attribute
    return self.new_knob
