"""The demo's evaluation with the prompts' common prefix forwarded once, against left padding.

Greedy decoding of the demo's 100 held-out problems (``one_step`` prompts, 64 tokens at most, stop at
``</answer>``) on the demo model, both ways in one process, each timed once after a warm-up batch;
the answers must be identical.

    python benchmarks/eval_speed.py [--n 100] [--batch-size 100]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=100)
    args = parser.parse_args()

    import grpo_lite.evaluation as ev
    import grpo_lite.training.step.prefix_cache as pc
    from grpo_lite import DemoConfig
    from grpo_lite.data.loaders import load_dataset
    from grpo_lite.training.loading import demo_model_path

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
    results = {}
    for label, min_prefix in (("left padding", 10**9), ("shared prefix", pc.MIN_SHARED_PREFIX)):
        pc.MIN_SHARED_PREFIX = min_prefix
        start = time.perf_counter()
        results[label] = (ev.evaluate(model, data, **kwargs), time.perf_counter() - start)
        print(f"{label}: {results[label][1]:.1f} s, {results[label][0].summary()}", flush=True)
    same = [s["completion"] for s in results["left padding"][0].samples] == [
        s["completion"] for s in results["shared prefix"][0].samples
    ]
    ratio = results["shared prefix"][1] / results["left padding"][1]
    print(f"eval_speed: shared/left-padding time ratio={ratio:.2f}, identical answers: {same}")


if __name__ == "__main__":
    main()
