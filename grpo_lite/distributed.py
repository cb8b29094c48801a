"""Scaling out: accelerate configs per sharding, the relaunch under N processes, per-rank records.

- :data:`SHARDINGS`: the one registry of sharding modes (what each divides across the N processes,
  what stays whole, the accelerate config shipped in ``grpo_lite/accelerate_configs/``).
- :func:`accelerate_config` / :func:`write_accelerate_config`: a shipped config with ``num_processes`` set.
- :func:`launch_command`: the ``torchrun`` (CPU, gloo) or ``accelerate launch`` (CUDA) command that
  reruns ``grpo-lite train`` under N processes; :func:`maybe_relaunch` runs it for the CLI.
- ``RankRecordCallback``: every rank writes ``<output_dir>/ranks/rank<R>.json`` when training ends;
  :func:`check_ranks` reads them back and fails if a rank is missing or trained alone.

Cheap to import: no torch, transformers or yaml at the top. ``RankRecordCallback`` subclasses
transformers' ``TrainerCallback`` and is built on first access (PEP 562 module ``__getattr__``).
``python -m grpo_lite.distributed zero3 --num-processes 4 --output zero3.yaml`` writes a config.

>>> list(SHARDINGS)
['none', 'ddp', 'zero2', 'zero3', 'fsdp']
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence, get_args

from grpo_lite.errors import ConfigError, GrpoLiteError
from grpo_lite.step_settings import Sharding

__all__ = ["ShardingMode", "SHARDINGS", "MixedPrecision", "config_path", "accelerate_config",
           "write_accelerate_config", "launch_command", "in_launched_process", "detect_sharding",
           "add_launch_arguments", "namespace_argv", "maybe_relaunch", "RankRecord", "RankRecordCallback",
           "read_rank_records", "check_ranks"]

MixedPrecision = Literal["no", "fp16", "bf16"]
_MODULE = "grpo_lite"  # `python -m grpo_lite` is the `grpo-lite` command


@dataclass(frozen=True)
class ShardingMode:
    """One way to spread a GRPO step over N processes (one GPU each).

    Attributes:
        name: the value of ``--sharding`` / ``plan(sharding=...)``.
        engine: what does the work.
        config: the accelerate config file shipped in ``grpo_lite/accelerate_configs`` (None: no launcher).
        divided: what each device holds only 1/N of.
        whole: what every device holds in full.
        requires: pip packages it needs beyond grpo-lite's own.
        cpu: whether it runs on CPU processes (gloo); the others need one CUDA GPU per process.
    """

    name: Sharding
    engine: str
    config: str | None
    divided: str
    whole: str
    requires: tuple[str, ...] = ()
    cpu: bool = False


SHARDINGS: dict[str, ShardingMode] = {
    "none": ShardingMode("none", "one process", None, "nothing", "everything", cpu=True),
    "ddp": ShardingMode("ddp", "PyTorch DDP (accelerate MULTI_GPU; gloo on CPU)", "ddp.yaml",
                        "the prompts of each step (data parallel)",
                        "weights, gradients plus DDP's bucket copy, optimizer state", cpu=True),
    "zero2": ShardingMode("zero2", "DeepSpeed ZeRO stage 2", "zero2.yaml",
                          "gradients, optimizer state and DeepSpeed's fp32 master weights", "bf16 weights",
                          requires=("deepspeed",)),
    "zero3": ShardingMode("zero3", "DeepSpeed ZeRO stage 3", "zero3.yaml",
                          "weights, gradients, optimizer state and fp32 master weights",
                          "the layer being computed; the whole model while sampling unless "
                          "ds3_gather_for_generation=False", requires=("deepspeed",)),
    "fsdp": ShardingMode("fsdp", "PyTorch FSDP2, full shard, transformer-layer wrap", "fsdp.yaml",
                         "weights, gradients and optimizer state",
                         "the decoder layer being computed (plus one prefetched) and the LM head"),
}


def _mode(sharding: str) -> ShardingMode:
    if sharding not in SHARDINGS:
        raise ConfigError(f"sharding={sharding!r} is not valid; choose one of {', '.join(SHARDINGS)}")
    return SHARDINGS[sharding]


def _check_processes(num_processes: object) -> int:
    if isinstance(num_processes, bool) or not isinstance(num_processes, int) or num_processes < 1:
        raise ConfigError(f"num_processes={num_processes!r} must be a positive integer (one per GPU)")
    return num_processes


def config_path(sharding: Sharding) -> Path:
    """The accelerate config shipped for ``sharding``.

    >>> config_path("zero3").name
    'zero3.yaml'
    >>> config_path("none")
    Traceback (most recent call last):
    ...
    grpo_lite.errors.ConfigError: sharding 'none' runs one process without a launcher; choose ddp, zero2, zero3 or fsdp
    """
    mode = _mode(sharding)
    if mode.config is None:
        raise ConfigError("sharding 'none' runs one process without a launcher; choose ddp, zero2, zero3 or fsdp")
    from importlib.resources import files

    return Path(str(files("grpo_lite") / "accelerate_configs" / mode.config))


def accelerate_config(sharding: Sharding, num_processes: int, *, mixed_precision: MixedPrecision = "bf16") -> dict:
    """The shipped config for ``sharding`` as a dict, with ``num_processes`` and ``mixed_precision`` set.

    Raises:
        ConfigError: unknown sharding or precision, ``num_processes`` < 1, or ddp with one process.

    >>> cfg = accelerate_config("zero3", 4)
    >>> cfg["distributed_type"], cfg["num_processes"], cfg["deepspeed_config"]["zero3_init_flag"]
    ('DEEPSPEED', 4, True)
    """
    import yaml

    _check_processes(num_processes)
    if mixed_precision not in get_args(MixedPrecision):
        raise ConfigError(f"mixed_precision={mixed_precision!r} is not valid; choose one of "
                          f"{', '.join(get_args(MixedPrecision))} (fp16 on GPUs without bf16, such as T4 or V100)")
    if sharding == "ddp" and num_processes < 2:
        raise ConfigError("sharding 'ddp' needs at least 2 processes (accelerate refuses --multi_gpu with one); "
                          "run without --num-processes on one GPU")
    config = yaml.safe_load(config_path(sharding).read_text(encoding="utf-8"))
    config.update(num_processes=num_processes, mixed_precision=mixed_precision)
    return config


def write_accelerate_config(sharding: Sharding, num_processes: int, path: str | os.PathLike[str], *,
                            mixed_precision: MixedPrecision = "bf16") -> Path:
    """Write the config for ``sharding`` with ``num_processes`` to ``path`` (for ``accelerate launch``).

    The shipped file's comment header (what the mode divides, how to run it) is kept.

    Returns:
        The path written.
    """
    import yaml

    config = accelerate_config(sharding, num_processes, mixed_precision=mixed_precision)
    shipped = config_path(sharding).read_text(encoding="utf-8").splitlines(keepends=True)
    header = "".join(line for line in shipped if line.startswith("#"))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(header + yaml.safe_dump(config, sort_keys=True), encoding="utf-8")
    return out


def launch_command(argv: Sequence[str], num_processes: int, sharding: Sharding | None = None, cuda: bool = False,
                   *, config_file: str | os.PathLike[str] | None = None, python: str | None = None) -> list[str]:
    """The command that runs ``grpo-lite <argv>`` in ``num_processes`` processes.

    On CPU: ``torchrun --standalone`` (gloo; ``accelerate launch --cpu`` would start ONE process).
    On CUDA: ``accelerate launch`` with the config for ``sharding`` (default ddp).

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
    n = _check_processes(num_processes)
    mode = _mode(sharding or "ddp")
    if mode.config is None:
        raise ConfigError("sharding 'none' runs one process: drop --num-processes, or choose ddp, zero2, zero3 or fsdp")
    if mode.name == "ddp" and n < 2:
        raise ConfigError("sharding 'ddp' needs at least 2 processes; run without --num-processes on one device")
    py = python or sys.executable
    if not cuda:
        if not mode.cpu:
            raise ConfigError(f"sharding {mode.name!r} ({mode.engine}) runs only on CUDA GPUs, one per process; "
                              "on CPU use --sharding ddp (gloo)")
        return [py, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n), "-m", _MODULE, *argv]
    config = str(config_file) if config_file is not None else str(config_path(mode.name))
    return [py, "-m", "accelerate.commands.launch", "--config_file", config, "--num_processes", str(n),
            "--main_process_port", "0", "-m", _MODULE, *argv]  # port 0: accelerate picks a free one


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
        raise ConfigError(f"DeepSpeed ZeRO stage {stage or '(unset)'} is not modelled by the planner; launch with "
                          "grpo-lite's zero2 or zero3 config (python -m grpo_lite.distributed zero3 --output FILE)")
    if env.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        return "fsdp"
    return "ddp" if int(env.get("WORLD_SIZE", "1")) > 1 else "none"


