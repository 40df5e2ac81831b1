"""decision.md's looks lines (pipeline/report/looks.py) from hand-built rows: settled counts, samples
read against a fixed-n run, the evaluate seconds against a fixed-n run's at each variant's own cost per sample."""
from dataclasses import replace

from pipeline.domain.result.records import SampleCounts, TaskLooks, TaskSpend, parse
from pipeline.report import looks
from pipeline.scoring.verdict.rows import Evidence
from pipeline.scoring.estimators.stats import Interval
from tests import result_files
from tests.test_report import judged, model_report


def measured(tier, acc, n, seconds, computing, stopped=None, settled=None):
    """`settled`: the verdict evaluate recorded for acc at the last look read (decide reads it)."""
    at = {"acc": {"verdict": settled, "look": n // 160, "n": n, "delta": 0.0, "lo": 0.0, "hi": 0.0,
                  "confidence": 0.95}} if settled else {}
    lk = {"classification": parse(TaskLooks, {"cap": 640, "sizes": [160, 320, 480, 640], "looks": n // 160, "of": 4,
                                              "n": n, "settled": at}, "looks.classification")}
    return result_files.measured(tier, scheme=tier, hardware="fp16", backend="reference", compute_dtype="float32",
                                 metrics={"classification/acc": acc}, stopped=stopped,
                                 looks=lk if tier != "fp16" else {}, seconds=seconds,
                                 sample_cache=spent({"classification": (n, computing)}))


def spent(tasks: dict[str, tuple[int, float]]) -> SampleCounts:
    """result.json's sample_cache: task -> (samples computed, seconds computing them)."""
    return SampleCounts(tasks={t: TaskSpend(n, s) for t, (n, s) in tasks.items()})


def report():
    found = [measured("fp16", 90.0, 640, 300.0, 240.0), measured("int8", 89.9, 320, 250.0, 200.0, settled="pass"),
             measured("int4", 60.0, 160, 60.0, 40.0, stopped="stopped at look 1 of 4 of classification",
                      settled="fail")]
    ev = [None, Evidence({"classification/acc": -0.1}, {"classification/acc": Interval(-0.1, -1.0, 0.8, 320)}),
          Evidence({"classification/acc": -30.0}, {"classification/acc": Interval(-30.0, -34.0, -26.0, 160)})]
    return replace(model_report(judged(found, ev)), num_samples={"classification": 640})


def test_the_summary_counts_settled_variants_and_samples_and_the_cost_line_the_seconds():
    (line, blank) = looks.summary_line(report())
    assert blank == ""
    assert line.startswith("Looks: 2 of 2 variants settled (pass or fail); together they read 480 of the 1,280 "
                           "samples a fixed-n run at the same caps reads (38%); 1 stopped at the look")
    assert " min" not in line                       # timings are speed.md's (report/speed.py)
    # int8: 250 s + 320 unread x its 0.625 s a sample = 450 s; int4: 60 s + 480 x 0.25 s = 180 s
    assert "took 5.2 min against about 10.5 min at fixed n (49%; each variant's unread samples" in looks.cost_line(
        report())[0]


def test_a_task_a_variant_never_ran_costs_the_baseline_s_rate_times_its_speed_ratio():
    r = report()
    base, int4 = r.rows[0], r.rows[2]
    base = replace(base, facts=result_files.replaced(base.facts, sample_cache=spent(
        {"classification": (640, 240.0), "summarization": (64, 64.0)})))
    # int4 computes classification at 0.25 s a sample against the baseline's 0.375: ratio 2/3
    caps = {"classification": 640, "summarization": 64}
    assert looks.fixed_n_seconds(int4, base, caps) == 60.0 + 480 * 0.25 + 64 * 1.0 * (2 / 3)
    # without the baseline's cost of summarization there is nothing to scale: no estimate
    assert looks.fixed_n_seconds(int4, r.rows[0], caps) is None


def test_samples_read_from_the_cache_give_no_seconds_claim():
    r = report()
    r.rows[1] = replace(r.rows[1], facts=result_files.replaced(r.rows[1].facts, sample_cache=spent({})))
    line = looks.cost_line(r)[0]
    assert "min at fixed n" not in line and "not estimable here" in line


def test_no_seconds_claim_without_every_stage_time():
    r = report()
    r.rows[1] = replace(r.rows[1], facts=result_files.replaced(r.rows[1].facts, seconds=None))
    assert "min at fixed n" not in looks.cost_line(r)[0]


def test_the_table_names_each_variant_s_stopping_look():
    lines = looks.looks_lines(report())
    assert "| int4-auto | 1/4: 160 of 640 | 160 of 640 | 160 | stopped at look 1 of 4 of classification |" in lines
    assert "| int8-auto | 2/4: 320 of 640 | 320 of 640 | 320 |  |" in lines


