"""Stage 4 of the pipeline: a budget -> the best rung of the ladder that fits, and why.

- :mod:`~grpo_lite.planning.hardware`: VRAM detection and nominal/usable sizes -> ``(value, reason)``.
- :mod:`~grpo_lite.planning.ladder`: the presets, best quality first, each with its trade-off.
- :mod:`~grpo_lite.planning.candidates`: the settings tried inside one rung, and the fit test.
- :mod:`~grpo_lite.planning.search`: walks the ladder (and shardings); builds the ``Plan`` or says what would fit.
- :mod:`~grpo_lite.planning.result`: the ``Plan`` dataclass.
- :mod:`~grpo_lite.planning.choose`: ``plan()``: checks the request, finds the budget, runs the search.
- :mod:`~grpo_lite.planning.tables`: plan -> rich tables, the presets page, the memory bar chart.

No torch import on this path. Nothing is imported here.
"""
