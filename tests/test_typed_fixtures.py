"""The suite's rule for typed records: a test of code that reads a result record (Result, Measured, Row,
Serving and the other records of pipeline/domain/result/facts.py and records.py) builds the record
(tests/result_files.py `result`, `measured`: through the real parser, or the dataclass itself), never a
SimpleNamespace or dict in its place. A stand-in answers whatever the test wrote, so a reader's wrong
access passes: serve_command's `.get` on the typed Serving passed its test and broke decide (issue #60).
Measured rejects a dict for its result or records (measured.py __post_init__); this scan finds stand-ins for the
records themselves. A SimpleNamespace faking a config (schema) or a library object is not a record's.

    .venv/bin/python -m pytest -n 0 -q tests/test_typed_fixtures.py
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from pipeline import schema
from pipeline.domain.result import contract, facts, records
from pipeline.domain.sets import tasks
from pipeline.engines.base import Variant
from pipeline.scoring.verdict import rows
from tests import result_files

TESTS = Path(__file__).parent


def dataclasses_in(*modules) -> list[type]:
    return [c for m in modules for _, c in inspect.getmembers(m, inspect.isclass) if dataclasses.is_dataclass(c)]


def attributes(cls: type) -> set[str]:
    """What a reader can ask of the class: its fields, properties and methods."""
    return {f.name for f in dataclasses.fields(cls)} | {n for n in dir(cls) if not n.startswith("_")}


RECORDS = [attributes(c) for c in dataclasses_in(facts, records, contract, rows)]
# what a stage reads before it measures anything: params, a variant, a task's spec
CONFIGS = [attributes(c) for c in [*dataclasses_in(schema, tasks), Variant]]


def stand_ins(source: str) -> list[str]:
    """Each SimpleNamespace(...) whose keywords a result record has and no config has: 'line N: names'."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        names = {k.arg for k in node.keywords if k.arg}
        if name == "SimpleNamespace" and names and any(names <= r for r in RECORDS) \
                and not any(names <= c for c in CONFIGS):
            found.append(f"line {node.lineno}: SimpleNamespace({', '.join(sorted(names))})")
    return found


@pytest.mark.parametrize("snippet, flagged", [
    ("serve_command(SimpleNamespace(facts=ep), 'float16', 'auto')", True),         # a Row (issue #60)
    ("types.SimpleNamespace(backend='endpoint', serving={'base_url': 'u'})", True),  # a Measured
    ("SimpleNamespace(served_model='m', base_url='u', backend='endpoint', device='endpoint')", True),  # a Serving
    ("SimpleNamespace(eval=ev, serving=cfg)", False),                                # a Params: a config
    ("SimpleNamespace(baseline=SimpleNamespace(tier='fp16', kv='auto'))", False),    # a Decision: a config
    ("SimpleNamespace(input_ids=ids)", False),                                       # a tokenizer's output
    ("SimpleNamespace(name='classification')", False),                               # a TaskSpec: an input
])
def test_the_scan_tells_a_records_stand_in_from_other_fakes(snippet, flagged):
    assert bool(stand_ins(snippet)) is flagged


def test_no_test_stands_in_for_a_result_record():
    found = {f.name: hits for f in sorted(TESTS.glob("*.py")) if (hits := stand_ins(f.read_text(encoding="utf-8")))}
    assert found == {}, f"build the record (tests/result_files.py) instead: {found}"


def test_measured_refuses_a_dict_for_a_record_and_the_helper_builds_typed_ones():
    with pytest.raises(TypeError, match=r"Measured\.result: a Result, got dict"):
        rows.Measured("m", "t", "auto", {"serving": {"base_url": "http://h:8000"}})
    m = result_files.measured("served", backend="endpoint", serving={"base_url": "http://h:8000", "served_model": "x"},
                              hardware="int8-w8a8")
    assert isinstance(m.serving, facts.Serving) and m.serving.base_url == "http://h:8000"
    assert (m.serving.backend, m.hardware) == ("endpoint", "int8-w8a8")
