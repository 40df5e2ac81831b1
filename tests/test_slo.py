"""The service-level search (pipeline/engines/vllm/slo.py) with fake load tests, the decode roofline and the
serving params. No server, no model; the evaluate stage's wall limit is in tests/test_evaluate.py."""
import time

import pytest

from pipeline.schema import ConfigError, parse
from pipeline.evaluation import lm_eval_runner
from pipeline.domain.result.facts import Throughput
from pipeline.engines.vllm import slo
from pipeline.scoring.planning import planner
from pipeline.scoring.planning.planner import decode_roofline_fraction

P99 = dict(ttft_ms=1000, tpot_ms=100, percentile=99)


def curve(knee: int, calls: list[int] | None = None):
    """Latency grows with concurrency; the SLO holds up to `knee`."""
    def measure(c: int) -> dict:
        if calls is not None:
            calls.append(c)
        return {"p99_ttft_ms": 1000 * c / knee, "p99_tpot_ms": 50.0, "request_goodput": 10.0 / c, "completed": 16}
    return measure


def meets(f):
    return slo.meets_slo(f, **P99)


def test_monotone_curve_finds_the_knee_by_doubling_then_bisecting():
    calls: list[int] = []
    found = slo.search(curve(11, calls), meets, max_concurrency=64, max_probes=10, time_budget_s=60)
    assert found.best == 11 and found.stopped == slo.CONVERGED
    assert calls == [1, 2, 4, 8, 16, 12, 10, 11]
    assert found.best_figures["request_goodput"] == pytest.approx(10 / 11)


def test_never_meets():
    found = slo.search(lambda c: {"p99_ttft_ms": 5000, "p99_tpot_ms": 50}, meets, 64, 6, 60)
    assert found.best is None and found.stopped == slo.FAILS_AT_1 and [p.concurrency for p in found.probes] == [1]


def test_always_meets_stops_at_max_concurrency():
    found = slo.search(curve(10_000), meets, max_concurrency=48, max_probes=10, time_budget_s=60)
    assert found.best == 48 and found.stopped == slo.MEETS_AT_MAX
    assert [p.concurrency for p in found.probes] == [1, 2, 4, 8, 16, 32, 48]


def test_probe_count_bounds_the_search():
    found = slo.search(curve(11), meets, max_concurrency=64, max_probes=4, time_budget_s=60)
    assert len(found.probes) == 4 and found.best == 8 and found.stopped == slo.MAX_PROBES


def test_levels_the_load_test_measured_are_reused_without_a_bench_run_or_a_probe():
    calls: list[int] = []
    known = {1: curve(11)(1), 4: curve(11)(4)}
    found = slo.search(curve(11, calls), meets, max_concurrency=64, max_probes=3, time_budget_s=60, known=known)
    assert calls == [2, 8, 16]                       # 1 and 4 came from the load test
    assert [p.concurrency for p in found.probes] == [1, 2, 4, 8, 16]
    assert found.best == 8 and found.stopped == slo.MAX_PROBES
    assert [p.seconds for p in found.probes if p.concurrency in known] == [0.0, 0.0]


def test_time_budget_bounds_the_search():
    now = [0.0]

    def slow(c):                     # each load test takes 40 s of (fake) time
        now[0] += 40
        return curve(11)(c)

    found = slo.search(slow, meets, 64, 10, time_budget_s=100, clock=lambda: now[0])
    assert [p.concurrency for p in found.probes] == [1, 2, 4] and found.best == 4
    assert found.stopped == slo.TIME_BUDGET


def test_a_load_test_that_times_out_fails_its_level_and_stops():
    def measure(c):
        if c >= 4:
            raise TimeoutError("bench did not finish")
        return curve(100)(c)

    found = slo.search(measure, meets, 64, 10, 60)
    assert found.best == 2 and found.stopped == slo.TIME_BUDGET
    assert found.probes[-1].figures == {"timeout": "bench did not finish"} and not found.probes[-1].meets


def test_missing_percentile_or_nothing_completed_does_not_meet():
    assert not slo.meets_slo({"p99_ttft_ms": 1}, **P99)
    assert not slo.meets_slo({"p99_ttft_ms": 1, "p99_tpot_ms": 1, "completed": 0}, **P99)
    assert slo.meets_slo({"p95_ttft_ms": 1, "p95_tpot_ms": 1}, 10, 10, 95)
    assert slo.percentile_key("tpot", 99.9) == "p99.9_tpot_ms"


