"""The reference engine's KV-cache formats: each one a quantize -> dequantize round trip of K or V, as
vLLM 0.32 writes the cache and reads it back, in pure torch. pipeline/domain/hardware/kv_formats.py says what
each stores and costs; this module says what attention reads. Read from vLLM's own code (the installed
package's files, named at each function); tests/test_kv_formats.py checks each against hand-computed
cases, tests/test_kv_formats_vllm.py against vLLM's own functions where they run on a CPU.

Every format here quantizes each (token, head) vector on its own, so the round trip of a cache position
never changes once written: kvcache.rounded applies it once per position of a reserved buffer.
One difference of timing: TurboQuant's first prefill chunk attends to the raw K/V (vLLM calls flash_attn
on the batch's own K/V, turboquant_attn.py `_prefill_attention`), a continuation chunk to the dequantized
cache plus its own raw K/V, decode to the cache alone; `RoundTrip.prefill_raw` says so to the attention.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import torch

from pipeline.domain.hardware import kv_formats as hardware_kv
from pipeline.domain.hardware.kv_formats import FORMATS, TQ_PRESETS
from pipeline.engines.reference import kvcache

ATTN_IMPL = "qtier_kvformat_sdpa"
E5M2_MAX = 57344.0


def cast(dtype: torch.dtype):
    def fn(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return x.to(dtype).to(x.dtype)
    return fn


def fp8_e5m2(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """As kvcache.fp8_round, through float8_e5m2 (saturating at its largest finite value, as vLLM's
    `scaled_convert` does with __NV_SATFINITE)."""
    y = (x.float() / scale).clamp(-E5M2_MAX, E5M2_MAX)
    return (y.to(torch.float8_e5m2).float() * scale).to(x.dtype)


def _half_away(x: torch.Tensor) -> torch.Tensor:
    """Round half away from zero, as the triton kernels do (x +- 0.5, then truncate)."""
    return torch.trunc(torch.where(x >= 0, x + 0.5, x - 0.5))


def int8_per_token_head(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """ops/triton_reshape_and_cache_flash.py `_reshape_cache_per_token_head` with the int8 cache:
    scale = max(absmax / 127, 1e-6) in float32, code = clamp(x * (1 / scale) rounded half away, -128,
    127); read back as code x scale."""
    xf = x.float()
    s = (xf.abs().amax(-1, keepdim=True) / 127.0).clamp(min=1e-6)
    q = _half_away(xf * (1.0 / s)).clamp(-128.0, 127.0)
    return (q * s).to(x.dtype)


def fp8_per_token_head(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """The same kernel with the fp8 cache: scale = max(absmax / 448, 1e-6), code = x * (1 / scale)
    clamped to +-448 and stored as float8_e4m3 (round to nearest)."""
    xf = x.float()
    s = (xf.abs().amax(-1, keepdim=True) / kvcache.FP8_E4M3_MAX).clamp(min=1e-6)
    q = (xf * (1.0 / s)).clamp(-kvcache.FP8_E4M3_MAX, kvcache.FP8_E4M3_MAX).to(torch.float8_e4m3fn).float()
    return (q * s).to(x.dtype)


def _largest_pow2_divisor(n: int) -> int:
    return n & -n


@functools.lru_cache(maxsize=None)
def rht_signs(d: int) -> torch.Tensor:
    """ops/int4_per_token_head.py `_get_rht_signs(d, 0)`: +-1 from a CPU generator seeded 0x9E3779B9."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(0x9E3779B9)
    return 2.0 * torch.bernoulli(torch.full((d,), 0.5), generator=gen) - 1.0


