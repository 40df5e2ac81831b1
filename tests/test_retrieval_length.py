"""Retrieval accuracy against length (pipeline/scoring/verdict/retrieval_length.py) and its section of decision.md
(pipeline/report/retrieval.py), on synthetic rows: no model."""
from pipeline.domain.sets.sample_row import partial as sample
from pipeline.domain.sets import retrieval
from pipeline.report.retrieval import retrieval_lines
from pipeline.scoring.verdict import retrieval_length as rl
from pipeline.scoring.verdict.judge import NOT_CAPABLE
from pipeline.scoring.verdict.rows import Evidence, Judgement, Row, Verdict
from tests import result_files


def suite_rows(n: int, tokens: int) -> list:
    samples = retrieval.suite(["passkey", "niah_single"], [tokens], [0.5], n, 3, lambda s: len(s.split()))
    # as task_rows.sample_row keeps them: the id, and only the fields the task's templates read
    return [sample(id=s.id, input={"prompt": s.prompt, "answer": s.answer}, output=s.answer,
                   scores={"exact_match": 100.0}) for s in samples]


def test_lengths_are_the_tasks_whose_samples_are_the_suites_shortest_first():
    samples = {"retrieval_2048": suite_rows(2, 2048), "retrieval_1024": suite_rows(2, 1024),
               "summarization": [sample(id="s0", input={"document": "text", "summary": "t"})],
               # a user's task that happens to have a `task` field is not the suite's
               "mine": [sample(id="m0", input={"task": "qa", "target_tokens": 10})],
               "empty": []}
    assert rl.lengths(samples) == [rl.Length("retrieval_1024", 1024), rl.Length("retrieval_2048", 2048)]


def row(tier, kv, overall, metrics, verdicts=None, deltas=None, status="ok"):
    return Row(result_files.measured(tier, kv, status, metrics=metrics), Evidence(deltas=deltas or {}),
               Judgement(overall, verdicts or {}))


L1, L2, L4 = rl.Length("r1", 1024), rl.Length("r2", 2048), rl.Length("r4", 4096)


def test_each_length_shows_accuracy_delta_and_verdict_and_up_to_stops_at_the_first_non_pass():
    base = row("fp16", "auto", "baseline", {"r1/exact_match": 100.0, "r2/exact_match": 90.0, "r4/exact_match": 20.0})
    kv8 = row("fp16", "fp8", "inconclusive",
              {"r1/exact_match": 100.0, "r2/exact_match": 80.0, "r4/exact_match": 10.0},
              {"r1/exact_match": Verdict("pass"), "r2/exact_match": Verdict("inconclusive"),
               "r4/exact_match": Verdict("inconclusive", note=f"{NOT_CAPABLE}: baseline 20.0 < 50.0")},
              {"r1/exact_match": 0.0, "r2/exact_match": -10.0, "r4/exact_match": -10.0})
    stopped = row("int4", "auto", "fail", {"c/acc": 50.0}, {"c/acc": Verdict("fail")})
    broken = row("int8", "auto", "failed", {}, status="failed")
    table = rl.table([kv8, stopped, base, broken], [L1, L2, L4])
    assert [e.variant for e in table] == ["fp16-auto", "fp16-fp8", "int4-auto"]     # baseline first; failed left out
    by = {e.variant: e for e in table}
    assert [c.verdict for _, c in by["fp16-auto"].cells] == ["baseline"] * 3
    assert [(c.accuracy, c.delta, c.verdict) for _, c in by["fp16-fp8"].cells] == [
        (100.0, 0.0, "pass"), (80.0, -10.0, "inconclusive"), (10.0, -10.0, rl.NOT_CAPABLE)]
    assert by["fp16-fp8"].up_to == 1024
    assert by["fp16-fp8"].sentence() == "fp16 + fp8 KV: retrieval non-inferior up to 1,024 tokens; inconclusive at 2,048"
    assert [c.verdict for _, c in by["int4-auto"].cells] == [rl.NOT_MEASURED] * 3
    assert by["int4-auto"].up_to is None
    assert by["int4-auto"].sentence() == ("int4 + auto KV: retrieval not shown non-inferior at any length; "
                                          "not measured at 1,024")


