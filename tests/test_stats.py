import pytest

from pipeline.schema import Tolerance
from pipeline.scoring.estimators import stats
from pipeline.scoring.verdict.judge import FAIL, INCONCLUSIVE, PASS, judge_metric

TOL = Tolerance(abs=3.0)


def test_identical_outputs_never_pass_on_a_zero_width_interval():
    """Before 2026-12 identical graded outputs had the interval [0, 0] and passed any margin."""
    graded = [40.0, 12.5, 100.0, 77.0, 0.0] * 10
    iv = stats.paired_graded_mean(graded, graded)
    assert iv.delta == 0.0 and iv.lo < -3.0 and iv.hi > 3.0
    assert judge_metric("rougeL", 60.0, iv, TOL, None).verdict == INCONCLUSIVE
    refs = ["Der Hund schläft.", "Es regnet heute."] * 5
    civ = stats.paired_corpus("chrf", refs, refs, refs)
    assert civ.delta == 0.0 and civ.lo < -3.0 and civ.hi > 3.0


def test_truly_worse_by_twice_the_tolerance_fails():
    base = [100.0] * 600
    tier = [100.0] * 564 + [0.0] * 36          # 6 points worse = 2 x tolerance 3
    iv = stats.paired_binary_mean(base, tier)
    assert iv.delta == pytest.approx(-6.0)
    v = judge_metric("acc", 100.0, iv, TOL, None)
    assert v.verdict == FAIL and "below -3.00" in v.why


def test_ten_samples_small_drop_is_inconclusive():
    base = [100.0] * 10
    tier = [100.0] * 9 + [0.0]                  # -10 points on n=10: interval far too wide
    iv = stats.paired_binary_mean(base, tier)
    assert iv.lo < -3.0 <= iv.hi
    assert judge_metric("acc", 100.0, iv, TOL, None).verdict == INCONCLUSIVE


def test_intervals_are_deterministic_and_draw_no_bootstrap():
    base = [float(i % 7) for i in range(60)]
    tier = [float((i * 3) % 7) for i in range(60)]
    a = stats.paired_graded_mean(base, tier)
    assert a == stats.paired_graded_mean(base, tier) and "se" not in a.as_dict()
    refs = [f"Satz Nummer {i} ist hier." for i in range(20)]
    hyp = [f"Satz {i} ist da." for i in range(20)]
    x = stats.paired_corpus("bleu", refs, refs, hyp)
    assert x == stats.paired_corpus("bleu", refs, refs, hyp) and x.delta < 0 and x.lo <= x.delta <= x.hi


def test_corpus_delta_matches_sacrebleu():
    import sacrebleu

    refs = ["Der Zug fährt um neun.", "Bitte Salz hinzufügen.", "Morgen regnet es."]
    base = ["Der Zug fährt um neun.", "Bitte Salz.", "Morgen regnet es."]
    tier = ["Zug um neun.", "Bitte Salz.", "Es regnet."]
    iv = stats.paired_corpus("bleu", refs, base, tier)
    expected = sacrebleu.corpus_bleu(tier, [refs]).score - sacrebleu.corpus_bleu(base, [refs]).score
    assert iv.delta == pytest.approx(expected)


def test_flips_counted_exactly():
    golds = [0, 1, 0, 1, 0, 1]
    base = [0, 1, 1, 1, 0, 0]
    tier = [0, 0, 0, 1, 1, 1]
    f = stats.flips(golds, base, tier)
    assert (f.right_to_wrong, f.wrong_to_right, f.n) == (2, 2, 6)
    assert f.rate == pytest.approx(4 / 6)


def test_near_zero_baseline_is_inconclusive_even_with_a_tight_interval():
    iv = stats.Interval(0.0, 0.0, 0.0, 100)
    v = judge_metric("bleu", 0.3, iv, Tolerance(abs=1.0), 5.0)
    assert v.verdict == INCONCLUSIVE and "cannot do this task" in v.why


