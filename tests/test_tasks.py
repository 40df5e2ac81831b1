import json

import pytest

from pipeline.domain import tasks
from pipeline.domain.calibration import DataError
from pipeline.schema import Task
from tests.conftest import SHARED_EVAL

TR = Task(config="eval_sets/tasks/translation.yaml", data="eval_sets/translation_en_de.jsonl", kind="generate",
          limit=5)
CL = Task(config="eval_sets/tasks/classification.yaml", data="eval_sets/sentiment.jsonl", kind="classify",
          labels=["negative", "positive"])


def test_shipped_tasks_build(in_repo):
    spec = tasks.build("translation", TR)
    assert spec.num_docs == 5 and spec.lm_eval_name == "qtier_translation"
    assert spec.higher_is_better == {"bleu": True, "chrf": True}
    assert callable(spec.config["process_results"])
    assert spec.config["dataset_kwargs"]["data_files"]["test"] == "eval_sets/translation_en_de.jsonl"
    cls = tasks.build("classification", CL)
    assert cls.num_docs == 480 and set(cls.higher_is_better) == {"acc", "macro_f1"}


def test_template_fields():
    assert tasks.template_fields({"doc_to_text": "Say {{ source }} and {{x}}", "doc_to_target": "{{reference}}"}) \
        == ["source", "x", "reference"]


def test_user_field_names_are_mapped(tmp_path, in_repo):
    f = tmp_path / "mine.jsonl"
    f.write_text(json.dumps({"en": "Hello", "de": "Hallo"}) + "\n")
    task = Task(config=TR.config, data=str(f), kind="generate", fields={"source": "en", "reference": "de"})
    spec = tasks.build("translation", task)
    mapping = tasks.field_map(task, ["source", "reference"])
    assert tasks.normalise({"en": "Hello", "de": "Hallo"}, mapping, task)["source"] == "Hello"
    assert spec.num_docs == 1


def test_missing_field_names_file_line_and_key(tmp_path, in_repo):
    f = tmp_path / "bad.jsonl"
    f.write_text(json.dumps({"source": "a", "reference": "b"}) + "\n" + json.dumps({"source": "a"}) + "\n")
    task = Task(config=TR.config, data=str(f), kind="generate")
    with pytest.raises(DataError, match=r"bad\.jsonl:2: missing field 'reference' \(eval\.tasks\.tr\.fields\.reference\)"):
        tasks.build("tr", task)


def test_invalid_json_line(tmp_path, in_repo):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"source": "a", "reference": "b"}\n{oops\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:2: not valid JSON"):
        tasks.build("tr", Task(config=TR.config, data=str(f), kind="generate"))


def test_label_outside_label_list(tmp_path, in_repo):
    f = tmp_path / "cls.jsonl"
    f.write_text(json.dumps({"text": "fine", "label": "neutral"}) + "\n")
    task = Task(config=CL.config, data=str(f), kind="classify", labels=["negative", "positive"])
    with pytest.raises(DataError, match=r"cls\.jsonl:1: label 'neutral' is not in eval\.tasks\.c\.labels"):
        tasks.build("c", task)


def test_empty_file(tmp_path, in_repo):
    f = tmp_path / "e.jsonl"
    f.write_text("\n")
    with pytest.raises(DataError, match="file is empty"):
        tasks.build("tr", Task(config=TR.config, data=str(f), kind="generate"))


@pytest.mark.skipif(not SHARED_EVAL.is_dir(), reason="../shared/eval_data is not present")
def test_public_sets_plug_in_through_params_only(in_repo):
    labels = json.loads((SHARED_EVAL / "classification/labels.json").read_text())
    specs = {
        "classification": Task(config=CL.config, kind="classify", labels=labels, limit=50,
                               data=str(SHARED_EVAL / "classification/mr_rotten_tomatoes_test_1000.jsonl")),
        "summarization": Task(config="eval_sets/tasks/summarization.yaml", kind="generate", limit=10,
                              data=str(SHARED_EVAL / "summarization/multilexsum_test_alt.jsonl")),
        "translation": Task(config=TR.config, kind="generate", limit=10,
                            data=str(SHARED_EVAL / "translation/ntrex128_en-de.jsonl")),
    }
    assert {n: tasks.build(n, t).num_docs for n, t in specs.items()} == \
        {"classification": 50, "summarization": 10, "translation": 10}
