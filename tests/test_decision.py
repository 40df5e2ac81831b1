import pytest

from pipeline.domain.result.records import ArithmeticCheck
from pipeline.schema import Baseline, Decision, FieldError, Gate, Task, Tolerance, gate
from pipeline.scoring.verdict import judge
from pipeline.scoring.pick import recommend
from pipeline.scoring.verdict.judge import FAIL, INCONCLUSIVE, PASS
from pipeline.scoring.verdict.rows import NOT_RUN, Evidence
from pipeline.scoring.estimators.stats import Interval
from tests import result_files

RULE = Decision(baseline=Baseline("fp16", "auto"),
                tolerances={"acc": Tolerance(abs=3.0), "bleu": Tolerance(abs=1.0), "rougeL": Tolerance(rel=0.1)},
                min_baseline={"acc": 60.0, "bleu": 5.0})


def iv(delta, half=0.5):
    return Interval(delta, delta - half, delta + half, 100)


def row(tier, kv="auto", backend="reference", w=100, kvb=10, compute="float32", reason=None, **metrics):
    return result_files.measured(tier, kv, backend=backend, compute_dtype=compute, metrics=metrics, weight_bytes=w,
                                 kv_bytes_per_token=kvb, reason=reason)


def judged(facts, intervals=None, rule=RULE, tasks=None):
    """judge.judge with each row's intervals (variant -> metric -> Interval)."""
    ev = {f.key: Evidence(intervals=(intervals or {}).get(f.variant, {})) for f in facts}
    return judge.judge(facts, ev, rule, tasks)


def verdicts(r):
    return {k: v.verdict for k, v in r.judgement.verdicts.items()}


def test_judge_metric_rule():
    assert judge.judge_metric("acc", 90.0, iv(-2.0), Tolerance(abs=3.0), 60.0).verdict == PASS
    assert judge.judge_metric("acc", 90.0, iv(-4.0), Tolerance(abs=3.0), 60.0).verdict == FAIL
    assert judge.judge_metric("acc", 90.0, iv(-3.0), Tolerance(abs=3.0), 60.0).verdict == INCONCLUSIVE
    v = judge.judge_metric("bleu", 0.3, iv(-0.2), Tolerance(abs=1.0), 5.0)
    assert v.verdict == INCONCLUSIVE and v.why.startswith(judge.NOT_CAPABLE) and judge.not_capable(v)
    assert judge.judge_metric("acc", None, iv(0), Tolerance(abs=3.0), None).verdict == INCONCLUSIVE
    assert judge.judge_metric("acc", 90.0, None, Tolerance(abs=3.0), None).verdict == INCONCLUSIVE


def test_a_verdict_keeps_its_interval_limit_and_n_and_says_why_in_one_line():
    v = judge.judge_metric("acc", 90.0, Interval(-1.0, -2.5, 0.5, 320), Tolerance(abs=3.0), 60.0)
    assert (v.verdict, v.lo, v.hi, v.n, v.limit, v.settle) == (PASS, -2.5, 0.5, 320, 3.0, None)
    assert v.why == "95% interval [-2.50, +0.50] (n=320) lies above -3.00"
    v = judge.judge_metric("acc", 90.0, Interval(-2.0, -4.0, 0.0, 100), Tolerance(abs=3.0), 60.0)
    assert v.settle == judge.Settle(400, PASS)
    assert v.why == ("95% interval [-4.00, +0.00] (n=100) straddles -3.00; at this effect size about 400 items "
                     "read would be needed to pass")
    # lower is better: the interval is turned so that a drop is negative
    v = judge.judge_metric("loss", 2.0, Interval(0.5, 0.4, 0.6, 10), Tolerance(abs=0.2), None, False)
    assert (v.verdict, v.lo, v.hi) == (FAIL, -0.6, -0.4)


def test_relative_tolerance_scales_with_baseline():
    assert judge.judge_metric("rougeL", 30.0, iv(-2.0, 0.5), Tolerance(rel=0.1), None).verdict == PASS
    assert judge.judge_metric("rougeL", 30.0, iv(-4.0, 0.5), Tolerance(rel=0.1), None).verdict == FAIL


