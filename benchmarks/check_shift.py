"""How far the second arithmetic moves each checked verdict's delta, on a completed run
(docs/decisions/second-arithmetic.md "Weighed: no check for a FAIL far beyond the margin").

    python -m benchmarks.check_shift [--model smollm2-135m]

Run from a project whose results/ hold a completed run (paths are results/-relative). For every
variant with second-arithmetic samples, per gated choice task: the items checked, the delta and
repeated interval in the run's arithmetic (the variant's samples of those items against stage
baseline's) and in the second (its second-arithmetic samples against stage noise's), both at the
confidence of the look the task stopped at, the shift between the two deltas and the items whose
prediction differs between the arithmetics.
"""
from __future__ import annotations

import argparse

from pipeline import paths
from pipeline.domain.result import contract
from pipeline.domain.sets import task_rows
from pipeline.scoring.estimators import analysis
from pipeline.scoring.estimators.stats import repeated

CONFIDENCE = 0.95


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    model = ap.parse_args().model
    base, noise = task_rows.read_samples(paths.baseline_dir(model)), task_rows.read_samples(paths.noise_dir(model))
    print("| variant | task | items | run's arithmetic | second arithmetic | shift | predictions that differ |")
    print("|---|---|---|---|---|---|---|")
    for folder in sorted((paths.RESULTS / "evals" / model).glob("*/second_arithmetic")):
        looks = contract.load(folder.parent / paths.RESULT_FILE).looks
        first, second = task_rows.read_samples(folder.parent), task_rows.read_samples(folder)
        for task, rows2 in second.items():
            if task not in base or not rows2 or rows2[0].logliks is None:
                continue
            ids = {r.doc_id for r in rows2}
            p1 = analysis.align(base[task], [r for r in first[task] if r.doc_id in ids], subset=True)
            p2 = analysis.align(noise[task], rows2, subset=True)
            conf = looks[task].confidence if task in looks and looks[task].confidence else CONFIDENCE
            a = repeated(analysis.intervals(["acc"], p1, CONFIDENCE)["acc"], conf)
            b = repeated(analysis.intervals(["acc"], p2, CONFIDENCE)["acc"], conf)
            differ = sum(1 for (_, x), (_, y) in zip(p1, p2) if x.pred != y.pred)
            print(f"| {folder.parent.name} | {task} | {len(p1):,} | {a.delta:+.1f} [{a.lo:+.1f}, {a.hi:+.1f}] | "
                  f"{b.delta:+.1f} [{b.lo:+.1f}, {b.hi:+.1f}] | {b.delta - a.delta:+.1f} | {differ} |")


if __name__ == "__main__":
    main()
