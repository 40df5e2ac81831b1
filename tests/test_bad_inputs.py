"""Bad input costs seconds, not a GPU hour: every case is rejected by the check stage (which DVC runs
before any other), with exit code 2 and one message naming the key / file / line, and nothing under
results/ or artifacts/ changes: no check marker appears (the marker is what lets DVC run the stages
after check), no earlier result is touched. A params error stops the stages that write results
(decide, kvscales) the same way. tests/test_pipeline_e2e.py shows it through `dvc repro`."""
import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from pipeline import paths
from pipeline.domain.hardware import machine
from pipeline.report import plots
from pipeline.schema.yaml_io import safe_dump, safe_load
from pipeline.stages import check, decide, kvscales

SMOL = {"hidden_size": 576, "num_attention_heads": 9, "head_dim": 64, "intermediate_size": 1536,
        "num_hidden_layers": 30, "num_key_value_heads": 3}


def tree_digest(project: Path) -> dict:
    """Every file under results/ and artifacts/ with its bytes' digest."""
    return {str(p.relative_to(project)): hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in ("results", "artifacts") for p in sorted((project / folder).rglob("*")) if p.is_file()}


@pytest.fixture
def project(tmp_path, monkeypatch, root):
    """The shipped params and files, and an earlier run's results and artifacts (no check marker: a
    check that let bad params through would write one)."""
    for f in ("eval_sets", "recipes", "calibration"):
        shutil.copytree(root / f, tmp_path / f)
    shutil.copy(root / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "results" / "evals").mkdir(parents=True)
    (tmp_path / "results" / "decision.md").write_text("# an earlier decision\n")
    (tmp_path / "results" / "evals" / "r.json").write_text('{"kept": true}\n')
    (tmp_path / "artifacts" / "smollm2-135m" / "source").mkdir(parents=True)
    (tmp_path / "artifacts" / "smollm2-135m" / "source" / "config.json").write_text(json.dumps(SMOL))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_params(project, mutate):
    params = safe_load((project / "params.yaml").read_text())
    mutate(params, project)
    (project / "params.yaml").write_text(safe_dump(params, sort_keys=False))


def stopped(project, capsys, main, expected: str):
    """main() exits 2 with the one line `expected`, and results/ and artifacts/ are byte-identical."""
    before = tree_digest(project)
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2
    assert expected in err, err
    assert len(err.splitlines()) == 1
    assert tree_digest(project) == before


def rejects(project, capsys, mutate, expected: str):
    write_params(project, mutate)
    stopped(project, capsys, check.main, expected)


def local_model(project):
    """A local model folder (its config.json): check reads no GGUF, so a passing check takes no seconds."""
    model = project / "models" / "smol"
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(json.dumps(SMOL))

    def mutate(p, _):
        p["models"]["smollm2-135m"]["source"] = "local:models/smol"
    return mutate


