"""The report's own params (`report:`): knobs that change what decision.md shows, never a verdict or a
pick (those are `decision:`, pipeline/schema/decision.py; tests/test_report_knobs.py changes every key
here and sees decision.json's verdicts and picks unchanged), so that editing one re-runs decide alone."""
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
    RETIRED = {"kv_kl_tolerance": "moved to decision.kv_kl_tolerance (it bars quantized KV modes from the "
                                  "picks: a knob that can change a pick lives under decision:)"}

    def __post_init__(self) -> None:
        if self.min_speed_vs_baseline is not None and not 0 <= self.min_speed_vs_baseline <= 1:
            raise FieldError("min_speed_vs_baseline", f"must be in [0, 1] or null, got {self.min_speed_vs_baseline}")
        if not self.length_buckets or self.length_buckets != sorted(set(self.length_buckets)):
            raise FieldError("length_buckets", f"must be strictly increasing, got {self.length_buckets}")
        if self.regressions_per_task < 0:
            raise FieldError("regressions_per_task", f"must be >= 0, got {self.regressions_per_task}")
