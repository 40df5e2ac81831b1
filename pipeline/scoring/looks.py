"""A variant's evaluation in looks: which samples each look adds, and what each look settles. Pure.

Each task's rows are taken in one seeded order fixed by the data (`order`): every prefix is a random
sample, and the baseline and every variant see the same prefixes, so a look's pairs are the first n
rows of both. At look k a gated metric's paired interval is read at the design's adjusted confidence
(pipeline/scoring/sequential.py); a metric settles pass when its lower bound is >= -T and fail when
its upper bound is < -T, and stays settled. A task stops when all its gated metrics are settled; a
variant stops everything once one gated metric fails.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.scoring import sequential
from pipeline.scoring.stats import Interval


def order(rows: Sequence[dict], seed: int) -> list[int]:
    """Indices of `rows` in a seeded random order that depends only on each row's content: adding rows
    to a file interleaves them without reordering the rows already there."""
    def key(i: int) -> tuple[str, int]:
        text = json.dumps(rows[i], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(f"{seed}\x00{text}".encode()).hexdigest(), i

    return sorted(range(len(rows)), key=key)


@dataclass(frozen=True)
class Settled:
    """A gated metric's verdict at the look that settled it, with its repeated confidence interval."""
    verdict: str          # pass | fail
    look: int             # 1-based
    n: int
    interval: Interval    # tier - baseline, signed so that a drop is negative
    confidence: float

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "look": self.look, "n": self.n, "confidence": self.confidence,
                **self.interval.as_dict()}


@dataclass
class TaskLooks:
    """One task's progress through its looks."""
    cap: int
    sizes: list[int]                          # samples at each look (design.sizes(cap))
    gated: dict[str, float]                   # metric -> allowed drop T (the metrics that can settle)
    settled: dict[str, Settled] = field(default_factory=dict)
    done_n: int = 0                           # samples evaluated so far
    looks_run: int = 0

    @property
    def open(self) -> bool:
        return bool(set(self.gated) - set(self.settled)) and self.looks_run < len(self.sizes)

    def next_n(self) -> int:
        return self.sizes[self.looks_run]

    def read(self, look: int, n: int, intervals: dict[str, Interval], confidence: float) -> list[str]:
        """Record look `look` (1-based) over the first n samples; the metrics it failed."""
        self.done_n, self.looks_run = n, look
        failed = []
        for metric, margin in self.gated.items():
            if metric in self.settled or metric not in intervals:
                continue
            iv = intervals[metric]
            found = sequential.verdict(iv.lo, iv.hi, margin)
            if found is not None:
                self.settled[metric] = Settled(found, look, n, iv, confidence)
                if found == "fail":
                    failed.append(metric)
        return failed

    def as_dict(self) -> dict:
        return {"cap": self.cap, "sizes": self.sizes, "n": self.done_n, "looks_run": self.looks_run,
                "gated": self.gated, "settled": {m: s.as_dict() for m, s in self.settled.items()}}
