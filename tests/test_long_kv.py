"""The KV cache judged by position (pipeline/scoring/verdict/long_kv.py) on hand-made long_context records: the
pairing with the tier's baseline-KV row, the bucket verdicts, "non-inferior up to", and the error rate
of a bucket's pass simulated at the tolerance."""
import dataclasses

import numpy as np
import pytest

from pipeline.domain.result.facts import LongContext, PerText
from pipeline.scoring.verdict import long_kv
from pipeline.scoring.verdict.long_kv import FAIL, INCONCLUSIVE, PASS
from pipeline.scoring.verdict.rows import Measured
from tests import result_files

pytestmark = pytest.mark.unit

EDGES = [0, 512, 1024, 2048, 4096]


def record(per_text_kl: list[list[float | None]], status: str = "ok") -> LongContext:
    return LongContext(status, edges=EDGES, per_text=PerText(per_text_kl, [[None] * len(t) for t in per_text_kl]),
                       texts=len(per_text_kl))


def row(tier, kv, per_text_kl=None, status="ok", lc_status="ok") -> Measured:
    return result_files.measured(tier, kv, status, backend="reference", compute_dtype="float32",
                                 long_context=None if per_text_kl is None else record(per_text_kl, lc_status))


def test_a_kv_mode_is_paired_text_by_text_with_its_tier_under_the_baseline_kv():
    auto = row("int8", "auto", [[0.010, 0.011, 0.012, 0.013], [0.020, 0.021, 0.022, 0.023], [0.015] * 4])
    # +0.001 in the first two buckets, then +0.003 / +0.06 (the cache drifts with length)
    fp8 = row("int8", "fp8", [[0.011, 0.012, 0.015, 0.073], [0.021, 0.022, 0.025, 0.083], [0.016, 0.016, 0.018, 0.075]])
    (f,) = long_kv.judge([row("fp16", "auto"), auto, fp8], "auto", "fp16", tolerance=0.02)
    assert (f.tier, f.kv, f.against) == ("int8", "fp8", "auto")
    assert [b.increase for b in f.buckets] == pytest.approx([0.001, 0.001, 0.003, 0.06], abs=1e-9)
    assert [b.verdict for b in f.buckets] == [PASS, PASS, PASS, FAIL]
    assert f.up_to == 2048 and f.length == 4096
    assert f.sentence() == "fp8 KV on int8: non-inferior up to 2,048 tokens; fail at 2,048-4,096"


def test_the_baseline_tier_s_kv_mode_is_its_own_kl_and_a_wide_bucket_is_inconclusive():
    fp8 = row("fp16", "fp8", [[0.005, 0.006, 0.001, 0.002], [0.006, 0.005, 0.03, 0.04], [0.005, 0.005, 0.002, 0.001]])
    (f,) = long_kv.judge([row("fp16", "auto"), fp8], "auto", "fp16", tolerance=0.02)
    assert f.against == "" and f.buckets[0].increase == pytest.approx(0.005333, abs=1e-5)
    assert [b.verdict for b in f.buckets][:2] == [PASS, PASS] and f.buckets[2].verdict == INCONCLUSIVE
    assert f.sentence() == "fp8 KV on fp16: non-inferior up to 1,024 tokens; inconclusive at 1,024-2,048"
    all_pass = row("fp16", "fp8", [[0.005] * 4, [0.006] * 4, [0.0055] * 4])
    (g,) = long_kv.judge([all_pass], "auto", "fp16", tolerance=0.02)
    assert g.up_to == 4096 and g.sentence() == "fp8 KV on fp16: non-inferior up to 4,096 tokens (every bucket within the tolerance)"


