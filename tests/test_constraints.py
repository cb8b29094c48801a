"""constraints.txt, the locked test environment: the README's test command and .ci/run's full suite install from it,
and it pins every dependency grpo-lite names (and the dev extra) inside pyproject.toml's open ranges."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _pins() -> dict[str, Version]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    pins = [line.split("==") for line in lines if line and not line.startswith("#")]
    assert all(len(pin) == 2 for pin in pins), "constraints.txt: one name==version a line"
    return {canonicalize_name(name): Version(version) for name, version in pins}


def test_every_dependency_is_pinned_inside_its_range():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins()
    for line in [*project["dependencies"], *project["optional-dependencies"]["dev"]]:
        wanted = Requirement(line)
        pinned = pins.get(canonicalize_name(wanted.name))
        assert pinned is not None, f"constraints.txt does not pin {wanted.name}: refresh it (its first lines say how)"
        assert wanted.specifier.contains(pinned, prereleases=True), f"{wanted.name}=={pinned} is outside {wanted}"
    assert "grpo-lite" not in pins and not any(v.local for v in pins.values())  # torch 2.13.0: CPU and CUDA builds


def test_the_test_commands_install_from_it():
    readme = (ROOT / "README.md").read_text()
    test_command = next(line for line in readme.splitlines() if line.endswith("python -m pytest"))
    assert 'pip install -c constraints.txt -e ".[dev]"' in test_command
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r'^pip install -q -c constraints\.txt -e "\.\[dev\]"', ci, re.M)
    assert 'pip install -q --upgrade --upgrade-strategy eager -e ".[dev]" torch==2.13.0' in ci  # the newest leg
