"""evaluate's fidelity measurement (pipeline/evaluation/fidelity_compare.py: measure_fidelity) with a fake session:
the baseline's stored distributions against the session's, only at the same backend and dtype."""
import json

import numpy as np
import pytest

from pipeline.engines.base import TokenDists
from pipeline.domain.sets.fidelity_set import Baseline
from pipeline.evaluation.fidelity_compare import measure_fidelity

pytestmark = pytest.mark.model

LP = np.log(np.array([[0.7, 0.2], [0.5, 0.4]], np.float32))


def baseline(backend="reference", dtype="bfloat16"):
    return Baseline([[1, 2, 3]], [np.array([[5, 6], [7, 8]])], [LP], [np.array([5, 7])],
                    {"backend": backend, "compute_dtype": dtype, "k": 2})


class FakeSession:
    def __init__(self, full_logits, logprobs, top1, ids=None):
        self.full_logits, self.info = full_logits, {"compute_dtype": "bfloat16"}
        self.logprobs, self.top1, self.ids, self.asked = logprobs, top1, ids, None

    def token_dists(self, seqs, k):
        self.asked = (seqs, k)
        return [TokenDists(self.ids, self.logprobs, self.top1)]


def test_full_logits_load_the_named_baseline_beside_and_record_its_kl_per_text():
    """What measure_fidelity itself does on a full-logits backend (the KL is dists.exact's, checked against
    the model's own logits in tests/test_dists.py): the baseline variant that `baseline()` names and the
    stored sequences go to exact_fidelity, no top-k is asked, and each text's KL and agreement are written
    as JSON numbers (6 significant digits) and booleans, counted per text and token."""
    two = Baseline([[1, 2, 3], [4, 5]], [np.zeros((2, 2)), np.zeros((1, 2))], [LP, LP[:1]],
                   [np.array([5, 7]), np.array([5])], {"backend": "reference", "compute_dtype": "bfloat16", "k": 2})
    named, calls = object(), []

    def exact(variant, seqs):
        calls.append((variant, seqs))
        return [(np.array([0.0, 0.1234567891]), np.array([True, False])), (np.array([2.5e-7]), np.array([True]))]

    s = FakeSession(True, LP, np.array([5, 8]))
    s.exact_fidelity = exact
    info, rows = measure_fidelity(s, two, "reference", baseline=lambda: named)
    assert calls == [(named, [[1, 2, 3], [4, 5]])] and s.asked is None
    assert rows == [{"kl": [0.0, 0.123457], "agree": [True, False]}, {"kl": [2.5e-07], "agree": [True]}]
    assert json.loads(json.dumps(rows)) == rows                         # plain floats and bools, not numpy's
    assert info["exact"] is True and info["texts"] == 2 and info["tokens"] == 3
    assert info["support"].startswith("the full vocabulary (exact)")


def test_full_logits_without_a_baseline_to_load_compare_the_stored_top_k():
    s = FakeSession(True, LP, np.array([5, 8]), ids=np.array([[5, 6], [7, 8]]))
    s.exact_fidelity = lambda variant, seqs: pytest.fail("no baseline was named: nothing to load beside")
    info, rows = measure_fidelity(s, baseline(), "reference")
    assert s.asked == ([[1, 2, 3]], 2) and info["exact"] is False
    assert rows == [{"kl": [0.0, 0.0], "agree": [True, False]}]        # the same distributions, top-1 5/7 vs 5/8


def test_top_k_engines_compare_on_the_shared_ids():
    q = np.log(np.array([[0.6, 0.3], [0.5, 0.4]], np.float32))
    s = FakeSession(False, q, np.array([5, 7]), ids=np.array([[5, 9], [7, 8]]))
    info, rows = measure_fidelity(s, baseline("vllm"), "vllm", baseline=lambda: object())
    assert s.asked == ([[1, 2, 3]], 2) and not info["exact"]
    # position 0 shares only id 5: 0.7 log(0.7/0.6) + 0.3 log(0.3/0.4)
    assert rows[0]["kl"][0] == pytest.approx(0.7 * np.log(0.7 / 0.6) + 0.3 * np.log(0.3 / 0.4), rel=1e-5)
    assert rows[0]["kl"][1] == 0.0 and "lower bound" in info["support"]
    assert "top-2 holds 90% of its probability mass" in info["support"]


def test_a_baseline_of_another_backend_or_dtype_is_not_compared():
    s = FakeSession(True, LP, np.array([5, 7]))
    info, rows = measure_fidelity(s, baseline("vllm"), "reference")
    assert info["status"] == "unavailable" and "vllm" in info["why"] and rows == [] and s.asked is None
    info, _ = measure_fidelity(s, baseline(dtype="float32"), "reference")
    assert info["status"] == "unavailable" and "float32" in info["why"]
    info, _ = measure_fidelity(s, Baseline([], [], [], [], {"unavailable": "no checkpoint"}), "reference")
    assert info == {"status": "unavailable", "why": "no baseline distributions: no checkpoint"}
