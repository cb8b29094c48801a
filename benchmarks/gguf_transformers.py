"""Reader 1 of an exported GGUF: transformers' own GGUF loader (``gguf_file=``), against the trained model.

For a finished run (default: the demo's, ``runs/demo``), in one process:

- the trained model (``final/``, its LoRA adapter merged, as the demo evaluates it) is evaluated greedily on
  the demo's held-out problems (the run's prompt style, 64 new tokens, stop at ``</answer>``);
- for each quantization, the run is exported (q8_0: the run's own ``final.gguf`` when it is there),
  read back with ``AutoModelForCausalLM.from_pretrained(..., gguf_file=...)`` and the tokenizer with
  ``AutoTokenizer.from_pretrained(..., gguf_file=...)``, and evaluated the same way.

It prints, per file: its size, the accuracy against the trained model's, how many greedy completions
are identical (the first ``--prompts`` problems, and all), whether the GGUF tokenizer gives the same
prompt ids, and the largest difference of log-probs over the first 4 prompts: of each prompt token
given the ones before it, and over the whole vocabulary at every position.

    python benchmarks/gguf_transformers.py [RUN] [--quant f16 q8_0 q4_0] [--n 100] [--prompts 20]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def held_out(run: Path, n: int):  # noqa: ANN201
    """The demo's held-out problems, in the run's prompt style, and the evaluate() settings the demo uses."""
    import json

    from grpo_lite import DemoConfig
    from grpo_lite.data.loaders import load_dataset
    from grpo_lite.export.runtimes import style_of_run

    cfg = DemoConfig()
    style = style_of_run(json.loads((run / "run.json").read_text()))
    data = load_dataset("synthetic", split="test", style=style, limit=n, seed=cfg.seed, levels=cfg.levels)
    return data, {"prompt_style": style, "max_new_tokens": cfg.max_completion_length, "batch_size": cfg.eval_batch_size}


def trained_model(run: Path):  # noqa: ANN201
    """The run's final model as the demo evaluates it: loaded, its LoRA adapter merged."""
    from grpo_lite.evaluation import load_for_eval

    model, tokenizer = load_for_eval(run / "final")
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    return model.eval(), tokenizer


def read_gguf(path: Path):  # noqa: ANN201
    """The file as transformers' GGUF loader reads it (fp32 weights, its own tokenizer)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.eval(), tokenizer


def prompt_logprobs(model, tokenizer, prompts: list[str]):  # noqa: ANN001, ANN201
    """Per prompt (one at a time, no padding): the log-probs over the vocabulary at every position, and
    the ids of the tokens that follow each position."""
    import torch

    out = []
    with torch.inference_mode():
        for text in prompts:
            ids = tokenizer(text, return_tensors="pt")["input_ids"]
            out.append((torch.log_softmax(model(ids).logits.float(), -1)[0], ids[0, 1:]))
    return out


def logprob_gaps(ref, got) -> tuple[float, float]:  # noqa: ANN001
    """(max |d log p| of the prompts' own next tokens, max |d log p| over the whole vocabulary)."""
    own = max(
        (a[:-1].gather(1, n[:, None]) - b[:-1].gather(1, n[:, None])).abs().max().item()
        for (a, n), (b, _) in zip(ref, got)
    )
    return own, max((a - b).abs().max().item() for (a, _), (b, _) in zip(ref, got))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", default="runs/demo", help="a finished run folder (default runs/demo)")
    parser.add_argument("--quant", nargs="+", default=["f16", "q8_0", "q4_0"], choices=["f16", "q8_0", "q4_0"])
    parser.add_argument("--n", type=int, default=100, help="held-out problems evaluated (default 100)")
    parser.add_argument("--prompts", type=int, default=20, help="first problems whose completions are compared")
    args = parser.parse_args()

    from grpo_lite import evaluate, export_gguf

    run = Path(args.run)
    data, kwargs = held_out(run, args.n)
    model, tokenizer = trained_model(run)
    start = time.perf_counter()
    ref = evaluate(model, data, tokenizer=tokenizer, **kwargs)
    print(f"trained model: {ref.summary()} ({time.perf_counter() - start:.0f} s)", flush=True)
    first = [s["completion"] for s in ref.samples]
    from grpo_lite.data.prompts import apply_prompt_style

    rendered = list(apply_prompt_style(data, tokenizer, kwargs["prompt_style"])["prompt"])[: args.prompts]
    ref_logprobs = prompt_logprobs(model, tokenizer, rendered[:4])
    del model
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for quant in args.quant:
            path = run / "final.gguf" if quant == "q8_0" and (run / "final.gguf").is_file() else None
            mark = time.perf_counter()
            if path is None:
                path = export_gguf(run, Path(tmp) / f"final-{quant}.gguf", quant)
            exported = time.perf_counter() - mark
            back, back_tokenizer = read_gguf(path)
            same_ids = all(tokenizer(p)["input_ids"] == back_tokenizer(p)["input_ids"] for p in rendered)
            got_logprobs = prompt_logprobs(back, back_tokenizer, rendered[:4])
            own, worst = logprob_gaps(ref_logprobs, got_logprobs)
            mark = time.perf_counter()
            result = evaluate(back, data, tokenizer=back_tokenizer, **kwargs)
            took = time.perf_counter() - mark
            completions = [s["completion"] for s in result.samples]
            same_first = sum(a == b for a, b in zip(first[: args.prompts], completions[: args.prompts]))
            same_all = sum(a == b for a, b in zip(first, completions))
            rows.append((quant, path.stat().st_size, result, same_first, same_all, own, worst))
            print(
                f"{quant}: {path} {path.stat().st_size / 1e6:.1f} MB (export {exported:.0f} s), {result.summary()} "
                f"({took:.0f} s); identical completions {same_first}/{min(args.prompts, len(first))} first, "
                f"{same_all}/{len(first)} all; same prompt ids: {same_ids}; max |d log-prob|: prompt tokens {own:.2e}, "
                f"whole vocabulary {worst:.2e}",
                flush=True,
            )
            del back
    print(
        f"\n| file | size (MB) | accuracy (trained {ref.accuracy:.0%}) | identical completions, first {args.prompts} "
        f"| identical, all {len(first)} | max abs d log-prob, prompt tokens | whole vocabulary |"
    )
    print("|---|---|---|---|---|---|---|")
    for quant, size, result, same_first, same_all, own, worst in rows:
        print(
            f"| {quant} | {size / 1e6:.1f} | {result.accuracy:.0%} ({100 * (result.accuracy - ref.accuracy):+.0f} pt) "
            f"| {same_first} | {same_all} | {own:.1e} | {worst:.1e} |"
        )


if __name__ == "__main__":
    main()
