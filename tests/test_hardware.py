from pipeline.domain.hardware import gpus
from pipeline.schema import Baseline, Decision, TargetGpu, Tolerance
from pipeline.scoring.verdict import judge
from pipeline.scoring.pick import recommend
from pipeline.scoring.planning import planner
from pipeline.scoring.verdict.rows import Evidence, Row
from pipeline.scoring.estimators.stats import Interval
from tests import result_files

GPUS = {"A100-80G": 8.0, "H100-80G": 9.0, "L4-24G": 8.9, "T4-16G": 7.5}
A100 = ("A100-80G", TargetGpu(80, 2039, 8.0))
H100 = ("H100-80G", TargetGpu(80, 3350, 9.0))


def test_table_cites_vllm_docs_and_has_every_kind():
    found = gpus.table()
    version, kinds = found.vllm_docs_version, found.kinds
    assert version
    assert {"fp16", "bf16", "int8-w8a8", "int4-w4a16", "fp8-w8a8", "bitsandbytes"} <= set(kinds)
    assert all(k.source for k in kinds.values())


def test_lookup():
    assert gpus.supports("fp8-w8a8", 8.9) and gpus.supports("fp8-w8a8", 9.0)
    assert not gpus.supports("fp8-w8a8", 8.0)
    assert gpus.supports("int4-w4a16", 8.0) and not gpus.supports("int4-w4a16", 7.5)
    assert gpus.supports("int8-w8a8", 7.5)
    assert gpus.kind("bitsandbytes").vllm_quantization_flag == "bitsandbytes"
    assert gpus.describe("fp8-w8a8", GPUS) == "H100-80G, L4-24G (SM >= 8.9)"


def gpu_rows() -> list[Row]:
    rule = Decision(Baseline("fp16", "auto"), {"acc": Tolerance(abs=3.0)})
    kinds = {"fp16": "fp16", "int8": "int8-w8a8", "fp8": "fp8-w8a8"}
    facts = [result_files.measured(tier, backend="r", metrics={"acc": 90.0}, weight_bytes=size,
                                   kv_bytes_per_token=1000, hardware=kinds[tier])
             for tier, size in (("fp16", 1000), ("int8", 500), ("fp8", 400))]
    evidence = {f.key: Evidence(intervals={"acc": Interval(0.0, -0.5, 0.5, 100)}) for f in facts[1:]}
    return judge.judge(facts, evidence, rule)


def plans_for(rows: list[Row], gpu: tuple[str, TargetGpu], fits: dict[str, bool] | None = None) -> dict:
    """variant -> {gpu name: plan}, every plan fitting unless `fits` says otherwise."""
    name = gpu[0]
    return {r.variant: {name: planner.Plan(name, (fits or {}).get(r.variant, True), 0, 0, 0.0, 0.0)}
            for r in rows}


def test_recommendation_skips_tiers_the_gpu_cannot_run():
    rows = gpu_rows()
    for gpu, expected in ((A100, {"fp16", "int8"}), (H100, {"fp16", "int8", "fp8"})):
        allowed = recommend.gpu_candidates(rows, "m", *gpu, plans_for(rows, gpu))
        assert {tier for tier, _ in allowed} == expected
        best = recommend.recommend(rows, "m", allowed).row
        assert best.facts.tier == ("int8" if gpu is A100 else "fp8")


def test_gpu_candidates_drop_what_does_not_fit_or_has_no_plan():
    rows = gpu_rows()
    plans = plans_for(rows, H100, fits={"fp8-auto": False})
    assert recommend.gpu_candidates(rows, "m", *H100, plans) == {("fp16", "auto"), ("int8", "auto")}
    del plans["int8-auto"]                       # no plan: weights or KV size unknown
    assert recommend.gpu_candidates(rows, "m", *H100, plans) == {("fp16", "auto")}
    assert recommend.gpu_candidates(rows, "other-model", *H100, plans) == set()
