"""lm-eval's per-sample rows name the data rows they scored, whatever order the documents were asked in
(lm_eval_runner.run_tasks; a fake LM that answers each prompt with its own last line)."""
import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
from lm_eval.api.model import LM

from pipeline.evaluation import lm_eval_runner
from pipeline.domain.sets import tasks
from pipeline.schema import Eval, Languages, Task


class Echo(LM):
    def generate_until(self, requests):
        return [r.args[0].rstrip().splitlines()[-1] for r in requests]

    def loglikelihood(self, requests):
        raise NotImplementedError

    def loglikelihood_rolling(self, requests):
        raise NotImplementedError


@pytest.mark.model                # lm-eval builds the task through `datasets`, which imports torch
@pytest.mark.parametrize("docs", [(3, 0, 1), (1, 3)])
def test_rows_keep_the_data_row_they_scored(tmp_path, in_repo, docs):
    rows = [{"en": f"sentence {i}", "de": f"Satz {i}"} for i in range(5)]
    f = tmp_path / "mine.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = Task(config="eval_sets/tasks/translation.yaml", data=str(f), kind="generate",
                fields={"source": "en", "reference": "de"}, languages=Languages(source="English", target="German"))
    spec = tasks.build("translation", task)
    spec = replace(spec, docs=docs, num_docs=len(docs))
    found, samples = lm_eval_runner.run_tasks(SimpleNamespace(lm=Echo(), chat=False), [spec], Eval(tasks={}))
    got = samples["translation"]
    assert [r.doc_id for r in got] == sorted(docs)
    for r in got:
        assert r.input["source"] == rows[r.doc_id]["en"] and r.target == rows[r.doc_id]["de"]


def test_no_document_is_refused_not_read_as_all(in_repo):
    spec = tasks.TaskSpec(name="t", kind="generate", config={}, lm_eval_name="t", num_docs=0,
                          higher_is_better={}, docs=())
    with pytest.raises(ValueError, match="t: no documents selected"):
        lm_eval_runner.selected(spec)
