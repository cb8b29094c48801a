"""Stage 1 of the pipeline: questions -> prompts.

- :mod:`~grpo_lite.data.loaders`: ``load_gsm8k`` / ``load_dataset`` (hub, local files, synthetic) -> rows with a prompt.
- :mod:`~grpo_lite.data.readers`: jsonl / json / parquet / csv files and folders, with row-exact errors.
- :mod:`~grpo_lite.data.synthetic`: seeded offline problems; :mod:`~grpo_lite.data.templates` holds their templates.
- :mod:`~grpo_lite.data.answers`: numbers in text -> canonical numbers (gold answers, rewards, evaluation).
- :mod:`~grpo_lite.data.prompts`: prompt styles (system prompt, one-shot example, assistant prefill).

Nothing is imported here: import the module you need.
"""
