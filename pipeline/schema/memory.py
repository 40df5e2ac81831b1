"""The memory planner's params: target GPUs and vLLM's KV-cache sizing (pipeline/scoring/planning/planner.py)."""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.schema.errors import FieldError


@dataclass(frozen=True)
class TargetGpu:
    memory_gib: float
    bandwidth_gbps: float
    compute_capability: float

    def __post_init__(self) -> None:
        if self.memory_gib <= 0 or self.bandwidth_gbps <= 0:
            raise FieldError("", "memory_gib and bandwidth_gbps must be positive")


@dataclass(frozen=True)
class Memory:
    target_gpus: dict[str, TargetGpu]
    max_model_len: int = 4096
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    activation_peak_gib: float = 1.0
    non_torch_overhead_gib: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.gpu_memory_utilization <= 1:
            raise FieldError("gpu_memory_utilization", f"must be in (0, 1], got {self.gpu_memory_utilization}")
