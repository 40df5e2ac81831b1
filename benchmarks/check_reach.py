"""Could a variant's second-arithmetic check skip the choice items it cannot flip? Measured on a completed
run (docs/decisions/second-arithmetic.md "Weighed: only the items within reach").

    python -m benchmarks.check_reach [--model smollm2-135m]

A choice item's prediction changes under another arithmetic only if the differences between its
choices' log-likelihoods move by more than its margin (top choice minus runner-up). An item's `shift`
is how far they moved: the range of the per-choice changes. The baseline's reach is the largest shift
between the baseline as run (results/baseline/<model>/) and in the second arithmetic
(results/noise/<model>/). The rule weighed: a variant's check computes again only the items whose
margin in the run's arithmetic is at most SAFETY x that reach, and copies the others. For every
variant's second-arithmetic samples this prints how many items the rule would copy, the largest shift
the variant itself showed, and how many of the items it would copy the second arithmetic flipped (the
rule's errors).
"""
from __future__ import annotations

import argparse

from pipeline import paths
from pipeline.domain.sets import task_rows
from pipeline.domain.sets.sample_row import SampleRow
from pipeline.scoring.estimators.noise import margin

SAFETY = 2.0


def shift(a: SampleRow, b: SampleRow) -> float:
    """The largest change of a difference between two choices' log-likelihoods from row a to row b."""
    moved = [x - y for x, y in zip(a.logliks, b.logliks, strict=True)]
    return max(moved) - min(moved)


def pairs(first: list[SampleRow], second: list[SampleRow]) -> list[tuple[SampleRow, SampleRow]]:
    """The choice items both lists hold, matched by doc_id."""
    other = {r.doc_id: r for r in second if r.logliks}
    return [(r, other[r.doc_id]) for r in first if r.logliks and r.doc_id in other]


def row(task: str, limit: float, both: list[tuple[SampleRow, SampleRow]]) -> dict:
    """What the rule would have done to one variant's check of one task."""
    far = [(a, b) for a, b in both if (m := margin(a)) is not None and m > SAFETY * limit]
    return {"task": task, "checked": len(both), "copy": len(far), "largest": max(shift(a, b) for a, b in both),
            "flipped": sum(a.pred != b.pred for a, b in far)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    model = ap.parse_args().model
    base, noise = task_rows.read_samples(paths.baseline_dir(model)), task_rows.read_samples(paths.noise_dir(model))
    limits = {t: max(shift(a, b) for a, b in p) for t, rows in noise.items() if (p := pairs(base.get(t, []), rows))}
    print(f"the baseline's reach per choice task (stage baseline vs stage noise): "
          f"{ {t: round(r, 3) for t, r in limits.items()} }; SAFETY {SAFETY}")
    print("| variant | task | items checked | the rule copies | largest shift (variant) | copied items flipped |")
    print("|---|---|---|---|---|---|")
    for folder in sorted((paths.RESULTS / "evals" / model).glob("*/second_arithmetic")):
        first, second = task_rows.read_samples(folder.parent), task_rows.read_samples(folder)
        for task, limit in limits.items():
            if both := pairs(first.get(task, []), second.get(task, [])):
                r = row(task, limit, both)
                print(f"| {folder.parent.name} | {task} | {r['checked']} | {r['copy']} | {r['largest']:.3f} | "
                      f"{r['flipped']} |")


if __name__ == "__main__":
    main()
