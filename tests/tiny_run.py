"""Settings and helpers shared by the tests that train the tiny random Llama for a few steps."""

import os
import signal

# 4 generations of 16 tokens per prompt and a dense reward: a random model earns no XML reward.
TINY_RUN = dict(
    dataset="synthetic",
    rewards=["length"],
    num_generations=4,
    per_device_train_batch_size=4,
    gradient_accumulation_steps=1,
    max_completion_length=16,
    learning_rate=1e-2,
    quiet=True,
)


def signal_during_step(step: int, signum: int = signal.SIGINT):
    """A trainer callback that sends this process ``signum`` (the first Ctrl-C, or SIGTERM) while ``step`` runs."""
    from transformers import TrainerCallback

    class FirstSignal(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step + 1 == step:
                os.kill(os.getpid(), signum)

    return FirstSignal()


def faults_reusing_a_block(nbytes: int = 16 << 20, times: int = 8) -> tuple[int, int]:
    """Minor page faults of writing and freeing a tensor of ``nbytes`` ``times`` over, and the faults of one
    such block's pages: a heap that keeps freed blocks faults once, a block mapped afresh each time ``times`` times."""
    import resource

    import torch

    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(times):
        torch.empty(nbytes // 4).fill_(1.0)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, nbytes // resource.getpagesize()
