"""Keys that moved or were removed are rejected with one line saying why; models.<name>.dtype auto is
the model's own dtype. Fast: schema and pure functions, no model."""
import copy

import pytest

from pipeline import io, paths, schema
from pipeline.domain.hardware import compute
from pipeline.domain.model import sources
from pipeline.domain.result import serving_record


def with_(params_dict, *path_and_value):
    p = copy.deepcopy(params_dict)
    *keys, last, value = path_and_value
    node = p
    for k in keys:
        node = node.setdefault(k, {})
    node[last] = value
    return p


def test_tier_activations_is_rejected_as_implied_by_the_recipe(params_dict):
    p = copy.deepcopy(params_dict)
    p["tiers"]["int8"]["activations"] = "int8-dynamic"
    with pytest.raises(schema.ConfigError) as e:
        schema.parse(p)
    assert str(e.value).startswith("tiers.int8.activations: removed:") and "recipe" in str(e.value)
    assert "\n" not in str(e.value)
    assert not hasattr(schema.parse(params_dict).tiers["int8"], "activations")


def test_min_speed_vs_baseline_moved_to_report(params_dict):
    with pytest.raises(schema.ConfigError, match=r"^serving\.vllm\.budget\.min_speed_vs_baseline: moved to "
                                                 r"report\.min_speed_vs_baseline"):
        schema.parse(with_(params_dict, "serving", "vllm", "budget", "min_speed_vs_baseline", 0.1))
    assert schema.parse(params_dict).report.min_speed_vs_baseline == 0.1
    assert schema.parse(with_(params_dict, "report", "min_speed_vs_baseline", None)).report.min_speed_vs_baseline is None
    assert schema.parse(with_(params_dict, "report", "min_speed_vs_baseline", 0.5)).report.min_speed_vs_baseline == 0.5
    with pytest.raises(schema.ConfigError, match=r"^report\.min_speed_vs_baseline: must be in \[0, 1\]"):
        schema.parse(with_(params_dict, "report", "min_speed_vs_baseline", 2))


@pytest.mark.parametrize("key, value", [("length_buckets", [0, 400]), ("regressions_per_task", 3),
                                        ("min_speed_vs_baseline", 0.2)])
def test_report_only_knobs_moved_out_of_decision(params_dict, key, value):
    """decision: is what evaluate's looks read; a report-only knob there is named with where it went."""
    with pytest.raises(schema.ConfigError, match=rf"^decision\.{key}: moved to report\.{key}"):
        schema.parse(with_(params_dict, "decision", key, value))
    assert getattr(schema.parse(with_(params_dict, "report", key, value)).report, key) == value


def test_kv_kl_tolerance_moved_to_decision_as_it_changes_a_pick(params_dict):
    """It bars quantized KV modes from every pick: a knob that can change a pick lives under decision:."""
    with pytest.raises(schema.ConfigError) as e:
        schema.parse(with_(params_dict, "report", "kv_kl_tolerance", 0.02))
    assert str(e.value).startswith("report.kv_kl_tolerance: moved to decision.kv_kl_tolerance") and "\n" not in str(e.value)
    assert schema.parse(params_dict).decision.kv_kl_tolerance == 0.02
    assert schema.parse(with_(params_dict, "decision", "kv_kl_tolerance", 0.05)).decision.kv_kl_tolerance == 0.05
    for bad in (0, -0.01):
        with pytest.raises(schema.ConfigError, match=r"^decision\.kv_kl_tolerance: must be > 0 nats/token"):
            schema.parse(with_(params_dict, "decision", "kv_kl_tolerance", bad))
    assert not hasattr(schema.parse(params_dict).report, "kv_kl_tolerance")


def test_the_report_section_is_required(params_dict):
    raw = {k: v for k, v in params_dict.items() if k != "report"}
    with pytest.raises(schema.ConfigError, match=r"^report: required key is missing"):
        schema.parse(raw)


def test_model_dtype_defaults_to_auto_and_the_shipped_params_keep_float16(params_dict):
    assert schema.Model(source="x").dtype == "auto"
    assert schema.parse(params_dict).models["smollm2-135m"].dtype == "float16"


@pytest.mark.parametrize("requested, config, expected", [
    ("auto", {"torch_dtype": "bfloat16"}, "bfloat16"),
    ("auto", {"dtype": "float16"}, "float16"),            # newer transformers write `dtype`
    ("auto", {"torch_dtype": "float32"}, "float16"),      # float32 checkpoints serve at half precision
    ("auto", {}, "float16"),
    ("bfloat16", {"torch_dtype": "float16"}, "bfloat16"),  # explicit wins
])
def test_model_dtype_auto_is_the_checkpoints_own(requested, config, expected):
    assert compute.model_dtype(requested, config) == expected


def test_storage_dtype_reads_what_quantize_resolved(params_dict, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = schema.parse(with_(params_dict, "models", "smollm2-135m", "dtype", "auto"))
    assert sources.storage_dtype(p, "smollm2-135m") == "float16"          # nothing quantized yet
    io.atomic_write_json(paths.quantize_record("smollm2-135m", "fp16"), {"status": "failed"})
    io.atomic_write_json(paths.quantize_record("smollm2-135m", "int8"),
                         {"status": "ok", "storage_dtype": "bfloat16"})
    assert sources.storage_dtype(p, "smollm2-135m") == "bfloat16"
    assert sources.storage_dtype(schema.parse(params_dict), "smollm2-135m") == "float16"   # explicit


def test_a_variant_resolves_auto_from_the_record_and_refuses_an_unresolved_one(params_dict, tmp_path, monkeypatch):
    from pipeline.engines.base import Variant

    monkeypatch.chdir(tmp_path)     # prepare's record: the chat template (tests/test_chat_template.py)
    io.atomic_write_json(paths.source_dir("smollm2-135m") / paths.SOURCE_SPEC,
                         {"source": "embedded:smollm2-135m-instruct", "apply_chat_template": True, "add_bos_token": False})
    p = schema.parse(with_(params_dict, "models", "smollm2-135m", "dtype", "auto"))
    record = {"status": "ok", "serve_path": str(tmp_path), "storage_dtype": "bfloat16"}
    v = Variant.of(p, "smollm2-135m", "fp16", "auto", tmp_path, serving_record.parse(record, "record"))
    assert v.model_cfg.dtype == "bfloat16"
    with pytest.raises(ValueError, match="still auto"):
        Variant("m", "t", "k", tmp_path, p.models["smollm2-135m"], p.tiers["fp16"], p.kv_modes["auto"], tmp_path)
