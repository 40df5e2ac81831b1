"""How variants are served: the reference backend, vLLM (its load test and time budget), the SLO search."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pipeline.schema.errors import FieldError
from pipeline.schema.traced import replaced


@dataclass(frozen=True)
class Reference:
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    num_threads: int = 0
    noise_arithmetic: Literal["auto", "bf16-operands", "float32"] = "auto"


@dataclass(frozen=True)
class VllmBench:
    concurrency: list[int] = field(default_factory=lambda: [1, 4])
    num_prompts: int = 16
    input_len: int = 128
    output_len: int = 32
    seed: int = 1234


@dataclass(frozen=True)
class VllmBudget:
    min_decode_tok_s: float | None = None
    max_wall_s: int | None = 210
    gpu_max_wall_s: int | None = 1200
    probe_tokens: int = 16
    max_total_s: int | None = None
    first_look_margin: float = 2.0

    RETIRED = {"min_speed_vs_baseline": "moved to report.min_speed_vs_baseline (decide applies it)"}

    def __post_init__(self) -> None:
        if self.min_decode_tok_s is not None and self.min_decode_tok_s < 0:
            raise FieldError("min_decode_tok_s", f"must be >= 0 or null, got {self.min_decode_tok_s}")
        for name in ("max_wall_s", "gpu_max_wall_s", "max_total_s"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise FieldError(name, f"must be positive or null, got {getattr(self, name)}")
        if self.first_look_margin < 1:
            raise FieldError("first_look_margin", f"must be >= 1, got {self.first_look_margin}")
        if self.probe_tokens < 2:
            raise FieldError("probe_tokens", f"must be >= 2, got {self.probe_tokens}")


@dataclass(frozen=True)
class Vllm:
    python: str = ".venv-vllm/bin/python"
    device: Literal["auto", "cpu", "gpu"] = "auto"
    dtype: str = "auto"
    max_model_len: int = 2048
    gpu_memory_utilization: float = 0.9
    cpu_memory_utilization: float = 0.25
    max_num_seqs: int | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    enforce_eager: bool = True
    startup_timeout_s: int = 600
    first_request_timeout_s: int = 30
    num_concurrent: int = 4
    bench: VllmBench = field(default_factory=VllmBench)
    gpu_num_concurrent: int = 64
    gpu_bench: VllmBench = field(default_factory=lambda: VllmBench(concurrency=[1, 8, 32, 64], num_prompts=200))
    budget: VllmBudget = field(default_factory=VllmBudget)

    def __post_init__(self) -> None:
        for name in ("tensor_parallel_size", "pipeline_parallel_size"):
            if getattr(self, name) < 1:
                raise FieldError(name, f"must be >= 1, got {getattr(self, name)}")

    def for_device(self, device: str) -> Vllm:
        """The settings a server on `device` ("cpu" or "gpu") runs with: the GPU load sizes on a GPU."""
        if device != "gpu":
            return self
        return replaced(self, num_concurrent=self.gpu_num_concurrent, bench=self.gpu_bench,
                        budget=replaced(self.budget, max_wall_s=self.budget.gpu_max_wall_s))


@dataclass(frozen=True)
class Slo:
    ttft_ms: float
    tpot_ms: float
    percentile: float = 99
    max_concurrency: int = 64
    max_probes: int = 6
    time_budget_s: int = 300

    def __post_init__(self) -> None:
        if self.ttft_ms <= 0 or self.tpot_ms <= 0:
            raise FieldError("", "ttft_ms and tpot_ms must be positive")
        if not 0 < self.percentile <= 100:
            raise FieldError("percentile", f"must be in (0, 100], got {self.percentile}")
        for name in ("max_concurrency", "max_probes", "time_budget_s"):
            if getattr(self, name) < 1:
                raise FieldError(name, f"must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class Serving:
    backend: Literal["auto", "reference", "vllm"] = "reference"
    reference: Reference = field(default_factory=Reference)
    vllm: Vllm = field(default_factory=Vllm)
    slo: Slo | None = None
    bandwidth_gbps: float | None = None

    def __post_init__(self) -> None:
        if self.bandwidth_gbps is not None and self.bandwidth_gbps <= 0:
            raise FieldError("bandwidth_gbps", f"must be positive or null, got {self.bandwidth_gbps}")
