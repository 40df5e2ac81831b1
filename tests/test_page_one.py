"""Page 1 of decision.md (pipeline/report/page_one.py): on one screen, every sentence from the data."""
import dataclasses

from pipeline.report import markdown, page_one
from pipeline.report.cells import task_cell
from pipeline.scoring.pick import recommend
from tests import result_files
from tests.test_report import HEADER, model_report, rows


def page1() -> str:
    rs = rows()
    best = recommend.recommend(rs, "m")
    head = dataclasses.replace(HEADER, commit="abc1234", lock="0123456789ab")
    md = markdown.render({"m": model_report(rs, best.row, best.why, "vllm serve x --quantization y")}, head)
    return md.split("\n## ", 1)[0]


def table(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("|---")]


def test_page_one_fits_a_screen():
    lines = page1().splitlines()
    assert len(lines) <= page_one.MAX_LINES and max(len(line) for line in lines) <= page_one.WIDTH


def test_page_one_states_the_run_the_baseline_recovery_and_the_caveats():
    p = page1()
    assert "Run: commit abc1234, dvc.lock sources 0123456789ab; measured on" in p
    assert "Baseline `fp16` + KV `auto`: classification Accuracy 90.0" in p
    assert "it cannot do translation (below decision.min_baseline)" in p
    assert "Pass means: classification Accuracy at most 3.0 points below baseline (160 samples at most)" in p
    assert ("Weights: 258.0 MiB for the baseline, 100.0 MiB for the pick (-61%); KV cache 23,040 -> 11,520 "
            "bytes/token (-50%).") in " ".join(p.split())
    assert "Caveats: measured on a CPU" not in p and "the quantized KV cache is simulated" in " ".join(p.split())
    int4 = next(r for r in table(p) if r[:2] == ["int4", "fp8"])
    # the interval at its own confidence, then recovery (89 / 90) in its labelled column
    assert int4[3:5] == ["pass -1.0 [-2.0,+0.0] at 95%", "99%"]


def test_the_summary_table_has_no_constant_column_and_no_report_only_or_not_capable_task():
    head, *body = table(page1())
    assert head == ["Tier", "KV", "Verdict", "classification", "recovery", "Weights MiB"]
    for i, name in enumerate(head):
        assert len({r[i] for r in body}) > 1, name


def test_the_committed_decision_md_s_page_one_fits_a_screen():
    """The real run's page 1 (results/decision.md, committed with dvc.lock), not only the fixture's."""
    from pipeline import paths
    page = (paths.RESULTS / "decision.md").read_text(encoding="utf-8").split("\n## ", 1)[0].splitlines()
    assert len(page) <= page_one.MAX_LINES and max(len(line) for line in page) <= page_one.WIDTH


def test_a_task_a_failed_variant_did_not_run_says_why_not_not_measured():
    from pipeline.scoring.verdict.rows import Evidence
    from pipeline.scoring.estimators.stats import Interval
    from tests.test_report import facts, judged

    base = facts("fp16", "auto", metrics={"classification/acc": 90.0, "other/acc": 80.0})
    failed = facts("int4", "auto", metrics={"classification/acc": 60.0}, stopped="stopped at look 1 of 4",
                   not_run={"other": "the variant failed"})
    ev = Evidence({"classification/acc": -30.0}, {"classification/acc": Interval(-30.0, -34.0, -26.0, 160)})
    rs = judged([base, failed], [None, ev])
    m = model_report(rs)
    assert task_cell(rs[1], "other", None, interval=True) == "not run (failed)"
    assert task_cell(rs[1], "classification", None, interval=True).startswith("FAIL -30.0 [-34.0,-26.0]")
    unsaid = judged([base, result_files.replaced(failed, stopped=None, not_run={})], [None, ev])[1]
    assert task_cell(unsaid, "other", None, interval=True) == "inconclusive (not measured)"


