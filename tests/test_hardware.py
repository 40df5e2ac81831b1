from pipeline.scoring import decision
from pipeline.domain import hardware
from pipeline.schema import Baseline, Decision, Tolerance
from pipeline.scoring.decision import Row
from pipeline.scoring.stats import Interval

GPUS = {"A100-80G": 8.0, "H100-80G": 9.0, "L4-24G": 8.9, "T4-16G": 7.5}


def test_table_cites_vllm_docs_and_has_every_kind():
    version, kinds = hardware.table()
    assert version
    assert {"fp16", "bf16", "int8-w8a8", "int4-w4a16", "fp8-w8a8", "bitsandbytes"} <= set(kinds)
    assert all(k.source for k in kinds.values())


def test_lookup():
    assert hardware.supports("fp8-w8a8", 8.9) and hardware.supports("fp8-w8a8", 9.0)
    assert not hardware.supports("fp8-w8a8", 8.0)
    assert hardware.supports("int4-w4a16", 8.0) and not hardware.supports("int4-w4a16", 7.5)
    assert hardware.supports("int8-w8a8", 7.5)
    assert hardware.kind("bitsandbytes").vllm_quantization_flag == "bitsandbytes"
    assert hardware.describe("fp8-w8a8", GPUS) == "H100-80G, L4-24G (SM >= 8.9)"


def test_recommendation_skips_tiers_the_gpu_cannot_run():
    rule = Decision(Baseline("fp16", "auto"), {"acc": Tolerance(abs=3.0)})
    rows = [Row("m", "fp16", "auto", "ok", backend="r", metrics={"acc": 90.0}, weight_bytes=1000),
            Row("m", "int8", "auto", "ok", backend="r", metrics={"acc": 90.0}, weight_bytes=500),
            Row("m", "fp8", "auto", "ok", backend="r", metrics={"acc": 90.0}, weight_bytes=499)]
    kinds = {"fp16": "fp16", "int8": "int8-w8a8", "fp8": "fp8-w8a8"}
    for r in rows[1:]:
        r.intervals = {"acc": Interval(0.0, -0.5, 0.5, 100)}
    decision.judge(rows, rule)
    for gpu, cc in (("A100-80G", 8.0), ("H100-80G", 9.0)):
        allowed = {(r.tier, r.kv) for r in rows if hardware.supports(kinds[r.tier], cc)}
        best, _ = decision.recommend(rows, "m", allowed)
        assert best.tier == ("int8" if gpu == "A100-80G" else "fp8")
