"""The recommendation's pick among many candidates (scoring/pick/sequence.py run_length, the walk every pick is read from): the chance
that the picked variant is worse than its margin, simulated with 13 candidates, against the rule it
replaced (the smallest-memory variant among all that pass)."""
import math

import numpy as np
import pytest

from pipeline.scoring.pick.sequence import run_length
from pipeline.scoring.simulation.replay import Population, moved, replay
from pipeline.scoring.verdict.sequential import Design, look_sizes

SIMS = 2000
CANDIDATES = 13
LOOKS = [0.25, 0.5, 0.75, 1.0]


def _verdicts(target: float, seed: int, cap: int = 640) -> np.ndarray:
    """One candidate's verdicts over SIMS simulated runs: accuracy, 10% of items flipped either way."""
    rng = np.random.default_rng(seed)
    base = np.where(rng.random(4000) < 0.8, 100.0, 0.0)
    tier = np.where(rng.random(4000) < 0.1, 100.0 - base, base)
    sizes = look_sizes(LOOKS, cap)
    d = Design.of([n / cap for n in sizes], 0.95)
    confs = [d.confidence_at(k) for k in range(len(sizes))]
    pop = moved(Population.of(base, tier, "binary"), target)
    return replay(pop, sizes, confs, 3.0, SIMS, seed, target)["verdict"] == "pass"


def _picks(passed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per simulated run (rows), the index picked by the fixed sequence and by the old rule (-1: none)."""
    seq = np.array([run_length(list(row)) - 1 for row in passed])
    old = np.array([np.flatnonzero(row).max() if row.any() else -1 for row in passed])
    return seq, old


@pytest.mark.parametrize("good", [0, 3])
def test_the_pick_is_worse_than_its_margin_at_most_alpha_with_13_candidates(good):
    """`good` candidates (the largest) truly unchanged, the rest exactly at the margin (the worst case
    for a wrong pick); candidates are simulated independently."""
    passed = np.stack([_verdicts(0.0 if i < good else -3.0, seed=i) for i in range(CANDIDATES)], axis=1)
    seq, old = _picks(passed)
    bound = 0.025 + 2 * math.sqrt(0.025 * 0.975 / SIMS)
    wrong_seq = (seq >= good).mean()
    wrong_old = (old >= good).mean()
    assert wrong_seq <= bound
    assert wrong_old > 4 * bound                # about 1 - 0.975^10..13 when nothing guards the pick
    if good:
        assert (seq == good - 1).mean() > 0.5   # the fixed sequence still reaches the good ones


def test_the_sequence_stops_at_the_first_candidate_that_does_not_pass():
    assert run_length([True, True, False, True]) == 2
    assert run_length([False, True]) == 0
    assert run_length([]) == 0
    assert run_length([True, True]) == 2
