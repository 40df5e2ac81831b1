"""The long texts of the fidelity-by-position probe: loading, cutting, joining a short text with the
next ones, the positions read, and the shipped file's lengths."""
import json

import pytest

from pipeline.domain.sets import long_texts
from pipeline.io import DataError


def words(s):
    """One token per whitespace-separated word; the break between joined texts is no word."""
    return list(range(len(s.split())))


def rows_of(tmp_path, *lengths):
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(json.dumps({"id": f"t{i}", "text": " ".join([f"w{i}"] * n)}) for i, n in enumerate(lengths)))
    return str(f)


def test_texts_are_cut_to_the_probe_length_and_every_row_is_kept_for_continuations(tmp_path):
    rows = long_texts.texts(rows_of(tmp_path, 9, 12, 5), "text", 2)
    assert [r[0] for r in rows] == ["t0", "t1", "t2"]
    assert [len(s) for s in long_texts.sequences(rows, 2, words, 8)] == [9, 9]
    with pytest.raises(DataError, match="4 long texts requested but the file has 3 rows"):
        long_texts.texts(rows_of(tmp_path, 9, 12, 5), "text", 4)


def test_a_short_text_is_continued_with_the_next_rows_wrapping_round(tmp_path):
    rows = long_texts.texts(rows_of(tmp_path, 9, 12, 5), "text", 3)
    found = long_texts.joined(rows, 3, words, 11)
    assert [j.ids for j in found] == [("t0", "t1"), ("t1",), ("t2", "t0")]
    assert [j.starts for j in found] == [(0, 9), (0,), (0, 5)]
    assert [j.own for j in found] == [9, 12, 5]
    assert all(len(j.tokens) == 12 for j in found)
    # t2 continued with t0 then t1: its tokens are the joined text's, in order, up to the length
    text = dict(rows)
    assert long_texts.join(rows, 2, str.split, 20).tokens == (text["t2"] + " " + text["t0"] + " " + text["t1"]).split()[:20]
    assert found[0].record() == {"tokens_alone": 9, "rows": ["t0", "t1"], "starts": [0, 9]}


def test_a_text_all_the_rows_joined_cannot_bring_to_the_length_is_named(tmp_path):
    rows = long_texts.texts(rows_of(tmp_path, 9, 12, 5), "text", 3)
    with pytest.raises(DataError, match=r"^long text t0: 9 tokens, 26 with all 3 texts joined; the probe needs 27 "
                                        r"\(positions up to 26\): lower eval.long_context.positions or add texts$"):
        long_texts.sequences(rows, 3, words, 26)
    assert [len(s) for s in long_texts.sequences(rows, 3, words, 25)] == [26, 26, 26]


@pytest.mark.parametrize(("args", "expected"), [((4096, 8192, 4096), 4096), ((4096, 2048, 4096), 2048),
                                                ((4096, None, 3000), 3000), ((4096, 8192, 4096, 2046), 2046)])
def test_the_positions_read_are_the_smallest_limit(args, expected):
    assert long_texts.probe_positions(*args) == expected


def test_the_shipped_texts_are_long_and_distinct(root):
    rows = long_texts.texts("eval_sets/long_texts.jsonl", "text", 4, root)
    assert len({t for _, t in rows}) == 4
    # over 4,096 SmolLM2 tokens each (4,126-4,432); at ~1.2 tokens a word that is over 3,400 words
    assert all(len(t.split()) > 3400 for _, t in rows), [len(t.split()) for _, t in rows]
