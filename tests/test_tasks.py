import json

import pytest

from pipeline.domain.sets import tasks
from pipeline.domain.sets.calibration import DataError
from pipeline.schema import ConfigError, Languages, Task

EN_DE = Languages(source="English", target="German")
TR = Task(config="eval_sets/tasks/translation.yaml", data="eval_sets/translation_en_de.jsonl", kind="generate",
          limit=5, languages=EN_DE)
CL = Task(config="eval_sets/tasks/classification.yaml", data="eval_sets/sentiment.jsonl", kind="classify",
          labels=["negative", "positive"])


def test_shipped_tasks_build(in_repo):
    spec = tasks.build("translation", TR)
    assert spec.num_docs == 5 and spec.lm_eval_name == "qtier_translation"
    assert spec.higher_is_better == {"bleu": True, "chrf": True}
    assert callable(spec.config["process_results"])
    assert spec.config["dataset_kwargs"]["data_files"]["test"] == "eval_sets/translation_en_de.jsonl"
    cls = tasks.build("classification", CL)
    assert cls.num_docs == 1280 and set(cls.higher_is_better) == {"acc", "macro_f1"}


def test_template_fields():
    assert tasks.template_fields({"doc_to_text": "Say {{ source }} and {{x}}", "doc_to_target": "{{reference}}"}) \
        == ["source", "x", "reference"]


def test_user_field_names_are_mapped(tmp_path, in_repo):
    f = tmp_path / "mine.jsonl"
    f.write_text(json.dumps({"en": "Hello", "de": "Hallo"}) + "\n")
    task = Task(config=TR.config, data=str(f), kind="generate", fields={"source": "en", "reference": "de"},
                languages=EN_DE)
    spec = tasks.build("translation", task)
    mapping = tasks.field_map(task, ["source", "reference"])
    assert tasks.normalise({"en": "Hello", "de": "Hallo"}, mapping, task, 0)["source"] == "Hello"
    assert spec.num_docs == 1


def test_a_classification_doc_carries_its_row_for_the_tie_rule(in_repo):
    """metrics.choose breaks a tie by the row's position; lm-eval's hook sees only the doc."""
    from datasets import Dataset    # lm-eval's own input type (imports torch: kept out of the module)

    rows = [{"text": "fine", "label": "positive"}, {"text": "bad", "label": "negative"}]
    docs = tasks.build("classification", CL).config["process_docs"](Dataset.from_list(rows))
    assert [d[tasks.POSITION] for d in docs] == [0, 1] and [d["gold"] for d in docs] == [1, 0]


BAD_DATA = {   # file text, task, expected error (tests/test_bad_inputs.py: the same through the check stage)
    "missing field": (json.dumps({"source": "a", "reference": "b"}) + "\n" + json.dumps({"source": "a"}) + "\n",
                      TR, r"bad\.jsonl:2: missing field 'reference' \(eval\.tasks\.t\.fields\.reference\)"),
    "invalid json": ('{"source": "a", "reference": "b"}\n{oops\n', TR, r"bad\.jsonl:2: not valid JSON"),
    "label outside list": (json.dumps({"text": "fine", "label": "neutral"}) + "\n", CL,
                           r"bad\.jsonl:1: label 'neutral' is not in eval\.tasks\.t\.labels"),
    "empty file": ("\n", TR, r"bad\.jsonl: file is empty"),
}


@pytest.mark.parametrize("case", list(BAD_DATA))
def test_build_rejects_bad_data_naming_file_and_line(tmp_path, in_repo, case):
    text, base, match = BAD_DATA[case]
    f = tmp_path / "bad.jsonl"
    f.write_text(text)
    with pytest.raises(DataError, match=match):
        tasks.build("t", Task(config=base.config, data=str(f), kind=base.kind, labels=base.labels,
                              languages=base.languages))


