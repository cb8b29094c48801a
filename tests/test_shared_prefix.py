"""The shared-prefix forward against TRL 1.16's own ``_get_per_token_logps_and_entropies``.

Tiny random Llama (2 layers, hidden 64, 4 heads, 2 kv heads, vocab 128) with TRL's fused LM head;
prompts identical within a group, of different lengths across groups (so the left padding differs),
completions of different lengths (right padding), rows shuffled so groups aren't adjacent.
"""

from __future__ import annotations

import types
from contextlib import nullcontext

import pytest
import torch
from torch import Tensor, nn
from transformers import LlamaConfig, LlamaForCausalLM
from trl import GRPOTrainer
from trl.trainer.utils import add_fused_lm_head

from grpo_lite.training.step.shared_prefix import (
    group_prompts,
    is_packable,
    pack_groups,
    shared_prefix_logps_and_entropies,
    unsupported_reason,
)

VOCAB, PAD = 128, 0
TEMPERATURE = 0.7
# TRL's own method, without its profiling wrapper (which wants a whole Trainer as `self`)
TRL_FORWARD = GRPOTrainer._get_per_token_logps_and_entropies.__wrapped__
FAKE_TRAINER = types.SimpleNamespace(accelerator=types.SimpleNamespace(autocast=nullcontext))

Batch = tuple[Tensor, Tensor, int]  # input_ids, attention_mask, logits_to_keep


def make_model(attn: str = "sdpa", dtype: torch.dtype = torch.float32, lora: bool = False) -> nn.Module:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        attn_implementation=attn,
    )
    model: nn.Module = LlamaForCausalLM(config).to(dtype)
    if lora:  # like TRL: wrap first, then patch the base model's forward
        from peft import LoraConfig, get_peft_model

        lora_config = LoraConfig(r=4, target_modules=["q_proj", "v_proj", "up_proj"], init_lora_weights=False)
        model = get_peft_model(model, lora_config)
    add_fused_lm_head(
        model.get_base_model() if lora else model, temperature=TEMPERATURE, outputs=("log_probs", "entropy")
    )
    return model


