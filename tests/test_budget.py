"""The time-budget prediction (pipeline/scoring/planning/eval_time.py): where a budget ends a variant's looks and
what to change, from seconds per sample (unit)."""
import pytest

from pipeline.scoring.planning import eval_time as budget

LOOKS = [0.25, 0.5, 0.75, 1.0]


def test_each_look_s_seconds_are_the_load_and_its_samples():
    found = budget.predict({"c": 0.1, "s": 2.0}, {"c": 1280, "s": 96}, LOOKS, load_s=40.0, budget_s=None)
    assert found.reads == {"c": [320, 640, 960, 1280], "s": [24, 48, 72, 96]}
    assert found.looks == pytest.approx([40 + 32 + 48, 40 + 64 + 96, 40 + 96 + 144, 40 + 128 + 192])
    assert found.last_look == 4 and budget.advice(found, "b") == "no time budget: about 360 s"


def test_a_budget_ends_at_the_last_look_it_lets_finish_and_says_what_to_raise():
    found = budget.predict({"c": 0.1, "s": 2.0}, {"c": 1280, "s": 96}, LOOKS, load_s=40.0, budget_s=210)
    assert found.last_look == 2
    assert budget.advice(found, "serving.vllm.budget.max_wall_s") == (
        "serving.vllm.budget.max_wall_s (210 s) ends it at look 2 of 4 (c 640 of 1,280, s 48 of 96): about 360 s "
        "to read every look; raise serving.vllm.budget.max_wall_s to 440 (20% over) or lower the caps "
        "(eval.tasks.<task>.limit)")
    assert budget.predict({"c": 1.0}, {"c": 100}, LOOKS, 300.0, 210).last_look == 0
    assert "before its first look" in budget.advice(budget.predict({"c": 1.0}, {"c": 100}, LOOKS, 300.0, 210), "b")
    assert budget.advice(budget.predict({"c": 0.1}, {"c": 100}, LOOKS, 10.0, 210), "b") == "within b (210 s): about 20 s"


def test_a_small_cap_repeats_its_size_at_the_later_looks():
    assert budget.predict({"c": 1.0}, {"c": 3}, LOOKS, 0.0, None).reads == {"c": [2, 2, 3, 3]}
