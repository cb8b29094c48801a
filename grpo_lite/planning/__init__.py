"""Stage 4 of the pipeline: a budget -> the best rung of the ladder that fits, and why (docs/index.md lists the
modules). No torch import on this path. Nothing is imported here.
"""
