"""One place per decision: each finder below reads the package's syntax trees and fails when a second
definition of a decision appears (each finder is also shown to find one in a made-up module).

- the dtype the weights load in: ``memory/settings.py: load_dtype``;
- the bf16 autocast flag: ``StepSettings.resolve``;
- the update-rounding default: ``memory/settings.py: default_update_rounding``;
- the method names: the ``Method`` literal and ``METHODS`` beside it;
- the prompt tokenisation rule: ``data/prompts.py: prompt_token_ids``;
- TRL's objects (GRPOConfig, BitsAndBytesConfig) built from a recipe: ``recipe/recipe.py``, and the trainer
  built from a recipe, never from a plan;
- the load dtype names: the ``Dtype`` literal; the LoRA keys: ``planning/candidates.py: LORA_KEYS``;
- where a plan's per-block bytes come from (traced or the formulas): ``memory/blocks.py: DEFAULT_BLOCKS``, and
  its values: ``plan()``, ``estimate()``, ``train()`` and ``grpo-lite plan`` give the same figure.

The values are checked too: ``estimate()`` and ``plan()`` agree for the same settings, the planner's first
choice of generations and lengths is ``estimate()``'s default, every dtype check accepts the same names,
and a plan's LoRA settings come back through a recipe as written.
"""

from __future__ import annotations

import ast
import inspect
import json
from collections.abc import Callable, Iterator
from pathlib import Path

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
    "load dtype": (dtype_choices, {("grpo_lite/memory/settings.py", "load_dtype")}),
    "bf16 flag": (bf16_choices, {("grpo_lite/memory/settings.py", "resolve")}),
    "rounding default": (rounding_defaults, {("grpo_lite/memory/settings.py", "default_update_rounding")}),
    "method names": (method_lists, {("grpo_lite/memory/settings.py", "")}),
    "prompt tokenisation": (
        prompt_tokenisations,
        {
            ("grpo_lite/data/prompts.py", "prompt_token_ids"),
            ("grpo_lite/data/prompts.py", "adds_bos_token"),
            ("grpo_lite/data/prompts.py", "_render"),
        },
    ),
    "load dtype names": (name_lists(DTYPES), {("grpo_lite/memory/settings.py", "")}),
    "LoRA keys": (name_lists(LORA_NAMES), {("grpo_lite/planning/candidates.py", "")}),
    "TRL objects from a recipe": (
        trl_object_builds,
        {("grpo_lite/recipe/recipe.py", "from_pretrained_kwargs"), ("grpo_lite/recipe/recipe.py", "make_grpo_config")},
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
    from grpo_lite.training import fit, prepare, trainer
    from grpo_lite.training.run.attempts import RunInputs

    class Planned(Exception):
        pass

    def inputs(spec, request, *_args):  # no tokenizer or dataset: only the plan is looked at
        return RunInputs(spec, None, [], request.reward_funcs, request.prompt_style, 256)

    plan_kwargs = fit.plan_kwargs
    monkeypatch.setattr(prepare, "load_inputs", inputs)
    monkeypatch.setattr(fit, "plan_kwargs", lambda *a: {**plan_kwargs(*a), "device": "cuda"})  # a GPU run
    monkeypatch.setattr(fit, "make_recipe", lambda request, the_plan, *a: (_ for _ in ()).throw(Planned(the_plan)))
    with pytest.raises(Planned) as caught:
        trainer.train(
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
