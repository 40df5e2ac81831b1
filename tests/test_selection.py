"""pipeline/scoring/simulation/repair_confirmation.py: a candidate picked apart from the verdicts keeps its verdict's
false-pass rate; picked by the verdicts, the rate grows with the candidates (the simulation can fail)."""
import numpy as np
import pytest

from pipeline.scoring.simulation import repair_confirmation as selection
from pipeline.scoring.simulation.replay import Population

LOOKS = [0.25, 0.5, 0.75, 1.0]


def binary_population(n=1280, lost=0.04, gained=0.01, seed=0):
    """A classification run's shape: most items unchanged, a few lost, fewer gained (0/100 scores)."""
    rng = np.random.default_rng(seed)
    base = np.where(rng.random(n) < 0.89, 100.0, 0.0)
    u = rng.random(n)
    tier = np.where(u < lost, 0.0, np.where(u < lost + gained, 100.0, base))
    return Population.of(base, tier, "binary")


def graded_population(n=96, seed=1):
    """ROUGE-like: most outputs identical (exact zeros), a few large moves, skewed."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(10, 60, n)
    diff = np.where(rng.random(n) < 0.7, 0.0, rng.standard_t(3, n) * 8 - 2)
    return Population.of(base, np.clip(base + diff, 0, 100), "graded")


def test_true_deltas_put_half_the_candidates_at_the_margin():
    assert list(selection.true_deltas(6, 3.0)) == [-3.0, -3.0, -3.0, -2.0, -1.0, -0.0]


# graded intervals cost more to replay: fewer runs (a wider Monte-Carlo SE, still under alpha's bound)
@pytest.mark.parametrize("pop, cap, sims", [(binary_population(), 1280, 3000), (graded_population(), 96, 600)])
def test_picked_apart_keeps_alpha_and_picked_on_verdicts_does_not(pop, cap, sims):
    margin = 3.0
    apart, guided, picked_bad = selection.rates(pop, LOOKS, cap, 0.95, margin, candidates=8, sims=sims, seed=3)
    assert picked_bad.value > 0.2                        # the proxy often picks a bad candidate...
    assert apart.value <= 0.025 + 3 * apart.mc_se        # ...whose verdict still passes it at most alpha
    if pop.kind == "binary":                             # enough runs to show the inflation itself
        assert guided.value > 2 * apart.value and guided.value > 0.025 + 3 * guided.mc_se


def test_fewer_than_two_candidates_is_refused():
    with pytest.raises(ValueError, match="at least 2"):
        selection.rates(binary_population(), LOOKS, 1280, 0.95, 3.0, candidates=1)
