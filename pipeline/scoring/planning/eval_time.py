"""How long a variant's evaluation takes at the caps, from a probe's measured seconds per sample, and
where a time budget would end it: at which look, and what to change so that it does not. Pure.

    from pipeline.scoring.planning import eval_time as budget
    found = budget.predict({"classification": 0.16, "summarization": 2.5}, {"classification": 1280,
                           "summarization": 96}, [0.25, 0.5, 0.75, 1.0], load_s=40.0, budget_s=210)
    budget.advice(found, "serving.vllm.budget.max_wall_s")

Read by `python -m pipeline.budget` (pipeline/budget.py), which measures the seconds per sample.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Prediction:
    looks: list[float]                  # seconds at the end of each look (load included), every task read on
    load_s: float
    budget_s: float | None
    last_look: int                      # the last look the budget lets finish (len(looks): all; 0: none)
    reads: dict[str, list[int]]         # task -> its samples at each look

    @property
    def total_s(self) -> float:
        return self.looks[-1]


def predict(per_sample: dict[str, float], caps: dict[str, int], fractions: list[float], load_s: float,
            budget_s: float | None) -> Prediction:
    """A variant read at every look to every cap at `per_sample` seconds a sample of each task (tasks in
    looks as evaluate reads them: look k reads the samples up to its size of every task)."""
    # every look of every task, a task whose cap is reached early repeating its size (look_sizes drops them)
    reads = {t: [min(max(2, math.ceil(f * n - 1e-9)), n) for f in fractions] for t, n in caps.items()}
    looks = [load_s + sum(per_sample[t] * sizes[k] for t, sizes in reads.items()) for k in range(len(fractions))]
    last = len(looks) if budget_s is None else sum(1 for s in looks if s <= budget_s)
    return Prediction(looks, load_s, budget_s, last, reads)


def advice(found: Prediction, budget_key: str) -> str:
    """One sentence: whether the budget lets every look finish, else where it ends and what would let it."""
    if found.budget_s is None:
        return f"no time budget: about {found.total_s:,.0f} s"
    if found.last_look == len(found.looks):
        return f"within {budget_key} ({found.budget_s:,.0f} s): about {found.total_s:,.0f} s"
    enough = int(math.ceil(1.2 * found.total_s / 10.0) * 10)
    where = ("before its first look" if found.last_look == 0 else
             f"at look {found.last_look} of {len(found.looks)} ("
             + ", ".join(f"{t} {sizes[found.last_look - 1]:,} of {sizes[-1]:,}" for t, sizes in found.reads.items())
             + ")")
    return (f"{budget_key} ({found.budget_s:,.0f} s) ends it {where}: about {found.total_s:,.0f} s to read every "
            f"look; raise {budget_key} to {enough:,} (20% over) or lower the caps (eval.tasks.<task>.limit)")
