"""Private names of torch, transformers, TRL, bitsandbytes, PEFT and accelerate: named in two table modules only
(the training's, :mod:`grpo_lite.training.step.trl_seam`; the memory layer's and the simulation's,
:mod:`grpo_lite.memory.meta.private`), and each table row's fallback or error, proven."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
import types
from pathlib import Path

import pytest
import torch

import grpo_lite
from grpo_lite.memory.meta import private
from grpo_lite.memory.meta.private import PrivateNameChanged
from grpo_lite.training.step import trl_seam

PACKAGE = Path(grpo_lite.__file__).parent
DEPENDENCIES = ("torch", "transformers", "trl", "bitsandbytes", "peft", "accelerate")
TABLES = {PACKAGE / "training" / "step" / "trl_seam.py", PACKAGE / "memory" / "meta" / "private.py"}
_PRIVATE = re.compile(r"\b(_[A-Za-z][A-Za-z0-9_]*)")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


@pytest.fixture(scope="module")
def dependency_names() -> set[str]:
    """Every private identifier written in the dependencies' sources (a name grpo-lite also defines is its own)."""
    names: set[str] = set()
    for dependency in DEPENDENCIES:
        spec = importlib.util.find_spec(dependency)
        if spec is None or spec.origin is None:
            continue
        for path in Path(spec.origin).parent.rglob("*.py"):
            names.update(n for n in _PRIVATE.findall(path.read_text(errors="ignore")) if not n.endswith("__"))
    return names


def _trees(package: Path) -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text()) for path in sorted(package.rglob("*.py"))}


def _own_names(package: Path, trees: dict[Path, ast.Module]) -> set[str]:
    """Private names grpo-lite defines: functions, classes, variables, its objects' attributes, arguments (not the
    methods of a dependency's class it overrides)."""
    own: set[str] = set()
    for path, tree in trees.items():
        overriding = {id(item) for _, item in _overrides(package, path, tree)}
        for node in ast.walk(tree):
            if id(node) in overriding:
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls", "args", "parsed"):
                    own.add(node.attr)
            elif isinstance(node, ast.keyword) and node.arg:
                own.add(node.arg)
            elif isinstance(node, ast.arg):
                own.add(node.arg)
    return own - set(trl_seam.OVERRIDES)  # an override is TRL's name


def _overrides(package: Path, path: Path, tree: ast.Module) -> list[tuple[ast.ClassDef, ast.FunctionDef]]:
    """The private methods a class of the module defines that a dependency's base class has (overrides)."""
    bases = _dependency_bases(tree)
    classes = [
        node
        for node in tree.body
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b).split(".")[0] in bases for b in node.bases)
    ]
    if not classes:
        return []
    module = importlib.import_module(".".join(path.relative_to(package.parent).with_suffix("").parts))
    found = []
    for node in classes:
        theirs = [c for c in getattr(module, node.name).__mro__[1:] if c.__module__.split(".")[0] in DEPENDENCIES]
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and _private(item.name):
                if any(item.name in vars(c) for c in theirs):
                    found.append((node, item))
    return found


def _dependency_bases(tree: ast.Module) -> set[str]:
    """Names a module imports from a dependency (or from a table): classes it may subclass."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in DEPENDENCIES or node.module in {
                "grpo_lite.memory.meta.private",
                "grpo_lite.training.step.trl_seam",
            }:
                names.update(a.asname or a.name for a in node.names)
    return names


def _stdlib_modules(tree: ast.Module) -> set[str]:
    return {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for a in node.names
        if a.name.split(".")[0] in sys.stdlib_module_names
    }


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def private_uses(dependency_names: set[str], package: Path = PACKAGE) -> list[str]:
    trees = _trees(package)
    own = _own_names(package, trees)
    found = []
    for path, tree in trees.items():
        if path in TABLES:
            continue
        where = path.relative_to(package.parent)
        bases, stdlib, docstrings = _dependency_bases(tree), _stdlib_modules(tree), _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in DEPENDENCIES:
                names = [a.name for a in node.names]
                if any(map(_private, node.module.split("."))) or any(map(_private, names)):
                    found.append(f"{where}:{node.lineno}: from {node.module} import {', '.join(names)}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] in DEPENDENCIES and any(map(_private, parts)):
                        found.append(f"{where}:{node.lineno}: import {alias.name}")
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                on_stdlib = isinstance(node.value, ast.Name) and node.value.id in stdlib
                if node.attr in dependency_names and node.attr not in own and not on_stdlib:
                    if not (node.attr in trl_seam.OVERRIDES and _is_override_call(node.value, bases)):
                        found.append(f"{where}:{node.lineno}: .{node.attr}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if _private(node.value) and node.value in dependency_names and node.value not in own:
                    if node.value not in trl_seam.OVERRIDES:
                        found.append(f"{where}:{node.lineno}: {node.value!r}")
        for _, item in _overrides(package, path, tree):  # a private method of a dependency's class, overridden
            if item.name not in trl_seam.OVERRIDES:
                found.append(f"{where}:{item.lineno}: def {item.name}")
    return found


def _is_override_call(value: ast.expr, bases: set[str]) -> bool:
    """``super()._x``, ``Base._x`` where ``Base`` is a dependency's class, or ``self._x`` (the override itself)."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
        return True
    return isinstance(value, ast.Name) and (value.id in bases or value.id == "self")