def test_judge_rows_and_recommend_smallest_passing():
    rows = [row("fp16", w=1000, acc=90.0, bleu=1.0, rougeL=30.0),
            row("int8", w=500, acc=89.0, bleu=0.5, rougeL=29.0),
            row("int4", w=250, acc=80.0, bleu=0.9, rougeL=30.0),
            row("int8", kv="fp8", w=500, kvb=5, acc=88.5, bleu=0.2, rougeL=28.0)]
    rows = judged(rows, {r.variant: {"acc": iv(r.metrics["acc"] - 90.0), "bleu": iv(0.0),
                                     "rougeL": iv(r.metrics["rougeL"] - 30)} for r in rows[1:]})
    assert rows[2].judgement.overall == FAIL and verdicts(rows[2])["acc"] == FAIL
    assert verdicts(rows[1])["bleu"] == INCONCLUSIVE and rows[1].judgement.overall == PASS   # BLEU: not capable
    rec = recommend.recommend(rows, "m")
    assert rec.row.key == ("m", "int8", "fp8")          # same weights, fewer KV bytes
    assert "acc" in rec.why
    rec = recommend.recommend(rows, "m", allowed={("int8", "auto"), ("fp16", "auto")})
    assert rec.row.key == ("m", "int8", "auto")


def test_among_passing_variants_of_equal_memory_the_first_in_params_order_is_picked():
    """A published checkpoint listed before the pipeline's own of the same size is the one served."""
    rows = [row("fp16", w=1000, acc=90.0), row("pub-fp8", w=500, acc=90.0), row("fp8", w=500, acc=90.0),
            row("int4", w=250, acc=80.0)]
    rows = judged(rows, {r.variant: {"acc": iv(r.metrics["acc"] - 90.0)} for r in rows[1:]})
    rec = recommend.recommend(rows, "m")
    assert rec.row is rows[1]
    assert rec.why.startswith("the smallest in memory of the 2 variants passing in a row")
    assert "the sequence stops at `int4-auto` (fail)" in rec.why


def test_weights_a_kilobyte_apart_are_taken_in_params_order_not_stopped_at_the_larger():
    """The default run's case: fp8 W8A8 weighs 1,048 bytes more than int8 (scale tensors) and did not pass;
    int8, listed first in params.yaml, passed. Exact bytes put fp8 first and stopped the sequence there."""
    rows = [row("fp16", w=269_060_280, acc=90.0), row("fp16", kv="fp8", w=269_060_280, kvb=5, acc=90.0),
            row("int8", w=163_226_416, acc=90.0), row("fp8", w=163_227_464, acc=86.0),
            row("int8-bnb", w=162_861_696, acc=90.0)]
    rows = judged(rows, {r.variant: {"acc": iv(r.metrics["acc"] - 90.0)} for r in rows[1:]})
    rec = recommend.recommend(rows, "m")
    assert rec.row is rows[2]
    assert "the sequence stops at `fp8-auto` (fail), so `int8-bnb-auto` (passing beyond it)" in rec.why


def test_a_variant_cut_short_cannot_pass_on_the_tasks_it_finished():
    rows = [row("fp16", acc=90.0, rougeL=30.0),
            row("fp8", acc=90.0, reason="the time budget ended: lm-eval stopped after 240 s; not measured: summarization")]
    rows = judged(rows, {"fp8-auto": {"acc": iv(0.0)}})
    assert verdicts(rows[1])["acc"] == PASS
    v = rows[1].judgement.verdicts["rougeL"]
    # its task was never run: not inconclusive, and the why is the run's (a fixed-n read the budget cut)
    assert v.verdict == NOT_RUN and v.why.startswith("the time budget ended") and v.short == "budget"
    assert rows[1].judgement.overall == INCONCLUSIVE        # one pass, one not run: not passing, as before
    assert recommend.recommend(rows, "m").row is rows[0]


def test_a_variant_cut_before_its_first_look_is_not_measured_and_stops_the_sequence():
    """Issue 56: the budget ended before look 1. The row is "not measured (time budget)", not an engine's
    refusal: it keeps its place in the fixed sequence and stops it as an unjudged variant, where an
    unsupported one in the same place is skipped."""
    from pipeline.report.cells import status_cell

    why = "the time budget ended before its first look: lm-eval did not finish in the 174 s left"
    def rows_with(status):
        facts = [row("fp16", w=1000, acc=90.0), row("fp8", w=500, acc=90.0),
                 result_files.replaced(row("int4", w=250), status=status, reason=why), row("int2", w=100, acc=90.0)]
        return judged(facts, {"fp8-auto": {"acc": iv(0.0)}, "int2-auto": {"acc": iv(0.0)}})
    cut = rows_with("not measured")
    assert cut[2].judgement.overall == "not measured" and not cut[2].judgement.verdicts
    assert status_cell(cut[2]) == f"not measured (time budget): {why}"
    rec = recommend.recommend(cut, "m")
    assert rec.row is cut[1] and "the sequence stops at `int4-auto` (not measured)" in rec.why
    assert "`int2-auto` (passing beyond it) cannot be claimed" in rec.why
    refused = rows_with("unsupported")
    assert status_cell(refused[2]).startswith("unsupported here") and recommend.recommend(refused, "m").row is refused[3]


