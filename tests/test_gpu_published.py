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
    import published_sims as sims
    from published_rows import ROWS_BY_LABEL
finally:
    sys.path.pop(0)

STORED = json.loads(gp.STORED.read_text(encoding="utf-8"))
PAGE = gp.MEMORY_DOC.read_text(encoding="utf-8")
CITE = re.compile(r"^[\w.-]+/[\w.-]+(#\d+|@[0-9a-f]{7,40}:\S+)$")


def test_the_docs_table_is_the_stored_results():
    start, end = PAGE.index(gp.DOC_START) + len(gp.DOC_START), PAGE.index(gp.DOC_END)
    assert PAGE[start:end].strip() == gp.markdown(STORED["rows"]).strip(), (
        "stale: python benchmarks/gpu_published.py --write"
    )
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
    reasons = PAGE[PAGE.index("Why a row is more than 10% off") : PAGE.index("Found, and not reproduced")]
    reasons = " ".join(reasons.split())  # a label may wrap across lines
    for r in STORED["rows"]:
        if abs(r["simulated_error"]) > 0.10:
            assert f"**{r['label']}**" in reasons, f"no reason given for {r['label']}"


def test_the_reason_given_for_the_trl_3456_gap_holds():
    """The page says the 1.7B step at the issue's length limits does not fit the card the issue ran on."""
    row = next(r for r in STORED["rows"] if r["label"].startswith("TRL #3456: Qwen3-1.7B"))
    card = 81920 * 1024**2  # the issue's nvidia-smi total: "78147MiB /  81920MiB"
    assert "81920MiB" in row["quote"] and row["simulated_tensor_peak_bytes"] > card


def test_the_naive_log_prob_row_simulates_to_the_stored_and_the_published_peak():
    row = ROWS_BY_LABEL["log_softmax + gather, fp32 logits 16 x 1024 x 32768"]
    sim = sims._simulate_logprob(row)
    # the logits and the log_softmax output over them (two fp32 [16, 1024, 32768] tensors), the int64 index,
    # the fp32 result
    assert sim["peak_bytes"] == 2 * 16 * 1024 * 32768 * 4 + 16 * 1024 * 8 + 16 * 1024 * 4
    stored = next(r for r in STORED["rows"] if r["label"] == row.label)
    assert sim["peak_bytes"] == stored["simulated_tensor_peak_bytes"]
    assert abs(sim["peak_bytes"] / row.measured_bytes - 1) < 0.01


# the smallest and largest CUDA context a figure may add: cuBLAS's default workspaces (PyTorch's CUDA notes,
# CUBLAS_WORKSPACE_CONFIG=:4096:8:16:8, 8 x 4096 KiB + 8 x 16 KiB), and the context the Transformers docs page
# measured on its V100 ("GPU memory occupied: 1343 MB" after one tiny tensor, before lazy module loading)
CONTEXT_AT_LEAST, CONTEXT_AT_MOST = (8 * 4096 + 8 * 16) * 2**10, 1343 * 2**20


def test_an_nvidia_smi_figure_gets_the_context_and_the_reserve():
    """What a device-wide figure adds to the simulated tensor peak: a CUDA context within the bounds above, once,
    whatever the tensors; and a reserve that is a share of the transient (activation) bytes only."""
    row = next(r for r in gp.ROWS if r.measures == "nvidia_smi")

    def added(peak_gib: float, transient_gib: float) -> float:
        categories = {"param": (peak_gib - transient_gib) * gp.GIB, "activation": transient_gib * gp.GIB}
        return gp.device_figure(row, {"peak_bytes": peak_gib * gp.GIB, "categories": categories}) - peak_gib * gp.GIB

    context = added(10, 0)
    assert CONTEXT_AT_LEAST <= context <= CONTEXT_AT_MOST, context / 2**20
    assert added(20, 0) == pytest.approx(context, abs=1)  # persistent bytes get nothing on top
    reserve_3, reserve_6 = added(10, 3) - context, added(10, 6) - context
    assert reserve_3 > 0 and reserve_6 == pytest.approx(2 * reserve_3, abs=2)  # proportional to the transient bytes
    assert added(20, 6) == pytest.approx(added(10, 6), abs=1)  # and to them alone


def test_the_bert_row_counts_the_context_its_page_measured():
    row = ROWS_BY_LABEL["Transformers docs: BERT-large classifier fp32 training, batch 4 x 512, V100 16 GB"]
    sim = {"peak_bytes": 10 * gp.GIB, "categories": {"param": 4 * gp.GIB, "activation": 6 * gp.GIB}}
    # the page measured its CUDA context: 1343 MiB, used instead of the model's 0.5 GiB
    assert gp.device_figure(row, sim) == round(10 * gp.GIB + 0.9 * gp.GIB + 1343 * 2**20)


def test_the_softmax_row_is_one_cuda_temporary_below_the_issue_as_the_page_says():
    """Meta keeps four [5120, 2, 384, 384] bf16 tensors at the backward's peak; CUDA's softmax backward allocates a
    fifth (``tmp = grad * output``), so the published peak is five."""
    row = ROWS_BY_LABEL["softmax forward + backward of a bf16 [5120, 2, 384, 384] leaf, mean loss"]
    one = 5120 * 2 * 384 * 384 * 2
    sim = sims._simulate_softmax_backward(row)
    assert 4 * one <= sim["peak_bytes"] < 4 * one + 4096
    assert abs(row.measured_bytes - sim["peak_bytes"] - one) < 4096
    assert "`tmp = grad * output`" in " ".join(PAGE.split())


