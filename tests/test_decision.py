import pytest

from pipeline.schema import Baseline, Decision, FieldError, Gate, Task, Tolerance, gate
from pipeline.scoring import decision
from pipeline.scoring.decision import FAIL, INCONCLUSIVE, PASS, Row
from pipeline.scoring.stats import Interval

RULE = Decision(baseline=Baseline("fp16", "auto"),
                tolerances={"acc": Tolerance(abs=3.0), "bleu": Tolerance(abs=1.0), "rougeL": Tolerance(rel=0.1)},
                min_baseline={"acc": 60.0, "bleu": 5.0})


def iv(delta, half=0.5):
    return Interval(delta, delta - half, delta + half, 100)


def row(tier, kv="auto", backend="reference", w=100, kvb=10, compute="float32", **metrics):
    r = Row("m", tier, kv, "ok", backend=backend, compute_dtype=compute, metrics=metrics, weight_bytes=w,
            kv_bytes_per_token=kvb)
    return r


def test_judge_metric_rule():
    assert decision.judge_metric("acc", 90.0, iv(-2.0), Tolerance(abs=3.0), 60.0)[0] == PASS
    assert decision.judge_metric("acc", 90.0, iv(-4.0), Tolerance(abs=3.0), 60.0)[0] == FAIL
    assert decision.judge_metric("acc", 90.0, iv(-3.0), Tolerance(abs=3.0), 60.0)[0] == INCONCLUSIVE
    v, why = decision.judge_metric("bleu", 0.3, iv(-0.2), Tolerance(abs=1.0), 5.0)
    assert v == INCONCLUSIVE and why.startswith(decision.NOT_CAPABLE)
    assert decision.judge_metric("acc", None, iv(0), Tolerance(abs=3.0), None)[0] == INCONCLUSIVE
    assert decision.judge_metric("acc", 90.0, None, Tolerance(abs=3.0), None)[0] == INCONCLUSIVE


def test_relative_tolerance_scales_with_baseline():
    assert decision.judge_metric("rougeL", 30.0, iv(-2.0, 0.5), Tolerance(rel=0.1), None)[0] == PASS
    assert decision.judge_metric("rougeL", 30.0, iv(-4.0, 0.5), Tolerance(rel=0.1), None)[0] == FAIL


def test_judge_rows_and_recommend_smallest_passing():
    rows = [row("fp16", w=1000, acc=90.0, bleu=1.0, rougeL=30.0),
            row("int8", w=500, acc=89.0, bleu=0.5, rougeL=29.0),
            row("int4", w=250, acc=80.0, bleu=0.9, rougeL=30.0),
            row("int8", kv="fp8", w=500, kvb=5, acc=88.5, bleu=0.2, rougeL=28.0)]
    for r in rows[1:]:
        r.intervals = {"acc": iv(r.metrics["acc"] - 90.0), "bleu": iv(0.0), "rougeL": iv(r.metrics["rougeL"] - 30)}
    decision.judge(rows, RULE)
    assert rows[2].overall == FAIL and rows[2].verdicts["acc"][0] == FAIL
    assert rows[1].verdicts["bleu"][0] == INCONCLUSIVE and rows[1].overall == PASS   # BLEU: not capable
    best, why = decision.recommend(rows, "m")
    assert (best.tier, best.kv) == ("int8", "fp8")          # same weights, fewer KV bytes
    assert "acc" in why
    best, _ = decision.recommend(rows, "m", allowed={("int8", "auto"), ("fp16", "auto")})
    assert (best.tier, best.kv) == ("int8", "auto")


def test_a_variant_cut_short_cannot_pass_on_the_tasks_it_finished():
    rows = [row("fp16", acc=90.0, rougeL=30.0), row("fp8", acc=90.0)]
    rows[1].reason = "too slow here: lm-eval stopped after 240 s; not measured: summarization"
    rows[1].intervals = {"acc": iv(0.0)}
    decision.judge(rows, RULE)
    assert rows[1].verdicts["acc"][0] == PASS
    v, why = rows[1].verdicts["rougeL"]
    assert v == INCONCLUSIVE and why.startswith(decision.NOT_MEASURED) and "too slow here" in why
    assert rows[1].overall == INCONCLUSIVE
    assert decision.recommend(rows, "m")[0] is rows[0]


