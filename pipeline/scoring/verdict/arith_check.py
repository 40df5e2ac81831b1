"""A verdict settled in both of the engine's arithmetics (docs/decision-rule.md "Engine noise"). Pure.

A variant's looks read each gated metric's interval in the run's own arithmetic (bfloat16 on most
CPUs). Once a metric settles there, evaluate computes the same samples of the variant again under the
second arithmetic (the one stage noise runs the baseline in: float32 against bfloat16; on vLLM another
batch composition) and judges them against the baseline's samples under it, by the same rule at the
same look's confidence: the comparison a machine computing in the other arithmetic would make. Look by
look, each metric is

  settled    once both arithmetics have settled it alike (pass and pass, or fail and fail), at the
             later of their two looks;
  unstable   when they settle it differently, or one has settled it and the other has not by the cap:
             inconclusive, never a pass, never recommended;
  open       otherwise: the looks go on.

Why this rule and not the baseline's shift folded into every interval: a damaged tier has more near-ties
than the baseline, so its own arithmetic noise can be larger than the baseline's. For a tier exactly at
its margin whose delta each arithmetic shifts by N(0, tau), a pass needs both arithmetics to pass it,
which holds the false-pass rate at alpha while tau is up to the sampling SE; one arithmetic alone does
not (tests/test_arith_check.py simulates both through the look runner).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.domain.sets.metrics import metric_id
from pipeline.domain.result.records import MetricCheck, Settled, TaskLooks

STABLE, UNSTABLE = "stable", "unstable"
OPEN = "inconclusive"


@dataclass(frozen=True)
class State:
    settled: dict[str, Settled] = field(default_factory=dict)     # metric -> where both settled it
    unstable: list[str] = field(default_factory=list)

    def failed(self) -> bool:
        return any(s.verdict == "fail" for s in self.settled.values())


def state(first: dict[str, Settled], second: dict[str, Settled], metrics: list[str], at_cap: bool = False) -> State:
    """The task's metrics from what each arithmetic has settled (metric -> where); `at_cap`: the last
    look, where a metric only one arithmetic settled is unstable."""
    settled, unstable = {}, []
    for m in metrics:
        a, b = first.get(m), second.get(m)
        if a is not None and b is not None:
            if a.verdict == b.verdict:
                settled[m] = max(a, b, key=lambda x: x.look)
            else:
                unstable.append(m)
        elif at_cap and (a is not None or b is not None):
            unstable.append(m)
    return State(settled, unstable)


def metrics_record(record: dict[str, TaskLooks]) -> dict[str, MetricCheck]:
    """metric id -> its two verdicts and their status, from the tasks' looks records, for the tasks the
    check ran on (those with a `second`)."""
    out = {}
    for task, r in record.items():
        if r.second is None:
            continue
        for m, a in (r.first or {}).items():
            b = r.second[m].verdict if m in r.second else OPEN
            status = UNSTABLE if m in r.unstable else STABLE if b == a.verdict else None
            out[metric_id(task, m)] = MetricCheck(a.verdict, b, status)
    return out
