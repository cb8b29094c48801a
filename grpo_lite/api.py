"""``grpo_lite.train``: the training pipeline with the optional GGUF export around it.

The pipeline (:func:`grpo_lite.training.pipeline.train`) is the core and never imports the export; this module sits
above both and, with ``export=``, hands it an :class:`~grpo_lite.export.after_training.ExportAfterTraining`
(docs/internals.md). Same signature, docstring and result as the pipeline.
"""

from __future__ import annotations

import functools
from typing import Any

from grpo_lite.export.after_training import ExportAfterTraining
from grpo_lite.training import pipeline
from grpo_lite.training.result import TrainResult


@functools.wraps(pipeline.train)
def train(*args: Any, **kwargs: Any) -> TrainResult:
    export = kwargs.get("export")  # keyword-only
    if export is not None:
        kwargs["export"] = ExportAfterTraining(export)
    return pipeline.train(*args, **kwargs)
