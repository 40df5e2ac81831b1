"""The report's own params (`report:`): knobs that change what decision.md shows, never a verdict an
evaluation reads, so that editing one re-runs decide alone."""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.schema.errors import FieldError


@dataclass(frozen=True)
class Report:
    # KV-cache sensitivity by prompt length: bucket lower edges, in characters
    length_buckets: list[int] = field(default_factory=lambda: [0, 400, 800])
    # the largest per-sample regressions listed per task and variant
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
        if self.regressions_per_task < 0:
            raise FieldError("regressions_per_task", f"must be >= 0, got {self.regressions_per_task}")
