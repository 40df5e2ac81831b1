"""A repair search's pick, then its confirmation: the false-pass rate of the verdict on the candidate a
selection chose, replayed on a run's own paired samples (pipeline/scoring/simulation/replay.py). Pure (numpy);
its command is `python -m pipeline.scoring.simulation.simulate ... --candidates K`.

K candidates (groups promoted: 0, 1, ...): the first half truly at the margin (the worst case: a bad
candidate as likely to pass as one can be), the rest closer to the baseline in even steps up to 0 (every
group promoted). A pass of one of the first half is false. Two ways to pick:

- **qtier**: the first candidate whose selection signal meets the bound, the signal being the
  candidate's true loss plus noise measured on other texts than the confirmation (independent of its
  verdict), then its verdict read on the task samples: a false pass needs the verdict to pass a
  candidate at or beyond the margin, which it does at most alpha of the time, whichever was picked.
- **guided by the verdicts**: the first candidate whose own verdict passes (a search that looks at
  the confirmation): every bad candidate gets its chance to pass, and the rates add up.

The rate printed is P(the pick is at or beyond the margin and passes), per run.
"""
from __future__ import annotations

import numpy as np

from pipeline.scoring.simulation.replay import Population, Rate, moved, replay
from pipeline.scoring.verdict.sequential import Design, look_sizes


def true_deltas(candidates: int, margin: float) -> np.ndarray:
    """Candidate k's true delta: -margin for the first half, then evenly up to 0 at the last."""
    bad = candidates // 2
    good = candidates - bad
    return np.concatenate([np.full(bad, -margin), -margin * (1.0 - np.arange(1, good + 1) / good)])


def rates(pop: Population, looks: list[float], cap: int, confidence: float, margin: float, candidates: int,
          noise: float = 0.5, sims: int = 2000, seed: int = 0) -> list[Rate]:
    """False-pass rates of the two picks (module docstring). `noise`: the selection signal's SD in
    margins (0.5: a signal that often misorders neighbours)."""
    if candidates < 2:
        raise ValueError("--candidates: at least 2")
    sizes = look_sizes(looks, cap) if looks else [cap]
    design = Design.of([n / cap for n in sizes], confidence)
    confs = [design.confidence_at(k) for k in range(len(sizes))] if looks else [confidence]
    deltas = true_deltas(candidates, margin)
    passes = np.stack([replay(moved(pop, float(d), seed), sizes, confs, margin, sims, seed + 10 + k, float(d))
                       ["verdict"] == "pass" for k, d in enumerate(deltas)])          # candidates x sims
    bad = deltas <= -margin + 1e-12
    rng = np.random.default_rng(seed)
    signal = -deltas[:, None] / margin + rng.normal(0.0, noise, size=(candidates, sims))
    meets = signal <= 1.0                      # the bound: a loss within one margin, as measured
    meets[-1] = True                           # the search's last resort: every group promoted
    picked = meets.argmax(0)
    cols = np.arange(sims)
    qtier = bad[picked] & passes[picked, cols]
    first_pass = np.where(passes.any(0), passes.argmax(0), candidates - 1)
    guided = bad[first_pass] & passes[first_pass, cols]

    def rate(name: str, hits: np.ndarray) -> Rate:
        p = float(hits.mean())
        return Rate(name, p, float(np.sqrt(max(p * (1 - p), 1.0 / sims) / sims)))

    return [rate("false_pass_selected_apart", qtier), rate("false_pass_selected_on_verdicts", guided),
            Rate("bad_candidates_picked", float(bad[picked].mean()), 0.0)]
