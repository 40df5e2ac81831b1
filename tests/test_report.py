from pipeline import decision, report
from pipeline.config import Baseline, Decision, Tolerance
from pipeline.decision import Row


def rows():
    r = [Row("m", "fp16", "auto", "ok", backend="reference", metrics={"acc": 90.0, "bleu": 0.3},
             weight_bytes=2**20 * 258, kv_bytes_per_token=23040, tokens_per_s=50.0),
         Row("m", "int4", "fp8", "ok", backend="reference", metrics={"acc": 89.0, "bleu": 0.2},
             weight_bytes=2**20 * 100, kv_bytes_per_token=11520, tokens_per_s=48.0),
         Row("m", "int8", "fp8", "unsupported", reason="FP8 KV cache on CPU requires AVX-512")]
    for x in r:
        x.extra["scheme"] = x.tier
    decision.judge(r, Decision(Baseline("fp16", "auto"), {"acc": Tolerance(abs=3.0), "bleu": Tolerance(abs=1.0)},
                               {"bleu": 5.0}))
    return r


def test_render_has_every_row_reason_and_command():
    rs = rows()
    best, why = decision.recommend(rs, "m")
    md = report.render({"m": {"rows": rs, "recommended": best, "why": why, "command": "vllm serve x",
                              "source": "embedded:x", "num_samples": {"classification": 160}}},
                       ("fp16", "auto"), ["a note"], {"generated": "now", "hardware": "cpu"})
    table = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + 3
    assert "**Recommended: `int4` with KV cache `fp8`**" in md
    assert "```bash\nvllm serve x\n```" in md
    assert "unsupported: FP8 KV cache on CPU requires AVX-512" in md
    assert "0.2 (-0.1, inconclusive)" in md and "89.0 (-1.0, pass)" in md
    assert "90.0 (baseline)" in md
    assert "- a note" in md


def test_render_without_recommendation_says_why():
    rs = rows()[:1]
    md = report.render({"m": {"rows": rs, "recommended": None, "why": "no variant passes", "command": None,
                              "source": "s", "num_samples": {}}}, ("fp16", "auto"), [],
                       {"generated": "now", "hardware": "cpu"})
    assert "**No tier can be recommended**: no variant passes." in md
