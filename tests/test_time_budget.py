"""The time budget's arithmetic (pipeline/scoring/planning/time_budget.py): where a budget ends a variant's
looks and what to change, and the per-variant budget fitted from a measured speed (unit).

    .venv/bin/python -m pytest -n 0 -q tests/test_time_budget.py
"""
import pytest

from pipeline.scoring.planning import time_budget

# the default run's classification read in strata of its baseline (eval.sequential.strata {below: 0.5,
# share: 0.5}; pool 630 + 650): the design's reads, tests/test_look_budget.py derives them
CLASSIFICATION = [240, 478, 717, 955]
SUMMARIZATION = [24, 48, 72, 96]


def test_each_look_s_seconds_are_the_load_and_the_designs_reads():
    found = time_budget.predict({"c": 0.1, "s": 2.0}, {"c": CLASSIFICATION, "s": SUMMARIZATION}, load_s=40.0,
                           budget_s=None)
    assert found.reads == {"c": CLASSIFICATION, "s": SUMMARIZATION}
    assert found.looks == pytest.approx([40 + 24 + 48, 40 + 47.8 + 96, 40 + 71.7 + 144, 40 + 95.5 + 192])
    assert found.last_look == 4 and time_budget.advice(found, "b") == "no time budget: about 328 s"


def test_a_budget_ends_at_the_last_look_it_lets_finish_and_says_what_to_raise():
    found = time_budget.predict({"c": 0.1, "s": 2.0}, {"c": CLASSIFICATION, "s": SUMMARIZATION}, 40.0, 200)
    assert found.last_look == 2
    assert time_budget.advice(found, "serving.vllm.budget.max_wall_s") == (
        "serving.vllm.budget.max_wall_s (200 s) ends it at look 2 of 4 (c 478 of 955, s 48 of 96): about 328 s "
        "to read every look; raise serving.vllm.budget.max_wall_s to 400 (20% over) or lower the caps "
        "(eval.tasks.<task>.limit)")
    assert time_budget.predict({"c": 1.0}, {"c": [25, 50, 75, 100]}, 300.0, 210).last_look == 0
    assert "before its first look" in time_budget.advice(time_budget.predict({"c": 1.0}, {"c": [25, 100]}, 300.0, 210), "b")
    assert time_budget.advice(time_budget.predict({"c": 0.1}, {"c": [25, 50, 75, 100]}, 10.0, 210), "b") == (
        "within b (210 s): about 20 s")


def test_a_task_with_fewer_looks_is_done_after_its_last():
    # a small cap (sequential.look_sizes drops a look that reads nothing new) or a task read whole
    found = time_budget.predict({"c": 1.0, "r": 1.0}, {"c": [2, 3], "r": [10]}, 0.0, None)
    assert found.reads == {"c": [2, 3], "r": [10, 10]}
    assert found.looks == [12.0, 13.0]


# the AMD EPYC (no AMX): classification slow enough that a first look did not fit 210 s
PER = {"classification": 0.5, "summarization": 2.5}
READS = {"classification": CLASSIFICATION, "summarization": SUMMARIZATION}
FIRST = {"classification": 240, "summarization": 24}


def test_from_a_measured_speed_the_budget_fits_a_first_look_where_210_s_did_not():
    need = time_budget.first_look_s(PER, FIRST, load_s=45.0, margin=1.0)
    assert need == pytest.approx(45 + 240 * 0.5 + 24 * 2.5)
    per = time_budget.per_variant_s(need, floor_s=210, cap_s=None, variants=13)
    # the probe's predictor (pipeline/budget.py), at the baseline's speed: the fitted budget lets look 1 finish
    assert time_budget.predict(PER, READS, 45.0, per).last_look >= 1
    assert time_budget.predict(PER, READS, 60.0, 210).last_look == 0      # the fixed 210 s did not
    # the margin: a variant twice as slow as the baseline still finishes look 1
    slow = {t: 2 * s for t, s in PER.items()}
    fitted = time_budget.per_variant_s(time_budget.first_look_s(PER, FIRST, 45.0, margin=2.0), 210, None, 13)
    assert time_budget.predict(slow, READS, 90.0, fitted).last_look >= 1


def test_a_fast_machine_keeps_the_users_per_variant_budget_and_a_total_caps_it():
    assert time_budget.per_variant_s(100.0, floor_s=210, cap_s=None, variants=13) == 210
    assert time_budget.per_variant_s(100.0, floor_s=None, cap_s=None, variants=13) is None
    assert time_budget.per_variant_s(100.0, floor_s=210, cap_s=13 * 150, variants=13) == 150
    assert time_budget.per_variant_s(100.0, floor_s=None, cap_s=13 * 150, variants=13) == 150


def test_a_total_too_small_for_one_look_per_variant_stops_with_one_line():
    with pytest.raises(time_budget.CapTooSmall) as e:
        time_budget.per_variant_s(265.0, floor_s=210, cap_s=1800, variants=13)
    line = str(e.value)
    assert "\n" not in line and line.startswith("serving.vllm.budget.max_total_s: 1,800 s cannot fit one look")
    assert "13 variants x 265 s" in line and "3,445 s" in line
