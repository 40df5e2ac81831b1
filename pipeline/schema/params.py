"""The whole of params.yaml: every section, and the checks that span sections."""
from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.schema.decision import Decision, Tolerance
from pipeline.schema.eval import Eval, Task
from pipeline.schema.errors import FieldError
from pipeline.schema.memory import Memory
from pipeline.schema.models import Calibration, KvMode, Model, Tier
from pipeline.schema.report import Report
from pipeline.schema.serving import Serving
from pipeline.schema.traced import replaced

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.]*(?:-[a-z0-9_.]+)*$")


@dataclass(frozen=True)
class Params:
    models: dict[str, Model]
    tiers: dict[str, Tier]
    kv_modes: dict[str, KvMode]
    calibration: Calibration
    eval: Eval
    serving: Serving
    decision: Decision
    report: Report
    memory: Memory

    def __post_init__(self) -> None:
        if not self.models:
            raise FieldError("models", "at least one model is required")
        if not self.eval.tasks:
            raise FieldError("eval.tasks", "at least one task is required")
        for n in self.eval.tasks:
            if not NAME_RE.match(n):
                raise FieldError(f"eval.tasks.{n}", "names must be lower-case letters, digits, '.', '_' and single "
                                                    "'-' (they name sample files and metrics `<task>/<metric>`)")
        for n, tier in self.tiers.items():
            if tier.method not in ("published", "endpoint"):
                continue
            if tier.model is None and len(self.models) > 1:
                raise FieldError(f"tiers.{n}.model", f"required: which model this {tier.method} tier serves "
                                                     f"(models: {', '.join(self.models)})")
            if tier.model is not None and tier.model not in self.models:
                raise FieldError(f"tiers.{n}.model", f"{tier.model!r} is not a model (models: {', '.join(self.models)})")
        for kind, names in (("models", self.models), ("tiers", self.tiers), ("kv_modes", self.kv_modes)):
            for n in names:
                if not NAME_RE.match(n):
                    raise FieldError(f"{kind}.{n}", "names must be lower-case letters, digits, '.', '_' and "
                                                    "single '-' (they become DVC stage and file names)")
        b = self.decision.baseline
        if b.tier not in self.tiers:
            raise FieldError("decision.baseline.tier", f"{b.tier!r} is not a tier (tiers: {', '.join(self.tiers)})")
        if b.kv not in self.kv_modes:
            raise FieldError("decision.baseline.kv",
                             f"{b.kv!r} is not a kv mode (kv_modes: {', '.join(self.kv_modes)})")
        if b.model is not None and b.model not in self.models:
            raise FieldError("decision.baseline.model",
                             f"{b.model!r} is not a model (models: {', '.join(self.models)})")

    def gate(self, metric_id: str) -> Gate:
        return gate(self.decision, self.eval.tasks, metric_id)

    def tolerance(self, metric_id: str) -> Tolerance | None:
        """The metric's allowed drop (None: reported, not gated), without reading its floor."""
        return tolerance_of(self.decision, self.eval.tasks, metric_id)

    def calibrated_kv(self) -> bool:
        """Whether any KV mode asks for calibrated k/v scales (stage kvscales then makes checkpoints)."""
        return any(k.calibrated for k in self.kv_modes.values())

    def variants(self) -> list[tuple[str, str, str]]:
        return [(m, t, k) for m in self.models for t in self.tiers for k in self.kv_modes]


@dataclass(frozen=True)
class Gate:
    """How one metric is judged: the allowed drop (None: reported, not gated) and the baseline
    score below which it is not judged at all (None: no floor)."""
    tolerance: Tolerance | None
    min_baseline: float | None


def gate(rule: Decision, tasks: dict[str, Task], metric_id: str) -> Gate:
    """The Gate of a metric `<task>/<metric>`: the task entry's own
    (eval.tasks.<task>.tolerances / .min_baseline) if it gives one, else the per-metric default in
    decision.tolerances / decision.min_baseline. No tolerance: the metric is reported, not gated."""
    task, _, metric = metric_id.rpartition("/")
    entry = tasks.get(task)
    floor = entry.min_baseline.get(metric) if entry else None
    return Gate(tolerance_of(rule, tasks, metric_id), floor if floor is not None else rule.min_baseline.get(metric))


def tolerance_of(rule: Decision, tasks: dict[str, Task], metric_id: str) -> Tolerance | None:
    """A metric's tolerance as `gate` finds it: the task entry's own, else decision.tolerances'."""
    task, _, metric = metric_id.rpartition("/")
    entry = tasks.get(task)
    tol = entry.tolerances.get(metric) if entry else None
    return tol if tol is not None else rule.tolerances.get(metric)


def without_wall_budget(params: Params) -> Params:
    """`params` with no per-variant time budget (serving.vllm.budget.max_wall_s and gpu_max_wall_s
    null): the baseline and the noise floor run to every cap, since every variant is judged against
    them (issue 43)."""
    return with_wall_budget(params, None, None)


def with_wall_budget(params: Params, max_wall_s: float | None, gpu_max_wall_s: float | None) -> Params:
    """`params` with these per-variant budgets (a variant's as sized from the baseline: stages/look_budget.py)."""
    budget = replaced(params.serving.vllm.budget, max_wall_s=max_wall_s, gpu_max_wall_s=gpu_max_wall_s)
    vllm = replaced(params.serving.vllm, budget=budget)
    return replaced(params, serving=replaced(params.serving, vllm=vllm))