def test_rows_without_a_measured_pair_are_not_judged():
    fp8 = row("int8", "fp8", [[0.01] * 4] * 3)
    assert long_kv.judge([fp8], "auto", "fp16", 0.02) == []                                   # no int8 + auto
    assert long_kv.judge([row("int8", "auto", [[0.01] * 4] * 3, lc_status="skipped"), fp8], "auto", "fp16", 0.02) == []
    assert long_kv.judge([row("int8", "fp8", [[0.01] * 4] * 3, lc_status="unsupported")], "auto", "fp16", 0.02) == []
    # a text that does not reach a bucket leaves it to the others; a bucket no text reaches is inconclusive
    short = row("fp16", "fp8", [[0.005, 0.005, None, None], [0.005, 0.006, 0.004, None], [0.004, 0.005, None, None]])
    (f,) = long_kv.judge([short], "auto", "fp16", 0.02)
    assert [b.texts for b in f.buckets] == [3, 3, 1, 0]
    assert [b.verdict for b in f.buckets] == [PASS, PASS, INCONCLUSIVE, INCONCLUSIVE] and f.up_to == 1024


def simulate_pass_rate(true_increase: float, texts: int, sims: int, seed: int, z_instead_of_t: bool = False,
                       sd: float = 0.01) -> float:
    """Share of simulated buckets that pass when each text's KL increase is true_increase + N(0, sd)."""
    rng = np.random.default_rng(seed)
    passes = 0
    for _ in range(sims):
        d = true_increase + sd * rng.standard_normal(texts)
        if z_instead_of_t:
            hi = d.mean() + 1.959964 * d.std(ddof=1) / np.sqrt(texts)
            passes += hi <= 0.02
            continue
        fp8 = row("fp16", "fp8", [[v] * 4 for v in d])
        passes += long_kv.judge([fp8], "auto", "fp16", 0.02)[0].buckets[0].verdict == PASS
    return passes / sims


def test_simulated_a_bucket_at_the_tolerance_passes_at_most_alpha_and_a_normal_interval_would_not():
    sims = 4000
    se = np.sqrt(0.025 * 0.975 / sims)
    at_margin = simulate_pass_rate(0.02, texts=3, sims=sims, seed=1)
    assert at_margin <= 0.025 + 2.5 * se, at_margin                 # one side of a 95% t interval
    # with 3 texts the normal quantile in place of Student's t passes far more often than alpha
    assert simulate_pass_rate(0.02, texts=3, sims=sims, seed=1, z_instead_of_t=True) > 0.025 + 4 * se
    # a cache that adds nothing: with 3 texts, a per-text spread of half the tolerance passes about half
    # the time (t = 4.30 at 2 degrees of freedom), a quarter of it nearly always
    assert 0.35 < simulate_pass_rate(0.0, texts=3, sims=1000, seed=2) < 0.65
    assert simulate_pass_rate(0.0, texts=3, sims=1000, seed=2, sd=0.005) > 0.9


def test_a_target_gpu_is_not_recommended_a_kv_mode_not_shown_up_to_its_max_model_len():
    rows = [row("fp16", "auto"), row("fp16", "fp8", [[0.005] * 4, [0.006] * 4, [0.0055] * 4]),
            row("int8", "auto", [[0.01] * 4] * 3), row("int8", "fp8", [[0.011, 0.011, 0.011, 0.09]] * 2 + [[0.012, 0.012, 0.012, 0.08]]),
            row("nf4", "fp8", [[0.3] * 4] * 3, lc_status="skipped")]
    found = long_kv.judge(rows, "auto", "fp16", 0.02)
    assert {(f.tier, f.kv): f.up_to for f in found} == {("fp16", "fp8"): 4096, ("int8", "fp8"): 2048}
    assert long_kv.barred(rows, found, "auto", 4096) == {("int8", "fp8"), ("nf4", "fp8")}
    assert long_kv.barred(rows, found, "auto", 2048) == {("nf4", "fp8")}
    # planned beyond what the probe read: no quantized KV mode was shown there
    assert long_kv.barred(rows, found, "auto", 8192) == {("fp16", "fp8"), ("int8", "fp8"), ("nf4", "fp8")}
    # unless the model cannot serve more than the probe read: vLLM caps max_model_len at the model's context
    capped = [result_files.replaced(r, long_context=dataclasses.replace(r.long_context, model_context=4096))
              if r.long_context else r
              for r in rows]
    assert long_kv.planned_length(capped, 8192) == 4096
    assert long_kv.barred(capped, found, "auto", 8192) == {("int8", "fp8"), ("nf4", "fp8")}
