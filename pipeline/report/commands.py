"""The `vllm serve` line the report recommends for a row, optionally sized for one target GPU. Pure
and torch-free (pipeline/domain/hardware/serve_line.py builds the argv)."""
from __future__ import annotations

from pipeline.domain.hardware import gpus, serve_line
from pipeline.schema import Memory
from pipeline.scoring.planning.planner import Plan
from pipeline.scoring.verdict.rows import Row

MAX_NUM_SEQS_CAP = 256   # vLLM's default --max-num-seqs; the planner never suggests more


def serve_command(row: Row, model_dtype: str, cache_dtype: str, budget: Memory | None = None,
                  plan: Plan | None = None) -> str:
    """`cache_dtype`: the row's KV mode's (kv_modes.<kv>.cache_dtype); with a budget and a plan, the
    command carries that GPU's --max-model-len, --gpu-memory-utilization and --max-num-seqs."""
    if row.facts.backend == "endpoint":      # someone else's server: nothing to start; llama.cpp's: its line
        s = row.facts.serving
        return s.command or f"# already served: {s.served_model} at {s.base_url}"
    kind = gpus.kind(row.facts.hardware)
    extra: dict[str, object] = {"quantization": kind.vllm_quantization_flag,
                                "kv_cache_dtype_skip_layers": list(row.facts.kv_skip_layers)}
    if budget is not None and plan is not None:
        extra.update(max_model_len=budget.max_model_len, gpu_memory_utilization=budget.gpu_memory_utilization,
                     max_num_seqs=max(1, min(MAX_NUM_SEQS_CAP, int(plan.max_concurrency))))
    return serve_line.as_shell(serve_line.vllm_serve_args(row.facts.serve_path, model_dtype, cache_dtype, extra))
