"""Bad input costs seconds, not a GPU hour: every case is rejected by the check stage (which DVC runs
before any other), with exit code 2 and one message naming the key / file / line, and nothing under
results/ changes. tests/test_pipeline_e2e.py shows the same through `dvc repro` on a finished run."""
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from pipeline.stages import check

SMOL = {"hidden_size": 576, "num_attention_heads": 9, "head_dim": 64, "intermediate_size": 1536,
        "num_hidden_layers": 30, "num_key_value_heads": 3}


def tree_digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def project(tmp_path, monkeypatch, root):
    for f in ("eval_sets", "recipes", "calibration"):
        shutil.copytree(root / f, tmp_path / f)
    shutil.copy(root / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "results" / "evals").mkdir(parents=True)
    (tmp_path / "results" / "decision.md").write_text("# an earlier decision\n")
    (tmp_path / "results" / "evals" / "r.json").write_text('{"kept": true}\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def rejects(project, capsys, mutate, expected: str):
    params = yaml.safe_load((project / "params.yaml").read_text())
    mutate(params, project)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    before = tree_digest(project / "results")
    with pytest.raises(SystemExit) as e:
        check.main()
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2
    assert expected in err, err
    assert len(err.splitlines()) == 1
    assert tree_digest(project / "results") == before


def set_in(path: str, value):
    def mutate(p, _):
        *keys, last = path.split(".")
        d = p
        for k in keys:
            d = d[k]
        d[last] = value
    return mutate


CASES = {
    "unknown key": (set_in("tiers.int4-gptq.grup_size", 64), "tiers.int4-gptq.grup_size: unknown key (did you mean 'group_size'?)"),
    "wrong type": (set_in("eval.batch_size", "eight"), "eval.batch_size: expected an integer, got 'eight'"),
    "unknown method": (set_in("tiers.int4-gptq.method", "gptqq"), "tiers.int4-gptq.method: unknown method 'gptqq' (did you mean 'gptq'?)"),
    "unknown kv mode": (set_in("kv_modes.fp8.cache_dtype", "fp4"), "kv_modes.fp8.cache_dtype: 'fp4' is not one of"),
    "misspelt calibrated scale": (set_in("kv_modes.fp8.scale", "calibratd"),
                                  "kv_modes.fp8.scale: expected float | 'calibrated', got 'calibratd'"),
    "calibrated scales for an unquantized cache": (set_in("kv_modes.auto.scale", "calibrated"),
                                                   "kv_modes.auto.scale: calibrated scales need a quantized cache_dtype"),
    "negative tolerance": (set_in("decision.tolerances.chrf", {"abs": -2.0}), "decision.tolerances.chrf: a tolerance is the allowed drop"),
    "missing local model": (set_in("models.smollm2-135m.source", "local:models/nope"), "models.smollm2-135m.source: local model folder not found: models/nope"),
    "missing eval file": (set_in("eval.tasks.summarization.data", "eval_sets/nope.jsonl"), "eval.tasks.summarization.data: file not found: eval_sets/nope.jsonl"),
    "unknown public set": (set_in("eval.tasks.translation.data", "sacrebleu:wmt99?langpair=en-de"), "eval.tasks.translation.data: sacrebleu has no test set 'wmt99'"),
    "public set without split": (set_in("eval.tasks.summarization.data", "hf:abisee/cnn_dailymail?name=3.0.0"), "eval.tasks.summarization.data: 'hf:abisee/cnn_dailymail?name=3.0.0' needs ?split="),
    "bad source scheme": (set_in("models.smollm2-135m.source", "s3://bucket/model"), "must start with 'embedded:', 'local:' or 'hub:'"),
    "tolerance of two kinds": (set_in("decision.tolerances.acc", {"abs": 1.0, "rel": 0.1}), "decision.tolerances.acc: give exactly one of 'abs' or 'rel'"),
    "baseline not a tier": (set_in("decision.baseline.tier", "bf16"), "decision.baseline.tier: 'bf16' is not a tier"),
    "unknown task kind": (set_in("eval.tasks.summarization.kind", "summarize"),
                          "eval.tasks.summarization.kind: 'summarize' is not one of"),
    "language missing": (lambda p, _: p["eval"]["tasks"]["translation"].pop("languages"),
                         "eval.tasks.translation.languages: required: the prompt in eval_sets/tasks/translation.yaml"),
    "one language of two": (set_in("eval.tasks.translation.languages", {"source": "English"}),
                            "eval.tasks.translation.languages.target: required key is missing"),
    "tolerance for a metric the task does not report": (
        set_in("eval.tasks.classification.tolerances", {"bleu": {"abs": 1.0}}),
        "eval.tasks.classification.tolerances.bleu: task classification does not report 'bleu' "
        "(it reports: acc, macro_f1)"),
    "min_baseline for a metric the task does not report": (
        set_in("eval.tasks.translation.min_baseline", {"rougeL": 5.0}),
        "eval.tasks.translation.min_baseline.rougeL: task translation does not report 'rougeL'"),
    "local keys on a registry task": (set_in("eval.tasks.arc", {"lm_eval": "arc_easy", "data": "x.jsonl"}),
                                      "eval.tasks.arc.data: not used by an lm-eval registry task"),
    "task without kind": (set_in("eval.tasks.mine", {"config": "eval_sets/tasks/summarization.yaml"}),
                          "eval.tasks.mine.kind: required"),
    "stage-unsafe tier name": (lambda p, _: p["tiers"].__setitem__("INT 4", p["tiers"].pop("int4-gptq")), "tiers.INT 4: names must be"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_params_errors(project, capsys, case):
    mutate, expected = CASES[case]
    rejects(project, capsys, mutate, expected)


def test_local_model_without_config(project, capsys):
    (project / "models" / "empty").mkdir(parents=True)
    rejects(project, capsys, set_in("models.smollm2-135m.source", "local:models/empty"), "models/empty has no config.json")


def test_duplicate_model_names(project, capsys):
    text = (project / "params.yaml").read_text()
    (project / "params.yaml").write_text(text.replace(
        "models:\n", "models:\n  smollm2-135m:\n    source: embedded:smollm2-135m-instruct\n", 1))
    before = tree_digest(project / "results")
    with pytest.raises(SystemExit) as e:
        check.main()
    assert e.value.code == 2
    assert "smollm2-135m: duplicate key" in capsys.readouterr().err
    assert tree_digest(project / "results") == before


def _write(project, name, text):
    f = project / "eval_sets" / name
    f.write_text(text, encoding="utf-8")
    return f"eval_sets/{name}"


def test_empty_eval_file(project, capsys):
    path = _write(project, "empty.jsonl", "")
    rejects(project, capsys, set_in("eval.tasks.translation.data", path), f"{path}: file is empty")


def test_invalid_json_on_line_n(project, capsys):
    path = _write(project, "bad.jsonl", '{"source": "a", "reference": "b"}\n{"source": "a",\n')
    rejects(project, capsys, set_in("eval.tasks.translation.data", path), f"{path}:2: not valid JSON")


def test_missing_mapped_field(project, capsys):
    path = _write(project, "fields.jsonl", json.dumps({"en": "Hello", "de": "Hallo"}) + "\n")
    rejects(project, capsys, set_in("eval.tasks.translation.data", path),
            f"{path}:1: missing field 'source' (eval.tasks.translation.fields.source)")


def test_label_outside_label_list(project, capsys):
    path = _write(project, "labels.jsonl", json.dumps({"text": "ok", "label": "neutral"}) + "\n")
    rejects(project, capsys, set_in("eval.tasks.classification.data", path),
            f"{path}:1: label 'neutral' is not in eval.tasks.classification.labels")


def test_group_size_that_does_not_divide(project, capsys):
    model = project / "models" / "smol"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(SMOL))

    def mutate(p, _):
        p["models"]["smollm2-135m"]["source"] = "local:models/smol"
        p["tiers"]["int4-gptq"]["group_size"] = 128
    rejects(project, capsys, mutate, "tiers.int4-gptq.group_size: 128 does not divide")


def test_calibration_file_too_short(project, capsys):
    rejects(project, capsys, set_in("calibration.num_samples", 10_000), "calibration.num_samples: 10000 requested")


# model tier: indexes lm-eval's task registry (seconds of YAML parsing per index)
@pytest.mark.model
def test_unknown_lm_eval_task_names_the_key(project, capsys):
    rejects(project, capsys, set_in("eval.tasks.arc", {"lm_eval": "arc_eazy", "limit": 10}),
            "eval.tasks.arc.lm_eval: unknown lm-eval task 'arc_eazy' (did you mean 'arc_easy'?)")


# model tier: indexes lm-eval's task registry (seconds of YAML parsing per index)
@pytest.mark.model
def test_registry_task_needing_the_hub_fails_fast_offline(project, capsys, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    rejects(project, capsys, set_in("eval.tasks.arc", {"lm_eval": "arc_easy", "limit": 10}),
            "eval.tasks.arc: task arc_easy needs its dataset from the Hub (allenai/ai2_arc); no network")


# model tier: indexes lm-eval's task registry (seconds of YAML parsing per index)
@pytest.mark.model
def test_registry_task_with_local_data_passes_and_its_tolerances_are_checked(project, capsys):
    """An lm-eval task YAML of the user's own (include_path) reading a local JSONL needs no network."""
    folder = project / "my_tasks"
    folder.mkdir()
    (folder / "qa.jsonl").write_text("".join(json.dumps({"q": f"Is {i} even?", "a": i % 2}) + "\n" for i in range(4)))
    (folder / "my_qa.yaml").write_text(yaml.safe_dump({
        "task": "my_qa", "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(folder / "qa.jsonl")}},
        "test_split": "test", "output_type": "multiple_choice", "doc_to_text": "{{q}}", "doc_to_target": "a",
        "doc_to_choice": ["yes", "no"], "metric_list": [{"metric": "acc", "aggregation": "mean",
                                                         "higher_is_better": True}]}))
    entry = {"lm_eval": "my_qa", "include_path": "my_tasks", "tolerances": {"acc": {"abs": 5.0}}}

    def add(p, _):
        p["eval"]["tasks"]["qa"] = entry
    params = yaml.safe_load((project / "params.yaml").read_text())
    add(params, project)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    check.main()                                            # passes offline: its data is local
    rejects(project, capsys, set_in("eval.tasks.qa.tolerances", {"acc_norm": {"abs": 5.0}}),
            "eval.tasks.qa.tolerances.acc_norm: task qa does not report 'acc_norm'")
