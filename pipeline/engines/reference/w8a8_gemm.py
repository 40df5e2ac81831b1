"""W8A8 linear layers computed as vLLM's kernels compute them, for the reference backend
(pipeline/engines/reference/w8a8.py installs them; benchmarks/w8a8_gemm.py times them; tests/test_w8a8_gemm.py).

int8 (vLLM's CPU int8 kernel, csrc/cpu/dnnl_kernels.cpp; its CUDA one takes 127 / max|x| as the
reciprocal, which can differ in the last bit, and the AMX sgl-kernel path is not checked): activations quantized
per token at run time (scale = max|x| / 127 in float32; x * float(1 / scale), clamped to [-128, 127],
rounded half to even) or with the checkpoint's static per-tensor scale; int8 x int8 products summed
exactly (int32 in vLLM); the sum converted to float32 and multiplied by the weight scale, then by the
activation scale, in float32; the layer's dtype only at the end.

fp8 (vLLM's QuantFP8 and its channel-wise torch fp8 kernel): scale = max|x| / 448 (at least
1 / (448 * 512)), x * (1 / scale) clamped to +-448 and rounded to float8_e4m3fn; the products of two
e4m3 values are exact in float32 and accumulate in float32; then x scale, then weight scale.

compressed-tensors' fake quantization (what the reference ran before) instead multiplies dequantized
values in the model's dtype (bfloat16 where the CPU has it: every product rounded to 8 bits) and sets
int8 activation scales to max|x| / 127.5.

Exact integer GEMM, two implementations with identical results (tests/test_w8a8_gemm.py):
- `float32`: BLAS on int8-valued float32. |product| <= 128 * 128 = 2**14, so any partial sum of at most
  EXACT_K = 1024 products is an integer of magnitude <= 2**24, which float32 represents exactly: every
  multiply-add of the GEMM, in whatever order BLAS sums, is exact. Longer rows are cut into chunks of
  <= 1024 whose exact results add in float64 (exact below 2**53).
- `int_mm`: torch._int_mm (int8 x int8 -> int32). oneDNN's int8 GEMM on AMX: 2.1 TOP/s against
  0.4 TFLOP/s for float32 on an Intel Xeon with AMX (issue 19); on an AMD EPYC with AVX512-VNNI 3.4x
  faster than the float32 path (as fast as a dense bfloat16 GEMM); on an AVX2-only CPU 25-50x slower
  (benchmarks/w8a8_gemm.py). Which one a CPU runs faster is measured, not read off its flags:
  `fastest_impl` times both at the model's shape when a session loads (the two give identical
  results, so the choice changes speed only).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

EXACT_K = 1024                 # 1024 * 128 * 128 = 2**24: the longest float32-exact int8 dot product
INT8_MIN, INT8_MAX = -128.0, 127.0
FP8_MAX = 448.0                # float8_e4m3fn
FP8_MIN_SCALE = 1.0 / (FP8_MAX * 512.0)
IMPLS = ("float32", "int_mm")


def check_float32_exact() -> None:
    """float32 GEMMs here must be IEEE float32: torch's "high"/"medium" precision lets oneDNN and cuBLAS
    multiply in bfloat16 or TF32, which would round the int8 products and break the exactness."""
    if torch.get_float32_matmul_precision() != "highest" or torch.backends.mkldnn.matmul.fp32_precision not in ("none", "ieee"):
        raise RuntimeError("the exact W8A8 GEMM needs float32 matmuls at full precision: "
                           "torch.set_float32_matmul_precision('highest')")


def fastest_impl(k: int, n: int, timer=None, rows: int = 256, repeats: int = 3) -> tuple[str, dict[str, float]]:
    """(the faster exact int8 GEMM here, ms per call of each) for [rows, k] x [n, k]^T: each timed
    best-of-`repeats` after one warm-up call (oneDNN builds its kernel on the first). `timer(impl)`
    replaces the measurement (tests)."""
    def measured(impl: str) -> float:
        gen = torch.Generator().manual_seed(0)
        w = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=gen)
        op = operands("int8", w, torch.ones(n), None, None, impl)
        x = torch.randint(-128, 128, (rows, k), generator=gen).to(torch.float32)
        int8_gemm(x, op)
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            int8_gemm(x, op)
            best = min(best, time.perf_counter() - t0)
        return best * 1e3
    ms = {impl: round((timer or measured)(impl), 3) for impl in IMPLS}
    return min(IMPLS, key=lambda i: (ms[i], IMPLS.index(i))), ms


@dataclass
class Operands:
    """One Linear's quantized weight as the GEMM reads it. weight: int8 codes as float32 [N, K] (`float32`),
    int8 [K, N] (`int_mm`), or the e4m3 values as float32 [N, K] (fp8)."""
    kind: str                        # int8 | fp8
    impl: str                        # float32 | int_mm (int8 only)
    weight: torch.Tensor
    weight_scale: torch.Tensor       # float32 [N] or [1]
    input_scale: torch.Tensor | None  # float32 [1]: static per-tensor activations; None: dynamic per token
    bias: torch.Tensor | None        # float32 [N]
    out_features: int


def operands(kind: str, weight: torch.Tensor, weight_scale: torch.Tensor, input_scale: torch.Tensor | None,
             bias: torch.Tensor | None, impl: str = "float32") -> Operands:
    """From the checkpoint's tensors: `weight` int8 (int8) or float8_e4m3fn (fp8) [N, K], its scale
    ([N, 1], [N] or one value), the static input scale or None, the layer's bias or None."""
    n = weight.shape[0]
    want = {"int8": torch.int8, "fp8": torch.float8_e4m3fn}[kind]
    if weight.dtype != want:
        raise ValueError(f"{kind} W8A8 weight is {weight.dtype}, expected {want}")
    if impl not in IMPLS or (kind == "fp8" and impl != "float32"):
        raise ValueError(f"no {impl!r} GEMM for {kind}")
    ws = weight_scale.detach().to(torch.float32).reshape(-1)
    if ws.numel() not in (1, n):
        raise ValueError(f"weight_scale has {ws.numel()} values for {n} output channels")
    xs = None
    if input_scale is not None:
        # vLLM's fused qkv / gate_up take the max over their shards' scales; each shard here reads the same
        # input, which llm-compressor's observers give one scale
        xs = input_scale.detach().to(torch.float32).reshape(-1).max().reshape(1)
    w = weight.detach().t().contiguous() if impl == "int_mm" else weight.detach().to(torch.float32).contiguous()
    b = None if bias is None else bias.detach().to(torch.float32)
    return Operands(kind, impl, w, ws, xs, b, n)


