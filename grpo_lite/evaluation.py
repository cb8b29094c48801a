"""evaluate(): batched greedy decoding, scored by the same rules as the training rewards.

Accuracy by the correctness rule of the answers' kind (:mod:`grpo_lite.data.answer_kinds`), the format rate by the
soft format reward; :func:`formatted_accuracy` tells learning the format from learning to be right. A task without a
gold answer is scored by its own rewards: each one's mean with its interval (:func:`mean_interval`).
"""

from __future__ import annotations

import inspect
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from grpo_lite import rewards as reward_lib
from grpo_lite.data import prompts as prompt_lib
from grpo_lite.data.answer_kinds import answers_match_kind, predicted_answer
from grpo_lite.data.loaders import load_task
from grpo_lite.data.prompts import prompt_token_ids
from grpo_lite.defaults import EVALUATION, TASKS, TRAINER
from grpo_lite.errors import ConfigError, ModelError
from grpo_lite.memory.models import resolve_model
from grpo_lite.memory.step_settings import load_dtype
from grpo_lite.recipe.values import typed
from grpo_lite.rewards.registry import reward_name
from grpo_lite.run_record import RUN_RECORD, read_run_record
from grpo_lite.settings import check
from grpo_lite.training.checks import check_positions
from grpo_lite.training.prepare import measure_prompt_tokens, model_context
from grpo_lite.training.report.quiet import quiet_libraries
from grpo_lite.training.step.prefix_cache import cache_keyword, prefix_cache_inputs

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset

    from grpo_lite.data.loaders import DataSplit
    from grpo_lite.data.prompts import PromptStyle
    from grpo_lite.settings import AnswerKind


