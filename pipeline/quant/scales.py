"""Calibrated KV cache scales as a checkpoint carries them: llm-compressor's kv_cache_scheme writes one
k_scale and one v_scale per attention layer (`<module>.k_scale`), the tensors vLLM reads. No torch at
import: the kvscales stage reads these without loading a model.
"""
from __future__ import annotations

from pathlib import Path

SCALE_NAMES = ("k_scale", "v_scale")


def scales_by_module(tensors: dict[str, float]) -> dict[str, tuple[float, float]]:
    """attention module -> (k_scale, v_scale) from checkpoint tensor names `<module>.k_scale` /
    `<module>.v_scale` (llm-compressor's kv_cache_scheme, which vLLM reads). Pure."""
    found: dict[str, dict[str, float]] = {}
    for name, value in tensors.items():
        module, _, kind = name.rpartition(".")
        if kind in SCALE_NAMES:
            found.setdefault(module, {})[kind] = value
    half = sorted(m for m, d in found.items() if len(d) != 2)
    if half:
        raise ValueError(f"checkpoint has a k_scale without a v_scale (or the reverse) at {half[0]}")
    return {m: (d["k_scale"], d["v_scale"]) for m, d in sorted(found.items())}


def checkpoint_scales(checkpoint: str | Path) -> dict[str, tuple[float, float]]:
    """The per-layer k/v scales a checkpoint carries (per-tensor: one number each); {} when none."""
    from safetensors import safe_open

    tensors: dict[str, float] = {}
    for f in sorted(Path(checkpoint).glob("*.safetensors")):
        with safe_open(str(f), "pt") as st:
            for name in st.keys():  # noqa: SIM118 - safe_open is not iterable
                if name.endswith(tuple("." + n for n in SCALE_NAMES)):
                    t = st.get_tensor(name)
                    if t.numel() != 1:
                        raise ValueError(f"{name}: a per-tensor scale has one element, this one {t.numel()}")
                    tensors[name] = float(t.float().item())
    return scales_by_module(tensors)



def scales_summary(scales: dict[str, tuple[float, float]]) -> dict:
    """What a record keeps of the per-layer scales: their count and range. Pure."""
    if not scales:
        raise ValueError("the calibrated checkpoint has no k_scale/v_scale tensors")
    ks, vs = [k for k, _ in scales.values()], [v for _, v in scales.values()]
    return {"layers": len(scales), "k_scale": [min(ks), max(ks)], "v_scale": [min(vs), max(vs)]}
