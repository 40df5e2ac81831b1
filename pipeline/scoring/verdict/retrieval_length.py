"""Retrieval accuracy against context length (issue 21): the retrieval suite's tasks (one task per length,
written by scripts/retrieval_set.py), found by their samples, and per variant each length's exact-match
accuracy, delta and verdict as decide judged them like any task. Pure.

    lengths = retrieval_length.lengths(baseline_samples)       # [Length("retrieval_1024", 1024), ...]
    table = retrieval_length.table(rows, lengths)       # per variant (ByLength), per length: a Cell
    table[0].sentence()    # "int8 + fp8 KV: retrieval non-inferior up to 1,024 tokens; inconclusive at 2,048"
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from pipeline.domain.sets import retrieval
from pipeline.domain.sets.metrics import metric_id
from pipeline.domain.sets.sample_row import SampleRow
from pipeline.scoring.verdict.judge import not_capable
from pipeline.scoring.verdict.rows import NOT_RUN, Row

METRIC = "exact_match"
NOT_CAPABLE = "not capable"      # the baseline scores below min_baseline at this length: no verdict
NOT_MEASURED = "not measured"    # no score, and no record of why (one never run reads "not run (<why>)")
REPORT_ONLY = "report only"      # the length's task has no tolerance: measured and shown, judged by nothing


@dataclass(frozen=True)
class Length:
    task: str
    tokens: int          # the prompts' target length (retrieval.Sample.target_tokens)


def _length_of(rows: list[SampleRow]) -> int | None:
    """A task's target length when every sample is one of the suite's (its id says which), else None."""
    found = [retrieval.parse_id(r.id) for r in rows]
    if not found or any(f is None for f in found):
        return None
    return Counter(n for _, n in found).most_common(1)[0][0]


def lengths(samples: dict[str, list[SampleRow]]) -> list[Length]:
    """The retrieval tasks among the baseline's (task -> sample rows), shortest first."""
    found = [Length(task, n) for task, rows in samples.items() if (n := _length_of(rows)) is not None]
    return sorted(found, key=lambda x: (x.tokens, x.task))


@dataclass(frozen=True)
class Cell:
    accuracy: float | None       # exact match, percent; None: not measured
    delta: float | None          # variant - baseline, points
    verdict: str                 # pass | fail | inconclusive | not capable | not measured | report only | baseline
    interval: tuple[float, float] | None = None     # the delta's paired interval (decide's), points


@dataclass(frozen=True)
class ByLength:
    variant: str
    tier: str
    kv: str
    cells: list[tuple[Length, Cell]]

    @property
    def up_to(self) -> int | None:
        """The longest length up to which every length passes (None: not even the shortest)."""
        best = None
        for length, cell in self.cells:
            if cell.verdict != "pass":
                break
            best = length.tokens
        return best

    def sentence(self) -> str:
        kv = f"{self.kv} KV"
        if self.cells and all(c.verdict == REPORT_ONLY for _, c in self.cells):
            found = ", ".join(f"{c.accuracy:.0f}% at {x.tokens:,}" for x, c in self.cells)
            return f"{self.tier} + {kv}: retrieval {found} tokens (report only: no tolerance judges it)"
        whys = {c.verdict for _, c in self.cells}
        if self.cells and len(whys) == 1 and next(iter(whys)).startswith(NOT_RUN):
            return f"{self.tier} + {kv}: retrieval {next(iter(whys))}"
        first = next(((x, c) for x, c in self.cells if c.verdict != "pass"), None)
        head = (f"{self.tier} + {kv}: retrieval non-inferior up to {self.up_to:,} tokens" if self.up_to is not None
                else f"{self.tier} + {kv}: retrieval not shown non-inferior at any length")
        if first is None:
            return head
        length, cell = first
        tail = ("the baseline cannot do it" if cell.verdict == NOT_CAPABLE else cell.verdict)
        return f"{head}; {tail} at {length.tokens:,}"


def cell(r: Row, length: Length) -> Cell:
    mid = metric_id(length.task, METRIC)
    accuracy = r.facts.metrics.get(mid)
    if r.judgement.overall == "baseline":
        return Cell(accuracy, None, "baseline")
    v = r.judgement.verdicts.get(mid)
    if accuracy is None:        # its task never run: "not run (<why>)", as its verdict says (rows.NOT_RUN)
        found = v.text() if v is not None and v.verdict == NOT_RUN else r.facts.not_run_text(length.task)
        return Cell(None, None, found or NOT_MEASURED)
    # measured with no verdict: decide judges only metrics with a tolerance
    verdict = REPORT_ONLY if v is None else NOT_CAPABLE if not_capable(v) else v.verdict
    iv = r.evidence.intervals.get(mid)
    return Cell(accuracy, r.evidence.deltas.get(mid), verdict, None if iv is None else (iv.lo, iv.hi))


def table(rows: list[Row], found: list[Length]) -> list[ByLength]:
    """One entry per variant that ran (ok), the baseline's first; empty without retrieval tasks."""
    if not found:
        return []
    ok = [r for r in rows if r.facts.status == "ok"]
    ok.sort(key=lambda r: r.judgement.overall != "baseline")
    return [ByLength(r.variant, r.facts.tier, r.facts.kv, [(x, cell(r, x)) for x in found]) for r in ok]


def as_json(entries: list[ByLength]) -> list[dict]:
    return [{"variant": e.variant, "tier": e.tier, "kv": e.kv, "up_to": e.up_to,
             "lengths": [{"task": x.task, "tokens": x.tokens, "accuracy": c.accuracy, "delta": c.delta,
                          "interval": None if c.interval is None else list(c.interval), "verdict": c.verdict}
                         for x, c in e.cells]} for e in entries]
