"""One place per decision: each finder below reads the package's syntax trees and fails when a second
definition of a decision appears (each finder is also shown to find one in a made-up module).

- the dtype the weights load in: ``memory/step_settings.py: load_dtype``;
- the bf16 autocast flag: ``StepSettings.resolve``;
- the update-rounding default: ``memory/step_settings.py: default_update_rounding``;
- the method names: the ``Method`` literal and ``METHODS`` beside it (``grpo_lite/settings.py``);
- the prompt tokenisation rule: ``data/prompts.py: prompt_token_ids`` (a reward model's: ``reward_model_inputs``);
- TRL's objects built from a recipe: GRPOConfig in ``recipe/recipe.py``, BitsAndBytesConfig in
  ``memory/keywords.py`` (the meta model of the tracer builds it too), and the trainer built from a recipe, never
  from a plan;
- the load dtype names: the ``Dtype`` literal (``grpo_lite/settings.py``); the LoRA keys: their fields in
  ``grpo_lite/settings.py: LiteArguments`` (no list of them anywhere: ``LORA_KEYS`` is read from the fields);
- where a plan's per-block bytes come from (traced or the formulas): ``memory/blocks.py: DEFAULT_BLOCKS``, and
  its values: ``plan()``, ``estimate()``, ``train()`` and ``grpo-lite plan`` give the same figure.

Every default in one place: ``grpo_lite/defaults.py`` holds the value of every setting grpo-lite chooses by default;
a literal default of any of them anywhere else (an assignment, a keyword default, a dataclass field, a dict entry, a
``.get`` fallback, an argparse default) fails :func:`test_no_default_is_written_outside_defaults_py`, and each
constant (GIB, BNB_BLOCK, SHARDINGS, BATCH_KEYS) is defined once.

The values are checked too: ``estimate()``, ``plan()``, a recipe, ``train()``, the CLI, the demo and the ladder
resolve defaults.py's values, ``estimate()`` and ``plan()`` agree for the same settings (and with the settings at
their default left out), the planner's first choice of generations and lengths is ``estimate()``'s default, every
dtype check accepts the same names, and a plan's LoRA settings come back through a recipe as written.
"""

from __future__ import annotations

import ast
import inspect
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from grpo_lite.recipe.recipe import Recipe

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "grpo_lite"
DTYPES = {"bfloat16", "float16", "float32"}
ROUNDINGS = {"stochastic", "nearest"}
METHOD_NAMES = {"full", "galore", "lora", "qlora"}
LORA_NAMES = {"lora_alpha", "lora_dropout"}  # with lora_r (train()'s name) or r (PEFT's)
BLOCK_MODES = {"auto", "traced", "formulas"}

Site = tuple[str, str]  # (file relative to the root, enclosing function or class)


