"""The reference backend's W8A8 layers computed as vLLM computes them (pipeline/engines/reference/w8a8_gemm.py),
in place of compressed-tensors' fake quantization.

transformers loads a compressed-tensors checkpoint with run_compressed=False: every quantized Linear holds
its weight dequantized to the model's dtype and a forward that fake-quantizes its input. `install`
replaces that forward, for each Linear whose scheme quantizes activations, with the W8A8 GEMM on the
checkpoint's own 8-bit codes and scales, read from its safetensors as vLLM reads them (the
dequantized copy in the model's dtype has lost them where that dtype is bfloat16). The scheme is read
per module and refused, naming the module and field, when w8a8_scheme does not implement it.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from pipeline.engines.reference import w8a8_gemm
from pipeline.quant.w8a8_scheme import W8A8SchemeError, scheme_of


def _tensor_files(checkpoint: Path) -> dict[str, Path]:
    index = checkpoint / "model.safetensors.index.json"
    if index.is_file():
        return {k: checkpoint / f for k, f in json.loads(index.read_text())["weight_map"].items()}
    from safetensors import safe_open

    found: dict[str, Path] = {}
    for f in sorted(checkpoint.glob("*.safetensors")):
        with safe_open(str(f), "pt") as st:
            found.update(dict.fromkeys(st.keys(), f))  # noqa: SIM118 - safe_open is not iterable
    return found


class _Reader:
    def __init__(self, checkpoint: Path):
        self.checkpoint, self.files, self.open = checkpoint, _tensor_files(checkpoint), {}

    def get(self, name: str, required: bool = True) -> torch.Tensor | None:
        from safetensors import safe_open

        f = self.files.get(name)
        if f is None:
            if required:
                raise W8A8SchemeError(f"{self.checkpoint}: no tensor {name!r}; the W8A8 layer needs it")
            return None
        if f not in self.open:
            self.open[f] = safe_open(str(f), "pt")
        return self.open[f].get_tensor(name)


def w8a8_modules(model) -> dict[str, tuple[torch.nn.Module, dict]]:
    """name -> (module, its quantization scheme as a dict) for every module whose scheme quantizes inputs."""
    found = {}
    for name, module in model.named_modules():
        scheme = getattr(module, "quantization_scheme", None)
        if scheme is not None and scheme.input_activations is not None:
            found[name] = (module, scheme.model_dump(mode="json"))
    return found


def _forward(op: w8a8_gemm.Operands):
    def forward(input: torch.Tensor) -> torch.Tensor:
        return w8a8_gemm.linear(input, op)
    return forward


def install(model, checkpoint: Path, impl: str) -> dict:
    """Route every W8A8 Linear of `model` (loaded from `checkpoint`) through the exact W8A8 GEMM (`impl`:
    w8a8_gemm.fastest_impl). Returns {"layers": n, "arithmetic": one line} ({} when there is none)."""
    modules = w8a8_modules(model)
    if not modules:
        return {}
    reader = _Reader(Path(checkpoint))
    seen = set()
    for name, (module, scheme) in modules.items():
        s = scheme_of(scheme, f"{checkpoint} module {name}")
        if not isinstance(module, torch.nn.Linear):
            raise W8A8SchemeError(f"{checkpoint} module {name}: {type(module).__name__}; W8A8 is implemented "
                                  "for Linear layers")
        op = w8a8_gemm.operands(
            s.kind, reader.get(f"{name}.weight"), reader.get(f"{name}.weight_scale"),
            reader.get(f"{name}.input_scale") if s.activations == "tensor" else None,
            module.bias, impl if s.kind == "int8" else "float32")
        if tuple(op.weight.shape) not in (tuple(module.weight.shape), tuple(module.weight.shape[::-1])):
            raise W8A8SchemeError(f"{checkpoint}: {name}.weight is {tuple(op.weight.shape)}, the layer "
                                  f"{tuple(module.weight.shape)}")
        module.qtier_w8a8 = op
        module.forward = _forward(op)
        seen.add(w8a8_gemm.describe(s.kind, s.activations))
    return {"layers": len(modules), "arithmetic": "; ".join(sorted(seen))}