def test_wide_interval_blocks_a_pass():
    rows = [row("fp16", acc=90.0), row("int4", acc=90.0)]
    rows[1].intervals = {"acc": Interval(0.0, -8.0, 8.0, 10)}
    decision.judge(rows, RULE)
    assert rows[1].overall == INCONCLUSIVE
    best, why = decision.recommend(rows, "m")
    assert best is rows[0] and "baseline itself" in why and "closest: `int4-auto`, inconclusive on acc" in why
    assert decision.recommend(rows, "m", allowed={("int4", "auto")})[0] is None


def test_inconclusive_says_how_many_samples_would_settle_it():
    # delta -2, half-width 2 at n=100, tolerance 3: the half-width must shrink to 1 -> n x (2/1)^2
    v, why = decision.judge_metric("acc", 90.0, Interval(-2.0, -4.0, 0.0, 100), Tolerance(abs=3.0), None)
    assert v == INCONCLUSIVE and "about 400 samples would be needed to pass" in why
    v, why = decision.judge_metric("acc", 90.0, Interval(-4.0, -6.0, -2.0, 50), Tolerance(abs=3.0), None)
    assert v == INCONCLUSIVE and "about 200 samples would be needed to fail" in why
    assert "no sample size" in decision.samples_to_settle(-3.0, -5.0, -1.0, 3.0, 10)


def test_rows_from_other_backend_are_not_compared():
    rows = [row("fp16", acc=90.0), row("int8", backend="vllm", acc=90.0)]
    rows[1].intervals = {"acc": iv(0.0)}
    decision.judge(rows, RULE)
    assert rows[1].verdicts["acc"] == (INCONCLUSIVE, "no comparable baseline")
    assert rows[1].overall == INCONCLUSIVE


def test_rows_of_different_compute_dtypes_are_never_compared():
    # the vLLM fp16 baseline ran in float32, the int8 tier in bfloat16: the delta would mix bf16 with quantization
    rows = [row("fp16", backend="vllm", compute="float32", acc=90.0),
            row("int8", backend="vllm", compute="bfloat16", acc=90.0),
            row("int4", backend="vllm", compute="float32", acc=89.9)]
    for r in rows[1:]:
        r.intervals = {"acc": iv(0.0)}
    decision.judge(rows, RULE)
    verdict, why = rows[1].verdicts["acc"]
    assert verdict == INCONCLUSIVE and why.startswith("no baseline at this compute dtype (bfloat16")
    assert "float32" in why and rows[1].deltas == {} and rows[1].overall == INCONCLUSIVE
    assert rows[2].verdicts["acc"][0] == PASS                     # same dtype: compared as before
    keys = decision.baselines(rows, RULE)
    assert list(keys) == [("m", "vllm", "float32")]


def test_each_compute_dtype_pairs_with_its_own_baseline():
    rows = [row("fp16", compute="float32", acc=90.0), row("int8", compute="float32", acc=89.0),
            row("fp16", kv="fp8", compute="bfloat16", acc=70.0),
            row("int8", kv="fp8", compute="bfloat16", acc=69.0)]
    rule = Decision(baseline=Baseline("fp16", "auto"), tolerances=RULE.tolerances)
    decision.judge(rows, rule)
    assert rows[1].deltas["acc"] == pytest.approx(-1.0)
    # the bfloat16 rows have no bfloat16 baseline (fp16+auto ran in float32): never paired with it
    assert rows[3].deltas == {} and rows[3].verdicts["acc"][1].startswith("no baseline at this compute dtype")


