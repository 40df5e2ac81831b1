from pipeline.report import render as report
from pipeline.schema import Baseline, Bootstrap, Decision, Tolerance
from pipeline.scoring import decision, planner
from pipeline.scoring.decision import Row, RowInfo
from pipeline.scoring.power import Power
from pipeline.scoring.stats import Interval

HEADER = report.Header(generated="now", hardware="cpu", baseline=("fp16", "auto"), bootstrap=Bootstrap(),
                       budget=planner.Budget(), gpus={"A100-80G": planner.Gpu("A100-80G", 80, 2039, 8.0)},
                       hardware_docs="0.15.1")


def rows():
    r = [Row("m", "fp16", "auto", "ok", backend="reference", compute_dtype="float32", metrics={"acc": 90.0, "bleu": 0.3},
             weight_bytes=2**20 * 258, kv_bytes_per_token=23040, tokens_per_s=50.0),
         Row("m", "int4", "fp8", "ok", backend="reference", compute_dtype="float32", metrics={"acc": 89.0, "bleu": 0.2},
             weight_bytes=2**20 * 100, kv_bytes_per_token=11520, tokens_per_s=48.0),
         Row("m", "int8", "fp8", "unsupported", reason="FP8 KV cache on CPU requires AVX-512")]
    r[1].intervals = {"acc": Interval(-1.0, -2.0, 0.0, 160), "bleu": Interval(-0.1, -0.3, 0.1, 40)}
    r[1].power = {"acc": Power(10.0, 160, 2.2, 88)}
    for x in r:
        x.info = RowInfo(scheme=x.tier, hardware="fp16" if x.tier == "fp16" else "int4-w4a16")
    decision.judge(r, Decision(Baseline("fp16", "auto"), {"acc": Tolerance(abs=3.0), "bleu": Tolerance(abs=1.0)},
                               {"bleu": 5.0}))
    return r


def model_report(rs, rec=None, why="", command=None):
    return report.ModelReport(name="m", source="embedded:x", rows=rs, recommended=rec, why=why, command=command,
                              num_samples={"classification": 160})


def test_render_has_every_row_reason_and_command():
    rs = rows()
    best, why = decision.recommend(rs, "m")
    md = report.render({"m": model_report(rs, best, why, "vllm serve x")}, HEADER)
    prefixes = ("| fp16 | auto |", "| int4 | fp8 |", "| int8 | fp8 |")
    assert [next(p for p in prefixes if line.startswith(p)) for line in md.splitlines()
            if line.startswith(prefixes)] == list(prefixes)
    assert "**Recommended: `int4` with KV cache `fp8`**" in md
    assert "```bash\nvllm serve x\n```" in md
    assert "unsupported here: FP8 KV cache on CPU requires AVX-512" in md
    assert "0.2 (-0.1 [-0.3, +0.1], inconclusive)" in md and "89.0 (-1.0 [-2.0, +0.0], pass)" in md
    assert "90.0 (baseline)" in md
    head = next(line for line in md.splitlines() if line.startswith("| Tier |")).split(" | ")
    first = next(line for line in md.splitlines() if line.startswith("| fp16 | auto |")).split(" | ")
    assert head[-3:-1] == ["Backend", "Compute"] and first[-3:-1] == ["reference", "float32"]
    assert "- **int4-fp8** → pass" in md and "\n  - power: Accuracy SD 10.0, n=160, MDD 2.2, n80 88\n" in md
    data = report.decision_json({"m": model_report(rs, best, why, "vllm serve x")}, HEADER)
    assert data["rows"][1]["power"] == {"acc": {"sd": 10.0, "n": 160, "mdd": 2.2, "n_for_80pct_power": 88}}
    assert data["rows"][0]["power"] == {} and data["rows"][0]["compute_dtype"] == "float32"


def test_render_without_recommendation_says_why():
    md = report.render({"m": model_report(rows()[:1], None, "no variant passes")}, HEADER)
    assert "**No tier can be recommended**: no variant passes." in md


def test_hardware_table_lists_target_gpus():
    lines = report.hardware_table(model_report(rows()), HEADER.gpus)
    assert any("int4" in x and "A100-80G (SM >= 8)" in x for x in lines)