def _walk(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """Every node with the name of the function or class it sits in ("" at module level)."""

    def visit(node: ast.AST, scope: str) -> Iterator[tuple[ast.AST, str]]:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else scope
            yield child, inner
            yield from visit(child, inner)

    yield from visit(tree, "")


def _constants(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _mentions_cuda(node: ast.AST) -> bool:
    """A device test: the string "cuda" or torch.cuda.is_available()."""
    return "cuda" in _constants(node) or any(
        isinstance(n, ast.Attribute) and n.attr == "is_available" for n in ast.walk(node)
    )


def dtype_choices(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """A dtype name chosen by device: ``"bfloat16" if device == "cuda" else ...``, an ``if`` on the device that
    names a dtype, or a mapping from "cuda" to a dtype."""
    for node, scope in _walk(tree):
        if isinstance(node, (ast.IfExp, ast.If)) and _mentions_cuda(node.test):
            branches = [node.body, node.orelse] if isinstance(node, ast.IfExp) else [*node.body, *node.orelse]
            if any(_constants(b) & DTYPES for b in branches):
                yield node, scope
        elif isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "cuda" for k in node.keys):
            if any(_constants(v) & DTYPES for v in node.values):
                yield node, scope


def bf16_choices(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """A value given to ``bf16`` (a dict key, a keyword, an assignment) that depends on the device."""
    for node, scope in _walk(tree):
        values = []
        if isinstance(node, ast.Dict):
            values = [v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant) and k.value == "bf16"]
        elif isinstance(node, ast.keyword) and node.arg == "bf16":
            values = [node.value]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(getattr(t, "id", getattr(t, "attr", None)) == "bf16" for t in targets) and node.value is not None:
                values = [node.value]
        if any(_mentions_cuda(v) for v in values):
            yield node, scope


def rounding_defaults(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """A rounding mode chosen or defaulted: in a conditional or an ``or`` fallback, or as the default value of a
    parameter or a field named ``update_rounding``."""
    for node, scope in _walk(tree):
        if (
            isinstance(node, ast.IfExp)
            and _constants(node) & ROUNDINGS
            or isinstance(node, ast.BoolOp)
            and isinstance(node.op, ast.Or)
            and _constants(node) & ROUNDINGS
        ):
            yield node, scope
        elif isinstance(node, ast.arguments):
            named = [*node.posonlyargs, *node.args][-len(node.defaults) :] if node.defaults else []
            pairs = list(zip(named, node.defaults)) + list(zip(node.kwonlyargs, node.kw_defaults))
            if any(a.arg == "update_rounding" and d is not None and _constants(d) & ROUNDINGS for a, d in pairs):
                yield node, scope
        elif (
            isinstance(node, ast.AnnAssign)
            and getattr(node.target, "id", None) == "update_rounding"
            and node.value is not None
            and _constants(node.value) & ROUNDINGS
        ):
            yield node, scope


def method_lists(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """Every spelling-out of the method names: a tuple/list/set of all of them (the Literal included), and
    every ``get_args(Method)``."""
    for node, scope in _walk(tree):
        if (
            isinstance(node, (ast.Tuple, ast.List, ast.Set))
            and all(isinstance(e, ast.Constant) for e in node.elts)
            and _constants(node) >= METHOD_NAMES
        ):
            yield node, scope
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "get_args"
            and any(getattr(a, "id", None) == "Method" for a in node.args)
        ):
            yield node, scope


def prompt_tokenisations(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """A prompt turned into token ids: a chat template applied, special tokens switched, or
    ``tokenizer(...)["input_ids"]``."""
    for node, scope in _walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "apply_chat_template":
            yield node, scope
        elif isinstance(node, ast.keyword) and node.arg == "add_special_tokens":
            yield node, scope
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Call)
            and "tokenizer" in ast.unparse(node.value.func).lower()
            and _constants(node.slice) == {"input_ids"}
        ):
            yield node, scope


def trl_object_builds(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """``GRPOConfig(...)`` or ``BitsAndBytesConfig(...)`` built."""
    for node, scope in _walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("GRPOConfig", "BitsAndBytesConfig"):
            yield node, scope


def name_lists(names: set[str]) -> Callable[[ast.AST], Iterator[tuple[ast.AST, str]]]:
    """A list of names that spells out every one of ``names``: a tuple, list or set of strings, or a dict from
    strings to strings or to the values of a name (settings built from values are not lists of names)."""

    def finder(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
        for node, scope in _walk(tree):
            if isinstance(node, ast.Dict):
                items = node.keys if all(isinstance(v, (ast.Constant, ast.Attribute)) for v in node.values) else []
            else:
                items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else []
            if {i.value for i in items if isinstance(i, ast.Constant)} >= names:
                yield node, scope

    return finder


def block_defaults(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """A block source chosen in place of the default: a ``DEFAULT_BLOCKS`` assigned, a parameter, keyword or option
    (``--blocks``) given a mode by name."""
    for node, scope in _walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(getattr(t, "id", None) == "DEFAULT_BLOCKS" for t in targets):
                yield node, scope
        elif isinstance(node, ast.arguments):
            named = [*node.posonlyargs, *node.args][-len(node.defaults) :] if node.defaults else []
            pairs = list(zip(named, node.defaults)) + list(zip(node.kwonlyargs, node.kw_defaults))
            if any(d is not None and isinstance(d, ast.Constant) and d.value in BLOCK_MODES for _, d in pairs):
                yield node, scope
        elif (
            isinstance(node, ast.keyword)
            and node.arg in ("blocks", "block_source")
            and isinstance(node.value, ast.Constant)
            and node.value.value in BLOCK_MODES
        ):
            yield node, scope
        elif (
            isinstance(node, ast.Call)
            and "--blocks" in _constants(node)
            and any(k.arg == "default" and isinstance(k.value, ast.Constant) for k in node.keywords)
        ):
            yield node, scope


def sites(finder: Callable[[ast.AST], Iterator[tuple[ast.AST, str]]]) -> set[Site]:
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for _, scope in finder(ast.parse(path.read_text(encoding="utf-8"))):
            found.add((str(path.relative_to(ROOT)), scope))
    return found


DECISIONS = {
    "load dtype": (dtype_choices, {("grpo_lite/memory/step_settings.py", "load_dtype")}),
    "bf16 flag": (bf16_choices, {("grpo_lite/memory/step_settings.py", "resolve")}),
    "rounding default": (rounding_defaults, {("grpo_lite/memory/step_settings.py", "default_update_rounding")}),
    "method names": (method_lists, {("grpo_lite/settings.py", "")}),
    "prompt tokenisation": (
        prompt_tokenisations,
        {
            ("grpo_lite/data/prompts.py", "prompt_token_ids"),
            ("grpo_lite/data/prompts.py", "adds_bos_token"),
            ("grpo_lite/data/prompts.py", "render_prompt"),
            ("grpo_lite/data/prompts.py", "completion_token_ids"),
            ("grpo_lite/data/prompts.py", "reward_model_inputs"),
        },
    ),
    "load dtype names": (name_lists(DTYPES), {("grpo_lite/settings.py", "")}),
    "LoRA keys": (name_lists(LORA_NAMES), set()),
    "TRL objects from a recipe": (
        trl_object_builds,
        {
            ("grpo_lite/memory/keywords.py", "from_pretrained_kwargs"),
            ("grpo_lite/recipe/recipe.py", "make_grpo_config"),
        },
    ),
    "block source default": (block_defaults, {("grpo_lite/memory/blocks.py", "")}),
}


@pytest.mark.parametrize("decision", DECISIONS)
def test_each_decision_has_one_definition(decision):
    finder, expected = DECISIONS[decision]
    assert sites(finder) == expected, (
        f"{decision}: defined at {sorted(sites(finder))}, expected only {sorted(expected)}"
    )


SECOND_DEFINITIONS = {  # a made-up module with a second definition of each decision
    "load dtype": 'def load(device):\n    return {"dtype": "bfloat16"} if torch.cuda.is_available() else {}\n',
    "bf16 flag": 'settings = {"bf16": device == "cuda", "optim": "adamw_torch"}\n',
    "rounding default": 'class T:\n    def __init__(self, update_rounding="nearest"):\n        pass\n',
    "method names": 'CHOICES = ("full", "galore", "lora", "qlora")\n',
    "prompt tokenisation": 'def n(tokenizer, text):\n    return len(tokenizer(text)["input_ids"])\n',
    "TRL objects from a recipe": 'args = GRPOConfig(output_dir="x", **settings)\n',
    "load dtype names": '_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}\n',
    "LoRA keys": 'KEYS = {"r": "lora_r", "lora_alpha": "lora_alpha", "lora_dropout": "lora_dropout"}\n',
    "block source default": 'def plan(model, blocks="formulas"):\n    return estimate(model, blocks="traced")\n'
    'p.add_argument("--blocks", default="auto")\n',
}


@pytest.mark.parametrize("decision", DECISIONS)
def test_the_finder_finds_a_second_definition(decision):
    finder, _ = DECISIONS[decision]
    assert list(finder(ast.parse(SECOND_DEFINITIONS[decision])))


def test_the_trainer_is_built_from_a_recipe_not_a_plan():
    from grpo_lite.training import build

    for func in (build.build_trainer, build.grpo_settings):
        assert list(inspect.signature(func).parameters)[:2] in (["source", "recipe"], ["recipe", "output_dir"])
    tree = ast.parse(inspect.getsource(build))
    reads = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and getattr(n.value, "id", "") == "plan"}
    assert not reads, f"training/build.py reads the plan directly: {sorted(reads)}"


# ---- the same decision gives the same value wherever it is read --------------------------------------------
def test_estimate_gives_the_plans_figure_for_the_same_settings():
    """Every setting of the plan but the shared prefix passed to the public estimate(): its default is the plan's."""
    from grpo_lite import estimate, plan
    from grpo_lite.recipe.costs import estimate_settings

    for p in (plan("Llama-3.2-1B-Instruct", budget_gb=16), plan("Qwen2.5-0.5B", device="cpu", preset="lora")):
        settings = {k: v for k, v in estimate_settings(p.estimate.settings).items() if k != "shared_prefix"}
        assert estimate(p.estimate.arch, **settings).total_bytes == p.estimate.total_bytes


def test_the_planners_first_choice_is_estimates_default():
    from grpo_lite import estimate, plan

    default = estimate("Qwen2.5-0.5B").settings
    roomy = plan("Qwen2.5-0.5B", budget_gb=80)
    assert roomy.settings["num_generations"] == default.num_generations == 8
    assert roomy.settings["max_completion_length"] == default.max_completion_length == 512
    assert roomy.max_prompt_length == default.max_prompt_length == 256


@pytest.mark.parametrize("name", ["bfloat16", "float16", "float32", "bf16", "fp32"])
def test_every_dtype_check_accepts_the_same_names(name):
    from grpo_lite.errors import ConfigError
    from grpo_lite.recipe.recipe import from_pretrained_kwargs
    from grpo_lite.recipe.values import typed

    valid = name in DTYPES
    for check in (
        lambda: from_pretrained_kwargs(name),
        lambda: typed("dtype", name),
        lambda: Recipe.from_dict({"model": "m", "preset": "lora", "dtype": name}),
    ):
        if valid:
            check()
        else:
            with pytest.raises(ConfigError, match="bfloat16, float16, float32"):
                check()


def test_a_plans_lora_settings_come_back_through_a_recipe():
    from grpo_lite import plan

    p = plan("Qwen2.5-0.5B", device="cpu", preset="lora", lora_r=8, lora_dropout=0.05)
    arguments = Recipe.from_plan(p).plan_settings()
    assert (arguments["lora_r"], arguments["lora_alpha"], arguments["lora_dropout"]) == (8, 16, 0.05)
    assert arguments["lora_target_modules"] == p.lora["target_modules"]
    again = plan(
        "Qwen2.5-0.5B", device="cpu", preset="lora", **{k: v for k, v in arguments.items() if k.startswith("lora")}
    )
    assert again.lora == p.lora
    assert Recipe.from_plan(p).with_overrides(lora_r=4).lora["r"] == 4


QWEN3 = {"budget_gb": 16, "method": "lora", "gradient_checkpointing": False}  # a traced block: not Llama / Qwen2


@pytest.fixture(scope="module")
def qwen3_plan():
    """Qwen3-0.6B planned from Python with nothing said about blocks (the one default)."""
    from grpo_lite.planning.choose import plan

    return plan("Qwen3-0.6B", **QWEN3)


def test_plan_from_python_traces_as_the_cli_does(qwen3_plan, capsys):
    from grpo_lite.cli import main

    assert qwen3_plan.estimate.block_terms.startswith("traced: Qwen3DecoderLayer")
    assert (
        main(
            [
                "plan",
                "Qwen3-0.6B",
                "--budget-gb",
                "16",
                "--method",
                "lora",
                "--set",
                "gradient_checkpointing=false",
                "--json",
            ]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    assert printed["block_terms"] == qwen3_plan.estimate.block_terms
    assert printed["estimate_gib"] == round(qwen3_plan.estimate.total_gib, 3)
    assert printed["settings"] == json.loads(json.dumps(dict(qwen3_plan.settings)))


def test_estimate_of_the_plans_settings_is_the_plans_figure(qwen3_plan):
    from grpo_lite.memory.estimate import estimate
    from grpo_lite.recipe.costs import estimate_settings

    again = estimate(qwen3_plan.model, **estimate_settings(qwen3_plan.estimate.settings))
    assert again.block_terms == qwen3_plan.estimate.block_terms
    assert again.total_bytes == qwen3_plan.estimate.total_bytes
    formulas = estimate(qwen3_plan.model, blocks="formulas", **estimate_settings(qwen3_plan.estimate.settings))
    assert formulas.total_bytes < 0.97 * again.total_bytes  # the default is not the formulas for Qwen3


def test_the_recipe_costs_use_the_plans_block_terms(qwen3_plan):
    from grpo_lite.recipe.costs import setting_notes

    note = setting_notes(qwen3_plan)["trl.gradient_checkpointing"]
    assert note.alternative == {"gradient_checkpointing": True} and note.delta_gib is not None
    from grpo_lite.planning.choose import plan

    checkpointed = plan(
        "Qwen3-0.6B",
        **{**QWEN3, "preset": qwen3_plan.preset.name, **dict(qwen3_plan.settings), "gradient_checkpointing": True},
    )
    assert note.delta_gib == pytest.approx(checkpointed.estimate.total_gib - qwen3_plan.estimate.total_gib, abs=1e-9)


def test_train_picks_its_preset_from_the_traced_block(tmp_path, monkeypatch):
    """train() plans as plan() does: on a 16 GB card, Qwen3-0.6B's plan carries the traced terms."""
    from grpo_lite.planning.choose import plan
    from grpo_lite.training import fit, pipeline, prepare
    from grpo_lite.training.prepare import RunInputs

    class Planned(Exception):
        pass

    def inputs(spec, asked, reward_funcs, *_args):  # no tokenizer or dataset: only the plan is looked at
        return RunInputs(spec, None, [], reward_funcs, asked.style(), 256)

    plan_kwargs = fit.plan_kwargs
    monkeypatch.setattr(prepare, "load_inputs", inputs)
    monkeypatch.setattr(fit, "plan_kwargs", lambda *a: {**plan_kwargs(*a), "device": "cuda"})  # a GPU run
    monkeypatch.setattr(fit, "make_recipe", lambda request, the_plan, *a: (_ for _ in ()).throw(Planned(the_plan)))
    with pytest.raises(Planned) as caught:
        pipeline.train(
            "Qwen3-0.6B",
            budget_gb=16,
            method="lora",
            gradient_checkpointing=False,
            output_dir=tmp_path / "run",
            quiet=True,
        )
    trained = caught.value.args[0]
    expected = plan("Qwen3-0.6B", 16, method="lora", device="cuda", max_prompt_length=256, gradient_checkpointing=False)
    assert trained.estimate.block_terms.startswith("traced: Qwen3DecoderLayer")
    assert trained.estimate.total_bytes == expected.estimate.total_bytes
    assert dict(trained.settings) == dict(expected.settings)


# ---- every default in one place: grpo_lite/defaults.py ------------------------------------------------------
DEFAULTS_FILE = "grpo_lite/defaults.py"
UNITS = {"GIB"}  # names a literal may be written with (0.5 * GIB is a literal)


def default_names() -> dict[str, Any]:
    """The settings grpo_lite/defaults.py holds, each with its default, under every spelling the package uses for
    them: the field, train()'s ``lora_*`` and PEFT's names for LoRA's, RUN's GRPOConfig keys, the demo's recipe and
    the per-method columns."""
    from dataclasses import asdict

    from grpo_lite import defaults as D

    names: dict[str, Any] = {**{k: d.value for k, d in D.RUN.items()}, **D.DEMO.train}
    for group in (D.STEP, D.PLANNER, D.GPU, D.TRAINER, D.RESILIENCE, D.HEALTH, D.EVALUATION, D.DEMO):
        names.update({k: v for k, v in asdict(group).items() if k != "train"})
    lora = {k: v for k, v in asdict(D.LORA).items() if k != "alpha_per_r"}
    names.update({**lora, **{f"lora_{k}": v for k, v in lora.items()}, "lora_alpha": D.LORA.alpha(D.LORA.r)})
    names.update(asdict(D.PER_METHOD["full"]))
    return names


NAMES = default_names()


def _setting(name: str | None) -> str | None:
    """The setting a name spells (``WINDOW_STEPS``, ``DEFAULT_STOP_STRINGS``, ``BETA_DEFAULT``), or None."""
    if not name:
        return None
    low = name.lower().lstrip("_")
    for candidate in (low, low.removeprefix("default_"), low.removesuffix("_default")):
        if candidate in NAMES:
            return candidate
    return None


def _literal(node: ast.AST | None) -> Any:
    """The value written out (a constant other than None, numbers, strings and tuples of them, GIB), else ``...``."""
    if node is None:
        return ...
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "field":
        return next((_literal(k.value) for k in node.keywords if k.arg == "default"), ...)
    allowed = (ast.Constant, ast.UnaryOp, ast.BinOp, ast.Tuple, ast.List, ast.Load, ast.operator, ast.unaryop)
    if not all(isinstance(n, allowed) or isinstance(n, ast.Name) and n.id in UNITS for n in ast.walk(node)):
        return ...
    return eval(compile(ast.Expression(node), "<default>", "eval"), {"GIB": 1024**3})  # constants only


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "sequence" if isinstance(value, (tuple, list)) else type(value).__name__


def _copy(setting: str | None, node: ast.AST | None) -> bool:
    """``node`` writes out a value of ``setting``'s kind (a number for a number, a string for a string...)."""
    if setting is None:
        return False
    value = _literal(node)
    return value is not ... and value is not None and _kind(value) == _kind(NAMES[setting])


def _flag_setting(call: ast.Call) -> str | None:
    """``add_argument("--max-steps", ...)`` -> "max_steps" (its ``dest`` when given)."""
    for k in call.keywords:
        if k.arg == "dest" and isinstance(k.value, ast.Constant):
            return str(k.value.value)
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    longs = [f for f in flags if f.startswith("--")] or flags
    return longs[0].lstrip("-").replace("-", "_") if longs else None


def _option_default(value: ast.AST) -> ast.AST | None:
    """The ``"default"`` of a shared option's declaration (``(("--seed",), {"default": 0})``)."""
    for d in ast.walk(value):
        if isinstance(d, ast.Dict):
            for k, v in zip(d.keys, d.values):
                if isinstance(k, ast.Constant) and k.value == "default":
                    return v
    return None


def _in_functions(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside a function or lambda (its local variables are not defaults)."""
    return {
        id(n)
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for n in ast.walk(f)
        if n is not f
    }


def literal_defaults(tree: ast.AST) -> Iterator[tuple[ast.AST, str, str]]:
    """Every literal default of a setting named in defaults.py: ``(node, scope, setting)``.

    An assignment at module or class level (``LORA_R = 16``, a dataclass field ``lora_r: int = 16`` or
    ``= field(default=16)``), a keyword default (``def f(lora_r=16)``), a dict entry outside a function
    (``{"lora_r": 16}``), a fallback (``fixed.get("lora_dropout", 0.0)``), an argparse ``default=`` and a shared
    option's ``"default"`` (``"dataset": (("--dataset",), {"default": "gsm8k"})``). A value counts when it is of the
    setting's kind (a number for a number...); a dict's text with a space is a message, and a setting's name a key.
    """
    in_functions = _in_functions(tree)
    for node, scope in _walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and id(node) not in in_functions:
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                setting = _setting(getattr(target, "id", None))
                if _copy(setting, node.value):
                    yield node, scope, setting  # type: ignore[misc]
        elif isinstance(node, ast.arguments):
            named = [*node.posonlyargs, *node.args][-len(node.defaults) :] if node.defaults else []
            for arg, default in [*zip(named, node.defaults), *zip(node.kwonlyargs, node.kw_defaults)]:
                setting = _setting(arg.arg)
                if _copy(setting, default):
                    yield default, scope, setting  # type: ignore[misc]
        elif isinstance(node, ast.Dict) and id(node) not in in_functions:
            for key, value in zip(node.keys, node.values):
                setting = _setting(key.value) if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
                text = _literal(value)
                if isinstance(text, str) and (" " in text or text in NAMES or text in ("r", "target_modules")):
                    continue
                if _copy(setting, value) or _copy(setting, _option_default(value)):
                    yield node, scope, setting  # type: ignore[misc]
        elif isinstance(node, ast.Call):
            attr = getattr(node.func, "attr", None)
            if attr in ("get", "setdefault", "pop") and len(node.args) == 2 and isinstance(node.args[0], ast.Constant):
                setting = _setting(str(node.args[0].value))
                if _copy(setting, node.args[1]):
                    yield node, scope, setting  # type: ignore[misc]
            elif attr == "add_argument":
                setting = _setting(_flag_setting(node))
                if any(k.arg == "default" and _copy(setting, k.value) for k in node.keywords):
                    yield node, scope, setting  # type: ignore[misc]


# the same name for another setting: (file, setting) -> what it is there
OTHER_SETTINGS = {
    ("grpo_lite/data/loaders.py", "split"): "the split a loader reads (training reads train)",
    ("grpo_lite/data/synthetic.py", "split"): "the split a problem generator draws from",
    ("grpo_lite/data/templates.py", "levels"): "every difficulty level there is, not the demo's",
    ("grpo_lite/cli/measure.py", "steps"): "steps of a measurement run (two: the optimizer state exists in the second)",
    ("grpo_lite/precision/monitor.py", "steps"): "a counter of the monitor's window",
    ("grpo_lite/simulation/trainer.py", "num_processes"): "the one-process Accelerator the simulation stands in for",
    ("grpo_lite/scale/distributed.py", "num_processes"): "config_path's check of a launcher config (ddp: 2 or more)",
    ("grpo_lite/recipe/recipe.py", "output_dir"): "the folder of a plain TRL run from a recipe, not the demo's",
    (
        "grpo_lite/training/step/grpo_trainer.py",
        "stop_strings",
    ): "LiteGRPOTrainer stands in for TRL's: none unless asked",
    # not yet read from defaults.py: these files are being rewritten
    ("grpo_lite/training/attempts.py", "on_stall"): "Attempts.start's on_stall (train() passes it resolved)",
    ("grpo_lite/training/replan.py", "max_prompt_length"): "a fallback of 0 for a message",
    ("grpo_lite/export/after_training.py", "num_processes"): "export_after_training's processes (train() passes them)",
    ("grpo_lite/export/runtimes.py", "stop_strings"): "the Modelfile's stop strings (train() passes the run's)",
}


def default_copies() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(ROOT))
        if where == DEFAULTS_FILE:
            continue
        for node, scope, setting in literal_defaults(ast.parse(path.read_text(encoding="utf-8"))):
            if (where, setting) not in OTHER_SETTINGS:
                found.append(f"{where}:{node.lineno} ({scope or 'module'}): {setting}")
    return found


def test_no_default_is_written_outside_defaults_py():
    copies = default_copies()
    assert not copies, "literal defaults of settings that grpo_lite/defaults.py holds; read them from there:\n" + (
        "\n".join(copies)
    )


COPIES = {  # a made-up module with each kind of copy
    "assignment": "LORA_R = 16\n",
    "unit": "CUDA_CONTEXT_BYTES = 0.5 * GIB\n",
    "alias": 'DEFAULT_STOP_STRINGS = ("</answer>",)\n',
    "keyword default": "def plan(model, *, max_prompt_length=256):\n    pass\n",
    "dataclass field": "class S:\n    lora_r: int = 8\n",
    "field()": "class S:\n    window_steps: int = field(default=8)\n",
    "dict entry": 'RUN_DEFAULTS = {"save_steps": 50}\n',
    "fallback": 'def f(fixed):\n    return fixed.get("lora_dropout", 0.0)\n',
    "argparse": 'def add(p):\n    p.add_argument("--on-oom", default="step_down")\n',
    "shared option": 'SHARED = {"dataset": (("--dataset",), {"default": "gsm8k"})}\n',
}


@pytest.mark.parametrize("kind", COPIES)
def test_the_finder_finds_each_kind_of_copy(kind):
    assert list(literal_defaults(ast.parse(COPIES[kind])))


def test_the_finder_leaves_what_is_not_a_default():
    fine = (
        'PLAN_OWNED = {"device": "train() uses CUDA when torch sees a GPU"}\n'  # a message
        'LORA_KEYS = {"lora_r": "r", "lora_dropout": "lora_dropout"}\n'  # names
        'KNOB = lambda s: {"method": "lora"}\n'  # a value built, not a default
        "def f(device: str | None = None, budget_gb=16):\n    pass\n"
        "from grpo_lite.defaults import LORA\n"
        "class S:\n    lora_r: int = LORA.r\n    lora_dropout: float | None = None\n"
        "def f(x):\n    window_steps = 8\n    return window_steps\n"  # a local variable
        'x = {"lora_r": LORA.r}\n'
    )
    assert not list(literal_defaults(ast.parse(fine)))


def test_the_old_copy_of_lora_r_in_step_settings_is_caught():
    """The mutation that went unnoticed (issue 33): StepSettings' lora_r 16 -> 8, what estimate() uses."""
    source = (PACKAGE / "memory" / "step_settings.py").read_text(encoding="utf-8")
    assert "lora_r: int = LORA.r" in source
    mutated = source.replace("lora_r: int = LORA.r", "lora_r: int = 8")
    assert [s for _, _, s in literal_defaults(ast.parse(mutated))] == ["lora_r"]


CONSTANTS = {  # a constant -> where it is defined (the one assignment of its name in the package)
    "GIB": DEFAULTS_FILE,
    "BNB_BLOCK": "grpo_lite/memory/optimizers.py",
    "SHARDINGS": "grpo_lite/scale/distributed.py",
    "BATCH_KEYS": "grpo_lite/planning/candidates.py",
}


@pytest.mark.parametrize("name", CONSTANTS)
def test_each_constant_is_defined_once(name):
    """A module or class attribute of the name (any case, any underscore prefix), or of GiB's value (``1024**3``)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        local = _in_functions(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None or id(node) in local:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            spelled = any(getattr(t, "id", "").lstrip("_").upper() == name for t in targets)
            value = ast.unparse(node.value).replace(" ", "")
            if spelled or name == "GIB" and value in ("1024**3", "2**30", "1<<30", "1073741824"):
                found.append(str(path.relative_to(ROOT)))
    assert found == [CONSTANTS[name]]


def test_gib_is_written_nowhere_else():
    """No module spells GiB out (``/ 1024**3``): they divide by GIB."""
    spelled = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.BinOp) and ast.unparse(node).replace(" ", "") in ("1024**3", "2**30"):
                spelled.append(f"{where}:{node.lineno}")
    assert spelled == [f"{DEFAULTS_FILE}:{_gib_line()}"]


def _gib_line() -> int:
    tree = ast.parse((ROOT / DEFAULTS_FILE).read_text(encoding="utf-8"))
    return next(n.lineno for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "GIB")


# ---- the values: every reader of a default gets defaults.py's value --------------------------------------------
def test_estimate_plan_and_the_recipe_resolve_the_defaults_of_defaults_py():
    """estimate() of a bare model, plan() and a recipe written from it give defaults.py's values, not a copy's: a
    default changed in one reader only (StepSettings' lora_r 16 -> 8, what estimate() uses) fails here."""
    from grpo_lite import estimate, plan
    from grpo_lite.defaults import LORA, RUN, STEP, TRAINER, learning_rate, optimizer

    bare = estimate("Qwen2.5-0.5B").settings
    for key in (
        "method", "device", "max_prompt_length", "max_completion_length", "num_generations", "per_device_train_batch_size",
        "gradient_accumulation_steps", "num_iterations", "beta", "optim", "double_quant", "gradient_checkpointing",
        "shared_prefix", "vllm_mode", "vllm_gpu_memory_utilization", "num_processes",
    ):  # fmt: skip
        assert getattr(bare, key) == getattr(STEP, key), key
    lora = estimate("Qwen2.5-0.5B", method="lora", device="cpu", optim="adamw_torch").settings
    assert (lora.lora_r, lora.lora_dropout, lora.lora_target_modules) == (LORA.r, LORA.dropout, None)

    p = plan("Qwen2.5-0.5B", device="cpu", preset="lora")
    assert p.lora is not None
    assert (p.lora["r"], p.lora["lora_alpha"], p.lora["lora_dropout"]) == (LORA.r, 2 * LORA.r, LORA.dropout)
    assert p.settings["learning_rate"] == learning_rate("lora")
    assert p.settings["optim"] == optimizer("lora", "cpu")
    assert p.max_prompt_length == STEP.max_prompt_length and p.num_processes == STEP.num_processes
    assert p.estimate.settings.lora_r == lora.lora_r  # the plan's rank is estimate()'s default rank

    r = Recipe.from_plan(p)
    assert r.lora is not None and r.lora["r"] == LORA.r
    assert {k: r.trl[k] for k in RUN} == {k: d.value for k, d in RUN.items()}
    bare_recipe = Recipe.from_dict({"model": "m", "preset": "lora"})
    assert bare_recipe.stop_strings == list(TRAINER.stop_strings)
    assert (bare_recipe.shared_prefix, bare_recipe.dataset) == (STEP.shared_prefix, TRAINER.dataset)


def test_estimate_of_a_plan_with_its_defaults_left_out_is_the_plans_figure():
    """The settings a plan holds at their default, left out of estimate(): the same figure (the two readers agree)."""
    from grpo_lite import estimate, plan
    from grpo_lite.memory.step_settings import StepSettings
    from grpo_lite.recipe.costs import estimate_settings

    defaults = StepSettings()
    cases = [  # a plan, and settings it holds at estimate()'s default
        (plan("Qwen2.5-0.5B", device="cpu", preset="lora"), {"lora_r", "lora_dropout", "num_generations", "beta"}),
        (plan("Llama-3.2-1B-Instruct", budget_gb=80), {"optim", "num_generations", "max_completion_length"}),
    ]
    for p, expected in cases:
        settings = estimate_settings(p.estimate.settings)
        left_out = {k for k, v in settings.items() if v == getattr(defaults, k)}
        assert expected <= left_out and "max_prompt_length" in left_out
        given = {k: v for k, v in settings.items() if k not in left_out}
        assert estimate(p.estimate.arch, blocks=p.estimate.blocks, **given).total_bytes == p.estimate.total_bytes


def test_train_and_the_cli_resolve_the_defaults_of_defaults_py():
    """train()'s signature shows defaults.py's values (no decorator fills them in), and the CLI's flags left out
    are the same values."""
    import grpo_lite
    from grpo_lite.cli import build_parser
    from grpo_lite.defaults import EVALUATION, RESILIENCE, STEP, TRAINER
    from grpo_lite.errors import ConfigError

    expected = {
        "on_oom": RESILIENCE.on_oom,
        "oom_window_steps": RESILIENCE.oom_window_steps,
        "on_stall": RESILIENCE.on_stall,
        "shared_prefix": STEP.shared_prefix,
        "stop_strings": TRAINER.stop_strings,
        "dataset": TRAINER.dataset,
    }
    signature = inspect.signature(grpo_lite.train)
    assert {key: signature.parameters[key].default for key in expected} == expected
    with pytest.raises(ConfigError, match="on_oom=None is not a value train"):  # not silently the default
        grpo_lite.train("Qwen2.5-0.5B", on_oom=None)  # type: ignore[arg-type]

    parser = build_parser()
    train = parser.parse_args(["train", "m"])
    assert (train.on_oom, train.on_stall, train.dataset) == (RESILIENCE.on_oom, RESILIENCE.on_stall, TRAINER.dataset)
    assert (train.shared_prefix, train.num_processes) == (STEP.shared_prefix, STEP.num_processes)
    planned = parser.parse_args(["plan", "m"])
    assert (planned.max_prompt_length, planned.num_processes) == (STEP.max_prompt_length, STEP.num_processes)
    evaluated = parser.parse_args(["eval", "m"])
    assert (evaluated.split, evaluated.batch_size) == (EVALUATION.split, EVALUATION.batch_size)
    assert evaluated.max_new_tokens is None  # evaluate() resolves it: the task's own (TASKS), else EVALUATION's


def test_the_demo_and_the_ladder_read_defaults_py():
    from grpo_lite.defaults import DEMO, LORA, PER_METHOD
    from grpo_lite.demo import DemoConfig
    from grpo_lite.planning.ladder import LADDER

    config = DemoConfig()
    for key in ("steps", "eval_n", "num_generations", "max_completion_length", "learning_rate", "lora_r", "levels"):
        assert getattr(config, key) == getattr(DEMO, key), key
    settings = config.train_settings()
    assert {k: settings[k] for k in DEMO.train} == DEMO.train
    assert settings["lora_alpha"] == LORA.alpha(DEMO.lora_r)
    for rung in LADDER:
        assert rung.learning_rate == PER_METHOD[rung.method].learning_rate
        assert rung.lora_r == LORA.r
        if rung.name == rung.method:  # the method's own rung: its optimizers
            assert (rung.optim, rung.cpu_optim) == (PER_METHOD[rung.method].optim, PER_METHOD[rung.method].cpu_optim)
