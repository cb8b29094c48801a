"""A downstream project that uses grpo-lite the way a user's code would: public API only.

It imports nothing but ``grpo_lite`` and the names in ``grpo_lite.__all__`` (tests/test_public_api.py
checks that), plans, catches the library's errors, trains for one step with its own reward and rows,
evaluates, and prints one JSON line with what it saw.

    python -m downstream_app MODEL_DIR OUTPUT_DIR     (run from tests/downstream_project)
"""

from __future__ import annotations

import json
import sys

import grpo_lite
from grpo_lite import (
    LADDER,
    ConfigError,
    DoesNotFitError,
    EvalResult,
    GrpoLiteError,
    TrainResult,
    evaluate,
    get_preset,
    plan,
    rewards,
    synthetic_problems,
    train,
)


def mentions_a_number(prompts: list, completions: list, **kwargs: object) -> list[float]:
    """This project's own reward: 1.0 when the completion holds a digit."""
    return [1.0 if any(ch.isdigit() for ch in rewards.completion_text(c)) else 0.0 for c in completions]


def main(model_dir: str, output_dir: str) -> dict:
    seen: dict = {"version": grpo_lite.__version__}
    gpu_plan = plan("Llama-3.2-1B-Instruct", budget_gb=16)
    seen["plan"] = [gpu_plan.preset.name, gpu_plan.fits, gpu_plan.preset.name in [p.name for p in LADDER]]
    try:
        plan("Llama-3.2-1B-Instruct", budget_gb=2)
    except DoesNotFitError as exc:
        seen["does_not_fit"] = [exc.smallest_budget_gb, exc.preset, isinstance(exc, GrpoLiteError)]
    try:
        get_preset("no-such-preset")
    except ConfigError as exc:
        seen["config_error"] = [str(exc), isinstance(exc, ValueError)]

    rows = synthetic_problems(n=8, seed=3)
    result = train(model_dir, dataset=rows, rewards=["length", mentions_a_number], max_steps=1,
                   output_dir=output_dir, num_generations=4, per_device_train_batch_size=4,
                   max_completion_length=12, quiet=True)
    scores = evaluate(result.model, rows, tokenizer=result.tokenizer, max_new_tokens=12, limit=2,
                      rewards=["length", mentions_a_number])
    seen["train"] = [isinstance(result, TrainResult), result.steps, result.plan.device,
                     sorted(k for k in result.history[0] if k.startswith("rewards/") and k.endswith("/mean"))]
    seen["evaluate"] = [isinstance(scores, EvalResult), scores.n, scores.mean_reward > 0]
    return seen


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
