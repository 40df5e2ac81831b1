"""The decision rule's params: the baseline, per-metric tolerances and floors, the bootstrap."""
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
    length_buckets: list[int] = field(default_factory=lambda: [0, 400, 800])
    regressions_per_task: int = 5
    # a vLLM row whose decode probe is below this x the baseline's has its load figures marked as not
    # counting (a ratio needs the baseline's result: decide's rule, not evaluate's); null = no floor
    min_speed_vs_baseline: float | None = 0.1
    # eval.long_context: the KL (nats/token) a quantized KV cache may add, per position bucket, to the same
    # tier with the baseline's KV cache (pipeline/scoring/long_kv.py)
    kv_kl_tolerance: float = 0.02

    def __post_init__(self) -> None:
        if not self.kv_kl_tolerance > 0:
            raise FieldError("kv_kl_tolerance", f"must be > 0 nats/token, got {self.kv_kl_tolerance}")
        if self.min_speed_vs_baseline is not None and not 0 <= self.min_speed_vs_baseline <= 1:
            raise FieldError("min_speed_vs_baseline", f"must be in [0, 1] or null, got {self.min_speed_vs_baseline}")
        if not self.length_buckets or self.length_buckets != sorted(set(self.length_buckets)):
            raise FieldError("length_buckets", f"must be strictly increasing, got {self.length_buckets}")
