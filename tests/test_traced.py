"""pipeline/schema/traced.py: the params.yaml keys a stage reads, recorded while it runs."""
from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from pipeline import schema
from pipeline.schema import traced


@pytest.fixture
def recording(params_dict):
    params = schema.parse(params_dict)
    read = traced.start(schema.Params)
    yield params, read
    traced.READ = None


def test_nothing_is_recorded_until_started(params_dict):
    traced.READ = None
    params = schema.parse(params_dict)
    assert params.decision.baseline.tier == "fp16" and traced.READ is None


def test_a_leaf_a_key_asked_for_and_a_walked_mapping_are_reads(recording):
    params, read = recording
    assert params.decision.baseline.tier == "fp16"
    assert "int8" in params.tiers and params.tiers["int8"].method
    assert params.decision.min_baseline["acc"] == 60.0
    assert params.eval.tasks.get("nope") is None
    list(params.kv_modes.items())
    assert read == {"decision.baseline.tier", "tiers.int8", "tiers.int8.method", "decision.min_baseline.acc",
                    "eval.tasks.nope", "kv_modes"}


def test_a_copy_keeps_its_label_and_an_unlabelled_one_is_named(recording):
    params, read = recording
    copy = schema.replaced(params.serving.vllm, num_concurrent=3)
    assert read == set()                        # copying and the copy's own checks read nothing
    assert copy.num_concurrent == 3 and "serving.vllm.num_concurrent" in read
    plain = dataclasses.replace(params.serving.vllm.budget, max_wall_s=None)
    read.clear()
    assert plain.max_wall_s is None and read == {"?VllmBudget.max_wall_s"}


def test_mappings_dump_as_yaml_and_json_unchanged(recording):
    params, _ = recording
    assert yaml.safe_load(yaml.safe_dump(params.decision.min_baseline)) == dict(params.decision.min_baseline)
    assert json.loads(json.dumps(dataclasses.asdict(params.eval.fidelity))) == dataclasses.asdict(params.eval.fidelity)
