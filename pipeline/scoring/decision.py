"""The decision rule: per-metric non-inferiority verdicts against the baseline, and the
recommended variant. Pure.

Metrics are `<task>/<metric>`; each task's metrics are judged on their own. Tolerances and
min_baseline come from the task's entry, else the per-metric defaults (schema.gate). Direction
(higher_is_better) comes from the task's YAML via result.json (Row.higher_is_better).

For each metric with a tolerance T (absolute, or relative to the baseline score) and the 95% paired
bootstrap interval [lo, hi] of tier - baseline (sign flipped for lower-is-better metrics):
  pass          lo >= -T   (the tier is, with 95% confidence, no worse than T)
  fail          hi <  -T   (with 95% confidence worse than T)
  inconclusive  otherwise, or when the baseline scores below `min_baseline` (the model cannot do
                the task, so a difference means nothing), or no comparable baseline exists.

A row's baseline is the baseline row of the same model, backend and compute dtype (the activation
dtype it ran at): a delta across backends or dtypes would mix the engine into the quantization.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pipeline.domain import hardware
from pipeline.domain.metrics import split_id
from pipeline.schema import Decision, TargetGpu, Task, Tolerance, gate
from pipeline.scoring.planner import Plan
from pipeline.scoring.power import Power
from pipeline.scoring.stats import Interval

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
NOT_CAPABLE = "the baseline cannot do this task"
NO_BASELINE = "no comparable baseline"
NOT_MEASURED = "not measured on this variant"


@dataclass
class RowInfo:
    """What the report shows about a variant besides its scores; the decision itself never reads it."""
    scheme: str = ""                                  # the tier's label, or its method
    hardware: str = "fp16"                            # vLLM kernel family (pipeline/data/vllm_hardware.yaml)
    serve_path: str | None = None                     # what `vllm serve` is pointed at (quantize record)
    num_samples: dict[str, int] = field(default_factory=dict)                # task -> samples evaluated
    versions: dict[str, str] = field(default_factory=dict)                   # package -> version
    # evaluate's result.json records, passed through as written (their keys depend on the backend);
    # serving is None when the variant left no result
    serving: dict[str, Any] | None = None
    throughput: dict[str, Any] = field(default_factory=dict)
    kv_formula: str | None = None                     # the planner's KV formula beside the engine's figure
    # next-token KL / top-1 agreement vs the baseline (decide: fidelity_summary); report-only
    fidelity: dict[str, Any] | None = None


@dataclass
class Row:
    model: str
    tier: str
    kv: str
    status: str                              # ok | failed | unsupported
    backend: str | None = None
    compute_dtype: str | None = None         # activation dtype the backend ran at (float32, bfloat16, ...)
    reason: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)     # `<task>/<metric>` -> score
    higher_is_better: dict[str, bool] = field(default_factory=dict)   # same keys, from the task YAMLs
    intervals: dict[str, Interval] = field(default_factory=dict)
    weight_bytes: int | None = None
    kv_bytes_per_token: int | None = None
    tokens_per_s: float | None = None
    deltas: dict[str, float] = field(default_factory=dict)
    verdicts: dict[str, tuple[str, str]] = field(default_factory=dict)   # metric -> (verdict, why)
    overall: str = INCONCLUSIVE
    power: dict[str, Power] = field(default_factory=dict)     # gated metric -> power at this n
    info: RowInfo = field(default_factory=RowInfo)

    @property
    def variant(self) -> str:
        return f"{self.tier}-{self.kv}"


def allowed_drop(tol: Tolerance, baseline: float) -> float:
    return tol.allowed_drop(baseline)


def judge_metric(metric: str, base: float | None, interval: Interval | None, tol: Tolerance,
                 min_base: float | None, higher_is_better: bool = True) -> tuple[str, str]:
    """(verdict, reason) for one metric of one variant."""
    if base is None:
        return INCONCLUSIVE, NO_BASELINE
    if min_base is not None and base < min_base:
        return INCONCLUSIVE, f"{NOT_CAPABLE} (baseline {base:.1f} < min_baseline {min_base:g})"
    if interval is None:
        return INCONCLUSIVE, "no interval: the metric has no per-sample form here"
    sign = 1.0 if higher_is_better else -1.0
    lo, hi = sorted((sign * interval.lo, sign * interval.hi))
    limit = allowed_drop(tol, base)
    ci = f"95% CI [{lo:+.2f}, {hi:+.2f}] (n={interval.n})"
    if lo >= -limit - 1e-9:
        return PASS, f"{ci} lies above -{limit:.2f}"
    if hi < -limit:
        return FAIL, f"{ci} lies below -{limit:.2f}"
    return INCONCLUSIVE, f"{ci} straddles -{limit:.2f}; {samples_to_settle(sign * interval.delta, lo, hi, limit, interval.n)}"


def samples_to_settle(delta: float, lo: float, hi: float, limit: float, n: int) -> str:
    """How many samples would settle an inconclusive verdict if the observed effect held: the interval's
    half-width shrinks as 1/sqrt(n), and it must shrink to the distance between delta and -limit."""
    margin = abs(delta + limit)
    half = (hi - lo) / 2
    if margin < 1e-9 or half <= 0:
        return "the estimate sits on the tolerance, so no sample size settles it"
    needed = math.ceil(n * (half / margin) ** 2)
    outcome = "pass" if delta > -limit else "fail"
    return f"at this effect size about {needed:,} samples would be needed to {outcome}"


BaselineKey = tuple[str, str | None, str | None]


def comparable(r: Row) -> BaselineKey:
    """What a row and its baseline share: model, backend and compute dtype."""
    return (r.model, r.backend, r.compute_dtype)


def baselines(rows: list[Row], rule: Decision) -> dict[BaselineKey, Row]:
    """The baseline row per (model, backend, compute dtype): rows of different backends or compute
    dtypes are never compared."""
    return {comparable(r): r for r in rows
            if r.tier == rule.baseline.tier and r.kv == rule.baseline.kv and r.status == "ok"}


def missing_baseline(r: Row, base_rows: dict[BaselineKey, Row]) -> str:
    """Why a row has no baseline: one ran on this backend, but at another compute dtype; or none did."""
    others = sorted(str(k[2]) for k in base_rows if k[:2] == (r.model, r.backend))
    if others:
        return (f"no baseline at this compute dtype ({r.compute_dtype}; the {r.backend} baseline ran in "
                f"{', '.join(others)})")
    return NO_BASELINE


def judge(rows: list[Row], rule: Decision, tasks: dict[str, Task] | None = None) -> None:
    """Fill verdicts and overall for every row, in place (intervals must already be set). `tasks`:
    eval.tasks, for per-task tolerances and min_baseline."""
    base_rows = baselines(rows, rule)
    for r in rows:
        if r.status != "ok":
            r.overall = r.status
            continue
        base = base_rows.get(comparable(r))
        if base is r:
            r.overall = "baseline"
            continue
        for metric in unmeasured(r, base):
            if gate(rule, tasks or {}, metric).tolerance is not None:
                r.verdicts[metric] = (INCONCLUSIVE, f"{NOT_MEASURED}: {r.reason or 'no score in its result'}")
        for metric in r.metrics:
            g = gate(rule, tasks or {}, metric)
            tol, floor = g.tolerance, g.min_baseline
            base_value = base.metrics.get(metric) if base else None
            if base_value is not None:
                r.deltas[metric] = r.metrics[metric] - base_value
            if tol is None:
                continue
            if base is None:
                r.verdicts[metric] = (INCONCLUSIVE, missing_baseline(r, base_rows))
                continue
            r.verdicts[metric] = judge_metric(metric, base_value, r.intervals.get(metric), tol, floor,
                                              r.higher_is_better.get(metric, True))
        r.overall = overall(r.verdicts)


def unmeasured(r: Row, base: Row | None) -> list[str]:
    """The baseline's metrics this row has no score for (evaluate stopped before their task)."""
    return [m for m in (base.metrics if base else {}) if m not in r.metrics]


