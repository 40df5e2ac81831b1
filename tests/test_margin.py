"""The non-inferiority rule has one home (scoring/verdict/margin.py): evaluate's looks, decide's verdicts, the
KV cache by length and both error-rate replays call it, so changing it moves all of them (a second copy
anywhere would not); decide reads a verdict evaluate settled and never judges it again.

    .venv/bin/python -m pytest -n 0 -q tests/test_margin.py
"""
import numpy as np
import pytest

from pipeline.domain.sets import sample_row
from tests.test_decide import project  # noqa: F401 - the fixture

from pipeline.evaluation import looks_runner
from pipeline.schema import Tolerance
from pipeline.scoring.verdict import judge, margin
from pipeline.scoring.simulation import replay, replay_strata
from pipeline.scoring.estimators.stats import Interval


def test_the_rule():
    assert margin.verdict(-2.9, 1.0, 3.0) == margin.PASS
    assert margin.verdict(-3.0, 1.0, 3.0) == margin.PASS          # at the margin: within it, no slack either way
    assert margin.verdict(-5.0, -3.1, 3.0) == margin.FAIL
    assert margin.verdict(-3.5, 0.5, 3.0) == margin.OPEN
    assert margin.verdict(-3.0 - 1e-12, 1.0, 3.0) == margin.OPEN   # no private slack


def _stricter(lo, m):
    """A rule that passes nothing: every caller must see it."""
    return lo >= np.inf


def _everyone(monkeypatch=None):
    iv = Interval(-0.5, -1.0, 0.0, 400)
    looked = looks_runner.settle({"acc": iv}, {"acc": looks_runner.Gate(3.0, True)})
    judged = judge.judge_metric("acc", 90.0, iv, Tolerance(abs=3.0), None).verdict
    rng = np.random.default_rng(0)
    base = rng.choice([0.0, 100.0], 400, p=[0.2, 0.8])
    tier = np.where(rng.random(400) < 0.05, 100.0 - base, base)
    sim = {r.name: r.value for r in replay.rates(replay.Population.of(base, tier, "binary"), [0.5, 1.0], 400, 0.95, 3.0,
                                                 sims=200)}
    items = replay_strata.Items.of(rng.integers(0, 2, 400), base, tier)
    strat = {r.name: r.value for r in replay_strata.rates(items, [0.5, 1.0], 400, 0.95, 3.0, 0.5, sims=200)
             ["unstratified"]}
    return looked.get("acc"), judged, sim["power"], strat["power"]


def test_changing_the_rule_moves_evaluate_decide_and_both_simulators(monkeypatch):
    looked, judged, power, strat_power = _everyone()
    assert (looked, judged) == (margin.PASS, margin.PASS) and power > 0.5 and strat_power > 0.5
    monkeypatch.setattr(margin, "passes", _stricter)
    looked, judged, power, strat_power = _everyone()
    assert looked is None and judged == margin.OPEN and power == 0.0 and strat_power == 0.0


REAL = margin.verdict


def _contrary(lo, hi, m):
    """Another rule: what the real one passes fails, what it fails passes, and an interval it leaves open
    settles against the side its middle lies on, so no verdict, settled at a look or not, ends as it did."""
    found = REAL(lo, hi, m)
    if found == margin.OPEN:
        return margin.FAIL if (lo + hi) / 2 >= -m else margin.PASS
    return margin.FAIL if found == margin.PASS else margin.PASS


def _evaluate():
    """Each compared variant's classification read in looks by evaluate's own runner (its verdicts settled
    there) and written as its result.json (tests/result_files.py); translation stays a fixed-n read
    (decide judges it); fp16-fp8 gets a long-context record (the KV bar)."""
    import json

    from pipeline import io, paths
    from pipeline.domain.sets import looks
    from pipeline.domain.sets.task_rows import TaskResult
    from pipeline.domain.sets.tasks import TaskSpec
    from pipeline.schema import Eval, Sequential
    from tests import result_files
    from tests.test_decide import samples
    from tests.test_report_long import record

    spec = looks.in_look_order([TaskSpec("classification", "classify", {}, "classification", 200, {"acc": True},
                                         pool=200)], 7, {"classification": "c.jsonl"})[0]
    base = [sample_row.of(r, "base") for r in samples("classification", 200, lambda i: True)]
    for tier, kv in (("fp16", "fp8"), ("int8", "auto"), ("int4-gptq", "auto"), ("int4-gptq", "fp8"),
                     ("nf4-bnb", "auto"), ("nf4-bnb", "fp8")):
        folder = paths.eval_dir("m", tier, kv)
        rows = {r.doc_id: r for r in sample_row.read(folder / "samples/classification.jsonl")}

        def run(session, specs, ev, rows=rows):
            (s,) = specs
            got = [rows[d] for d in s.docs]
            return {s.name: TaskResult({}, got, {"acc": True})}, {s.name: got}

        done = looks_runner.run_looks(None, [spec], Eval(tasks={}, sequential=Sequential()), {"classification": base},
                                      {"classification/acc": looks_runner.Gate(3.0)},
                                      0.95, run=run)
        sample_row.write(folder / "samples/classification.jsonl", done.samples["classification"])
        res = {k: v for k, v in json.loads((folder / "result.json").read_text()).items()
               if k not in ("schema_version", "kind")}
        res.update(looks=done.record, stopped=done.stopped)
        if (tier, kv) == ("fp16", "fp8"):
            res["long_context"] = record([[0.004, 0.005], [0.005, 0.006], [0.0045, 0.0055]])
        io.atomic_write_json(folder / "result.json", result_files.variant(**res))


def _page() -> dict:
    """Every verdict on the page decide writes: each metric's, and each KV-cache bucket's."""
    import json

    from pipeline.stages import decide

    decide.main()
    data = json.loads(open("results/decision.json").read())
    found = {(r["tier"], r["kv"], mid): v["verdict"] for r in data["rows"] for mid, v in r["verdicts"].items()}
    found.update({(f["tier"], f["kv"], f"KV bucket {b['lo']}"): b["verdict"]
                  for f in data["long_context"]["m"]["kv"] for b in f["buckets"]})
    return found


def test_changing_the_rule_moves_every_verdict_on_the_page_the_kv_bar_included(project, monkeypatch):
    _evaluate()
    before = _page()
    assert {"pass", "fail", "inconclusive"} <= set(before.values())
    assert ("fp16", "fp8", "KV bucket 0") in before and ("int4-gptq", "auto", "classification/acc") in before
    monkeypatch.setattr(margin, "verdict", _contrary)
    _evaluate()
    after = _page()
    assert after.keys() == before.keys()
    assert [k for k in before if after[k] == before[k]] == []


def test_decide_reads_the_verdict_evaluate_settled_and_judges_it_nowhere_else(project, monkeypatch):
    """The rule changed after evaluate ran: the verdicts its looks settled stay as they were read (decide
    does not judge them again); what decide judges itself (a fixed-n read, the KV bar) moves."""
    _evaluate()
    before = _page()
    monkeypatch.setattr(margin, "verdict", _contrary)
    after = _page()
    moved = {k for k in before if after[k] != before[k]}
    looked = {k for k in before if k[2] == "classification/acc"}
    assert looked and not looked & moved and moved == before.keys() - looked
