"""Resolved, validated settings of a GRPO step: what decides its memory (GRPOConfig names where they exist).

>>> s = StepSettings.resolve(method="qlora", optim="paged_adamw_8bit")
>>> s.quantization, s.dtype, s.bf16, s.update_rounding
('nf4', 'bfloat16', True, 'stochastic')
>>> StepSettings.resolve(method="lora").update_rounding  # fp32 adapters: nothing to round
'nearest'
>>> StepSettings.resolve(per_device_train_batch_size=1, num_generations=8)
Traceback (most recent call last):
...
grpo_lite.errors.ConfigError: generation batch = per_device_train_batch_size (1) x num_processes (1) x ...
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Literal, get_args

from grpo_lite.defaults import LORA, STEP
from grpo_lite.errors import ConfigError
from grpo_lite.memory.optimizers import OptimizerSpec, get_optimizer
from grpo_lite.settings import Device, Dtype, Method, Sharding, UpdateRounding, check, settings

Quantization = Literal["none", "nf4", "int8"]
VllmMode = Literal["colocate", "server"]


def load_dtype(device: Device, *, fp16: bool | None = None) -> Dtype:
    """The dtype the weights load in when none is given: the one rule (plans, train(), evaluate()); float32 on CPU,
    where bf16 matmuls are slow.

    >>> load_dtype("cuda"), load_dtype("cuda", fp16=True), load_dtype("cpu")
    ('bfloat16', 'float16', 'float32')
    """
    if device != "cuda":
        return "float32"
    return "float16" if fp16 else "bfloat16"


def default_update_rounding(trains_bf16: bool) -> UpdateRounding:
    """How updates reach the trained weights when nobody said: the one rule (plans and LiteGRPOTrainer).

    >>> default_update_rounding(True), default_update_rounding(False)
    ('stochastic', 'nearest')
    """
    return "stochastic" if trains_bf16 else "nearest"


# the choices of the memory settings that are not grpo_lite.settings' (check() reads the others' declarations)
_CHOICES: dict[str, tuple[Any, ...]] = {"quantization": get_args(Quantization), "vllm_mode": get_args(VllmMode)}


@dataclass(frozen=True)
class StepSettings:
    """What decides memory in a GRPO step; build it with :meth:`resolve`."""

    method: Method = STEP.method  # type: ignore[assignment]  # a Method
    device: Device = STEP.device  # type: ignore[assignment]  # a Device
    dtype: Dtype | None = None  # Default: bfloat16 on cuda, float32 on cpu
    quantization: Quantization | None = None  # Default: nf4 for qlora, else none
    double_quant: bool = STEP.double_quant
    optim: str = STEP.optim
    optim_args: str | None = None
    gradient_checkpointing: bool = STEP.gradient_checkpointing
    per_device_train_batch_size: int = STEP.per_device_train_batch_size
    gradient_accumulation_steps: int = STEP.gradient_accumulation_steps
    steps_per_generation: int | None = None
    generation_batch_size: int | None = None
    num_generations: int = STEP.num_generations
    num_iterations: int = STEP.num_iterations
    max_prompt_length: int = STEP.max_prompt_length
    max_completion_length: int = STEP.max_completion_length
    beta: float = STEP.beta
    lora_r: int = LORA.r
    lora_dropout: float = LORA.dropout
    lora_target_modules: tuple[str, ...] | None = None  # None: every decoder linear
    use_liger_kernel: bool = False
    use_vllm: bool = False
    vllm_mode: VllmMode = STEP.vllm_mode  # type: ignore[assignment]  # a VllmMode
    vllm_gpu_memory_utilization: float = STEP.vllm_gpu_memory_utilization
    vllm_importance_sampling_correction: bool = True
    vllm_enable_sleep_mode: bool = False  # colocate: TRL sleeps the engine (level 2) between generations
    cast_lm_head_to_fp32: bool = False
    bf16: bool | None = None  # Default: True on cuda unless fp16
    fp16: bool | None = None
    budget_gib: float | None = None  # device size, needed to size a colocated vLLM share
    num_processes: int = STEP.num_processes
    sharding: Sharding | None = None  # Default: "ddp" when num_processes > 1, else "none"
    ds3_gather_for_generation: bool = True
    shared_prefix: bool = STEP.shared_prefix  # each group's prompt forwarded once, its completions packed after it
    update_rounding: UpdateRounding | None = None  # Default: "stochastic" when the trained weights are bf16
    reward_model_bytes: int = 0  # the reward models' weights, as loaded (train() measures them)

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """Names :func:`estimate` accepts."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def resolve(cls, **settings: Any) -> StepSettings:
        """Validate ``settings`` and fill the defaults that depend on the device and method.

        Raises:
            ConfigError: unknown key, a value outside its choices, or a combination TRL rejects.
        """
        unknown = sorted(set(settings) - set(cls.keys()))
        if unknown:
            raise ConfigError(f"unknown memory setting(s) {unknown}; valid: {', '.join(cls.keys())}")
        for key, value in settings.items():
            check(key, value, _CHOICES.get(key))
        targets = settings.get("lora_target_modules")
        if isinstance(targets, str):
            settings["lora_target_modules"] = None if targets.replace("_", "-") == "all-linear" else (targets,)
        elif targets is not None:
            settings["lora_target_modules"] = tuple(targets)
        s = cls(**settings)
        device = s.device
        nproc = check("num_processes", s.num_processes)
        fill: dict[str, Any] = {
            "dtype": s.dtype or load_dtype(device, fp16=s.fp16),
            "quantization": s.quantization or ("nf4" if s.method == "qlora" else "none"),
            "bf16": s.bf16 if s.bf16 is not None else (device == "cuda" and not s.fp16),
            "sharding": s.sharding or ("ddp" if nproc > 1 else "none"),
        }
        s = replace(s, **fill)
        if s.update_rounding is None:
            s = replace(s, update_rounding=default_update_rounding(s.trains_bf16))
        s._validate()
        return s

    # ---- derived values -------------------------------------------------------------------
    @property
    def optimizer(self) -> OptimizerSpec:
        return get_optimizer(self.optim)

    @property
    def trained_dtype(self) -> Dtype:
        """The dtype the optimizer steps: QLoRA adapters bf16 (TRL casts them), LoRA adapters fp32 (PEFT upcasts
        them; ZeRO-3 keeps the load dtype), full/GaLore the load dtype."""
        if self.method == "qlora":
            return "bfloat16"
        if self.is_peft and self.sharding != "zero3":
            return "float32"
        return self.dtype  # type: ignore[return-value]  # filled by resolve()

    @property
    def trains_bf16(self) -> bool:
        """The optimizer writes into bf16 tensors with no fp32 master copy (DeepSpeed ZeRO keeps one)."""
        if self.method == "qlora":
            return True
        return not self.is_peft and self.trained_dtype == "bfloat16" and self.sharding not in ("zero2", "zero3")

    @property
    def rounds_stochastically(self) -> bool:
        """The step runs on an fp32 copy of each bf16 parameter and rounds the result back stochastically."""
        return self.update_rounding == "stochastic" and self.trains_bf16

    @property
    def is_peft(self) -> bool:
        return self.method in ("lora", "qlora")

    @property
    def weight_bytes(self) -> int:
        return 4 if self.dtype == "float32" else 2

    @property
    def act_bytes(self) -> int:
        """Bytes per activation: 2 under bf16/fp16 autocast, else the load dtype's."""
        return 2 if (self.bf16 or self.fp16) else self.weight_bytes

    @property
    def generation_bytes(self) -> int:
        """Bytes per activation while sampling: a PEFT model generates outside accelerate's autocast."""
        return self.weight_bytes if self.is_peft else self.act_bytes

    @property
    def adapter_bytes(self) -> int:
        return 4 if self.trained_dtype == "float32" else 2

    @property
    def spg(self) -> int:
        """steps_per_generation as TRL resolves it."""
        if self.steps_per_generation is not None:
            return self.steps_per_generation
        if self.generation_batch_size is not None:
            return self.generation_batch_size // (self.per_device_train_batch_size * self.num_processes)
        return self.gradient_accumulation_steps

    @property
    def generation_batch_per_device(self) -> int:
        """Sequences one device generates at once."""
        return self.per_device_train_batch_size * self.spg

    @property
    def shards_weights(self) -> bool:
        return self.sharding in ("zero3", "fsdp") and self.num_processes > 1

    @property
    def shards_grads(self) -> bool:
        """Gradients and optimizer state split across processes."""
        return self.sharding in ("zero2", "zero3", "fsdp") and self.num_processes > 1

    @property
    def needs_old_logps(self) -> bool:
        """Whether TRL computes the old policy's log-probs after sampling: generations not aligned with the
        accumulation, or vLLM's importance-sampling correction."""
        misaligned = self.gradient_accumulation_steps % (self.spg * self.num_iterations) != 0
        return misaligned or (self.use_vllm and self.vllm_importance_sampling_correction)

    @property
    def needs_scoring(self) -> bool:
        """Whether TRL runs a no-grad log-prob pass after sampling (old or reference log-probs)."""
        return self.needs_old_logps or self.beta != 0

    @property
    def grads_during_generation(self) -> bool:
        """Whether some generation happens mid-accumulation, with gradients of earlier micro-batches alive: TRL
        generates every ``steps_per_generation x num_iterations`` micro-steps, gradients are cleared every
        ``gradient_accumulation_steps``."""
        return (self.spg * self.num_iterations) % self.gradient_accumulation_steps != 0

    @property
    def grads_before_backward(self) -> bool:
        """Whether gradients exist when a backward starts: accumulation, or DeepSpeed ZeRO's kept partitions."""
        return self.gradient_accumulation_steps > 1 or self.sharding in ("zero2", "zero3")

    def _validate(self) -> None:
        declared = settings()
        for f in fields(self):
            if f.name in declared:
                check(f.name, getattr(self, f.name))
        _check_batch_rule(self)
        opt = self.optimizer
        if self.sharding == "none" and self.num_processes > 1:
            raise ConfigError(
                f"sharding='none' runs one process; with num_processes={self.num_processes} "
                "choose ddp, zero2, zero3 or fsdp"
            )
        if opt.galore != (self.method == "galore"):
            raise ConfigError(
                f"optim={self.optim!r} does not match method={self.method!r}: GaLore optimizers "
                "(galore_*) go with method='galore' and only there"
            )
        if opt.layerwise and (self.gradient_accumulation_steps != 1 or self.num_processes > 1):
            raise ConfigError(
                f"optim={self.optim!r} updates inside backward: it needs gradient_accumulation_steps=1 "
                "and one process (transformers refuses DDP); use a non-layerwise optimizer"
            )
        if self.device == "cpu" and (opt.cuda_only or self.use_vllm or self.use_liger_kernel):
            raise ConfigError(
                "on device='cpu' drop the GPU-only options: use_vllm, use_liger_kernel and "
                f"CUDA-only optimizers ({self.optim!r} is {'GPU-only' if opt.cuda_only else 'fine'})"
            )
        if self.method == "qlora" and self.quantization == "none":
            raise ConfigError("method='qlora' loads the base in 4-bit: quantization must be 'nf4' (or use 'lora')")
        if not self.is_peft and self.quantization != "none":
            raise ConfigError(
                f"method={self.method!r} trains every weight, which cannot be quantized; "
                "use method='lora' or 'qlora' for a quantized base"
            )
        if self.use_vllm and self.vllm_mode == "colocate" and self.budget_gib is None:
            raise ConfigError("use_vllm with vllm_mode='colocate' needs budget_gib to size vLLM's share")


def _check_batch_rule(s: StepSettings) -> None:
    """TRL's rule: per_device_train_batch_size x num_processes x steps_per_generation % num_generations == 0."""
    if s.steps_per_generation is not None and s.generation_batch_size is not None:
        raise ConfigError("set steps_per_generation or generation_batch_size, not both (TRL rejects both)")
    global_batch = s.per_device_train_batch_size * s.num_processes
    if s.generation_batch_size is not None and s.generation_batch_size % global_batch:
        raise ConfigError(
            f"generation_batch_size ({s.generation_batch_size}) must be divisible by "
            f"per_device_train_batch_size x num_processes ({global_batch})"
        )
    gen = global_batch * s.spg
    if gen % s.num_generations:
        raise ConfigError(
            f"generation batch = per_device_train_batch_size ({s.per_device_train_batch_size}) x num_processes "
            f"({s.num_processes}) x steps_per_generation ({s.spg}) = {gen} must be divisible by num_generations "
            f"({s.num_generations}); change per_device_train_batch_size, gradient_accumulation_steps "
            "(or steps_per_generation) or num_generations"
        )
