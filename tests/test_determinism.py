"""Two runs give the same quality numbers: quantization and evaluation are deterministic on the
reference backend (model tier: loads a tiny model several times)."""
import hashlib
import json
import shutil
import sys

import pytest
import yaml

from pipeline import paths
from pipeline.stages import baseline, check, evaluate, fidelity_base, noise, prepare, quantize
from tests import tiny_model
from tests.conftest import short_tasks

pytestmark = pytest.mark.model


def run(main, *args):
    sys.argv = ["stage", *args]
    main()


def digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.safetensors"))}


def test_quantize_and_evaluate_twice_identical(tmp_path, monkeypatch, root):
    for f in ("eval_sets", "recipes", "calibration"):
        shutil.copytree(root / f, tmp_path / f)
    tiny_model.build(tmp_path / "tiny-model", root)
    p = yaml.safe_load((root / "params.yaml").read_text())
    p["models"] = {"tiny": {"source": "local:tiny-model", "dtype": "float16"}}
    p["tiers"] = {"fp16": p["tiers"]["fp16"], "int4-gptq": p["tiers"]["int4-gptq"]}
    p["calibration"].update(num_samples=4, max_seq_len=64)
    p["eval"]["tasks"] = short_tasks(p["eval"]["tasks"])
    for task in p["eval"]["tasks"].values():
        task["limit"] = 3
    p["eval"]["throughput"] = {"batch_size": 1, "new_tokens": 2, "repeats": 1}
    p["eval"]["fidelity"].update(limit=2, max_tokens=24)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    run(check.main)                         # its copies of the recipes are what quantize reads
    run(prepare.main, "tiny")
    run(quantize.main, "tiny", "fp16")
    run(fidelity_base.main, "tiny")
    run(baseline.main, "tiny")
    run(noise.main, "tiny")                 # each look folds in the engine's noise floor, as decide does
    results = []
    for _ in range(2):
        shutil.rmtree(paths.SAMPLE_CACHE, ignore_errors=True)     # computed again, not read back
        run(quantize.main, "tiny", "int4-gptq")
        run(evaluate.main, "tiny", "int4-gptq", "fp8")
        out = paths.eval_dir("tiny", "int4-gptq", "fp8")
        res = json.loads((out / "result.json").read_text())
        assert res["fidelity"]["status"] == "ok" and res["sample_cache"]["cached"] == 0
        res["metrics"]["looks"] = res["looks"]              # the same looks, settled alike
        samples = {f.name: f.read_text() for f in sorted((out / "samples").glob("*.jsonl"))}
        samples["fidelity"] = (out / paths.FIDELITY_ROWS).read_text()
        results.append((digest(paths.tier_dir("tiny", "int4-gptq")), res["metrics"], samples))
    assert results[0][0] and results[0] == results[1]
