"""The two-axis pick's family-wise error (scoring/pick/axes.py, replayed by scoring/simulation/pick_axes.py):
the chance that the pick is worse than its margin stays within what page 1 states (one verdict's alpha per
chain), on the committed run's own paired samples (results/decision.json's flips of its KV-format variant)
and chain shape, and on a wider grid; an interaction (parts non-inferior alone, their combination at the
margin) is caught by the combination's own test, which the parts alone would not.

    .venv/bin/python -m pytest -n 0 -q tests/test_pick_axes.py
"""
import json
import math
from pathlib import Path

import pytest

from pipeline.schema import builder
from pipeline.scoring.pick.axes import chain_runs
from pipeline.scoring.simulation.pick_axes import binary_pairs, false_pick, shapes

pytestmark = pytest.mark.unit

SIMS = 1500
ROOT = Path(__file__).resolve().parent.parent


def committed():
    """The committed run: its KV-format variant's paired accuracy and its chains' shape."""
    params = builder.load(ROOT / "params.yaml")
    base = params.decision.baseline
    rows = [r for r in json.loads((ROOT / "results" / "decision.json").read_text())["rows"] if r["status"] == "ok"]
    ref = next(r for r in rows if (r["tier"], r["kv"]) == (base.tier, base.kv))
    src = next(r for r in rows if r["tier"] == base.tier and r["kv"] != base.kv)
    f = src["flips"]["classification"]
    pop = binary_pairs(f["n"], ref["metrics"]["classification/acc"] / 100, f["right_to_wrong"], f["wrong_to_right"])
    tiers = len({r["tier"] for r in rows if r["kv"] == base.kv} - {base.tier})
    formats = len({r["kv"] for r in rows if r["tier"] == base.tier} - {base.kv})
    return params, pop, tiers, formats


@pytest.mark.parametrize("shape", ["committed", "wider"])
def test_the_pick_is_worse_than_its_margin_at_most_what_page_one_states(shape):
    params, pop, tiers, formats = committed()
    if shape == "wider":
        tiers, formats = 4, 3
    alpha = (1 - params.decision.confidence) / 2
    margin = params.tolerance("classification/acc").abs
    looks, cap = params.eval.sequential.looks, params.eval.tasks["classification"].limit
    for name, truth in shapes(tiers, formats, margin).items():
        ours, parts_only = false_pick(truth, pop, looks, cap, params.decision.confidence, margin, SIMS, seed=7)
        stated = alpha * truth.chains
        assert ours.value <= stated + 2 * math.sqrt(stated * (1 - stated) / SIMS), (name, ours.line())
        if name == "interaction":
            assert ours.value <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / SIMS)   # only the combinations can err
            assert parts_only.value > 4 * stated      # a combination claimed from its parts alone is wrong here
        if name == "all_at_margin":
            assert ours.value > alpha                 # more than one chain can err: the bound is not one alpha


def test_the_committed_pairs_are_the_committed_flips():
    params, pop, _, _ = committed()
    assert pop.diff.size == 723 and (pop.diff < 0).sum() == 31 and (pop.diff > 0).sum() == 23


def test_a_combination_counts_only_where_both_parts_are_in_their_runs():
    # weights: the first passes, the second does not; KV: the only format passes
    assert chain_runs([True, False], [True], [(0, 0, True), (1, 0, True)]) == (1, 1, 1)
    # a failing KV format stops the KV chain and every combination, never the weights
    assert chain_runs([True, True], [False], [(0, 0, True), (1, 0, True)]) == (2, 0, 0)
    # the combination's own verdict is needed too
    assert chain_runs([True], [True], [(0, 0, False)]) == (1, 1, 0)
