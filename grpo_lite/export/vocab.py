"""The tokenizer metadata of an exported file: carried over from a source GGUF, or built from the HF tokenizer.

:func:`carried_fields` copies a source GGUF's keys (checked by :func:`check_agrees`); :func:`add_hf_tokenizer`
builds them with the ``gguf`` package's helpers (docs/internals.md).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from grpo_lite.data.prompts import adds_bos_token
from grpo_lite.errors import ModelError

# Keys the export writes itself, never copied from the source file.
OWNED_KEYS = ("general.architecture", "general.file_type", "general.quantization_version", "general.alignment")

# llama.cpp's converter encodes this text and hashes the ids to name the pre-tokenizer (the same text).
CHECK_TEXT = "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ 🦙🦙 3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ ------======= нещо на Български ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL"

# sha256 of str(tokenizer.encode(CHECK_TEXT)) -> llama.cpp's pre-tokenizer name, for the supported
# families (the values of llama.cpp's converter table for these tokenizers).
PRE_TOKENIZERS: dict[str, str] = {
    "0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5": "llama-bpe",  # Llama 3.x
    "e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea": "qwen2",  # Qwen1.5, Qwen2, Qwen2.5
    "d4540891389ea895b53b399da6ac824becc30f2fba0e9ddbb98f92e55ca0e97c": "qwen2",  # Qwen3 tokenizer
    "855059429035d75a914d1eda9f10a876752e281a054a7a3d421ef0533e5b6249": "smollm",  # SmolLM, SmolLM2
    "3ce83efda5659b07b1ad37ca97ca5797ea4285d9b9ab0dc679e4a720c9da7454": "gpt-2",  # GPT-2
}
# A lone ByteLevel pre-tokenizer with its regex splits text exactly as GPT-2 does.
_GPT2_PRE = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}


def carried_fields(origin: Path) -> dict[str, tuple[Any, Any, Any]]:
    """``{key: (value, GGUF type, array item type or None)}`` of every key of ``origin`` the export copies."""
    import gguf  # optional: gguf (the gguf extra)

    out: dict[str, tuple[Any, Any, Any]] = {}
    for key, field in gguf.GGUFReader(origin).fields.items():
        if key.startswith(("GGUF.", "split.")) or key in OWNED_KEYS:
            continue
        kind = field.types[0]
        out[key] = (field.contents(), kind, field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None)
    return out


def check_agrees(computed: dict[str, Any], carried: dict[str, tuple[Any, Any, Any]], origin: Path) -> None:
    """Raise ModelError when an architecture key of the source file disagrees with the trained model's config.

    Floats are compared at float32 precision (the file stores them as float32).

    >>> check_agrees({"llama.block_count": 30, "llama.rope.freq_base": 1e5},
    ...              {"llama.block_count": (30, None, None), "llama.rope.freq_base": (100000.0, None, None)}, Path("m.gguf"))
    >>> check_agrees({"llama.block_count": 24}, {"llama.block_count": (30, None, None)}, Path("m.gguf"))
    Traceback (most recent call last):
    ...
    grpo_lite.errors.ModelError: the model does not match the GGUF file its run started from (m.gguf): llama.block_count is 24 in the model's config and 30 in the file; ...
    """
    for key, value in computed.items():
        if key not in carried:
            continue
        theirs = carried[key][0]
        same = math.isclose(value, theirs, rel_tol=1e-6) if isinstance(value, float) else value == theirs
        if not same:
            raise ModelError(
                f"the model does not match the GGUF file its run started from ({origin.name}): {key} is {value} in "
                f"the model's config and {theirs} in the file; export the run that trained this model, or pass "
                "a model folder outside any run folder"
            )


def pre_tokenizer_name(tokenizer: Any, tokenizer_json: dict[str, Any]) -> str | None:
    """llama.cpp's name for how ``tokenizer`` splits text before BPE, or None when it is not a known one.

    Known: the fingerprints in :data:`PRE_TOKENIZERS`, and a lone byte-level pre-tokenizer with
    GPT-2's regex (``"gpt-2"``, what a tokenizer trained with ``tokenizers``' defaults uses).
    """
    found = PRE_TOKENIZERS.get(hashlib.sha256(str(tokenizer.encode(CHECK_TEXT)).encode()).hexdigest())
    if found is None and tokenizer_json.get("pre_tokenizer") is not None:
        pre = tokenizer_json["pre_tokenizer"]
        if all(pre.get(k) == v for k, v in _GPT2_PRE.items()):
            found = "gpt-2"
    return found


def add_hf_tokenizer(writer: Any, tokenizer_dir: Path, vocab_size: int, what: str) -> None:
    """Write the tokenizer of ``tokenizer_dir`` (a byte-level BPE ``tokenizer.json``) into ``writer``.

    Args:
        writer: a ``gguf.GGUFWriter``.
        tokenizer_dir: the folder with ``tokenizer.json`` (and ``tokenizer_config.json``, the chat template).
        vocab_size: the model's vocabulary size; ids the tokenizer does not use are written as unused pads.
        what: the model, as messages should name it.
    """
    import gguf  # optional: gguf (the gguf extra)
    from transformers import AutoTokenizer

    try:
        bpe = gguf.BpeVocab(tokenizer_dir)
    except (FileNotFoundError, ValueError) as exc:
        raise ModelError(
            f"cannot export the tokenizer of {what} to GGUF: this export writes byte-level BPE tokenizers "
            f"(Llama 3, Qwen2, SmolLM2) from a tokenizer.json ({exc}); convert the saved model folder with "
            "llama.cpp's convert_hf_to_gguf.py"
        ) from None
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    tokenizer_json = json.loads((tokenizer_dir / "tokenizer.json").read_text(encoding="utf-8"))
    pre = pre_tokenizer_name(tokenizer, tokenizer_json)
    if pre is None:
        raise ModelError(
            f"cannot export the tokenizer of {what} to GGUF: its pre-tokenizer (how text is split before BPE) "
            f"is not one llama.cpp names for the supported families ({', '.join(sorted(set(PRE_TOKENIZERS.values())))}), "
            "so llama.cpp would split text differently; convert the saved model folder with llama.cpp's "
            "convert_hf_to_gguf.py, which knows more tokenizers"
        )
    tokens = [t.decode("utf-8") if isinstance(t, bytes) else t for t, _, _ in bpe.all_tokens()]
    if len(tokens) > vocab_size:
        raise ModelError(
            f"cannot export {what}: its tokenizer has {len(tokens)} tokens, more than the model's "
            f"vocabulary of {vocab_size}"
        )
    types = [int(gguf.TokenType.NORMAL)] * len(tokens)
    for token_id, added in tokenizer.added_tokens_decoder.items():
        if token_id < len(tokens):
            looks_special = added.content.startswith("<|") and added.content.endswith("|>")
            types[token_id] = int(
                gguf.TokenType.CONTROL if added.special or looks_special else gguf.TokenType.USER_DEFINED
            )
    for i in range(len(tokens), vocab_size):  # ids the model has and the tokenizer never produces
        tokens.append(f"[PAD{i}]")
        types.append(int(gguf.TokenType.UNUSED))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    special = gguf.SpecialVocab(tokenizer_dir, load_merges=True, n_vocab=vocab_size)
    if "bos" not in special.add_special_token:  # not stated in the tokenizer's files: write what it does
        special.add_special_token["bos"] = adds_bos_token(tokenizer)
    special.add_to_gguf(writer, quiet=True)
