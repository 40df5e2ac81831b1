"""Reading how an engine stores fp8 K/V (pipeline/engines/vllm/kv_write.py, kvcache.classify_write); the
real engine is read in tests/test_vllm_integration.py."""
import sys

import pytest
import torch

from pipeline.engines.reference import kvcache
from pipeline.engines.vllm import kv_write

pytestmark = pytest.mark.model


def test_classify_tells_nearest_from_truncation_and_from_neither():
    v = torch.randn(4096) * 0.5
    assert kvcache.classify_write(v, kvcache.fp8_round(v))["rounding"] == "nearest"
    t = kvcache.classify_write(v, kvcache.fp8_truncate(v))
    assert t["rounding"] == "truncation" and t["as_truncation"] == 1.0 and 0.3 < t["as_nearest"] < 0.8
    assert t["values"] == 4096
    # one value in ten one e4m3 step further from zero than truncation: neither
    off = kvcache.fp8_truncate(v).clone()
    off[::10] = kvcache.fp8_truncate(v[::10] * 1.2)
    assert kvcache.classify_write(v, off)["rounding"] == "neither"


def test_an_engine_that_cannot_run_the_kernel_is_not_read_and_says_why(tmp_path):
    found = kv_write.read_engine(tmp_path / "no-python")
    assert found["rounding"] is None and "could not be run" in found["why"]
    # this interpreter has no vllm: its import error is the reason
    found = kv_write.read_engine(sys.executable)
    assert found["rounding"] is None and "vllm" in found["why"]
