import math

import pytest

from pipeline.domain.sets import metrics


def test_bleu_chrf_identical_is_100():
    refs = ["Der Zug fährt um neun ab.", "Es regnet morgen."]
    assert metrics.corpus_bleu(refs, refs) == pytest.approx(100.0)
    assert metrics.corpus_chrf(refs, refs) == pytest.approx(100.0)


def test_bleu_disjoint_is_zero():
    assert metrics.corpus_bleu(["a b c d"], ["w x y z"]) == 0.0


def test_rouge_uses_stemming():
    # "cats running" and "cat run" share no surface token: 0 without stemming, 100 with Porter stems.
    from rouge_score import rouge_scorer

    plain = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=False).score("cats running", "cat run")
    assert plain["rouge1"].fmeasure == 0.0 and plain["rougeL"].fmeasure == 0.0
    assert metrics.rouge("cats running", "cat run") == {"rouge1": 100.0, "rouge2": 100.0, "rougeL": 100.0}
    assert metrics.rouge("same text here", "same text here")["rougeL"] == pytest.approx(100.0)


def test_macro_f1_hand_computed():
    golds = [0, 0, 1, 1]
    preds = [0, 1, 1, 1]
    # label 0: tp1 fp0 fn1 -> 2/3; label 1: tp2 fp1 fn0 -> 4/5
    assert metrics.macro_f1(golds, preds, 2) == pytest.approx(100 * (2 / 3 + 4 / 5) / 2)


def test_macro_f1_counts_absent_label_as_zero():
    assert metrics.macro_f1([0, 0], [0, 0], 2) == pytest.approx(50.0)


def test_empty_inputs_are_nan():
    assert math.isnan(metrics.macro_f1([], [], 2))
    assert math.isnan(metrics.mean([]))


def test_clean_generation_takes_first_nonempty_line():
    assert metrics.clean_generation("\n  Hallo Welt \nmore") == "Hallo Welt"
    assert metrics.clean_generation("   ") == ""
