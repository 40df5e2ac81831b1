"""A choice task's stratified looks through the look runner (pipeline/evaluation/stratified.py,
looks_runner.py) on fake lm-eval runs: which items each look reads, the rows' tags, the record, and the
stratified interval the verdict is read on."""
from dataclasses import replace
import random

import pytest

from pipeline.domain.sets.sample_row import partial as row
from pipeline.domain.sets import looks
from pipeline.domain.sets.task_rows import TaskResult
from pipeline.domain.sets.tasks import TaskSpec
from pipeline.evaluation import stratified
from pipeline.evaluation.looks_runner import Gate, run_looks
from pipeline.schema import Eval, Sequential, Strata
from pipeline.scoring.estimators import analysis

CONFIDENCE = 0.95
EV = Eval(tasks={}, sequential=Sequential(strata=Strata(below=0.5, share=0.25)))


def spec(cap=400):
    s = TaskSpec("c", "classify", {}, "c", cap, {"acc": True}, pool=cap)
    return looks.in_look_order([s], 7, {"c": "c.jsonl"})[0]


def margin(d):
    return 0.1 if d % 2 == 0 else 2.0         # even items barely decided: the low stratum


def base_rows(s, correct):
    return [row(doc_id=d, gold=1, pred=int(correct[d]), logliks=[-1.0 - margin(d), -1.0],
             scores={"acc": 100.0 * correct[d]}) for d in s.docs]


def fake_run(correct, calls):
    def run(session, specs, ev):
        (t,) = specs
        calls.append(list(t.docs))
        rows = [row(doc_id=d, gold=1, pred=int(correct[d]), logliks=[0.0, 0.0],
                 scores={"acc": 100.0 * correct[d]}) for d in t.docs]
        return {t.name: TaskResult({}, rows, dict(t.higher_is_better))}, {t.name: rows}
    return run


def test_the_plan_reads_every_low_margin_item_and_a_share_of_the_rest():
    s = spec()
    plan = stratified.plan(s, base_rows(s, {d: True for d in range(400)}), EV)
    assert plan.pool == (200, 200) and plan.reads[-1] == [200, 50] and plan.sizes == [63, 125, 188, 250]
    first = plan.spec.docs[:63]
    assert sum(plan.stratum[d] for d in first) == 13         # look 1: 50 of the low, 13 of the high
    low = [d for d in s.docs if margin(d) < 0.5]
    assert [d for d in plan.spec.docs if plan.stratum[d] == 0] == low      # the seeded order, within each
    assert stratified.plan(s, base_rows(s, {d: True for d in range(400)}), Eval(tasks={}, sequential=Sequential())) is None
    no_ll = [replace(r, logliks=None) for r in base_rows(s, {d: True for d in range(400)})]
    assert stratified.plan(s, no_ll, EV) is None
    tagged = plan.tag([row(doc_id=0), row(doc_id=1)])
    assert tagged == [row(doc_id=0, stratum=0, strata=[200, 200]), row(doc_id=1, stratum=1, strata=[200, 200])]


def test_an_unchanged_variant_passes_on_fewer_items_with_a_stratified_interval():
    s = spec()
    rng = random.Random(0)
    same = {d: rng.random() < 0.9 for d in range(400)}
    calls: list = []
    done = run_looks(None, [s], EV, {"c": base_rows(s, same)}, {"c/acc": Gate(6.0)}, CONFIDENCE, run=fake_run(same, calls))
    rec = done.record["c"]
    assert rec.settled["acc"].verdict == "pass"
    assert rec.strata.pool == [200, 200] and rec.strata.plain == [100, 200, 300, 400]
    assert rec.n == rec.sizes[rec.looks - 1] < rec.strata.plain[rec.looks - 1]
    assert all(r.stratum is not None for r in done.samples["c"])
    iv = analysis.intervals(["acc"], analysis.align(base_rows(s, same), done.samples["c"], subset=True), CONFIDENCE)["acc"]
    assert iv.effective_n is not None and iv.n == rec.n and iv.delta == 0.0


def test_the_stratified_delta_weights_each_stratum_by_its_share_of_the_pool():
    s = spec()
    base = {d: True for d in range(400)}
    tier = {d: not (margin(d) < 0.5 and d % 10 == 0) for d in range(400)}     # 40 low items lost: -10 points
    calls: list = []
    done = run_looks(None, [s], EV, {"c": base_rows(s, base)}, {"c/acc": Gate(3.0)}, CONFIDENCE, run=fake_run(tier, calls))
    rec = done.record["c"]
    assert rec.settled["acc"].verdict == "fail"
    pairs = analysis.align(base_rows(s, base), done.samples["c"], subset=True)
    iv = analysis.intervals(["acc"], pairs, CONFIDENCE)["acc"]
    low = [t for _, t in pairs if t.stratum == 0]
    lost_low = sum(1 for t in low if t.scores["acc"] == 0.0)
    assert iv.delta == pytest.approx(-100.0 * 0.5 * lost_low / len(low))
    assert done.metrics["c"].metrics["acc"] == pytest.approx(100.0 + iv.delta)


def test_the_record_keeps_the_look_order_so_each_look_s_read_is_its_prefix():
    """decide reads a verdict's flips, ties and regressions from the documents of the look it settled at
    (records.TaskLooks.read): each look's prefix of the recorded order is its stratified sample."""
    from dataclasses import replace

    from pipeline.domain.result.records import Settled

    s = spec()
    rng = random.Random(0)
    same = {d: rng.random() < 0.9 for d in range(400)}
    calls: list = []
    rec = run_looks(None, [s], EV, {"c": base_rows(s, same)}, {"c/acc": Gate(0.5)}, CONFIDENCE,
                    run=fake_run(same, calls)).record["c"]
    assert rec.looks == 4 and rec.order == [d for look in calls for d in look]     # every look's new items
    lk = rec
    at = Settled("pass", 1, rec.sizes[0], 0.0, -1.0, 1.0, 0.999)
    first = lk.read(at)
    assert first == set(calls[0]) and sorted(margin(d) < 0.5 for d in first).count(True) == rec.strata.reads[0][0]
    assert lk.read(None) is None and lk.read(Settled("pass", 4, rec.n, 0.0, -1.0, 1.0, 0.95)) is None
    assert replace(rec, order=None).read(at) is None   # older result
