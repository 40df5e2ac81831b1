"""Quantize's float32 choice on a CPU, weighed: one tier made twice in one process, with the model loaded
in float32 (what stage quantize does without a GPU, docs/tiers-and-recipes.md "Where it runs") and in bfloat16,
timed side by side, and the two checkpoints compared tensor by tensor.

    python -m benchmarks.quantize_dtype [--model smollm2-135m] [--tier int4-gptq] [--tier int4-awq]

Run from a project whose artifacts/ hold the model's source (stage prepare has run). Per tier: the
seconds of each (one run each: a quantization is minutes, not a microbenchmark) and their ratio; of the
quantized tensors (integer codes; an int4 tier packs 8 codes in one int32 element, so one code
that differs makes its element differ), the share of elements equal in both; of the float tensors (scales,
zero points, unquantized weights), the largest relative difference. Writes nothing under artifacts/.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from pipeline.domain.hardware import compute
from pipeline.quant import oneshot
from pipeline.schema import builder


def made(params, model: str, tier: str, dtype: str, out: Path) -> float:
    """Seconds to make `tier` with the model loaded in `dtype` on the CPU."""
    # quantize() takes its placement from the machine, with no parameter for it: swapped for the call
    keep = oneshot.load_placement
    oneshot.load_placement = lambda cfg: compute.Placement("cpu", dtype)
    try:
        t0 = time.perf_counter()
        oneshot.quantize(params, model, tier, out)
        return time.perf_counter() - t0
    finally:
        oneshot.load_placement = keep


def compared(a: Path, b: Path) -> tuple[float, float, int]:
    """(share of integer elements equal, largest relative difference of a float tensor, tensors)."""
    from safetensors.torch import load_file

    ta = {k: v for f in sorted(a.glob("*.safetensors")) for k, v in load_file(f).items()}
    tb = {k: v for f in sorted(b.glob("*.safetensors")) for k, v in load_file(f).items()}
    equal = total = 0
    worst = 0.0
    for name, x in ta.items():
        y = tb[name]
        if x.dtype.is_floating_point:
            x, y = x.float(), y.float()
            worst = max(worst, float((x - y).abs().max() / x.abs().max().clamp_min(1e-12)))
        else:
            equal += int((x == y).sum())
            total += x.numel()
    return (equal / total if total else 1.0), worst, len(ta)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--tier", action="append", default=None)
    a = ap.parse_args()
    oneshot.set_threads()
    params = builder.load(Path("params.yaml"))
    print("| tier | float32 s | bfloat16 s | float32 / bfloat16 | integer elements equal | "
          "largest float difference (relative) |")
    print("|---|---|---|---|---|---|")
    for tier in a.tier or ["int4-gptq"]:
        with tempfile.TemporaryDirectory() as tmp:
            f32, b16 = Path(tmp) / "f32", Path(tmp) / "bf16"
            s32 = made(params, a.model, tier, "float32", f32)
            s16 = made(params, a.model, tier, "bfloat16", b16)
            share, worst, n = compared(f32, b16)
            print(f"| {tier} | {s32:.1f} | {s16:.1f} | {s32 / s16:.2f} | {share:.4f} | {worst:.3g} ({n} tensors) |")


if __name__ == "__main__":
    main()
