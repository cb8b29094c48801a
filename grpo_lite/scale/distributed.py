"""Scaling out: :data:`SHARDINGS` (the one registry of sharding modes), their accelerate configs, the launch command
(``torchrun`` on CPU, ``accelerate launch`` on CUDA). No torch or transformers at the top.
``config_path("zero3")`` is the shipped config's path, for ``accelerate launch --config_file``.

>>> from typing import get_args
>>> list(SHARDINGS)
['none', 'ddp', 'zero2', 'zero3', 'fsdp']
>>> tuple(SHARDINGS) == get_args(Sharding)  # the Literal the planner and the CLI validate against
True
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Mapping, Sequence

from grpo_lite.errors import ConfigError
from grpo_lite.settings import Sharding, check

_MODULE = "grpo_lite"  # `python -m grpo_lite` is the `grpo-lite` command


@dataclass(frozen=True)
class ShardingMode:
    """One way to spread a GRPO step over N processes (one GPU each)."""

    name: Sharding  # the value of --sharding / plan(sharding=...)
    engine: str  # what does the work
    config: str | None  # the accelerate config shipped in grpo_lite/scale/accelerate_configs (None: no launcher)
    divided: str  # what each device holds only 1/N of
    whole: str  # what every device holds in full
    requires: tuple[str, ...] = ()  # pip packages it needs beyond grpo-lite's own
    cpu: bool = False  # runs on CPU processes (gloo); the others need one CUDA GPU per process


SHARDINGS: dict[str, ShardingMode] = {
    "none": ShardingMode("none", "one process", None, "nothing", "everything", cpu=True),
    "ddp": ShardingMode(
        "ddp",
        "PyTorch DDP (accelerate MULTI_GPU; gloo on CPU)",
        "ddp.yaml",
        "the prompts of each step (data parallel)",
        "weights, gradients plus DDP's bucket copy, optimizer state",
        cpu=True,
    ),
    "zero2": ShardingMode(
        "zero2",
        "DeepSpeed ZeRO stage 2",
        "zero2.yaml",
        "gradients, optimizer state and DeepSpeed's fp32 master weights",
        "bf16 weights",
        requires=("deepspeed",),
    ),
    "zero3": ShardingMode(
        "zero3",
        "DeepSpeed ZeRO stage 3",
        "zero3.yaml",
        "weights, gradients, optimizer state and fp32 master weights",
        "the layer being computed; the whole model while sampling unless ds3_gather_for_generation=False",
        requires=("deepspeed",),
    ),
    "fsdp": ShardingMode(
        "fsdp",
        "PyTorch FSDP2, full shard, transformer-layer wrap",
        "fsdp.yaml",
        "weights, gradients and optimizer state",
        "the decoder layer being computed (plus one prefetched) and the LM head",
    ),
}


def _mode(sharding: str) -> ShardingMode:
    return SHARDINGS[check("sharding", sharding, tuple(SHARDINGS))]


def _launched(sharding: str, num_processes: int = 2) -> ShardingMode:
    """The mode of a sharding run under a launcher: not 'none', and ddp with at least 2 processes."""
    mode = _mode(sharding)
    if mode.config is None:
        raise ConfigError(
            "sharding 'none' runs one process without a launcher; drop --num-processes, or choose ddp, zero2, zero3 "
            "or fsdp"
        )
    if mode.name == "ddp" and num_processes < 2:
        raise ConfigError(
            "sharding 'ddp' needs at least 2 processes (accelerate refuses --multi_gpu with one); run without "
            "--num-processes on one device"
        )
    return mode


def config_path(sharding: Sharding) -> Path:
    """The accelerate config shipped for ``sharding``.

    >>> config_path("zero3").name
    'zero3.yaml'
    >>> config_path("none")
    Traceback (most recent call last):
    ...
    grpo_lite.errors.ConfigError: sharding 'none' runs one process without a launcher; drop --num-processes, or choose ddp, zero2, zero3 or fsdp
    """
    return Path(str(files("grpo_lite.scale") / "accelerate_configs" / str(_launched(sharding).config)))


def launch_command(
    argv: Sequence[str],
    num_processes: int,
    sharding: Sharding | None = None,
    cuda: bool = False,
    *,
    config_file: str | os.PathLike[str] | None = None,
    python: str | None = None,
) -> list[str]:
    """The command that runs ``grpo-lite <argv>`` in ``num_processes`` processes: ``torchrun --standalone`` on CPU
    (``accelerate launch --cpu`` would start ONE process), ``accelerate launch`` with the sharding's config on CUDA.

    Args:
        argv: the ``grpo-lite`` arguments, e.g. ``["train", "MODEL", "--max-steps", "2"]``.
        num_processes: processes to start (one GPU each on CUDA).
        sharding: ddp, zero2, zero3 or fsdp. Default: ddp.
        cuda: whether the processes get GPUs.
        config_file: an accelerate config to use instead of the shipped one.
        python: the interpreter. Default: ``sys.executable``.

    Raises:
        ConfigError: sharding 'none', ddp with one process, or a GPU-only sharding on CPU.

    >>> launch_command(["train", "m"], 2, python="python")
    ['python', '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', '2', '-m', 'grpo_lite', 'train', 'm']
    >>> launch_command(["train", "m"], 4, "zero3", cuda=True, config_file="z3.yaml", python="python")[2:8]
    ['accelerate.commands.launch', '--config_file', 'z3.yaml', '--num_processes', '4', '--main_process_port']
    """
    n = check("num_processes", num_processes)
    mode = _launched(sharding or "ddp", n)
    py = python or sys.executable
    if not cuda:
        if not mode.cpu:
            raise ConfigError(
                f"sharding {mode.name!r} ({mode.engine}) runs only on CUDA GPUs, one per process; "
                "on CPU use --sharding ddp (gloo)"
            )
        return [py, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n), "-m", _MODULE, *argv]
    config = str(config_file) if config_file is not None else str(config_path(mode.name))
    launch = [py, "-m", "accelerate.commands.launch", "--config_file", config, "--num_processes", str(n)]
    return [*launch, "--main_process_port", "0", "-m", _MODULE, *argv]  # port 0: accelerate picks a free one


def in_launched_process(env: Mapping[str, str] | None = None) -> bool:
    """Whether this process was started by torchrun / accelerate launch (it must not relaunch).

    >>> in_launched_process({"LOCAL_RANK": "1", "WORLD_SIZE": "2"}), in_launched_process({})
    (True, False)
    """
    env = os.environ if env is None else env
    return "LOCAL_RANK" in env and "WORLD_SIZE" in env


def detect_sharding(env: Mapping[str, str] | None = None) -> Sharding:
    """The sharding this process was launched with, read from what torchrun / accelerate launch set.

    Raises:
        ConfigError: DeepSpeed with a ZeRO stage other than 2 or 3 (the planner models only those).

    >>> detect_sharding({"WORLD_SIZE": "2", "LOCAL_RANK": "0"})
    'ddp'
    >>> detect_sharding({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"})
    'zero3'
    >>> detect_sharding({})
    'none'
    """
    env = os.environ if env is None else env
    if env.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        stage = env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "")
        if stage in ("2", "3"):
            return "zero2" if stage == "2" else "zero3"
        raise ConfigError(
            f"DeepSpeed ZeRO stage {stage or '(unset)'} is not modelled by the planner; launch with "
            "grpo-lite's zero2 or zero3 config (its path: grpo_lite.scale.distributed.config_path('zero3'))"
        )
    if env.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        return "fsdp"
    return "ddp" if int(env.get("WORLD_SIZE", "1")) > 1 else "none"


_NUMBERS = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_PORT")  # what torchrun and accelerate launch set, as numbers


def launched_world_size(env: Mapping[str, str] | None = None) -> int:
    """How many processes this one was launched among (1: not launched), from the variables torchrun and accelerate
    launch set, checked before accelerate or torch.distributed read them (their errors are tracebacks); then the
    sharding they set (:func:`detect_sharding`: a DeepSpeed ZeRO stage the planner does not model is refused).

    Raises:
        ConfigError: a variable that is not a whole number, several processes without ``MASTER_ADDR`` (where rank
            0 listens), or DeepSpeed ZeRO stage 1.

    >>> launched_world_size({}), launched_world_size({"WORLD_SIZE": "2", "MASTER_ADDR": "localhost"})
    (1, 2)
    >>> launched_world_size({"WORLD_SIZE": "2", "RANK": "0"})
    Traceback (most recent call last):
    ...
    grpo_lite.errors.ConfigError: WORLD_SIZE=2 says this process is one of 2, but MASTER_ADDR (rank 0's host) is not set: start the processes with torchrun or accelerate launch, which set them (grpo-lite train --num-processes 2 does), or unset WORLD_SIZE to train in one process
    """
    env = os.environ if env is None else env
    hint = "start the processes with torchrun or accelerate launch, which set them"
    bad = [f"{key}={env[key]!r}" for key in _NUMBERS if key in env and not env[key].strip().isdigit()]
    if bad or env.get("WORLD_SIZE", "1").strip() == "0":
        raise ConfigError(
            f"{', '.join(bad) or 'WORLD_SIZE=0'}: torchrun and accelerate launch set these to whole numbers "
            f"(WORLD_SIZE at least 1); unset {'them' if len(bad) > 1 else 'it'} to train in one process, or {hint}"
        )
    world = int(env.get("WORLD_SIZE", "1"))
    if world > 1 and not env.get("MASTER_ADDR"):
        raise ConfigError(
            f"WORLD_SIZE={world} says this process is one of {world}, but MASTER_ADDR (rank 0's host) is not set: "
            f"{hint} (grpo-lite train --num-processes {world} does), or unset WORLD_SIZE to train in one process"
        )
    detect_sharding(env)
    return world
