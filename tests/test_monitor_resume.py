"""The update monitor replays the step the live optimizer intends from the live optimizer's own state:
after a resume (the checkpoint's moments and step count loaded before ``on_train_begin``), as at the start."""

from __future__ import annotations

import copy
import logging
import warnings
from pathlib import Path

import pytest
import torch

from grpo_lite.precision.monitor import UpdateMonitor, UpdatesLostWarning
from tools.realized import lm_gradients, planned_optimizer, step, tiny_llama

LR = 1e-3
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@pytest.fixture(scope="module")
def base() -> torch.nn.Module:
    return tiny_llama(hidden=64, layers=2)


@pytest.fixture(scope="module")
def grads(base: torch.nn.Module) -> list:
    return lm_gradients(base, batches=2)  # two batches: Adam's step from old moments differs from a fresh one's


def _resumed(base, grads, make, monitor: UpdateMonitor, steps_before: int = 3) -> dict[str, float]:  # noqa: ANN001
    """``steps_before`` steps on the first batch's gradients with no monitor (the run before the resume),
    then a monitor set up over the stepped optimizer and one step on the second batch's gradients; also the
    bytes the monitor held during that step (``held``)."""
    model = copy.deepcopy(base)
    optimizer = make(model)
    for _ in range(steps_before):
        for n, p in model.named_parameters():
            p.grad = grads[0][n].clone()
        step(optimizer)
    monitor.setup(model, optimizer)
    monitor.begin_step()
    for n, p in model.named_parameters():
        p.grad = grads[1][n].clone()
    monitor.capture_grads()
    step(optimizer)
    held = monitor.nbytes()
    monitor.end_step()
    return {**monitor.flush(), "held": held}


def _make(optim: str, optim_args: str | None = None):  # noqa: ANN202
    return lambda m: planned_optimizer(
        m,
        optim,
        learning_rate=LR,
        update_rounding="nearest",
        optim_args=optim_args,
        target_modules=TARGETS if optim.startswith("galore") else None,
    )


@pytest.mark.parametrize(
    "optim, args",
    [
        ("adamw_torch", None),
        ("adamw_8bit", None),
        ("galore_adamw", "rank=8,update_proj_gap=2"),
        ("galore_adamw_layerwise", "rank=8,update_proj_gap=3"),
    ],
)  # step 4 refreshes
def test_a_monitor_set_up_over_a_stepped_optimizer_replays_its_step(optim, args, base, grads) -> None:  # noqa: ANN001
    # fp32 weights: every intended update lands, so the share is 1 when the replay is the live step
    monitor = UpdateMonitor()
    metrics = _resumed(base, grads, _make(optim, args), monitor)
    assert metrics["update/realized"] == pytest.approx(1.0, abs=1e-3), metrics
    states = [probe.owner.state[probe.param] for probe in monitor.probes]
    assert len(states) == 3 and all(s for s in states)  # the live optimizer had state before the monitor began
    if optim == "adamw_8bit":  # blockwise 8-bit moments dequantized, and a small tensor's 32-bit ones
        assert {s["state1"].dtype for s in states} == {torch.uint8, torch.float32}
    if not optim.startswith("galore"):  # docs/presets.md's 0.44 MB: 24 B per element (the memory model's
        # update_monitor term), 8 B of fp32 moments (its monitor_state) and the 4 B sampled gradient
        assert metrics["held"] == 3 * 4096 * (24 + 8 + 4) == 442_368


class _OddState(torch.optim.SGD):
    """SGD with momentum plus a state entry the monitor cannot map onto sampled elements."""

    @torch.no_grad()
    def step(self, closure=None):  # noqa: ANN001, ANN201
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p].setdefault("odd", torch.zeros(3))
        return super().step(closure)


def test_a_state_it_cannot_map_is_noted_once_and_the_window_does_not_warn(base, grads, caplog) -> None:  # noqa: ANN001
    make = lambda m: _OddState(m.parameters(), lr=LR, momentum=0.9)  # noqa: E731
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO, "grpo_lite.precision.monitor"):
        warnings.simplefilter("always")
        _resumed(base, grads, make, UpdateMonitor(warn_below=10.0))  # a share of ~1 would warn if it were trusted
    assert not [w for w in caught if issubclass(w.category, UpdatesLostWarning)]
    notes = [r.getMessage() for r in caplog.records if "cannot replay" in r.getMessage()]
    assert len(notes) == 1 and "_OddState" in notes[0] and "'odd'" in notes[0], notes


