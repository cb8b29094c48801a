"""Your own dataset and your own reward, passed to grpo_lite.train().

    python examples/custom_reward.py                      # the offline demo model, 10 steps on CPU
    python examples/custom_reward.py --model PATH --steps 2
"""

from __future__ import annotations

import argparse
import re

from datasets import Dataset

from grpo_lite import train
from grpo_lite.rewards import completion_text

# Your rows: a question and a gold number each; extra columns reach the rewards as keyword lists.
ROWS = [{"question": f"A train travels {v} km per hour for {h} hours. How many km does it travel?",
         "answer": str(v * h), "unit": "km"} for v in (40, 55, 60, 72, 90) for h in (2, 3, 4, 5)]


def close_answer(prompts: list, completions: list, answer: list[str], **kwargs: object) -> list[float]:
    """1.0 for the exact number, less the further the last number in the text is from the gold.

    >>> close_answer([], ["so 120 km", "about 60", "no idea"], ["120", "120", "120"])
    [1.0, 0.5, 0.0]
    """
    scores = []
    for completion, gold in zip(completions, answer):
        numbers = re.findall(r"-?\d+(?:\.\d+)?", completion_text(completion))
        error = abs(float(numbers[-1]) - float(gold)) / float(gold) if numbers else 1.0
        scores.append(max(0.0, 1.0 - error))
    return scores


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="GRPO with a custom dataset and reward")
    p.add_argument("--model", default=None, help="model name or path (default: the offline demo model)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--output-dir", default=None)
    args = p.parse_args()
    if args.model is None:
        from grpo_lite import demo_model_path

        args.model = str(demo_model_path())
    result = train(args.model, dataset=Dataset.from_list(ROWS), rewards=["soft_format", close_answer],
                   max_steps=args.steps, output_dir=args.output_dir, method="lora", num_generations=4,
                   per_device_train_batch_size=4, max_completion_length=64, learning_rate=2e-4, save_strategy="no")
    print(f"close_answer: {result.history[0]['rewards/close_answer/mean']:.3f} (first step) -> "
          f"{result.history[-1]['rewards/close_answer/mean']:.3f} (last step); model in {result.model_dir}")
