"""The KV-cache formats vLLM serves (`--kv-cache-dtype`), as data: what one token of one layer costs in
bytes, scales and metadata included, how the reference engine simulates it, and whether vLLM's CPU build
serves it. Pure; pipeline/engines/reference/kv_formats.py holds the torch round trips this table names.

Bytes, as vLLM 0.32 sizes its pages (vllm/v1/kv_cache_interface.py AttentionSpec.page_size_bytes, with
the backend's `customize_spec` packing):
  auto / float16 / bfloat16   2 x head_dim x element bytes per KV head (K and V)
  fp8, fp8_e4m3, fp8_e5m2     2 x head_dim x 1; one float32 k_scale / v_scale per layer (not per token)
  int8/fp8_per_token_head     2 x (head_dim x 1 + 4): data plus one float32 scale per token, head and side
                              (TritonAttentionBackend.customize_spec)
  int4_per_token_head         2 x (head_dim / 2 + 4): two nibbles a byte; the float32 scale carries the
                              4-bit zero point in its low mantissa bits (ops/int4_per_token_head.py)
  nvfp4                       2 x (head_dim / 2 + head_dim / 16): e2m1 nibbles plus one e4m3 scale per 16
                              values (utils/torch_utils.nvfp4_kv_cache_full_dim); k_scale/v_scale per layer
  turboquant_*                TurboQuantConfig.slot_size_aligned: key (fp8 bytes, or Lloyd-Max indices +
                              an fp16 norm) + value (uniform codes + fp16 scale + fp16 zero), rounded even
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from pipeline.paths import HARDWARE_TABLE
from pipeline.schema.yaml_io import safe_load

# TurboQuant presets (vllm/model_executor/layers/quantization/turboquant/config.py TQ_PRESETS):
# key bits (8 = fp8 keys, no rotation), value bits, norm correction
TQ_PRESETS = {"turboquant_k8v4": (8, 4, False), "turboquant_4bit_nc": (4, 4, True),
              "turboquant_k3v4_nc": (3, 4, True), "turboquant_3bit_nc": (3, 3, True)}

ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
CPU_ATTENTION = "vLLM's CPU attention backend (v1/attention/backends/cpu_attn.py supported_kv_cache_dtypes)"


@dataclass(frozen=True)
class KvFormat:
    """One `--kv-cache-dtype` value."""
    name: str
    family: str                 # model | fp8 | per_token_head | nvfp4 | turboquant | unsimulated
    layout: str                 # what one token of one KV head stores
    simulation: str | None      # how the reference engine reproduces it; None: it refuses the format
    refusal: str = ""           # why the reference engine refuses it (simulation None)
    vllm_name: str = ""         # what `vllm serve --kv-cache-dtype` is given ("" = name)

    @property
    def flag(self) -> str:
        return self.vllm_name or self.name

    @property
    def simulated(self) -> bool:
        return self.simulation is not None


def _f(name, family, layout, simulation, refusal="", vllm_name=""):
    return KvFormat(name, family, layout, simulation, refusal, vllm_name)


_PTH = "per (token, head, side): absmax / {q} -> one float32 scale; {how}"
_TQ = ("keys: {keys}; values: min/max uniform {vb}-bit codes with fp16 scale and zero; the first prefill "
       "chunk attends to raw K/V (flash_attn), decode reads the cache")
FORMATS: dict[str, KvFormat] = {f.name: f for f in (
    _f("auto", "model", "K, V in the model's dtype", "none (the model's dtype)"),
    _f("float16", "model", "K, V in float16", "K/V cast through float16"),
    _f("bfloat16", "model", "K, V in bfloat16", "K/V cast through bfloat16"),
    _f("fp8", "fp8", "K, V as float8_e4m3 / scale (per layer)", "K/V / scale rounded to nearest e4m3, saturated"),
    _f("fp8_e4m3", "fp8", "K, V as float8_e4m3 / scale (per layer)",
       "K/V / scale rounded to nearest e4m3, saturated", vllm_name="fp8"),
    _f("fp8_e5m2", "fp8", "K, V as float8_e5m2 / scale (per layer)", "K/V / scale rounded to nearest e5m2, saturated"),
    _f("int8_per_token_head", "per_token_head", "int8 codes + float32 scale per head",
       _PTH.format(q=127, how="codes rounded half away from zero, clamped to [-128, 127]")),
    _f("fp8_per_token_head", "per_token_head", "e4m3 codes + float32 scale per head",
       _PTH.format(q=448, how="codes rounded to nearest e4m3")),
    _f("int4_per_token_head", "per_token_head", "4-bit codes (asymmetric) + float32 scale holding the zero point",
       "randomized Hadamard rotation (signs from vLLM's seed), asymmetric 4-bit codes with the zero point "
       "in the scale's low mantissa bits, rotated back"),
    _f("nvfp4", "nvfp4", "e2m1 codes + one e4m3 scale per 16 values (+ per-layer k/v scale)",
       "per 16 values: scale = k_scale x absmax / 6 rounded to e4m3, codes rounded to nearest e2m1"),
    _f("nvfp4_4over6", "unsimulated", "as nvfp4; each block's scale picked from absmax/6 and absmax/4", None,
       "its 4/6 scale search runs inside the CUDA writer, which the installed vLLM package does not carry: "
       "not read, so not simulated"),
    _f("turboquant_k8v4", "turboquant", "fp8 keys + 4-bit values", _TQ.format(keys="float8_e4m3, no scale", vb=4)),
    _f("turboquant_4bit_nc", "turboquant", "4-bit Lloyd-Max keys + fp16 norm, 4-bit values",
       _TQ.format(keys="norm, Hadamard rotation, Lloyd-Max 4-bit codebook, renormalized", vb=4)),
    _f("turboquant_k3v4_nc", "turboquant", "3-bit Lloyd-Max keys + fp16 norm, 4-bit values",
       _TQ.format(keys="norm, Hadamard rotation, Lloyd-Max 3-bit codebook, renormalized", vb=4)),
    _f("turboquant_3bit_nc", "turboquant", "3-bit Lloyd-Max keys + fp16 norm, 3-bit values",
       _TQ.format(keys="norm, Hadamard rotation, Lloyd-Max 3-bit codebook, renormalized", vb=3)),
    _f("ultraquant_4bit", "unsimulated", "e2m1 codes + UE8M0 group scales, Hadamard-rotated keys", None,
       "not yet read into qtier (vllm/v1/attention/ops/ultraquant/)"),
    _f("fp8_inc", "unsimulated", "Intel Gaudi fp8", None, "an Intel Gaudi (HPU) format"),
    _f("fp8_ds_mla", "unsimulated", "DeepSeek MLA latent cache", None, "an MLA-only layout (DeepSeek)"),
    _f("nvfp4_ds_mla", "unsimulated", "DeepSeek MLA latent cache, nvfp4", None, "an MLA-only layout (DeepSeek)"),
)}

# The formats vLLM 0.32's CPU attention backend accepts (CPU_ATTENTION): the vLLM backend serves these on a
# CPU; every other one it refuses before starting a server.
CPU_SERVED = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")


def tq_bytes(name: str, head_dim: int) -> tuple[int, int]:
    """(key bytes, value bytes) of one TurboQuant slot (TurboQuantConfig.key/value_packed_size)."""
    kbits, vbits, _ = TQ_PRESETS[name]
    key = head_dim if kbits == 8 else math.ceil(head_dim * kbits / 8) + 2
    return key, math.ceil(head_dim * vbits / 8) + 4


def head_bytes(name: str, head_dim: int, model_dtype: str) -> int:
    """Bytes one token stores for one KV head, K and V together, scales and metadata included."""
    fmt = FORMATS[name]
    if fmt.family == "model":
        return 2 * head_dim * ELEMENT_BYTES[model_dtype if name == "auto" else name]
    if fmt.family == "fp8":
        return 2 * head_dim
    if name in ("int8_per_token_head", "fp8_per_token_head"):
        return 2 * (head_dim + 4)
    if name == "int4_per_token_head":
        return 2 * (head_dim // 2 + 4)
    if name.startswith("nvfp4") and name != "nvfp4_ds_mla":
        return 2 * (head_dim // 2 + head_dim // 16)
    if fmt.family == "turboquant":
        slot = sum(tq_bytes(name, head_dim))
        return slot + slot % 2
    raise ValueError(f"{name}: qtier has no byte count for it ({fmt.refusal})")


# vLLM keeps a dense model's first and last TQ_BOUNDARY attention layers in the model's dtype under every
# TurboQuant preset, whatever --kv-cache-dtype-skip-layers says (vllm/engine/arg_utils.py adds
# TurboQuantConfig.get_boundary_skip_layers, n=2, at most half the layers; none for a hybrid model)
TQ_BOUNDARY = 2
ATTENTION_TYPES = ("full_attention", "sliding_attention", "attention")


def implied_skip_layers(model_config: dict, cache_dtype: str) -> tuple[int, ...]:
    """The layers vLLM itself keeps in the model's dtype under `cache_dtype`, beside any skip_layers."""
    if not cache_dtype.startswith("turboquant_"):
        return ()
    if any(t not in ATTENTION_TYPES for t in model_config.get("layer_types") or ()):
        return ()                   # a hybrid (attention + Mamba or linear attention): vLLM protects none
    layers = model_config["num_hidden_layers"]
    n = min(TQ_BOUNDARY, layers // 2)
    return tuple(sorted(set(range(n)) | set(range(layers - n, layers))))


def kept_layers(model_config: dict, cache_dtype: str, skip_layers: tuple = ()) -> tuple[int, ...]:
    """Every layer served in the model's dtype: skip_layers (indices) and the format's implied ones."""
    layers = model_config["num_hidden_layers"]
    named = {i for i in skip_layers if isinstance(i, int) and 0 <= i < layers}
    return tuple(sorted(named | set(implied_skip_layers(model_config, cache_dtype))))


def bytes_per_token(model_config: dict, cache_dtype: str, model_dtype: str, skip_layers: tuple = ()) -> int:
    """KV bytes one token costs across the model: quantized layers at the format's bytes, the layers kept
    (skip_layers and the format's implied ones, kept_layers) at the model's dtype. GQA-aware
    (num_key_value_heads)."""
    heads = model_config["num_attention_heads"]
    kv_heads = model_config.get("num_key_value_heads") or heads
    head_dim = model_config.get("head_dim") or model_config["hidden_size"] // heads
    layers = model_config["num_hidden_layers"]
    skipped = len(kept_layers(model_config, cache_dtype, skip_layers)) if cache_dtype != "auto" else 0
    return kv_heads * ((layers - skipped) * head_bytes(cache_dtype, head_dim, model_dtype)
                       + skipped * head_bytes("auto", head_dim, model_dtype))


def overhead(name: str, head_dim: int) -> str:
    """The scale and metadata bytes per head, in words."""
    fmt = FORMATS[name]
    if fmt.family == "per_token_head":
        return "2 x 4 B float32 scales"
    if name in ("nvfp4", "nvfp4_4over6"):
        return f"2 x {head_dim // 16} B e4m3 block scales"
    if fmt.family == "turboquant":
        k, v = tq_bytes(name, head_dim)
        keys = "" if TQ_PRESETS[name][0] == 8 else "2 B fp16 norm + "
        slot = k + v
        return keys + "4 B fp16 scale/zero" + (" + 1 B padding" if slot % 2 else "")
    if fmt.family == "fp8":
        return "per-layer scale only"
    return "none"


@functools.lru_cache(maxsize=None)
def kernel_table() -> dict[str, dict]:
    """--kv-cache-dtype -> the GPUs vLLM serves it on (pipeline/data/vllm_hardware.yaml kv_cache_dtypes)."""
    return safe_load(Path(HARDWARE_TABLE).read_text())["kv_cache_dtypes"]


def served_on(name: str, compute_capability: float, head_dim: int) -> bool:
    """Whether vLLM's GPU attention backends serve format `name` at this compute capability and head_dim."""
    row = kernel_table().get(name)
    if row is None:
        return False
    low = row["min_compute_capability"]
    if head_dim == 64:
        low = max(low, row.get("head_dim_64_min_compute_capability", low))
    return low - 1e-9 <= compute_capability <= row.get("max_compute_capability", 99.0) + 1e-9