def hadamard(x: torch.Tensor) -> torch.Tensor:
    """Unnormalized Walsh-Hadamard transform of the last dim (a power of two): H x, H H = d I."""
    d, h = x.shape[-1], 1
    while h < d:
        v = x.reshape(*x.shape[:-1], d // (2 * h), 2, h)
        x = torch.stack([v[..., 0, :] + v[..., 1, :], v[..., 0, :] - v[..., 1, :]], dim=-2).reshape(x.shape)
        h *= 2
    return x


def rht(x: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """`single_rht`: H D x (inverse: D H x), block-diagonal over the largest power-of-two divisor of d."""
    d = x.shape[-1]
    b = _largest_pow2_divisor(d)
    if b < d:
        return rht(x.reshape(*x.shape[:-1], d // b, b), inverse).reshape(x.shape)
    signs = rht_signs(d).to(x.device, x.dtype)
    return hadamard(x) * signs if inverse else hadamard(x * signs)


def int4_per_token_head(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """ops/int4_per_token_head.py: `reshape_and_cache_int4` rotates (single_rht, cast back to the model's
    dtype), `_reshape_cache_int4_kernel` stores asymmetric 4-bit codes: scale = max((max - min) / 15,
    1e-6), zero point = clamp(-min / scale rounded half away, 0, 15), code = clamp(x / scale + zp rounded
    half away, 0, 15); the scale's low 4 mantissa bits are overwritten by the zero point (read back as
    bits & -16). Attention runs in the rotated basis (queries rotated, output rotated back, / b): the
    same as reading (code - zp) x scale rotated back and divided by b, which is what is returned."""
    y = rht(x.float()).to(x.dtype).float()
    lo, hi = y.amin(-1, keepdim=True), y.amax(-1, keepdim=True)
    s = ((hi - lo) / 15.0).clamp(min=1e-6)
    zp = _half_away(-lo / s).clamp(0.0, 15.0)
    q = _half_away(y * (1.0 / s) + zp).clamp(0.0, 15.0)
    stored = (s.view(torch.int32) & -16).view(torch.float32)
    deq = (q - zp) * stored
    return (rht(deq, inverse=True) / _largest_pow2_divisor(x.shape[-1])).to(x.dtype)


E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def e2m1_round(x: torch.Tensor) -> torch.Tensor:
    """Round to the nearest e2m1 value, ties to even mantissa, saturating at +-6 (`cvt.rn.satfinite`)."""
    a = x.abs().clamp(max=6.0)
    grid = E2M1.to(x.device)
    mids = (grid[:-1] + grid[1:]) / 2
    i = torch.bucketize(a, mids)                         # a > mid -> upper; a == mid -> lower index
    tie = (i < len(mids)) & (a == mids[i.clamp(max=len(mids) - 1)])
    odd = i % 2 == 1                                     # e2m1 codes 1, 3, 5, 7 have mantissa 1
    i = torch.where(tie & odd, i + 1, i)
    return grid[i] * torch.sign(x)


def nvfp4(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """vLLM's NVFP4 KV writer (global scale g = the layer's k_scale / v_scale, 1.0 uncalibrated): per 16
    values, sf = g x absmax / 6 rounded to e4m3; codes = e2m1(x / (sf / g)); read back as code x sf / g.
    The same arithmetic as model_executor/layers/quantization/utils/nvfp4_emulation_utils.py
    `ref_nvfp4_quant_dequant` (tests/test_kv_formats_vllm.py)."""
    xf = x.float()
    blocks = xf.reshape(*x.shape[:-1], x.shape[-1] // 16, 16)
    vmax = blocks.abs().amax(-1, keepdim=True)
    sf = (scale * (vmax * (1.0 / 6.0))).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).float()
    out_scale = torch.where(sf != 0, 1.0 / (sf * (1.0 / scale)), torch.zeros_like(sf))
    q = e2m1_round((blocks * out_scale).clamp(-6.0, 6.0))
    return (q * (sf / scale)).reshape(x.shape).to(x.dtype)


def _trapz(f, a: float, b: float, n: int = 200) -> float:
    h = (b - a) / n
    return (0.5 * (f(a) + f(b)) + sum(f(a + i * h) for i in range(1, n))) * h


@functools.lru_cache(maxsize=None)
def lloyd_max(d: int, bits: int) -> torch.Tensor:
    """TurboQuant's codebook (quantization/turboquant/centroids.py `get_centroids`): the Lloyd-Max
    quantizer of N(0, 1/d) with 2^bits levels, from levels spread evenly over +-3.5 sigma, cells cut at
    the midpoints (outer edges at +-10.5 sigma), centroids by trapezoid integration (200 steps), until no
    centroid moves by 1e-10 (200 rounds at most)."""
    n, var = 2 ** bits, 1.0 / d
    lo, hi = -3.5 * math.sqrt(var), 3.5 * math.sqrt(var)

    def pdf(x):
        return math.exp(-x * x / (2 * var)) / math.sqrt(2 * math.pi * var)
    c = [lo + (hi - lo) * (i + 0.5) / n for i in range(n)]
    for _ in range(200):
        edges = [lo * 3] + [(c[i] + c[i + 1]) / 2.0 for i in range(n - 1)] + [hi * 3]
        new = []
        for i in range(n):
            den = _trapz(pdf, edges[i], edges[i + 1])
            new.append(_trapz(lambda x: x * pdf(x), edges[i], edges[i + 1]) / den if den > 1e-15 else c[i])
        if max(abs(a - b) for a, b in zip(new, c)) < 1e-10:
            break
        c = new
    return torch.tensor(c, dtype=torch.float32)


@functools.lru_cache(maxsize=None)
def orthonormal_hadamard(d: int) -> torch.Tensor:
    """turboquant_attn.py `_build_hadamard`: Sylvester H / sqrt(d), symmetric, its own inverse."""
    return hadamard(torch.eye(d)) / math.sqrt(d)


def tq_keys(x: torch.Tensor, bits: int, norm_correction: bool) -> torch.Tensor:
    """ops/triton_turboquant_store.py (MSE path) and triton_turboquant_decode.py: norm = ||k||, y = k /
    (norm + 1e-8) @ H, index = the codebook cell y falls in (midpoints, >= goes up), stored norm in fp16;
    read back as norm x c @ H, c renormalized to unit length first with norm correction."""
    d = x.shape[-1]
    xf = x.float()
    norm = xf.norm(dim=-1, keepdim=True)
    H = orthonormal_hadamard(d).to(x.device)
    y = (xf / (norm + 1e-8)) @ H
    c = lloyd_max(d, bits).to(x.device)
    idx = torch.searchsorted((c[:-1] + c[1:]) / 2, y.contiguous(), right=True)
    vec = c[idx]
    if norm_correction:
        vec = vec / torch.sqrt((vec * vec).sum(-1, keepdim=True) + 1e-16)
    return (norm.half().float() * (vec @ H)).to(x.dtype)


def tq_values(x: torch.Tensor, bits: int) -> torch.Tensor:
    """`_store_quantized_value`: scale = (max - min) / (2^bits - 1) (at least 1e-8), code = clamp(int((v -
    min) / scale + 0.5), 0, 2^bits - 1); scale and min stored as fp16, read back as code x scale + min."""
    xf = x.float()
    lo, hi = xf.amin(-1, keepdim=True), xf.amax(-1, keepdim=True)
    top = 2 ** bits - 1
    s = (hi - lo) / float(top)
    s = torch.where(s > 1e-8, s, torch.full_like(s, 1e-8))
    q = torch.trunc((xf - lo) / s + 0.5).clamp(0, top)
    return (q * s.half().float() + lo.half().float()).to(x.dtype)


@dataclass(frozen=True)
class RoundTrip:
    """What attention reads of K and of V under one format."""
    name: str
    keys: Callable[[torch.Tensor, float], torch.Tensor]
    values: Callable[[torch.Tensor, float], torch.Tensor]
    prefill_raw: bool = False       # the first prefill chunk attends to raw K/V (TurboQuant)


def _turboquant(name: str) -> RoundTrip:
    kbits, vbits, nc = TQ_PRESETS[name]
    keys = (lambda x, s=1.0: kvcache.fp8_round(x)) if kbits == 8 else (lambda x, s=1.0: tq_keys(x, kbits, nc))
    return RoundTrip(name, keys, lambda x, s=1.0: tq_values(x, vbits), prefill_raw=True)


_SAME = {"float16": cast(torch.float16), "bfloat16": cast(torch.bfloat16), "fp8": kvcache.fp8_round,
         "fp8_e4m3": kvcache.fp8_round, "fp8_e5m2": fp8_e5m2, "int8_per_token_head": int8_per_token_head,
         "fp8_per_token_head": fp8_per_token_head, "int4_per_token_head": int4_per_token_head, "nvfp4": nvfp4}
ROUND_TRIPS: dict[str, RoundTrip] = {**{n: RoundTrip(n, f, f) for n, f in _SAME.items()},
                                     **{n: _turboquant(n) for n in TQ_PRESETS}}


PLAIN = RoundTrip("auto", lambda x, s=1.0: x, lambda x, s=1.0: x)       # a layer kept in the model's dtype


class NotSimulated(ValueError):
    """A format the reference engine cannot reproduce faithfully."""


def round_trip(name: str) -> RoundTrip:
    if name in ROUND_TRIPS:
        return ROUND_TRIPS[name]
    fmt = FORMATS.get(name)
    why = fmt.refusal if fmt else "not a KV cache dtype qtier knows"
    raise NotSimulated(f"kv cache dtype {name!r} is not simulated by the reference backend: {why}")


def _format_sdpa(module, query, key, value, attention_mask, **kwargs):
    # PLAIN before install(): arch.load's hand-back probe (arch.attention_handback) runs every layer while
    # loading, before the backend installs the format; install then sets every layer or raises
    trip: RoundTrip = getattr(module, "qtier_kv_round_trip", PLAIN)
    k_scale = getattr(module, "qtier_k_scale", 1.0)
    v_scale = getattr(module, "qtier_v_scale", 1.0)
    q_len, k_len = query.shape[2], key.shape[2]
    # TurboQuant: prefill reads its own chunk raw, decode (one query position) reads the cache
    upto = k_len - q_len if trip.prefill_raw and q_len > 1 else None
    return kvcache.grouped_sdpa(module, query, kvcache.rounded(key, k_scale, trip.keys, upto),
                                kvcache.rounded(value, v_scale, trip.values, upto), attention_mask, **kwargs)


def register() -> str:
    """Register the formats' attention with transformers; the name to pass as attn_implementation."""
    from transformers import AttentionInterface  # lazy: transformers
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(ATTN_IMPL, _format_sdpa)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTN_IMPL, sdpa_mask)
    return ATTN_IMPL


def install(model: torch.nn.Module, name: str, skip_layers: tuple = ()) -> int:
    """Give every attention module the format's round trip (a skipped layer index: the model's dtype,
    as --kv-cache-dtype-skip-layers keeps it, and so are the layers vLLM keeps for the format itself:
    domain kv_formats.implied_skip_layers). Returns how many layers are quantized."""
    trip, plain = round_trip(name), PLAIN
    implied = set(hardware_kv.implied_skip_layers(model.config.to_dict(), name)) if name != "auto" else set()
    n, i = 0, 0
    for module in model.modules():
        if hasattr(module, "k_proj") and hasattr(module, "v_proj"):
            skipped = i in skip_layers or i in implied
            module.qtier_kv_round_trip = plain if skipped else trip
            n += 0 if skipped else 1
            i += 1
    beyond = [j for j in skip_layers if j >= i]
    if beyond:
        raise NotSimulated(f"kv skip_layers: layer {beyond[0]} is beyond the model's {i} attention layers")
    return n