def test_wide_interval_blocks_a_pass():
    rows = judged([row("fp16", acc=90.0), row("int4", acc=90.0)], {"int4-auto": {"acc": Interval(0.0, -8.0, 8.0, 10)}})
    assert rows[1].judgement.overall == INCONCLUSIVE
    rec = recommend.recommend(rows, "m")
    assert rec.row is rows[0] and "baseline itself" in rec.why and "closest: `int4-auto`, inconclusive on acc" in rec.why
    assert recommend.recommend(rows, "m", allowed={("int4", "auto")}).row is None


def test_inconclusive_says_how_many_samples_would_settle_it():
    # delta -2, half-width 2 at n=100, tolerance 3: the half-width must shrink to 1 -> n x (2/1)^2
    v = judge.judge_metric("acc", 90.0, Interval(-2.0, -4.0, 0.0, 100), Tolerance(abs=3.0), None)
    assert v.verdict == INCONCLUSIVE and "about 400 items read would be needed to pass" in v.why
    v = judge.judge_metric("acc", 90.0, Interval(-4.0, -6.0, -2.0, 50), Tolerance(abs=3.0), None)
    assert v.verdict == INCONCLUSIVE and "about 200 samples would be needed to fail" not in v.why
    assert "about 200 items read would be needed to fail" in v.why and "pool" not in v.why
    settle = judge.samples_to_settle(-3.0, -5.0, -1.0, 3.0, 10)
    assert settle.samples is None and "no sample size" in settle.text()


