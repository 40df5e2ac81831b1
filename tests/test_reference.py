"""The reference backend's decisions that need no model: what it loads and where it computes (with the
accelerator and the CPU mocked). Model tier: pipeline/engines/reference/backend.py imports torch."""
import pytest

from pipeline.engines.reference import backend as reference
from pipeline.engines.reference.backend import weight_quantization
from pipeline.domain.hardware import compute, machine
from pipeline.schema import Eval, Model, Reference

pytestmark = pytest.mark.model

KV = {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": True}


def test_the_reference_applies_kv_scales_itself_so_the_kv_scheme_is_dropped_from_the_load():
    groups = {"group_0": {"targets": ["Linear"]}}
    quantized = {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": groups,
                                         "kv_cache_scheme": KV}}
    assert weight_quantization(quantized) == {"quant_method": "compressed-tensors", "config_groups": groups}
    kv_only = {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {}, "kv_cache_scheme": KV}}
    assert weight_quantization(kv_only) is None                  # the baseline with scales: plain weights
    plain = {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": groups}}
    assert weight_quantization(plain) is plain["quantization_config"]
    assert weight_quantization({}) is None


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


def test_serving_weight_bytes_counts_float_weights_at_the_serving_dtype_and_packed_ones_as_stored():
    import torch

    class Packed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.dense = torch.nn.Linear(4, 3)                      # 12 + 3 float32 parameters
            self.packed = torch.nn.Parameter(torch.zeros(5, dtype=torch.int32), requires_grad=False)   # 20 B
            self.zeros = torch.nn.Parameter(torch.zeros(7, dtype=torch.uint8), requires_grad=False)    # 7 B
            self.tied = self.dense.weight                           # shared: counted once
            self.register_buffer("scale", torch.ones(100))          # a buffer, not a weight

    model = Packed()
    assert reference.serving_weight_bytes(model, "bfloat16") == 15 * 2 + 20 + 7
    assert reference.serving_weight_bytes(model, "float16") == 15 * 2 + 20 + 7
    assert reference.serving_weight_bytes(model, "float32") == 15 * 4 + 20 + 7
