"""pipeline/scoring/estimators/analysis.py on hand-built sample rows (the shape task_rows.sample_row writes),
with every expected number worked out by hand."""
import dataclasses

import pytest

from pipeline.domain.sets.sample_row import partial as sample
from pipeline.scoring.estimators import analysis
from pipeline.scoring.estimators.analysis import Bucket

CONFIDENCE = 0.95


def cls(doc_id, gold, logliks, prompt_chars=None):
    pred = max(range(len(logliks)), key=logliks.__getitem__)
    return sample(doc_id=doc_id, gold=gold, logliks=logliks, pred=pred, prompt_chars=prompt_chars,
                  scores={"acc": 100.0 * (pred == gold)})


def gen(doc_id, target="", output="", prompt_chars=None, **scores):
    return sample(doc_id=doc_id, target=target, output=output, prompt_chars=prompt_chars, scores=scores)


def test_align_pairs_by_doc_id_whatever_the_order():
    base = [gen(2, rougeL=1.0), gen(0, rougeL=2.0), gen(1, rougeL=3.0)]
    tier = [gen(1, rougeL=4.0), gen(2, rougeL=5.0), gen(0, rougeL=6.0)]
    pairs = analysis.align(base, tier)
    assert [(b.doc_id, t.doc_id) for b, t in pairs] == [(0, 0), (1, 1), (2, 2)]
    assert [(b.scores["rougeL"], t.scores["rougeL"]) for b, t in pairs] == [(2.0, 6.0), (3.0, 4.0), (1.0, 5.0)]


def test_align_rejects_different_documents():
    with pytest.raises(ValueError, match=r"different samples \(2 vs 2\)"):
        analysis.align([gen(0), gen(1)], [gen(0), gen(2)])


def test_sample_score_key_prefers_acc_then_rougeL_then_chrf():
    assert analysis.sample_score_key([gen(0, rouge1=1.0, rougeL=2.0, chrf=3.0)]) == "rougeL"
    assert analysis.sample_score_key([gen(0, chrf=3.0)]) == "chrf"
    assert analysis.sample_score_key([cls(0, 0, [0.0, -1.0])]) == "acc"
    assert analysis.sample_score_key([gen(0, exact_match=100.0)]) == "exact_match"   # a registry task's own
    with pytest.raises(ValueError, match="no per-sample score"):
        analysis.sample_score_key([gen(0)])


def test_intervals_per_sample_metric():
    base = [cls(i, 0, [0.0, -1.0]) for i in range(4)]                      # all right
    tier = base[:3] + [cls(3, 0, [-1.0, 0.0])]                             # last one wrong: -25 points
    out = analysis.intervals(["acc", "macro_f1"], list(zip(base, tier)), CONFIDENCE)
    assert set(out) == {"acc"}                       # macro_f1 has no per-sample score: no interval
    iv = out["acc"]
    assert (iv.delta, iv.n) == (-25.0, 4)
    assert iv.discordant == (1, 0)                   # a 0/100 metric: the paired score interval
    assert -100.0 <= iv.lo <= -25.0 <= iv.hi <= 100.0


@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_intervals_corpus_metrics_score_cleaned_outputs(metric):
    refs = ["abc abc abc abc", "abcd abcd abcd abcd", "bcd bcd bcd bcd"]
    base = [gen(i, target=r, output=r) for i, r in enumerate(refs)]
    same = [gen(i, target=r, output=f"\n  {r}  \nsecond line") for i, r in enumerate(refs)]
    disjoint = [gen(i, target=r, output="xyz xyz xyz xyz") for i, r in enumerate(refs)]
    iv = analysis.intervals([metric], list(zip(base, same)), CONFIDENCE)[metric]
    # the first non-empty line is scored: nothing changed (and 3 identical outputs settle nothing)
    assert (iv.delta, iv.n, iv.graded.changed) == (0.0, 3, 0) and iv.lo < -10 and iv.hi > 10
    iv = analysis.intervals([metric], list(zip(base, disjoint)), CONFIDENCE)[metric]
    assert iv.delta == pytest.approx(-100.0) and iv.graded.changed == 3


def test_flips():
    golds, base_preds, tier_preds = [0, 1, 0, 1, 1], [0, 1, 1, 0, 1], [1, 1, 0, 0, 0]
    ll = {0: [0.0, -1.0], 1: [-1.0, 0.0]}
    pairs = [(cls(i, g, ll[b]), cls(i, g, ll[t])) for i, (g, b, t) in enumerate(zip(golds, base_preds, tier_preds))]
    f = analysis.flips(pairs)
    # doc 0 right->wrong, 2 wrong->right, 4 right->wrong; 1 stays right, 3 stays wrong
    assert (f.right_to_wrong, f.wrong_to_right, f.n) == (2, 1, 5)


