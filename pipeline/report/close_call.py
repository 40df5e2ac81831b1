"""Page 1's close-call line: where the pick hinges on a verdict whose interval bound lies within half a
point of its margin, say so and what would settle it. Pure.

Two verdicts decide a pick (the fixed sequence of scoring/pick/sequence.py): the first candidate in the
sequence that does not pass (the pick is the last before it; a pass there would have carried the
sequence on) and the pick's own passes. The line reads the one walk the pick was read from (the
Recommendation's Walk, scoring/pick/walk.py), so it names the stopper the pick's *Why* names. A held
stopper (a KV mode the long-context KL does not clear) is no close call: no verdict of its would move
the pick, since a pass there would still not carry the sequence on.
Tests: `.venv/bin/python -m pytest -n 0 -q tests/test_page_one.py tests/test_walk.py`.

On the 2026-12 default run, for example, int8 + KV auto stopped the sequence with its accuracy's lower
bound 0.10 point under the margin on one CPU, and passed by as little on another: the pick moved.
"""
from __future__ import annotations

from pipeline.report.cells import confidence, label
from pipeline.report.document import ModelReport
from pipeline.scoring.verdict.judge import FAIL, PASS, not_capable
from pipeline.scoring.verdict.rows import Row, Verdict

NEAR = 0.5      # metric points between an interval's bound and the margin that count as a close call


def stop_of(m: ModelReport) -> Row | None:
    """The candidate the fixed sequence stops at, from the pick's own walk (None: every candidate passed,
    none ran, or the recommendation was made without a walk)."""
    w = m.recommendation.walk
    return None if w is None else w.stopper


def stoppers(m: ModelReport) -> list[Row]:
    """The candidates a pass at which would carry a chain on: each chain's stopper (pick/axes.py), or the
    one walk's; held stoppers left out (a pass there would not carry it on)."""
    rec = m.recommendation
    walks = [w for _, w in rec.axes.chains] if rec.axes is not None else [rec.walk] if rec.walk is not None else []
    return [w.stopper for w in walks if w.stopper is not None and not w.stopper_held
            and w.stopper.judgement.overall != PASS]


def gap(v: Verdict) -> float | None:
    """Points between the margin (-limit) and the bound that decided, or nearly decided, the verdict: a
    pass's or an inconclusive's lower bound, a fail's upper bound. None without an interval."""
    if v.lo is None or v.limit is None or not_capable(v):
        return None
    return abs((v.hi if v.verdict == FAIL else v.lo) + v.limit)


def settle_text(v: Verdict, task: str, cap: int | None) -> str:
    """What would settle a close verdict."""
    if v.verdict == PASS or v.verdict == FAIL:
        return "settled at its confidence, but another arithmetic may land on the other side"
    n = v.settle.samples if v.settle is not None else None
    if n is None:
        return "more samples narrow it; at the observed effect no sample size settles it"
    if v.settle.beyond():
        return (f"about {n:,} items read at the observed effect, more than this design reads from the "
                f"{v.settle.pool:,}-item pool ({v.settle.readable:,}): a pool of about {v.settle.pool_needed():,}")
    if cap is not None and n > cap:
        return f"about {n:,} samples at the observed effect, more than the {cap:,} {task} holds: a larger set"
    return f"more samples, about {n:,} in all at the observed effect"


def close(r: Row, passes: bool) -> list[tuple[str, Verdict, float]]:
    """(metric, verdict, gap) of the row's passing (or, `passes` False, other) verdicts within NEAR of
    their margin, closest first."""
    found = [(mid, v, g) for mid, v in r.judgement.verdicts.items()
             if (v.verdict == PASS) == passes and (g := gap(v)) is not None and g < NEAR]
    return sorted(found, key=lambda x: x[2])


def lines(m: ModelReport) -> list[str]:
    """One sentence, or none when neither the stopping candidate nor the pick is within NEAR."""
    parts = []
    w = m.recommendation.walk
    near = sorted(((stop, c) for stop in stoppers(m) for c in close(stop, passes=False)[:1]), key=lambda x: x[1][2])
    for stop, (mid, v, g) in near[:1]:
        bound, b = ("upper bound", v.hi) if v.verdict == FAIL else ("lower bound", v.lo)
        task = mid.split("/")[0]
        parts.append(f"`{stop.variant}` stops the sequence ({v.verdict}): {label(mid)} {bound} {b:+.2f} at "
                     f"{confidence(v)}, {g:.2f} from the {-v.limit:+.2f} margin; to settle: "
                     f"{settle_text(v, task, m.num_samples.get(task))}")
    pick = m.recommendation.row if w is not None and w.pick is not None else None
    if pick is not None:
        for mid, v, g in close(pick, passes=True)[:1]:
            parts.append(f"the pick `{pick.variant}` clears {label(mid)} by {g:.2f} ({v.lo:+.2f} at {confidence(v)}; "
                         f"{settle_text(v, '', None)})")
    return [f"Close call (within {NEAR} point of a margin): " + "; ".join(parts) + "."] if parts else []