def test_a_passing_check_writes_its_marker_and_recipes_and_nothing_else(project):
    """The control of every case below: the same digest sees the files a passing check writes (its marker
    and each tier's recipe copy, which the tier's quantize stage depends on)."""
    write_params(project, local_model(project))
    before = tree_digest(project)
    check.main()
    after = tree_digest(project)
    marker = str(paths.CHECKED)
    tiers = safe_load((project / "params.yaml").read_text())["tiers"]
    assert set(after) - set(before) == {marker} | {str(paths.tier_recipe(t)) for t in tiers}
    assert (project / marker).read_text() == check.MARKER_TEXT
    assert {k: after[k] for k in before} == before


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
    "a batch of no samples": (set_in("eval.batch_size", -3), "eval.batch_size: must be >= 1, got -3"),
    "a load test of no tokens": (set_in("eval.throughput.new_tokens", 0), "eval.throughput.new_tokens: must be >= 1, got 0"),
    "unknown method": (set_in("tiers.int4-gptq.method", "gptqq"), "tiers.int4-gptq.method: unknown method 'gptqq' (did you mean 'gptq'?)"),
    "unknown kv mode": (set_in("kv_modes.fp8.cache_dtype", "fp4"), "kv_modes.fp8.cache_dtype: 'fp4' is not one of"),
    "a kv format vLLM lacks": (set_in("kv_modes.fp8.cache_dtype", "nvfp8"),
                               "kv_modes.fp8.cache_dtype: 'nvfp8' is not one of vLLM 0.32.0"),
    "a skipped layer the model lacks": (set_in("kv_modes.fp8.skip_layers", [0, 30]),
                                        "kv_modes.fp8.skip_layers: layer 30 is beyond model smollm2-135m's 30 layers"),
    "calibrated scales of a format kvscales does not make": (set_in("kv_modes.fp8", {"cache_dtype": "nvfp4", "scale": "calibrated"}),
                                                             "kv_modes.fp8.scale: stage kvscales calibrates fp8_e4m3's"),
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
    "reference not a model": (set_in("decision.baseline.model", "big"),
                              "decision.baseline.model: 'big' is not a model (models: smollm2-135m)"),
    "a DVC-tracked key left to its default": (lambda p, _: p["decision"].pop("confidence"),
                                              "decision.confidence: write it out in params.yaml"),
    "a local task's metric the registry does not declare": (
        lambda p, root: (root / "eval_sets/tasks/summarization.yaml").write_text(
            (root / "eval_sets/tasks/summarization.yaml").read_text().replace("metric: rougeL\n", "metric: rougeLsum\n")),
        "eval.tasks.summarization.config: eval_sets/tasks/summarization.yaml declares metric 'rougeLsum', which "
        "pipeline/domain/sets/metric_registry.py does not (did you mean 'rougeL'?)"),
    "the retired bootstrap key": (set_in("decision.bootstrap", {"resamples": 1000, "seed": 12345, "confidence": 0.95}),
                                  "decision.bootstrap: renamed: its confidence is decision.confidence"),
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
    "global chat template switch": (set_in("eval.apply_chat_template", True),
                                    "eval.apply_chat_template: moved to models.<name>.apply_chat_template"),
    "chat template neither auto nor a bool": (set_in("models.smollm2-135m.apply_chat_template", "yes"),
                                              "models.smollm2-135m.apply_chat_template: expected"),
    "repair of a tier that cannot be promoted": (set_in("tiers.fp8.repair", {"max_kl": 0.01}),
                                                 "tiers.fp8.repair: needs a recipe method"),
    "repair selection texts past the calibration file": (set_in("tiers.int4-gptq.repair", {"texts": 60}),
                                                         "tiers.int4-gptq.repair.texts: 60 selection texts after "
                                                         "calibration.num_samples (16) need 76 rows"),
    "a repaired auto cache": (set_in("kv_modes.auto.repair", {"max_kl": 0.01}),
                              "kv_modes.auto.repair: an auto cache quantizes no layer"),
    "a KV repair bound of zero": (set_in("kv_modes.fp8.repair", {"max_kl": 0.0}),
                                  "kv_modes.fp8.repair.max_kl: must be positive, got 0.0"),
    "a KV repair with its layers given": (set_in("kv_modes.fp8", {"cache_dtype": "nvfp4", "skip_layers": [0],
                                                                  "repair": {"max_kl": 0.01}}),
                                          "kv_modes.fp8.skip_layers: a repaired mode's layers are chosen"),
    "a repair of the baseline's KV mode": (lambda p, _: (set_in("kv_modes.fp8.repair", {"max_kl": 0.01})(p, _),
                                                         set_in("decision.baseline.kv", "fp8")(p, _)),
                                           "kv_modes.fp8.repair: 'fp8' is decision.baseline.kv"),
    "KV repair texts past the long texts": (set_in("kv_modes.fp8.repair", {"data": "long_context", "texts": 9}),
                                            "kv_modes.fp8.repair.texts: 9 texts but eval_sets/long_texts.jsonl has 4 rows"),
    "KV repair texts past the calibration file": (set_in("kv_modes.fp8.repair", {"texts": 60}),
                                                  "kv_modes.fp8.repair.texts: 60 selection texts after "
                                                  "calibration.num_samples (16) need 76 rows"),
    "retrieval prompts longer than vLLM's context": (
        lambda p, _: (set_in("serving.backend", "vllm")(p, _), set_in("serving.vllm.max_model_len", 4096)(p, _)),
        "serving.vllm.max_model_len: 4096 is too short for eval.tasks.retrieval_4096 (4,096-token prompts, "
        "32 answer tokens and a chat template: at least 4192); raise it or drop the task"),
    "endpoint whose API key variable is unset": (
        set_in("tiers.served", {"method": "endpoint", "base_url": "http://10.0.0.5:8000", "served_model": "m",
                                "api_key_env": "QTIER_TEST_UNSET_KEY", "hardware": "fp16"}),
        "tiers.served.api_key_env: the environment variable QTIER_TEST_UNSET_KEY is not set"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_params_errors(project, capsys, case):
    mutate, expected = CASES[case]
    rejects(project, capsys, mutate, expected)


# Params errors that every stage's own schema check (schema.load_or_exit) rejects, not only check's
SCHEMA_CASES = ["unknown key", "wrong type", "unknown method", "negative tolerance", "baseline not a tier"]
WRITERS = {"decide": (["decide"], decide.main),
           "kvscales": (["kvscales", "smollm2-135m", "int4-gptq"], kvscales.main)}


@pytest.mark.parametrize("stage", list(WRITERS))
@pytest.mark.parametrize("case", SCHEMA_CASES)
def test_a_params_error_stops_a_stage_that_writes_before_it_writes(project, capsys, monkeypatch, stage, case):
    argv, main = WRITERS[stage]
    monkeypatch.setattr(sys, "argv", argv)
    mutate, expected = CASES[case]
    write_params(project, mutate)
    stopped(project, capsys, main, expected)


def test_with_good_params_decide_rewrites_the_earlier_decision(project, monkeypatch):
    """The control of the decide cases: run, it writes (here: every row failed, no results yet)."""
    monkeypatch.setattr(sys, "argv", ["decide"])
    monkeypatch.setattr(machine, "accelerator_available", lambda: False)   # its header; the unit tier has no torch
    monkeypatch.setattr(plots, "quality_vs_memory", lambda *a, **k: None)    # ~1 s of matplotlib (test_decide draws it)
    before = tree_digest(project)
    with pytest.raises(SystemExit) as e:
        decide.main()
    assert e.value.code == 1
    assert (project / "results" / "decision.md").read_text() != "# an earlier decision\n"
    assert tree_digest(project) != before


def test_with_good_params_kvscales_writes_its_records(project, monkeypatch):
    """The control of the kvscales cases."""
    monkeypatch.setattr(sys, "argv", ["kvscales", "smollm2-135m", "int4-gptq"])
    before = tree_digest(project)
    kvscales.main()
    assert set(tree_digest(project)) > set(before)


def base_model(project, chat_template, **tokenizer_files):
    """A local model folder of JSON files only (no weights): config.json, a tokenizer_config.json without
    a chat template and any other tokenizer file given (name -> text); models.*.apply_chat_template set."""
    use_folder = local_model(project)
    folder = project / "models" / "smol"
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>", "model_max_length": 2048}))
    for name, text in tokenizer_files.items():
        (folder / name).write_text(text)

    def mutate(p, root):
        use_folder(p, root)
        p["models"]["smollm2-135m"]["apply_chat_template"] = chat_template
    return mutate


def test_chat_template_true_on_a_base_model_stops_at_check(project, capsys):
    rejects(project, capsys, base_model(project, True),
            "models.smollm2-135m.apply_chat_template: true, but models/smol's tokenizer has no chat template")


@pytest.mark.parametrize("value", ["auto", False])
def test_a_base_model_passes_check_with_auto_or_false(project, value):
    """The control: the same folder, the template not asked for."""
    write_params(project, base_model(project, value))
    check.main()
    assert (project / paths.CHECKED).is_file()


def test_chat_template_true_passes_check_with_a_chat_template_jinja(project):
    """The control: transformers 5 keeps the template beside tokenizer_config.json."""
    write_params(project, base_model(project, True, **{"chat_template.jinja": "{{ messages[0]['content'] }}"}))
    check.main()
    assert (project / paths.CHECKED).is_file()


def test_an_endpoint_whose_api_key_variable_is_set_passes_check(project, monkeypatch):
    """The control of the unset-variable case: the same tier, the variable set."""
    monkeypatch.setenv("QTIER_TEST_UNSET_KEY", "sk-test")
    write_params(project, CASES["endpoint whose API key variable is unset"][0])
    check.main()
    assert (project / paths.CHECKED).is_file()


def test_local_model_without_config(project, capsys):
    (project / "models" / "empty").mkdir(parents=True)
    rejects(project, capsys, set_in("models.smollm2-135m.source", "local:models/empty"), "models/empty has no config.json")


def test_duplicate_model_names(project, capsys):
    text = (project / "params.yaml").read_text()
    (project / "params.yaml").write_text(text.replace(
        "models:\n", "models:\n  smollm2-135m:\n    source: embedded:smollm2-135m-instruct\n", 1))
    stopped(project, capsys, check.main, "smollm2-135m: duplicate key")


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


def test_eval_file_not_utf8_names_file_and_line(project, capsys):
    f = project / "eval_sets" / "latin1.jsonl"
    f.write_bytes(b'{"source": "a", "reference": "b"}\n{"source": "caf\xe9", "reference": "b"}\n')
    rejects(project, capsys, set_in("eval.tasks.translation.data", "eval_sets/latin1.jsonl"),
            "eval_sets/latin1.jsonl:2: not UTF-8 (byte 0xe9 at column 16)")


def test_task_yaml_not_utf8_names_file_and_line(project, capsys):
    f = project / "eval_sets" / "tasks" / "summarization.yaml"
    f.write_bytes(f.read_bytes() + b"# r\xe9sum\xe9\n")
    line = f.read_bytes().count(b"\n")
    rejects(project, capsys, lambda p, _: None, f"eval_sets/tasks/summarization.yaml:{line}: not UTF-8 (byte 0xe9")


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


def test_recipe_contradicting_its_tier(project, capsys):
    recipe = project / "recipes" / "w8a8_int8.yaml"
    recipe.write_text(recipe.read_text().replace("num_bits: 8\n            type: int\n            symmetric: true\n"
                                                 "            strategy: channel",
                                                 "num_bits: 4\n            type: int\n            symmetric: true\n"
                                                 "            strategy: channel", 1))
    rejects(project, capsys, lambda p, _: None,
            "tiers.int8.weight_bits: 8 but recipes/w8a8_int8.yaml says num_bits 4")


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
    (folder / "my_qa.yaml").write_text(safe_dump({
        "task": "my_qa", "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(folder / "qa.jsonl")}},
        "test_split": "test", "output_type": "multiple_choice", "doc_to_text": "{{q}}", "doc_to_target": "a",
        "doc_to_choice": ["yes", "no"], "metric_list": [{"metric": "acc", "aggregation": "mean",
                                                         "higher_is_better": True}]}))
    entry = {"lm_eval": "my_qa", "include_path": "my_tasks", "tolerances": {"acc": {"abs": 5.0}}}

    def add(p, _):
        p["eval"]["tasks"]["qa"] = entry
    params = safe_load((project / "params.yaml").read_text())
    add(params, project)
    (project / "params.yaml").write_text(safe_dump(params, sort_keys=False))
    check.main()                                            # passes offline: its data is local
    rejects(project, capsys, set_in("eval.tasks.qa.tolerances", {"acc_norm": {"abs": 5.0}}),
            "eval.tasks.qa.tolerances.acc_norm: task qa does not report 'acc_norm'")
