"""Greedy generation of long prompts on the reference backend, prefilled with the prompts of similar
length padded into one micro-batch (sdpa then needs a mask, and leaves its flash kernel) against
pad-free micro-batches (generate.PAD_FREE_TOKENS): seconds of each and whether the answers agree.

    python -m benchmarks.long_prompts retrieval_2048        # after `dvc repro` made the checkpoints
    python -m benchmarks.long_prompts retrieval_1024 --tier int8 --kv fp8

Reads params.yaml and the variant's checkpoint under artifacts/; one session, the task's whole cap,
each way timed once (each is seconds of prefill). Timings compare only within one run.
"""
from __future__ import annotations

import argparse
import time

from benchmarks.variants import served_variant
from pipeline import schema
from pipeline.engines.reference import generate
from pipeline.evaluation.lm_eval_runner import run_tasks
from pipeline.engines.selection import select
from pipeline.domain.hardware import machine
from pipeline.domain.sets import tasks

PADDED = 10 ** 9     # pad_free so large that every micro-batch may pad: the behaviour before PAD_FREE_TOKENS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("task", help="an eval.tasks entry of kind generate, e.g. retrieval_2048")
    ap.add_argument("--tier", default=None, help="default: decision.baseline's")
    ap.add_argument("--kv", default=None, help="default: decision.baseline's")
    ap.add_argument("--model", default=None, help="default: the first in params.yaml")
    a = ap.parse_args()
    params = schema.load()
    model = a.model or next(iter(params.models))
    tier, kv = a.tier or params.decision.baseline.tier, a.kv or params.decision.baseline.kv
    spec = [s for s in tasks.build_all(params.eval.tasks, model) if s.name == a.task]
    if not spec:
        raise SystemExit(f"qtier: eval.tasks has no task {a.task!r}")
    variant = served_variant(params, model, tier, kv)
    real = generate.prefill_groups
    seconds, outputs = {}, {}
    with select(params, tier=params.tiers[tier]).session(variant) as s:
        print(f"{machine.describe(machine.cpu_info(), machine.accelerator_available())}; {model} {tier} + KV {kv}, "
              f"{a.task}, compute {s.info.get('compute_dtype')}")
        for name, pad_free in (("padded", PADDED), ("pad-free", generate.PAD_FREE_TOKENS)):
            generate.prefill_groups = lambda lengths, p=pad_free: real(lengths, pad_free=p)
            try:
                t0 = time.perf_counter()
                rows = run_tasks(s, spec, params.eval)[1][a.task]
                seconds[name] = time.perf_counter() - t0
            finally:
                generate.prefill_groups = real
            outputs[name] = {r.doc_id: r.output for r in rows}
    same = sum(outputs["padded"][d] == outputs["pad-free"][d] for d in outputs["padded"])
    print(f"padded {seconds['padded']:.1f} s, pad-free {seconds['pad-free']:.1f} s: "
          f"{seconds['padded'] / seconds['pad-free']:.2f}x; {same} of {len(outputs['padded'])} answers identical")


if __name__ == "__main__":
    main()
