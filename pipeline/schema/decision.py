"""The `decision:` section. A key belongs here when it can alter a verdict or a pick, in `report:`
(report.py) when it alters only what decision.md shows. What each key means: docs/params_doc.yaml."""
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
    model: str | None = None


@dataclass(frozen=True)
class Decision:
    baseline: Baseline
    tolerances: dict[str, Tolerance]
    min_baseline: dict[str, float] = field(default_factory=dict)
    confidence: float = 0.95
    kv_kl_tolerance: float = 0.02
    # report-only knobs moved to `report:` (decide's alone, so changing one re-runs no evaluation)
    RETIRED = {**{k: f"moved to report.{k} (report-only: decide applies it, no evaluation re-runs)"
                  for k in ("length_buckets", "regressions_per_task", "min_speed_vs_baseline")},
               "bootstrap": "renamed: its confidence is decision.confidence (no verdict's interval is a bootstrap), "
                            "its resamples and seed report.fidelity_bootstrap (the fidelity intervals')"}

    def __post_init__(self) -> None:
        if not 0.5 < self.confidence < 1:
            raise FieldError("confidence", f"must be in (0.5, 1), got {self.confidence}")
        if not self.kv_kl_tolerance > 0:
            raise FieldError("kv_kl_tolerance", f"must be > 0 nats/token, got {self.kv_kl_tolerance}")
