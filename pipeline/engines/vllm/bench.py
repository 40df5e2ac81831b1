"""Reading what vLLM measured: `vllm bench serve`'s result file and the decode probe. Pure."""
from __future__ import annotations

from typing import Any

from pipeline.schema import Slo
from pipeline.engines.vllm import slo as slo_search

BENCH_KEYS = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "median_itl_ms", "p99_itl_ms",
              "output_throughput", "request_throughput", "request_goodput", "completed")


def bench_summary(raw: dict, slo: Slo | None = None) -> dict[str, float]:
    keys = list(BENCH_KEYS)
    if slo is not None:
        keys += [slo_search.percentile_key(m, slo.percentile) for m in ("ttft", "tpot")]
    return {k: raw[k] for k in keys if raw.get(k) is not None}


def too_slow(probe: dict[str, Any], floor: float | None) -> str | None:
    """The reason to skip the load test, or None. Pure."""
    speed = probe.get("tokens_per_s")
    if speed is None and probe.get("unknown"):
        return f"decode speed unknown: {probe['unknown']} (decode probe)"
    if speed is None:
        return (f"too slow here: a {probe.get('tokens')}-token request did not finish in {probe.get('timeout_s')} s "
                "(decode probe)")
    if floor is not None and speed < floor:
        return f"too slow here: {speed:.1f} tok/s vs {floor:g} (serving.vllm.budget.min_decode_tok_s)"
    return None

