"""The per-variant budget read from stage baseline's and noise's result.json and samples
(pipeline/stages/look_budget.py; the arithmetic: tests/test_time_budget.py), and the items it plans each look
to read: evaluate's own (evaluation/stratified.py). No model.

    .venv/bin/python -m pytest -n 0 -q tests/test_look_budget.py
"""
import pytest

from pipeline.domain.sets.sample_row import partial as row
from pipeline.domain.result import contract
from pipeline.domain.sets import looks
from pipeline.domain.sets.tasks import TaskSpec
from pipeline.evaluation import stratified
from pipeline.schema import ConfigError, parse
from pipeline.stages import look_budget
from tests import result_files

LOOKS = [0.25, 0.5, 0.75, 1.0]

LOCAL = {"kind": "classify", "config": "eval_sets/tasks/classification.yaml", "data": "eval_sets/sentiment.jsonl",
         "fields": {"text": "text", "label": "label"}, "labels": ["negative", "positive"], "limit": 1280}


def params(noise_floor=True, strata=None, registry=False, **budget_keys):
    classification = {"lm_eval": "arc_easy"} if registry else LOCAL
    return parse({"models": {"m": {"source": "x"}}, "tiers": {"b": {"method": "baseline"}},
                  "kv_modes": {"auto": {"cache_dtype": "auto"}, "fp8": {"cache_dtype": "fp8_e4m3"}}, "calibration": {"path": "c"},
                  "eval": {"tasks": {"classification": classification, "retrieval": {"lm_eval": "arc_easy"}},
                           "sequential": {"looks": LOOKS, "strata": strata}, "noise_floor": noise_floor},
                  "serving": {"vllm": {"budget": budget_keys}},
                  "decision": {"baseline": {"tier": "b"}, "tolerances": {"acc": {"abs": 3.0}}},
                  "report": {}, "memory": {"target_gpus": {}}})


def baseline_result(computed=1280, seconds=640.0):
    return contract.parse(result_files.variant(
        tier="b", metrics={"classification/acc": 80.0, "retrieval/score": 50.0}, num_samples={"classification": 1280},
        phases={"load": 40.0}, sample_cache={"tasks": {"classification": {"computed": computed, "seconds": seconds}}}),
        "baseline")


# the default run's baseline: 630 of its 1,280 classification items decided by less than 0.5 nats
SPEC = looks.in_look_order([TaskSpec("classification", "classify", {}, "c", 1280, {"acc": True}, pool=1280)], 1234,
                           {"classification": "eval_sets/sentiment.jsonl"})[0]
ROWS = {"classification": [row(doc_id=d, gold=0, pred=0, logliks=[-1.0, -1.2 if i < 630 else -3.0])
                           for i, d in enumerate(SPEC.docs)]}
DEFAULT_STRATA = {"below": 0.5, "share": 0.5}


def test_the_planned_reads_are_evaluates_own_in_strata_of_the_baseline():
    p = params(strata=DEFAULT_STRATA)
    planned = look_budget.look_reads(p, {"classification": 1280}, ROWS)
    assert planned == {"classification": [240, 478, 717, 955]}        # not 320/640/960/1,280
    assert planned["classification"] == stratified.plan(SPEC, ROWS["classification"], p.eval).sizes
    assert look_budget.first_look(p, baseline_result(), ROWS) == {"classification": 240}
    # no strata, or a baseline without label log-likelihoods: sequential.look_sizes
    assert look_budget.look_reads(params(), {"classification": 1280}, ROWS) == {"classification": [320, 640, 960, 1280]}
    assert look_budget.look_reads(p, {"classification": 1280}, {}) == {"classification": [320, 640, 960, 1280]}
    # a registry task is read whole at its first look (evaluation/looks_runner.py), as is every task without looks
    assert look_budget.look_reads(p, {"retrieval": 100}, ROWS) == {"retrieval": [100]}
    assert look_budget.first_look(params(registry=True), baseline_result(), ROWS) == {"classification": 1280}


def test_a_stratified_first_look_sizes_a_smaller_budget():
    p = params(max_wall_s=210, first_look_margin=2.0, noise_floor=False, strata=DEFAULT_STRATA)
    assert look_budget.fit(p, "m", baseline_result(), ROWS, None).need_s == pytest.approx(2 * (40 + 240 * 0.5))


def test_the_stage_reads_the_baselines_seconds_per_sample_and_the_noise_floors():
    p = params(max_wall_s=210, first_look_margin=2.0)
    assert look_budget.first_look(p, baseline_result(), {}) == {"classification": 320}    # retrieval: not gated
    found = look_budget.fit(p, "m", baseline_result(), {}, None)
    assert found.variants == 1 and found.need_s == pytest.approx(2 * (40 + 320 * 0.5))
    assert found.max_wall_s == 400 and found.gpu_max_wall_s == 1200
    noise = contract.parse(result_files.noise(sample_cache={"tasks": {"classification": {"computed": 100,
                                                                                             "seconds": 25.0}}}), "noise")
    assert look_budget.fit(p, "m", baseline_result(), {}, noise).need_s == pytest.approx(2 * (40 + 320 * 0.75))


def test_a_baseline_read_from_the_cache_is_not_sized_and_keeps_the_users_budget():
    found = look_budget.fit(params(max_wall_s=210), "m", baseline_result(computed=0, seconds=0.0), {}, None)
    assert found.need_s is None and found.max_wall_s == 210 and "classification" in found.why_unsized


def test_evaluate_stops_before_serving_when_the_total_cannot_fit_a_look(monkeypatch):
    monkeypatch.setattr(look_budget, "load", lambda model: (baseline_result(), {}, None))
    with pytest.raises(ConfigError, match="^serving.vllm.budget.max_total_s: 300 s cannot fit one look"):
        look_budget.fitted_params(params(max_total_s=300), "m")
    fitted = look_budget.fitted_params(params(max_total_s=3000), "m")
    assert fitted.serving.vllm.budget.max_wall_s == 400
    assert look_budget.prediction(params(max_total_s=300), "m", baseline_result(), {}, "cpu").startswith("evaluate will stop")
    # the check in the second arithmetic (eval.noise_floor) is counted at the baseline's own speed:
    # 2 x (40 s load + 320 samples x (0.5 + 0.5) s); without it, 2 x (40 + 320 x 0.5)
    assert look_budget.prediction(params(), "m", baseline_result(), {}, "cpu") == (
        "1 variant x at most 720 s each = at most 12 min of variant evaluation (a first look of every gated "
        "task: about 720 s); the check in the second arithmetic counted at the baseline's speed (evaluate "
        "sizes it from stage noise's)")
    assert look_budget.prediction(params(noise_floor=False), "m", baseline_result(), {}, "cpu") == (
        "1 variant x at most 400 s each = at most 7 min of variant evaluation (a first look of every gated "
        "task: about 400 s)")


def test_the_budget_keys_are_checked():
    with pytest.raises(ConfigError, match="serving.vllm.budget.first_look_margin: must be >= 1"):
        params(first_look_margin=0.5)
    with pytest.raises(ConfigError, match="serving.vllm.budget.max_total_s: must be positive"):
        params(max_total_s=0)
