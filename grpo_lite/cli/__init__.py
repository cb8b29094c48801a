"""The ``grpo-lite`` command: one module per subcommand, each with ``add_parser`` and ``run``.

A :class:`~grpo_lite.errors.GrpoLiteError` is one line and exit code 2 (no traceback); Ctrl-C prints the module's
``INTERRUPTED`` line (what was kept, what to run next) and exits with 128 + the signal number.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from grpo_lite._version import __version__
from grpo_lite.errors import GrpoLiteError
from grpo_lite.training.report.quiet import quiet_log_lines

INTERRUPTED = "interrupted: nothing was written; run the same command again"

# subcommand name -> module; the order is the order of `grpo-lite --help`.
COMMANDS: dict[str, str] = {
    "demo": "grpo_lite.cli.demo",
    "train": "grpo_lite.cli.train",
    "eval": "grpo_lite.cli.eval",
    "export": "grpo_lite.cli.export",
    "plan": "grpo_lite.cli.plan",
    "presets": "grpo_lite.cli.presets",
}


def build_parser() -> argparse.ArgumentParser:
    """The full parser, every subcommand included (docs/cli.md is checked against it)."""
    parser = argparse.ArgumentParser(
        prog="grpo-lite",
        description="GRPO fine-tuning that fits the GPU you own: plan memory, train, evaluate.",
    )
    parser.add_argument("--version", action="version", version=f"grpo-lite {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS.values():
        mod = importlib.import_module(module)
        sub_parser = mod.add_parser(sub)
        sub_parser.set_defaults(_run=mod.run, _interrupted=getattr(mod, "INTERRUPTED", INTERRUPTED))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``grpo-lite`` console script."""
    args = build_parser().parse_args(argv)
    args._argv = list(sys.argv[1:] if argv is None else argv)  # what --num-processes N reruns in each process
    try:
        with quiet_log_lines():  # the first import of TRL or PEFT imports bitsandbytes, which logs a line on a CPU
            return int(args._run(args) or 0)
    except GrpoLiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # a second Ctrl-C or SIGTERM (training.run.resilience.Aborted carries which)
        print(args._interrupted, file=sys.stderr)
        return 128 + getattr(exc, "signum", 2)


if __name__ == "__main__":
    raise SystemExit(main())
