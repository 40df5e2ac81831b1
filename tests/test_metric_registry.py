"""pipeline/domain/sets/metric_registry.py: a metric declared once is all a new metric needs (issue 61).

A graded metric registered at run time (monkeypatch: the one edit) for a fake generate task is scored
per row, aggregated, given its interval, labelled and judged by every reader decide runs (intervals,
power, regressions, KV by length, page 1, decision.json) with no other edit; and the shipped metrics'
kinds are the ones their intervals and lm-eval's scale were chosen by before there was a table.

    .venv/bin/python -m pytest -n 0 -q tests/test_metric_registry.py
"""
import json

import pytest

from pipeline import io, paths
from pipeline.domain.sets import metric_registry, sample_row, task_rows
from pipeline.domain.sets.metric_registry import BINARY, CORPUS, GRADED, Metric
from pipeline.domain.sets.tasks import TaskSpec
from pipeline.report import cells
from pipeline.schema.yaml_io import safe_dump, safe_load
from pipeline.scoring.estimators import analysis
from pipeline.scoring.simulation import simulate
from pipeline.stages import decide
from tests.test_decide import project  # noqa: F401  (the fixture: test_decide's synthetic run)

N = 120


def overlap(row) -> float:
    """The share of the reference's words the output has, 0-100: a graded score no reader knows by name."""
    ref, out = str(row.target).split(), set(str(row.output).split())
    return 100.0 * sum(w in out for w in ref) / len(ref)


OVERLAP = Metric("overlap", "Word overlap", GRADED, metric_registry.STUDENTIZED, score=overlap)
SPEC = TaskSpec("para", "generate", {}, "qtier_para", N, {"overlap": True})


def record(i: int, output: str) -> dict:
    """One logged lm-eval sample of the fake task (the fields task_rows.sample_row reads)."""
    ref = f"a cat number {i} sat on this mat today"
    doc = {"id": f"p{i}", "document": f"Paraphrase {i}", "reference": ref}
    return {"doc_id": i, "doc": doc, "target": ref, "filtered_resps": [output],
            "arguments": [(f"Paraphrase this: sentence {i}" + " padding" * (i % 40), {})]}


def rows(worse: bool) -> list[dict]:
    """The task's rows as evaluate writes them: every other output of a worse tier keeps 3 of 9 words."""
    out = []
    for i in range(N):
        ref = record(i, "")["target"]
        out.append(task_rows.sample_row(SPEC, record(i, "a cat number" if worse and i % 2 else ref)))
    return out


def test_without_its_entry_no_reader_knows_the_metric():
    """The control: the test below passes because of the registry entry, and fails without it."""
    assert not metric_registry.declared("overlap")
    assert task_rows.sample_row(SPEC, record(0, "the cat")).scores == {}
    assert cells.label("para/overlap") == "para overlap"


def test_a_graded_metric_registered_once_is_scored_judged_and_labelled_everywhere(project, monkeypatch):  # noqa: F811
    monkeypatch.setitem(metric_registry.METRICS, "overlap", OVERLAP)          # the one edit
    same, worse = rows(False), rows(True)
    assert same[0].scores == {"overlap": 100.0} and worse[1].scores == {"overlap": pytest.approx(100 / 3)}
    assert task_rows.scores_from_rows(SPEC, worse) == {"overlap": pytest.approx(100 - 100 / 3)}
    iv = analysis.intervals(["overlap"], analysis.align(same, worse), 0.95)["overlap"]
    assert iv.graded is not None and iv.discordant is None and iv.hi < -25       # studentized, not a score interval
    assert simulate.population(same, worse, "overlap").kind == GRADED

    p = safe_load((project / "params.yaml").read_text())
    p["eval"]["tasks"]["para"] = {"kind": "generate", "config": "eval_sets/tasks/para.yaml", "data": "para.jsonl",
                                  "tolerances": {"overlap": {"abs": 5.0}}}
    (project / "params.yaml").write_text(safe_dump(p))
    for result_file in (project / paths.RESULTS / paths.EVALS).glob("m/*/result.json"):
        res = json.loads(result_file.read_text())
        if res["status"] != "ok":
            continue
        mine = rows(res["tier"] == "int4-gptq")
        sample_row.write(result_file.parent / "samples" / "para.jsonl", mine)
        res["metrics"]["para/overlap"] = task_rows.scores_from_rows(SPEC, mine)["overlap"]
        res["higher_is_better"]["para/overlap"] = True
        res["num_samples"]["para"] = N
        io.atomic_write_json(result_file, res)
    decide.main()
    data = json.loads((project / "results/decision.json").read_text())
    found = {(r["tier"], r["kv"]): r for r in data["rows"]}
    assert found[("int4-gptq", "auto")]["verdicts"]["para/overlap"]["verdict"] == "fail"
    assert found[("int8", "auto")]["verdicts"]["para/overlap"]["verdict"] == "pass"
    assert "changed" in found[("int8", "auto")]["intervals"]["para/overlap"]       # the graded interval's
    assert found[("int8", "auto")]["power"]["para/overlap"]["n"] == N
    md = (project / "results/decision.md").read_text()
    assert "para Word overlap" in md and "Word overlap -33.3" in md
    assert "| fp16-fp8 | fp16-auto | para | 0-400: n=120, +0.00 |" in md                # KV by length, by its score
    regressions = (project / "results/regressions/m-int4-gptq-auto.md").read_text()
    assert "## para" in regressions and "drop 66.67" in regressions                # ranked by the new score


@pytest.mark.parametrize(("name", "kind", "interval"), [
    ("acc", BINARY, "score"), ("exact_match", BINARY, "score"), ("acc_norm", BINARY, "score"),
    ("rouge1", GRADED, "studentized"), ("rougeL", GRADED, "studentized"), ("bleu", CORPUS, "jackknife"),
    ("chrf", CORPUS, "jackknife"), ("macro_f1", CORPUS, None), ("mcc", GRADED, "studentized")])
def test_each_shipped_metric_is_of_the_kind_its_interval_was_chosen_by(name, kind, interval):
    """Before the table: CORPUS_METRICS (bleu, chrf), FRACTIONS (acc, acc_norm, ... exact_match) and a
    sniff of the values (0/100: binary, else graded); macro_f1 had no per-sample form. An lm-eval metric
    the table does not declare (mcc) is graded, on lm-eval's scale."""
    m = metric_registry.get(name)
    assert (m.kind, m.interval) == (kind, interval)


def test_the_rows_carry_the_scores_their_metrics_declare_and_rank_by_the_first_ranked():
    assert metric_registry.row_scores(["bleu", "chrf"]) == ("chrf",)          # BLEU: chrF stands in per row
    assert metric_registry.row_scores(["acc", "macro_f1"]) == ("acc",)
    assert metric_registry.row_scores(["rouge1", "rouge2", "rougeL"]) == ("rouge1", "rouge2", "rougeL")
    assert metric_registry.ranking(["rouge1", "rouge2", "rougeL"]) == "rougeL"
    assert metric_registry.ranking(["exact_match"]) == "exact_match"
    assert metric_registry.ranking([]) is None


def test_a_metric_of_no_kind_is_refused():
    with pytest.raises(ValueError, match="kind 'ordinal' is none of"):
        Metric("x", "X", "ordinal", None)
