"""The demo's evaluation as evaluate() runs it, against the two ways it replaced, in one process.

Greedy decoding of the demo's 100 held-out problems (``one_step`` prompts, 64 tokens at most, stop at
``</answer>``) on the demo model, three ways, each timed once after a warm-up batch; the answers must be identical:

- ``left padding``: every prompt padded whole, each row leaving the batch when it ends;
- ``shared prefix, generate``: the prompts' common prefix forwarded once, ``generate`` decoding every row until
  the batch's last one ends (evaluate() before 0.5.0);
- ``shared prefix``: the common prefix forwarded once and each row leaving when it ends (evaluate()).

    python benchmarks/eval_speed.py [--n 100] [--batch-size 50]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=50)
    args = parser.parse_args()

    import grpo_lite.evaluation as ev
    import grpo_lite.training.step.prefix_cache as pc
    from grpo_lite import DemoConfig
    from grpo_lite.data.loaders import load_dataset
    from grpo_lite.data.prompts import prompt_token_ids
    from grpo_lite.memory.models import demo_model_path

    cfg = DemoConfig()
    style = cfg.style()
    data = load_dataset("synthetic", split="test", style=style, limit=args.n, seed=cfg.seed, levels=cfg.levels)
    model, tokenizer = ev.load_for_eval(str(demo_model_path()))
    kwargs = {
        "tokenizer": tokenizer,
        "prompt_style": style,
        "max_new_tokens": cfg.max_completion_length,
        "batch_size": args.batch_size,
    }
    ev.evaluate(model, data.select(range(4)), **kwargs)  # warm-up
    rows_leave = ev._greedy_batch

    def generate(model, tokenizer, prompts, max_new_tokens, stops):  # noqa: ANN001, ANN202 - the 0.4 decode
        return ev._generate_batch(model, tokenizer, prompt_token_ids(tokenizer, prompts), max_new_tokens, stops)

    arms = {
        "left padding": (10**9, rows_leave),
        "shared prefix, generate": (pc.TRAINER.min_shared_prefix, generate),
        "shared prefix": (pc.TRAINER.min_shared_prefix, rows_leave),
    }
    results = {}
    for label, (min_prefix, decode) in arms.items():
        pc.TRAINER, ev._greedy_batch = dataclasses.replace(pc.TRAINER, min_shared_prefix=min_prefix), decode
        start, cpu = time.perf_counter(), time.process_time()
        result = ev.evaluate(model, data, **kwargs)
        results[label] = (result, time.perf_counter() - start, time.process_time() - cpu)
        print(f"{label}: {results[label][1]:.1f} s ({results[label][2]:.1f} CPU s), {result.summary()}", flush=True)
    answers = {label: [s["completion"] for s in r[0].samples] for label, r in results.items()}
    same = all(a == answers["shared prefix"] for a in answers.values())
    print(
        "eval_speed: CPU time ratios shared/left-padding="
        f"{results['shared prefix'][2] / results['left padding'][2]:.2f}, "
        f"rows-leave/generate={results['shared prefix'][2] / results['shared prefix, generate'][2]:.2f}, "
        f"identical answers: {same}"
    )


if __name__ == "__main__":
    main()
