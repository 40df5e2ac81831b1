"""The per-variant budget sized from the baseline's measured speed (pipeline/scoring/planning/look_fit.py) and its
reading of stage baseline's and noise's result.json (pipeline/stages/look_budget.py). No model."""
import pytest

from pipeline.domain import result_json
from pipeline.schema import ConfigError, parse
from pipeline.scoring.planning import eval_time as budget, look_fit
from pipeline.stages import look_budget
from tests import result_files

# the AMD EPYC (no AMX): classification slow enough that a first look did not fit 210 s
PER = {"classification": 0.5, "summarization": 2.5}
CAPS = {"classification": 1280, "summarization": 96}
LOOKS = [0.25, 0.5, 0.75, 1.0]
FIRST = {"classification": 320, "summarization": 24}


def test_from_a_measured_speed_the_budget_fits_a_first_look_where_210_s_did_not():
    need = look_fit.first_look_s(PER, FIRST, load_s=45.0, margin=1.0)
    assert need == pytest.approx(45 + 320 * 0.5 + 24 * 2.5)
    per = look_fit.per_variant_s(need, floor_s=210, cap_s=None, variants=13)
    # the predictor of pipeline/budget.py, at the baseline's speed: the fitted budget lets look 1 finish
    assert budget.predict(PER, CAPS, LOOKS, 45.0, per).last_look >= 1
    assert budget.predict(PER, CAPS, LOOKS, 45.0, 210).last_look == 0      # the fixed 210 s did not
    # the margin: a variant twice as slow as the baseline still finishes look 1
    slow = {t: 2 * s for t, s in PER.items()}
    fitted = look_fit.per_variant_s(look_fit.first_look_s(PER, FIRST, 45.0, margin=2.0), 210, None, 13)
    assert budget.predict(slow, CAPS, LOOKS, 90.0, fitted).last_look >= 1


def test_a_fast_machine_keeps_the_users_per_variant_budget_and_a_total_caps_it():
    assert look_fit.per_variant_s(100.0, floor_s=210, cap_s=None, variants=13) == 210
    assert look_fit.per_variant_s(100.0, floor_s=None, cap_s=None, variants=13) is None
    assert look_fit.per_variant_s(100.0, floor_s=210, cap_s=13 * 150, variants=13) == 150
    assert look_fit.per_variant_s(100.0, floor_s=None, cap_s=13 * 150, variants=13) == 150


def test_a_total_too_small_for_one_look_per_variant_stops_with_one_line():
    with pytest.raises(look_fit.CapTooSmall) as e:
        look_fit.per_variant_s(265.0, floor_s=210, cap_s=1800, variants=13)
    line = str(e.value)
    assert "\n" not in line and line.startswith("serving.vllm.budget.max_total_s: 1,800 s cannot fit one look")
    assert "13 variants x 265 s" in line and "3,445 s" in line


def params(noise_floor=True, **budget_keys):
    return parse({"models": {"m": {"source": "x"}}, "tiers": {"b": {"method": "baseline"}},
                  "kv_modes": {"auto": {"cache_dtype": "auto"}, "fp8": {"cache_dtype": "fp8_e4m3"}}, "calibration": {"path": "c"},
                  "eval": {"tasks": {"classification": {"lm_eval": "arc_easy"}, "retrieval": {"lm_eval": "arc_easy"}},
                           "sequential": {"looks": LOOKS}, "noise_floor": noise_floor},
                  "serving": {"vllm": {"budget": budget_keys}},
                  "decision": {"baseline": {"tier": "b"}, "tolerances": {"acc": {"abs": 3.0}}},
                  "report": {}, "memory": {"target_gpus": {}}})


def baseline_result(computed=1280, seconds=640.0):
    return result_json.parse(result_files.variant(
        tier="b", metrics={"classification/acc": 80.0, "retrieval/score": 50.0}, num_samples={"classification": 1280},
        phases={"load": 40.0}, sample_cache={"tasks": {"classification": {"computed": computed, "seconds": seconds}}}),
        "baseline")


def test_the_stage_reads_the_baselines_seconds_per_sample_and_the_noise_floors():
    p = params(max_wall_s=210, first_look_margin=2.0)
    assert look_budget.first_look(p, baseline_result()) == {"classification": 320}    # retrieval: not gated
    found = look_budget.fit(p, "m", baseline_result(), None)
    assert found.variants == 1 and found.need_s == pytest.approx(2 * (40 + 320 * 0.5))
    assert found.max_wall_s == 400 and found.gpu_max_wall_s == 1200
    noise = result_json.parse(result_files.noise(sample_cache={"tasks": {"classification": {"computed": 100,
                                                                                             "seconds": 25.0}}}), "noise")
    assert look_budget.fit(p, "m", baseline_result(), noise).need_s == pytest.approx(2 * (40 + 320 * 0.75))


def test_a_baseline_read_from_the_cache_is_not_sized_and_keeps_the_users_budget():
    found = look_budget.fit(params(max_wall_s=210), "m", baseline_result(computed=0, seconds=0.0), None)
    assert found.need_s is None and found.max_wall_s == 210 and "classification" in found.why_unsized


def test_evaluate_stops_before_serving_when_the_total_cannot_fit_a_look(monkeypatch):
    monkeypatch.setattr(look_budget, "load", lambda model: (baseline_result(), None))
    with pytest.raises(ConfigError, match="^serving.vllm.budget.max_total_s: 300 s cannot fit one look"):
        look_budget.fitted_params(params(max_total_s=300), "m")
    fitted = look_budget.fitted_params(params(max_total_s=3000), "m")
    assert fitted.serving.vllm.budget.max_wall_s == 400
    assert look_budget.prediction(params(max_total_s=300), "m", baseline_result(), "cpu").startswith("evaluate will stop")
    # the check in the second arithmetic (eval.noise_floor) is counted at the baseline's own speed:
    # 2 x (40 s load + 320 samples x (0.5 + 0.5) s); without it, 2 x (40 + 320 x 0.5)
    assert look_budget.prediction(params(), "m", baseline_result(), "cpu") == (
        "1 variant x at most 720 s each = at most 12 min of variant evaluation (a first look of every gated "
        "task: about 720 s); the check in the second arithmetic counted at the baseline's speed (evaluate "
        "sizes it from stage noise's)")
    assert look_budget.prediction(params(noise_floor=False), "m", baseline_result(), "cpu") == (
        "1 variant x at most 400 s each = at most 7 min of variant evaluation (a first look of every gated "
        "task: about 400 s)")


def test_the_budget_keys_are_checked():
    with pytest.raises(ConfigError, match="serving.vllm.budget.first_look_margin: must be >= 1"):
        params(first_look_margin=0.5)
    with pytest.raises(ConfigError, match="serving.vllm.budget.max_total_s: must be positive"):
        params(max_total_s=0)
