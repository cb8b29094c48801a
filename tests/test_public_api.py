"""The public API as a downstream project sees it: names, types, docstrings, version, py.typed.

``tests/downstream_project/downstream_app.py`` is a separate module that imports only the names in
``grpo_lite.__all__``; it runs here in its own process, from its own folder, as a user's code would.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import grpo_lite

ROOT = Path(__file__).resolve().parent.parent
DOWNSTREAM = Path(__file__).resolve().parent / "downstream_project"
PUBLIC = list(grpo_lite.__all__)
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}

# A fresh interpreter imports every grpo_lite module first (as a long-running program would have),
# then looks each public name up the two ways users do.
_PROBE = """
import importlib, inspect, json, pkgutil, sys
import grpo_lite
for info in pkgutil.walk_packages(grpo_lite.__path__, "grpo_lite."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
out = {}
for name in grpo_lite.__all__:
    value = getattr(grpo_lite, name)
    namespace = {}
    exec(f"from grpo_lite import {name} as v", namespace)
    out[name] = {"module": inspect.ismodule(value), "shadowed": inspect.ismodule(value) and hasattr(value, name),
                 "same": namespace["v"] is value, "kind": type(value).__name__}
print(json.dumps(out))
"""


def _python(code: str, cwd: Path = ROOT) -> str:
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def probe() -> dict:
    return json.loads(_python(_PROBE, cwd=DOWNSTREAM).strip().splitlines()[-1])


@pytest.mark.parametrize("name", PUBLIC)
def test_public_name_is_what_it_says_after_every_module_is_imported(name, probe):
    seen = probe[name]
    assert not seen["shadowed"], (
        f"grpo_lite.{name} is the submodule grpo_lite.{name}, not the {name!r} it defines: "
        "a module and a public name must not share a name"
    )
    assert seen["same"]


def test_downstream_app_imports_only_public_names():
    tree = ast.parse((DOWNSTREAM / "downstream_app.py").read_text())
    used = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grpo_lite"):
            assert node.module == "grpo_lite", f"private module import: from {node.module} import ..."
            used += [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            assert all(a.name == "grpo_lite" or not a.name.startswith("grpo_lite") for a in node.names)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "grpo_lite":
            used.append(node.attr)
    assert used and set(used) <= set(PUBLIC), f"not public: {sorted(set(used) - set(PUBLIC))}"


def test_downstream_app_trains_and_evaluates_on_the_public_api(tiny_model_dir, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "downstream_app", str(tiny_model_dir), str(tmp_path / "run")],
        cwd=DOWNSTREAM,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["version"] == grpo_lite.__version__
    assert seen["plan"] == ["full-8bit", True, True]
    assert seen["does_not_fit"][1:] == ["qlora", True] and seen["does_not_fit"][0] > 2
    assert seen["config_error"][0].startswith("unknown preset 'no-such-preset'") and seen["config_error"][1]
    assert seen["train"] == [True, 1, "cpu", ["rewards/length_reward/mean", "rewards/mentions_a_number/mean"]]
    assert seen["evaluate"] == [True, 2, True]


def test_import_is_cheap_and_dir_lists_the_public_names():
    out = _python(
        "import sys, grpo_lite; heavy = ('torch', 'transformers', 'trl', 'peft', 'bitsandbytes', 'datasets'); "
        "print([m for m in heavy if m in sys.modules]); print(dir(grpo_lite) == sorted(grpo_lite.__all__))"
    )
    assert out.split() == ["[]", "True"]


def _functions() -> list[str]:
    return [n for n in PUBLIC if inspect.isfunction(getattr(grpo_lite, n, None))]


@pytest.mark.parametrize("name", _functions())
def test_public_function_has_types_and_a_docstring(name):
    func = getattr(grpo_lite, name)
    sig = inspect.signature(func)
    untyped = [p.name for p in sig.parameters.values() if p.annotation is inspect.Parameter.empty]
    assert not untyped, f"{name}: parameters without a type: {untyped}"
    assert sig.return_annotation is not inspect.Signature.empty, f"{name}: no return type"
    assert (inspect.getdoc(func) or "").strip(), f"{name}: no docstring"


@pytest.mark.parametrize("name", [n for n in PUBLIC if inspect.isclass(getattr(grpo_lite, n, None))])
def test_public_class_has_a_docstring(name):
    cls = getattr(grpo_lite, name)
    assert cls.__doc__ and not cls.__doc__.startswith(f"{name}("), f"{name}: only the dataclass default docstring"


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("ConfigError", ValueError),
        ("DataError", ValueError),
        ("ModelError", LookupError),
        ("DoesNotFitError", Exception),
        ("OutputDirError", OSError),
        ("RewardError", ValueError),
        ("ExportError", OSError),
        ("SimulationError", RuntimeError),
    ],
)
def test_errors_share_one_base(name, base):
    cls = getattr(grpo_lite, name)
    assert issubclass(cls, grpo_lite.GrpoLiteError) and issubclass(cls, base)


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_py_typed_ships_with_the_package():
    from importlib.resources import files

    assert files("grpo_lite").joinpath("py.typed").is_file()
    pyproject = _pyproject()
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["grpo_lite"]
    assert "Typing :: Typed" in pyproject["project"]["classifiers"]


def test_version_lives_in_one_place():
    pyproject = _pyproject()
    assert "version" in pyproject["project"]["dynamic"] and "version" not in pyproject["project"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "grpo_lite._version.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+([ab]\d+|rc\d+|\.dev\d+)?", grpo_lite.__version__)
    stray = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "grpo_lite").rglob("*.py")
        if p.name != "_version.py" and re.search(r"__version__\s*=", p.read_text())
    ]
    assert not stray, f"a second __version__ assignment: {stray}"


def test_changelog_top_entry_is_the_current_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## \[(\d[^\]]*)\]", text, flags=re.M)
    assert versions and versions[0] == grpo_lite.__version__


def test_cli_version_prints_the_version(capsys):
    from grpo_lite.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"grpo-lite {grpo_lite.__version__}"
