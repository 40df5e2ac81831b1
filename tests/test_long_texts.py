"""The long texts of the fidelity-by-position probe: loading, cutting, and the shipped file's lengths."""
import json

import pytest

from pipeline.domain import long_texts
from pipeline.io import DataError


def words(s):
    return list(range(len(s.split())))


def test_texts_are_cut_to_the_probe_length_and_a_short_one_is_named(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(json.dumps({"id": f"t{i}", "text": " ".join(["w"] * n)}) for i, n in enumerate((9, 12, 5))))
    rows = long_texts.texts(str(f), "text", 2)
    assert [r[0] for r in rows] == ["t0", "t1"]
    assert [len(s) for s in long_texts.sequences(rows, words, 8)] == [9, 9]
    with pytest.raises(DataError, match="long text t2: 5 tokens, the probe needs 9"):
        long_texts.sequences(long_texts.texts(str(f), "text", 3), words, 8)
    with pytest.raises(DataError, match="4 long texts requested but the file has 3 rows"):
        long_texts.texts(str(f), "text", 4)


def test_the_shipped_texts_are_long_and_distinct(root):
    rows = long_texts.texts("eval_sets/long_texts.jsonl", "text", 4, root)
    assert len({t for _, t in rows}) == 4
    # over 4,096 SmolLM2 tokens each (4,126-4,432); at ~1.2 tokens a word that is over 3,400 words
    assert all(len(t.split()) > 3400 for _, t in rows), [len(t.split()) for _, t in rows]