def make_batch(groups: list[tuple[int, list[int]]], width: int = 12, completion: int = 10, seed: int = 0) -> Batch:
    """``groups``: (prompt length, completion lengths) per prompt. Rows are shuffled."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for prompt_len, lengths in groups:
        prompt = torch.randint(1, VOCAB, (prompt_len,), generator=gen)
        rows += [(prompt, torch.randint(1, VOCAB, (n,), generator=gen)) for n in lengths]
    rows = [rows[i] for i in torch.randperm(len(rows), generator=gen).tolist()]
    ids = torch.full((len(rows), width + completion), PAD)
    mask = torch.zeros_like(ids)
    for r, (prompt, comp) in enumerate(rows):
        ids[r, width - len(prompt) : width], mask[r, width - len(prompt) : width] = prompt, 1
        ids[r, width : width + len(comp)], mask[r, width : width + len(comp)] = comp, 1
    return ids, mask, completion


def both_paths(model: nn.Module, batch: Batch, **kwargs: object) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    ids, mask, keep = batch
    ref_logps, ref_entropy, _ = TRL_FORWARD(FAKE_TRAINER, model, ids, mask, keep, compute_entropy=True, **kwargs)
    logps, entropy = shared_prefix_logps_and_entropies(model, ids, mask, keep, compute_entropy=True, **kwargs)
    return (ref_logps, ref_entropy), (logps, entropy)


def grads(model: nn.Module, batch: Batch, shared: bool) -> dict[str, Tensor]:
    ids, mask, keep = batch
    model.zero_grad(set_to_none=True)
    if shared:
        logps, entropy = shared_prefix_logps_and_entropies(model, ids, mask, keep, compute_entropy=True)
    else:
        logps, entropy, _ = TRL_FORWARD(FAKE_TRAINER, model, ids, mask, keep, compute_entropy=True)
    completion_mask = mask[:, -keep:]
    ((logps + 0.1 * entropy) * completion_mask).sum().backward()
    return {n: p.grad.float().clone() for n, p in model.named_parameters() if p.grad is not None}


def max_grad_diff(model: nn.Module, batch: Batch) -> tuple[float, float]:
    """(max abs grad difference, max abs grad) over all parameters."""
    ref, shared = grads(model, batch, shared=False), grads(model, batch, shared=True)
    assert ref.keys() == shared.keys() and ref
    return max(float((ref[n] - shared[n]).abs().max()) for n in ref), max(float(g.abs().max()) for g in ref.values())


def assert_close(model: nn.Module, batch: Batch, atol: float, grad_atol: float) -> None:
    (ref_logps, ref_entropy), (logps, entropy) = both_paths(model, batch)
    assert logps.shape == ref_logps.shape == batch[1][:, -batch[2] :].shape
    torch.testing.assert_close(logps, ref_logps, atol=atol, rtol=0)
    torch.testing.assert_close(entropy, ref_entropy, atol=atol, rtol=0)
    grad_diff, _ = max_grad_diff(model, batch)
    assert grad_diff <= grad_atol


TWO_GROUPS = [(5, [7, 3, 10, 1]), (9, [4, 10, 6, 2])]  # two whole groups, G=4, different padding
PARTIAL = [(7, [6, 2, 9, 5])]  # half of a G=8 group: a micro-batch of 4 completions
MIXED = [(3, [5, 5]), (11, [8]), (6, [2, 9, 10])]  # partial groups and a lone prompt


# --- packing ----------------------------------------------------------------------------------------


def test_pack_layout() -> None:
    prompt = torch.tensor([[0, 5, 6], [7, 8, 9], [0, 5, 6]])
    prompt_mask = torch.tensor([[0, 1, 1], [1, 1, 1], [0, 1, 1]])
    completion = torch.tensor([[1, 2], [3, 0], [4, 0]])
    completion_mask = torch.tensor([[1, 1], [1, 0], [1, 0]])
    packed = pack_groups(prompt, prompt_mask, completion, completion_mask)
    groups = group_prompts(prompt, prompt_mask)
    assert groups[0] == groups[2] != groups[1]
    a, b = int(groups[0]), int(groups[1])
    assert packed.input_ids[a].tolist() == [5, 6, 1, 2, 4]  # prompt once, then both completions
    assert packed.position_ids[a].tolist() == [1, 2, 3, 4, 3]  # TRL's columns: completions start at P=3
    assert packed.input_ids[b].tolist() == [7, 8, 9, 3, 0]  # padded at the end
    allowed = packed.allowed[a, 0].int().tolist()
    assert allowed == [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 0, 0, 1]]
    assert packed.allowed[b, 0, 4].int().tolist() == [0, 0, 0, 0, 1]  # a pad row sees itself only
    length = packed.input_ids.size(1)
    # token (row 0, col 0) <- last prompt token; (0, 1) <- completion token 0; (2, 0) <- last prompt token
    fields = (packed.rows, packed.cols, packed.hidden_index, packed.target_ids)
    scored = {(r, c): (i, t) for r, c, i, t in zip(*(f.tolist() for f in fields), strict=True)}
    a0, b0 = a * length, b * length
    assert scored == {(0, 0): (a0 + 1, 1), (0, 1): (a0 + 2, 2), (2, 0): (a0 + 1, 4), (1, 0): (b0 + 2, 3)}
    eager = packed.attention_mask("eager", torch.float32)
    assert eager.dtype == torch.float32 and eager[a, 0, 4, 1] == 0
    assert eager[a, 0, 4, 2] == torch.finfo(torch.float32).min


def test_not_packable() -> None:
    ones = torch.ones(2, 3, dtype=torch.long)
    assert not is_packable(torch.tensor([[1, 1, 0], [1, 1, 1]]), ones)  # right-padded prompt
    assert not is_packable(ones, torch.tensor([[1, 0, 1], [1, 1, 1]]))  # hole in a completion
    with pytest.raises(ValueError):
        pack_groups(ones, ones, ones, torch.tensor([[0, 1, 1], [1, 1, 1]]))


# --- equality with TRL's forward --------------------------------------------------------------------


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("groups", [TWO_GROUPS, PARTIAL, MIXED], ids=["two_groups", "partial", "mixed"])
def test_fp32_matches_trl(attn: str, groups: list[tuple[int, list[int]]]) -> None:
    assert_close(make_model(attn), make_batch(groups), atol=1e-5, grad_atol=1e-5)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_bf16_matches_trl(attn: str) -> None:
    model, batch = make_model(attn, torch.bfloat16), make_batch(TWO_GROUPS)
    (ref_logps, _), (logps, _) = both_paths(model, batch)
    mask = batch[1][:, -batch[2] :].bool()
    assert (ref_logps - logps)[mask].abs().max() < 0.1
    grad_diff, grad_max = max_grad_diff(model, batch)
    assert grad_diff <= 0.05 * grad_max


def test_lora_matches_trl() -> None:
    model = make_model(lora=True)
    assert_close(model, make_batch(MIXED), atol=1e-5, grad_atol=1e-5)
    assert all("lora" in n for n in grads(model, make_batch(MIXED), shared=True))


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_gradient_checkpointing_matches_trl(use_reentrant: bool) -> None:
    model = make_model()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": use_reentrant})
    model.train()
    assert_close(model, make_batch(TWO_GROUPS), atol=1e-5, grad_atol=1e-5)


def test_chunked_like_trl_batch_size() -> None:
    model, batch = make_model(), make_batch(MIXED)
    (ref_logps, ref_entropy), (logps, entropy) = both_paths(model, batch, batch_size=2)
    torch.testing.assert_close(logps, ref_logps, atol=1e-5, rtol=0)
    torch.testing.assert_close(entropy, ref_entropy, atol=1e-5, rtol=0)


def test_masked_out_completion_is_zero() -> None:
    """``mask_truncated_completions`` zeroes a whole completion row: TRL returns zeros there, so do we."""
    model = make_model()
    ids, mask, keep = make_batch(TWO_GROUPS)
    mask[0, -keep:] = 0
    (ref_logps, _), (logps, _) = both_paths(model, (ids, mask, keep))
    assert logps[0].abs().max() == 0
    torch.testing.assert_close(logps, ref_logps, atol=1e-5, rtol=0)


def rows_batch(rows: list[tuple[list[int], int]], width: int = 12, completion: int = 10, seed: int = 0) -> Batch:
    """``rows``: (prompt tokens, completion length) per row, in this order; completions drawn from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.full((len(rows), width + completion), PAD)
    mask = torch.zeros_like(ids)
    for r, (prompt, n) in enumerate(rows):
        ids[r, width - len(prompt) : width], mask[r, width - len(prompt) : width] = torch.tensor(prompt), 1
        ids[r, width : width + n], mask[r, width : width + n] = torch.randint(1, VOCAB, (n,), generator=gen), 1
    return ids, mask, completion


