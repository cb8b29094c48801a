"""Shared fixtures: offline mode, no GPU, a tiny random Llama with a local tokenizer, the GSM8K folder.

The suite describes a CPU machine (CPU plans checked against pinned RAM, gloo launches, the CPU memory
calibration) and tests the CUDA paths with fakes (tests/test_hardware.py, tests/test_run_parts.py), so a
machine with a GPU runs it the same way: CUDA is hidden from the tests and from the processes they start,
before anything can initialise it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import pytest

os.environ["CUDA_VISIBLE_DEVICES"] = ""  # no GPU, whatever the machine (see the module docstring)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# trackio reads its folder once, when first imported (by whichever test or library comes first): keep
# its database out of the home folder
os.environ.setdefault("TRACKIO_DIR", tempfile.mkdtemp(prefix="grpo-lite-tests-trackio-"))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer random Llama (hidden 64) and a 512-token BPE tokenizer, built once per session."""
    from grpo_lite.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the cache (GGUF conversions, traced blocks) inside the session's temp folder unless a test asks
    otherwise."""
    if "GRPO_LITE_CACHE" not in os.environ:
        monkeypatch.setenv("GRPO_LITE_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(autouse=True)
def _pinned_ram(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU plans without a budget check the RAM available now: pin it so in-process plans do not
    depend on the machine (tests/test_hardware.py keeps the real function for its own tests)."""
    from grpo_lite.planning import hardware

    monkeypatch.setattr(hardware, "detect_ram", lambda: (64.0, "64.0 GiB of RAM available now (pinned by the tests)"))


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    """A test that sets torch's thread count (tiny runs go faster on one) leaves it as it found it."""
    import sys

    def threads() -> int | None:  # a test may put a fake torch in sys.modules: only the real one counts
        torch = sys.modules.get("torch")
        return torch.get_num_threads() if hasattr(torch, "get_num_threads") else None

    before = threads()
    yield
    if before is not None and threads() not in (None, before):
        sys.modules["torch"].set_num_threads(before)


def load_benchmark(name: str):
    """``benchmarks/<name>.py`` imported as the module ``name`` (the benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