def test_a_monitor_set_up_before_the_first_step_still_warns(base, grads) -> None:  # noqa: ANN001
    make = lambda m: _OddState(m.parameters(), lr=LR, momentum=0.9)  # noqa: E731
    with pytest.warns(UpdatesLostWarning):  # fresh state on both sides: the shadow follows the live optimizer
        _resumed(base, grads, make, UpdateMonitor(warn_below=10.0), steps_before=0)


# ---------------------------------------------------------------------------------------------- through train()


def _first_window_after_a_resume(tiny_model_dir: Path, out: Path, **kwargs) -> tuple[dict, list]:  # noqa: ANN003
    """Train 2 steps and stop with a checkpoint (as Ctrl-C does), resume to 4: the history row of step 3
    (each step is a window: logging_steps=1) and the warnings the resumed run raised."""
    from tiny_run import TINY_RUN
    from transformers import TrainerCallback

    from grpo_lite import train

    class StopAt2(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):  # noqa: ANN001, ANN003, ANN201
            if state.global_step == 2:
                control.should_save = control.should_training_stop = True

    torch.set_num_threads(1)  # tiny runs go faster on one thread (conftest restores the count)
    run = {**TINY_RUN, "logging_steps": 1, "save_strategy": "steps", "save_steps": 100, **kwargs}
    first = train(str(tiny_model_dir), output_dir=out, max_steps=4, callbacks=[StopAt2()], **run)
    assert first.steps == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = train(str(tiny_model_dir), output_dir=out, max_steps=4, resume=True, **run)
    assert resumed.steps == 4 and resumed.events[-1]["event"] == "resume"
    row = next(r for r in resumed.history if r["step"] == 3)
    row["plan"] = resumed.plan
    return row, [w for w in caught if issubclass(w.category, UpdatesLostWarning)]


def test_an_fp32_lora_run_realizes_its_update_right_after_a_resume(tiny_model_dir: Path, tmp_path: Path) -> None:
    row, lost = _first_window_after_a_resume(tiny_model_dir, tmp_path / "run", method="lora")
    assert row["update/realized"] >= 0.9 and not lost, (row["update/realized"], lost)


def test_a_bf16_8bit_run_realizes_its_update_right_after_a_resume(tiny_model_dir: Path, tmp_path: Path) -> None:
    row, lost = _first_window_after_a_resume(
        tiny_model_dir, tmp_path / "run", preset="full-8bit", dtype="bfloat16", learning_rate=1e-4
    )  # steps near a bf16 spacing: little rounding noise
    assert row["plan"].precision == {"weights": "bfloat16", "update": "stochastic rounding"}
    assert row["plan"].settings["optim"] == "adamw_8bit"
    assert row["update/realized"] >= 0.9 and not lost, (row["update/realized"], row["update/realized_stderr"], lost)


def test_under_galore_the_monitor_holds_what_the_memory_model_plans() -> None:
    """GaLore mixes a tensor's elements: the monitor shadows three whole smallest linears, with rank-r shadow states
    and projectors; the bytes it holds during a step against the plan's ``update_monitor`` and ``monitor_state``."""
    from grpo_lite.memory.models import architecture_from_config
    from grpo_lite.memory.step_settings import StepSettings
    from grpo_lite.memory.terms import monitor_state, update_monitor

    model = tiny_llama(hidden=128, layers=2)  # its smallest linears (k, v: 64 x 128) above 4096 sampled elements
    arch = architecture_from_config(model.config, name="tiny")
    args = "rank=8,update_proj_gap=2"
    s = StepSettings.resolve(method="galore", optim="galore_adamw", optim_args=args, update_rounding="nearest")
    monitor = UpdateMonitor()
    held = _resumed(model, lm_gradients(model, batches=2), _make("galore_adamw", args), monitor)["held"]
    whole_grads = 3 * 64 * 128 * 4  # the gradients it captures, whole tensors here (the plan counts gradients apart)
    assert held == update_monitor(arch, s).bytes + monitor_state(arch, s) + whole_grads
