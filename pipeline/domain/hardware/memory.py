"""Memory arithmetic: weight bytes on disk and KV-cache bytes per token. Pure functions."""
from __future__ import annotations

from pathlib import Path

KV_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8_e4m3": 1, "fp8": 1}


def weight_bytes(checkpoint: str | Path) -> int:
    """Bytes of the weight files (safetensors/bin) in a checkpoint folder."""
    folder = Path(checkpoint)
    files = [p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file()]
    return sum(p.stat().st_size for p in files)


def kv_geometry(model_config: dict) -> dict[str, int]:
    """The four numbers the KV cache size depends on, from an HF config dict."""
    heads = model_config["num_attention_heads"]
    return {"num_hidden_layers": model_config["num_hidden_layers"], "num_attention_heads": heads,
            "num_key_value_heads": model_config.get("num_key_value_heads") or heads,
            "head_dim": model_config.get("head_dim") or model_config["hidden_size"] // heads,
            "hidden_size": model_config["hidden_size"]}


def kv_bytes_per_token(model_config: dict, kv_dtype_bytes: int) -> int:
    """2 (K and V) x layers x KV heads x head dim x bytes per element; GQA-aware through
    num_key_value_heads (falls back to num_attention_heads for plain multi-head attention)."""
    layers = model_config["num_hidden_layers"]
    heads = model_config["num_attention_heads"]
    kv_heads = model_config.get("num_key_value_heads") or heads
    head_dim = model_config.get("head_dim") or model_config["hidden_size"] // heads
    return 2 * layers * kv_heads * head_dim * kv_dtype_bytes


def kv_dtype_bytes(cache_dtype: str, model_dtype: str) -> int:
    """Bytes per KV element as vLLM stores it: 'auto' means the model's serving dtype."""
    name = model_dtype if cache_dtype == "auto" else cache_dtype
    if name not in KV_DTYPE_BYTES:
        raise ValueError(f"unknown KV cache dtype {name!r}")
    return KV_DTYPE_BYTES[name]


def mib(n: int | float) -> float:
    return n / 2**20