ONE, TWO, THREE = [5, 17, 29, 41, 53, 65], [5, 17, 29, 41, 53, 66], [9, 17, 29, 41, 53, 65]  # 6 tokens each
EQUAL_LENGTHS = [(ONE, 7), (TWO, 3), (THREE, 10), (ONE, 4), (TWO, 9), (TWO, 1)]  # TWO, THREE: ONE, one token apart


@pytest.mark.parametrize("batch_size", [None, 2])
def test_prompts_of_equal_length_that_differ_in_one_token_are_scored_apart(batch_size: int | None) -> None:
    """Rows are grouped by their prompt's tokens, not its length: prompts of one length that differ only in the
    last token (or only in the first) each get their own log-probs, TRL's; a prompt alone in its group too."""
    model, batch = make_model(), rows_batch(EQUAL_LENGTHS)
    ids, mask, keep = batch
    groups = group_prompts(ids[:, :-keep], mask[:, :-keep]).tolist()
    assert [groups.index(g) for g in groups] == [0, 1, 2, 0, 1, 1]  # each row's first row with its prompt
    (ref_logps, ref_entropy), (logps, entropy) = both_paths(model, batch, batch_size=batch_size)
    torch.testing.assert_close(logps, ref_logps, atol=1e-5, rtol=0)
    torch.testing.assert_close(entropy, ref_entropy, atol=1e-5, rtol=0)
    grad_diff, _ = max_grad_diff(model, batch)
    assert grad_diff <= 1e-5


