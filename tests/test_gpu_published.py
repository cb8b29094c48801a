"""Published GPU peak-memory figures beside their simulation (benchmarks/gpu_published.py).

The stored results (docs/memory_published.json) are what docs/memory.md shows; every row names its source
and states the whole configuration its kind needs; every gap over 10% has its reason in the page. One row
(the naive log-prob, no old TRL needed) is simulated again on meta (milliseconds).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
try:
    import gpu_published as gp
finally:
    sys.path.pop(0)

STORED = json.loads(gp.STORED.read_text(encoding="utf-8"))
PAGE = gp.MEMORY_DOC.read_text(encoding="utf-8")
CITE = re.compile(r"^[\w.-]+/[\w.-]+(#\d+|@[0-9a-f]{7,40}:\S+)$")


def test_the_docs_table_is_the_stored_results():
    start, end = PAGE.index(gp.DOC_START) + len(gp.DOC_START), PAGE.index(gp.DOC_END)
    assert PAGE[start:end].strip() == gp.markdown(STORED["rows"]).strip(), \
        "stale: python benchmarks/gpu_published.py --write"
    assert STORED["summary"] == gp.summary(STORED["rows"])


def test_the_stored_rows_are_the_benchmarks_rows():
    assert [r["label"] for r in STORED["rows"]] == [r.label for r in gp.ROWS]
    for stored, row in zip(STORED["rows"], gp.ROWS, strict=True):
        assert (stored["measured_bytes"], stored["config"], stored["trl"]) == (row.measured_bytes, row.config, row.trl)
        assert stored["simulated_error"] == pytest.approx(stored["simulated_bytes"] / row.measured_bytes - 1)


@pytest.mark.parametrize("row", gp.ROWS, ids=lambda r: r.label)
def test_each_row_cites_its_source_and_states_its_configuration(row):
    assert CITE.match(row.cite), row.cite
    assert row.quote and row.gpu and row.measured_bytes > 0
    assert row.missing() == [], f"{row.label}: configuration lacks {row.missing()}"
    assert (row.trl is None) == (row.kind != "grpo_step" and row.config.get("function") != "trl.selective_log_softmax")


def test_a_row_without_a_field_its_kind_needs_is_caught():
    row = gp.ROWS[2]
    config = {k: v for k, v in row.config.items() if k != "gradient_checkpointing"}
    bad = gp.Published(**{**row.__dict__, "config": config})
    assert bad.missing() == ["gradient_checkpointing"]


def test_every_gap_over_ten_percent_has_its_reason_in_the_page():
    reasons = PAGE[PAGE.index("Why a row is more than 10% off"):PAGE.index("Found, and not reproduced")]
    reasons = " ".join(reasons.split())  # a label may wrap across lines
    for r in STORED["rows"]:
        if abs(r["simulated_error"]) > 0.10:
            assert f"**{r['label']}**" in reasons, f"no reason given for {r['label']}"


def test_the_reason_given_for_the_trl_3456_gap_holds():
    """The page says the 1.7B step at the issue's length limits does not fit the card the issue ran on."""
    row = next(r for r in STORED["rows"] if r["label"].startswith("TRL #3456: Qwen3-1.7B"))
    card = 81920 * 1024**2  # the nvidia-smi total: "78147MiB /  81920MiB"
    assert "81920MiB" in row["quote"] and row["simulated_tensor_peak_bytes"] > card


def test_the_naive_log_prob_row_simulates_to_the_stored_and_the_published_peak():
    row = gp.ROWS_BY_LABEL["log_softmax + gather, fp32 logits 16 x 1024 x 32768"]
    sim = gp._simulate_logprob(row)
    # the logits and the log_softmax output over them (two fp32 [16, 1024, 32768] tensors), the int64 index,
    # the fp32 result
    assert sim["peak_bytes"] == 2 * 16 * 1024 * 32768 * 4 + 16 * 1024 * 8 + 16 * 1024 * 4
    stored = next(r for r in STORED["rows"] if r["label"] == row.label)
    assert sim["peak_bytes"] == stored["simulated_tensor_peak_bytes"]
    assert abs(sim["peak_bytes"] / row.measured_bytes - 1) < 0.01


def test_an_nvidia_smi_figure_gets_the_context_and_the_reserve():
    row = next(r for r in gp.ROWS if r.measures == "nvidia_smi")
    sim = {"peak_bytes": 10 * gp.GIB, "categories": {"param": 4 * gp.GIB, "activation": 6 * gp.GIB}}
    # 10 GiB of tensors, 6 of them transient: + 15% of 6 GiB reserved, + 0.5 GiB of CUDA context
    assert gp.device_figure(row, sim) == round(10 * gp.GIB + 0.9 * gp.GIB + 0.5 * gp.GIB)