def test_samples_to_settle_say_when_the_design_cannot_read_them_from_its_pool():
    """A stratified read takes at most 964 of a 1,280-item pool: 1,066 items read are beyond it, and
    the pool it would take is 1,066 x 1,280 / 964."""
    v = judge.judge_metric("acc", 90.0, Interval(-1.6, -3.1, -0.1, 964), Tolerance(abs=3.0), None,
                              reach=(964, 1280))
    assert v.settle.samples > 964 and v.settle.beyond()
    assert v.settle.pool_needed() == -(-v.settle.samples * 1280 // 964)
    assert f"more than this design reads (964 of the 1,280-item pool): a pool of about {v.settle.pool_needed():,}" in v.why
    assert "(more than the 964 this design reads" in v.settle.short()
    inside = judge.judge_metric("acc", 90.0, Interval(-1.6, -3.1, -0.1, 964), Tolerance(abs=3.0), None,
                                   reach=(5000, 6000))
    assert not inside.settle.beyond() and "pool" not in inside.why


def test_rows_from_other_backend_are_not_compared():
    rows = judged([row("fp16", acc=90.0), row("int8", backend="vllm", acc=90.0)], {"int8-auto": {"acc": iv(0.0)}})
    assert rows[1].judgement.verdicts["acc"] == judge.Verdict(INCONCLUSIVE, "no comparable baseline")
    assert rows[1].judgement.overall == INCONCLUSIVE


def test_rows_of_different_compute_dtypes_are_never_compared():
    # the vLLM fp16 baseline ran in float32, the int8 tier in bfloat16: the delta would mix bf16 with quantization
    rows = [row("fp16", backend="vllm", compute="float32", acc=90.0),
            row("int8", backend="vllm", compute="bfloat16", acc=90.0),
            row("int4", backend="vllm", compute="float32", acc=89.9)]
    facts = rows
    rows = judged(facts, {r.variant: {"acc": iv(0.0)} for r in facts[1:]})
    v = rows[1].judgement.verdicts["acc"]
    assert v.verdict == INCONCLUSIVE and v.why.startswith("no baseline at this compute dtype (bfloat16")
    assert "float32" in v.why and rows[1].judgement.overall == INCONCLUSIVE
    assert verdicts(rows[2])["acc"] == PASS                     # same dtype: compared as before
    keys = judge.baselines(facts, RULE)
    assert list(keys) == [judge.Pairing("m", "vllm", "float32")]


def test_each_compute_dtype_pairs_with_its_own_baseline():
    rows = [row("fp16", compute="float32", acc=90.0), row("int8", compute="float32", acc=89.0),
            row("fp16", kv="fp8", compute="bfloat16", acc=70.0),
            row("int8", kv="fp8", compute="bfloat16", acc=69.0)]
    rule = Decision(baseline=Baseline("fp16", "auto"), tolerances=RULE.tolerances)
    bases = judge.baselines(rows, rule)
    assert bases[judge.comparable(rows[1])] is rows[0]
    assert judge.deltas(rows[1], rows[0])["acc"] == pytest.approx(-1.0)
    # the bfloat16 rows have no bfloat16 baseline (fp16+auto ran in float32): never paired with it
    assert judge.comparable(rows[3]) not in bases
    judgedrows = judged(rows, rule=rule)
    assert judgedrows[3].judgement.verdicts["acc"].why.startswith("no baseline at this compute dtype")


def test_failed_rows_keep_status_and_nothing_passes():
    rows = judged([row("fp16", acc=50.0), result_files.measured("int4", status="failed", reason="boom")])
    assert rows[1].judgement.overall == "failed"
    rec = recommend.recommend(rows, "m")
    assert rec.row is rows[0] and "only variant that ran" in rec.why
    rows = judged([result_files.measured("fp16", status="failed", reason="boom"),
                   result_files.measured("int4", status="failed", reason="boom")])
    rec = recommend.recommend(rows, "m")
    assert (rec.row, rec.why, rec.walk.sequence, rec.walk.stopper) == (None, "no variant ran successfully", (), None)


def test_two_tasks_reporting_acc_are_judged_apart_and_a_task_tolerance_moves_only_its_own_verdict():
    def rows(tasks):
        base = result_files.measured("fp16", backend="reference",
                                     metrics={"sentiment/acc": 90.0, "topic/acc": 70.0})
        tier = result_files.measured("int4", backend="reference",
                                     metrics={"sentiment/acc": 86.0, "topic/acc": 69.0})
        assert judge.deltas(tier, base) == {"sentiment/acc": -4.0, "topic/acc": -1.0}   # nothing overwritten
        return judged([base, tier], {"int4-auto": {"sentiment/acc": iv(-4.0), "topic/acc": iv(-1.0)}}, tasks=tasks)

    cls = {"config": "c.yaml", "data": "d.jsonl", "kind": "classify", "labels": ["a", "b"]}
    plain = {"sentiment": Task(**cls), "topic": Task(**cls)}
    r = rows(plain)
    assert verdicts(r[1]) == {"sentiment/acc": FAIL, "topic/acc": PASS}
    assert judge.task_verdicts(r[1].judgement.verdicts) == {"sentiment": FAIL, "topic": PASS}

    lenient = {"sentiment": Task(**cls, tolerances={"acc": Tolerance(abs=5.0)}), "topic": Task(**cls)}
    assert verdicts(rows(lenient)[1]) == {"sentiment/acc": PASS, "topic/acc": PASS}

    floor = {"sentiment": Task(**cls), "topic": Task(**cls, min_baseline={"acc": 75.0})}
    r = rows(floor)
    assert r[1].judgement.verdicts["topic/acc"].why.startswith(judge.NOT_CAPABLE)
    assert verdicts(r[1])["sentiment/acc"] == FAIL


def test_direction_comes_from_the_row():
    base = result_files.measured("fp16", metrics={"lm/loss": 2.0}, higher_is_better={"lm/loss": False})
    tier = result_files.measured("int4", metrics={"lm/loss": 2.5}, higher_is_better={"lm/loss": False})
    rule = Decision(baseline=Baseline("fp16", "auto"), tolerances={"loss": Tolerance(abs=0.2)})
    ivs = {"int4-auto": {"lm/loss": iv(0.5, 0.1)}}
    assert verdicts(judged([base, tier], ivs, rule)[1])["lm/loss"] == FAIL   # a rise in lower-is-better is a drop
    tier = result_files.replaced(tier, higher_is_better={"lm/loss": True})
    assert verdicts(judged([base, tier], ivs, rule)[1])["lm/loss"] == PASS


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


def test_a_verdict_the_second_arithmetic_did_not_read_is_unchecked_and_never_a_pass():
    base = row("fp16", acc=90.0)
    skipped = result_files.replaced(row("int8", acc=90.0), arithmetic_check=ArithmeticCheck(
        "not needed", "the variant cannot pass"))
    no_second = result_files.replaced(row("int4", w=50, acc=90.0), arithmetic_check=ArithmeticCheck("impossible", "this backend has no second arithmetic"))
    rows = judged([base, skipped, no_second], {"int8-auto": {"acc": iv(0.0)}, "int4-auto": {"acc": iv(0.0)}})
    v = rows[1].judgement.verdicts["acc"]
    assert (v.verdict, v.unchecked) == (INCONCLUSIVE, PASS) and v.why.startswith("unchecked pass")
    assert rows[1].judgement.overall == INCONCLUSIVE
    # a backend with no second arithmetic at all: nothing was skipped, the verdict stands
    assert rows[2].judgement.overall == PASS
    failed = result_files.replaced(row("int8", acc=80.0), arithmetic_check=ArithmeticCheck("not needed"))
    (_, f) = judged([base, failed], {"int8-auto": {"acc": iv(-10.0)}})
    assert f.judgement.overall == INCONCLUSIVE and f.judgement.verdicts["acc"].unchecked == FAIL


def test_the_pick_stops_at_the_first_larger_candidate_that_does_not_pass():
    rows = [row("fp16", w=1000, acc=90.0), row("fp16", kv="fp8", w=1000, kvb=5, acc=80.0),
            row("int8", w=500, acc=90.0)]
    rows = judged(rows, {"fp16-fp8": {"acc": iv(-10.0)}, "int8-auto": {"acc": iv(0.0)}})
    rec = recommend.recommend(rows, "m")
    assert rec.row is rows[0] and "`fp16-fp8`" in rec.why and "fixed sequence" in rec.why
    rec = recommend.recommend(rows, "m", allowed={("fp16", "auto"), ("int8", "auto")})
    assert rec.row.key == ("m", "int8", "auto") and "family-wise" in rec.why


def test_a_held_variant_stops_the_sequence_where_it_stands():
    """A KV mode barred on the run's data (the long-context KL) is held as not passing in its place: the
    sequence stops there, as at any non-pass, and never walks past it to a smaller variant (removing it
    from the candidates would: the choice to remove depends on the data, and the family-wise error with it)."""
    rows = [row("fp16", w=1000, acc=90.0), row("fp16", kv="fp8", w=1000, kvb=5, acc=90.0),
            row("int8", w=500, acc=90.0)]
    rows = judged(rows, {"fp16-fp8": {"acc": iv(0.0)}, "int8-auto": {"acc": iv(0.0)}})
    assert recommend.recommend(rows, "m").row.key == ("m", "int8", "auto")
    rec = recommend.recommend(rows, "m", held={("fp16", "fp8")})
    assert rec.row is rows[0] and "held" in rec.why and "`fp16-fp8`" in rec.why
    # the GPU filter is known before any verdict: removing what a GPU cannot serve is the sequence's own
    assert recommend.recommend(rows, "m", allowed={("fp16", "auto"), ("int8", "auto")}).row is rows[2]


def test_closest_names_no_metric_list_when_every_metric_is_not_capable():
    rows = [row("fp16", w=1000, bleu=1.0), row("int8", w=500, bleu=0.9)]
    rows = judged(rows, {"int8-auto": {"bleu": iv(-0.1)}})
    rec = recommend.recommend(rows, "m")
    assert rec.row is rows[0] and "inconclusive on ." not in rec.why and "closest" not in rec.why


def test_a_gated_metric_whose_task_was_never_run_is_not_run_and_passes_nothing():
    """Issue 60: a task a variant never ran is not "inconclusive" (there is no evidence either way): its
    metrics' state is "not run" with evaluate's why, its task's too; the variant, every metric it ran
    passing, still does not pass, so the pick stays the baseline as before."""
    facts = [row("fp16", w=1000, **{"c/acc": 90.0, "s/rougeL": 30.0}),
             result_files.replaced(row("int8", w=500, **{"c/acc": 90.0}), not_run={"s": "cannot pass"})]
    rows = judged(facts, {"int8-auto": {"c/acc": iv(0.0)}})
    v = rows[1].judgement.verdicts["s/rougeL"]
    assert (v.verdict, v.why, v.short, v.text()) == (NOT_RUN, "the variant could no longer pass", "moot",
                                                     "not run (the variant could no longer pass)")
    assert judge.task_verdicts(rows[1].judgement.verdicts) == {"s": NOT_RUN, "c": PASS}
    assert rows[1].judgement.overall == INCONCLUSIVE and recommend.recommend(rows, "m").row is rows[0]
    # no record of why the score is missing: inconclusive, not measured, as before
    bare = judged([facts[0], row("int8", w=500, **{"c/acc": 90.0})], {"int8-auto": {"c/acc": iv(0.0)}})[1]
    assert bare.judgement.verdicts["s/rougeL"].verdict == INCONCLUSIVE
    # nothing gated ran at all: the row is not run, and passes nothing either
    assert judge.overall({"s/rougeL": v}) == NOT_RUN
