"""evaluate's long-context probe (pipeline/stages/evaluate.py: long_context) runs on every variant, one
that failed or cannot pass included, with eval.sequential.probes: all, and with probes: passable (the
default) not on those."""
import dataclasses

import pytest

from pipeline import config, io
from pipeline.stages import evaluate, evaluation

pytestmark = pytest.mark.model


class NoModel:
    """A served variant the probe must not touch before it decides to run."""
    session = None
    cache = None


def test_a_variant_that_failed_or_cannot_pass_runs_the_probe_unless_probes_is_passable(in_repo, tmp_path,
                                                                                         monkeypatch):
    passable = config.load()
    assert passable.eval.sequential.probes == "passable"         # the shipped default
    every = dataclasses.replace(passable, eval=dataclasses.replace(
        passable.eval, sequential=dataclasses.replace(passable.eval.sequential, probes="all")))
    cannot = {"cannot_pass": "classification/acc inconclusive at the cap"}
    got = evaluate.long_context(NoModel(), passable, "smollm2-135m", cannot)
    assert got == {"status": "skipped", "why": "the variant cannot pass: classification/acc inconclusive at the cap"}
    assert evaluate.long_context(NoModel(), passable, "smollm2-135m", {"stopped": "x"}) == \
        {"status": "skipped", "why": "the variant failed a gated metric first"}
    monkeypatch.setattr(evaluate.paths, "long_base", lambda model: tmp_path / "missing.npz")
    for result in (cannot, {"stopped": "x"}):
        with pytest.raises(io.DataError, match="missing.npz"):     # it goes on to read the baseline's long texts
            evaluate.long_context(NoModel(), every, "smollm2-135m", result)


def test_the_console_says_what_a_variant_that_cannot_pass_did_not_run():
    assert evaluation.cannot_pass({"status": "ok"}) is None
    got = evaluation.cannot_pass({"cannot_pass": "c/acc inconclusive at the cap", "not_run": {"r1": "cannot pass", "g": "the variant failed"},
                                "long_context": {"status": "skipped"}})
    assert got == "cannot pass: c/acc inconclusive at the cap; not run: r1, long context"



def test_the_console_says_where_a_variant_stopped_and_what_it_then_did_not_run():
    """result.json keeps where (`stopped`, `cut`) and what was left (`not_run`) apart; the console joins them."""
    result = {"stopped": "stopped at look 1 of 4 of c", "not_run": {"g": "the variant failed", "r1": "cannot pass"}}
    assert evaluation.left_after(result["stopped"], result) == "stopped at look 1 of 4 of c; not run: g"
    assert evaluation.left_after("stopped by the time budget", {"not_run": {}}) == "stopped by the time budget"
    assert evaluation.left_after(None, result) is None

class TopKEngine:
    """A served variant without a model in this process (vLLM): read by its session's token_dists."""
    cache = None

    def __init__(self, dists):
        self.session = type("S", (), {"token_dists": staticmethod(dists)})()


def test_vllm_on_a_cpu_is_read_by_its_prompt_log_probs_and_on_a_gpu_says_why_not(in_repo, tmp_path, monkeypatch):
    import numpy as np

    from pipeline.evaluation import longctx
    from pipeline.domain.sets import fidelity_set

    params = config.load()
    seqs = [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]

    def dists(ss, k):
        return [type("D", (), {"ids": np.tile(np.arange(k), (len(s) - 1, 1)),
                               "logprobs": np.tile(np.log(np.full(k, 1.0 / k)), (len(s) - 1, 1)),
                               "top1": np.zeros(len(s) - 1, dtype=np.int64)})() for s in ss]
    base = longctx.baseline_topk(dists, seqs, k=3, first_edge=2, model_context=8, path=longctx.PREFILL_READS_CACHE)
    fidelity_set.save(tmp_path / "long.npz", base)
    monkeypatch.setattr(evaluate.paths, "long_base", lambda model: tmp_path / "long.npz")
    on_cpu = {"backend": "vllm", "serving": {"device": "cpu"}}
    got = evaluate.long_context(TopKEngine(dists), params, "smollm2-135m", on_cpu)
    assert got["status"] == "ok" and got["path"] == longctx.PREFILL_READS_CACHE and got["edges"] == [0, 2, 4]
    assert all(b["kl_mean"] < 1e-6 and b["top1"] == 100.0 for b in got["buckets"])     # stored as float32
    on_gpu = {"backend": "vllm", "serving": {"device": "gpu"}}
    assert evaluate.long_context(TopKEngine(dists), params, "smollm2-135m", on_gpu) == \
        {"status": "unsupported", "why": longctx.NOT_ON_A_GPU}