Z_95 = 1.959963984540054  # the standard normal's 97.5% quantile: a two-sided 95% interval


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a share ``successes / n`` (95% by default); unlike the textbook
    ``p ± z·sqrt(p(1-p)/n)`` it neither collapses to a point at 0% and 100% nor leaves [0, 1].

    >>> [round(x, 4) for x in wilson_interval(5, 100)]
    [0.0215, 0.1118]
    >>> wilson_interval(0, 10)[0], round(wilson_interval(0, 10)[1], 4)
    (0.0, 0.2775)
    """
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"a share needs 0 <= successes <= n and n > 0, got {successes} of {n}")
    p, z2 = successes / n, z * z
    center = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


def mean_interval(values: Sequence[float], z: float = Z_95) -> tuple[float, float]:
    """The 95% interval of a reward's mean over ``values``: Wilson's (:func:`wilson_interval`) when every value is
    0 or 1 (a share), else the normal one, ``mean ± z·sd/sqrt(n)``; one value that is not a share says nothing of
    the spread, so its interval is unbounded (a zero-width one would claim certainty).

    >>> [round(x, 4) for x in mean_interval([1.0] * 5 + [0.0] * 95)]
    [0.0215, 0.1118]
    >>> [round(x, 3) for x in mean_interval([0.5, 1.5, 1.0, 1.0])]
    [0.6, 1.4]
    >>> mean_interval([2.0]), [round(x, 3) for x in mean_interval([1.0])]
    ((-inf, inf), [0.207, 1.0])
    """
    n = len(values)
    if n == 0:
        raise ValueError("an interval needs at least one value")
    if all(v in (0, 1) for v in values):
        return wilson_interval(round(sum(values)), n, z)
    if n == 1:
        return -math.inf, math.inf
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean - z * sd / math.sqrt(n), mean + z * sd / math.sqrt(n)


@dataclass
class EvalResult:
    """Scores of one evaluation.

    Attributes:
        accuracy: share of problems whose ``<answer>`` equals the gold number.
        format_rate: share of completions in the XML format (soft format rule).
        mean_reward: mean of the summed rewards (the training rewards) per completion, over the completions some
            reward scored (returned a number for); NaN when none did.
        n: number of problems.
        samples: per problem: question, gold, completion, predicted, correct, formatted, reward.
        formatted_accuracy: share of the well-formatted completions that are correct; 0.0 when none is.
        n_formatted: number of well-formatted completions.
        reward_means: per reward, its mean over the completions it applies to (a task without a gold is scored by
            these alone; its ``accuracy`` and ``format_rate`` are NaN).
        reward_intervals: per reward, the 95% interval of its mean (:func:`mean_interval`).
        n_unscored: completions no reward scored (every reward returned None): left out of ``mean_reward``.
        reward_unscored: per reward, the completions it returned None for (left out of its mean).
    """

    accuracy: float
    format_rate: float
    mean_reward: float
    n: int
    samples: list[dict[str, Any]] = field(default_factory=list, repr=False)
    formatted_accuracy: float = 0.0
    n_formatted: int = 0
    reward_means: dict[str, float] = field(default_factory=dict)
    reward_intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    n_unscored: int = 0
    reward_unscored: dict[str, int] = field(default_factory=dict)

    @property
    def graded(self) -> bool:
        """Whether the task had a gold answer to be correct against (else only its rewards' means say anything)."""
        return not math.isnan(self.accuracy)

    def accuracy_interval(self) -> tuple[float, float]:
        """The accuracy's 95% Wilson score interval over the ``n`` problems (:func:`wilson_interval`)."""
        return wilson_interval(round(self.accuracy * self.n), self.n)

    def summary(self) -> str:
        """One line: ``accuracy 22.0%, format 66.0%, among formatted 33.3%, reward 1.230 (n=50)``; for a task without
        a gold, each reward's mean and interval: ``reversed_word 0.250 [0.102, 0.495], reward 0.250 (n=20)``. A mean
        is over the completions scored, with the count of the others: ``reward 1.000 (n=4, 1 unscored)``; ``no
        reward (n=4, all unscored)`` when no reward returned a number."""
        unscored = f", {self.n_unscored} unscored" if self.n_unscored else ""
        reward = (f"no reward (n={self.n}, all unscored)" if math.isnan(self.mean_reward)
                  else f"reward {self.mean_reward:.3f} (n={self.n}{unscored})")  # fmt: skip
        if self.graded:
            return (
                f"accuracy {self.accuracy:.1%}, format {self.format_rate:.1%}, "
                f"among formatted {self.formatted_accuracy:.1%}, {reward}"
            )
        return ", ".join([*map(self._one_reward, self.reward_unscored or self.reward_means), reward])

    def _one_reward(self, name: str) -> str:
        """``name 0.250 [0.102, 0.495]``, ``(k unscored)`` after it when it returned None k times."""
        if name not in self.reward_means:
            return f"{name} unscored"
        (low, high), unscored = self.reward_intervals[name], self.reward_unscored.get(name)
        return f"{name} {self.reward_means[name]:.3f} [{low:.3f}, {high:.3f}]" + (
            f" ({unscored} unscored)" if unscored else ""
        )


def formatted_accuracy(samples: Sequence[dict[str, Any]]) -> tuple[float, int]:
    """Accuracy over the well-formatted samples only (it moves only when formatted answers get righter, where plain
    accuracy also rises with the format), and how many there are.

    Args:
        samples: dicts with boolean ``"correct"`` and ``"formatted"`` (as in :attr:`EvalResult.samples`).

    Returns:
        ``(correct and formatted / formatted, formatted)``; ``(0.0, 0)`` when none is formatted.

    >>> formatted_accuracy([{"correct": True, "formatted": True}, {"correct": False, "formatted": True},
    ...                     {"correct": True, "formatted": False}, {"correct": False, "formatted": False}])
    (0.5, 2)
    >>> formatted_accuracy([{"correct": True, "formatted": False}])
    (0.0, 0)
    >>> formatted_accuracy([])
    (0.0, 0)
    """
    formatted = [s for s in samples if s["formatted"]]
    if not formatted:
        return 0.0, 0
    return sum(bool(s["correct"]) for s in formatted) / len(formatted), len(formatted)


@quiet_libraries()
def load_for_eval(model: str | os.PathLike) -> tuple[Any, Any]:
    """Load a model and tokenizer from a hub id, folder, GGUF file, run folder or saved LoRA adapter folder."""
    import torch  # heavy: torch, transformers (the loader)

    from grpo_lite.training.loading import load_model, load_saved_model, load_tokenizer

    # the first GPU when there is one (greedy decoding of a 1B model on CPU takes hours), else the CPU
    cuda = torch.cuda.is_available()
    place: dict[str, Any] = {"dtype": load_dtype("cuda" if cuda else "cpu"), "device_map": {"": 0} if cuda else None}
    path = Path(model)
    folder = _run_model(path) if (path / RUN_RECORD).is_file() else path
    if folder != path or (folder / "adapter_config.json").is_file():
        tokenizer = load_tokenizer(folder)  # first: a folder without one is refused before the model loads
        return load_saved_model(folder, **place), tokenizer
    spec = resolve_model(model)
    tokenizer = load_tokenizer(spec.model_id)
    return load_model(spec.model_id, **place), tokenizer


def _run_rewards(path: Path) -> list[str] | None:
    """The rewards a run was trained with (run.json's, for a run folder or its ``final/``), by the names evaluate()
    takes; None when ``path`` is not a run's.

    Raises:
        ConfigError: one of them cannot be rebuilt from its name (a reward model, the user's own function).
    """
    folder = path if (path / RUN_RECORD).is_file() else path.parent
    if not (folder / RUN_RECORD).is_file() or folder not in (path, path.parent if path.name == "final" else None):
        return None
    record, _ = read_run_record(folder, keep_corrupt=False)
    trained = [str(name) for name in (record or {}).get("rewards") or []]  # type: ignore[attr-defined]
    by_name = {spec.func.__name__: key for key, spec in reward_lib.REWARDS.items()}
    names = [by_name.get(name, name) for name in trained]
    lost = [name for name in names if name not in reward_lib.REWARDS and name not in reward_lib.TRL_REWARDS]
    if lost:
        raise ConfigError(
            f"{folder} was trained with the rewards {', '.join(trained)}; {', '.join(lost)} cannot be rebuilt from "
            "its run.json (a reward model or your own function is recorded by name only): pass the rewards to score "
            "with (rewards=[...]; --reward NAME, a reward model's folder or module:function, once per reward)"
        )
    return names or None


def _run_model(run_dir: Path) -> Path:
    """The model a run saved (its ``final/`` folder).

    Raises:
        ModelError: the run has no ``final/`` yet; the message names its newest checkpoint and the resume command.
    """
    from grpo_lite.training.run.checkpoints import scan  # heavy: transformers

    if (run_dir / "final").is_dir():
        return run_dir / "final"
    record, _ = read_run_record(run_dir, keep_corrupt=False)
    newest = scan(run_dir).newest
    instead = f"evaluate its newest checkpoint ({newest}) or " if newest else ""
    raise ModelError(
        f"{run_dir} holds a run without its final/ folder (where a run writes its model when it finishes): "
        f"{instead}finish the run with grpo-lite train "
        f"{(record or {}).get('model', 'MODEL')} --output-dir {run_dir} --resume"
    )


def _greedy_batch(model: Any, tokenizer: Any, prompts: list[Any], max_new_tokens: int, stops: list[str]) -> list[str]:
    """Greedy completions of one batch; the prompts' common prefix is forwarded once and its KV cache shared.

    A row leaves the batch when it ends (an EOS token or one of ``stops`` in its text), so a batch costs the sum of
    its completions' lengths; ``generate`` decodes every row until the last one ends, and a batch of 50 short
    answers with one that rambles costs 50 rambles. ``generate`` serves models whose generation config processes
    logits (a repetition penalty, say): this loop takes the arg-max and nothing else.
    """
    import torch  # heavy: torch, transformers

    lists = prompt_token_ids(tokenizer, prompts)
    if {k for k in model.generation_config.to_diff_dict() if not k.startswith("_")} - _PLAIN_GREEDY:  # _: its notes
        return _generate_batch(model, tokenizer, lists, max_new_tokens, stops)
    from transformers import DynamicCache

    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos if eos is not None else tokenizer.eos_token_id])
    with torch.inference_mode():
        enc = prefix_cache_inputs(model, lists, tokenizer.pad_token_id)
        name = cache_keyword(model)
        cache, mask = enc[name] if name in enc else DynamicCache(), enc["attention_mask"]
        past = cache.get_seq_length()
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # generate's positions for left padding
        step_ids, step_pos = enc["input_ids"][:, past:], positions[:, past:]
        rows, out = torch.arange(len(lists)), [list[int]() for _ in lists]
        last = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
        for _ in range(max_new_tokens):
            logits = model(
                input_ids=step_ids, attention_mask=mask, position_ids=step_pos, use_cache=True, **{name: cache}, **last
            ).logits[:, -1]
            chosen = logits.argmax(-1)
            keep = []
            for j, (row, token) in enumerate(zip(rows.tolist(), chosen.tolist())):
                out[row].append(token)
                if token not in eos and not any(s in tokenizer.decode(out[row]) for s in stops):
                    keep.append(j)
            if not keep:
                break
            if len(keep) < len(rows):
                index = torch.tensor(keep, device=mask.device)
                cache.batch_select_indices(index)
                rows, chosen, mask, step_pos = rows[keep], chosen[index], mask[index], step_pos[index]
            mask = torch.cat([mask, mask.new_ones(len(keep), 1)], dim=-1)
            step_ids, step_pos = chosen[:, None], step_pos[:, -1:] + 1
    return tokenizer.batch_decode(out, skip_special_tokens=True)


