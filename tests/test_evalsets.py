"""The evalsets stage: public sets are fetched once into artifacts/eval_data and checked like local
JSONL; a wrong column or label fails in seconds naming the file and line."""
import json
import shutil
import sys

import pytest

from pipeline import paths
from pipeline.domain.sets import tasks
from pipeline.schema.yaml_io import safe_dump, safe_load
from pipeline.stages import evalsets
from tests.test_bad_inputs import SMOL
from tests.test_public_sets import fake_hub

SPEC = "hf:stanfordnlp/sst2?split=validation"


@pytest.fixture
def project(tmp_path, monkeypatch, root):
    for f in ("eval_sets", "recipes", "calibration"):
        shutil.copytree(root / f, tmp_path / f)
    p = safe_load((root / "params.yaml").read_text())
    p["eval"]["tasks"]["classification"].update(data=SPEC, fields={"text": "sentence", "label": "label"})
    # a local model's config.json: the check of the shipped embedded model reads its GGUF (seconds)
    (tmp_path / "models" / "m").mkdir(parents=True)
    (tmp_path / "models" / "m" / "config.json").write_text(json.dumps(SMOL))
    p["models"] = {"m": {"source": "local:models/m", "dtype": "bfloat16"}}
    (tmp_path / "params.yaml").write_text(safe_dump(p, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["evalsets"])
    return tmp_path


def test_fetches_once_and_tasks_read_the_copy(project, monkeypatch):
    calls = []
    monkeypatch.setattr("datasets.load_dataset", fake_hub(calls))
    evalsets.main()
    evalsets.main()
    assert len(calls) == 1
    assert paths.eval_data("classification").read_text().count("\n") == 2
    from pipeline import config
    task = config.load().eval.tasks["classification"]
    spec = tasks.build("classification", task)
    assert spec.num_docs == 2
    assert spec.config["dataset_kwargs"]["data_files"]["test"] == "artifacts/eval_data/classification.jsonl"
    assert safe_load((project / "artifacts/eval_data/manifest.json").read_text()) == {"classification": SPEC}


def test_wrong_label_names_the_copy_and_line(project, monkeypatch, capsys):
    monkeypatch.setattr("datasets.load_dataset", fake_hub([]))
    p = safe_load((project / "params.yaml").read_text())
    p["eval"]["tasks"]["classification"]["labels"] = ["neg", "pos"]
    (project / "params.yaml").write_text(safe_dump(p, sort_keys=False))
    with pytest.raises(SystemExit) as e:
        evalsets.main()
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "artifacts/eval_data/classification.jsonl:1: label 'positive' is not in eval.tasks.classification.labels" in err


def test_download_failure_is_one_named_line(project, monkeypatch, capsys):
    def offline(*a, **k):
        raise ConnectionError("Couldn't reach the Hub\nlong traceback text")
    monkeypatch.setattr("datasets.load_dataset", offline)
    with pytest.raises(SystemExit) as e:
        evalsets.main()
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"qtier: error: eval.tasks.classification.data: could not fetch {SPEC!r}: "
                   "ConnectionError: Couldn't reach the Hub")
    assert not paths.eval_data("classification").exists()
