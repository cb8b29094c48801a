"""Updates that land on bf16 weights: the rungs' optimizers, the rounding wrapper, the update monitor."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

from grpo_lite.memory.step_settings import StepSettings
from grpo_lite.planning.ladder import LADDER
from grpo_lite.precision.monitor import UpdateMonitor, UpdatesLostWarning
from grpo_lite.precision.rounding import fp32_to_bf16_sr, install_update_rounding
from tools.realized import (
    bf16_and_fp32_copies,
    fp32_adamw,
    lm_gradients,
    planned_optimizer,
    realized_share,
    step,
    tiny_llama,
)

LR = 1e-6
FULL_RUNGS = [p for p in LADDER if p.method in ("full", "galore")]


@pytest.fixture(scope="module")
def base() -> torch.nn.Module:
    return tiny_llama(hidden=64, layers=2)


@pytest.fixture(scope="module")
def grads(base: torch.nn.Module) -> list:
    return lm_gradients(base)


def _make(optim: str, rounding: str, optim_args: str | None = None):  # noqa: ANN202
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    return lambda m: planned_optimizer(
        m,
        optim,
        learning_rate=LR,
        update_rounding=rounding,
        optim_args=optim_args,
        target_modules=targets if optim.startswith("galore") else None,
    )


def test_sr_is_unbiased_and_leaves_bf16_values_alone() -> None:
    x = torch.randn(200_000) * 0.02
    assert torch.equal(fp32_to_bf16_sr(x.bfloat16().float()), x.bfloat16())  # representable: unchanged
    tiny = x.bfloat16().float() * (1 + 2**-12)  # 1/16 to 1/32 of a bf16 spacing above
    assert torch.equal(tiny.bfloat16(), x.bfloat16())  # round to nearest drops it
    err = (fp32_to_bf16_sr(tiny).float() - tiny).mean() / tiny.abs().mean()
    assert abs(float(err)) < 1e-3
    assert torch.isinf(fp32_to_bf16_sr(torch.tensor([float("inf")]))).all()


@pytest.mark.parametrize("rung", FULL_RUNGS, ids=lambda p: p.name)
def test_each_full_parameter_rung_realizes_its_update(rung, base, grads) -> None:  # noqa: ANN001
    settings = StepSettings.resolve(
        method=rung.method,
        device="cpu",
        dtype="bfloat16",
        optim=rung.cpu_optim,
        optim_args=rung.galore_args,
        gradient_checkpointing=False,
    )
    assert settings.update_rounding == "stochastic"  # what the plan asks for bf16 weights
    # the reference: fp32 AdamW, or the rung's own algorithm on fp32 weights for GaLore (not AdamW's update)
    reference = (
        _make(rung.cpu_optim, "nearest", rung.galore_args) if rung.method == "galore" else (lambda m: fp32_adamw(m, LR))
    )
    planned = realized_share(
        _make(rung.cpu_optim, "stochastic", rung.galore_args), *bf16_and_fp32_copies(base), grads, 20, reference
    )
    lost = realized_share(
        _make(rung.cpu_optim, "nearest", rung.galore_args), *bf16_and_fp32_copies(base), grads, 20, reference
    )
    assert planned.share >= 0.9, planned  # (its cosine is lower: stochastic rounding adds zero-mean noise)
    assert lost.share < 0.1, lost  # the same optimizer rounding to nearest: the test can fail


def test_qlora_adapters_are_bf16_on_every_device_and_rounded() -> None:
    # TRL casts QLoRA adapters to bf16 whatever the device: without rounding they lose small updates
    for device in ("cpu", "cuda"):
        s = StepSettings.resolve(method="qlora", device=device, optim="paged_adamw_8bit")  # type: ignore[arg-type]
        assert s.adapter_bytes == 2 and s.trains_bf16 and s.update_rounding == "stochastic"
    assert StepSettings.resolve(method="lora", device="cpu").update_rounding == "nearest"  # PEFT keeps fp32 adapters


def test_pure_bf16_adamw_loses_the_update(base, grads) -> None:  # noqa: ANN001
    lost = realized_share(
        lambda m: torch.optim.AdamW(m.parameters(), lr=LR, weight_decay=0.0),
        *bf16_and_fp32_copies(base),
        grads,
        20,
        lambda m: fp32_adamw(m, LR),
    )
    assert lost.share < 0.1


def test_rounding_keeps_weights_and_grads_bf16_and_drops_the_fp32_copies(base, grads) -> None:  # noqa: ANN001
    model, _ = bf16_and_fp32_copies(base)
    optimizer = planned_optimizer(model, "adamw_torch", learning_rate=LR, update_rounding="stochastic")
    assert install_update_rounding(optimizer) == []  # idempotent: already installed
    for n, p in model.named_parameters():
        p.grad = grads[0][n].bfloat16()
    step(optimizer)
    assert all(p.dtype == torch.bfloat16 and p.grad.dtype == torch.bfloat16 for p in model.parameters())
    states = [v for s in optimizer.state.values() for k, v in s.items() if k != "step"]
    assert states and all(v.dtype == torch.float32 for v in states)  # created from the fp32 working copy


def _drive(model: torch.nn.Module, optimizer, grads: list, steps: int = 20) -> dict[str, float]:  # noqa: ANN001
    """What the Trainer's callbacks do around each step, with fixed gradients; one logging window."""
    monitor = UpdateMonitor()
    monitor.setup(model, optimizer)
    for _ in range(steps):
        monitor.begin_step()
        for n, p in model.named_parameters():
            p.grad = grads[0][n].to(p.dtype).clone()
        monitor.capture_grads()
        step(optimizer)
        monitor.end_step()
    assert 0 < monitor.nbytes() < 1 << 20  # three sampled tensors, 4096 elements each
    return monitor.flush()