_PLAIN_GREEDY = frozenset(  # none of these changes a greedy arg-max
    "bos_token_id eos_token_id pad_token_id use_cache output_attentions output_hidden_states transformers_version "
    "do_sample temperature top_p top_k max_length max_new_tokens".split()
)


def _generate_batch(
    model: Any, tokenizer: Any, lists: list[list[int]], max_new_tokens: int, stops: list[str]
) -> list[str]:
    """``generate``'s greedy completions (every row decoded until the batch's last one ends)."""
    import torch  # heavy: torch

    with torch.inference_mode():
        enc = prefix_cache_inputs(model, lists, tokenizer.pad_token_id)
        out = model.generate(
            **enc,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
            **({"stop_strings": stops, "tokenizer": tokenizer} if stops else {}),
        )
    return tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)


def _score_batch(
    batch: dict[str, list[Any]],
    texts: list[str],
    reward_funcs: Sequence[Callable[..., list[float]]],
    soft_format: Callable[..., list[float]],
) -> list[dict[str, Any]]:
    """One sample record per completion: the answer read from it, correctness, format and summed reward."""
    kwargs = {"answer": batch["answer"]}
    for column in ("prefill", "answer_kind"):  # answer_kind: answers that are not numbers compare in their kind
        if column in batch:
            kwargs[column] = batch[column]
    kinds = kwargs.get("answer_kind", ["number"] * len(texts))
    per_func = [f(prompts=batch["prompt"], completions=texts, **kwargs) for f in reward_funcs]
    formatted = soft_format(prompts=batch["prompt"], completions=texts, **kwargs)
    prefills = kwargs.get("prefill", [""] * len(texts))
    samples = []
    for i, text in enumerate(texts):
        predicted = predicted_answer(prefills[i] + text, kinds[i])
        samples.append(
            {
                "question": batch["question"][i],
                "gold": batch["answer"][i],
                "completion": prefills[i] + text,
                "predicted": predicted,
                "correct": answers_match_kind(predicted, batch["answer"][i], kinds[i]),
                "formatted": bool(formatted[i] and formatted[i] > 0),
                "reward": _summed(r[i] for r in per_func),
            }
        )
    return samples