def close_rows(int8_interval, int4_interval):
    """The baseline, int8 (larger, first in the sequence) and int4 with the given accuracy intervals
    (delta, lo, hi); the margin is 3.0 points, n 160."""
    from pipeline.scoring.verdict.rows import Evidence
    from pipeline.scoring.estimators.stats import Interval
    from tests.test_report import facts, judged

    mk = lambda tier, mib_: facts(tier, "auto", metrics={"classification/acc": 90.0}, weight_bytes=2**20 * mib_,
                                  kv_bytes_per_token=23040)
    ev = lambda d, lo, hi: Evidence({"classification/acc": d}, {"classification/acc": Interval(d, lo, hi, 160)})
    return judged([mk("fp16", 258), mk("int8", 150), mk("int4", 100)], [None, ev(*int8_interval), ev(*int4_interval)])


def test_a_look_s_interval_shows_its_own_confidence_and_flips_have_their_own_column():
    from pipeline.scoring.estimators.stats import Flips

    rs = close_rows((-1.0, -2.0, 0.0), (-9.0, -12.0, -6.0))
    looked = dataclasses.replace(rs[1].judgement.verdicts["classification/acc"], confidence=0.9817)
    rs[1] = dataclasses.replace(rs[1], judgement=dataclasses.replace(
        rs[1].judgement, verdicts={"classification/acc": looked}))
    m = dataclasses.replace(model_report(rs, rs[1]), flips={"int8-auto": {"classification": Flips(5, 4, 160)}})
    head, base, int8, _ = table("\n".join(page_one.table(m, rs[0], ["classification"])))
    assert head == ["Tier", "KV", "Verdict", "classification", "recovery", "flips", "Weights MiB"]
    assert int8 == ["int8", "auto", "pass", "pass -1.0 [-2.0,+0.0] at 98.2%", "100%", "5.6%", "150.0"]
    assert base == ["fp16", "auto", "baseline", "Accuracy 90.0", "–", "–", "258.0"]


def picked(rs):
    """The model's report with the recommendation read from its one walk (scoring/pick/walk.py)."""
    return dataclasses.replace(model_report(rs), recommendation=recommend.recommend(rs, "m"))


def test_a_sequence_stopping_within_half_a_point_of_the_margin_is_a_close_call_on_page_one():
    from pipeline.report import close_call

    # int8 misses the -3.0 margin by 0.10: the baseline is picked, and page 1 says how close it was
    rs = close_rows((-1.6, -3.1, -0.1), (-1.0, -2.0, 0.0))
    m = picked(rs)
    assert m.recommendation.row is rs[0] and close_call.stop_of(m) is rs[1]
    assert close_call.lines(m) == [
        "Close call (within 0.5 point of a margin): `int8-auto` stops the sequence (inconclusive): classification "
        "Accuracy lower bound -3.10 at 95%, 0.10 from the -3.00 margin; to settle: about 184 samples at the observed "
        "effect, more than the 160 classification holds: a larger set."]
    md = markdown.render({"m": m}, HEADER).split("\n## ", 1)[0]
    assert "Close call (within 0.5 point of a margin): `int8-auto` stops the sequence" in " ".join(md.split())
    # the pick itself clears its margin by 0.30; the candidate after it fails far from it: only the pick is named
    rs = close_rows((-1.0, -2.7, 0.7), (-9.0, -12.0, -6.0))
    m = picked(rs)
    assert close_call.lines(m) == [
        "Close call (within 0.5 point of a margin): the pick `int8-auto` clears classification Accuracy by 0.30 (-2.70 "
        "at 95%; settled at its confidence, but another arithmetic may land on the other side)."]
    # a fail 0.4 under the margin stops the sequence: close; 1.0 under it: not
    rs = close_rows((-5.0, -7.0, -3.4), (-1.0, -2.0, 0.0))
    assert ("`int8-auto` stops the sequence (fail): classification Accuracy upper bound -3.40 at 95%, 0.40 from the "
            "-3.00 margin; to settle: settled at its confidence") in \
        close_call.lines(picked(rs))[0]
    rs = close_rows((-5.0, -7.0, -4.0), (-1.0, -2.0, 0.0))
    assert close_call.lines(picked(rs)) == []
    assert "Close call" not in markdown.render({"m": picked(rs)}, HEADER)
