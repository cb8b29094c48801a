"""math-verify in a worker process: a deadline on every ``math`` answer, on any thread.

math-verify bounds its work with ``signal.alarm``, which only the main thread has: off it (TRL's or a user's
worker thread) a tower of powers (``10^{10^{10}}``) ran forever, and in it a bound of 10 s logged the whole
expression. Here one worker process (a fresh interpreter, started on first use, in its own session so that Ctrl-C
reaches only the caller) parses and compares; an answer it has not judged within
:data:`grpo_lite.defaults.MATH_ANSWER_TIMEOUT_S` scores 0 with one counted warning, the worker is ended and the next
answer starts a fresh one. Ordinary answers cost a pipe round trip (well under a millisecond) on top of
math-verify's own milliseconds. The caller's side is standard library only.
"""

from __future__ import annotations

import json
import logging
import math
import os
import queue
import signal
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import IO, Any

from grpo_lite.defaults import MATH_ANSWER_TIMEOUT_S, MATH_WORKER_START_S

_SERVE = "from grpo_lite.data.math_worker import serve; serve()"
_LOCK = threading.Lock()  # one question at a time on the pipe
_state: dict[str, Any] = {"worker": None, "late": 0}  # the running worker; answers scored 0 past the deadline


class _Worker:
    """One worker process and the thread that reads its answers (so that a wait can end at a deadline)."""

    def __init__(self) -> None:
        root = str(Path(__file__).resolve().parents[2])  # where grpo_lite is importable from
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        self.pid = os.getpid()  # a forked child must not share this worker's pipes
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            encoding="utf-8", env={**os.environ, "PYTHONPATH": path}, start_new_session=True,
        )  # fmt: skip
        self.lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()
        if self.answer(MATH_WORKER_START_S) != "ready":
            self.close()
            raise RuntimeError(
                "math-verify's worker process did not start (its error is above): check that "
                f"{sys.executable} -c 'import math_verify' works"
            )

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line.strip())
        self.lines.put(None)  # the worker ended

    def answer(self, timeout: float) -> str | None:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def ask(self, gold: str, answer: str | None) -> bool | None:
        """The worker's verdict, or None when it gave none in time (or ended)."""
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps([gold, answer]) + "\n")
            self.process.stdin.flush()
        except OSError:  # it ended since the last answer
            return None
        verdict = self.answer(MATH_ANSWER_TIMEOUT_S)
        return None if verdict is None else verdict == "true"

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


def judge(gold: str, answer: str | None) -> bool:
    """math-verify's ``verify(parse(gold), parse(answer))``; with ``answer`` None, whether ``gold`` parses as
    math. False past the deadline, with a warning that counts them and shows the text cut to 80 characters."""
    with _LOCK:
        worker = _state["worker"]
        if worker is None or worker.pid != os.getpid():
            worker = _state["worker"] = _Worker()
        verdict = worker.ask(gold, answer)
        if verdict is not None:
            return verdict
        worker.close()
        _state["worker"], _state["late"] = None, _state["late"] + 1
        late = _state["late"]
    text = gold if answer is None else answer
    warnings.warn(
        f"math-verify did not judge an answer within {MATH_ANSWER_TIMEOUT_S:g} s, scored 0 ({late} so far): "
        f"{text!r:.80}",
        stacklevel=3,
    )
    return False


def serve() -> None:
    """The worker: one ``[gold, answer or null]`` JSON line in, ``true`` or ``false`` out, until stdin closes."""
    from math_verify import parse, verify  # heavy: sympy

    for name in ("math_verify.parser", "math_verify.grader"):  # "timeout is disabled": the caller has the deadline
        logging.getLogger(name).setLevel(logging.CRITICAL)
    out, sys.stdout = sys.stdout, sys.stderr  # a stray print must not break the protocol
    print("ready", file=out, flush=True)
    for line in sys.stdin:
        # a backstop should the caller die while an answer runs: SIGALRM's default action ends this process
        signal.alarm(math.ceil(4 * MATH_ANSWER_TIMEOUT_S))
        gold, answer = json.loads(line)
        parsed_gold = parse(gold, parsing_timeout=None)
        if answer is None:  # math-verify keeps the bare string of what sympy could not read
            verdict = any(not isinstance(part, str) for part in parsed_gold)
        else:
            parsed = parse(answer, parsing_timeout=None)
            verdict = bool(parsed) and bool(verify(parsed_gold, parsed, timeout_seconds=None))
        signal.alarm(0)
        print("true" if verdict else "false", file=out, flush=True)