def test_a_batch_of_different_prompts_of_one_length_has_no_repeated_prompt() -> None:
    model = make_model()
    assert unsupported_reason(model, *rows_batch([(ONE, 3), (TWO, 2), (THREE, 4)])) == "no repeated prompt"
    assert unsupported_reason(model, *rows_batch([(ONE, 3), (TWO, 2), (ONE, 4)])) is None  # one prompt twice


def test_unsupported_reasons() -> None:
    model, batch = make_model(), make_batch(TWO_GROUPS)
    assert unsupported_reason(model, *batch, False, {"pixel_values": None}) is None
    assert unsupported_reason(model, *batch, True) == "MoE aux loss"
    assert unsupported_reason(model, *batch, False, {"pixel_values": torch.zeros(1)}) == "multimodal inputs"
    assert unsupported_reason(model, *make_batch([(4, [3]), (5, [2])])) == "no repeated prompt"
    model.config._attn_implementation = "flash_attention_2"
    assert "4-D mask" in unsupported_reason(model, *batch)


# --- a real GRPOTrainer ------------------------------------------------------------------------------
KEYS = ("loss", "grad_norm", "entropy", "kl", "reward", "completions/mean_length", "completions/min_length")


def reward_len(completions: list, **_: object) -> list[float]:
    return [float(len(c[0]["content"])) / 10 for c in completions]


def run(
    cls: type,
    path: str,
    out: object,
    lora: bool = False,
    attn: str = "sdpa",
    steps: int = 2,
    pad_to_multiple_of: int | None = None,
    **kwargs: object,
) -> tuple[list[dict], float, GRPOTrainer]:
    """Two GRPO steps of ``cls`` on the tiny model: G=4, micro-batches of 4 from a shuffled generation batch of 8
    (partial groups), old and ref log-probs scored (steps_per_generation=2, beta>0), gradient checkpointing on."""
    import time

    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation=attn)
    with torch.no_grad():  # make <|eot|> likely enough that completions end early: right padding varies
        model.lm_head.bias = None
        emb = model.get_output_embeddings().weight
        emb[tokenizer.eos_token_id] = emb[tokenizer.eos_token_id] * 8
    words = ["apples", "books", "coins", "pencils", "cookies", "friends", "dollars", "store"]
    system = {"role": "system", "content": "Count the things in the question and answer with one number."}
    data = Dataset.from_list(  # the system prompt: a common prefix long enough for the shared sampling
        [{"prompt": [system, {"role": "user", "content": " ".join(words[: 2 + i % 6]) + f" {i}?"}]} for i in range(16)]
    )
    args = GRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        bf16=False,
        seed=7,
        max_steps=steps,
        learning_rate=1e-2,
        num_generations=4,
        per_device_train_batch_size=4,
        steps_per_generation=2,
        gradient_accumulation_steps=1,
        max_completion_length=16,
        beta=0.04,
        temperature=0.9,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
        pad_to_multiple_of=pad_to_multiple_of,
    )
    peft_config = None
    if lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    trainer = cls(
        model=model,
        reward_funcs=reward_len,
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        peft_config=peft_config,
        **kwargs,
    )
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    logs = [{k: v for k, v in entry.items() if k in KEYS} for entry in trainer.state.log_history if "loss" in entry]
    return logs, seconds, trainer


