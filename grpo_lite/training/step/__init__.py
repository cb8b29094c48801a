"""The GRPO step: TRL's GRPOTrainer and what grpo-lite adds to it, each through one of TRL's own methods.

- :mod:`~grpo_lite.training.step.grpo_trainer`: ``LiteGRPOTrainer``, the subclass train() builds.
- :mod:`~grpo_lite.training.step.shared_prefix`: each prompt forwarded once for its group in the log-prob passes.
- :mod:`~grpo_lite.training.step.prefix_cache`: a batch's common prompt prefix forwarded once for decoding.
- :mod:`~grpo_lite.training.step.sampling_check`: the first shared sampling call checked against TRL's own.
- :mod:`~grpo_lite.training.step.zero_advantage`: rows whose advantage is zero skip the loss's forward and backward.
- :mod:`~grpo_lite.training.step.trl_seam`: the TRL internals the above rely on, checked when the trainer is built.

Nothing is imported here.
"""
