"""``grpo-lite export RUN --gguf``: a run's trained model as one GGUF file, plus an Ollama Modelfile."""

from __future__ import annotations

import argparse

from grpo_lite.export import runtimes
from grpo_lite.export.tensors import QUANTIZATIONS
from grpo_lite.training.report.quiet import quiet_libraries

INTERRUPTED = (
    "interrupted: nothing was exported (an earlier export at the path is kept whole); run the same "
    "command again to export"
)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "export",
        help="write a run's trained model as a GGUF file for llama.cpp, Ollama and LM Studio",
        description="Export a run's final model (a LoRA adapter is merged first) as one GGUF file, with an Ollama "
        "Modelfile and the llama-cli line next to it. Llama (Llama 3.x, SmolLM2) and Qwen2 (Qwen2, Qwen2.5) models.",
    )
    p.add_argument(
        "run", metavar="RUN", help="a run folder of grpo-lite train (with run.json and final/), or a model folder"
    )
    p.add_argument("--gguf", action="store_true", required=True, help="write a GGUF file (the one format for now)")
    p.add_argument(
        "--quant",
        choices=list(QUANTIZATIONS),
        default="q8_0",
        help="q8_0: 8-bit, close to f16 (default); f16: 16-bit floats; q4_0: 4-bit, smallest "
        "(docs/export.md compares them)",
    )
    p.add_argument(
        "--output",
        "-o",
        default=None,
        metavar="PATH",
        help="the .gguf file to write (default: RUN/final.gguf, or FOLDER.gguf next to a model folder)",
    )
    return p


def run(args: argparse.Namespace) -> int:
    with quiet_libraries():  # the libraries' bars and warnings, filtered as around train()
        files = runtimes.export_for_runtimes(args.run, args.output, args.quant)
    print(files.summary())
    for line in files.lines():
        print(f"  {line}")
    return 0