# ---- the CLI side: --num-processes / --sharding and the relaunch ---------------------------------
def add_launch_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--num-processes`` and ``--sharding`` to a subcommand (its parser is kept for the relaunch)."""
    parser.add_argument("--num-processes", type=int, default=1, metavar="N",
                        help="data-parallel processes, one GPU each (CPU: gloo); --budget-gb is per device")
    parser.add_argument("--sharding", choices=list(SHARDINGS), default=None,
                        help="split state across processes (default: the planner's choice; ddp on CPU)")
    parser.set_defaults(_launch_parser=parser)


def namespace_argv(parser: argparse.ArgumentParser, args: argparse.Namespace, **replace: Any) -> list[str]:
    """Command-line arguments that parse back to ``args`` (with ``replace`` applied); defaults are left out.

    >>> p = argparse.ArgumentParser(); _ = p.add_argument("model"); _ = p.add_argument("--max-steps", type=int)
    >>> namespace_argv(p, p.parse_args(["m", "--max-steps", "2"]))
    ['m', '--max-steps=2']
    """
    values = {**vars(args), **replace}
    positional: list[str] = []
    optional: list[str] = []
    for action in parser._actions:  # argparse keeps its actions here; there is no public accessor
        if action.dest not in values or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        value = values[action.dest]
        if not action.option_strings:
            positional.extend(map(str, value) if isinstance(value, (list, tuple)) else [str(value)])
            continue
        if value is None or value == action.default:
            continue
        flag = next((s for s in action.option_strings if s.startswith("--")), action.option_strings[0])
        if action.nargs == 0:
            optional.append(flag)
        elif isinstance(action, argparse._AppendAction):
            optional.extend(f"{flag}={item}" for item in value)
        elif isinstance(value, (list, tuple)):
            optional.extend([flag, *map(str, value)])
        else:
            optional.append(f"{flag}={value}")
    return positional + optional


def _detect_gpus() -> tuple[int, float | None]:
    """GPU count and device 0's GiB, asked in a child process so this one creates no CUDA context."""
    code = ("import json, torch\nfrom grpo_lite.hardware import detect_vram\n"
            "n = torch.cuda.device_count()\nprint(json.dumps([n, detect_vram()[0] if n else None]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return 0, None
    count, gib = json.loads(done.stdout.strip().splitlines()[-1])
    return int(count), gib


def _choose_sharding(args: argparse.Namespace, cuda: bool, gib: float | None) -> Sharding:
    if args.sharding is not None:
        return args.sharding
    if not cuda:
        return "ddp"
    from grpo_lite.cli._common import parse_set
    from grpo_lite.hardware import usable_to_nominal_gb
    from grpo_lite.presets import plan

    budget = args.budget_gb if args.budget_gb is not None else round(usable_to_nominal_gb(gib or 0.0), 1)
    return plan(args.model, budget, method=args.method, preset=args.preset, device="cuda",
                num_processes=args.num_processes, **parse_set(args.set)).sharding


def maybe_relaunch(args: argparse.Namespace) -> int | None:
    """Rerun ``grpo-lite train`` under ``args.num_processes`` processes when asked; None: train here.

    Inside a launched process it only checks that the world size matches ``--num-processes``.
    Otherwise it picks the sharding (``--sharding``, else the planner's choice; ddp on CPU), fixes the
    output folder so every rank writes to the same one, runs :func:`launch_command` and, when the
    ranks left records, checks them with :func:`check_ranks`.

    Returns:
        The launcher's exit code, or None when this process should train itself.
    """
    n = _check_processes(args.num_processes)
    if in_launched_process():
        world = int(os.environ["WORLD_SIZE"])
        if n > 1 and world != n:
            raise ConfigError(f"--num-processes {n} but this process was launched with WORLD_SIZE={world}; "
                              "drop --num-processes when you start the processes yourself")
        return None
    if n == 1 and args.sharding in (None, "none", "ddp"):
        return None
    count, gib = _detect_gpus()
    if count and n > count:
        raise ConfigError(f"--num-processes {n} needs {n} GPUs, one per process; {count} found")
    sharding = _choose_sharding(args, cuda=count > 0, gib=gib)
    if sharding == "none":
        return None
    missing = [pkg for pkg in _mode(sharding).requires if not _importable(pkg)]
    if missing:
        raise ConfigError(f"sharding {sharding!r} needs {', '.join(missing)}: pip install {' '.join(missing)}")
    from grpo_lite.trainer import default_output_dir

    out = Path(args.output_dir) if args.output_dir is not None else default_output_dir(str(args.model))
    argv = ["train", *namespace_argv(args._launch_parser, args, output_dir=str(out), sharding=sharding)]
    cmd = launch_command(argv, n, sharding, cuda=count > 0)
    _clear_records(out)
    print(f"launching {n} processes ({SHARDINGS[sharding].engine}): {shlex.join(cmd)}", file=sys.stderr, flush=True)
    launcher = subprocess.Popen(cmd)
    try:
        code = launcher.wait()
    except KeyboardInterrupt:  # the ranks got the same Ctrl-C: let them save their checkpoint and exit
        code = launcher.wait()
    if code == 0 and (out / "ranks").is_dir():
        records = check_ranks(out, n)
        print("ranks: " + "; ".join(f"rank {r.rank}: {r.steps} steps, {r.local_samples} samples" for r in records))
    return code


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# ---- what each rank ran ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RankRecord:
    """What one process did, written to ``<output_dir>/ranks/rank<R>.json`` when training ends.

    Attributes:
        rank: this process's global rank.
        world_size: processes in the job (1: it trained alone).
        steps: optimizer steps (``state.global_step``).
        local_samples: completions this rank trained on (micro-batches x per-device batch).
        backend: the torch.distributed backend (gloo, nccl), or None when not initialised.
        micro_batches: forward/backward passes on this rank.
        param_sum: sum of this rank's local trainable parameters after training (equal across
            DDP ranks when gradients were all-reduced; a local shard's sum under ZeRO-3 / FSDP).
        pid: the process id.
        wall_seconds: train begin to train end on this rank.
    """

    rank: int
    world_size: int
    steps: int
    local_samples: int
    backend: str | None
    micro_batches: int = 0
    param_sum: float | None = None
    pid: int = 0
    wall_seconds: float = 0.0


def _records_dir(output_dir: str | os.PathLike[str]) -> Path:
    return Path(output_dir) / "ranks"


def _clear_records(output_dir: str | os.PathLike[str]) -> None:
    for old in _records_dir(output_dir).glob("rank*.json"):
        old.unlink()


def read_rank_records(output_dir: str | os.PathLike[str]) -> list[RankRecord]:
    """Every ``ranks/rank<R>.json`` under ``output_dir``, by rank."""
    records = [RankRecord(**json.loads(p.read_text(encoding="utf-8")))
               for p in _records_dir(output_dir).glob("rank*.json")]
    return sorted(records, key=lambda r: r.rank)


def check_ranks(output_dir: str | os.PathLike[str], num_processes: int) -> list[RankRecord]:
    """Read the rank records and check that all ``num_processes`` ranks trained together.

    Raises:
        GrpoLiteError: a rank is missing, or a rank saw a different world size (for example a
            process that trained alone because the launcher started it without a process group).
    """
    records = read_rank_records(output_dir)
    ranks = [r.rank for r in records]
    if ranks != list(range(num_processes)):
        raise GrpoLiteError(f"expected records of ranks 0..{num_processes - 1} in {_records_dir(output_dir)}, "
                            f"found {ranks}: some processes did not finish training")
    alone = [r.rank for r in records if r.world_size != num_processes]
    if alone:
        raise GrpoLiteError(f"ranks {alone} ran with world size {records[alone[0]].world_size}, not {num_processes}: "
                            "they trained alone (on CPU, launch with torchrun and use_cpu=True)")
    return records


def _backend(torch: Any) -> str | None:
    """The process group's backend; "cpu:gloo,cuda:nccl" configs (backend "undefined") give the one in use."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return None
    backend = str(dist.get_backend())
    if backend != "undefined":
        return backend
    per_device = dict(part.split(":", 1) for part in dist.get_backend_config().split(",") if ":" in part)
    return per_device.get("cuda" if torch.cuda.is_available() else "cpu", backend)


def _build_rank_record_callback() -> type:
    import time

    import torch
    from transformers import TrainerCallback

    from grpo_lite.report import write_json_atomic

    class RankRecordCallback(TrainerCallback):
        """Writes ``<output_dir>/ranks/rank<R>.json`` (a :class:`RankRecord`) on EVERY rank at train end.

        Args:
            output_dir: the run folder shared by all ranks.
        """

        def __init__(self, output_dir: str | os.PathLike[str]) -> None:
            self.output_dir = Path(output_dir)
            self.micro_batches = 0
            self._start = time.perf_counter()

        def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001 - transformers' signature
            self.micro_batches, self._start = 0, time.perf_counter()

        def on_substep_end(self, args, state, control, **kwargs):  # noqa: ANN001
            self.micro_batches += 1  # a micro-batch that did not end an optimizer step

        def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
            self.micro_batches += 1  # the micro-batch that ended one

        def on_train_end(self, args, state, control, model=None, **kwargs):  # noqa: ANN001
            backend = _backend(torch)
            total = None
            if model is not None:
                with torch.no_grad():
                    local = [getattr(p, "to_local", lambda p=p: p)() for p in model.parameters() if p.requires_grad]
                    total = float(sum(t.detach().double().sum().item() for t in local))
            record = RankRecord(
                rank=args.process_index, world_size=args.world_size, steps=state.global_step,
                local_samples=self.micro_batches * args.per_device_train_batch_size, backend=backend,
                micro_batches=self.micro_batches, param_sum=total, pid=os.getpid(),
                wall_seconds=round(time.perf_counter() - self._start, 3))
            write_json_atomic(_records_dir(self.output_dir) / f"rank{record.rank}.json", asdict(record))

    RankRecordCallback.__module__ = __name__
    return RankRecordCallback


def __getattr__(name: str) -> Any:
    if name == "RankRecordCallback":
        cls = _build_rank_record_callback()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    """``python -m grpo_lite.distributed SHARDING --num-processes N [--output FILE]``: write or print a config."""
    parser = argparse.ArgumentParser(prog="python -m grpo_lite.distributed",
                                     description="Write the accelerate config grpo-lite ships for a sharding.")
    parser.add_argument("sharding", choices=[s for s, m in SHARDINGS.items() if m.config])
    parser.add_argument("--num-processes", type=int, default=2, help="processes (GPUs); default 2")
    parser.add_argument("--mixed-precision", choices=get_args(MixedPrecision), default="bf16")
    parser.add_argument("--output", default=None, help="file to write (default: print the YAML)")
    args = parser.parse_args(argv)
    try:
        if args.output is None:
            import yaml

            print(yaml.safe_dump(accelerate_config(args.sharding, args.num_processes,
                                                   mixed_precision=args.mixed_precision), sort_keys=True), end="")
        else:
            print(write_accelerate_config(args.sharding, args.num_processes, args.output,
                                          mixed_precision=args.mixed_precision))
    except GrpoLiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
