"""One tier breaks during quantization: its row says why, the others and decision.md complete,
and decide exits non-zero. Real stages on a tiny model (model tier: ~1 minute)."""
import json
import shutil
import sys

import pytest
import yaml

from pipeline.stages import baseline, check, decide, evaluate, prepare, quantize
from tests import tiny_model
from tests.conftest import short_tasks

pytestmark = pytest.mark.model


def run(main, *args):
    sys.argv = ["stage", *args]
    main()


def test_broken_tier_is_a_row_not_a_crash(tmp_path, monkeypatch, root):
    for f in ("eval_sets", "recipes", "calibration"):
        shutil.copytree(root / f, tmp_path / f)
    tiny_model.build(tmp_path / "tiny-model", root)
    (tmp_path / "recipes" / "broken.yaml").write_text(
        "quant_stage:\n  quant_modifiers:\n    GPTQModifier:\n      no_such_option: 1\n"
        "      config_groups: {group_0: {targets: [Linear], weights: {num_bits: 4, type: int, strategy: group, group_size: 64}}}\n")
    p = yaml.safe_load((root / "params.yaml").read_text())
    p["models"] = {"tiny": {"source": "local:tiny-model", "dtype": "float16"}}
    p["tiers"] = {"fp16": p["tiers"]["fp16"],
                  "broken": {"method": "gptq", "recipe": "recipes/broken.yaml", "weight_bits": 4,
                             "group_size": 64, "hardware": "int4-w4a16"}}
    p["kv_modes"] = {"auto": p["kv_modes"]["auto"]}
    p["calibration"].update(num_samples=2, max_seq_len=32)
    p["eval"]["tasks"] = short_tasks(p["eval"]["tasks"])
    for name, task in p["eval"]["tasks"].items():
        task["limit"] = 2
    p["eval"]["throughput"] = {"batch_size": 1, "new_tokens": 2, "repeats": 1}
    p["eval"].pop("fidelity")       # not this test's subject: no fidelity_base stage to run
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    monkeypatch.chdir(tmp_path)

    run(check.main)                         # its copies of the recipes are what quantize reads
    run(prepare.main, "tiny")
    run(quantize.main, "tiny", "fp16")
    run(quantize.main, "tiny", "broken")                     # must not raise
    record = json.loads((tmp_path / "results/quantize/tiny-broken.json").read_text())
    assert record["status"] == "failed" and "no_such_option" in record["reason"]
    run(baseline.main, "tiny")
    run(evaluate.main, "tiny", "fp16", "auto")
    run(evaluate.main, "tiny", "broken", "auto")
    with pytest.raises(SystemExit) as e:
        decide.main()
    assert e.value.code == 1
    data = json.loads((tmp_path / "results/decision.json").read_text())
    rows = {r["tier"]: r for r in data["rows"]}
    assert rows["fp16"]["status"] == "ok"
    # the reported accuracy is the one its own per-sample log implies (2 samples: 0, 50 or 100)
    logged = (tmp_path / "results/evals/tiny/fp16-auto/samples/classification.jsonl").read_text().splitlines()
    samples = [json.loads(line) for line in logged]
    assert len(samples) == 2
    expected = 100.0 * sum(s["pred"] == s["gold"] for s in samples) / len(samples)
    assert rows["fp16"]["metrics"]["classification/acc"] == pytest.approx(expected)
    assert rows["broken"]["status"] == "failed" and rows["broken"]["reason"].startswith("quantize: ")
    md = (tmp_path / "results/decision.md").read_text()
    assert "failed: quantize: " in md and "| fp16 | auto |" in md
    assert data["versions"]["torch"] and data["versions"]["lm-eval"]
