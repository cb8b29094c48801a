"""What does grpo-lite add to a GRPO step? train() against a raw GRPOTrainer, paired, in one process.

Both sides train the tiny random Llama with identical GRPOConfig settings (train()'s own, read back
from its run.json), the same dataset rows, reward and seed. Each pair runs train() and the raw trainer
back to back; a step's time comes from a callback (step begin -> step end), the first step of each run
is dropped as warm-up, and the ratio of the two runs' median step times is one pair's ratio.

    python benchmarks/overhead.py [--pairs 5] [--steps 6]

The last line is ``overhead_ratio=<median of the paired ratios>`` (1.0 means no overhead).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def _step_timer():
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []

        def on_step_begin(self, args, state, control, **kwargs):
            self._t = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.times.append(time.perf_counter() - self._t)

    return StepTimer()


def _median_step(times: list[float]) -> float:
    return statistics.median(times[1:] if len(times) > 1 else times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from grpo_lite import rewards, train
    from grpo_lite.data import prompts
    from grpo_lite.data.loaders import load_dataset
    from grpo_lite.tiny import build_tiny_model

    work = Path(tempfile.mkdtemp(prefix="grpo-lite-overhead-"))
    model_dir = build_tiny_model(work / "tiny")
    fixed = dict(
        num_generations=4, per_device_train_batch_size=4, gradient_accumulation_steps=1,
        max_completion_length=32, save_strategy="no", learning_rate=1e-3,
    )  # fmt: skip
    ratios = []
    for pair in range(args.pairs):
        ours = _step_timer()
        out = work / f"ours-{pair}"
        train(str(model_dir), dataset="synthetic", rewards=["length"], method="full", max_steps=args.steps,
              output_dir=out, callbacks=[ours], quiet=True, **fixed)  # fmt: skip
        settings = json.loads((out / "run.json").read_text())["settings"]
        settings["output_dir"] = str(work / f"raw-{pair}")

        raw = _step_timer()
        tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
        style = prompts.PromptStyle()
        data = prompts.apply_prompt_style(load_dataset("synthetic", split="train", style=style), tokenizer, style)
        trainer = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(model_dir),
            reward_funcs=[rewards.get_reward("length")],
            args=GRPOConfig(**settings),
            train_dataset=data,
            processing_class=tokenizer,
            callbacks=[raw],
        )
        trainer.train()
        ratio = _median_step(ours.times) / _median_step(raw.times)
        ratios.append(ratio)
        print(f"pair {pair}: grpo-lite {_median_step(ours.times) * 1e3:.1f} ms/step, "
              f"raw {_median_step(raw.times) * 1e3:.1f} ms/step, ratio {ratio:.3f}")  # fmt: skip
    print(f"overhead_ratio={statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
