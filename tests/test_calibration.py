"""pipeline/domain/sets/calibration.py: a repair's selection texts are the calibration file's last rows,
apart from the rows a quantizer calibrates on, and share no passage with any task document (the
selection is made on other texts than the verdicts that confirm it)."""
import json
import re
from pathlib import Path

import pytest

from pipeline.domain.sets import calibration
from pipeline.io import DataError
from pipeline.schema import Calibration, Repair


def write(tmp_path: Path, n: int) -> Calibration:
    (tmp_path / "cal.jsonl").write_text("".join(json.dumps({"text": f"text {i}"}) + "\n" for i in range(n)))
    return Calibration(path=str(tmp_path / "cal.jsonl"), num_samples=4)


def test_selection_texts_are_the_last_rows_apart_from_the_calibration_rows(tmp_path):
    cal = write(tmp_path, 10)
    assert calibration.selection_texts(cal, 3) == ["text 7", "text 8", "text 9"]
    assert not set(calibration.selection_texts(cal, 6)) & set(calibration.texts(cal))
    with pytest.raises(DataError, match=r"^repair\.texts: 7 selection texts after calibration\.num_samples \(4\) "
                                        r"need 11 rows; .*cal\.jsonl has 10$"):
        calibration.selection_texts(cal, 7)


def test_check_names_the_repaired_tier(tmp_path, params_dict):
    from pipeline import schema

    params_dict["calibration"] = {"path": str(write(tmp_path, 10).path), "num_samples": 4}
    params_dict["tiers"]["int4-gptq"]["repair"] = {"texts": 9}
    with pytest.raises(DataError, match=r"^tiers\.int4-gptq\.repair\.texts: 9 selection texts"):
        calibration.check(schema.parse(params_dict))


def shingles(text: str, n: int = 8) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def test_the_shipped_selection_texts_share_no_passage_with_a_task_document(root):
    cal = Calibration(path="calibration/calibration.jsonl", num_samples=16)
    selection = set().union(*(shingles(t) for t in calibration.selection_texts(cal, Repair().texts, root)))
    assert selection
    for data in sorted((root / "eval_sets").glob("*.jsonl")):
        for line in data.read_text().splitlines():
            row = json.loads(line)
            for value in (v for v in row.values() if isinstance(v, str)):
                assert not shingles(value) & selection, (data.name, row.get("id"))
