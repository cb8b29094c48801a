"""``grpo_lite.train``: the training pipeline with the optional GGUF export around it.

The pipeline (:func:`grpo_lite.training.pipeline.train`) is the core: it does not export and never imports the
export. This module sits above both: its ``train`` is the pipeline's, with ``export=`` in place of the pipeline's
``after`` hook, to which it hands an :class:`~grpo_lite.export.after_training.ExportAfterTraining`
(docs/internals.md). Same arguments otherwise, same docstring (plus ``export``), same result.
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any

from grpo_lite.export.after_training import ExportAfterTraining, ExportFormat
from grpo_lite.training import pipeline
from grpo_lite.training.result import TrainResult

_EXPORT_DOC = """\
        export: ``"gguf"`` also writes ``final.gguf`` (q8_0), ``final.Modelfile`` (Ollama) and ``final.system_prompt.txt``
            in the run folder at the end (docs/export.md); checked before training starts. Default: None.
"""


@functools.wraps(pipeline.train)
def train(*args: Any, export: ExportFormat | None = None, **kwargs: Any) -> TrainResult:
    after = None if export is None else ExportAfterTraining(export)  # the format checked here, before anything
    return pipeline.train(*args, after=after, **kwargs)


def _with_export(core: inspect.Signature) -> inspect.Signature:
    """The pipeline's signature with ``export`` in place of its ``after`` hook."""
    export = inspect.Parameter("export", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="ExportFormat | None")
    return core.replace(parameters=[export if p.name == "after" else p for p in core.parameters.values()])


train.__signature__ = _with_export(inspect.signature(pipeline.train))  # type: ignore[attr-defined]
train.__doc__ = re.sub(r"        after: .*?(?=        \*\*overrides:)", _EXPORT_DOC, train.__doc__ or "", flags=re.S)
