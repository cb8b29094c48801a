"""Stage 3 of the pipeline: a model and settings -> the peak memory of a GRPO step, in named components
(docs/index.md lists the modules). Only measured/ and meta/ import torch. Nothing is imported here.
"""
