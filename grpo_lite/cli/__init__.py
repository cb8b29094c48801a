"""The ``grpo-lite`` command: one module per subcommand, each with ``add_parser`` and ``run``.

A :class:`~grpo_lite.errors.GrpoLiteError` is one line and exit code 2 (no traceback); Ctrl-C prints the module's
``INTERRUPTED`` line (what was kept, what to run next) and exits with 128 + the signal number. Standard output that
can no longer be written (:class:`StdoutLost`) ends the command as the Python docs' note on SIGPIPE does: a pipe
closed by its reader (``| head -1``) silently, with 128 + SIGPIPE; a full disk with one line and exit code 2.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
from typing import Any, Callable

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


class StdoutLost(OSError):
    """Standard output can no longer be written: its reader went away (a pipe to ``head``) or its disk is full."""


class _GuardedStdout:
    """``sys.stdout`` while a command runs: a failed write or flush raises :class:`StdoutLost`, told apart from a
    failure to write a file (a command's broad handler lets it through)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def write(self, text: str) -> int:
        return int(self._guarded(self._stream.write, text))

    def flush(self) -> None:
        self._guarded(self._stream.flush)

    @staticmethod
    def _guarded(call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except OSError as exc:
            raise StdoutLost(exc.errno, exc.strerror) from exc


def _stdout_lost(exc: StdoutLost, stdout: Any) -> int:
    """Point ``stdout``'s file at the null device (the interpreter's last flush would fail again) and say why."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
    except (AttributeError, OSError, ValueError):  # a stream without a file (a test's capture)
        pass
    if exc.errno == errno.EPIPE:  # the reader has what it wanted: as a command killed by SIGPIPE
        return 128 + signal.SIGPIPE
    try:
        print(
            f"error: cannot write the output to standard output ({exc.strerror}); send it where it can be written "
            "(a file on a disk with room, or the terminal) and run the command again",
            file=sys.stderr,
        )
    except OSError:
        pass
    return 2


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``grpo-lite`` console script."""
    stdout, sys.stdout = sys.stdout, _GuardedStdout(sys.stdout)
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # a closed pipe or a full disk fails here, not in the interpreter's exit
    except StdoutLost as exc:
        return _stdout_lost(exc, stdout)
    finally:
        sys.stdout = stdout


def _main(argv: list[str] | None) -> int:
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
