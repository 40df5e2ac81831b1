"""The not-run verdict state (pipeline/scoring/verdict/rows.py NOT_RUN): a gated metric whose task a variant
never ran is "not run (<why>)", not "inconclusive", in the Why line, page 1's table, *Every variant*, *Why
each verdict*, decision.json and the across-models section; it still passes nothing, so the pick is the
same. Run: .venv/bin/python -m pytest -n 0 -q tests/test_rows.py"""
import json

import pytest

from pipeline import io, paths
from pipeline.schema.yaml_io import safe_dump, safe_load
from pipeline.scoring.verdict.rows import NOT_RUN, Measured
from pipeline.stages import decide
from tests import result_files
from tests.test_decide import MEASURED_ON, project, samples  # noqa: F401 - project is the fixture used below

STOPPED = "stopped at look 1 of 4 of classification (50 of 200 samples): classification/acc failed"


def measured(**fields) -> Measured:
    """A variant's row with evaluate's records as result.json holds them (parsed, as decide reads them)."""
    return result_files.measured("int8", **fields)


def test_why_a_task_was_not_run_is_read_from_the_run_s_records_in_full_and_in_short():
    assert measured(not_run={"t": "the variant failed"}, stopped=STOPPED).not_run_why("t") == (
        "the variant failed a gated metric first", "failed")
    assert measured(not_run={"t": "cannot pass"}).not_run_text("t") == "not run (the variant could no longer pass)"
    assert measured(not_run={"t": "time budget"}).not_run_why("t") == ("the time budget ended", "budget")
    assert measured(refused={"t": "no prompt log-probs"}).not_run_text("t") == (
        "not run (the server refused log-likelihood: no prompt log-probs)")
    # a fixed-n read the budget cut says so in its cut, which names no task record
    cut = "the time budget ended: lm-eval stopped after 240 s; not measured: t"
    assert measured(cut=cut).not_run_why("t") == (cut, "budget")
    assert measured().not_run_why("t") is None and measured().not_run_text("t") is None


def rewrite(tier: str, kv: str, right, **fields) -> None:
    """A variant of test_decide's project that read classification only (`right`: which items it gets
    right) and never ran translation; `fields`: evaluate's record of why."""
    out = paths.eval_dir("m", tier, kv)
    (out / "samples" / "translation.jsonl").unlink()
    io.atomic_write_jsonl(out / "samples" / "classification.jsonl", samples("classification", 200, right))
    metrics = {"classification/acc": sum(100.0 for i in range(200) if right(i)) / 200, "classification/macro_f1": 50.0}
    write(tier, kv, metrics, {"classification": 200}, **fields)


def write(tier: str, kv: str, metrics: dict, num_samples: dict, **fields) -> None:
    io.atomic_write_json(paths.eval_result("m", tier, kv), result_files.variant(
        tier=tier, kv=kv, num_samples=num_samples, measured_on=MEASURED_ON, serving={},
        throughput={"gen_tokens_per_s": 50.0}, metrics=metrics, higher_is_better=dict.fromkeys(metrics, True),
        **fields))


def test_a_task_the_server_refused_is_not_run_with_the_server_s_why(project):
    """An endpoint without prompt log-probs: evaluate drops the log-likelihood task (result.json `refused`);
    decide reads it as not run, the server's reason kept, where it was inconclusive with a reason string."""
    (paths.eval_dir("m", "int8", "auto") / "samples" / "classification.jsonl").unlink()
    write("int8", "auto", {"translation/bleu": 60.0, "translation/chrf": 80.0}, {"translation": 40},
          refused={"classification": "no prompt log-probs"})
    decide.main()
    row = next(r for r in json.loads((project / "results/decision.json").read_text())["rows"]
               if (r["tier"], r["kv"]) == ("int8", "auto"))
    why = "the server refused log-likelihood: no prompt log-probs"
    v = row["verdicts"]["classification/acc"]
    assert (v["verdict"], v["why"]) == (NOT_RUN, why)
    assert row["not_run"] == {"classification": why} and row["task_verdicts"]["classification"] == NOT_RUN
    assert row["overall"] == "inconclusive" and row["reason"] is None


