"""The decision rule: per-metric verdicts against the baseline and the recommended tier. Pure.

A metric *passes* when the tier's drop vs the baseline is within its tolerance, *fails* when it
is not, and is *inconclusive* when the baseline itself scores below `min_baseline` (a model that
cannot do the task says nothing about its quantized copies) or no comparable baseline exists.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.config import Decision, Tolerance
from pipeline.metrics import HIGHER_IS_BETTER

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


@dataclass
class Row:
    model: str
    tier: str
    kv: str
    status: str                              # ok | failed | unsupported
    backend: str | None = None
    reason: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    weight_bytes: int | None = None
    kv_bytes_per_token: int | None = None
    tokens_per_s: float | None = None
    deltas: dict[str, float] = field(default_factory=dict)
    verdicts: dict[str, tuple[str, str]] = field(default_factory=dict)   # metric -> (verdict, why)
    overall: str = INCONCLUSIVE
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def variant(self) -> str:
        return f"{self.tier}-{self.kv}"


def allowed_drop(tol: Tolerance, baseline: float) -> float:
    return tol.abs if tol.abs is not None else tol.rel * abs(baseline)


def judge_metric(metric: str, value: float, base: float | None, tol: Tolerance,
                 min_base: float | None) -> tuple[str, str, float | None]:
    """(verdict, reason, delta) for one metric; delta is tier minus baseline."""
    if base is None:
        return INCONCLUSIVE, "no comparable baseline", None
    delta = value - base
    if min_base is not None and base < min_base:
        return INCONCLUSIVE, f"baseline {base:.1f} < {min_base:g}: the model cannot do this task", delta
    drop = -delta if HIGHER_IS_BETTER.get(metric, True) else delta
    limit = allowed_drop(tol, base)
    if drop <= limit + 1e-9:
        return PASS, f"drop {max(drop, 0):.2f} <= tolerance {limit:.2f}", delta
    return FAIL, f"drop {drop:.2f} > tolerance {limit:.2f}", delta


def judge(rows: list[Row], rule: Decision) -> None:
    """Fill deltas, verdicts and overall for every row, in place. Baselines are per model and
    per backend: rows served by different backends are never compared."""
    base_rows = {(r.model, r.backend): r for r in rows
                 if r.tier == rule.baseline.tier and r.kv == rule.baseline.kv and r.status == "ok"}
    for r in rows:
        if r.status != "ok":
            r.overall = r.status
            continue
        base = base_rows.get((r.model, r.backend))
        for metric, tol in rule.tolerances.items():
            if metric not in r.metrics:
                continue
            base_value = base.metrics.get(metric) if base else None
            verdict, why, delta = judge_metric(metric, r.metrics[metric], base_value, tol,
                                               rule.min_baseline.get(metric))
            r.verdicts[metric] = (verdict, why)
            if delta is not None:
                r.deltas[metric] = delta
        verdicts = [v for v, _ in r.verdicts.values()]
        if FAIL in verdicts:
            r.overall = FAIL
        elif PASS in verdicts:
            r.overall = PASS
        else:
            r.overall = INCONCLUSIVE


def memory_key(r: Row) -> tuple[float, float]:
    return (r.weight_bytes if r.weight_bytes is not None else float("inf"),
            r.kv_bytes_per_token if r.kv_bytes_per_token is not None else float("inf"))


def recommend(rows: list[Row], model: str) -> tuple[Row | None, str]:
    """The smallest-memory variant (weights, then KV bytes/token) of `model` with no failing
    metric and at least one passing one. Returns (row, explanation)."""
    mine = [r for r in rows if r.model == model]
    ok = [r for r in mine if r.overall == PASS]
    if not ok:
        if not any(r.status == "ok" for r in mine):
            return None, "no variant ran successfully"
        return None, ("no variant passes: every variant either fails a metric or has only "
                      "inconclusive metrics (see the table)")
    best = min(ok, key=memory_key)
    conclusive = [m for m, (v, _) in best.verdicts.items() if v == PASS]
    return best, (f"smallest memory among the {len(ok)} variants that pass every conclusive metric "
                  f"({', '.join(conclusive)})")
