"""evaluate's fidelity measurement (pipeline/stages/evaluate.py: measure_fidelity) with a fake session:
the baseline's stored distributions against the session's, only at the same backend and dtype."""
import numpy as np
import pytest

from pipeline.backends.base import TokenDists
from pipeline.domain.fidelity_set import Baseline
from pipeline.stages.evaluate import measure_fidelity

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


def test_full_logits_compare_with_the_baseline_loaded_beside():
    s = FakeSession(True, LP, np.array([5, 8]))
    s.exact_fidelity = lambda variant, seqs: [(np.array([0.0, 0.25]), np.array([True, False]))]
    info, rows = measure_fidelity(s, baseline(), "reference", baseline=lambda: object())
    assert s.asked is None and info["exact"] and info["texts"] == 1 and info["tokens"] == 2
    assert rows == [{"kl": [0.0, 0.25], "agree": [True, False]}]
    assert info["support"].startswith("the full vocabulary (exact)")


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