def test_monitor_sees_rounded_updates_land(base, grads) -> None:  # noqa: ANN001
    model, _ = bf16_and_fp32_copies(base)
    metrics = _drive(
        model, planned_optimizer(model, "adamw_torch", learning_rate=LR, update_rounding="stochastic"), grads
    )
    assert metrics["update/realized"] >= 0.9 and metrics["update/realized_stderr"] < 0.05
    assert 0 < metrics["update/relative_step"] < 1


def test_monitor_sees_lost_updates_and_warns_once(base, grads) -> None:  # noqa: ANN001
    model, _ = bf16_and_fp32_copies(base)
    with pytest.warns(UpdatesLostWarning, match=r"update/realized = 0\.\d\d: .* set update_rounding='stochastic'"):
        metrics = _drive(
            model, planned_optimizer(model, "adamw_torch", learning_rate=LR, update_rounding="nearest"), grads
        )
    assert metrics["update/realized"] < 0.1


def _train_bf16(tmp_path: Path, tiny_model_dir: Path, preset: str = "full", **kwargs) -> dict:  # noqa: ANN003
    from tiny_run import TINY_RUN

    from grpo_lite import train

    run = {**TINY_RUN, "learning_rate": LR, "logging_steps": 2}
    train(
        str(tiny_model_dir), output_dir=str(tmp_path), preset=preset, max_steps=4, dtype="bfloat16", **{**run, **kwargs}
    )
    return json.loads((tmp_path / "run.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["full-8bit", "galore", "qlora"])
def test_each_full_parameter_rung_lands_its_updates_in_a_grpo_run(
    tmp_path: Path, tiny_model_dir: Path, preset: str, monkeypatch
) -> None:  # noqa: ANN001
    import grpo_lite.precision.rounding as rounding

    monkeypatch.setattr(rounding, "SR_CHUNK", 4096)  # the tiny model's embedding, MLP and head step in slices
    record = _train_bf16(tmp_path, tiny_model_dir, preset=preset)
    assert record["plan"]["preset"] == preset  # qlora: its bf16 adapters (TRL casts them)
    assert record["precision"]["weights"] == "bfloat16" and record["precision"]["update"] == "stochastic rounding"
    realized = [row["update/realized"] for row in record["history"] if "update/realized" in row]
    assert realized and min(realized) >= 0.9, realized


@pytest.mark.slow
def test_a_bf16_grpo_run_reports_updates_that_land(tmp_path: Path, tiny_model_dir: Path) -> None:
    record = _train_bf16(tmp_path / "sr", tiny_model_dir)
    assert record["precision"]["weights"] == "bfloat16" and record["precision"]["update"] == "stochastic rounding"
    realized = [row["update/realized"] for row in record["history"] if "update/realized" in row]
    assert realized and min(realized) >= 0.9
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = _train_bf16(tmp_path / "nearest", tiny_model_dir, update_rounding="nearest")
    assert record["precision"]["update"] == "round to nearest"
    realized = [row["update/realized"] for row in record["history"] if "update/realized" in row]
    assert realized and max(realized) < 0.5
    assert any(issubclass(w.category, UpdatesLostWarning) for w in caught)


@pytest.mark.parametrize(
    "optim, args", [("adamw_torch", None), ("adamw_8bit", None), ("galore_adamw_layerwise", "rank=8,update_proj_gap=2")]
)
def test_a_tensor_stepped_in_slices_gets_exactly_the_whole_step(optim, args, base, grads, monkeypatch) -> None:  # noqa: ANN001
    import grpo_lite.precision.rounding as rounding

    def run(sliced: bool) -> tuple[torch.nn.Module, object]:
        monkeypatch.setattr(rounding, "SR_CHUNK", 4096)  # the rounding noise comes in the same chunks either way
        if not sliced:
            monkeypatch.setattr(rounding, "sliceable", lambda *a: False)
        torch.manual_seed(0)
        model, _ = bf16_and_fp32_copies(base)
        optimizer = _make(optim, "stochastic", args)(model)
        for _ in range(3):
            for n, p in model.named_parameters():
                p.grad = grads[0][n].bfloat16()
            step(optimizer)
        monkeypatch.undo()
        return model, optimizer

    whole, whole_opt = run(sliced=False)
    sliced, sliced_opt = run(sliced=True)
    big = [n for n, p in sliced.named_parameters() if p.numel() > 4096]
    assert "model.embed_tokens.weight" in big  # the embedding (and the MLP weights) were sliced
    for (n, a), b in zip(whole.named_parameters(), sliced.parameters()):
        assert a.dtype == b.dtype == torch.bfloat16 and torch.equal(a, b), n
    inner = rounding.inner_optimizers(sliced_opt)
    p = dict(sliced.named_parameters())["model.embed_tokens.weight"]
    state = next(o.state[p] for o in inner if p in o.state)
    tensors = [v for k, v in state.items() if isinstance(v, torch.Tensor) and v.numel() > 256]
    assert tensors and all(t.numel() in (p.numel(), -(-p.numel() // 256)) for t in tensors)  # full-size state


def test_a_galore_bf16_grpo_step_in_slices_lands_its_updates(base, grads, monkeypatch) -> None:  # noqa: ANN001
    import grpo_lite.precision.rounding as rounding

    monkeypatch.setattr(rounding, "SR_CHUNK", 4096)  # the tiny model's embedding and MLP weights go in slices
    rung = next(p for p in LADDER if p.method == "galore")
    reference = _make(rung.cpu_optim, "nearest", rung.galore_args)
    got = realized_share(
        _make(rung.cpu_optim, "stochastic", rung.galore_args), *bf16_and_fp32_copies(base), grads, 20, reference
    )
    assert got.share >= 0.9, got


def test_relative_step_leaves_out_weights_still_at_zero() -> None:
    # LoRA's B starts at zero: its step over its norm is no relative step (it read 1.5e29 before)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64, bias=False), torch.nn.Linear(64, 64, bias=False))
    torch.nn.init.zeros_(model[1].weight)
    grads = [{n: torch.randn_like(p) for n, p in model.named_parameters()}]
    metrics = _drive(model, torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0), grads, steps=2)
    # AdamW's first steps move each element by about lr: |step| ≈ 1e-3 · 64 against |W| ≈ 64 · 0.07
    assert 1e-3 < metrics["update/relative_step"] < 0.1, metrics