def _reward_batch(
    batch: dict[str, list[Any]], texts: list[str], reward_funcs: Sequence[Callable[..., Any]], tokenizer: Any
) -> list[dict[str, Any]]:
    """For a task without a gold: one record per completion with each reward's value (None: not applicable). The
    rewards get the task's columns, the completions (messages after a conversational prompt) and their token ids, as
    in training."""
    columns = {k: v for k, v in batch.items() if k != "prompt"}
    ids = prompt_lib.completion_token_ids(tokenizer, texts)
    conversational = isinstance(batch["prompt"][0], list)  # as TRL passes them: the assistant's message
    completions = [[{"role": "assistant", "content": text}] for text in texts] if conversational else texts
    per_func = {
        getattr(f, "__name__", type(f).__name__): f(prompts=batch["prompt"], completions=completions,
                                                     completion_ids=ids, **columns)
        for f in reward_funcs
    }  # fmt: skip
    return [
        {
            "prompt": batch["prompt"][i],
            "completion": text,
            "rewards": {name: values[i] for name, values in per_func.items()},
            "reward": _summed(values[i] for values in per_func.values()),
        }
        for i, text in enumerate(texts)
    ]


def _is_model(func: Any) -> bool:
    import torch  # heavy: torch (loaded with the model already)

    return isinstance(func, torch.nn.Module)