def quantize_int8(x: torch.Tensor, scale: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 [M, K] -> (int8 codes as float32 [M, K], float32 scales [M, 1] or [1]): per token without
    `scale`, else with it."""
    if scale is None:
        scale = x.abs().amax(dim=-1, keepdim=True) / INT8_MAX
    # vLLM: inv_scale(1.0 / scale) - a double division rounded to float; an all-zero token (scale 0)
    # gives codes 0 there, here too (its output is 0 either way)
    inv = torch.where(scale > 0, 1.0 / scale.double(), 0.0).to(torch.float32)
    return torch.round(torch.clamp(x * inv, INT8_MIN, INT8_MAX)), scale


def quantize_fp8(x: torch.Tensor, scale: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 [M, K] -> (float8_e4m3fn [M, K], float32 scales [M, 1] or [1])."""
    if scale is None:
        scale = (x.abs().amax(dim=-1, keepdim=True) / FP8_MAX).clamp(min=FP8_MIN_SCALE)
    return torch.clamp(x * scale.reciprocal(), -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def int8_gemm(codes: torch.Tensor, op: Operands) -> torch.Tensor:
    """The exact integer products' sums codes [M, K] x weight^T, as float32 (rounded once, as vLLM converts
    its int32 sums)."""
    if op.impl == "int_mm":
        return torch._int_mm(codes.to(torch.int8), op.weight).to(torch.float32)
    check_float32_exact()
    k = codes.shape[-1]
    if k <= EXACT_K:
        return codes @ op.weight.t()
    chunks = -(-k // EXACT_K)
    step = -(-k // chunks)                     # equal chunks of <= 1024: BLAS runs them at one shape
    acc = None
    for s in range(0, k, step):
        part = (codes[:, s:s + step] @ op.weight[:, s:s + step].t()).to(torch.float64)
        acc = part if acc is None else acc.add_(part)
    return acc.to(torch.float32)


def linear(x: torch.Tensor, op: Operands) -> torch.Tensor:
    """y = x W^T (+ b) of a W8A8 layer, in x's dtype and shape [..., N]."""
    shape = x.shape
    x2 = x.reshape(-1, shape[-1]).to(torch.float32)
    if op.kind == "int8":
        codes, xs = quantize_int8(x2, op.input_scale)
        out = int8_gemm(codes, op) * op.weight_scale * xs
    else:
        check_float32_exact()
        q, xs = quantize_fp8(x2, op.input_scale)
        out = (q.to(torch.float32) @ op.weight.t()) * xs * op.weight_scale
    if op.bias is not None:
        out = out + op.bias
    return out.to(x.dtype).reshape(*shape[:-1], op.out_features)


def describe(kind: str, activations: str) -> str:
    """The arithmetic in one line, for the session info and decision.md's Compute column. Not which exact
    GEMM ran: the two are bit-identical and the faster is picked by timing, so naming it would make two
    runs' decision.md differ (the session info's `w8a8_gemm` records it)."""
    acts = "per-token" if activations == "token" else "static per-tensor"
    if kind == "fp8":
        return f"fp8 W8A8 as vLLM: e4m3 operands, float32 sums and scales, {acts} activations"
    return f"int8 W8A8 as vLLM: exact integer sums, float32 scales, {acts} activations"
