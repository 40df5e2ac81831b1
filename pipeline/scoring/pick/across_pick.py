"""The pick per target GPU across models: one fixed sequence over the candidates of every model that
the GPU can serve, judged against the reference across models (scoring/verdict/across.py). Pure.

The rule (docs/across-models.md): the candidates of all models that fit, in decreasing memory (weight
class, then KV bytes per token, params.yaml's order among equals: pick/sequence.in_sequence), fixed
before any verdict is read; walk them while each passes and take the smallest in memory of that
unbroken run (sequence.run_length, the walk pick/walk.py reads per model). The chance that the pick
is worse than its margin is then at most one verdict's, however many models and tiers (Maurer, Hothorn
& Lehmacher 1995), as the per-model pick's (pick/recommend.py). Where the first candidate does not
pass, the reference itself when the GPU can serve it (it is what the others are measured against),
else nothing.

The runner-up is the passing candidate just before the pick in the sequence: the next larger one the
reader could serve instead. Its paired difference with the pick (scoring/verdict/across.paired) is
reported beside it; it is a superiority interval for the reader, not a step of the pick, whose error
control is the sequence's alone.
"""
from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field

from pipeline.schema import Decision
from pipeline.scoring.estimators.stats import Interval
from pipeline.scoring.pick.sequence import in_sequence, run_length
from pipeline.scoring.pick.walk import HELD_REASON, settle
from pipeline.scoring.verdict.across import Samples, paired
from pipeline.scoring.verdict.judge import CANDIDATES, PASS
from pipeline.scoring.verdict.rows import Key, Row


@dataclass(frozen=True)
class GpuPick:
    """One target GPU's pick across models: the candidates in their order, the pick (None: nothing), why,
    the passing run it was taken from (in order; the pick is its last), and the runner-up."""
    gpu: str
    sequence: list[Row]
    pick: Row | None
    why: str
    run: list[Row] = field(default_factory=list)
    runner_up: Row | None = None


def pick(rows: list[Row], gpu: str, allowed: set[Key], held: frozenset[Key] | set[Key] = frozenset()) -> GpuPick:
    """`rows`: every model's rows judged against the reference (one of them judged "baseline");
    `allowed`: (model, tier, kv) the GPU can serve; `held`: those no pick may take for a reason read from
    the run's data (a barred KV mode), kept in the sequence as not passing (recommend.recommend)."""
    mine = [r for r in rows if r.key in allowed]
    ref = next((r for r in mine if r.judgement.overall == "baseline"), None)
    chain = in_sequence([r for r in mine if r.facts.status in CANDIDATES and r is not ref])
    n = run_length([r.judgement.overall == PASS and r.key not in held for r in chain])
    at = settle(chain, n)             # equal memory: params.yaml's first (walk.settle, as per model)
    if at is None:
        if ref is not None:
            why = ("the reference itself: " + (f"the largest candidate, `{name(chain[0])}`, does not pass "
                                               f"({word(chain[0], held)})" if chain else "no other candidate fits"))
            return GpuPick(gpu, chain, ref, why)
        return GpuPick(gpu, chain, None, "nothing passes in sequence" + (f": the largest candidate, `{name(chain[0])}`, "
                                                                        f"is {word(chain[0], held)}" if chain
                                                                        else ": no variant fits"))
    run = chain[:n]
    best = chain[at]
    why = (f"the smallest in memory of the {len(run)} candidate{'s' if len(run) > 1 else ''} passing in a row "
           f"against the reference, in order of decreasing memory over {len(chain)} candidates of "
           f"{len({r.facts.model for r in chain})} model(s); family-wise: the chance that the pick is worse than "
           f"a margin is at most one verdict's (fixed-sequence test)")
    if len(run) < len(chain):
        stop = chain[len(run)]
        why += f"; the sequence stops at `{name(stop)}` ({word(stop, held)})"
    run = run[:at + 1]
    return GpuPick(gpu, chain, best, why, run, run[-2] if len(run) > 1 else None)


def name(r: Row) -> str:
    return f"{r.facts.model}/{r.variant}"


def word(r: Row, held: Set[Key]) -> str:
    """Why a candidate stops the sequence: held before its own verdict (as walk.Walk.stop_reason)."""
    return HELD_REASON if r.key in held else r.judgement.overall


@dataclass(frozen=True)
class Difference:
    """The paired interval of `smaller` - `larger` (two passing candidates next to each other in the run;
    the last is the pick against the runner-up), per gated metric, over the items both read."""
    larger: Key
    smaller: Key
    intervals: dict[str, Interval]

    def finding(self, metric: str, higher_is_better: bool = True) -> str:
        """'smaller better' / 'larger better' where the interval excludes 0, else 'no difference shown'."""
        iv = self.intervals[metric]
        lo, hi = (iv.lo, iv.hi) if higher_is_better else (-iv.hi, -iv.lo)
        return "smaller better" if lo > 0 else "larger better" if hi < 0 else "no difference shown"


def differences(run: list[Row], samples: Samples, rule: Decision) -> list[Difference]:
    """Each passing candidate against the one before it in the run, gated metrics only."""
    out = []
    for big, small in zip(run, run[1:]):
        ivs = paired(big.facts, small.facts, samples, rule)
        out.append(Difference(big.key, small.key, {m: iv for m, iv in ivs.items() if m in small.judgement.verdicts}))
    return out
