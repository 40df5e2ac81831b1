"""Simulated fp8 (e4m3) KV cache for the reference backend.

vLLM's `--kv-cache-dtype fp8` stores keys and values as float8_e4m3 after dividing by a per-tensor
scale (k_scale / v_scale: 1.0 unless the checkpoint carries calibrated scales) and multiplies back
when attention reads them. Every attention read therefore sees fp8-rounded K/V, for the prompt and
for generated tokens alike. We reproduce that exactly by rounding K and V (after RoPE, as cached)
through float8_e4m3fn inside the attention function; rounding is per element and idempotent, so
re-rounding cached entries at each step equals storing them rounded once.
"""
from __future__ import annotations

import torch

FP8_E4M3_MAX = 448.0
ATTN_IMPL = "qtier_fp8kv_sdpa"


def fp8_round(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """Quantize-dequantize through float8_e4m3fn with saturation (as vLLM's cache write does)."""
    y = (x.float() / scale).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX)
    return (y.to(torch.float8_e4m3fn).float() * scale).to(x.dtype)


def _fp8kv_sdpa(module, query, key, value, attention_mask, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    k_scale = getattr(module, "qtier_k_scale", 1.0)
    v_scale = getattr(module, "qtier_v_scale", 1.0)
    return sdpa_attention_forward(module, query, fp8_round(key, k_scale), fp8_round(value, v_scale),
                                  attention_mask, **kwargs)


def register() -> str:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(ATTN_IMPL, _fp8kv_sdpa)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTN_IMPL, sdpa_mask)
    return ATTN_IMPL


def set_scales(model: torch.nn.Module, k_scale: float, v_scale: float) -> int:
    """Attach scales to every attention module that has a KV projection. Returns how many."""
    n = 0
    for module in model.modules():
        if hasattr(module, "k_proj") and hasattr(module, "v_proj"):
            module.qtier_k_scale = k_scale
            module.qtier_v_scale = v_scale
            n += 1
    return n
