"""Stage kvscales without a model: the per-KV-mode entries it writes, and the records of tiers that
cannot carry calibrated scales. The calibrated checkpoint itself: tests/test_pipeline_e2e.py."""
import json
import shutil
import sys

import pytest

from pipeline import io, paths
from pipeline.schema.yaml_io import safe_dump, safe_load
from pipeline.stages import kvscales

MODEL = "smollm2-135m"


@pytest.fixture
def project(tmp_path, monkeypatch, root):
    shutil.copy(root / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(monkeypatch, tier):
    monkeypatch.setattr(sys, "argv", ["kvscales", MODEL, tier])
    kvscales.main()


def entries(tier):
    found = {}
    for kv in ("auto", "fp8", "fp8-cal"):
        ckpt, record = paths.kvscales_dir(MODEL, tier) / kv, paths.kvscales_records(MODEL, tier) / f"{kv}.json"
        if record.exists():
            found[kv] = (ckpt.read_bytes() if ckpt.is_file() else "folder", record.read_bytes())
    return found


def add_calibrated_mode(project):
    p = safe_load((project / "params.yaml").read_text())
    p["kv_modes"]["fp8-cal"] = {"cache_dtype": "fp8_e4m3", "scale": "calibrated"}
    (project / "params.yaml").write_text(safe_dump(p, sort_keys=False))


def test_without_a_calibrated_mode_every_entry_is_a_constant_marker(project, monkeypatch):
    run(monkeypatch, "int4-gptq")
    first = entries("int4-gptq")
    assert set(first) == {"auto", "fp8"}
    assert first["auto"] == (kvscales.NOT_CALIBRATED.encode(), first["fp8"][1])
    assert json.loads(first["auto"][1]) == {"calibrated": False}
    run(monkeypatch, "int4-gptq")
    assert entries("int4-gptq") == first             # same bytes: nothing after it re-runs


def test_tiers_that_cannot_carry_scales_say_why_and_the_other_modes_are_untouched(project, monkeypatch):
    run(monkeypatch, "nf4-bnb")
    run(monkeypatch, "int8")
    before = entries("nf4-bnb")
    add_calibrated_mode(project)
    io.atomic_write_json(paths.quantize_record(MODEL, "nf4-bnb"), {"status": "ok"})
    io.atomic_write_json(paths.quantize_record(MODEL, "int8"), {"status": "failed", "reason": "out of memory"})
    run(monkeypatch, "nf4-bnb")
    run(monkeypatch, "int8")
    after = entries("nf4-bnb")
    assert {k: after[k] for k in before} == before   # auto and fp8: byte-identical
    bnb = json.loads(after["fp8-cal"][1])
    assert bnb["status"] == "unsupported" and "bitsandbytes quantizes at load time" in bnb["reason"]
    failed = json.loads(entries("int8")["fp8-cal"][1])
    assert failed["status"] == "failed" and failed["reason"] == "quantize: out of memory"
