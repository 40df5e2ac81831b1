"""Which W8A8 schemes the reference backend computes as the serving engine does (pipeline/engines/reference/w8a8.py),
read from a compressed-tensors checkpoint's `quantization_config`. Pure and torch-free, so a scheme the
backend does not implement is refused before any model loads:

    from pipeline.quant.w8a8_scheme import checkpoint_schemes
    checkpoint_schemes(config["quantization_config"])   # {group: W8A8Scheme}, or W8A8SchemeError

Implemented: 8-bit int or fp8 (e4m3) weights and activations of one type, symmetric, weights per output
channel or per tensor (static), activations per token at run time (dynamic) or per tensor from a
calibrated scale (static). That is what vLLM's int8 and fp8 W8A8 kernels take from compressed-tensors
(symmetric activations only here: an asymmetric one needs the zero-point correction term, not built).
"""
from __future__ import annotations

from dataclasses import dataclass

FORMATS = {"int": "int-quantized", "float": "float-quantized"}   # weights stored as int8 / float8_e4m3fn
KINDS = {"int": "int8", "float": "fp8"}


class W8A8SchemeError(ValueError):
    """A quantization scheme the reference backend's W8A8 arithmetic does not implement."""


@dataclass(frozen=True)
class W8A8Scheme:
    kind: str            # int8 | fp8
    weights: str         # channel | tensor: one scale per output row, or one for the matrix
    activations: str     # token (dynamic, one scale per token) | tensor (static, the checkpoint's input_scale)


def _args(d: dict, role: str, where: str) -> dict:
    def refuse(field: str, wanted: str) -> W8A8SchemeError:
        return W8A8SchemeError(f"{where}: {role}.{field} = {d.get(field)!r}; the reference backend's W8A8 "
                               f"arithmetic implements {wanted}")

    if d.get("num_bits") != 8:
        raise refuse("num_bits", "8")
    if d.get("type") not in KINDS:
        raise refuse("type", "int or float")
    if d.get("symmetric") is not True:
        raise refuse("symmetric", "true (no zero points)")
    if role == "weights":
        if d.get("strategy") not in ("channel", "tensor"):
            raise refuse("strategy", "weights per channel or per tensor")
        if d.get("dynamic") is not False:
            raise refuse("dynamic", "static weights")
    elif d.get("strategy") not in ("token", "tensor"):
        raise refuse("strategy", "dynamic per-token or static per-tensor activations")
    elif d.get("dynamic") is not (d["strategy"] == "token"):
        raise refuse("dynamic", "dynamic per-token or static per-tensor activations")
    for field in ("group_size", "block_structure", "scale_dtype"):
        if d.get(field) is not None:
            raise refuse(field, f"{role} without {field}")
    # GPTQ's activation order is the order it quantized the columns in; without groups (per channel or
    # per tensor) nothing of it is stored (no g_idx): the weights are in their own order. "group" and
    # "weight" orders store a permutation only with groups, refused above; any other value is unknown.
    if d.get("actorder") not in (None, "static", "weight", "group"):
        raise refuse("actorder", f"{role} with no stored column order")
    return d


def scheme_of(group: dict, where: str, fmt: str | None = None) -> W8A8Scheme | None:
    """The W8A8 scheme of one config group (or one module's quantization_scheme), None when it does not
    quantize activations (weight-only: compressed-tensors' decompressed weights serve it as before).
    `fmt`: the checkpoint-level format when the group names none. Raises W8A8SchemeError naming the field."""
    acts = group.get("input_activations")
    if not acts:
        return None
    if group.get("output_activations"):
        raise W8A8SchemeError(f"{where}: output_activations is set; the reference backend's W8A8 arithmetic "
                              "quantizes weights and inputs only")
    if not group.get("weights"):
        raise W8A8SchemeError(f"{where}: input_activations without weights; the reference backend's W8A8 "
                              "arithmetic needs quantized weights")
    w = _args(group["weights"], "weights", where)
    a = _args(acts, "input_activations", where)
    if w["type"] != a["type"]:
        raise W8A8SchemeError(f"{where}: weights.type {w['type']!r} and input_activations.type {a['type']!r} "
                              "differ; the reference backend's W8A8 arithmetic multiplies one type")
    stored = group.get("format") or fmt
    if stored != FORMATS[w["type"]]:
        raise W8A8SchemeError(f"{where}: format {stored!r}; the reference backend reads {w['type']} W8A8 weights "
                              f"as {FORMATS[w['type']]!r} (8-bit codes and their scales)")
    return W8A8Scheme(KINDS[w["type"]], w["strategy"], a["strategy"])


def checkpoint_schemes(quantization_config: dict) -> dict[str, W8A8Scheme]:
    """config group -> its W8A8 scheme, for every group that quantizes activations ({} for none).
    Raises W8A8SchemeError on the first group, transform or sparsity the arithmetic does not implement."""
    qc = quantization_config or {}
    groups = qc.get("config_groups") or {}
    found = {name: s for name, g in groups.items()
             if (s := scheme_of(g or {}, f"quantization_config.config_groups.{name}", qc.get("format")))}
    if found:
        for key in ("transform_config", "sparsity_config"):
            if qc.get(key):
                raise W8A8SchemeError(f"quantization_config.{key} is set; the reference backend's W8A8 "
                                      "arithmetic reads dense, untransformed weights")
    return found