def test_failed_rows_keep_status_and_nothing_passes():
    rows = [row("fp16", acc=50.0), Row("m", "int4", "auto", "failed", reason="boom")]
    decision.judge(rows, RULE)
    assert rows[1].overall == "failed"
    best, why = decision.recommend(rows, "m")
    assert best is rows[0] and "only variant that ran" in why
    rows = [Row("m", "fp16", "auto", "failed", reason="boom"), Row("m", "int4", "auto", "failed", reason="boom")]
    decision.judge(rows, RULE)
    assert decision.recommend(rows, "m") == (None, "no variant ran successfully")


def test_two_tasks_reporting_acc_are_judged_apart_and_a_task_tolerance_moves_only_its_own_verdict():
    def rows():
        base = Row("m", "fp16", "auto", "ok", backend="reference",
                   metrics={"sentiment/acc": 90.0, "topic/acc": 70.0})
        tier = Row("m", "int4", "auto", "ok", backend="reference",
                   metrics={"sentiment/acc": 86.0, "topic/acc": 69.0})
        tier.intervals = {"sentiment/acc": iv(-4.0), "topic/acc": iv(-1.0)}
        return [base, tier]

    cls = {"config": "c.yaml", "data": "d.jsonl", "kind": "classify", "labels": ["a", "b"]}
    plain = {"sentiment": Task(**cls), "topic": Task(**cls)}
    r = rows()
    decision.judge(r, RULE, plain)
    assert r[1].deltas == {"sentiment/acc": -4.0, "topic/acc": -1.0}           # nothing overwritten
    assert {k: v[0] for k, v in r[1].verdicts.items()} == {"sentiment/acc": FAIL, "topic/acc": PASS}
    assert decision.task_verdicts(r[1].verdicts) == {"sentiment": FAIL, "topic": PASS}

    lenient = {"sentiment": Task(**cls, tolerances={"acc": Tolerance(abs=5.0)}), "topic": Task(**cls)}
    r = rows()
    decision.judge(r, RULE, lenient)
    assert {k: v[0] for k, v in r[1].verdicts.items()} == {"sentiment/acc": PASS, "topic/acc": PASS}

    floor = {"sentiment": Task(**cls), "topic": Task(**cls, min_baseline={"acc": 75.0})}
    r = rows()
    decision.judge(r, RULE, floor)
    assert r[1].verdicts["topic/acc"][1].startswith(decision.NOT_CAPABLE)
    assert r[1].verdicts["sentiment/acc"][0] == FAIL


def test_direction_comes_from_the_row():
    base = Row("m", "fp16", "auto", "ok", metrics={"lm/loss": 2.0}, higher_is_better={"lm/loss": False})
    tier = Row("m", "int4", "auto", "ok", metrics={"lm/loss": 2.5}, higher_is_better={"lm/loss": False})
    tier.intervals = {"lm/loss": iv(0.5, 0.1)}
    rule = Decision(baseline=Baseline("fp16", "auto"), tolerances={"loss": Tolerance(abs=0.2)})
    decision.judge([base, tier], rule)
    assert tier.verdicts["lm/loss"][0] == FAIL               # a rise in a lower-is-better metric is a drop
    tier.higher_is_better = {"lm/loss": True}
    decision.judge([base, tier], rule)
    assert tier.verdicts["lm/loss"][0] == PASS


def test_gate_prefers_the_task_entry_then_the_metric_default():
    tasks = {"t": Task(config="c", data="d", kind="generate", tolerances={"bleu": Tolerance(abs=4.0)},
                       min_baseline={"bleu": 0.0})}
    assert gate(RULE, tasks, "t/bleu") == Gate(Tolerance(abs=4.0), 0.0)
    assert gate(RULE, tasks, "u/bleu") == Gate(Tolerance(abs=1.0), 5.0)
    assert gate(RULE, tasks, "t/chrf") == Gate(None, None)


def test_registry_task_is_inferred_and_rejects_local_keys():
    assert Task(lm_eval="arc_easy", limit=10).kind == "lm_eval"
    with pytest.raises(FieldError, match="labels: not used by an lm-eval registry task"):
        Task(lm_eval="arc_easy", labels=["a", "b"])
    with pytest.raises(FieldError, match="config: required for a generate task"):
        Task(kind="generate", data="d.jsonl")
