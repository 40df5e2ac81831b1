"""One variant's row, in three hand-offs made by three steps of stage decide. Pure data.

  Measured   what was measured: evaluate's result.json, held whole, and the serving checkpoint's
             record (scoring/verdict/measured.py, built by decide_inputs.build_row)
  Evidence   the paired comparison with the row's baseline: deltas, intervals, power (comparison.compare)
  Judgement  the verdicts the decision rule gives that evidence (decision.judge)

A Row holds the three; the report reads rows, the rule never reads what only the report shows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from pipeline.scoring.planning.power import Power
from pipeline.scoring.estimators.stats import Interval
# the first hand-off lives in its own module; Key and NOT_RUN are the row's vocabulary too
from pipeline.scoring.verdict.measured import NOT_RUN, Key, Measured


@dataclass(frozen=True)
class Evidence:
    deltas: dict[str, float] = field(default_factory=dict)         # metric -> tier - baseline
    intervals: dict[str, Interval] = field(default_factory=dict)   # metric -> its paired interval
    power: dict[str, Power] = field(default_factory=dict)          # gated metric -> power at this n
    # metric -> the tier's score on the baseline's items: the baseline's score + the delta (the estimate
    # that decided: a read stopped at a look, or stratified, is not the plain mean of what it read)
    scores: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Settle:
    """How many samples would settle an inconclusive verdict if the observed effect held, in items read
    by the task's design; `readable`, `pool`: the most items that design reads, from a pool of that many
    (a task read in looks; a stratified one reads only part of its pool), None for a fixed-n task."""
    samples: int | None              # None: the estimate sits on the tolerance
    outcome: str                     # pass | fail
    readable: int | None = None
    pool: int | None = None

    def beyond(self) -> bool:
        """More items than the design can read from its pool."""
        return self.samples is not None and self.readable is not None and self.samples > self.readable

    def pool_needed(self) -> int | None:
        """The pool that would let the design read `samples` (its read share kept)."""
        if not self.beyond() or not self.pool:
            return None
        return math.ceil(self.samples * self.pool / self.readable)

    def text(self) -> str:
        if self.samples is None:
            return "the estimate sits on the tolerance, so no sample size settles it"
        text = f"at this effect size about {self.samples:,} items read would be needed to {self.outcome}"
        if self.beyond():
            text += (f", more than this design reads ({self.readable:,} of the {self.pool:,}-item pool): a pool "
                     f"of about {self.pool_needed():,} items")
        return text

    def short(self) -> str:
        """The cell's form: 'about 57 samples to pass', with the pool it would take where that is more."""
        if self.samples is None:
            return "on the tolerance: no n settles it"
        text = f"about {self.samples:,} samples to {self.outcome}"
        return text + (f" (more than the {self.readable:,} this design reads: a pool of about "
                       f"{self.pool_needed():,})" if self.beyond() else "")


@dataclass(frozen=True)
class Verdict:
    """One metric's verdict. With an interval: its bounds oriented so that a drop is negative, the
    allowed drop and n; without one, `note` says why there is no verdict on the evidence."""
    verdict: str                     # pass | fail | inconclusive | not run (NOT_RUN: `note` says why)
    note: str | None = None
    lo: float | None = None
    hi: float | None = None
    n: int | None = None
    limit: float | None = None
    settle: Settle | None = None
    confidence: float = 0.95         # of the interval (decision.confidence)
    second: tuple[str, str] | None = None   # (its verdict under the engine's second arithmetic, that arithmetic)
    unstable: str | None = None      # the run's verdict, when the second arithmetic does not give it
    look: str | None = None          # the look it was read at (eval.sequential), e.g. "look 2 of 4, ..."
    unchecked: str | None = None     # the run's verdict, when the second arithmetic was not read for it
    short: str | None = None         # a not-run verdict's why in a word or two (page 1's cells)

    @classmethod
    def not_run(cls, why: tuple[str, str]) -> "Verdict":
        """The verdict of a metric whose task was never run: `why` (in full, in short), Measured.not_run_why."""
        return cls(NOT_RUN, why[0], short=why[1])

    def text(self) -> str:
        """'not run (the variant failed a gated metric first)' for a not-run verdict, else its state."""
        return f"{NOT_RUN} ({self.note})" if self.verdict == NOT_RUN else self.verdict

    @property
    def why(self) -> str:
        """The one-line reason, as decision.json records it."""
        if self.note is not None:
            return self.note
        kind = "repeated interval" if self.look is not None else "interval"
        ci = f"{confidence_text(self.confidence)} {kind} [{self.lo:+.2f}, {self.hi:+.2f}] (n={self.n})"
        shown = self.unchecked or self.unstable or self.verdict
        relation = {"pass": "lies above", "fail": "lies below"}.get(shown, "straddles")
        text = f"{ci} {relation} -{self.limit:.2f}"
        if self.unchecked is not None:
            text = (f"unchecked {self.unchecked}: not read in the engine's second arithmetic (evaluate stops "
                    f"checking once a variant cannot pass), so it counts as inconclusive; {text}")
        elif self.unstable is not None:
            text = (f"unstable: {self.unstable} in the run's arithmetic, {self.second[0]} under "
                    f"{self.second[1]}; {text}")
        elif self.second is not None:
            text += f"; the same under {self.second[1]}"
        if self.look is not None:
            text += f" (read at {self.look})"
        return f"{text}; {self.settle.text()}" if self.settle is not None else text


def confidence_text(c: float) -> str:
    """95%, or 99.69% for a look's repeated interval."""
    return f"{c:.0%}" if abs(c * 100 - round(c * 100)) < 1e-6 else f"{c:.2%}"


@dataclass(frozen=True)
class Judgement:
    # pass | fail | inconclusive | not run (no gated metric ran) | baseline | failed | unsupported | not measured
    overall: str
    verdicts: dict[str, Verdict] = field(default_factory=dict)     # gated metric -> verdict


@dataclass(frozen=True)
class Row:
    facts: Measured
    evidence: Evidence
    judgement: Judgement

    @property
    def key(self) -> Key:
        return self.facts.key

    @property
    def variant(self) -> str:
        return self.facts.variant

    def score(self, metric: str) -> float | None:
        """The score the page shows: the estimate the delta beside it comes from (Evidence.scores), else
        the mean over what was read (the baseline; a metric with no baseline to pair with)."""
        return self.evidence.scores.get(metric, self.facts.metrics.get(metric))
