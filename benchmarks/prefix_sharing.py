"""The reference backend's log-likelihood with and without the shared prompt prefix, on one variant's
classification task: seconds of each, and what the two computation orders change (flips, accuracy,
log-likelihood differences). Both are valid serving arithmetics (vLLM's prefix caching computes a
shared prefix once); the flips between them are the engine's own noise for that tier.

    python -m benchmarks.prefix_sharing int8 auto        # after `dvc repro` made the checkpoints

Reads params.yaml and the variant's checkpoint under artifacts/; one session, the task's cap in its
look order, each path timed once (the whole task is long enough). Timings compare only within one run.
"""
from __future__ import annotations

import argparse
import statistics
import time

from benchmarks.variants import served_variant
from pipeline import schema
from pipeline.evaluation.lm_eval_runner import run_tasks
from pipeline.engines.selection import select
from pipeline.domain.hardware import machine
from pipeline.domain.sets import looks, tasks
from pipeline.domain.sets.sample_row import SampleRow


def compare(whole: dict[int, SampleRow], shared: dict[int, SampleRow]) -> dict:
    """Flips, accuracy and log-likelihood differences between two scorings of the same documents. Pure."""
    flipped = [d for d in whole if whole[d].pred != shared[d].pred]
    acc = lambda rows: sum(r.scores["acc"] for r in rows.values()) / len(rows)   # noqa: E731
    diffs = [max(abs(a - b) for a, b in zip(whole[d].logliks, shared[d].logliks)) for d in whole]
    return {"n": len(whole), "flips": len(flipped),
            "right_to_wrong": sum(1 for d in flipped if whole[d].scores["acc"] > shared[d].scores["acc"]),
            "acc_whole": acc(whole), "acc_shared": acc(shared),
            "loglik_diff_median": statistics.median(diffs), "loglik_diff_max": max(diffs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tier")
    ap.add_argument("kv")
    ap.add_argument("--model", default=None, help="default: the first in params.yaml")
    ap.add_argument("--task", default="classification")
    a = ap.parse_args()
    params = schema.load()
    model = a.model or next(iter(params.models))
    specs = looks.in_look_order(tasks.build_all(params.eval.tasks, model), params.eval.seed, looks.data_keys(params.eval.tasks))
    spec = [s for s in specs if s.name == a.task]
    variant = served_variant(params, model, a.tier, a.kv)
    seconds, rows = {}, {}
    with select(params, tier=params.tiers[a.tier]).session(variant) as s:
        print(f"{machine.describe(machine.cpu_info(), machine.accelerator_available())}; {model} {a.tier} + KV {a.kv}, "
              f"{a.task}, compute {s.info.get('compute_dtype')}")
        for share in (False, True):
            s.lm.qtier_share_prefix = share
            t0 = time.perf_counter()
            rows[share] = {r.doc_id: r for r in run_tasks(s, spec, params.eval)[1][a.task]}
            seconds[share] = time.perf_counter() - t0
    c = compare(rows[False], rows[True])
    print(f"whole {seconds[False]:.1f} s, shared prefix {seconds[True]:.1f} s: {seconds[False] / seconds[True]:.2f}x; "
          f"{c['flips']} of {c['n']} predictions flip ({c['right_to_wrong']} right to wrong); accuracy "
          f"{c['acc_whole']:.2f} whole, {c['acc_shared']:.2f} shared; log-likelihood difference median "
          f"{c['loglik_diff_median']:.3f}, max {c['loglik_diff_max']:.3f} nats")


if __name__ == "__main__":
    main()