def task_verdicts(verdicts: dict[str, tuple[str, str]]) -> dict[str, str]:
    """task -> its overall verdict over its own metrics (the same rule as `overall`)."""
    by_task: dict[str, dict[str, tuple[str, str]]] = {}
    for mid, v in verdicts.items():
        by_task.setdefault(split_id(mid)[0], {})[mid] = v
    return {t: overall(v) for t, v in by_task.items()}


def overall(verdicts: dict[str, tuple[str, str]]) -> str:
    """fail if any metric fails; pass if every metric the model can do passes; else inconclusive."""
    relevant = [v for v, why in verdicts.values() if not why.startswith(NOT_CAPABLE)]
    if FAIL in relevant:
        return FAIL
    if relevant and all(v == PASS for v in relevant):
        return PASS
    return INCONCLUSIVE


def memory_key(r: Row) -> tuple[float, float]:
    return (r.weight_bytes if r.weight_bytes is not None else float("inf"),
            r.kv_bytes_per_token if r.kv_bytes_per_token is not None else float("inf"))


def recommend(rows: list[Row], model: str, allowed: set[tuple[str, str]] | None = None
              ) -> tuple[Row | None, str]:
    """The smallest-memory variant (weights, then KV bytes/token) of `model` that passes every
    metric the model can do; the baseline itself when no other variant passes (it is the reference,
    so it cannot be worse than itself). `allowed` restricts the candidates (e.g. to what a GPU can
    run); None comes back only when neither a passing variant nor the baseline is allowed."""
    mine = [r for r in rows if r.model == model and (allowed is None or (r.tier, r.kv) in allowed)]
    ok = [r for r in mine if r.overall == PASS]
    if ok:
        best = min(ok, key=memory_key)
        conclusive = [m for m, (v, _) in best.verdicts.items() if v == PASS]
        return best, (f"smallest memory among the {len(ok)} variants that pass every metric the model "
                      f"can do ({', '.join(conclusive)})")
    base = next((r for r in mine if r.overall == "baseline"), None)
    if base is not None:
        others = [r for r in mine if r.status == "ok" and r is not base]
        if not others:
            return base, "the baseline is the only variant that ran here; nothing smaller was shown to be as good"
        return base, ("the baseline itself: no smaller variant was shown non-inferior: each fails a metric or "
                      "has an interval too wide to show non-inferiority (see the verdicts below the table)"
                      + closest(others))
    if not any(r.status == "ok" for r in mine):
        return None, "no variant ran successfully" + ("" if allowed is None else " among those that fit")
    return None, ("the baseline is not among the candidates (it does not fit or cannot run there) and no "
                  "smaller variant passes")


