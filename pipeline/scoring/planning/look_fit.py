"""The per-variant time budget sized from this machine's own speed, so every variant can finish at least
its first look of every gated task, within the user's total cap. Pure.

    from pipeline.scoring.planning import look_fit
    need = look_fit.first_look_s({"classification": 0.36}, {"classification": 320}, load_s=45.0, margin=2.0)
    per = look_fit.per_variant_s(need, floor_s=210, cap_s=3600, variants=13)    # max(210, need), <= 3600 / 13

The rule (docs/backends.md "Time budget"):

    need     = margin x (load_s + sum over gated tasks of first-look samples x seconds per sample)
    budget   = max(max_wall_s, need), and at most max_total_s / variants when a total is set
    stop       when need > max_total_s / variants: the cap cannot fit one look per variant

Seconds per sample are the baseline's, measured on this engine to every cap (stage baseline), plus the
noise floor's where it ran (stage noise): a verdict settled at look 1 is checked on the same documents
in that second arithmetic. `margin` covers a variant slower than the baseline (a quantized tier on a CPU
often is: docs/performance.md). Read by pipeline/stages/look_budget.py (stages baseline and evaluate).
"""
from __future__ import annotations

import math

TOTAL_KEY = "serving.vllm.budget.max_total_s"


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
    return (f"{variants} variant{'s' if variants != 1 else ''} x at most {per_s:,.0f} s each = at most {per_s * variants / 60:,.0f} min of "
            f"variant evaluation (a first look of every gated task: about {need_s:,.0f} s)")
