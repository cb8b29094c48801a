"""The planner on architectures beyond the Llama block, traced and with the Llama formulas, against the simulation.

For each dense row of the known table that is not Llama / Qwen2 (Qwen3, Gemma, Mistral, Phi, SmolLM3, Granite,
OLMo 2), with and without gradient checkpointing: plan LoRA on a card with the block traced from the model's own
layer class (``grpo-lite plan --blocks auto``), simulate one step of that plan on the meta device, and print the
largest phase error of the traced plan and of the same settings planned with the Llama formulas. No GPU and no
download. A row whose simulation fails says why.

    python benchmarks/arch_sim.py                 # every row (minutes on 2 busy cores)
    python benchmarks/arch_sim.py --only Qwen3    # the rows whose model name contains "Qwen3"
"""

from __future__ import annotations

import argparse
import gc
import time
import warnings

BUDGET_GB = 80  # an 80 GB card: every row fits with the settings below, checkpointing off too
SETTINGS = dict(method="lora", num_generations=8, max_completion_length=512, per_device_train_batch_size=8)


def _formula_estimate(est):  # noqa: ANN001, ANN202 - the same settings, the Llama formulas
    from grpo_lite.memory.estimate import estimate
    from grpo_lite.recipe.costs import estimate_settings

    return estimate(est.arch, blocks="formulas", **estimate_settings(est.settings))


def _row(name: str, checkpointing: bool) -> str:
    from grpo_lite.errors import GrpoLiteError
    from grpo_lite.planning.choose import plan
    from grpo_lite.simulation.run import simulate

    start = time.perf_counter()
    label = f"{name:<36} ckpt={'on ' if checkpointing else 'off'}"
    try:
        the_plan = plan(name, BUDGET_GB, gradient_checkpointing=checkpointing, **SETTINGS)
    except GrpoLiteError as exc:
        return f"{label}  not planned: {str(exc)[:120]}"
    est = the_plan.estimate
    try:
        sim = simulate(the_plan)
    except Exception as exc:  # noqa: BLE001 - a benchmark row reports and goes on
        return f"{label}  simulation failed: {type(exc).__name__}: {str(exc)[:90]}"
    worst = max(sim.checks(), key=lambda c: abs(c.ratio - 1))
    formula = max(sim.checks(_formula_estimate(est)), key=lambda c: abs(c.ratio - 1))
    return (
        f"{label}  traced {1 / worst.ratio - 1:+6.1%} at {worst.phase:<15}  formulas "
        f"{1 / formula.ratio - 1:+6.1%} at {formula.phase:<15}  ({est.block_terms}; "
        f"{time.perf_counter() - start:.0f} s)"
    )


def main() -> None:
    from grpo_lite.memory.architectures import KNOWN_ARCHITECTURES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="rows whose model name contains this")
    args = parser.parse_args()
    rows = [a for a in KNOWN_ARCHITECTURES if a.config_json and args.only in a.name]
    print(f"LoRA at {BUDGET_GB} GB, {SETTINGS}; error = planned / simulated - 1 at the worst phase")
    for arch in rows:
        for checkpointing in (True, False):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                print(_row(arch.hub_ids[-1], checkpointing), flush=True)
            gc.collect()


if __name__ == "__main__":
    main()
