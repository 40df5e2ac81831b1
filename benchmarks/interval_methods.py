"""The graded interval against the procedure it replaced, on synthetic paired ROUGE-like differences:
false-pass rate at the margin and power at zero, side by side, at the default looks.

    python -m benchmarks.interval_methods [--sims 2000] [--caps 24 96 192]

Each family is a population of 400 paired per-sample scores (baseline ~ N(30, 12) clipped to 0-100),
moved by pipeline/scoring/simulation/replay.py exactly as `python -m pipeline.scoring.simulation.simulate` moves a run's
own samples; margin 3 points, 95% (2.5% a side). docs/decisions/graded-interval.md cites its output.
"""
from __future__ import annotations

import argparse

import numpy as np

from pipeline.scoring.simulation.replay import Population, rates

LOOKS = [0.25, 0.5, 0.75, 1.0]


def families(rng: np.random.Generator, n: int = 400) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    base = np.clip(rng.normal(30, 12, n), 0, 100)
    clip = lambda x: np.clip(x, 0, 100)  # noqa: E731
    hi = np.where(rng.random(n) < 0.1, 70.0, base)
    tied_base = rng.choice([0.0, 25.0, 33.3, 50.0, 66.7, 100.0], n)
    return {
        "identical outputs": (base, base.copy()),
        "10% moved by ~30": (base, np.where(rng.random(n) < 0.1, clip(base - 30 + rng.normal(0, 5, n)), base)),
        "5% moved by 60": (hi, np.where((rng.random(n) < 0.5) & (hi >= 60), hi - 60, hi)),
        "20% moved, tied values": (tied_base, np.where(rng.random(n) < 0.2, rng.choice([0.0, 25.0, 50.0], n), tied_base)),
        "30% moved, heavy tails": (base, np.where(rng.random(n) < 0.3, clip(base + 4 * rng.standard_t(2, n)), base)),
        "75% moved ~N(0, 10)": (base, np.where(rng.random(n) < 0.75, clip(base + rng.normal(0, 10, n)), base)),
        "every output ~N(0, 3)": (base, clip(base + rng.normal(0, 3, n))),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=2000)
    ap.add_argument("--caps", type=int, nargs="+", default=[24, 96, 192])
    a = ap.parse_args()
    print(f"{a.sims} simulated runs per cell; false pass at the margin (promised <= 0.025) / power at delta 0")
    print(f"{'family':28s} {'cap':>4s}  {'before (wald)':>15s}  {'now (score)':>15s}")
    for name, (b, t) in families(np.random.default_rng(0)).items():
        pop = Population.of(b, t, "graded")          # ROUGE-like: graded (metric_registry)
        for cap in a.caps:
            cells = []
            for method in ("wald", "score"):
                r = {x.name: x.value for x in rates(pop, LOOKS, cap, 0.95, 3.0, a.sims, seed=1, method=method)}
                cells.append(f"{r['false_pass']:.3f} / {r['power']:.2f}")
            print(f"{name:28s} {cap:>4d}  {cells[0]:>15s}  {cells[1]:>15s}")


if __name__ == "__main__":
    main()
