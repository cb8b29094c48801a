"""A tiny random Llama and a locally trained tokenizer, for tests, CI and benchmarks.

Nothing is downloaded: a byte-level BPE trained here on synthetic text and a 2-layer ``LlamaConfig`` with random
weights, a folder that loads like any hub model. ``python -m grpo_lite.tiny PATH`` writes one.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

# A minimal chat template: one role marker per turn, each turn closed by the end-of-turn token,
# which is also the tokenizer's eos (TRL copies the tokenizer's eos into the model config).
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|eot|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
_SPECIALS = ["<|pad|>", "<|bos|>", "<|eot|>", "<|system|>", "<|user|>", "<|assistant|>"]


def _corpus(n_lines: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = (
        "the a of and to in is has had buys sells gives each more than how many does left total apples "
        "pencils books coins cookies friends store dollars cost pays Tom Ana Li Sam Maria reasoning answer "
        "first then so altogether spent remaining"
    ).split()
    lines = []
    for _ in range(n_lines):
        a, b = rng.randint(0, 999), rng.randint(0, 99)
        text = " ".join(rng.choice(words) for _ in range(rng.randint(4, 12)))
        lines.append(
            f"<reasoning>\n{text} {a} + {b} = {a + b}\n</reasoning>\n<answer>\n{a + b}\n</answer>\n"
            f"{text}? {a}, {b}, ${a}.{b:02d} {a * b}"
        )
    return lines


def build_tiny_model(
    path: str | Path,
    *,
    vocab_size: int = 512,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    seed: int = 0,
) -> Path:
    """Write a tiny random Llama (``num_heads`` attention heads, 2 key/value heads) and its BPE tokenizer to
    ``path`` (created; existing files are overwritten) and return the path; ``seed`` seeds the corpus and weights."""
    import torch  # heavy: torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=_SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_corpus(400, seed), trainer=trainer)
    bos_id = bpe.token_to_id("<|bos|>")
    bpe.post_processor = processors.TemplateProcessing(
        single="<|bos|> $A", pair="<|bos|> $A <|bos|> $B", special_tokens=[("<|bos|>", bos_id)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<|bos|>",
        eos_token="<|eot|>",
        pad_token="<|pad|>",
        padding_side="left",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grpo_lite.tiny", description=__doc__.splitlines()[0])
    parser.add_argument("path", help="output folder")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(build_tiny_model(args.path, seed=args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
