"""The shipped params.yaml parses; adding a tier is data. Each rejected edit (unknown key, wrong type,
bad tolerance, ...) is a case of tests/test_bad_inputs.py, which runs the check stage itself."""
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from pipeline import config, schema


def test_shipped_params_parse(params_dict, root):
    p = schema.parse(params_dict)
    config.check(p, root)
    assert list(p.models) == ["smollm2-135m"]
    assert len(p.variants()) == len(p.tiers) * len(p.kv_modes) == 14
    assert p.tiers["int4-awq"].group_size == "auto"


def test_a_tier_differing_only_in_group_size_gets_its_own_stages(tmp_path, root):
    """Adding a tier is data: dvc.yaml's matrix gives it quantize/evaluate stages, no code change."""
    for f in ("dvc.yaml", "params.yaml"):
        shutil.copy(root / f, tmp_path / f)
    p = yaml.safe_load((tmp_path / "params.yaml").read_text())
    p["tiers"]["int4-gptq-g32"] = dict(p["tiers"]["int4-gptq"], group_size=32)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    for f in ("eval_sets", "recipes", "calibration"):
        shutil.copytree(root / f, tmp_path / f)
    assert config.load(tmp_path / "params.yaml").tiers["int4-gptq-g32"].group_size == 32
    dvc = str(Path(sys.executable).parent / "dvc")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([dvc, "init", "-q"], cwd=tmp_path, check=True)
    out = subprocess.run([dvc, "stage", "list", "--name-only"], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout.split()
    assert "quantize@smollm2-135m-int4-gptq-g32" in out
    assert {"evaluate@smollm2-135m-int4-gptq-g32-auto", "evaluate@smollm2-135m-int4-gptq-g32-fp8"} <= set(out)
    assert "quantize@smollm2-135m-int4-gptq" in out