def test_a_length_the_baseline_cannot_do_is_named_so():
    v = row("int8", "fp8", "pass", {"r1/exact_match": 100.0, "r4/exact_match": 0.0},
            {"r1/exact_match": Verdict("pass"), "r4/exact_match": Verdict("inconclusive", note=f"{NOT_CAPABLE}: x")},
            {"r1/exact_match": 0.0, "r4/exact_match": 0.0})
    (e,) = rl.table([v], [L1, L4])
    assert e.up_to == 1024 and e.sentence().endswith("; the baseline cannot do it at 4,096")
    (only,) = rl.table([row("int8", "fp8", "pass", {"r1/exact_match": 100.0}, {"r1/exact_match": Verdict("pass")})],
                       [L1])
    assert only.sentence() == "int8 + fp8 KV: retrieval non-inferior up to 1,024 tokens"


def test_a_length_without_a_tolerance_is_measured_and_shown_as_report_only():
    """decide judges only metrics with a tolerance: a measured length with no verdict is report only, with
    its accuracy and interval, never "not measured" and never counted as non-inferior."""
    from pipeline.report.retrieval import cell_text
    from pipeline.scoring.estimators.stats import Interval

    v = Row(result_files.measured("int8", "fp8", metrics={"r1/exact_match": 100.0, "r4/exact_match": 66.7}),
            Evidence(deltas={"r1/exact_match": 0.0, "r4/exact_match": -33.3},
                     intervals={"r4/exact_match": Interval(-33.3, -79.2, 12.1, 3)}),
            Judgement("pass", {}))
    (e,) = rl.table([v], [L1, L4])
    assert [c.verdict for _, c in e.cells] == [rl.REPORT_ONLY] * 2 and e.up_to is None
    assert e.cells[1][1].interval == (-79.2, 12.1)
    assert cell_text(e.cells[1][1]) == "66.7% (-33.3 [-79.2, +12.1]) report only"
    assert e.sentence() == ("int8 + fp8 KV: retrieval 100% at 1,024, 67% at 4,096 tokens "
                            "(report only: no tolerance judges it)")


def test_a_length_not_run_because_the_variant_cannot_pass_says_so():
    """eval.sequential.probes: passable leaves the suite out on a variant with a gated metric open at its
    cap: its cells say why, not "not measured"; a length it did run keeps its number."""
    from pipeline.report.cells import task_cell

    why = {"r1": "cannot pass", "r4": "cannot pass"}
    v = Row(result_files.measured("int8", metrics={"c/acc": 90.0}, not_run=why), Evidence(),
            Judgement("inconclusive", {"c/acc": Verdict("inconclusive")}))
    (e,) = rl.table([v], [L1, L4])
    assert [c.verdict for _, c in e.cells] == ["not run (the variant could no longer pass)"] * 2
    assert e.sentence() == "int8 + auto KV: retrieval not run (the variant could no longer pass)"
    assert task_cell(v, "r1", None) == "not run (the variant could no longer pass)"
    assert task_cell(v, "r2", None) == "not measured"
    some = Row(result_files.measured("int8", metrics={"r1/exact_match": 100.0},
                        not_run={"r4": "time budget"}), Evidence(deltas={"r1/exact_match": 0.0}),
               Judgement("inconclusive", {}))
    (e,) = rl.table([some], [L1, L4])
    assert [c.verdict for _, c in e.cells] == [rl.REPORT_ONLY, "not run (the time budget ended)"]


def test_no_retrieval_task_no_section_and_the_section_has_every_variant():
    assert rl.table([row("fp16", "auto", "baseline", {})], []) == []

    class M:
        name = "m"
        retrieval = rl.table([row("fp16", "auto", "baseline", {"r1/exact_match": 90.0}),
                              row("int8", "fp8", "pass", {"r1/exact_match": 85.0}, {"r1/exact_match": Verdict("pass")},
                                  {"r1/exact_match": -5.0})], [L1])

    md = "\n".join(retrieval_lines(M))
    assert "| fp16-auto | 90.0% | baseline |" in md
    assert "| int8-fp8 | 85.0% (-5.0) pass | 1,024 |" in md
    assert "- int8 + fp8 KV: retrieval non-inferior up to 1,024 tokens" in md
    assert "plots/m-retrieval_by_length.png" in md
    M.retrieval = []
    assert retrieval_lines(M) == []
    assert rl.as_json(rl.table([row("int8", "fp8", "pass", {"r1/exact_match": 85.0},
                                    {"r1/exact_match": Verdict("pass")}, {"r1/exact_match": -5.0})], [L1])) == [
        {"variant": "int8-fp8", "tier": "int8", "kv": "fp8", "up_to": 1024,
         "lengths": [{"task": "r1", "tokens": 1024, "accuracy": 85.0, "delta": -5.0, "interval": None,
                      "verdict": "pass"}]}]
