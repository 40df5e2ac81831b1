"""scripts/gpu_check_offline.sh's dry run on the CPU (the GPU host itself this project has not), and
scripts/gpu_wheels.py's choice of wheels, on made-up metadata."""
import os
import subprocess
import sys

import pytest

from scripts import gpu_check_reference as ref
from scripts import gpu_wheels
from tests import tiny_model


def test_the_folder_holds_the_reference_closure_less_what_the_host_has():
    graph = {"llmcompressor": {("datasets", frozenset())}, "datasets": {("pyarrow", frozenset()), ("fsspec", frozenset({"http"}))},
             "fsspec": set(), "pyarrow": set(), "torch": {("fsspec", frozenset())}, "aiohttp": set()}

    def requires(name, extras):
        return graph[name] | ({("aiohttp", frozenset())} if name == "fsspec" and "http" in extras else set())

    installed = set(graph)
    ref_closure = gpu_wheels.closure(("llmcompressor",), requires, installed)
    host = gpu_wheels.closure(("torch",), requires, installed)
    assert ref_closure == {"llmcompressor", "datasets", "pyarrow", "fsspec", "aiohttp"}    # the extra followed
    assert gpu_wheels.needed(ref_closure, host, set()) == ["aiohttp", "datasets", "llmcompressor", "pyarrow"]
    assert gpu_wheels.needed(ref_closure, host, {"pyarrow"}) == ["aiohttp", "datasets", "llmcompressor"]


def test_a_folder_over_the_limit_is_refused_naming_its_largest_wheels(tmp_path):
    mib = 2**20
    assert gpu_wheels.over_limit({"a.whl": 30 * mib, "b.whl": 34 * mib}, 64) is None
    why = gpu_wheels.over_limit({"a.whl": 30 * mib, "pyarrow.whl": 52 * mib, "c.whl": 1}, 64)
    assert why.startswith("gpu_wheels: 82.0 MiB is over --limit-mib 64; largest: pyarrow.whl 52.0 MiB, a.whl 30.0")
    (tmp_path / "host.txt").write_text("# pip list --format=freeze\nPyArrow==26.0.1\nscikit_learn @ file:///x\n")
    assert gpu_wheels.have_file(tmp_path / "host.txt") == {"pyarrow", "scikit-learn"}


def test_the_check_runs_every_tier_the_host_can_and_says_why_not_the_others(params_dict):
    p, skipped = ref.plan_params(params_dict, "local:m", have=lambda module: False)
    assert set(skipped) == {"int8-bnb", "nf4-bnb"} and "bitsandbytes" in skipped["int8-bnb"]
    assert "int8-bnb" not in p["tiers"] and {"fp16", "int8", "int4-awq", "int4-gptq", "fp8"} <= set(p["tiers"])
    assert p["serving"]["backend"] == "reference" and p["models"] == {ref.MODEL: {"source": "local:m", "dtype": "bfloat16"}}
    assert not any("retrieval" in str(t.get("config")) for t in p["eval"]["tasks"].values())
    with_bnb, _ = ref.plan_params(params_dict, "local:m", have=lambda module: True)
    assert "nf4-bnb" in with_bnb["tiers"]
    names = [" ".join(c[2:]) for c in ref.commands(p)]
    assert names.index("pipeline.stages.prepare gpu-check") < names.index("pipeline.stages.quantize gpu-check int8")
    assert names[-1] == f"pipeline.stages.evaluate gpu-check {list(p['tiers'])[-1]} fp8"


@pytest.mark.model
def test_the_offline_check_dry_run_passes_on_the_cpu(tmp_path, root):
    """The script as a host runs it, from an empty wheels folder (this environment has every package),
    on a tiny model: every tier quantized and every variant evaluated, each check PASS."""
    tiny_model.build(tmp_path / "tiny", root)
    (tmp_path / "wheels").mkdir()
    env = {**os.environ, "PYTHON": sys.executable}
    out = subprocess.run(["bash", str(root / "scripts" / "gpu_check_offline.sh"), str(tmp_path / "wheels"),
                          f"local:{tmp_path / 'tiny'}", "--dry-run"], capture_output=True, text=True, env=env,
                         timeout=1200)
    lines = [x for x in out.stdout.splitlines() if x.split(" ")[0] in ("PASS", "FAIL", "SKIP", "INFO")]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert not [x for x in lines if x.startswith("FAIL")]
    assert sum(x.startswith("PASS evaluate ") for x in lines) >= 10 and "PASS quantize int4-awq" in out.stdout
