"""What a runtime needs next to an exported GGUF: an Ollama Modelfile, a system prompt file, the llama-cli line.

The three files are written atomically and renamed into place together (docs/internals.md, docs/export.md).
"""

from __future__ import annotations

import os
import re
import shlex
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from grpo_lite.data.prompts import Example, PromptStyle
from grpo_lite.errors import ConfigError
from grpo_lite.export import gguf_file
from grpo_lite.export.gguf_file import export_file
from grpo_lite.export.source import find_source, holding_run
from grpo_lite.files import Together, together
from grpo_lite.files import export_companions as companions

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.export.tensors import Quantization


@dataclass(frozen=True)
class RuntimeFiles:
    """The files written next to an exported GGUF and the command that runs it.

    Attributes:
        gguf: the exported file.
        modelfile: the Ollama Modelfile (``ollama create NAME -f <modelfile>``).
        system_prompt: the system prompt file, for ``llama-cli -sysf``; None when the style has none.
        llama_cli: the llama-cli command line.
        quantization: the file's quantization.
        seconds: wall time of the export (model load, merge, quantization, write).
    """

    gguf: Path
    modelfile: Path
    system_prompt: Path | None
    llama_cli: str
    quantization: str = "q8_0"
    seconds: float = 0.0

    def summary(self) -> str:
        """``GGUF: runs/demo/final.gguf (q8_0, 145 MB, 6 s)``."""
        return f"GGUF: {self.gguf} ({self.quantization}, {self.gguf.stat().st_size / 1e6:.0f} MB, {self.seconds:.0f} s)"

    def lines(self) -> list[str]:
        """How to run the file, one runtime a line (what the demo and ``grpo-lite export`` print): commands a shell
        runs as printed, paths quoted, the Ollama name the folder's in the characters Ollama takes."""
        name = re.sub(r"[^a-z0-9._-]+", "-", self.gguf.parent.resolve().name.lower()).strip("-._") or "grpo-lite"
        return [
            f"llama.cpp: {self.llama_cli}",
            f"Ollama:    ollama create {name} -f {shlex.quote(str(self.modelfile))} && ollama run {name}",
            f"LM Studio: load {self.gguf}",
        ]


def style_of_run(record: dict[str, Any]) -> PromptStyle:
    """The prompt style a run trained with, from its ``run.json`` (``PromptStyle()`` when absent).

    >>> style_of_run({}).prefill
    '<reasoning>\\n'
    >>> style_of_run({"prompt_style": {"system_prompt": "S", "one_shot": False, "prefill": "", "examples": []}}).system_prompt
    'S'
    """
    saved = record.get("prompt_style")
    if not saved:
        return PromptStyle()
    examples = tuple(Example(**e) for e in saved.get("examples", ()))
    return PromptStyle(**{**saved, "examples": examples})


def _quoted(text: str, what: str) -> str:
    if '"""' in text:
        raise ConfigError(
            f'the {what} contains """, which an Ollama Modelfile cannot hold; remove it from the prompt style'
        )
    return f'"""{text}"""'


def modelfile_text(gguf_name: str, style: PromptStyle, stop_strings: tuple[str, ...] = ()) -> str:
    """The Ollama Modelfile for ``gguf_name`` (a file in the same folder) and a prompt style.

    >>> print(modelfile_text("final.gguf", PromptStyle.plain(), ("</answer>",)).split("FROM", 1)[1])
     ./final.gguf
    SYSTEM \"\"\"Respond in the following format:
    <reasoning>
    your step-by-step reasoning
    </reasoning>
    <answer>
    the final answer, a number only
    </answer>\"\"\"
    PARAMETER temperature 0
    PARAMETER stop "</answer>"
    <BLANKLINE>
    """
    lines = [
        "# Ollama Modelfile written by grpo-lite: ollama create NAME -f <this file>, then ollama run NAME.",
        "# SYSTEM and MESSAGE are the prompt style the model was trained with; the chat template is the GGUF file's.",
        f"FROM ./{gguf_name}",
    ]
    if style.system_prompt:
        lines.append(f"SYSTEM {_quoted(style.system_prompt, 'system prompt')}")
    for example in style.examples if style.one_shot else ():
        lines.append(f"MESSAGE user {_quoted(example.question, 'example question')}")
        lines.append(f"MESSAGE assistant {_quoted(example.solution(), 'example solution')}")
    lines.append("PARAMETER temperature 0")
    for stop in stop_strings:
        if '"' in stop:
            raise ConfigError(f'the stop string {stop!r} contains ", which an Ollama Modelfile cannot hold')
        lines.append(f'PARAMETER stop "{stop}"')
    return "\n".join(lines) + "\n"


def llama_cli_command(gguf: Path, system_prompt: Path | None) -> str:
    """The llama-cli line: chat with the file, greedy, with the trained system prompt.

    >>> llama_cli_command(Path("runs/demo/final.gguf"), Path("runs/demo/final.system_prompt.txt"))
    'llama-cli -m runs/demo/final.gguf --temp 0 -sysf runs/demo/final.system_prompt.txt'
    """
    line = f"llama-cli -m {shlex.quote(str(gguf))} --temp 0"
    return line + (f" -sysf {shlex.quote(str(system_prompt))}" if system_prompt is not None else "")


def write_runtime_files(
    gguf: str | os.PathLike, record: dict[str, Any], group: Together | None = None, others: Sequence[int] = ()
) -> RuntimeFiles:
    """Write ``NAME.Modelfile`` (and ``NAME.system_prompt.txt``) next to ``NAME.gguf``, from a run's ``run.json``:
    both or neither (with ``group``, renamed with its other files: the GGUF itself).

    Args:
        others: the sizes of the export's other files (for a full disk's message).
    """
    path = Path(gguf)
    style = style_of_run(record)
    modelfile, system_file = companions(path)
    text = modelfile_text(path.name, style, tuple(record.get("stop_strings", ())))  # a ConfigError writes nothing
    system = system_file if style.system_prompt else None
    sizes = (*others, len(text.encode()), *((len(style.system_prompt.encode()),) if system is not None else ()))
    with together() if group is None else nullcontext(group) as files:
        with export_file(modelfile, "w", files, sizes) as f:
            f.write(text)
        if system is not None:
            with export_file(system, "w", files, sizes) as f:
                f.write(style.system_prompt)
        else:  # an earlier export's system prompt would not be this model's
            files.remove(system_file)
    return RuntimeFiles(gguf=path, modelfile=modelfile, system_prompt=system, llama_cli=llama_cli_command(path, system))


def export_for_runtimes(
    model_dir: str | os.PathLike,
    path: str | os.PathLike | None = None,
    quantization: Quantization = "q8_0",
    loaded: Any = None,
    *,
    lock: bool = True,
) -> RuntimeFiles:
    """:func:`~grpo_lite.export.gguf_file.export_gguf` (``loaded``: the model already in memory, see
    :func:`~grpo_lite.export.gguf_file.write_gguf`), then the Modelfile and system prompt next to the file.

    The run's lock is held throughout (``lock=False``: the caller holds it, as ``train(export=...)`` does).
    """
    start = time.perf_counter()
    with holding_run(model_dir) if lock else nullcontext():
        source = find_source(model_dir)  # after the lock: the run's final model and record as they now are
        with together() as group:  # the GGUF, the Modelfile and the system prompt: all three renamed, or none
            gguf = gguf_file.write_gguf(model_dir, path, quantization, loaded, group)
            files = write_runtime_files(gguf, source.run_record, group, others=group.staged_sizes())
    return replace(files, quantization=quantization, seconds=time.perf_counter() - start)
