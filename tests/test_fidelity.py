"""KL on the shared support + bucket, top-1 agreement, the bootstrap summary and the bands. Fast, no model."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pipeline.scoring.estimators.fidelity import band, position_kl, summarize, top1_agreement


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def full_kl(lp: np.ndarray, lq: np.ndarray) -> np.ndarray:
    return (np.exp(lp) * (lp - lq)).sum(axis=-1)


def pair(seed: int, t: int = 7, v: int = 50, noise: float = 0.7):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 2.0, (t, v))
    return log_softmax(logits), log_softmax(logits + rng.normal(0, noise, (t, v)))


def topk(lp: np.ndarray, k: int):
    ids = np.argsort(-lp, axis=1)[:, :k]
    return ids, np.take_along_axis(lp, ids, axis=1)


@pytest.mark.parametrize("seed", range(5))
def test_full_vocabulary_matches_brute_force(seed):
    lp, lq = pair(seed)
    t, v = lp.shape
    rng = np.random.default_rng(100 + seed)
    # Each row of P and Q listed in its own random order: matching must go by id, not position.
    p_ids = np.array([rng.permutation(v) for _ in range(t)])
    q_ids = np.array([rng.permutation(v) for _ in range(t)])
    got = position_kl(p_ids, np.take_along_axis(lp, p_ids, 1), q_ids, np.take_along_axis(lq, q_ids, 1))
    assert got.dtype == np.float64 and got.shape == (t,)
    np.testing.assert_allclose(got, full_kl(lp, lq), rtol=0, atol=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_truncated_is_a_lower_bound(seed):
    lp, lq = pair(seed)
    full = full_kl(lp, lq)
    previous = np.zeros(len(full))
    for k in (1, 3, 10, 30):
        # Reference backend: Q gathered at P's own top-k ids.
        p_ids, p_lp = topk(lp, k)
        ref = position_kl(p_ids, p_lp, p_ids, np.take_along_axis(lq, p_ids, 1))
        assert (ref >= 0).all() and (ref <= full + 1e-12).all()
        # Nested top-k sets refine the partition, so the bound can only tighten.
        assert (ref >= previous - 1e-12).all()
        previous = ref
        # vLLM: Q known only on its own top-J.
        q_ids, q_lp = topk(lq, k + 2)
        vllm = position_kl(p_ids, p_lp, q_ids, q_lp)
        assert (vllm >= 0).all() and (vllm <= full + 1e-12).all()
    assert (previous > 0).all()


def test_hand_computed_bucket():
    p = np.log([[0.5, 0.3, 0.2]])
    q = np.log([[0.4, 0.4, 0.2]])
    # K=1: only token 0 is kept; tokens 1 and 2 merge into a bucket with p_r=0.5, q_r=0.6.
    got = position_kl(np.array([[0]]), p[:, :1], np.array([[0]]), q[:, :1])
    expected = 0.5 * math.log(0.5 / 0.4) + 0.5 * math.log(0.5 / 0.6)
    assert got[0] == pytest.approx(expected, abs=1e-15)
    assert got[0] == pytest.approx(0.0204109978, abs=1e-9)
    assert got[0] < full_kl(p, q)[0]   # 0.0252672...: the bucket hides the 0.3/0.4 vs 0.2/0.2 split


def test_identical_is_zero_and_disjoint_is_bucket_only():
    lp, _ = pair(3)
    ids, vals = topk(lp, 20)
    np.testing.assert_allclose(position_kl(ids, vals, ids[:, ::-1], vals[:, ::-1]), 0.0, atol=1e-12)
    assert top1_agreement(ids[:, 0], ids[:, 0]).all()

    # P lists {0,1}, Q lists {2,3}: no shared token, everything is one bucket of mass 1 on both sides.
    p_ids, p_lp = np.array([[0, 1]]), np.log([[0.6, 0.3]])
    q_ids, q_lp = np.array([[2, 3]]), np.log([[0.5, 0.4]])
    assert position_kl(p_ids, p_lp, q_ids, q_lp)[0] == 0.0
    # One shared token: the bucket term now uses only the shared mass.
    q_ids = np.array([[1, 3]])
    expected = 0.3 * math.log(0.3 / 0.5) + 0.7 * math.log(0.7 / 0.5)
    assert position_kl(p_ids, p_lp, q_ids, q_lp)[0] == pytest.approx(expected, abs=1e-15)


def test_zero_q_mass_is_floored_not_infinite():
    # Q claims all its mass on the shared token, P keeps some outside: q_r = 0.
    got = position_kl(np.array([[0, 1]]), np.log([[0.6, 0.3]]), np.array([[0]]), np.log([[1.0]]))
    assert np.isfinite(got).all() and got[0] > 1.0


def test_padding_is_ignored():
    lp, lq = pair(7)
    p_ids, p_lp = topk(lp, 8)
    q_ids, q_lp = topk(lq, 6)
    want = position_kl(p_ids, p_lp, q_ids, q_lp)
    t = len(p_ids)
    pad_i, pad_v = np.full((t, 3), -1), np.full((t, 3), -np.inf)
    got = position_kl(np.hstack([pad_i, p_ids]), np.hstack([pad_v, p_lp]),
                      np.hstack([q_ids, pad_i, pad_i]), np.hstack([q_lp, pad_v, pad_v]))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)
    # The id alone marks padding: whatever value sits next to it (here log 1 = 0) is not read.
    junk = np.zeros((t, 3))
    got = position_kl(np.hstack([p_ids, pad_i]), np.hstack([p_lp, junk]),
                      np.hstack([pad_i, q_ids]), np.hstack([junk, q_lp]))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)
    # A row that is padding only on the Q side: nothing shared, so 0 rather than an error.
    empty_q = position_kl(p_ids, p_lp, pad_i, pad_v)
    np.testing.assert_array_equal(empty_q, 0.0)


def test_top1_agreement():
    got = top1_agreement(np.array([5, 2, 9, 0]), np.array([5, 3, 9, 1]))
    assert got.dtype == bool and got.tolist() == [True, False, True, False]
    with pytest.raises(ValueError):
        top1_agreement(np.array([1, 2]), np.array([1]))


def texts():
    rng = np.random.default_rng(0)
    # Long texts have low KL, short ones high: the token-weighted mean and the mean of text means differ.
    lengths = [40, 3, 25, 2, 60, 5, 30, 4, 50, 3, 35, 6]
    kl = [rng.exponential(0.05 if n > 10 else 0.8, n) for n in lengths]
    agree = [rng.random(n) < (0.9 if n > 10 else 0.5) for n in lengths]
    return kl, agree


def test_summarize_point_estimates_and_intervals():
    kl, agree = texts()
    pooled, flags = np.concatenate(kl), np.concatenate(agree)
    s = summarize(kl, agree, resamples=500, seed=11)
    assert s.kl_mean == pytest.approx(pooled.mean(), abs=1e-15)
    assert abs(s.kl_mean - np.mean([x.mean() for x in kl])) > 0.1
    assert s.kl_p99 == pytest.approx(np.quantile(pooled, 0.99), abs=1e-15)
    assert s.top1_agreement == pytest.approx(100.0 * flags.sum() / flags.size, abs=1e-12)
    assert (s.n_texts, s.n_tokens) == (12, pooled.size)
    for est, (lo, hi) in [(s.kl_mean, s.kl_mean_ci), (s.kl_p99, s.kl_p99_ci),
                          (s.top1_agreement, s.top1_agreement_ci)]:
        assert lo < est < hi
    assert summarize(kl, agree, resamples=500, seed=11) == s
    assert summarize(kl, agree, resamples=500, seed=12).kl_mean_ci != s.kl_mean_ci

    d = s.as_dict()
    json.dumps(d)
    assert d["kl_mean"] == float(f"{s.kl_mean:.6g}") and d["kl_mean_ci"] == [float(f"{v:.6g}") for v in s.kl_mean_ci]
    assert d["n_tokens"] == pooled.size and isinstance(d["top1_agreement_ci"], list)


def test_bootstrap_resamples_whole_texts():
    kl, agree = texts()
    # One resample: its interval collapses to that resample's statistics, recomputed here by hand.
    idx = np.random.default_rng(5).integers(0, len(kl), size=(1, len(kl)))[0]
    chosen_kl = np.concatenate([kl[i] for i in idx])
    chosen_agree = np.concatenate([agree[i] for i in idx])
    s = summarize(kl, agree, resamples=1, seed=5)
    assert s.kl_mean_ci[0] == pytest.approx(chosen_kl.mean(), abs=1e-12) == s.kl_mean_ci[1]
    assert s.kl_p99_ci[0] == pytest.approx(np.quantile(chosen_kl, 0.99), abs=1e-12)
    assert s.top1_agreement_ci[0] == pytest.approx(100.0 * chosen_agree.mean(), abs=1e-9)


def test_summarize_rejects_bad_input():
    kl, agree = texts()
    with pytest.raises(ValueError):
        summarize([], [], resamples=10, seed=0)
    with pytest.raises(ValueError):
        summarize(kl, agree[:-1], resamples=10, seed=0)
    with pytest.raises(ValueError):
        summarize([np.zeros(3)], [np.ones(2, bool)], resamples=10, seed=0)
    with pytest.raises(ValueError):
        summarize([np.array([0.1, np.nan])], [np.ones(2, bool)], resamples=10, seed=0)


def test_band():
    assert [band(0.05), band(0.5), band(2.0)] == ["excellent", "moderate", "large"]
    assert [band(0.0999), band(0.1), band(1.0), band(1.0001)] == ["excellent", "moderate", "moderate", "large"]
