"""``grpo-lite`` with CUDA's out-of-memory error raised on one rank: run under torchrun by tests/test_resilience.py.

``python oom_on_one_rank.py RANK STEP train ...`` raises the error in the training step ``STEP`` of rank ``RANK``
only (the other ranks go on into the step's collectives), then runs the CLI with the rest of the arguments.
"""

import os
import sys


def main() -> int:
    import torch
    from transformers import Trainer

    rank, step = int(sys.argv[1]), int(sys.argv[2])
    real = Trainer.training_step

    def training_step(self, *args, **kwargs):
        if int(os.environ["RANK"]) == rank and self.state.global_step + 1 == step:
            raise torch.cuda.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate 1.90 GiB (injected on rank {rank})"
            )
        return real(self, *args, **kwargs)

    Trainer.training_step = training_step
    from grpo_lite.cli import main as cli

    return cli(sys.argv[3:])


if __name__ == "__main__":
    raise SystemExit(main())