class _ModelReward:
    """A reward model scored as GRPOTrainer scores one, with TRL's signature: each prompt with its completion (through
    the chat template for conversational prompts) in the model's own tokenizer, padded on the right, its one logit."""

    def __init__(self, model: Any) -> None:
        from transformers import AutoTokenizer  # heavy: transformers

        self.model, self.__name__ = model.eval(), reward_name(model)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model.name_or_path)
        except Exception as exc:  # a model object built in memory, a folder without a tokenizer
            raise ConfigError(
                f"rewards: the reward model {self.__name__!r} has no tokenizer to load ({type(exc).__name__}: "
                f"{' '.join(str(exc).split())[:160]}); save the model with its tokenizer and pass its folder"
            ) from None
        if self.tokenizer.pad_token_id is None:  # as GRPOTrainer: the reward is read at the last token not padded
            self.tokenizer.pad_token = self.tokenizer.eos_token
        model.config.get_text_config().pad_token_id = self.tokenizer.pad_token_id

    def __call__(self, prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
        import torch  # heavy: torch

        inputs = prompt_lib.reward_model_inputs(self.tokenizer, prompts, completions).to(self.model.device)
        with torch.inference_mode():
            return self.model(**inputs).logits[:, 0].float().tolist()


def _summed(values: Iterable[float | None]) -> float | None:
    """A completion's reward as TRL sums it (None left out); None when no reward scored it."""
    numbers = [v for v in values if v is not None]
    return float(sum(numbers)) if numbers else None


def _mean_reward(samples: list[dict[str, Any]]) -> tuple[float, int]:
    """The mean summed reward over the completions scored (NaN: none was), and how many were not."""
    scored = [s["reward"] for s in samples if s["reward"] is not None]
    return (sum(scored) / len(scored) if scored else math.nan), len(samples) - len(scored)


def _rewards_result(samples: list[dict[str, Any]]) -> EvalResult:
    """Each reward's mean and interval over the completions it applied to (TRL's rule: None is left out)."""
    means, intervals, unscored = {}, {}, {}
    for name in samples[0]["rewards"] if samples else ():
        values = [float(s["rewards"][name]) for s in samples if s["rewards"][name] is not None]
        unscored[name] = len(samples) - len(values)
        if values:
            means[name], intervals[name] = sum(values) / len(values), mean_interval(values)
    mean_reward, n_unscored = _mean_reward(samples)
    return EvalResult(math.nan, math.nan, mean_reward, len(samples), samples, reward_means=means,
                      reward_intervals=intervals, n_unscored=n_unscored, reward_unscored=unscored)  # fmt: skip


@quiet_libraries()
def evaluate(
    model: str | os.PathLike | Any,
    dataset: str | os.PathLike | Dataset | None = None,
    split: DataSplit | None = None,
    limit: int | None = None,
    *,
    tokenizer: Any = None,
    batch_size: int | None = None,
    max_new_tokens: int | None = None,
    prompt_style: PromptStyle | None = None,
    rewards: Sequence[str | Callable[..., list[float]]] | None = None,
    seed: int = 0,
    stop_strings: Sequence[str] | None = None,
    skip_invalid: bool = False,
    answer_kind: AnswerKind | None = None,
) -> EvalResult:
    """Greedy-decode ``dataset[split]`` and score accuracy, format rate and mean reward.

    The prompts' common prefix is forwarded once per batch, its KV cache shared by the batch's rows.

    Args:
        model: a model name/path (as for :func:`grpo_lite.train`, or a saved adapter folder), or a loaded
            model object (then pass ``tokenizer``).
        dataset: ``"gsm8k"``, ``"synthetic"``, a path, or a ``datasets.Dataset`` (question and answer columns, or a
            task's ``prompt`` column and the columns its rewards read). Default: ``"gsm8k"``
            (``grpo_lite.defaults.TRAINER.dataset``).
        split: ``"test"`` or ``"train"``. Default: ``"test"`` (``grpo_lite.defaults.EVALUATION.split``).
        limit: evaluate only the first ``limit`` problems.
        tokenizer: the tokenizer, when ``model`` is an object.
        batch_size: prompts decoded at once. Default: 16 (``grpo_lite.defaults.EVALUATION.batch_size``).
        max_new_tokens: completion budget. Default: the named task's (``grpo_lite.defaults.TASKS``: 1024 for
            ``"math"``), else 256 (``grpo_lite.defaults.EVALUATION.max_new_tokens``).
        prompt_style: must match the style used in training. Default: ``PromptStyle()``.
        rewards: rewards summed into ``mean_reward``: names (as :func:`grpo_lite.train` takes them) or callables.
            Default: the five GSM8K rewards. A task without a gold (a ``prompt`` column and no answer) needs them:
            it is scored by each reward's mean and interval (:attr:`EvalResult.reward_means`).
        seed: seed of the synthetic set (ignored for other datasets).
        stop_strings: end a completion at the first of these, as training does. Default: ``("</answer>",)``
            (``grpo_lite.defaults.TRAINER.stop_strings``); ``()`` decodes to ``max_new_tokens``.
        skip_invalid: skip dataset rows without a usable question or answer (with a warning) instead of raising.
        answer_kind: how answers compare (``"number"``, ``"math"``, ``"choice"``, ``"text"``). Default: the named
            dataset's, else chosen from the golds (:func:`grpo_lite.data.loaders.load_dataset`).
    """
    dataset = TRAINER.dataset if dataset is None else dataset
    batch_size = EVALUATION.batch_size if batch_size is None else batch_size
    if max_new_tokens is None:  # a built-in task's own length (MATH's worked answers are longer), else 256
        own = TASKS.max_completion_length.get(dataset) if isinstance(dataset, str) else None
        max_new_tokens = own or EVALUATION.max_new_tokens
    check("batch_size", batch_size)
    check("max_new_tokens", max_new_tokens)
    stops = typed("stop_strings", TRAINER.stop_strings if stop_strings is None else stop_strings)  # as train()'s
    if rewards is None and isinstance(model, (str, os.PathLike)):  # a run's own rewards score its model
        rewards = _run_rewards(Path(model))
    model, tokenizer, name = _model_and_tokenizer(model, tokenizer)
    style = prompt_style or prompt_lib.PromptStyle()
    task = load_task(
        dataset, split=EVALUATION.split if split is None else split, style=style, limit=limit, seed=seed,
        skip_invalid=skip_invalid, answer_kind=answer_kind,
    )  # fmt: skip
    graded = task.shape == "questions"  # TRL's shape is scored by its rewards, its answers as written
    if not graded and rewards is None:
        raise ConfigError(
            "the dataset is a task with a 'prompt' column, scored by its own rewards: pass them (rewards=[...], "
            "--reward NAME) and evaluate() reports each reward's mean over the greedy completions"
        )
    data = prompt_lib.apply_prompt_style(task.dataset, tokenizer, style if graded else prompt_lib.OWN_PROMPTS)
    stops = list(prompt_lib.stop_strings_for(stops, task.shape))
    context = model_context(getattr(model, "config", None), tokenizer)
    if len(data):  # as training checks its prompts: past the context, a model decodes noise
        check_positions(measure_prompt_tokens(data, tokenizer), max_new_tokens, context, name, "max_new_tokens")
    funcs = [_ModelReward(f) if _is_model(f) else f for f in reward_lib.resolve_rewards(rewards)]
    reward_funcs = reward_lib.check_rewards(funcs, steps=False)  # as in training
    soft_format = reward_lib.get_reward("soft_format")

    def score(batch: dict[str, list[Any]], texts: list[str]) -> list[dict[str, Any]]:
        if graded:
            return _score_batch(batch, texts, reward_funcs, soft_format)
        return _reward_batch(batch, texts, reward_funcs, tokenizer)

    samples = _decode_all(model, tokenizer, data, batch_size, max_new_tokens, stops, score)
    return _graded_result(samples) if graded else _rewards_result(samples)


def _model_and_tokenizer(model: str | os.PathLike | Any, tokenizer: Any) -> tuple[Any, Any, str]:
    """The model and tokenizer to evaluate (loaded when ``model`` is a name or path), and the model's name."""
    if isinstance(model, (str, os.PathLike)):
        return (*load_for_eval(model), str(model))
    if tokenizer is None:
        raise ConfigError("evaluate() got a model object without its tokenizer: pass tokenizer=...")
    return model, tokenizer, getattr(model, "name_or_path", "the model")


def _decode_all(
    model: Any,
    tokenizer: Any,
    data: Dataset,
    batch_size: int,
    max_new_tokens: int,
    stops: list[str],
    score: Callable[[dict[str, list[Any]], list[str]], list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """Every prompt's greedy completion, batch by batch, scored by ``score``; the model in eval mode meanwhile."""
    was_training = model.training
    model.eval()
    samples: list[dict[str, Any]] = []
    try:
        for start in range(0, len(data), batch_size):
            batch = data[start : start + batch_size]  # a dict of plain lists
            samples.extend(score(batch, _greedy_batch(model, tokenizer, batch["prompt"], max_new_tokens, stops)))
    finally:
        model.train(was_training)
    return samples


def _graded_result(samples: list[dict[str, Any]]) -> EvalResult:
    """Accuracy, format rate and mean reward of a task with gold answers."""
    n = len(samples)
    among, n_formatted = formatted_accuracy(samples)
    mean_reward, n_unscored = _mean_reward(samples)
    return EvalResult(
        accuracy=sum(s["correct"] for s in samples) / n if n else 0.0,
        format_rate=sum(s["formatted"] for s in samples) / n if n else 0.0,
        mean_reward=mean_reward,
        n=n,
        samples=samples,
        formatted_accuracy=among,
        n_formatted=n_formatted,
        n_unscored=n_unscored,
    )
