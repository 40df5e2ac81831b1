"""`python -m pipeline.budget` (pipeline/budget.py): the probe's seconds per sample and the lines it
prints, with a fake session and clock (model tier only because the command imports the engines, and
they torch; no model is loaded)."""
import dataclasses

import pytest

from pipeline.domain.sets.sample_row import partial as row
from pipeline import budget
from pipeline.domain.sets.tasks import TaskSpec
from pipeline.schema import load as load_schema

pytestmark = pytest.mark.model


def spec(name, n):
    return TaskSpec(name=name, kind="classify", config={}, lm_eval_name=name, num_docs=n, higher_is_better={},
                    pool=n, docs=tuple(range(n)))


def test_the_probe_times_its_first_documents_of_each_task(monkeypatch):
    clock = iter([0.0, 2.0, 10.0, 16.0])
    monkeypatch.setattr(budget.time, "perf_counter", lambda: next(clock))
    seen = []
    per = budget.measure(None, [spec("c", 1280), spec("s", 3)], None, 4,
                         run=lambda session, specs, ev: seen.append((specs[0].name, specs[0].num_docs)))
    assert seen == [("c", 4), ("s", 3)] and per == {"c": 0.5, "s": 2.0}


def test_the_report_names_the_budget_that_would_end_a_variant(root):
    params = load_schema(root / "params.yaml")
    vllm = dataclasses.replace(params, serving=dataclasses.replace(params.serving, backend="vllm"))
    lines = budget.report(vllm, "m", "vllm", "cpu", 40.0, {"c": 0.1, "s": 2.0}, {"c": 1280, "s": 96}, {})
    assert lines[0] == "m on vllm (cpu): load 40 s; seconds per sample: c 0.10, s 2.00"
    assert lines[1] == "  baseline@m, noise@m (no per-variant budget): about 360 s of tasks each"
    assert lines[2].startswith("  evaluate@m-<tier>-<kv>, each at the baseline's speed: serving.vllm.budget.max_wall_s "
                               "(210 s) ends it at look 2 of 4 (c 640 of 1,280, s 48 of 96)")
    # before stage baseline, the strata are unknown: the line says its looks are planned unstratified
    assert lines[2].endswith("(looks planned unstratified: the strata come from stage baseline's samples, not run yet)")
    ref = budget.report(params, "m", "reference", "cpu", 40.0, {"c": 0.1}, {"c": 1280}, {})
    assert ref[2].startswith("  evaluate@m-<tier>-<kv>, each at the baseline's speed: no time budget: about 168 s")


def test_after_stage_baseline_the_probe_plans_the_stratified_reads(root):
    # params.yaml's classification (strata {below: 0.5, share: 0.5}) with 630 of 1,280 items below the margin
    params = load_schema(root / "params.yaml")
    rows = {"classification": [row(doc_id=d, logliks=[-1.0, -1.2 if d < 630 else -3.0]) for d in range(1280)]}
    vllm = dataclasses.replace(params, serving=dataclasses.replace(params.serving, backend="vllm"))
    lines = budget.report(vllm, "m", "vllm", "cpu", 40.0, {"classification": 0.1}, {"classification": 1280}, rows)
    assert lines[2] == ("  evaluate@m-<tier>-<kv>, each at the baseline's speed: within serving.vllm.budget.max_wall_s "
                        "(210 s): about 136 s")          # 40 + 955 x 0.1; unstratified it said 168 s
