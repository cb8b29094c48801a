"""Reader 2 of an exported GGUF: llama.cpp itself, against transformers reading the same file.

Given a llama.cpp build folder (with ``bin/llama-completion``) and a finished run (default: the demo's),
in one process:

- the first ``--prompts`` held-out problems of the demo are rendered as evaluation renders them (the
  run's prompt style, chat template and prefill);
- ``llama-completion`` greedy-decodes each (``--temp 0``, 64 new tokens, the prompt from a file) from the
  run's ``final.gguf``; transformers' GGUF loader reads the same file and ``evaluate()`` decodes the same
  prompts; both texts are cut after the first ``</answer>`` (evaluation stops there) and compared;
- with ``--convert LLAMA_CPP_SOURCE``, the run's model is also saved as a transformers folder (adapter
  merged) and converted by llama.cpp's own ``convert_hf_to_gguf.py`` (``--outtype q8_0``; it needs its
  own requirements, ``sentencepiece`` among them); tensor names, shapes, types and bytes and the
  metadata keys of both files are compared.

Build llama.cpp once, outside the repository (2 cores: about 15 minutes), e.g. from the source that the
``llama-cpp-python`` sdist ships in ``vendor/llama.cpp``::

    pip download --no-binary :all: --no-deps llama-cpp-python && tar xzf llama_cpp_python-*.tar.gz
    cmake -S llama_cpp_python-*/vendor/llama.cpp -B llama-build -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF
    cmake --build llama-build -j2 --target llama-completion llama-cli

    python benchmarks/gguf_llamacpp.py llama-build [RUN] [--prompts 20] [--convert SOURCE_DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gguf_transformers import held_out, read_gguf, trained_model  # noqa: E402

STOP = "</answer>"


def cut(text: str) -> str:
    """The text up to and including the first ``</answer>`` (where evaluation stops).

    >>> cut("<answer>\\n4\\n</answer> and more")
    '<answer>\\n4\\n</answer>'
    """
    return text[: text.index(STOP) + len(STOP)] if STOP in text else text


def llama_completion(binary: Path, gguf: Path, prompt: str, n_predict: int, workdir: Path) -> tuple[str, list[str]]:
    """Greedy completion of ``prompt`` by llama.cpp: (generated text, the command)."""
    prompt_file = workdir / "prompt.txt"
    prompt_file.write_text(prompt + "\n", encoding="utf-8")  # -f drops one trailing newline
    command = [
        str(binary),
        "-m",
        str(gguf),
        "-f",
        str(prompt_file),
        "-n",
        str(n_predict),
        "--temp",
        "0",
        "--seed",
        "0",
        "-c",
        "2048",
        "-t",
        "2",
        "-no-cnv",
        "--no-display-prompt",
        "--no-warmup",
        "--simple-io",
        "--no-escape",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"llama-completion failed ({done.returncode}): {done.stderr[-2000:]}")
    text = done.stdout.removesuffix("\n\n")  # llama-completion prints two newlines at the end
    return text.removesuffix(" [end of text]\n"), command  # and this after an end-of-generation token


def compare_with_convert(source: Path, run: Path, ours: Path, workdir: Path) -> None:
    """Convert the run's merged model with llama.cpp's convert_hf_to_gguf.py and compare it with ``ours``."""
    import gguf

    model, tokenizer = trained_model(run)
    folder = workdir / "merged"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    theirs = workdir / "convert_hf_to_gguf.gguf"
    command = [
        sys.executable,
        str(source / "convert_hf_to_gguf.py"),
        str(folder),
        "--outtype",
        "q8_0",
        "--outfile",
        str(theirs),
    ]
    print("$ " + shlex.join(command), flush=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    print("\n".join(done.stderr.strip().splitlines()[-3:]))
    if done.returncode != 0:
        print(f"convert_hf_to_gguf.py failed ({done.returncode}): nothing to compare")
        return
    a, b = gguf.GGUFReader(ours), gguf.GGUFReader(theirs)
    ta = {t.name: (tuple(int(x) for x in t.shape), t.tensor_type.name) for t in a.tensors}
    tb = {t.name: (tuple(int(x) for x in t.shape), t.tensor_type.name) for t in b.tensors}
    data_a, data_b = {t.name: t.data for t in a.tensors}, {t.name: t.data for t in b.tensors}
    print(
        f"tensors: ours {len(ta)}, convert_hf_to_gguf {len(tb)}; names only in ours {sorted(set(ta) - set(tb))}, "
        f"only in theirs {sorted(set(tb) - set(ta))}"
    )
    print(
        f"same shape and type: {sum(ta[n] == tb[n] for n in set(ta) & set(tb))}/{len(set(ta) & set(tb))}; "
        f"differing: {[(n, ta[n], tb[n]) for n in sorted(set(ta) & set(tb)) if ta[n] != tb[n]][:5]}; "
        f"identical bytes: {sum(bytes(data_a[n].tobytes()) == bytes(data_b[n].tobytes()) for n in set(ta) & set(tb))}"
        f"/{len(set(ta) & set(tb))}"
    )
    ka = {k for k in a.fields if not k.startswith("GGUF.")}
    kb = {k for k in b.fields if not k.startswith("GGUF.")}
    print(
        f"metadata keys: ours {len(ka)}, theirs {len(kb)}; only in ours {sorted(ka - kb)}; only in theirs {sorted(kb - ka)}"
    )
    differ = [k for k in sorted(ka & kb) if a.fields[k].contents() != b.fields[k].contents()]
    print(f"keys in both with different values: {differ}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", help="a llama.cpp build folder (with bin/llama-completion)")
    parser.add_argument("run", nargs="?", default="runs/demo", help="a finished, exported run (default runs/demo)")
    parser.add_argument("--prompts", type=int, default=20, help="held-out problems decoded (default 20)")
    parser.add_argument(
        "--gguf",
        metavar="FILE",
        help="decode this export of the run instead of RUN/final.gguf "
        "(e.g. an f16 one from grpo-lite export RUN --gguf --quant f16 -o FILE)",
    )
    parser.add_argument(
        "--convert", metavar="SOURCE", help="llama.cpp's source folder: also compare with convert_hf_to_gguf.py"
    )
    args = parser.parse_args()

    from grpo_lite import evaluate
    from grpo_lite.data.prompts import apply_prompt_style

    run, binary = Path(args.run), Path(args.build) / "bin" / "llama-completion"
    gguf_path = Path(args.gguf) if args.gguf else run / "final.gguf"
    if not binary.is_file() or not gguf_path.is_file():
        raise SystemExit(f"need {binary} and {gguf_path} (run grpo-lite demo, or grpo-lite export RUN --gguf)")
    data, kwargs = held_out(run, args.prompts)
    model, tokenizer = read_gguf(gguf_path)
    result = evaluate(model, data, tokenizer=tokenizer, **kwargs)
    prefill = kwargs["prompt_style"].prefill
    ours = [cut(s["completion"][len(prefill) :]) for s in result.samples]
    prompts = list(apply_prompt_style(data, tokenizer, kwargs["prompt_style"])["prompt"])
    same, start = 0, time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i, prompt in enumerate(prompts):
            text, command = llama_completion(binary, gguf_path, prompt, kwargs["max_new_tokens"], Path(tmp))
            theirs = cut(text)
            same += theirs == ours[i]
            if i == 0:
                print("$ " + shlex.join(command).replace(str(Path(tmp)), "$TMP"))
                print(f"prompt {i} (tail): {prompt[-120:]!r}\nllama.cpp:    {theirs!r}\ntransformers: {ours[i]!r}")
            elif theirs != ours[i]:
                print(f"prompt {i} differs:\n  llama.cpp:    {theirs!r}\n  transformers: {ours[i]!r}")
        took = time.perf_counter() - start
        print(
            f"llama.cpp vs transformers on {gguf_path}: {same}/{len(prompts)} greedy completions identical "
            f"(llama.cpp {took:.0f} s for {len(prompts)} prompts)",
            flush=True,
        )
        print(json.dumps({"identical": same, "prompts": len(prompts)}))
        if args.convert:
            compare_with_convert(Path(args.convert), run, gguf_path, Path(tmp))


if __name__ == "__main__":
    main()
