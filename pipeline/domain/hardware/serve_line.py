"""vLLM command lines built from params. Pure and torch-free: stage decide prints them and
evaluate starts them (pipeline/engines/vllm/backend.py)."""
from __future__ import annotations

import shlex

VLLM_KV_DTYPE = {"auto": "auto", "fp8_e4m3": "fp8"}     # every other kv_modes cache_dtype is vLLM's own name


def vllm_serve_args(checkpoint: str, model_dtype: str, kv_cache_dtype: str,
                    extra: dict[str, object] | None = None) -> list[str]:
    """`vllm serve` argv for a variant. compressed-tensors checkpoints carry their quantization
    config, so vLLM detects the method: no --quantization flag is needed for them."""
    args = ["vllm", "serve", checkpoint, "--dtype", model_dtype,
            "--kv-cache-dtype", VLLM_KV_DTYPE.get(kv_cache_dtype, kv_cache_dtype)]
    for key, value in (extra or {}).items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            args += [flag, *map(str, value)] if value else []
        elif value not in (None, False):
            args += [flag, str(value)]
    return args


def as_shell(args: list[str]) -> str:
    return shlex.join(args)
