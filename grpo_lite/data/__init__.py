"""Stage 1 of the pipeline: questions -> prompts (loaders, synthetic problems, answers, prompt styles).

docs/index.md lists the modules. Nothing is imported here: import the module you need.
"""
