"""The decision rule's params: the baseline, per-metric tolerances and floors, the bootstrap: what
evaluate's looks read (report-only knobs are `report:`, pipeline/schema/report.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.schema.errors import FieldError


@dataclass(frozen=True)
class Tolerance:
    abs: float | None = None
    rel: float | None = None

    def __post_init__(self) -> None:
        if (self.abs is None) == (self.rel is None):
            raise FieldError("", "give exactly one of 'abs' or 'rel'")
        value = self.abs if self.abs is not None else self.rel
        if value < 0:
            raise FieldError("", f"a tolerance is the allowed drop and must be >= 0, got {value}")

    def allowed_drop(self, baseline: float) -> float:
        """The drop allowed against a baseline score, in metric points."""
        return self.abs if self.abs is not None else self.rel * abs(baseline)


@dataclass(frozen=True)
class Baseline:
    tier: str
    kv: str = "auto"


@dataclass(frozen=True)
class Bootstrap:
    resamples: int = 1000
    seed: int = 12345
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if self.resamples < 100:
            raise FieldError("resamples", f"at least 100, got {self.resamples}")
        if not 0.5 < self.confidence < 1:
            raise FieldError("confidence", f"must be in (0.5, 1), got {self.confidence}")


@dataclass(frozen=True)
class Decision:
    baseline: Baseline
    tolerances: dict[str, Tolerance]
    min_baseline: dict[str, float] = field(default_factory=dict)
    bootstrap: Bootstrap = field(default_factory=Bootstrap)
    # report-only knobs moved to `report:` (decide's alone, so changing one re-runs no evaluation)
    RETIRED = {k: f"moved to report.{k} (report-only: decide applies it, no evaluation re-runs)"
               for k in ("length_buckets", "regressions_per_task", "min_speed_vs_baseline", "kv_kl_tolerance")}
