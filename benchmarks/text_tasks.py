"""Learning tasks whose answers are words or option letters, measured: GRPO on the real SmolLM2-135M-Instruct, on
CPU, offline.

Each task is generated here, offline and seeded; train and held-out problems are disjoint (each problem's split is
fixed by a hash of its content, 1 in 4 held out):

- ``word-order`` (``answer_kind="text"``): "Which of these two words comes first in alphabetical order: pear or
  cake?", answered with the word (equal after trimming, case and inner whitespace folded). The two words always
  start with different letters.
- ``category`` (``answer_kind="choice"``): "Which of these is a fruit? A) hammer B) banana C) tiger D) red",
  answered with the option's letter (chance: 25%). The right word comes from the asked category (eight: animals,
  fruits, colours, tools, countries, vehicles, body parts, musical instruments, ten words each), the three others
  from three other categories; the options are shuffled.
- ``category-word`` (``answer_kind="text"``): the same questions without letters, "Which of these words is a
  fruit: hammer, banana, tiger, red?", answered with the word.
- ``capitals`` (``answer_kind="text"``): "Which of these words is written in capital letters: water, ANCHOR,
  forest, table?", answered with the word (four different words, one in capitals, in a shuffled place): a surface
  feature the prompt shows, which the untrained model copies about half the time.

The run evaluates greedily on ``--eval-n`` held-out problems before and after training, as the demo does, with the
demo's CPU recipe (LoRA r=16 at 2e-4, 8 generations of 64 tokens at temperature 0.7, grpo-lite's default rewards),
and prints one line::

    category word: reward A -> B, format C% -> D%, accuracy E% -> F% (95% Wilson interval ...), among formatted ...

    python benchmarks/text_tasks.py --task word-order --steps 16 --eval-n 200   # 57 min on a busy 2-core machine
    python benchmarks/text_tasks.py --task category-word --steps 16 --eval-n 200
    python benchmarks/text_tasks.py --task capitals --steps 16 --eval-n 200     # 25 min; 46% -> 78%

The measured lines are in docs/datasets.md ("Text tasks, measured").
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import random
import string
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

TaskName = Literal["word-order", "category", "category-word", "capitals"]

WORDS = (
    "apple bread chair dance eagle fence grape honey island juice kite lemon mango night ocean piano queen river "
    "sugar table uncle violin water yarn zebra anchor basket candle desert engine forest garden hammer igloo jacket "
    "kettle ladder magnet needle orange pencil rabbit saddle tiger umbrella valley wagon yellow zipper"
).split()
ORDER_QUESTION = "Which of these two words comes first in alphabetical order: {} or {}?"
ORDER_SYSTEM = "Answer in this format:\n<reasoning>\nthe comparison\n</reasoning>\n<answer>\nthe word only\n</answer>"

CATEGORIES = {  # words a small model has seen often, each in one category only
    "an animal": "horse tiger rabbit sheep zebra monkey donkey camel wolf goat".split(),
    "a fruit": "banana cherry peach lemon mango grape melon plum apple pear".split(),
    "a colour": "red blue green yellow purple orange pink brown black white".split(),
    "a tool": "hammer saw drill wrench shovel pliers axe chisel rake screwdriver".split(),
    "a country": "France Japan Brazil Canada Egypt India Spain Mexico Kenya Norway".split(),
    "a vehicle": "car bus truck train bicycle airplane boat taxi tractor motorcycle".split(),
    "a body part": "hand knee elbow finger shoulder ankle nose ear chin knuckle".split(),
    "a musical instrument": "piano violin guitar drum flute trumpet cello harp banjo trombone".split(),
}
CATEGORY_SYSTEM = (
    "Answer in this format:\n<reasoning>\nwhat the right option is\n</reasoning>\n<answer>\nthe letter only\n</answer>"
)


@dataclass(frozen=True)
class Task:
    """A generated task: its answer kind, its problems by split and seed, and its prompt's system message and
    worked example (question, reasoning, answer)."""

    answer_kind: Literal["text", "choice"]
    problems: Callable[[str, int], list[dict[str, str]]]
    system: str
    example: tuple[str, str, str]


def _held_out(key: str) -> bool:
    """Whether the problem named by ``key`` is held out: 1 in 4, by its hash (the same on every machine)."""
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % 4 == 0


def word_order_problems(split: str, seed: int) -> list[dict[str, str]]:
    """Every pair of words with different first letters, in a seeded order, each in one split by its hash:
    ``question``, ``answer`` (the word that comes first)."""
    rows = [
        (a, b)
        for a, b in itertools.combinations(WORDS, 2)
        if a[0] != b[0] and _held_out(f"{min(a, b)}|{max(a, b)}") == (split == "test")
    ]
    rng = random.Random(seed)
    rng.shuffle(rows)
    return [{"question": ORDER_QUESTION.format(*rng.sample(pair, 2)), "answer": min(pair)} for pair in rows]


def category_problems(split: str, seed: int, letters: bool = True) -> list[dict[str, str]]:
    """Seeded four-option questions "Which of these is a fruit?", each in one split by the hash of its category and
    its four words: ``question``, ``answer`` (the right option's letter; with ``letters=False`` the options are
    listed without letters and the answer is the right word), ``word`` (the right word). Every category and right
    word is drawn evenly; the three wrong words come from three other categories, the options shuffled."""
    rng, rows, seen = random.Random(seed), [], set()
    names = sorted(CATEGORIES)
    for _ in range(40):  # 40 rounds of every category's every word: some 3,200 problems, before the split
        for name in names:
            for word in CATEGORIES[name]:
                others = [rng.choice(CATEGORIES[other]) for other in rng.sample([n for n in names if n != name], 3)]
                key = f"{name}|{word}|{'|'.join(sorted(others))}"
                if key in seen or _held_out(key) != (split == "test"):
                    continue
                seen.add(key)
                options = [word, *others]
                rng.shuffle(options)
                if letters:
                    marks = string.ascii_uppercase[: len(options)]
                    listed = " ".join(f"{mark}) {option}" for mark, option in zip(marks, options))
                    question, answer = f"Which of these is {name}? {listed}", marks[options.index(word)]
                else:
                    question, answer = f"Which of these words is {name}: {', '.join(options)}?", word
                rows.append({"question": question, "answer": answer, "word": word})
    rng.shuffle(rows)
    return rows


CAPITALS_QUESTION = "Which of these words is written in capital letters: {}?"


def capitals_problems(split: str, seed: int) -> list[dict[str, str]]:
    """Seeded questions "Which of these words is written in capital letters: water, ANCHOR, forest, table?", four
    different words with one in capitals, in a shuffled place, each in one split by the hash of its four words and
    the one in capitals: ``question``, ``answer`` (that word, in capitals)."""
    rng, rows, seen = random.Random(seed), [], set()
    for _ in range(4000):  # some 4,000 problems, before the split
        words = rng.sample(WORDS, 4)
        key = f"capitals|{words[0]}|{'|'.join(sorted(words))}"
        if key in seen or _held_out(key) != (split == "test"):
            continue
        seen.add(key)
        listed = [words[0].upper(), *words[1:]]
        rng.shuffle(listed)
        rows.append({"question": CAPITALS_QUESTION.format(", ".join(listed)), "answer": words[0].upper()})
    return rows


TASKS: dict[TaskName, Task] = {
    "word-order": Task(
        "text",
        word_order_problems,
        ORDER_SYSTEM,
        (ORDER_QUESTION.format("lamp", "cake"), "cake starts with c, lamp starts with l; c comes before l.", "cake"),
    ),
    "category": Task(
        "choice",
        category_problems,
        CATEGORY_SYSTEM,
        ("Which of these is a bird? A) spoon B) cloud C) parrot D) Italy", "A parrot is a bird: option C.", "C"),
    ),
    "category-word": Task(
        "text",
        lambda split, seed: category_problems(split, seed, letters=False),
        ORDER_SYSTEM,
        ("Which of these words is a bird: spoon, cloud, parrot, Italy?", "A parrot is a bird.", "parrot"),
    ),
    "capitals": Task(
        "text",
        capitals_problems,
        ORDER_SYSTEM,
        (CAPITALS_QUESTION.format("lamp, CAKE, river, stone"), "CAKE is in capital letters.", "CAKE"),
    ),
}


def style(task: Task):  # noqa: ANN201  # a PromptStyle: the one_step style's shape, with one example of the task
    from grpo_lite.data.prompts import Example, PromptStyle

    return PromptStyle(system_prompt=task.system, examples=(Example(*task.example),))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=get_args(TaskName), default="category")
    parser.add_argument("--steps", type=int, default=16, help="GRPO optimizer steps, one problem's group each")
    parser.add_argument("--eval-n", type=int, default=200, help="held-out problems evaluated before and after")
    parser.add_argument("--eval-split", choices=("test", "train"), default="test", help="train: for pilots")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="run folder; default runs/<task>")
    parser.add_argument("--show", type=int, default=0, help="print this many evaluated completions")
    args = parser.parse_args()
    task = TASKS[args.task]

    from datasets import Dataset

    from grpo_lite import evaluate, train
    from grpo_lite.demo import DemoConfig
    from grpo_lite.demo.run import demo_line
    from grpo_lite.evaluation import load_for_eval
    from grpo_lite.memory.models import demo_model_path

    start, path, recipe = time.perf_counter(), str(demo_model_path()), DemoConfig(seed=args.seed)
    train_rows = task.problems("train", args.seed)
    eval_rows = train_rows[::-1] if args.eval_split == "train" else task.problems("test", args.seed)
    test = Dataset.from_list(eval_rows[: args.eval_n])
    train_set = Dataset.from_list(train_rows[: args.steps * 4])
    kwargs = dict(prompt_style=style(task), max_new_tokens=recipe.max_completion_length, batch_size=50)

    def scored(model, tokenizer, when: str):  # noqa: ANN001, ANN202
        result = evaluate(model, test, tokenizer=tokenizer, answer_kind=task.answer_kind, **kwargs)
        print(f"{when}: {result.summary()}", flush=True)
        for sample in result.samples[: args.show]:
            print(f"  {sample['gold']!r} {sample['correct']}: {sample['completion']!r}")
        return result

    model, tokenizer = load_for_eval(path)
    before = scored(model, tokenizer, "before")
    if args.steps == 0:
        return 0
    result = train(
        path, dataset=train_set, answer_kind=task.answer_kind, prompt_style=style(task),
        output_dir=args.out or Path("runs") / args.task, overwrite=True, max_steps=args.steps, seed=args.seed,
        **recipe.train_settings(),
    )  # fmt: skip
    model = result.model.merge_and_unload() if hasattr(result.model, "merge_and_unload") else result.model
    after = scored(model, result.tokenizer, "after")
    print(demo_line(before, after).replace("demo", args.task.replace("-", " "), 1))
    print(f"took {time.perf_counter() - start:.0f} s ({args.steps} steps, n={after.n}, {args.eval_split} split)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
