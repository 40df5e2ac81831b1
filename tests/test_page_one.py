"""Page 1 of decision.md (pipeline/report/page_one.py): on one screen, every sentence from the data."""
import dataclasses

from pipeline.report import markdown, page_one
from pipeline.scoring import decision
from tests.test_report import HEADER, model_report, rows


def page1() -> str:
    rs = rows()
    best = decision.recommend(rs, "m")
    head = dataclasses.replace(HEADER, commit="abc1234", lock="0123456789ab")
    md = markdown.render({"m": model_report(rs, best.row, best.why, "vllm serve x --quantization y")}, head)
    return md.split("\n## ", 1)[0]


def table(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("|---")]


def test_page_one_fits_a_screen():
    lines = page1().splitlines()
    assert len(lines) <= 40 and max(len(line) for line in lines) <= page_one.WIDTH


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
    assert int4[3] == "pass -1.0 [-2.0,+0.0] 99%"          # recovery 89 / 90


def test_the_summary_table_has_no_constant_column_and_no_report_only_or_not_capable_task():
    head, *body = table(page1())
    assert head == ["Tier", "KV", "Verdict", "classification", "Weights MiB"]
    for i, name in enumerate(head):
        assert len({r[i] for r in body}) > 1, name


def test_the_committed_decision_md_s_page_one_fits_a_screen():
    """The real run's page 1 (results/decision.md, committed with dvc.lock), not only the fixture's."""
    from pipeline import paths
    page = (paths.RESULTS / "decision.md").read_text(encoding="utf-8").split("\n## ", 1)[0].splitlines()
    assert len(page) <= 40 and max(len(line) for line in page) <= page_one.WIDTH


def test_a_task_a_failed_variant_did_not_run_says_why_not_not_measured():
    from pipeline.scoring.rows import Evidence
    from pipeline.scoring.stats import Interval
    from tests.test_report import facts, judged

    base = facts("fp16", "auto", metrics={"classification/acc": 90.0, "other/acc": 80.0})
    failed = facts("int4", "auto", metrics={"classification/acc": 60.0}, stopped="stopped at look 1 of 4",
                   not_run={"other": "the variant failed"})
    ev = Evidence({"classification/acc": -30.0}, {"classification/acc": Interval(-30.0, -34.0, -26.0, 160)})
    rs = judged([base, failed], [None, ev])
    m = model_report(rs)
    assert page_one.cell(m, rs[1], rs[0], "other") == "not run: the variant failed"
    assert page_one.cell(m, rs[1], rs[0], "classification").startswith("FAIL -30.0 [-34.0,-26.0]")
    unsaid = dataclasses.replace(rs[1], facts=dataclasses.replace(rs[1].facts, not_run={}))
    assert page_one.cell(m, unsaid, rs[0], "other") == "inconclusive (not measured)"
