"""Stage 1 of the pipeline: questions -> prompts (loaders, file readers, synthetic problems, answers, prompt styles).

docs/index.md lists the modules. Nothing is imported here: import the module you need.
"""
