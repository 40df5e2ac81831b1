"""The pick across models (scoring/pick/across_pick.py): one fixed sequence over the candidates of every
model a GPU can serve, replayed on a run's own paired samples (replay.py). Pure (numpy); its command is
`python -m pipeline.scoring.simulation.simulate ... --sequence K [--good G]`.

K candidates in decreasing memory, each with its own verdict replayed independently (one model's
candidates and another's share no items' noise in this replay: each is moved to its own true delta):
the first G truly unchanged (delta 0), the rest exactly at the margin, the worst case for a wrong pick
(a bad candidate as likely to pass as one can be). A pick is false when it is at or beyond the margin.
Two rules on the same verdicts:
- **fixed sequence** (qtier): the last of the unbroken run of passes from the first (sequence.run_length, the walk
  every pick is read from: scoring/pick/walk.py);
  the chance of a false pick is at most one verdict's alpha, whatever K;
- **smallest passing** (the rule it replaces): the smallest-memory candidate that passes anywhere;
  every bad candidate gets its chance, and the rates add up.
The stated rate is one verdict's one-sided alpha, (1 - decision.confidence) / 2.
"""
from __future__ import annotations

import numpy as np

from pipeline.scoring.pick.sequence import run_length
from pipeline.scoring.simulation.replay import Population, Rate, moved, replay
from pipeline.scoring.verdict.sequential import Design, look_sizes


def picks(passed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`passed`: candidates x sims. Per run, the index the fixed sequence picks and the index the
    smallest-passing rule picks (-1: none)."""
    seq = np.array([run_length(list(col)) - 1 for col in passed.T])
    old = np.array([np.flatnonzero(col).max() if col.any() else -1 for col in passed.T])
    return seq, old


def rates(pop: Population, looks: list[float], cap: int, confidence: float, margin: float, candidates: int,
          good: int = 0, sims: int = 2000, seed: int = 0) -> list[Rate]:
    if candidates < 2 or not 0 <= good < candidates:
        raise ValueError("--sequence: at least 2 candidates, --good fewer than them")
    sizes = look_sizes(looks, cap) if looks else [cap]
    design = Design.of([n / cap for n in sizes], confidence)
    confs = [design.confidence_at(k) for k in range(len(sizes))] if looks else [confidence]
    deltas = [0.0] * good + [-margin] * (candidates - good)
    passed = np.stack([replay(moved(pop, d, seed), sizes, confs, margin, sims, seed + 10 + k, d)["verdict"] == "pass"
                       for k, d in enumerate(deltas)])
    seq, old = picks(passed)

    def rate(name: str, hits: np.ndarray) -> Rate:
        p = float(hits.mean())
        return Rate(name, p, float(np.sqrt(max(p * (1 - p), 1.0 / sims) / sims)))
    return [rate("false_pick_fixed_sequence", seq >= good), rate("false_pick_smallest_passing", old >= good),
            Rate("stated_rate", (1 - confidence) / 2, 0.0)]
