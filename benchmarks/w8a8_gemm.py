"""How fast is the reference backend's exact W8A8 arithmetic (pipeline/engines/reference/w8a8_gemm.py) against
the fake quantization it replaced and against this machine's dense GEMM? The Linear layers of one
decoder layer of the default model (SmolLM2-135M: hidden 576, intermediate 1536, 9 query and 3 KV heads
of 64), at one batch of tokens.

    python -m benchmarks.w8a8_gemm                     # 512 tokens, the dtype the reference uses here
    python -m benchmarks.w8a8_gemm --tokens 32 --int-mm-repeats 3

Prints, per layer shape and summed over the decoder layer's seven Linears, the best-of time of
  dense          x @ W^T in the reference's dtype, no quantization: the machine's GEMM, the limit;
  fake-quant     compressed-tensors' fake quantization as the reference ran it before: per-token
                 quantize-dequantize of x, then the dense GEMM on the dequantized weight in that dtype;
  exact float32  the new int8 path as this machine runs it without amx_int8: codes as float32, float32
                 BLAS in K chunks of <= 1024 (exact), float32 scales;
  exact int_mm   the same results through torch._int_mm (int8 x int8 -> int32), the path on AMX CPUs;
  fp8            the fp8 path (e4m3 operands, float32 sums);
with each one's ratio to dense, and whether the two exact paths agree bit for bit. Timings are only
comparable within one run on one machine: compare the ratios.
"""
from __future__ import annotations

import argparse

import torch

from benchmarks.timing import best_of
from pipeline.engines.reference import w8a8_gemm as g
from pipeline.domain.hardware import compute, machine

HIDDEN, INTERMEDIATE, HEADS, KV_HEADS, HEAD_DIM = 576, 1536, 9, 3, 64
LAYER = {  # (out, in) of each Linear of one decoder layer
    "q_proj": (HEADS * HEAD_DIM, HIDDEN), "k_proj": (KV_HEADS * HEAD_DIM, HIDDEN),
    "v_proj": (KV_HEADS * HEAD_DIM, HIDDEN), "o_proj": (HIDDEN, HEADS * HEAD_DIM),
    "gate_proj": (INTERMEDIATE, HIDDEN), "up_proj": (INTERMEDIATE, HIDDEN), "down_proj": (HIDDEN, INTERMEDIATE),
}


def fake_quant_linear(dtype: torch.dtype):
    """compressed-tensors' own fake quantization of dynamic per-token int8 activations (its library code,
    as the reference's forward called it), then the dense GEMM in `dtype`."""
    from compressed_tensors.quantization import QuantizationArgs
    from compressed_tensors.quantization.lifecycle.forward import fake_quantize
    from compressed_tensors.quantization.utils import compute_dynamic_scales_and_zp

    args = QuantizationArgs(num_bits=8, type="int", symmetric=True, strategy="token", dynamic=True)

    def run(x: torch.Tensor, w_dequant: torch.Tensor) -> torch.Tensor:
        scale, zp = compute_dynamic_scales_and_zp(value=x, args=args, module=None)
        return torch.nn.functional.linear(fake_quantize(x, scale, zp, args), w_dequant)
    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--int-mm-repeats", type=int, default=1, help="torch._int_mm is slow on some CPUs (AVX2 only)")
    ap.add_argument("--dtype", help="the reference's compute dtype (default: what it picks on this CPU)")
    args = ap.parse_args()
    info = machine.cpu_info()
    dtype_name = args.dtype or compute.reference_placement(False, "float16", compute.AUTO, machine.native_bf16(info)).dtype
    dtype = getattr(torch, dtype_name)
    print(f"{machine.describe(info, machine.accelerator_available())}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; {args.tokens} tokens; reference dtype {dtype_name}; "
          f"exact path a session picks here (w8a8_gemm.fastest_impl at {INTERMEDIATE} x {HIDDEN}): "
          f"{g.fastest_impl(HIDDEN, INTERMEDIATE)[0]}")
    gen = torch.Generator().manual_seed(0)
    fake = fake_quant_linear(dtype)
    cols = ("dense", "fake-quant", "exact float32", "exact int_mm", "fp8")
    totals = dict.fromkeys(cols, 0.0)
    same = True
    print(f"{'layer':<10} {'N x K':>11} " + " ".join(f"{c:>14}" for c in cols) + "   (ms; x dense)")
    for name, (n, k) in LAYER.items():
        x = torch.randn(args.tokens, k, generator=gen).to(dtype)
        codes = torch.randint(-127, 128, (n, k), generator=gen, dtype=torch.int8)
        ws = torch.rand(n, 1, generator=gen) / 500
        w_dequant = (codes.to(torch.float32) * ws).to(dtype)
        op32 = g.operands("int8", codes, ws, None, None, "float32")
        opmm = g.operands("int8", codes, ws, None, None, "int_mm")
        op8 = g.operands("fp8", (codes.to(torch.float32) * 3).to(torch.float8_e4m3fn), ws, None, None)
        runs = {"dense": (lambda: x @ w_dequant.t(), args.repeats),
                "fake-quant": (lambda: fake(x, w_dequant), args.repeats),
                "exact float32": (lambda: g.linear(x, op32), args.repeats),
                "exact int_mm": (lambda: g.linear(x, opmm), args.int_mm_repeats),
                "fp8": (lambda: g.linear(x, op8), args.repeats)}
        t = {}
        for c, (fn, reps) in runs.items():
            if reps > 1:
                fn()                                  # warm-up (oneDNN primitive creation, allocations)
            t[c] = best_of(fn, reps)
            totals[c] += t[c]
        same &= torch.equal(g.linear(x, op32), g.linear(x, opmm))
        print(f"{name:<10} {n:>5} x {k:<5} " + " ".join(f"{t[c] * 1e3:8.2f} {t[c] / t['dense']:4.1f}x" for c in cols))
    print(f"{'layer sum':<18} " + " ".join(f"{totals[c] * 1e3:8.2f} {totals[c] / totals['dense']:4.1f}x" for c in cols))
    flops = 2 * args.tokens * sum(n * k for n, k in LAYER.values())
    print(f"dense {dtype_name} GEMM: {flops / totals['dense'] / 1e9:.1f} GFLOP/s; exact float32 vs fake-quant: "
          f"{totals['exact float32'] / totals['fake-quant']:.2f}x the time; int_mm vs exact float32: "
          f"{totals['exact int_mm'] / totals['exact float32']:.1f}x; exact paths bit-identical: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
