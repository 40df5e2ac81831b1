"""The engine's noise floor (pipeline/scoring/estimators/noise.py): the baseline under the second arithmetic
against the baseline as run, sample by sample; and stage noise's tasks. (Verdicts checked under the
same arithmetic: tests/test_arith_check.py.)"""
import pytest

from pipeline.domain.result import contract
from pipeline.schema import Tolerance
from pipeline.scoring.estimators import noise, stats
from tests import result_files
from pipeline.domain.sets.sample_row import partial as row

ABS3 = Tolerance(abs=3.0)


def iv(delta, lo, hi, n=100):
    return stats.Interval(delta, lo, hi, n, 1.0)


def choice_rows(preds, logliks):
    return [row(doc_id=i, gold=0, pred=p, choices=["a", "b"], logliks=ll,
                scores={"acc": 100.0 * (p == 0)}) for i, (p, ll) in enumerate(zip(preds, logliks))]


def parse(data):
    return contract.parse(data, "results/noise/m/result.json")


def test_the_floor_is_the_second_run_against_the_baseline_sample_by_sample():
    base = choice_rows([0, 0, 1, 0], [[-1.0, -1.05], [-1.0, -3.0], [-2.0, -1.9], [-1.0, -1.5]])
    second = choice_rows([1, 0, 0, 0], [[-1.1, -1.0], [-1.0, -3.0], [-1.9, -2.0], [-1.0, -1.5]])
    row = result_files.measured("fp16", metrics={"c/acc": 75.0})
    f = noise.floor(parse(result_files.noise(arithmetic="bf16-operands: x")), row.metrics, {"c": base}, {"c": second},
                    0.95)
    assert f.status == "ok" and f.intervals["c/acc"].delta == pytest.approx(0.0)
    assert (f.flips["c"].right_to_wrong, f.flips["c"].wrong_to_right) == (1, 1)
    assert f.margin["c"] == pytest.approx(0.1)                # the flipped samples' margins: 0.05 and 0.1
    variant = choice_rows([1, 1, 1, 0], [[-1.2, -1.0], [-2.0, -1.0], [-2.0, -1.9], [-1.0, -1.5]])
    assert noise.inside(list(zip(base, variant)), f.margin["c"]) == (2, 1)    # 0.05 inside, 2.0 not
    off = noise.floor(parse(result_files.noise("unsupported", reason="no AVX-512")), row.metrics, {}, {}, 0.95)
    assert off.intervals == {} and (off.status, off.why) == ("unsupported", "no AVX-512")


@pytest.mark.model          # the stage's module imports torch
def test_the_noise_stage_measures_the_gated_tasks_and_a_task_once_a_tolerance_gates_it(in_repo, tmp_path,
                                                                                       monkeypatch):
    """The default retrieval suite has no tolerance: no verdict of it to widen, so stage noise leaves it
    out; give one length a tolerance and it is measured."""
    import dataclasses

    from pipeline import config, paths
    from pipeline.domain.sets import probe_sets, retrieval
    from pipeline.schema import Tolerance
    from pipeline.stages.noise import measured_tasks

    params = config.load()
    for name, t in params.eval.tasks.items():      # stage probes' files, with a word count for a tokenizer
        if probe_sets.is_probe_set(t.data):
            rows = probe_sets.rows(probe_sets.parse(name, t.data), lambda s: len(s.split()))
            retrieval.write_jsonl(rows, tmp_path / f"{name}.jsonl")
    monkeypatch.setattr(paths, "probe_data", lambda model, name: tmp_path / f"{name}.jsonl")
    measured_tasks = (lambda p, f=measured_tasks: f(p, "smollm2-135m"))
    assert [s.name for s in measured_tasks(params)] == ["translation", "summarization", "classification"]
    tasks_ = dict(params.eval.tasks)
    tasks_["retrieval_1024"] = dataclasses.replace(tasks_["retrieval_1024"],
                                                   tolerances={"exact_match": Tolerance(abs=10.0)})
    gated = dataclasses.replace(params, eval=dataclasses.replace(params.eval, tasks=tasks_))
    assert "retrieval_1024" in [s.name for s in measured_tasks(gated)]
    assert all(s.docs is not None for s in measured_tasks(params))       # in the baseline's look order
