"""pipeline/domain/sets/sample_row.py: the per-sample row's one type, read and written through the typed
parser, byte for byte the JSONL evaluate wrote before the row had a type; a malformed row is one line
naming the file, line and field."""
import json

import pytest

from pipeline.domain.sets import sample_row, task_rows
from pipeline.domain.sets.sample_row import SampleRow
from pipeline.io import DataError

# one line of each shape evaluate writes, as results/ holds them (keys in this order, the defaults absent)
CHOICE = ('{"id": "sen-001", "doc_id": 0, "input": {"text": "The app keeps crashing."}, "target": 0, '
          '"choices": ["negative", "positive"], "gold": 0, "logliks": [-1.8663626909255981, -2.5712978839874268], '
          '"pred": 0, "tied": false, "prompt_chars": 289, "scores": {"acc": 100.0}, "stratum": 1, "strata": [648, 632]}')
GENERATED = ('{"id": "sum-7", "doc_id": 7, "input": {"document": "Der Zug fährt.", "reference": "Zug."}, '
             '"target": "Zug.", "output": "Ein Zug.", "reasked": true, "prompt_chars": 120, '
             '"scores": {"rouge1": 66.66666666666667, "rouge2": 0.0, "rougeL": 66.66666666666667}}')
REGISTRY = ('{"id": "", "doc_id": 3, "input": {"prompt": "Q: 2+2?"}, "target": "4", "output": "4", "prompt_chars": 7, '
            '"lm_eval": true, "scores": {}}')
UNSCORED = '{"id": "r-1", "doc_id": 1, "input": {}, "target": null, "output": "", "prompt_chars": null, "scores": {}}'


@pytest.mark.parametrize("line", [CHOICE, GENERATED, REGISTRY, UNSCORED])
def test_a_row_round_trips_byte_for_byte(tmp_path, line):
    path = tmp_path / "samples" / "t.jsonl"
    path.parent.mkdir()
    path.write_text(line + "\n", encoding="utf-8")
    (row,) = sample_row.read(path)
    assert isinstance(row, SampleRow)
    sample_row.write(path, [row])
    assert path.read_text(encoding="utf-8") == line + "\n"


def test_the_fields_read_back_typed():
    row = sample_row.of(json.loads(CHOICE), "c.jsonl:1")
    assert (row.doc_id, row.gold, row.pred, row.tied, row.stratum, row.strata) == (0, 0, 0, False, 1, [648, 632])
    assert row.scores == {"acc": 100.0} and row.output is None and not row.reasked and not row.lm_eval
    gen = sample_row.of(json.loads(GENERATED), "g.jsonl:1")
    assert gen.reasked and gen.choices is None and gen.logliks is None and gen.scores["rougeL"] == pytest.approx(200 / 3)
    assert sample_row.untagged(row).stratum is None and sample_row.untagged(row).strata is None


@pytest.mark.parametrize("change, message", [
    ({"gold": "zero"}, r"classification\.jsonl:2\.gold: expected an integer, got 'zero'"),
    ({"scores": {"acc": "high"}}, r"classification\.jsonl:2\.scores\.acc: expected a number, got 'high'"),
    ({"prompt_chars": None, "logliks": "-1.0"}, r"classification\.jsonl:2\.logliks: expected a list, got '-1\.0'"),
    ({"gols": 1}, r"classification\.jsonl:2\.gols: unknown key \(did you mean 'gold'\?\)"),
])
def test_a_malformed_row_is_one_line_naming_the_file_line_and_field(tmp_path, change, message):
    path = tmp_path / "classification.jsonl"
    bad = {**json.loads(CHOICE), **change}
    path.write_text(CHOICE + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=message) as e:
        sample_row.read(path)
    assert "\n" not in str(e.value)


def test_a_row_without_a_required_field_names_it(tmp_path):
    path = tmp_path / "samples" / "translation.jsonl"
    path.parent.mkdir()
    row = json.loads(GENERATED)
    del row["prompt_chars"]
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"translation\.jsonl:1\.prompt_chars: required key is missing"):
        task_rows.read_samples(tmp_path)