def _jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_public_sets_plug_in_through_params_only(tmp_path, in_repo):
    """Sets shaped like the public ones (extra columns, their own ids and label list) need only params."""
    labels = ["negative", "positive"]
    cls = _jsonl(tmp_path / "classification/mr_test.jsonl",
                 [{"id": f"mr-{i}", "text": f"review {i}", "label": labels[i % 2]} for i in range(60)])
    summ = _jsonl(tmp_path / "summarization/multilexsum_test.jsonl",
                  [{"id": f"mls-{i}", "document": f"Long case text {i}.", "reference": f"Case {i}."}
                   for i in range(12)])
    tr = _jsonl(tmp_path / "translation/ntrex128_en-de.jsonl",
                [{"id": f"ntrex-{i}", "source": f"Line {i}", "reference": f"Zeile {i}", "src_lang": "en",
                  "tgt_lang": "de", "doc_id": f"bbc.{i}", "line": i} for i in range(12)])
    specs = {
        "classification": Task(config=CL.config, kind="classify", labels=labels, limit=50, data=cls),
        "summarization": Task(config="eval_sets/tasks/summarization.yaml", kind="generate", limit=10, data=summ),
        "translation": Task(config=TR.config, kind="generate", limit=10, data=tr, languages=EN_DE),
    }
    built = {n: tasks.build(n, t) for n, t in specs.items()}
    assert {n: s.num_docs for n, s in built.items()} == \
        {"classification": 50, "summarization": 10, "translation": 10}
    assert built["translation"].config["dataset_kwargs"]["data_files"]["test"] == tr


def test_language_pair_is_data(in_repo):
    """The shipped prompt names its languages as placeholders; the entry's `languages` fills them in."""
    de = tasks.build("translation", TR).config["doc_to_text"]
    assert de == ("Translate this English sentence into German. Reply with the German translation only."
                  "\n\n{{source}}")                                    # the prompt before languages were data
    fr = tasks.build("translation_fr", Task(config=TR.config, data=TR.data, kind="generate",
                                            languages=Languages(source="English", target="French"))).config
    assert fr["doc_to_text"] == de.replace("German", "French")
    assert tasks.template_fields(fr) == ["source", "reference"]


def test_a_prompt_with_languages_needs_them_and_unused_languages_are_rejected(in_repo):
    with pytest.raises(ConfigError, match=r"eval\.tasks\.tr\.languages: required: the prompt in "
                                          r"eval_sets/tasks/translation\.yaml names \{\{source_language\}\}"):
        tasks.build("tr", Task(config=TR.config, data=TR.data, kind="generate"))
    with pytest.raises(ConfigError, match=r"eval\.tasks\.s\.languages: the prompt in .*summarization\.yaml uses "
                                          "neither"):
        tasks.build("s", Task(config="eval_sets/tasks/summarization.yaml", data="eval_sets/summarization.jsonl",
                              kind="generate", languages=EN_DE))


def test_two_entries_of_one_yaml_get_distinct_lm_eval_names(in_repo):
    fr = Task(config=TR.config, data=TR.data, kind="generate", limit=2, languages=Languages("English", "French"))
    specs = tasks.build_all({"translation": TR, "translation_fr": fr,
                             "classification": CL}, "m")
    assert [s.lm_eval_name for s in specs] == ["qtier_translation__translation",
                                               "qtier_translation__translation_fr", "qtier_classification"]
    assert "into French" in specs[1].config["doc_to_text"] and "into German" in specs[0].config["doc_to_text"]


def test_a_probe_set_reads_the_model_s_own_file_and_needs_a_model(in_repo, tmp_path, monkeypatch):
    from pipeline.domain.sets import probe_sets, retrieval

    probe = Task(config="eval_sets/tasks/retrieval.yaml", data="retrieval:512?per_cell=2", kind="generate")
    for model, count in (("a", len), ("b", lambda s: len(s.split()))):      # two vocabularies
        retrieval.write_jsonl(probe_sets.rows(probe_sets.parse("r", probe.data), count), tmp_path / f"{model}.jsonl")
    monkeypatch.setattr(tasks.paths, "probe_data", lambda model, name: tmp_path / f"{model}.jsonl")
    built = {m: tasks.build("r", probe, m) for m in ("a", "b")}
    assert {m: s.config["dataset_kwargs"]["data_files"]["test"] for m, s in built.items()} == {
        "a": str(tmp_path / "a.jsonl"), "b": str(tmp_path / "b.jsonl")}
    assert built["a"].num_docs == built["b"].num_docs == 6
    with pytest.raises(ValueError, match="a probe set .* is written per model"):
        tasks.build("r", probe)
    assert tasks.planned_samples(probe, in_repo) == 6 and tasks.longest_prompt(probe, in_repo)[0] == 512
