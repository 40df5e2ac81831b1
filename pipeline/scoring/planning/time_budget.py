"""The time budget's arithmetic: how long a variant's looks take at a measured speed, where a budget
would end them, and the per-variant budget that lets every variant finish its first look. Pure.

    from pipeline.scoring.planning import time_budget
    found = time_budget.predict({"classification": 0.16}, {"classification": [240, 478, 717, 955]},
                                load_s=40.0, budget_s=210)
    time_budget.advice(found, "serving.vllm.budget.max_wall_s")
    need = time_budget.first_look_s({"classification": 0.36}, {"classification": 240}, load_s=45.0, margin=2.0)
    per = time_budget.per_variant_s(need, floor_s=210, cap_s=3600, variants=13)  # max(210, need) <= 3600/13

The items a task reads at each look are the design's, never computed here: stages/look_budget.py reads
them from evaluation/stratified.py `sizes` (a choice task in strata of the baseline's margins, any other
by sequential.look_sizes), the function evaluate reads with. That is why this room is split in three:
planning sits below the design in the import graph (tests/test_import_graph.py), so the arithmetic takes
the reads as given; stages/look_budget.py reads result.json and the baseline's samples for it (stages
baseline and evaluate); pipeline/budget.py is the probe command, which serves a model (torch).

The rule (docs/backends.md "Time budget"):

    need     = margin x (load_s + sum over gated tasks of first-look samples x seconds per sample)
    budget   = max(max_wall_s, need), and at most max_total_s / variants when a total is set
    stop       when need > max_total_s / variants: the cap cannot fit one look per variant

`margin` covers a variant slower than the baseline (a quantized tier on a CPU often is:
docs/performance.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

TOTAL_KEY = "serving.vllm.budget.max_total_s"


@dataclass(frozen=True)
class Prediction:
    looks: list[float]                  # seconds at the end of each look (load included), every task read on
    load_s: float
    budget_s: float | None
    last_look: int                      # the last look the budget lets finish (len(looks): all; 0: none)
    reads: dict[str, list[int]]         # task -> its samples at each look (a task done early repeats its last)

    @property
    def total_s(self) -> float:
        return self.looks[-1]


def predict(per_sample: dict[str, float], reads: dict[str, list[int]], load_s: float,
            budget_s: float | None) -> Prediction:
    """A variant read at every look to every cap at `per_sample` seconds a sample of each task; `reads`:
    task -> the items it reads by each of its looks (the design's). Look k reads every task to its k-th
    size, as evaluate's looks take turns; a task with fewer looks (read whole, or a small cap) is done
    after its last."""
    count = max(len(sizes) for sizes in reads.values())
    full = {t: sizes + sizes[-1:] * (count - len(sizes)) for t, sizes in reads.items()}
    looks = [load_s + sum(per_sample[t] * sizes[k] for t, sizes in full.items()) for k in range(count)]
    last = len(looks) if budget_s is None else sum(1 for s in looks if s <= budget_s)
    return Prediction(looks, load_s, budget_s, last, full)


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


class CapTooSmall(ValueError):
    """The user's total cap cannot fit one look per variant; the message is the one line to print."""


def first_look_s(per_sample: dict[str, float], first: dict[str, int], load_s: float, margin: float) -> float:
    """Seconds a variant needs for its first look of every task in `first` (task -> samples of look 1),
    its load included, at `per_sample` seconds a sample (task -> s) times `margin`."""
    missing = sorted(set(first) - set(per_sample))
    if missing:
        raise KeyError(f"no seconds per sample measured for {', '.join(missing)}")
    return margin * (load_s + sum(per_sample[t] * n for t, n in first.items()))


def per_variant_s(need_s: float, floor_s: float | None, cap_s: float | None, variants: int) -> float | None:
    """The budget one variant runs with: at least `need_s` (and the user's per-variant `floor_s`; None:
    unbounded), at most its share of the total `cap_s` (None: no total). CapTooSmall when that share
    cannot hold `need_s`."""
    per = None if floor_s is None else max(float(floor_s), math.ceil(need_s))
    if cap_s is None:
        return per
    share = cap_s / max(variants, 1)
    if share < need_s:
        raise CapTooSmall(f"{TOTAL_KEY}: {cap_s:,.0f} s cannot fit one look per variant: {variants} variants x "
                          f"{need_s:,.0f} s (the first look of every gated task at this machine's measured speed) "
                          f"need {math.ceil(need_s * variants):,} s; raise it, or lower eval.sequential.looks[0] "
                          "or the caps (eval.tasks.<task>.limit)")
    return share if per is None else min(per, share)


def predicted_line(need_s: float, per_s: float | None, variants: int) -> str:
    """The line stage baseline prints before the variants start: the experiment's predicted wall time."""
    if per_s is None:
        return (f"each of {variants} variants needs about {need_s:,.0f} s for its first look of every gated task; "
                "no time budget, so its looks run to the caps")
    return (f"{variants} variant{'s' if variants != 1 else ''} x at most {per_s:,.0f} s each = at most "
            f"{per_s * variants / 60:,.0f} min of variant evaluation (a first look of every gated task: about "
            f"{need_s:,.0f} s)")
