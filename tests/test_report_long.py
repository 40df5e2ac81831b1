"""decision.md's long-context section and decision.json's `long_context` (pipeline/report/long_context.py)
from hand-made rows: the per-tier KV sentence, the by-length table, each variant's buckets, and the
reason of a variant that was not measured."""
import dataclasses

import pytest

from pipeline.report import exports, long_context, markdown
from pipeline.scoring.verdict import long_kv
from tests.test_report import HEADER, facts, judged, model_report

pytestmark = pytest.mark.unit

EDGES = [0, 512, 1024]


def record(kls, top1=99.0):
    buckets = [{"lo": lo, "hi": hi, "n_texts": len(kls), "n_positions": 3 * (hi - lo), "reach": hi,
                "kl_mean": sum(k[b] for k in kls) / len(kls), "kl_ci": [0.0, 0.1], "top1": top1,
                "top1_ci": [90.0, 100.0]} for b, (lo, hi) in enumerate(zip(EDGES, EDGES[1:]))]
    return {"status": "ok", "texts": len(kls), "positions": 1024, "edges": EDGES, "k": 20, "confidence": 0.95,
            "buckets": buckets, "per_text": {"kl": kls, "top1": [[top1] * 2 for _ in kls]}}


def report(with_records=True):
    found = [facts("fp16", "auto", backend="reference", compute_dtype="float32"),
             facts("fp16", "fp8", backend="reference", compute_dtype="float32",
                   long_context=record([[0.004, 0.005], [0.005, 0.006], [0.0045, 0.0055]]) if with_records else
                   {"status": "unsupported", "why": "fidelity by position runs on the reference backend only"}),
             facts("int4", "auto", backend="reference", compute_dtype="float32",
                   long_context={"status": "skipped", "why": "the variant failed a gated metric first"})]
    rows = judged(found, [None, None, None])
    lk = long_kv.judge([r.facts for r in rows], "auto", "fp16", 0.02)
    return dataclasses.replace(model_report(rows), long_kv=lk, long_tolerance=0.02)


def test_the_section_states_each_kv_mode_s_length_and_every_variant_s_buckets():
    lines = long_context.long_lines(report(), max_model_len=1024)
    text = "\n".join(lines)
    assert lines[0] == "### Long context: fidelity by position"
    assert "- fp8 KV on fp16: non-inferior up to 1,024 tokens (every bucket within the tolerance)" in lines
    assert "| fp16 | fp8 | +0.0045 [" in text and "pass | 1,024 |" in text
    assert "| fp16-fp8 | 0.0045 [0.0000, 0.1000] / 99.0% | 0.0055 [0.0000, 0.1000] / 99.0% |" in lines
    assert "| int4-auto | skipped: the variant failed a gated metric first |  |" in lines
    assert "Barred from every pick" not in text
    # planned for a longer context than the probe read: said, and the GPU recommendation follows it
    assert ("Barred from every pick, page 1's and each target GPU's (not shown up to 4,096 tokens: memory.max_model_len, "
            "at most the model's context; decision.kv_kl_tolerance): fp16 + fp8 KV.") in long_context.long_lines(report(), max_model_len=4096)


def test_without_any_measured_variant_it_says_why_and_json_carries_the_verdicts():
    lines = long_context.long_lines(report(with_records=False), 1024)
    assert "Not measured on any variant; why, per variant:" in lines
    assert "| fp16-fp8 | unsupported: fidelity by position runs on the reference backend only |" in lines
    assert "| int4-auto | skipped: the variant failed a gated metric first |" in lines
    assert not any(line.startswith("| fp16-auto |") for line in lines)      # the baseline is the reference
    m = report()
    js = exports.decision_json({"m": m}, HEADER)["long_context"]["m"]
    assert js["configured"] and js["kl_tolerance"] == 0.02
    assert js["kv"][0]["non_inferior_up_to"] == 1024 and js["kv"][0]["against"] == "the baseline"
    assert js["rows"]["int4-auto"]["status"] == "skipped"
    assert "### Long context: fidelity by position" in markdown.render({"m": m}, HEADER)


def test_no_section_when_no_variant_recorded_long_context():
    m = dataclasses.replace(report(), long_tolerance=None, long_kv=[])
    assert long_context.long_lines(m, 1024) == [] and long_context.long_json(m) == {"configured": False}
