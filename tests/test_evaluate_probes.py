"""evaluate's long-context probe (pipeline/stages/evaluate.py: long_context) is not run on a variant that
cannot pass (eval.sequential.probes: passable), and is with probes: all."""
import dataclasses

import pytest

from pipeline import config, io
from pipeline.stages import evaluate, evaluation

pytestmark = pytest.mark.model


class NoModel:
    """A served variant the probe must not touch before it decides to run."""
    session = None
    cache = None


def test_a_variant_that_cannot_pass_skips_the_probe_unless_probes_is_all(in_repo, tmp_path, monkeypatch):
    params = config.load()
    result = {"cannot_pass": "classification/acc inconclusive at the cap"}
    got = evaluate.long_context(NoModel(), params, "smollm2-135m", result)
    assert got == {"status": "skipped", "why": "the variant cannot pass: classification/acc inconclusive at the cap"}
    every = dataclasses.replace(params, eval=dataclasses.replace(
        params.eval, sequential=dataclasses.replace(params.eval.sequential, probes="all")))
    monkeypatch.setattr(evaluate.paths, "long_base", lambda model: tmp_path / "missing.npz")
    with pytest.raises(io.DataError, match="missing.npz"):     # it goes on to read the baseline's long texts
        evaluate.long_context(NoModel(), every, "smollm2-135m", result)
    assert evaluate.long_context(NoModel(), params, "smollm2-135m", {"stopped": "x"})["status"] == "skipped"


def test_the_console_says_what_a_variant_that_cannot_pass_did_not_run():
    assert evaluation.cannot_pass({"status": "ok"}) is None
    got = evaluation.cannot_pass({"cannot_pass": "c/acc inconclusive at the cap", "not_run": {"tasks": ["r1"]},
                                "long_context": {"status": "skipped"}})
    assert got == "cannot pass: c/acc inconclusive at the cap; not run: r1, long context"