def test_no_module_outside_the_two_tables_names_a_dependencys_private_name(dependency_names):
    assert private_uses(dependency_names) == []


def test_the_check_finds_each_kind_of_private_use(dependency_names, tmp_path, monkeypatch):
    """The scan above would see a private import, attribute, name string and override (a check that can fail)."""
    package = tmp_path / "probe_package"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "probe.py").write_text(
        "from torch.utils._pytree import tree_map\n"
        "import torch.utils._foreach_utils\n"
        "from trl import GRPOTrainer\n"
        "def f(config, chunked):\n"
        "    setattr(chunked, '_use_triton', None)\n"
        "    return config._attn_implementation\n"
        "class T(GRPOTrainer):\n"
        "    def _prepare_inputs(self, x):\n"
        "        return super()._prepare_inputs(x)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = "\n".join(private_uses(dependency_names, package))
    for use in (
        "from torch.utils._pytree import tree_map",
        "import torch.utils._foreach_utils",
        "'_use_triton'",
        "._attn_implementation",
        "def _prepare_inputs",
        "._prepare_inputs",
    ):
        assert use in found, (use, found)


# ---- the memory layer's and the simulation's table: errors and fallbacks -------------------------------------
def test_a_missing_module_is_a_clear_error(monkeypatch):
    spec = importlib.util.spec_from_file_location("private_copy", private.__file__)
    assert spec is not None and spec.loader is not None
    monkeypatch.setitem(sys.modules, "torch.utils._pytree", None)
    with pytest.raises(RuntimeError, match=r"torch\.utils\._pytree is gone \(torch .*memory tracker") as raised:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))  # a copy: the module in use stays whole
    assert type(raised.value).__name__ == "PrivateNameChanged"


def _no_aten(monkeypatch):
    monkeypatch.setattr(torch.ops, "aten", types.SimpleNamespace())


@pytest.mark.parametrize(
    ("remove", "call", "name"),
    [
        (_no_aten, lambda: private.sdpa_flash(), "_scaled_dot_product_flash_attention"),
        (_no_aten, lambda: private.sdpa_efficient(), "_scaled_dot_product_efficient_attention"),
        (_no_aten, lambda: private.sdpa_math(), "_scaled_dot_product_attention_math"),
        (_no_aten, lambda: private.simulation_ops.__wrapped__(), "_unsafe_index"),
        ("torch.optim.optimizer._get_fused_kernels_supported_devices", private.optimizer_device_lists, "_get_fused"),
        ("torch.utils._foreach_utils._get_foreach_kernels_supported_devices", private.optimizer_device_lists, "_get_"),
        ("torch.optim.optimizer._default_to_fused_or_foreach", private.default_to_fused_or_foreach, "_default_to"),
        ("transformers.masking_utils._ignore_causal_mask_sdpa", private.sdpa_mask_decision, "_ignore_causal_mask"),
        (None, lambda: private.quantize(object(), "meta"), "_quantize"),
        (None, lambda: private.trainer_logps(object()), "_get_per_token_logps_and_entropies"),
        (None, lambda: private.measured_methods(object()), "_get_per_token_logps_and_entropies"),
    ],
)
def test_a_missing_name_is_a_clear_error(monkeypatch, remove, call, name):
    if callable(remove):
        remove(monkeypatch)
    elif remove is not None:
        module, attribute = remove.rsplit(".", 1)
        monkeypatch.delattr(importlib.import_module(module), attribute)
    with pytest.raises(PrivateNameChanged, match=rf"{name}.* is gone .*grpo-lite uses it for .*Install"):
        call()


