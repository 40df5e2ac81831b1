"""decision.md's looks lines (pipeline/report/looks.py) from hand-built rows: settled counts, samples
read against a fixed-n run, the evaluate seconds against one baseline stage per variant."""
from dataclasses import replace

from pipeline.report import looks
from pipeline.scoring.rows import Evidence, Measured
from pipeline.scoring.stats import Interval
from tests.test_report import judged, model_report


def measured(tier, acc, n, seconds, stopped=None):
    lk = {"classification": {"cap": 640, "sizes": [160, 320, 480, 640], "looks": n // 160, "of": 4, "n": n}}
    return Measured("m", tier, "auto", "ok", scheme=tier, hardware="fp16", backend="reference",
                    compute_dtype="float32", metrics={"classification/acc": acc}, reason=stopped,
                    looks=lk if tier != "fp16" else {}, seconds=seconds)


def report():
    found = [measured("fp16", 90.0, 640, 300.0), measured("int8", 89.9, 320, 120.0),
             measured("int4", 60.0, 160, 30.0, stopped="stopped at look 1 of 4 of classification")]
    ev = [None, Evidence({"classification/acc": -0.1}, {"classification/acc": Interval(-0.1, -1.0, 0.8, 320)}),
          Evidence({"classification/acc": -30.0}, {"classification/acc": Interval(-30.0, -34.0, -26.0, 160)})]
    return replace(model_report(judged(found, ev)), num_samples={"classification": 640})


def test_the_summary_counts_settled_variants_samples_and_seconds():
    (line, blank) = looks.summary_line(report())
    assert blank == ""
    assert line.startswith("Looks: 2 of 2 variants settled (pass or fail); together they read 480 of the 1,280 "
                           "samples a fixed-n run at the same caps reads (38%); 1 stopped at the look")
    # 150 s of evaluate against 2 x the baseline's 300 s
    assert "took 2.5 min against about 10.0 min at fixed n (2 x the baseline's 300 s; 25%" in line


def test_no_seconds_claim_without_every_stage_time():
    r = report()
    r.rows[1] = replace(r.rows[1], facts=replace(r.rows[1].facts, seconds=None))
    assert "min at fixed n" not in looks.summary_line(r)[0]


def test_the_table_names_each_variant_s_stopping_look():
    lines = looks.looks_lines(report())
    assert "| int4-auto | 1/4: 160 of 640 | 160 of 640 | stopped at look 1 of 4 of classification |" in lines
    assert "| int8-auto | 2/4: 320 of 640 | 320 of 640 |  |" in lines
