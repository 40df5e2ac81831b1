"""The memory bill: does a variant fit a target GPU, how many KV tokens, how much concurrency. Pure.

Sized the way vLLM sizes its KV cache (vLLM docs, "Conserving Memory" / engine startup log):
  available KV bytes = total x gpu_memory_utilization - weights - peak activations - non-torch memory
  KV blocks          = floor(available / (block_size x KV bytes per token))
  KV capacity        = blocks x block_size tokens;  max concurrency = capacity / max_model_len
Decode roofline: a decode step reads every weight once plus each sequence's KV cache, so
  tokens/s (one sequence) <= bandwidth / (weight bytes + context x KV bytes per token).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from pipeline.domain.result.facts import Roofline, Throughput
from pipeline.schema import Memory, TargetGpu

GIB = 2**30


@dataclass(frozen=True)
class Plan:
    gpu: str
    fits: bool
    available_kv_bytes: int
    kv_tokens: int
    max_concurrency: float
    roofline_tokens_per_s: float
    reason: str = ""


@dataclass(frozen=True)
class Planned:
    """Every variant's plan on every target GPU, with the budget (params memory.*) they were made for."""
    budget: Memory
    plans: dict[tuple[str, str], dict[str, Plan]]       # (model, variant) -> GPU name -> plan

    @property
    def gpus(self) -> dict[str, TargetGpu]:
        """name -> GPU, as params memory.target_gpus gives them."""
        return self.budget.target_gpus

    def for_model(self, model: str) -> dict[str, dict[str, Plan]]:
        """variant -> GPU name -> plan, for one model's variants."""
        return {v: p for (m, v), p in self.plans.items() if m == model}


def kv_capacity_tokens(available_bytes: float, kv_bytes_per_token: int, block_size: int) -> int:
    if available_bytes <= 0:
        return 0
    blocks = math.floor(available_bytes / (block_size * kv_bytes_per_token))
    return blocks * block_size


def decode_roofline(bandwidth_gbps: float, weight_bytes: int, kv_bytes_per_token: int, context: int) -> float:
    return bandwidth_gbps * 1e9 / (weight_bytes + context * kv_bytes_per_token)


def decode_roofline_fraction(tokens_per_s: float, weight_bytes: int, bandwidth_gbps: float) -> float:
    """Measured single-stream decode speed as a share of its memory-bandwidth roofline: each token reads
    every weight once, so the ceiling is bandwidth / weight bytes tokens/s (KV reads ignored: a short
    context at concurrency 1). Far below 1: the kernel, not the memory, sets the pace."""
    return tokens_per_s / (bandwidth_gbps * 1e9 / weight_bytes)


def plan(name: str, gpu: TargetGpu, budget: Memory, weight_bytes: int, kv_bytes_per_token: int,
         tp: int = 1, pp: int = 1, kv_heads: int | None = None) -> Plan:
    """GPU `name`'s plan for one variant served on tp x pp of them (tensor, pipeline parallel): does each
    shard fit, how many KV tokens, how much concurrency. A shard holds weights / (tp x pp) and, per
    token, the KV of its pp-th of the layers and of its share of the KV heads: vLLM splits the heads
    over tp and replicates them when tp exceeds them (kv_heads; None: at least tp)."""
    total = gpu.memory_gib * GIB * budget.gpu_memory_utilization
    reserve = (budget.activation_peak_gib + budget.non_torch_overhead_gib) * GIB
    shard = weight_bytes / (tp * pp)
    split = tp if kv_heads is None else min(tp, kv_heads)
    kv_shard = kv_bytes_per_token / (pp * split)
    available = total - shard - reserve
    # one token's decode reads every shard's weights and KV once; tensor-parallel shards read side by side
    roof = decode_roofline(gpu.bandwidth_gbps, weight_bytes / tp, kv_bytes_per_token / split, budget.max_model_len // 2)
    layout = f" per GPU of tp {tp} x pp {pp}" if tp * pp > 1 else ""
    if shard > total:
        return Plan(name, False, 0, 0, 0.0, roof,
                    f"weights {shard / GIB:.1f} GiB{layout} exceed the {total / GIB:.1f} GiB budget")
    tokens = kv_capacity_tokens(available, math.ceil(kv_shard), budget.block_size)
    if tokens < budget.max_model_len:
        return Plan(name, False, max(int(available), 0), tokens, tokens / budget.max_model_len, roof,
                    f"KV cache holds {tokens} tokens{layout}, less than one max_model_len ({budget.max_model_len})")
    return Plan(name, True, int(available), tokens, tokens / budget.max_model_len, roof)


def decode_tokens_per_s(throughput: Throughput) -> tuple[float | None, str]:
    """Single-stream decode speed: 1000 / median TPOT of the concurrency-1 bench run, else the decode
    probe's tokens/s. (speed, where it comes from)."""
    tpot = throughput.bench.get("1", {}).get("median_tpot_ms")       # vLLM's figures at concurrency 1
    if tpot:
        return round(1000 / tpot, 2), "1000 / median TPOT, vllm bench serve at concurrency 1"
    return throughput.decode_probe_tokens_per_s, "decode probe"


def roofline(throughput: Throughput, weight_bytes: int | None, bandwidth_gbps: float | None) -> Roofline:
    """Measured c=1 decode speed against bandwidth / weight bytes (decode_roofline_fraction)."""
    speed, source = decode_tokens_per_s(throughput)
    out = Roofline(source, speed, bandwidth_gbps)
    if bandwidth_gbps is None:
        return replace(out, unknown="bandwidth unknown (serving.bandwidth_gbps)")
    if not weight_bytes:
        return replace(out, unknown="weight bytes unknown (quantized at load time)")
    if speed is None:
        return replace(out, unknown="no decode speed measured")
    return replace(out, roofline_tokens_per_s=round(bandwidth_gbps * 1e9 / weight_bytes, 1),
                   fraction=round(decode_roofline_fraction(speed, weight_bytes, bandwidth_gbps), 4))
