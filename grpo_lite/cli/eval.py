"""``grpo-lite eval``: greedy accuracy and format rate of a model or a trained adapter."""

from __future__ import annotations

import argparse
import json
import math

from grpo_lite import evaluation
from grpo_lite.cli.options import add_options
from grpo_lite.defaults import EVALUATION, TASKS

INTERRUPTED = "interrupted: the evaluation stopped before its result; run the same command again (it starts over)"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "eval",
        help="evaluate a model (or a run's final adapter) on GSM8K, synthetic problems or your task",
        description="Batched greedy decoding; accuracy by the correctness rule, format rate by the soft format rule; "
        "a task without a gold answer: each --reward's mean and its 95% interval.",
    )
    p.add_argument("model", help="hub id, short name, local folder, .gguf file, or a run's final/ folder")
    add_options(p, "dataset", "skip_invalid", "rewards", "answer_kind")
    p.add_argument(
        "--split", choices=("train", "test"), default=EVALUATION.split, help=f"split (default {EVALUATION.split})"
    )
    p.add_argument("--limit", type=int, default=None, help="evaluate only the first N problems")
    p.add_argument(
        "--batch-size",
        type=int,
        default=EVALUATION.batch_size,
        help=f"prompts decoded at once (default {EVALUATION.batch_size})",
    )
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help=f"completion budget (default {EVALUATION.max_new_tokens}; a built-in task's own: "
        f"{', '.join(f'{k} {v}' for k, v in TASKS.max_completion_length.items())})",
    )
    add_options(p, "json")
    return p


def run(args: argparse.Namespace) -> int:
    result = evaluation.evaluate(
        args.model,
        args.dataset,
        split=args.split,
        limit=args.limit,
        batch_size=args.batch_size,
        max_new_tokens=args.max_new_tokens,
        skip_invalid=args.skip_invalid,
        rewards=args.rewards,
        answer_kind=args.answer_kind,
    )
    scores = ("accuracy", "format_rate")[: 2 * result.graded] + ("mean_reward", "n", "n_unscored")
    found = {name: getattr(result, name) for name in scores}
    found["mean_reward"] = None if math.isnan(result.mean_reward) else result.mean_reward  # no reward scored: null
    if result.reward_unscored:
        found.update(
            reward_means=result.reward_means,
            reward_intervals={
                k: [x if math.isfinite(x) else None for x in v] for k, v in result.reward_intervals.items()
            },
            reward_unscored=result.reward_unscored,
        )
    print(json.dumps(found, allow_nan=False) if args.json else result.summary())
    return 0
