"""The one typed parser, writer and type-name printer (pipeline/schema/typed.py): params.yaml and
result.json's records are read by the same code, so a wrong type, an unknown key and a missing one are
named alike in both, and every record evaluate writes reads back as itself.

    .venv/bin/python -m pytest -n 0 -q tests/test_typed.py
"""
from __future__ import annotations

import json
import typing

import pytest

from pipeline import schema
from pipeline.domain.result import contract, records
from pipeline.domain.result.records import ArithmeticCheck, MetricCheck, Settled, Strata, TaskLooks
from pipeline.schema import typed
from pipeline.schema.yaml_io import safe_load
from tests import result_files

PARAMS = "params.yaml"


def params_error(root, mutate) -> str:
    raw = safe_load((root / PARAMS).read_text())
    mutate(raw)
    with pytest.raises(schema.ConfigError) as e:
        schema.parse(raw)
    return str(e.value)


def result_error(**fields) -> str:
    with pytest.raises(contract.ResultError) as e:
        contract.parse({**result_files.variant(), **fields}, "r.json")
    return str(e.value)


def test_params_and_a_result_name_a_wrong_type_an_unknown_and_a_missing_key_alike(root):
    assert params_error(root, lambda p: p["eval"].update(batch_size="eight")) == (
        "eval.batch_size: expected an integer, got 'eight'")
    assert "result.looks.c.n: expected an integer, got 'eight'" in result_error(
        looks={"c": {"cap": 8, "looks": 1, "n": "eight"}})
    assert params_error(root, lambda p: p["eval"].update(batch_sise=8)) == (
        "eval.batch_sise: unknown key (did you mean 'batch_size'?)")
    assert "result.looks.c.sises: unknown key (did you mean 'sizes'?)" in result_error(
        looks={"c": {"cap": 8, "looks": 1, "n": 8, "sises": [8]}})
    assert params_error(root, lambda p: p.pop("report")) == "report: required key is missing"
    assert "result.looks.c.cap: required key is missing" in result_error(looks={"c": {"looks": 1, "n": 8}})


def test_one_printer_names_a_type_for_an_error_and_for_the_reference_page():
    tp = dict[str, float | None]
    assert typed.type_name(tp) == "mapping of float | null"
    assert typed.type_name(tp, doc=True) == "mapping of `<name>` to number or null"
    scale = typing.get_type_hints(schema.KvMode)["scale"]
    assert (typed.type_name(scale), typed.type_name(scale, doc=True)) == ("float | 'calibrated'", 'number or "calibrated"')


def test_a_record_written_by_plain_reads_back_as_itself_without_its_defaults():
    at = Settled("pass", 2, 80, 1.5, -0.5, 3.5, 0.99)
    looks = TaskLooks(cap=160, looks=2, n=80, sizes=[40, 80, 160], of=3, confidence=0.99, settled={"acc": at},
                      strata=Strata(0.5, 0.25, [100, 60], [[10, 30]], [40]), first={"acc": at}, second={},
                      order=list(range(80)))
    written = records.plain(looks)
    assert "unstable" not in written and "budget" not in written and written["second"] == {}
    assert records.parse(TaskLooks, written, "looks.c") == looks
    check = ArithmeticCheck("checked", arithmetic="float32", metrics={"c/acc": MetricCheck("pass", "pass", "stable")})
    assert records.parse(ArithmeticCheck, records.plain(check), "arithmetic_check") == check
    whole = records.plain(TaskLooks(cap=50, looks=1, n=50, whole=True))
    assert whole == {"cap": 50, "looks": 1, "n": 50, "whole": True}


def test_a_malformed_looks_record_is_refused_naming_the_file_and_the_key(tmp_path):
    data = result_files.variant()        # evaluate's writer refuses it (stamp): a file written by hand
    data["looks"] = {"c": {"cap": 8, "looks": 1, "n": 8, "settled": {"acc": {
        "verdict": "pass", "n": 8, "delta": 0.0, "lo": -1.0, "hi": 1.0, "confidence": 0.95}}}}
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data))
    with pytest.raises(contract.ResultError) as e:
        contract.load(path)
    assert str(e.value).startswith(f"{path}: result.looks.c.settled.acc.look: required key is missing")
