"""Public eval sets named in params: parsing is offline; downloads are replaced by in-memory
datasets (no internet here), built with the real `datasets` library."""
import json

import pytest

from pipeline.domain.sets import public_sets
from pipeline.schema import ConfigError


def test_parse_specs():
    s = public_sets.parse("k", "sacrebleu:wmt19?langpair=en-de")
    assert (s.scheme, s.name, s.options) == ("sacrebleu", "wmt19", {"langpair": "en-de"})
    h = public_sets.parse("k", "hf:abisee/cnn_dailymail?name=3.0.0&split=test")
    assert (h.name, h.options) == ("abisee/cnn_dailymail", {"name": "3.0.0", "split": "test"})
    assert public_sets.is_public("hf:stanfordnlp/sst2?split=validation")
    assert not public_sets.is_public("eval_sets/sentiment.jsonl")
    assert not public_sets.is_public("hf:no-query")


@pytest.mark.parametrize("spec, message", [
    ("sacrebleu:wmt19?langpair=xx-yy", "sacrebleu test set 'wmt19' has no langpair 'xx-yy'"),
    ("sacrebleu:wmt19?split=test", "unknown option 'split'"),
    ("sacrebleu:nope?langpair=en-de", "sacrebleu has no test set 'nope'"),
    ("hf:imdb?name=plain_text", "needs ?split="),
    ("hf:?split=test", "is not 'sacrebleu:"),
])
def test_bad_specs_name_the_key(spec, message):
    with pytest.raises(ConfigError, match="^eval.tasks.t.data: ") as e:
        public_sets.parse("eval.tasks.t.data", spec)
    assert message in str(e.value)


def fake_hub(calls):
    from datasets import ClassLabel, Dataset, Features, Value

    def load_dataset(path, name=None, split=None, revision=None):
        calls.append((path, name, split, revision))
        feats = Features({"sentence": Value("string"), "label": ClassLabel(names=["negative", "positive"])})
        return Dataset.from_dict({"sentence": ["good", "bad"], "label": [1, 0]}, features=feats)
    return load_dataset


def test_hf_rows_turn_class_ids_into_names():
    calls = []
    spec = public_sets.parse("k", "hf:stanfordnlp/sst2?split=validation")
    rows = list(public_sets.rows(spec, fake_hub(calls)))
    assert rows == [{"sentence": "good", "label": "positive"}, {"sentence": "bad", "label": "negative"}]
    assert calls == [("stanfordnlp/sst2", None, "validation", None)]


def test_sacrebleu_rows(monkeypatch):
    from sacrebleu.dataset import DATASETS

    class Fake:
        langpairs = {"en-de": []}
        def maybe_download(self): pass
        def source(self, pair): return iter(["Hello.", "Bye."])
        def references(self, pair): return iter([("Hallo.\n", "Servus."), ("Tschuss.\n",)])

    monkeypatch.setitem(DATASETS, "wmt19", Fake())
    rows = list(public_sets.rows(public_sets.parse("k", "sacrebleu:wmt19?langpair=en-de")))
    assert rows == [{"id": "wmt19-en-de-0", "source": "Hello.", "reference": "Hallo."},
                    {"id": "wmt19-en-de-1", "source": "Bye.", "reference": "Tschuss."}]
    assert json.loads(public_sets.to_jsonl(rows).splitlines()[1])["reference"] == "Tschuss."
