"""A second, equally valid arithmetic for the same model: the engine's own noise, measured by stage
noise@<model> on the baseline (pipeline/stages/noise.py).

bfloat16 GEMMs on CPUs (AMX, AVX512-BF16) and GPUs round both operands to bfloat16 and accumulate in
float32; a float32 run does neither. `bf16_operands` reproduces that rounding on a float32 model for
every Linear layer: its weight rounded once, its input at each call; products of two bfloat16 values
are exact in float32, so what remains differs from a native bf16 GEMM only in summation order.
Attention, norms and the softmax stay float32. Used by the reference backend (pipeline/engines/reference/backend.py).
"""
from __future__ import annotations

BF16_OPERANDS = "bf16-operands"
FLOAT32 = "float32"
DESCRIBED = {BF16_OPERANDS: "every Linear's operands rounded to bfloat16, float32 accumulation",
             FLOAT32: "float32 throughout"}


def resolve(choice: str, compute_dtype: str) -> str:
    """serving.reference.noise_arithmetic for a run computing in `compute_dtype`: auto is the other one. Pure."""
    if choice != "auto":
        return choice
    return BF16_OPERANDS if compute_dtype == "float32" else FLOAT32


def bf16_operands(model) -> tuple[int, int]:
    """Round every float32 Linear's weight to bfloat16 in place and every Linear's input at each call;
    returns (layers with both operands rounded, quantized layers with their input only). A quantized
    Linear (bitsandbytes' int8/nf4 codes) keeps its own kernel: its weight is not a float32 operand to
    round, and replacing the kernel (LLM.int8's outlier split) would change the variant, not its arithmetic."""
    import torch

    def round_input(module, args):
        return (args[0].to(torch.bfloat16).to(args[0].dtype), *args[1:])

    both = inputs_only = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            if module.weight.dtype == torch.float32:
                with torch.no_grad():
                    module.weight.copy_(module.weight.to(torch.bfloat16).to(torch.float32))
                both += 1
            elif module.weight.dtype.is_floating_point:
                raise ValueError(f"bf16-operands needs a float32 model, this Linear is {module.weight.dtype}")
            else:
                inputs_only += 1
            module.register_forward_pre_hook(round_input)
    return both, inputs_only


def described(both: int, inputs_only: int) -> str:
    """info["arithmetic"]'s layer count for bf16-operands."""
    return f" ({both} layers" + (f"; {inputs_only} quantized layers: inputs only, their own weight kernel)"
                                  if inputs_only else ")")