def closest(rows: list[Row]) -> str:
    """The inconclusive variant nearest to passing, for the reader who wants to try harder."""
    cands = [r for r in rows if r.overall == INCONCLUSIVE]
    if not cands:
        return ""
    def not_passing(r: Row) -> int:
        return sum(1 for v, why in r.verdicts.values() if v != PASS and not why.startswith(NOT_CAPABLE))
    best = min(cands, key=lambda r: (not_passing(r), memory_key(r)))
    metrics = [m for m, (v, why) in best.verdicts.items() if v == INCONCLUSIVE and not why.startswith(NOT_CAPABLE)]
    return f"; closest: `{best.variant}`, inconclusive on {', '.join(metrics)}"


@dataclass(frozen=True)
class GpuRec:
    """The recommendation for one target GPU: the row (None when nothing qualifies), why, and the
    `vllm serve` command sized for that GPU."""
    row: Row | None
    why: str
    command: str | None = None


def gpu_candidates(rows: list[Row], model: str, name: str, gpu: TargetGpu, plans: dict[str, dict[str, Plan]]
                   ) -> set[tuple[str, str]]:
    """(tier, kv) of the model's variants a GPU can serve: vLLM has kernels for the tier's family at
    the GPU's compute capability, and the memory plan fits. `plans`: variant -> GPU name -> Plan."""
    return {(r.tier, r.kv) for r in rows if r.model == model
            and hardware.supports(r.info.hardware, gpu.compute_capability)
            and (p := plans.get(r.variant, {}).get(name)) is not None and p.fits}