def _cce_sources(root: Path, harness: str = "s0 = torch.cuda.memory_stats()['allocated_bytes.all.peak']") -> Path:
    bench = root / "ml-cross-entropy-af5f96a" / "benchmark"
    bench.mkdir(parents=True)
    (bench / "memory.py").write_text(harness + "\n")
    (bench / "__main__.py").write_text(
        "def baseline(e, c, targets, softcap=None, ignore_index=-100, reduction='mean'):\n"
        "    logits = e @ c.T\n"
        "    return F.cross_entropy(logits.float(), targets, ignore_index=ignore_index, reduction=reduction)\n"
    )
    return root


def _tiny_cce(phase: str):
    row = ROWS_BY_LABEL["Cut Cross-Entropy benchmark, baseline loss-fw, 8192 tokens x 256000 (Gemma 2 2B head)"]
    return gp.Published(
        **{
            **row.__dict__,
            "config": {**row.config, "tokens": 64, "hidden": 32, "vocab": 1000, "softcap": None, "phase": phase},
        }
    )


def test_the_cut_cross_entropy_harness_measures_over_the_inputs_in_each_window(tmp_path):
    sources = _cce_sources(tmp_path)
    fw, bw, fw_bw = (
        sims._simulate_cce_baseline(_tiny_cce(p), sources)["peak_bytes"] for p in ("loss-fw", "loss-bw", "loss-fw-bw")
    )
    bf16, fp32 = 64 * 1000 * 2, 64 * 1000 * 4
    # forward: the bf16 logits, their fp32 copy and the saved fp32 log_softmax (the inputs are not counted)
    assert bf16 + 2 * fp32 <= fw < bf16 + 2 * fp32 + 64
    # backward, from what the forward left: the fp32 gradient of the log-probs and of the logits at least
    assert bw >= 2 * fp32 and bw < fw_bw
    assert fw_bw >= fw


def test_the_cut_cross_entropy_harness_refuses_another_harness_or_phase(tmp_path):
    with pytest.raises(RuntimeError, match="not the harness"):
        sims._simulate_cce_baseline(_tiny_cce("loss-fw"), _cce_sources(tmp_path, harness="print('no delta')"))
    with pytest.raises(ValueError, match="unknown phase 'loss-lse'"):
        sims._simulate_cce_baseline(_tiny_cce("loss-lse"), _cce_sources(tmp_path / "b"))


def test_a_lora_script_whose_sizes_differ_from_the_row_is_refused(tmp_path):
    row = ROWS_BY_LABEL["Chunk-loss-LoRA benchmark, eager (non-chunked), LoRA head CE 4 x 1024, D=768, V=128256"]
    script = tmp_path / "Chunk-loss-LoRA-e4cacc8" / "benchmark" / "ce.py"
    script.parent.mkdir(parents=True)
    script.write_text("B, T, D, V, R = 4, 1024, 768, 128256, 32\nr = 2.0\nm.weight.requires_grad = False\n")
    with pytest.raises(RuntimeError, match="differ from the row's"):
        sims._simulate_lora_head_ce(row, tmp_path)


def test_a_missing_published_source_says_how_to_fetch_it(tmp_path):
    row = ROWS_BY_LABEL["Chunk-loss-LoRA benchmark, eager (chunked), LoRA head CE 4 x 1024, D=768, V=128256"]
    with pytest.raises(RuntimeError, match="is missing: fetch the published sources"):
        sims._simulate_lora_head_ce(row, tmp_path)


_STAND_IN_ADAMW = """
class AdamW(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, no_deprecation_warning=False):
        super().__init__(params, dict(lr=lr))

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if not self.state[p]:
                    self.state[p]["exp_avg"] = torch.zeros_like(p)
                    self.state[p]["exp_avg_sq"] = torch.zeros_like(p)
"""


def _tiny_trainer_step(monkeypatch, tmp_path, **changes):
    monkeypatch.setitem(
        sims.ARCHS,
        "tiny-bert",
        dict(
            model_type="bert",
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            vocab_size=100,
            max_position_embeddings=64,
            type_vocab_size=2,
        ),
    )
    source = tmp_path / "transformers-4.16.0" / "transformers" / "optimization.py"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(_STAND_IN_ADAMW)
    row = ROWS_BY_LABEL["Transformers docs: BERT-large classifier fp32 training, batch 4 x 512, V100 16 GB"]
    config = {**row.config, "model": "tiny-bert", "seq_len": 64, **changes}
    return sims._simulate_hf_trainer_step(gp.Published(**{**row.__dict__, "config": config}), tmp_path)


@pytest.mark.slow
def test_the_trainer_step_applies_accumulation_checkpointing_and_the_optimizer_state(monkeypatch, tmp_path):
    plain = _tiny_trainer_step(monkeypatch, tmp_path)
    accumulated = _tiny_trainer_step(monkeypatch, tmp_path, batch=1, gradient_accumulation_steps=4)
    checkpointed = _tiny_trainer_step(
        monkeypatch, tmp_path, batch=1, gradient_accumulation_steps=4, gradient_checkpointing=True
    )
    cats = plain["categories"]
    weights = cats["param"] - 4 * 64 * 8 - 4 * 8  # the int64 input ids and labels are held with the weights
    assert cats["optimizer_state"] == 2 * weights  # the stand-in AdamW's two states, from the warm-up step
    assert cats["gradient"] == weights  # zero_grad in place: the gradients stay allocated
    assert accumulated["peak_bytes"] < plain["peak_bytes"]
    assert checkpointed["categories"]["activation"] < accumulated["categories"]["activation"]
    with pytest.raises(ValueError, match="only an eager sequence classifier"):
        _tiny_trainer_step(monkeypatch, tmp_path, attention="sdpa")