def test_summary_is_what_result_json_records():
    found = slo.search(curve(3), meets, 64, 10, 60)
    s = slo.summary(found, P99)
    assert s["max_concurrency_meeting_slo"] == 3 and s["goodput_at_that_concurrency"] == pytest.approx(10 / 3)
    assert s["probes"][0]["concurrency"] == 1 and "p99_ttft_ms" in s["probes"][0]


def test_roofline_fraction():
    # 1 GB of weights on a 100 GB/s machine: 100 tok/s ceiling; 25 tok/s measured is a quarter
    assert decode_roofline_fraction(25.0, 10**9, 100.0) == pytest.approx(0.25)


def test_evaluate_roofline_uses_concurrency_1_tpot_or_says_what_is_unknown():
    tp = Throughput(bench={"1": {"median_tpot_ms": 40.0}}, decode_probe_tokens_per_s=20.0)
    r = planner.roofline(tp, 10**9, 100.0)
    assert r.decode_tokens_per_s == 25.0 and r.fraction == pytest.approx(0.25)
    assert r.roofline_tokens_per_s == 100.0
    assert planner.roofline(tp, 10**9, None).unknown == "bandwidth unknown (serving.bandwidth_gbps)"
    assert planner.roofline(tp, None, 100.0).fraction is None
    assert planner.roofline(Throughput(decode_probe_tokens_per_s=20.0), 10**9, 100.0).fraction == pytest.approx(0.2)


def test_wall_limit_interrupts_the_main_thread():
    with pytest.raises(lm_eval_runner.WallBudgetExceeded):
        with lm_eval_runner.wall_limit(0.2):
            time.sleep(3)
    with lm_eval_runner.wall_limit(None):
        pass


def minimal(serving: dict) -> dict:
    return {"models": {"m": {"source": "x"}}, "tiers": {"b": {"method": "baseline"}},
            "kv_modes": {"auto": {"cache_dtype": "auto"}}, "calibration": {"path": "c"},
            "eval": {"tasks": {"t": {"lm_eval": "arc_easy"}}}, "serving": serving,
            "decision": {"baseline": {"tier": "b"}, "tolerances": {}}, "report": {}, "memory": {"target_gpus": {}}}


def test_params_slo_and_budget():
    p = parse(minimal({"slo": {"ttft_ms": 2000, "tpot_ms": 200}, "bandwidth_gbps": 20,
                       "vllm": {"budget": {"max_wall_s": 600, "min_decode_tok_s": 1}}}))
    assert p.serving.slo.percentile == 99 and p.serving.slo.max_probes == 6 and p.serving.bandwidth_gbps == 20.0
    assert p.serving.vllm.budget.max_wall_s == 600 and p.report.min_speed_vs_baseline == 0.1
    assert parse(minimal({})).serving.slo is None
    with pytest.raises(ConfigError, match="serving.slo.percentile"):
        parse(minimal({"slo": {"ttft_ms": 1, "tpot_ms": 1, "percentile": 0}}))
    with pytest.raises(ConfigError, match="^serving.vllm.budget.min_speed_vs_baseline: moved to "
                                          "report.min_speed_vs_baseline"):
        parse(minimal({"vllm": {"budget": {"min_speed_vs_baseline": 0.2}}}))


def _fake_run(slow: set[str], calls: list):
    def run(session, specs, ev):
        calls.append([s.name for s in specs])
        for s in specs:
            if s.name in slow:
                time.sleep(5)
        return {s.name: f"result {s.name}" for s in specs}, {s.name: [] for s in specs}
    return run


def test_the_wall_budget_keeps_the_tasks_lm_eval_finished():
    from types import SimpleNamespace

    specs = [SimpleNamespace(name=n) for n in ("classification", "summarization", "translation")]
    calls: list = []
    metrics, samples, cut = lm_eval_runner.run_within(None, specs, None, 0.3, run=_fake_run({"summarization"}, calls))
    assert list(metrics) == ["classification"] and list(samples) == ["classification"]
    assert cut.startswith("the time budget ended: lm-eval stopped after 0 s") and cut.endswith("summarization, translation")
    # nothing finished: not measured (the time budget), never "unsupported" (issue 56)
    with pytest.raises(lm_eval_runner.NotMeasured, match="the time budget ended before its first look"):
        lm_eval_runner.run_within(None, specs, None, 0.3, run=_fake_run({"classification"}, []))
    calls.clear()                               # no budget: one call, lm-eval batches the tasks together
    metrics, _, cut = lm_eval_runner.run_within(None, specs, None, None, run=_fake_run(set(), calls))
    assert cut is None and len(metrics) == 3 and calls == [["classification", "summarization", "translation"]]
