"""The records inside result.json that decide reads, typed: a task's looks, the second arithmetic's
check and the sample cache's counts. Built by `parse` from the dict evaluate wrote (the one typed parser,
schema/typed.py), which names the record and the key path when one is missing, unknown or of the wrong
type; written by `plain`, its inverse. Pure.

    looks = records.parse(TaskLooks, data["looks"]["classification"], "looks.classification")
    looks.confidence, looks.reach()
"""
from __future__ import annotations

import typing
from dataclasses import dataclass, field

from pipeline.schema import typed
from pipeline.schema.errors import ConfigError


class RecordError(ValueError):
    """A record that is not the shape its dataclass says; the message names the key."""


@dataclass(frozen=True)
class Settled:
    """A metric settled at a look: its verdict, the look (1-based), the items read there, and the
    repeated interval of tier - baseline it was read on, at that look's confidence."""
    verdict: str
    look: int
    n: int
    delta: float
    lo: float
    hi: float
    confidence: float


@dataclass(frozen=True)
class Strata:
    """A stratified read's design (evaluation/stratified.py Plan.record)."""
    below: float
    share: float
    pool: list[int]
    reads: list[list[int]]
    plain: list[int]


@dataclass(frozen=True)
class TaskLooks:
    """One task's looks (evaluation/looks_runner.py); a task read whole (a registry task) has no sizes."""
    cap: int
    looks: int
    n: int
    sizes: list[int] = field(default_factory=list)
    of: int | None = None
    confidence: float | None = None               # the last look's repeated interval's
    settled: dict[str, Settled] = field(default_factory=dict)
    strata: Strata | None = None
    first: dict[str, Settled] | None = None       # settled in the run's arithmetic, where the check ran
    second: dict[str, Settled] | None = None      # settled in the second arithmetic
    unstable: list[str] = field(default_factory=list)
    budget: bool = False                          # the time budget ended the task at this look
    halted: bool = False                          # the variant failed on another task first
    whole: bool = False
    order: list[int] | None = None                # the documents read, in look order (None: not recorded)

    def read_on(self, metric: str) -> Settled | None:
        """The look a metric settled at in the run's arithmetic, with its interval (None: open at the
        last look)."""
        return (self.first if self.first is not None else self.settled).get(metric)

    def read(self, at: Settled | None) -> frozenset[int] | None:
        """The documents a verdict settled at `at` was read on: the first at.n of the look order (a
        stratified read's order too: each look's prefix is its sample). None: every document the task
        read (`at` None: open at the last look; a whole read), or no order recorded (an older result:
        who shows a number over more than the verdict's pairs labels it with its own n)."""
        if at is None or at.n >= self.n or self.order is None:
            return None
        return frozenset(self.order[:at.n])

    def reach(self) -> tuple[int, int] | None:
        """(the most items the looks read by the cap, the pool they read from), None for a whole read."""
        return (self.sizes[-1], self.cap) if self.sizes else None


@dataclass(frozen=True)
class MetricCheck:
    """One metric's two verdicts under the check; status stable, unstable, or None (not yet settled)."""
    first: str
    second: str
    status: str | None = None


@dataclass(frozen=True)
class TaskSpend:
    computed: int
    seconds: float


@dataclass(frozen=True)
class SampleCounts:
    """The sample cache's counts: samples read from it, computed, and per task what computing cost."""
    cached: int = 0
    computed: int = 0
    tasks: dict[str, TaskSpend] = field(default_factory=dict)


@dataclass(frozen=True)
class ArithmeticCheck:
    """The second arithmetic's one state (contract.CHECK_STATES) and what it found."""
    status: str
    why: str | None = None
    arithmetic: str | None = None
    metrics: dict[str, MetricCheck] = field(default_factory=dict)
    sample_cache: SampleCounts | None = None
    seconds: float | None = None


T = typing.TypeVar("T")


def parse(cls: type[T], data: object, where: str) -> T:
    """`data` as a `cls`, every field checked by the one typed parser (schema/typed.py, params.yaml's
    too); a RecordError naming `where` and the key path."""
    try:
        return typed.build(cls, data, where)
    except ConfigError as e:
        raise RecordError(str(e)) from None


def plain(record: object) -> object:
    """A record as result.json holds it (typed.plain: what `parse` reads back)."""
    return typed.plain(record)