def test_the_causal_lm_mapping_gone_is_a_clear_error(monkeypatch):
    from transformers import AutoModelForCausalLM, LlamaConfig

    assert private.causal_lm_class(LlamaConfig()).__name__ == "LlamaForCausalLM"
    monkeypatch.setattr(AutoModelForCausalLM, "_model_mapping", None)  # as on transformers' base auto class
    with pytest.raises(PrivateNameChanged, match=r"AutoModelForCausalLM\._model_mapping is gone.*traced block"):
        private.causal_lm_class(LlamaConfig())


def test_a_module_without_the_checkpoint_function_is_left_alone():
    from grpo_lite.memory.meta.autocast import checkpoint_autocast

    plain, checkpointed = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    plain.gradient_checkpointing = checkpointed.gradient_checkpointing = True
    own = lambda function, *args, **kwargs: function(*args, **kwargs)  # noqa: E731
    private.set_gradient_checkpointing_func(checkpointed, own)
    with checkpoint_autocast(torch.nn.Sequential(plain, checkpointed)):
        assert private.gradient_checkpointing_func(plain) is None  # left as it is
        wrapped = private.gradient_checkpointing_func(checkpointed)
        assert wrapped is not own and wrapped(lambda x: x + 1, 1) == 2
    assert private.gradient_checkpointing_func(checkpointed) is own


def test_absent_optional_names_are_skipped(monkeypatch):
    import trl.kernels.chunked_logprob as chunked
    import trl.trainer.utils as trl_utils

    from grpo_lite.memory.meta.cuda import TRL_HEAD_SOURCE, trl_head_source_hash

    assert trl_head_source_hash() == TRL_HEAD_SOURCE
    monkeypatch.delattr(trl_utils, "_use_triton", raising=False)
    monkeypatch.delattr(trl_utils, "_CHUNKED_LOGPROB_CHUNK_SIZE", raising=False)
    assert private.trl_optional()[1:] == (None, None)
    monkeypatch.delattr(chunked, "_addmm_fp32")
    assert trl_head_source_hash() != TRL_HEAD_SOURCE  # then TRL's CPU fold is simulated, with one warning


# ---- the training's table ---------------------------------------------------------------------------------------
def _fake_trainer(**drop):
    values = {
        "use_vllm": False,
        "use_transformers_continuous_batching": False,
        "_tokenizer": types.SimpleNamespace(pad_token_id=0),
        "generation_config": object(),
        "eos_token_ids": [2],
        "_metrics": {"train": {}, "eval": {}},
        "num_generations": 2,
        "num_iterations": 1,
        "reward_funcs": [],
        "model": None,
    }
    return types.SimpleNamespace(**{k: v for k, v in values.items() if k not in drop})


def test_a_trainer_without_the_tokenizer_turns_sampling_features_off():
    assert "shared_sampling" not in trl_seam.seam_problems(_fake_trainer())
    problems = trl_seam.seam_problems(_fake_trainer(_tokenizer=True))
    assert "_tokenizer" in problems["shared_sampling"] and "_tokenizer" in problems["stop_strings"]


def test_a_trainer_without_metrics_turns_the_monitor_off():
    assert "update_monitor" not in trl_seam.seam_problems(_fake_trainer())
    problems = trl_seam.seam_problems(_fake_trainer(_metrics=True))
    assert "_metrics" in problems["update_monitor"]


def test_a_trainer_without_the_entropy_flag_keeps_trls_loss():
    from grpo_lite.training.step.zero_advantage import config_reason

    settings = dict(loss_type="grpo", beta=0.0, top_entropy_quantile=1.0, aux_loss_enabled=False)
    assert config_reason(types.SimpleNamespace(**settings, _entropy_bonus_enabled=False)) is None
    assert "entropy bonus" in config_reason(types.SimpleNamespace(**settings))


def test_a_config_without_the_attention_name_keeps_trls_forward(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from grpo_lite.training.step.shared_prefix import unsupported_reason

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    ids = torch.ones(2, 4, dtype=torch.long)
    assert unsupported_reason(model, ids, ids, 2) is None

    class WithoutTheName(type(model.config)):
        def __getattribute__(self, name):
            if name == "_attn_implementation":
                raise AttributeError(name)
            return super().__getattribute__(name)

    model.config.__class__ = WithoutTheName
    assert trl_seam.attn_implementation(model.config) is None
    assert unsupported_reason(model, ids, ids, 2) == "attention None does not take a custom 4-D mask"