def stopped(project, weights_open: bool = False):
    """decide on test_decide's project where int4-gptq + auto failed classification at its first look
    and never ran translation, and fp16 + fp8 (the KV chain's only candidate) is open at its cap on
    classification, so it never ran translation either (`weights_open`: int8 + auto, the weights chain's
    first, too); with the across-models section against m's own baseline.
    Returns (decision.md, decision.json)."""
    p = safe_load((project / "params.yaml").read_text())
    p["decision"]["baseline"]["model"] = "m"
    (project / "params.yaml").write_text(safe_dump(p))
    rewrite("int4-gptq", "auto", lambda i: i % 4 != 0, stopped=STOPPED, not_run={"translation": "the variant failed"})
    rewrite("fp16", "fp8", lambda i: i % 25 != 0, not_run={"translation": "cannot pass"},
            cannot_pass="classification/acc inconclusive at the cap")
    if weights_open:
        rewrite("int8", "auto", lambda i: i % 25 != 0, not_run={"translation": "cannot pass"},
                cannot_pass="classification/acc inconclusive at the cap")
    decide.main()
    return ((project / "results/decision.md").read_text(),
            json.loads((project / "results/decision.json").read_text()))


@pytest.fixture
def stopped_run(project):
    return stopped(project)


def test_decision_json_has_a_state_of_its_own_and_the_verdicts_are_as_before(stopped_run):
    _, data = stopped_run
    rows = {(r["tier"], r["kv"]): r for r in data["rows"]}
    failed, open_ = rows[("int4-gptq", "auto")], rows[("fp16", "fp8")]
    for mid in ("translation/bleu", "translation/chrf"):
        assert failed["verdicts"][mid]["verdict"] == NOT_RUN
        assert failed["verdicts"][mid]["why"] == "the variant failed a gated metric first"
        assert open_["verdicts"][mid]["verdict"] == NOT_RUN
    assert failed["task_verdicts"] == {"classification": "fail", "translation": NOT_RUN}
    assert failed["not_run"] == {"translation": "the variant failed a gated metric first"}
    # not run passes nothing: the overall verdicts are what they were, and the open fp16 + fp8 stops the KV
    # chain alone: the pick comes from the weights chain
    assert (failed["overall"], open_["overall"]) == ("fail", "inconclusive")
    assert open_["verdicts"]["classification/acc"]["verdict"] == "inconclusive"
    chains = data["recommended"]["m"]["chains"]
    assert chains["KV formats"]["stopper"] == "fp16-fp8" and chains["weights"]["stopper"] == "int4-gptq-auto"
    assert chains["weights"]["pick"] == "nf4-bnb-auto" and data["recommended"]["m"]["tier"] == "nf4-bnb"


def test_the_why_line_names_what_was_inconclusive_and_what_was_not_run_apart(project):
    md, data = stopped(project, weights_open=True)
    assert (data["recommended"]["m"]["tier"], data["recommended"]["m"]["kv"]) == ("fp16", "auto")
    why = " ".join(md.split("Why: ", 1)[1].split("\n\n", 1)[0].split())
    assert ("inconclusive on classification/acc; not run (the variant could no longer pass) "
            "on translation/bleu, translation/chrf.") in why and "closest: `" in why


def test_page_one_in_short_every_variant_and_why_each_verdict_in_full_say_not_run(stopped_run):
    md, _ = stopped_run
    page1, rest = md.split("\n## ", 1)
    (row1,) = [line for line in page1.splitlines() if line.startswith("| int4-gptq | auto |")]
    assert "| not run (failed) |" in row1 and "inconclusive" not in row1
    (every,) = [line for line in rest.splitlines() if line.startswith("| int4-gptq | auto |")]
    assert "| not run (the variant failed a gated metric first) |" in every and "inconclusive" not in every
    (why_row,) = [line for line in rest.splitlines() if line.startswith("| int4-gptq-auto |") and "look 1" in line]
    assert why_row.count("| not run (the variant failed a gated metric first) |") == 1      # BLEU, then chrF
    assert why_row.count("not run (the variant failed a gated metric first)") == 2 and "inconclusive" not in why_row


def test_the_across_models_section_says_not_run_too(stopped_run):
    md, data = stopped_run
    across = {(v["model"], v["tier"], v["kv"]): v for v in data["across"]["verdicts"]}
    assert across[("m", "int4-gptq", "auto")]["verdicts"]["translation/bleu"]["verdict"] == NOT_RUN
    table = md.split("### Every variant against the reference", 1)[1]
    (row,) = [line for line in table.splitlines() if line.startswith("| m/int4-gptq-auto |")]
    assert row.count("not run (the variant failed a gated metric first)") == 2 and "inconclusive" not in row