def test_mismatched_lengths_rejected():
    with pytest.raises(ValueError):
        stats.paired_graded_mean([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="binary metric's per-sample score is 0 or 100, got 40"):
        stats.paired_binary_mean([100.0, 40.0], [100.0, 0.0])     # declared binary, computing something else


@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_sacrebleu_private_statistics_contract(metric):
    """paired_corpus relies on two private sacrebleu methods (pinned in pyproject.toml): they exist,
    and summed per-sentence statistics give the public corpus score, on the whole set and a subset."""
    import sacrebleu

    assert sacrebleu.__version__ == "2.6.0"
    m = stats.sentence_metric(metric)
    assert callable(m._extract_corpus_statistics) and callable(m._compute_score_from_stats)
    public = {"bleu": sacrebleu.corpus_bleu, "chrf": sacrebleu.corpus_chrf}[metric]
    refs = ["Der Zug fährt um neun Uhr ab.", "Bitte Salz hinzufügen.", "Morgen regnet es.", "Der Hund schläft."]
    hyps = ["Der Zug fährt um neun ab.", "Bitte Salz.", "Es regnet morgen.", "Ein Hund schläft hier."]
    seg = stats.segment_stats(m, hyps, refs)
    assert seg.shape[0] == len(refs)
    assert stats.score_from_stats(m, seg.sum(0)) == public(hyps, [refs]).score
    subset = [0, 2, 2, 3]                                      # a bootstrap draw repeats sentences
    assert stats.score_from_stats(m, seg[subset].sum(0)) == pytest.approx(
        public([hyps[i] for i in subset], [[refs[i] for i in subset]]).score, abs=1e-9)


def _corpus_case():
    words = "der die das zug fährt um neun uhr ab es regnet morgen bitte salz hinzufügen hund schläft".split()
    refs = [" ".join(words[(i * 3 + j) % len(words)] for j in range(4 + i % 5)) for i in range(24)]
    base = [" ".join(r.split()[: -1 - (i % 2)]) for i, r in enumerate(refs)]
    tier = [" ".join(reversed(r.split())) if i % 3 == 0 else r for i, r in enumerate(refs)]
    return refs, base, tier


@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_paired_corpus_reads_the_jackknife_of_sacrebleus_public_scores(metric):
    """Brute force: each leave-one-out corpus score recomputed with sacrebleu's public corpus_bleu /
    corpus_chrf (not from summed statistics); the pseudo-values' variance is the interval's."""
    import numpy as np
    import sacrebleu

    refs, base, tier = _corpus_case()
    public = {"bleu": sacrebleu.corpus_bleu, "chrf": sacrebleu.corpus_chrf}[metric]

    def score(hyps, idx):
        return public([hyps[i] for i in idx], [[refs[i] for i in idx]]).score

    n = len(refs)
    everything = list(range(n))

    def pseudo(hyps):
        full = score(hyps, everything)
        return np.array([n * full - (n - 1) * score(hyps, [j for j in everything if j != i]) for i in everything])

    diffs = pseudo(tier) - pseudo(base)
    found = stats.paired_corpus(metric, refs, base, tier)
    assert found.delta == pytest.approx(score(tier, everything) - score(base, everything), abs=1e-9)
    assert found.graded.var == pytest.approx(diffs.var(ddof=1), rel=1e-9)
    assert found.graded.changed == sum(a != b for a, b in zip(base, tier))
    assert found.n == 24 and found.lo < found.delta < found.hi


def test_identical_answers_of_a_0_100_metric_are_evidence_in_proportion_to_n():
    """No discordant pair of 50 cannot exclude a 3-point loss (about 3/n, the rule of three); of 640 it can."""
    scores = [100.0, 0.0, 100.0, 100.0, 0.0]
    small = stats.paired_binary_mean(scores * 10, scores * 10)
    assert small.discordant == (0, 0) and small.lo < -3.0 < 0.0 < -small.lo == small.hi
    assert judge_metric("acc", 60.0, small, TOL, None).verdict != PASS
    large = stats.paired_binary_mean(scores * 128, scores * 128)
    assert -1.5 < large.lo < 0.0 and judge_metric("acc", 60.0, large, TOL, None).verdict == PASS


def test_paired_mean_interval_has_the_width_of_the_normal_approximation():
    """Closed form: 600 paired samples, 36 of them 100 -> 0: delta -6, per-sample SD 100 sqrt(p (1 - p)) at
    p = 0.06 = 23.75, so a 95% interval of -6 +- 1.96 x 23.75 / sqrt(600) = -6 +- 1.90. The bootstrap's
    percentile bounds agree within its Monte Carlo error and the 1/6-point steps of a mean of 600 scores."""
    base = [50.0] * 600                      # graded values: the bootstrap (a 0/100 metric has its own)
    tier = [50.0] * 564 + [-50.0] * 36
    iv = stats.paired_graded_mean(base, tier)
    half = 1.96 * 100 * (0.06 * 0.94) ** 0.5 / 600 ** 0.5
    assert iv.delta == pytest.approx(-6.0)
    assert iv.lo == pytest.approx(-6.0 - half, abs=0.35) and iv.hi == pytest.approx(-6.0 + half, abs=0.35)
    narrower = stats.paired_graded_mean(base, tier, confidence=0.5)   # +- 0.674 SE
    assert narrower.hi - narrower.lo == pytest.approx(2 * 0.674 * half / 1.96, abs=0.35)