def test_largest_regressions_classification_flips_first_then_margin():
    pairs = [
        (cls(0, 0, [-1.0, -3.0]), cls(0, 0, [-2.0, -1.0])),    # flip right->wrong: 100 + (2 - (-1)) = 103
        (cls(1, 1, [-3.0, -1.0]), cls(1, 1, [-2.5, -1.5])),    # still right, margin 2 -> 1: drop 1
        (cls(2, 0, [-2.0, -1.0]), cls(2, 0, [-1.0, -2.0])),    # wrong->right: -102, not a regression
        (cls(3, 0, [-1.0, -2.0]), cls(3, 0, [-1.0, -2.0])),    # unchanged: 0, not listed
    ]
    regs = analysis.largest_regressions(pairs, k=5)
    assert [(r.doc_id, r.drop) for r in regs] == [(0, 103.0), (1, 1.0)]
    assert regs[0].base is pairs[0][0] and regs[0].tier is pairs[0][1]
    assert [r.doc_id for r in analysis.largest_regressions(pairs, k=1)] == [0]
    assert analysis.largest_regressions([], k=3) == []


def test_largest_regressions_generation_uses_rougeL_and_breaks_ties_by_doc_id():
    pairs = [(gen(3, rouge1=0.0, rougeL=90.0), gen(3, rouge1=99.0, rougeL=60.0)),    # -30
             (gen(0, rouge1=0.0, rougeL=80.0), gen(0, rouge1=0.0, rougeL=50.0)),     # -30
             (gen(1, rouge1=50.0, rougeL=60.0), gen(1, rouge1=0.0, rougeL=60.0)),    # rouge1 only: not listed
             (gen(2, rouge1=0.0, rougeL=40.0), gen(2, rouge1=0.0, rougeL=70.0))]     # +30
    assert [(r.doc_id, r.drop) for r in analysis.largest_regressions(pairs, k=3)] == [(0, 30.0), (3, 30.0)]


def test_by_length_buckets_by_prompt_chars():
    lengths_and_scores = {0: (10, 100.0, 0.0), 1: (99, 100.0, 100.0), 2: (None, 0.0, 100.0),
                          3: (100, 100.0, 0.0), 4: (399, 100.0, 0.0), 5: (500, 0.0, 100.0)}
    pairs = [(gen(i, prompt_chars=n, acc=b), gen(i, prompt_chars=n, acc=t))
             for i, (n, b, t) in lengths_and_scores.items()]
    assert analysis.by_length(pairs, [0, 100, 400, 1000]) == [
        Bucket(0, 100, 3, 0.0),            # docs 0, 1, 2 (no length counts as 0): (-100 + 0 + 100) / 3
        Bucket(100, 400, 2, -100.0),       # docs 3, 4
        Bucket(400, 1000, 1, 100.0),       # doc 5
        Bucket(1000, None, 0, None),       # empty bucket: no delta
    ]
    assert analysis.by_length([], [0, 100]) == []


def test_a_stratified_read_is_weighted_by_length_as_its_delta_is():
    """Two strata of a pool of 100 + 100, read 4 + 1: the one read item of the sure stratum stands for
    100 items, not a fifth of the read; the bucket's delta equals the stratified delta over the pool."""
    def row(doc, right, stratum):
        r = cls(doc, 0, [-1.0, -2.0] if right else [-2.0, -1.0], prompt_chars=50)
        return dataclasses.replace(r, stratum=stratum, strata=[100, 100])
    base = [row(i, True, 0 if i < 4 else 1) for i in range(5)]
    tier = [row(0, False, 0)] + [row(i, True, 0 if i < 4 else 1) for i in range(1, 5)]
    pairs = list(zip(base, tier))
    (bucket,) = analysis.by_length(pairs, [0])
    # stratified: stratum 0 loses 1 of 4 (-25 points) at half the pool, stratum 1 loses none: -12.5
    assert bucket.delta == pytest.approx(-12.5) and bucket.n == 5
    iv = analysis.intervals(["acc"], pairs, CONFIDENCE)["acc"]
    assert iv.delta == pytest.approx(bucket.delta)
    assert analysis.flips(pairs).share == pytest.approx(0.125)        # the plain share read would be 0.2
