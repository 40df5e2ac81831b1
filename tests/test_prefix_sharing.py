"""benchmarks/prefix_sharing.py's comparison of two scorings of the same documents (pure, but the
benchmark's module imports the backends, so torch: the model tier)."""
import pytest

from pipeline.domain.sets.sample_row import partial
from benchmarks.prefix_sharing import compare

pytestmark = pytest.mark.model


def row(pred, gold, logliks):
    return partial(pred=pred, scores={"acc": 100.0 * (pred == gold)}, logliks=logliks)


def test_flips_accuracy_and_loglik_differences():
    whole = {0: row(0, 0, [-1.0, -2.0]), 1: row(1, 0, [-2.0, -1.5]), 2: row(0, 0, [-1.0, -3.0])}
    shared = {0: row(1, 0, [-1.6, -1.5]), 1: row(0, 0, [-1.2, -1.5]), 2: row(0, 0, [-1.0, -3.0])}
    c = compare(whole, shared)
    assert (c["n"], c["flips"], c["right_to_wrong"]) == (3, 2, 1)
    assert c["acc_whole"] == 200.0 / 3 and c["acc_shared"] == 200.0 / 3
    assert c["loglik_diff_max"] == pytest.approx(0.8) and c["loglik_diff_median"] == pytest.approx(0.6)
