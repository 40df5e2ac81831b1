"""What stratifying a choice task's looks by the baseline's margin would buy, measured on a completed
run (docs/decisions/stratified-looks.md).

    python -m benchmarks.stratified_reads [--model smollm2-135m] [--below 0.5] [--rate 0.25]

Strata: the items whose baseline margin (top choice's log-likelihood minus the runner-up's, stage
baseline) is below `--below` nats (low), and the rest (high). The design weighed reads every low item
and a `--rate` share of the high ones; its estimate is the stratified mean of the paired differences
(variant correct - baseline correct), its standard error sqrt(sum W_h^2 s_h^2 / n_h). For each variant
that read a choice task to its cap this prints the flips, the share of them in the low stratum, the
standard error of reading every item against the stratified design's, and the items each reads: at the
same caps the design reads fewer items for about the same error, and settles no verdict the full read
leaves open.
"""
from __future__ import annotations

import argparse
import math

from pipeline import paths
from pipeline.domain.sets import task_rows
from pipeline.domain.sets.sample_row import SampleRow
from pipeline.scoring.estimators.noise import margin


def variance(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1) if len(xs) > 1 else 0.0


def compare(base: dict[int, SampleRow], rows: list[SampleRow], below: float, rate: float) -> dict:
    """Flips, low-stratum flips, the full read's and the stratified design's standard errors (points), reads."""
    d = {r.doc_id: r.pred == r.gold for r in rows if r.doc_id in base}
    diff = {i: float(ok) - float(base[i].pred == base[i].gold) for i, ok in d.items()}
    low = [i for i in diff if margin(base[i]) < below]
    high = [i for i in diff if margin(base[i]) >= below]
    n, n_high = len(diff), max(1, round(rate * len(high)))
    strat = sum((len(s) / n) ** 2 * variance([diff[i] for i in s]) / k
                for s, k in ((low, len(low)), (high, n_high)) if s)
    return {"n": n, "flips": sum(1 for x in diff.values() if x), "low_flips": sum(1 for i in low if diff[i]),
            "low": len(low), "se_full": 100 * math.sqrt(variance(list(diff.values())) / n),
            "se_strat": 100 * math.sqrt(strat), "reads": len(low) + n_high}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--below", type=float, default=0.5, help="the low stratum's margin bound, nats")
    ap.add_argument("--rate", type=float, default=0.25, help="the share of the high stratum read")
    a = ap.parse_args()
    base_all = task_rows.read_samples(paths.baseline_dir(a.model))
    print(f"low stratum: baseline margin < {a.below} nats, read in full; high: {a.rate:.0%} read")
    print("| variant | task | n | flips | in the low stratum | SE every item | SE stratified | items read |")
    print("|---|---|---|---|---|---|---|---|")
    for folder in sorted((paths.RESULTS / "evals" / a.model).glob("*/samples")):
        for task, rows in task_rows.read_samples(folder.parent).items():
            base = {r.doc_id: r for r in base_all.get(task, []) if margin(r) is not None}
            if not base or len(rows) < len(base) or folder.parent.name == "fp16-auto":
                continue            # not a choice task, not read to its cap, or the baseline itself
            c = compare(base, rows, a.below, a.rate)
            print(f"| {folder.parent.name} | {task} | {c['n']} | {c['flips']} | {c['low_flips']} (of {c['low']} items) "
                  f"| {c['se_full']:.2f} | {c['se_strat']:.2f} | {c['reads']} of {c['n']} |")


if __name__ == "__main__":
    main()
