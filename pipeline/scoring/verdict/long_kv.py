"""The KV cache judged by position (eval.long_context, issue 21): for each tier, what a quantized KV mode
adds to the tier's next-token KL against the baseline, per position bucket, paired by text with the same
tier under the baseline's KV mode. Pure: result.json's `long_context` records in, verdicts out.

    found = long_kv.judge(rows, baseline_kv="auto", baseline_tier="fp16", tolerance=0.02)

Per bucket and text, the increase is KL(variant) - KL(same tier, baseline KV) of the text's mean over
the bucket's positions (the baseline tier's own KL is 0 by definition); its interval is Student's t over
texts (pipeline/scoring/estimators/positions.py: texts, not positions, are the independent unit). A bucket is
`pass` when the upper bound is at most the tolerance, `fail` when the lower bound is above it, else
`inconclusive`: a one-sided test at (1 - confidence) / 2 per side, by the task verdicts' own rule
(margin.verdict, on the increase turned so that higher is better). "Non-inferior up to L tokens" needs
every bucket up to L to pass: an intersection-union test, so the claim keeps that level without a
multiplicity correction (Berger 1982). Simulated in tests/test_long_kv.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.scoring.estimators.positions import t_interval
from pipeline.scoring.verdict import margin
from pipeline.scoring.verdict.rows import Measured

PASS, FAIL, INCONCLUSIVE = margin.PASS, margin.FAIL, margin.OPEN


@dataclass(frozen=True)
class KvBucket:
    lo: int
    hi: int
    texts: int
    increase: float | None          # mean over texts of the KL increase, nats/token
    ci: tuple[float, float] | None
    verdict: str


@dataclass(frozen=True)
class LongKv:
    model: str
    tier: str
    kv: str
    against: str                    # the KV mode it is paired with (the baseline's)
    buckets: list[KvBucket]
    up_to: int                      # tokens up to which every bucket passes (0: not even the first)
    length: int                     # the probe's last position (the last bucket's end)

    def sentence(self) -> str:
        """E.g. 'fp8 KV: non-inferior up to 4,096 tokens' or '... up to 1,024; inconclusive at 2,048'."""
        head = f"{self.kv} KV on {self.tier}"
        if self.up_to >= self.length:
            return f"{head}: non-inferior up to {self.length:,} tokens (every bucket within the tolerance)"
        first_open = next(b for b in self.buckets if b.verdict != PASS)
        where = f"{first_open.verdict} at {first_open.lo:,}-{first_open.hi:,}"
        if self.up_to == 0:
            return f"{head}: not shown non-inferior at any length ({where})"
        return f"{head}: non-inferior up to {self.up_to:,} tokens; {where}"


def bucket_verdict(ci: tuple[float, float] | None, tolerance: float) -> str:
    """The task verdicts' rule (margin.verdict) on the KL increase turned so that higher is better: pass
    when its upper bound is at most the tolerance, fail when its lower bound is above it."""
    if ci is None:
        return INCONCLUSIVE
    return margin.verdict(-ci[1], -ci[0], tolerance)


def increases(mine: list[list[float | None]], ref: list[list[float | None]] | None, b: int) -> list[float]:
    """Per text, the variant's bucket-b KL mean minus the reference's (0 for the baseline tier)."""
    out = []
    for i, row in enumerate(mine):
        theirs = 0.0 if ref is None else ref[i][b]
        if row[b] is not None and theirs is not None:
            out.append(row[b] - theirs)
    return out


def pair(r: Measured, ref: Measured | None, tolerance: float, confidence: float) -> LongKv:
    """`ref`: the same tier under the baseline's KV mode; None when r's tier is the baseline's."""
    mine = per_text_kl(r)
    theirs = None if ref is None else per_text_kl(ref)
    edges = r.long_context.edges
    buckets = []
    for b in range(len(edges) - 1):
        diffs = increases(mine, theirs, b)
        mean, lo, hi = t_interval(diffs, confidence) if diffs else (None, None, None)
        ci = None if lo is None else (lo, hi)
        buckets.append(KvBucket(edges[b], edges[b + 1], len(diffs), mean, ci, bucket_verdict(ci, tolerance)))
    up_to = 0
    for kb in buckets:
        if kb.verdict != PASS:
            break
        up_to = kb.hi
    return LongKv(r.model, r.tier, r.kv, ref.kv if ref is not None else "", buckets, up_to, edges[-1])


def measured(r: Measured) -> bool:
    return r.status == "ok" and r.long_context is not None and r.long_context.measured


def per_text_kl(r: Measured) -> list[list[float | None]]:
    """A measured row's per text per bucket mean KL."""
    if r.long_context is None or r.long_context.per_text is None:
        raise ValueError(f"{r.model}/{r.tier}-{r.kv}: long_context has no per-text means")
    return r.long_context.per_text.kl


def judge(rows: list[Measured], baseline_kv: str, baseline_tier: str, tolerance: float,
          confidence: float = 0.95) -> list[LongKv]:
    """One LongKv per measured row with a KV mode other than the baseline's, whose tier's baseline-KV row
    was measured too (on the same backend and compute dtype), or whose tier is the baseline's."""
    by = {(r.model, r.tier, r.kv, r.backend, r.compute_dtype): r for r in rows}
    out = []
    for r in rows:
        if r.kv == baseline_kv or not measured(r):
            continue
        if r.tier == baseline_tier:
            out.append(pair(r, None, tolerance, confidence))
            continue
        ref = by.get((r.model, r.tier, baseline_kv, r.backend, r.compute_dtype))
        if ref is not None and measured(ref) and ref.long_context.edges == r.long_context.edges:
            out.append(pair(r, ref, tolerance, confidence))
    return out


def barred(rows: list[Measured], found: list[LongKv], baseline_kv: str, max_model_len: int) -> set[tuple[str, str]]:
    """(tier, kv) of every row with a quantized KV mode that was not shown non-inferior up to the planned
    length (planned_length: not measured, not paired, or a bucket on the way not passed): a target GPU
    planned for that length is not recommended it."""
    shown = {(f.tier, f.kv) for f in found if f.up_to >= planned_length(rows, max_model_len)}
    return {(r.tier, r.kv) for r in rows if r.kv != baseline_kv} - shown


def planned_length(rows: list[Measured], max_model_len: int) -> int:
    """The length a GPU serves: memory.max_model_len, at most the model's own context (vLLM caps it there)."""
    ctx = [c for r in rows if r.long_context is not None and (c := r.long_context.model_context)]
    return min([max_model_len, *ctx])


def as_json(found: list[LongKv]) -> list[dict]:
    return [{"model": f.model, "tier": f.tier, "kv": f.kv, "against": f.against or "the baseline",
             "non_inferior_up_to": f.up_to, "length": f.length, "sentence": f.sentence(),
             "buckets": [{"lo": b.lo, "hi": b.hi, "texts": b.texts, "increase": b.increase,
                          "ci": None if b.ci is None else list(b.ci), "verdict": b.verdict} for b in f.buckets]}
            for f in found]