@pytest.mark.parametrize(
    ("lora", "multiple"), [(False, None), (True, None), (False, 8)], ids=["full", "lora", "full-pad8"]
)
def test_trainer_matches_trl(tiny_model_dir, tmp_path, lora: bool, multiple: int | None) -> None:
    """Same losses, lengths and metrics as TRL's own trainer; with ``pad_to_multiple_of=8`` the shared
    sampling once cut the first tokens of every completion (mean length 16, 11, 9 against 16, 16, 16),
    which the first-call sampling check now also catches (tests/test_shared_sampling.py)."""
    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer

    path = str(tiny_model_dir)
    ref_logs, _, _ = run(GRPOTrainer, path, tmp_path / "trl", lora=lora, pad_to_multiple_of=multiple)
    logs, _, trainer = run(LiteGRPOTrainer, path, tmp_path / "shared", lora=lora, pad_to_multiple_of=multiple)
    record = trainer.shared_prefix_record
    assert trainer.shared_prefix and record["calls"] == {"shared": 4, "trl": 0} and record["self_check"]["ok"]
    assert 1 <= record["self_check"]["rows"] <= 2  # TRL's forward of one row per group, not of the micro-batch
    sampling = record["sampling_check"]  # the first sampling call against TRL's, from the same RNG state
    assert trainer.shared_sampling and sampling["ok"] and sampling["rows_parted"] == 0 and sampling["n_tokens"] > 0
    assert sampling["shared_width"] == sampling["width"] and sampling["max_abs_diff"] <= 1e-5
    assert len(logs) == len(ref_logs) == 2 and ref_logs[0]["completions/min_length"] < 16  # right padding
    for ref, ours in zip(ref_logs, logs, strict=True):
        assert ref.keys() == ours.keys() >= {"loss", "grad_norm", "entropy", "kl"}
        for key in ref:
            assert ours[key] == pytest.approx(ref[key], rel=1e-5, abs=1e-6), key


def test_a_failed_self_check_falls_back_to_trl(tiny_model_dir, tmp_path, caplog) -> None:
    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer

    _, _, failing = run(LiteGRPOTrainer, str(tiny_model_dir), tmp_path, steps=1, shared_prefix_atol=-1.0)
    record = failing.shared_prefix_record
    assert not failing.shared_prefix and record["calls"]["shared"] == 0 and not record["self_check"]["ok"]
    assert record["off"].startswith("self-check") and "shared-prefix forward off" in caplog.text


def test_a_failed_self_check_ends_the_attempt_before_its_first_step_when_told(tiny_model_dir, tmp_path) -> None:
    """grpo-lite's attempt loop sets ``stop_when_shared_off``: the failed check raises, no step is taken."""
    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer, SharedPrefixOff

    built = []

    class Stopping(LiteGRPOTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.stop_when_shared_off = True
            built.append(self)

    with pytest.raises(SharedPrefixOff, match="^self-check: log-probs differ from TRL's by up to"):
        run(Stopping, str(tiny_model_dir), tmp_path, steps=1, shared_prefix_atol=-1.0)
    (trainer,) = built
    assert (
        trainer.state.global_step == 0
        and not trainer.shared_prefix
        and not trainer.shared_prefix_record["self_check"]["ok"]
    )


def test_the_self_check_on_a_few_rows_catches_a_leaking_mask(tiny_model_dir, tmp_path, monkeypatch, caplog) -> None:
    """A block mask that lets each completion see the completions packed before it (a real layout bug, not a
    tolerance): the self-check compares the last row of each group only, the row that bug moves, and turns the
    shared prefix off; the call it checked is served by TRL's forward."""
    import dataclasses

    from grpo_lite.training.step import shared_prefix
    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer

    real = shared_prefix.pack_groups

    def leaky(*args: object, **kwargs: object) -> shared_prefix.PackedGroups:
        packed = real(*args, **kwargs)
        length = packed.allowed.size(-1)
        causal = torch.ones(length, length, dtype=torch.bool).tril()
        return dataclasses.replace(packed, allowed=packed.allowed | causal)

    monkeypatch.setattr(shared_prefix, "pack_groups", leaky)
    _, _, trainer = run(LiteGRPOTrainer, str(tiny_model_dir), tmp_path, steps=1)
    record = trainer.shared_prefix_record
    check = record["self_check"]
    assert not check["ok"] and check["max_abs_diff"] > 1e-2 and 1 <= check["rows"] <= 2
    assert not trainer.shared_prefix and record["calls"]["shared"] == 0 and record["calls"]["trl"] >= 1
    assert record["off"].startswith("self-check") and caplog.text.count("shared-prefix forward off") == 1
