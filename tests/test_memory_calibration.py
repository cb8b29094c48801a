"""The calibration table (docs/memory_calibration.json, docs/memory.md) against the memory model.

The rows were measured by benchmarks/memory_fit.py; these tests recompute every planned value from the
model (no torch, no run): a model change that moves a phase outside the 15% band, or a stale table,
fails here. Refresh with ``python benchmarks/memory_fit.py --replan`` (or ``--write`` to measure again).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_lite.memory.measured.calibration import TOLERANCE, compare, planned, rss_check
from tools.doc_tables import CALIBRATION_END, CALIBRATION_START, calibration_markdown, load_rows

DOCS = Path(__file__).resolve().parents[1] / "docs"
ROWS = load_rows(DOCS / "memory_calibration.json")


def test_the_rows_cover_the_settings_the_issue_names() -> None:
    settings = [r["settings"] for r in ROWS]
    assert len(ROWS) >= 6
    assert any("SmolLM2" in r["model"] for r in ROWS) and any(r["arch"]["vocab"] == 512 for r in ROWS)
    assert {s["method"] for s in settings} == {"full", "lora"}
    assert {s["dtype"] for s in settings} == {"float32", "bfloat16"}
    assert {s["num_generations"] for s in settings} >= {4, 8, 16}
    assert (
        min(s["max_completion_length"] for s in settings) <= 32
        and max(s["max_completion_length"] for s in settings) >= 128
    )
    assert all(s["device"] == "cpu" for s in settings)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["label"])
def test_stored_planned_columns_are_the_models(row: dict) -> None:
    est = planned(row)
    assert row["planned"]["phases"] == {c.phase: round(c.planned) for c in compare(row, est)}
    assert row["planned"]["peak_process"] == round(est.total_bytes)
    assert row["planned"]["peak_phase"] == est.peak_phase


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["label"])
def test_measured_within_tolerance_per_phase_and_for_the_process(row: dict) -> None:
    est = planned(row)
    for check in compare(row, est):
        assert abs(check.ratio - 1) <= TOLERANCE, (check.phase, check.planned, check.measured)
    plan_rss, meas_rss = rss_check(row, est)
    assert abs(meas_rss / plan_rss - 1) <= TOLERANCE


def test_the_docs_table_is_rendered_from_the_rows() -> None:
    page = (DOCS / "memory.md").read_text(encoding="utf-8")
    table = page.split(CALIBRATION_START, 1)[1].split(CALIBRATION_END, 1)[0].strip()
    assert table == calibration_markdown(ROWS), "stale: python benchmarks/memory_fit.py --replan"
