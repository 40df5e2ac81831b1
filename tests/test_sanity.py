"""The baseline's sanity check (pipeline/scoring/estimators/sanity.py): loops, empty generations and choice tasks
at chance, and the error rates of its binomial test, simulated."""
import math
import random

import pytest

from pipeline.scoring.estimators import sanity
from pipeline.domain.sets import loops
from pipeline.domain.sets.sample_row import partial as row


@pytest.mark.parametrize("text, unit", [
    (" 1 1 1 1 1 1", "1"), ("the cat the cat the cat the cat", "the cat"),
    ("Answer: yes yes yes yes yes yes", "yes"),
    ("Der Hund läuft schnell über die Straße.", None), ("a a a", None),        # too few repeats
    ("One clear sentence, then: ok ok ok ok, and many more words that are not a loop at all here", None),
])
def test_a_loop_is_a_unit_repeated_over_most_of_the_output(text, unit):
    assert loops.loop_unit(text) == unit


def gen(outputs):
    return [row(output=o) for o in outputs]


def test_generations_that_loop_or_are_empty_are_found_past_a_quarter():
    rows = gen([" 1 1 1 1 1"] * 3 + ["A fine summary of the text."] * 9)
    (f,) = sanity.findings({"summarization": rows})
    assert (f.task, f.kind) == ("summarization", "loops") and f.what.startswith("3 of 12 generations loop")
    assert "chat template" in f.causes
    assert sanity.findings({"summarization": gen([" 1 1 1 1 1"] * 2 + ["fine."] * 10)}) == []
    (e,) = sanity.findings({"translation": gen(["", " "] + ["Hallo Welt."] * 2)})
    assert e.kind == "empty" and e.what == "2 of 4 generations are empty"


def choice(n, correct, k=2, tied=0):
    return [row(choices=["a"] * k, gold=0, pred=0 if i < correct else 1,
                logliks=[-1.0] * k if i < tied else [-1.0] + [-2.0] * (k - 1)) for i in range(n)]


def test_a_choice_task_at_chance_is_found_with_its_ties():
    (f,) = sanity.findings({"classification": choice(40, 21, tied=40)})
    assert f.kind == "chance" and f.what.startswith("accuracy 21/40 is not above chance (50%")
    assert f.what.endswith("40 with every choice's log-likelihood equal") and "log-probs" in f.causes
    assert sanity.findings({"classification": choice(40, 36)}) == []


def test_the_binomial_tail_is_exact():
    assert sanity.above_chance_p(3, 3, 0.5) == pytest.approx(1 / 8)
    assert sanity.above_chance_p(0, 5, 0.3) == pytest.approx(1.0)
    assert sanity.above_chance_p(2, 4, 0.5) == pytest.approx(11 / 16)
    # past ~1,030 items comb(n, k) is too large for a float: a 2,560-item set stopped decide
    assert sanity.above_chance_p(1280, 2560, 0.5) == pytest.approx(0.5 + math.comb(2560, 1280) / 2 ** 2561)
    assert sanity.above_chance_p(2200, 2560, 0.5) < 1e-200 and sanity.above_chance_p(0, 5000, 0.5) == pytest.approx(1.0)


def simulate(accuracy, n, k, runs, rng):
    flagged = 0
    for _ in range(runs):
        correct = sum(rng.random() < accuracy for _ in range(n))
        flagged += bool(sanity.choice_findings("t", choice(n, correct, k)))
    return flagged / runs


def test_error_rates_simulated():
    """A model at chance is flagged in at least 1 - alpha of runs (the test's size: a model at chance is
    called better than chance in at most alpha); one at 75% on 2 choices, 64 samples, almost never."""
    rng = random.Random(7)
    at_chance = simulate(0.5, 64, 2, 400, rng)
    assert at_chance >= 1 - sanity.ALPHA - 0.03, at_chance           # 0.03: 3 SEs of 400 runs at alpha
    assert simulate(0.25, 64, 4, 400, rng) >= 1 - sanity.ALPHA - 0.03
    assert simulate(0.75, 64, 2, 400, rng) <= 0.02                      # power ~0.99 here
