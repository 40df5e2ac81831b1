"""The fidelity texts and the stored baseline distributions (pipeline/domain/sets/fidelity_set.py)."""
import json

import numpy as np
import pytest

from pipeline.domain.sets import fidelity_set
from pipeline.io import DataError
from pipeline.schema import Fidelity


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_texts_join_the_fields_in_file_order(tmp_path):
    write_rows(tmp_path / "d.jsonl", [{"a": "one", "b": "uno"}, {"a": "two", "b": "dos"}, {"a": "x", "b": "y"}])
    cfg = Fidelity(data="d.jsonl", fields=["a", "b"], limit=2)
    assert fidelity_set.texts(cfg, tmp_path) == ["one\n\nuno", "two\n\ndos"]


def test_too_few_rows_and_a_missing_field_name_the_key_or_file(tmp_path):
    write_rows(tmp_path / "d.jsonl", [{"a": "one"}])
    with pytest.raises(DataError, match="eval.fidelity.limit: 2 texts requested"):
        fidelity_set.texts(Fidelity(data="d.jsonl", fields=["a"], limit=2), tmp_path)
    with pytest.raises(DataError, match="d.jsonl:1: missing field 'b'"):
        fidelity_set.texts(Fidelity(data="d.jsonl", fields=["b"], limit=1), tmp_path)


def test_save_and_load_round_trip(tmp_path):
    lp = [np.log(np.array([[0.5, 0.25], [0.9, 0.05]], np.float32)), np.log(np.array([[0.6, 0.3]], np.float32))]
    base = fidelity_set.Baseline([[5, 6, 7], [8, 9]], [np.array([[1, 2], [3, -1]]), np.array([[4, 0]])], lp,
                                 [np.array([1, 3]), np.array([4])], {"backend": "reference", "k": 2})
    fidelity_set.save(tmp_path / "b.npz", base)
    got = fidelity_set.load(tmp_path / "b.npz")
    assert got.seqs == base.seqs and got.meta == base.meta
    for a, b in zip(got.ids + got.logprobs + got.top1, base.ids + base.logprobs + base.top1):
        np.testing.assert_array_equal(a, b)
    assert got.coverage() == pytest.approx((0.75 + 0.95 + 0.9) / 3, abs=1e-6)


def test_an_empty_baseline_keeps_its_reason(tmp_path):
    fidelity_set.save(tmp_path / "e.npz", fidelity_set.Baseline([], [], [], [], {"unavailable": "why"}))
    got = fidelity_set.load(tmp_path / "e.npz")
    assert got.seqs == [] and got.meta == {"unavailable": "why"}
    with pytest.raises(DataError, match="run the fidelity_base stage"):
        fidelity_set.load(tmp_path / "missing.npz")


def test_a_baseline_saves_to_the_same_bytes_and_so_does_its_reloaded_copy(tmp_path):
    base = fidelity_set.Baseline([[5, 6, 7]], [np.array([[1, 2], [3, -1]])],
                                 [np.log(np.array([[0.5, 0.25], [0.9, 0.05]], np.float32))],
                                 [np.array([1, 3])], {"backend": "reference", "k": 2})
    fidelity_set.save(tmp_path / "a.npz", base)
    fidelity_set.save(tmp_path / "b.npz", base)
    fidelity_set.save(tmp_path / "c.npz", fidelity_set.load(tmp_path / "a.npz"))
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes() == (tmp_path / "c.npz").read_bytes()
    changed = fidelity_set.Baseline(base.seqs, base.ids, [base.logprobs[0] - 0.5], base.top1, base.meta)
    fidelity_set.save(tmp_path / "d.npz", changed)
    assert (tmp_path / "d.npz").read_bytes() != (tmp_path / "a.npz").read_bytes()
