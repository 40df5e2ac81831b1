"""The `report:` section: only keys that change what decision.md shows, never a verdict or a pick (those
belong in `decision:`, decision.py); tests/test_report_knobs.py holds every key here to that. What each
key means: docs/params_doc.yaml."""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.schema.errors import FieldError


@dataclass(frozen=True)
class FidelityBootstrap:
    resamples: int = 1000
    seed: int = 12345

    def __post_init__(self) -> None:
        if self.resamples < 100:
            raise FieldError("resamples", f"at least 100, got {self.resamples}")


@dataclass(frozen=True)
class Report:
    length_buckets: list[int] = field(default_factory=lambda: [0, 400, 800])
    regressions_per_task: int = 5
    min_speed_vs_baseline: float | None = 0.1
    fidelity_bootstrap: FidelityBootstrap = field(default_factory=FidelityBootstrap)
    RETIRED = {"kv_kl_tolerance": "moved to decision.kv_kl_tolerance (it bars quantized KV modes from the "
                                  "picks: a knob that can change a pick lives under decision:)"}

    def __post_init__(self) -> None:
        if self.min_speed_vs_baseline is not None and not 0 <= self.min_speed_vs_baseline <= 1:
            raise FieldError("min_speed_vs_baseline", f"must be in [0, 1] or null, got {self.min_speed_vs_baseline}")
        if not self.length_buckets or self.length_buckets != sorted(set(self.length_buckets)):
            raise FieldError("length_buckets", f"must be strictly increasing, got {self.length_buckets}")
        if self.regressions_per_task < 0:
            raise FieldError("regressions_per_task", f"must be >= 0, got {self.regressions_per_task}")
