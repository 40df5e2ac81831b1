"""The evaluate stage's helpers that need no model: the decode roofline, the wall limit and the wall
budget over lm-eval's tasks (with a fake run). Model tier: pipeline/stages/evaluate.py imports the
backends, and with them torch."""
import time
from types import SimpleNamespace

import pytest

from pipeline.stages import evaluate

pytestmark = pytest.mark.model


def test_evaluate_roofline_uses_concurrency_1_tpot_or_says_what_is_unknown():
    tp = {"bench": {"1": {"median_tpot_ms": 40.0}}, "decode_probe_tokens_per_s": 20.0}
    r = evaluate.roofline(tp, 10**9, 100.0)
    assert r["decode_tokens_per_s"] == 25.0 and r["fraction"] == pytest.approx(0.25)
    assert r["roofline_tokens_per_s"] == 100.0
    assert evaluate.roofline(tp, 10**9, None)["unknown"] == "bandwidth unknown (serving.bandwidth_gbps)"
    assert "fraction" not in evaluate.roofline(tp, None, 100.0)
    assert evaluate.roofline({"decode_probe_tokens_per_s": 20.0}, 10**9, 100.0)["fraction"] == pytest.approx(0.2)


def test_wall_limit_interrupts_the_main_thread():
    with pytest.raises(evaluate.WallBudgetExceeded):
        with evaluate.wall_limit(0.2):
            time.sleep(3)
    with evaluate.wall_limit(None):
        pass


def _fake_run(slow: set[str], calls: list):
    def run(session, specs, ev):
        calls.append([s.name for s in specs])
        for s in specs:
            if s.name in slow:
                time.sleep(5)
        return {s.name: f"result {s.name}" for s in specs}, {s.name: [] for s in specs}
    return run


def test_the_wall_budget_keeps_the_tasks_lm_eval_finished():
    specs = [SimpleNamespace(name=n) for n in ("classification", "summarization", "translation")]
    calls: list = []
    metrics, samples, cut = evaluate.run_within(None, specs, None, 1.0, run=_fake_run({"summarization"}, calls))
    assert list(metrics) == ["classification"] and list(samples) == ["classification"]
    assert cut.startswith("too slow here: lm-eval stopped after 1 s") and cut.endswith("summarization, translation")
    with pytest.raises(evaluate.Unsupported, match="too slow here"):
        evaluate.run_within(None, specs, None, 1.0, run=_fake_run({"classification"}, []))
    calls.clear()                               # no budget: one call, lm-eval batches the tasks together
    metrics, _, cut = evaluate.run_within(None, specs, None, None, run=_fake_run(set(), calls))
    assert cut is None and len(metrics) == 3 and calls == [["classification", "summarization", "translation"]]
