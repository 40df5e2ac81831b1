"""pipeline/report/kv_repaired.py: a repaired KV mode's row shows the layers kept, the KL before and
after, the bytes per token and its verdict; the ranking note names the costliest layers first."""
from pipeline.report import kv_repaired, markdown
from pipeline.scoring.verdict.rows import Evidence
from pipeline.scoring.estimators.stats import Interval
from tests.test_report import HEADER, facts, judged, model_report

RECORD = {"status": "ok", "skip_layers": [0, 7], "kept": 2, "layers": 30, "met_bound": True, "bound": 0.01,
          "stopped": "bisection converged: 2 layers kept meet the bound, 1 do not",
          "tried": {"0": 0.0712, "30": 0.0, "15": 0.001, "2": 0.0081, "1": 0.02},
          "ranking": [[7, 0.031], [0, 0.012], [3, 0.004]] + [[i, 0.0001] for i in range(8, 20)],
          "bytes_per_token": {"auto": 23040, "nvfp4": 6480, "repaired": 7576}, "cache_dtype": "nvfp4",
          "data": "calibration", "texts": 8, "positions": 3000, "compute_dtype": "bfloat16", "seconds": 61.0}


def test_the_section_shows_the_layers_kept_their_cost_and_the_verdict():
    found = [facts("fp16", "auto", metrics={"classification/acc": 90.0}),
             facts("fp16", "nvfp4-r", metrics={"classification/acc": 89.5}, kv_repair=RECORD, kv_skip_layers=(0, 7))]
    ev = [None, Evidence({"classification/acc": -0.5}, {"classification/acc": Interval(-0.5, -1.5, 0.5, 1280)}, {})]
    m = model_report(judged(found, ev))
    lines = kv_repaired.kv_repaired_lines(m)
    row = next(x for x in lines if x.startswith("| fp16-nvfp4-r"))
    assert "| pass |" in row and "2 of 30: 0, 7" in row and "0.0712 -> 0.0081 (0.01)" in row
    assert "6,480 -> 7,576 (23,040)" in row and "5 candidates; bisection converged" in row
    note = next(x for x in lines if x.startswith("`fp16-nvfp4-r`"))
    assert note.startswith("`fp16-nvfp4-r` (nvfp4): layers by KL alone, costliest first: 7 (0.0310), 0 (0.0120), 3 (0.0040)")
    assert note.count("(0.0001)") == kv_repaired.TOP - 3
    assert "### Repaired KV modes (layers kept in the model's dtype)" in markdown.details(m, HEADER)
    assert kv_repaired.kv_repaired_lines(model_report(judged(found[:1], ev[:1]))) == []