def test_the_phases_line_sums_where_the_evaluate_seconds_went():
    r = report()
    assert "Of the" not in looks.cost_line(r)[0]          # no row recorded its phases: no claim
    phased = {"load": 6.0, "tasks": 120.0, "fidelity": 12.0, "long_context": 90.0, "throughput": 2.0}
    r.rows[1] = replace(r.rows[1], facts=result_files.replaced(r.rows[1].facts, phases=phased))          # 250 s in all
    r.rows[2] = replace(r.rows[2], facts=result_files.replaced(r.rows[2].facts, phases={"load": 6.0, "tasks": 30.0}))  # 60 s
    line = looks.cost_line(r)[0]
    # 310 s in all; tasks 150 s = 2.5 min; the rest 310 - 266 = 44 s
    assert line.endswith(" Of the 5.2 min of 2 evaluate stages: loading 0.2 min, the tasks 2.5 min, fidelity 0.2 min, "
                         "long context 1.5 min, the load test 0.0 min, process start and writing 0.7 min.")


def test_a_variant_that_could_no_longer_pass_is_counted_and_its_row_says_what_it_did_not_run():
    r = report()
    why = {"retrieval_1024": "cannot pass"}
    r.rows[1] = replace(r.rows[1], facts=result_files.replaced(r.rows[1].facts, not_run=why))
    assert ("1 stopped at the look where a gated metric failed; 1 could no longer pass (a gated metric open at "
            "its cap) and did not run their remaining tasks (*Looks*).") in looks.summary_line(r)[0]
    assert ("| int8-auto | 2/4: 320 of 640 | 320 of 640 | 320 | not run: retrieval_1024 (cannot pass: a gated metric "
            "open at its cap or unstable) |") in looks.looks_lines(r)
    assert "could no longer pass" not in looks.summary_line(report())[0]


def test_a_variant_the_time_budget_ended_says_at_which_look_and_what_it_did_not_run():
    """The budget's cut is read from evaluate's record (the looks it flagged, the tasks it left), not
    from a reason string: the row says where, and an unstarted task reads "not run (the time budget ended)"."""
    from pipeline.report.cells import task_cell

    r = report()
    f = r.rows[1].facts
    cut = {"classification": replace(f.looks["classification"], budget=True)}
    r.rows[1] = replace(r.rows[1], facts=result_files.replaced(f, looks=cut, not_run={"retrieval_1024": "time budget"}))
    want = "stopped by the time budget at look 2 of 4 of classification; not run: retrieval_1024"
    assert r.rows[1].facts.budget_cut() == want and r.rows[2].facts.budget_cut() is None
    assert f"| int8-auto | 2/4: 320 of 640 | 320 of 640 | 320 | {want} |" in looks.looks_lines(r)
    assert "; 1 read at the last look completed when the time budget ran out" in looks.summary_line(r)[0]
    assert "could no longer pass" not in looks.summary_line(r)[0]
    assert task_cell(r.rows[1], "retrieval_1024", None) == "not run (the time budget ended)"
    assert task_cell(r.rows[1], "summarization", None) == "not measured"


def test_a_stratified_task_is_counted_against_the_same_looks_unstratified_and_fixed_n():
    """int8 read 200 of 640 at look 2 in strata, where the same looks unstratified read 320: the
    summary, the table and the seconds say both (its 0.625 s a sample: 120 more unstratified)."""
    r = report()
    f = r.rows[1].facts
    strat = {"classification": parse(TaskLooks, {
        "cap": 640, "looks": 2, "of": 4, "n": 200, "sizes": [100, 200, 300, 400],
        "strata": {"below": 0.5, "share": 0.25, "pool": [320, 320], "reads": [[80, 20], [160, 40], [240, 60], [320, 80]],
                   "plain": [160, 320, 480, 640]}}, "looks.classification")}
    r.rows[1] = replace(r.rows[1], facts=result_files.replaced(f, looks=strat, sample_cache=spent({"classification": (200, 125.0)})))
    assert looks.plain_reads(r.rows[1]) == {"classification": 320}
    line = looks.summary_line(r)[0]
    assert ("together they read 360 of the 1,280 samples a fixed-n run at the same caps reads (28%), and 480 the "
            "same looks unstratified would have (75%; eval.sequential.strata)") in line
    assert "| int8-auto | 2/4: 200 of 640 | 200 of 640 | 320 |  |" in looks.looks_lines(r)
    # int8: 250 s + 440 x 0.625 s at fixed n (525), + 120 x 0.625 unstratified (325); int4: 180 and 60
    cost = looks.cost_line(r)[0]
    assert "took 5.2 min against about 11.8 min at fixed n (44%, about 6.4 min in the same looks unstratified;" in cost
