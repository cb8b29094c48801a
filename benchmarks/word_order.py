"""Learning a task whose answers are words, measured: GRPO on the real SmolLM2-135M-Instruct, on CPU, offline.

The task is generated here, offline: "Which of these two words comes first in alphabetical order: pear or
cake?", answered with the word (``answer_kind="text"``: equal after trimming, case and inner whitespace folded).
The two words always start with different letters; train and held-out problems are disjoint pairs. The run
evaluates greedily on ``--eval-n`` held-out problems before and after training, as the demo does, with the demo's
CPU recipe (LoRA r=16 at 2e-4, 8 generations of 64 tokens at temperature 0.7, grpo-lite's default rewards), and
prints one line::

    word order: reward A -> B, format C% -> D%, accuracy E% -> F% (95% Wilson interval ...), among formatted ...

    python benchmarks/word_order.py --steps 16 --eval-n 200 --out runs/word_order   # 57 min on a busy 2-core machine

The measured line is in docs/datasets.md ("A text task, measured").
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import random
import sys
import time
from pathlib import Path

WORDS = (
    "apple bread chair dance eagle fence grape honey island juice kite lemon mango night ocean piano queen river "
    "sugar table uncle violin water yarn zebra anchor basket candle desert engine forest garden hammer igloo jacket "
    "kettle ladder magnet needle orange pencil rabbit saddle tiger umbrella valley wagon yellow zipper"
).split()
QUESTION = "Which of these two words comes first in alphabetical order: {} or {}?"
SYSTEM = "Answer in this format:\n<reasoning>\nthe comparison\n</reasoning>\n<answer>\nthe word only\n</answer>"


def problems(split: str, seed: int) -> list[dict[str, str]]:
    """Every pair of words with different first letters, in a seeded order, each in one split by its hash (1 in 4
    held out): ``question``, ``answer`` (the word that comes first)."""
    rows = []
    for a, b in itertools.combinations(WORDS, 2):
        if a[0] == b[0]:
            continue
        held_out = int(hashlib.sha256(f"{min(a, b)}|{max(a, b)}".encode()).hexdigest(), 16) % 4 == 0
        if held_out == (split == "test"):
            rows.append((a, b))
    rng = random.Random(seed)
    rng.shuffle(rows)
    return [{"question": QUESTION.format(*rng.sample(pair, 2)), "answer": min(pair)} for pair in rows]


def style():  # noqa: ANN201  # a PromptStyle: the one_step style's shape, with one example of this task
    from grpo_lite.data.prompts import Example, PromptStyle

    example = Example(
        QUESTION.format("lamp", "cake"), "cake starts with c, lamp starts with l; c comes before l.", "cake"
    )
    return PromptStyle(system_prompt=SYSTEM, examples=(example,))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=16, help="GRPO optimizer steps, one problem's group each")
    parser.add_argument("--eval-n", type=int, default=200, help="held-out problems evaluated before and after")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/word_order"))
    args = parser.parse_args()

    from datasets import Dataset

    from grpo_lite import evaluate, train
    from grpo_lite.demo import DemoConfig
    from grpo_lite.demo.run import demo_line
    from grpo_lite.evaluation import load_for_eval
    from grpo_lite.memory.models import demo_model_path

    start, path, recipe = time.perf_counter(), str(demo_model_path()), DemoConfig(seed=args.seed)
    test = Dataset.from_list(problems("test", args.seed)[: args.eval_n])
    train_set = Dataset.from_list(problems("train", args.seed)[: args.steps * 4])
    kwargs = dict(prompt_style=style(), max_new_tokens=recipe.max_completion_length, batch_size=50)
    model, tokenizer = load_for_eval(path)
    before = evaluate(model, test, tokenizer=tokenizer, answer_kind="text", **kwargs)
    print(f"before: {before.summary()}", flush=True)
    result = train(
        path, dataset=train_set, answer_kind="text", prompt_style=style(), output_dir=args.out, overwrite=True,
        max_steps=args.steps, seed=args.seed, **recipe.train_settings(),
    )  # fmt: skip
    model = result.model.merge_and_unload() if hasattr(result.model, "merge_and_unload") else result.model
    after = evaluate(model, test, tokenizer=result.tokenizer, answer_kind="text", **kwargs)
    print(f"after: {after.summary()}")
    print(demo_line(before, after).replace("demo:", "word order:", 1))
    print(f"took {time.perf_counter() - start:.0f} s ({args.steps} steps, n={after.n}, {len(WORDS)} words)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
