"""scripts/gpu_check_results.py, the checks of scripts/gpu_check.sh, on hand-made decision records
(the script itself needs a GPU host, which this project has not)."""
import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check_results.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check_results", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def served(tier):
    return {"model": "gpu-check", "tier": tier, "kv": "auto", "status": "ok", "backend": "vllm",
            "compute_dtype": "bfloat16", "serving": {"num_concurrent": 64},
            "load": {"bench": {"1": {}, "8": {}, "64": {}}, "slo": {"max_concurrency_meeting_slo": 32}},
            "fidelity": {"status": "ok"}}


def unsupported(tier):
    return {"model": "gpu-check", "tier": tier, "kv": "fp8", "status": "unsupported", "backend": "vllm",
            "compute_dtype": None, "serving": None, "load": None, "fidelity": None}


GOOD = {"rows": [served("fp16"), served("int8"), served("int4-gptq"), unsupported("int4-gptq")],
        "per_gpu": {"gpu-check": {"A100-80G": {"command": "vllm serve ..."}, "L4-24G": None}}}
QUANT = {"gpu-check-int8": {"recipe": {"quant_stage": {}}, "compute": {"device": "cuda"}}}


def test_a_complete_gpu_run_passes_every_check(gpu_check):
    assert [name for name, ok in gpu_check.checks(GOOD, QUANT, 600) if not ok] == []


def test_a_run_where_every_row_is_unsupported_fails_the_first_check_and_every_served_row_check(gpu_check):
    d = {"rows": [unsupported(t) for t in ("fp16", "int8", "int4-gptq")], "per_gpu": {"gpu-check": {}}}
    results = dict(gpu_check.checks(d, {}, 600))
    assert results["every variant has a row and at least one was served"] is False
    assert [name for name, ok in results.items() if ok] == ["finished in 10 min 0 s (expected about 10)"]


def test_a_failed_row_fails_the_first_check(gpu_check):
    d = {**GOOD, "rows": [*GOOD["rows"], {**unsupported("fp8"), "status": "failed"}]}
    assert dict(gpu_check.checks(d, QUANT, 600))["every variant has a row and at least one was served"] is False
