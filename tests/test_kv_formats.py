"""KV formats: the table's bytes (pipeline/domain/hardware/kv_formats.py) and the reference engine's round trips
(pipeline/engines/reference/kv_formats.py) on small cases computed by hand. vLLM's own kernels: test_kv_formats_vllm.py."""
import pytest
import torch

from pipeline.domain.hardware import kv_formats as table
from pipeline.domain.hardware import vllm_installed
from pipeline.engines.reference import kv_formats as F
from pipeline.engines.reference import kvcache

pytestmark = pytest.mark.model
SMOL = {"hidden_size": 576, "num_attention_heads": 9, "head_dim": 64, "num_hidden_layers": 30, "num_key_value_heads": 3}


@pytest.mark.parametrize("name, per_token", [
    ("auto", 23040), ("fp8_e4m3", 11520), ("fp8_e5m2", 11520), ("int8_per_token_head", 30 * 3 * 2 * (64 + 4)),
    ("int4_per_token_head", 30 * 3 * 2 * (32 + 4)), ("nvfp4", 30 * 3 * 2 * (32 + 4)),
    # TurboQuant: 26 layers at the preset's slot, vLLM's 4 boundary layers (0, 1, 28, 29) at bfloat16's 256 B
    ("turboquant_k8v4", 26 * 3 * (64 + 36) + 4 * 3 * 256), ("turboquant_4bit_nc", 26 * 3 * (34 + 36) + 4 * 3 * 256),
    ("turboquant_k3v4_nc", 26 * 3 * (26 + 36) + 4 * 3 * 256), ("turboquant_3bit_nc", 26 * 3 * (26 + 28) + 4 * 3 * 256)])
def test_bytes_per_token_count_scales_and_metadata(name, per_token):
    assert table.bytes_per_token(SMOL, name, "bfloat16") == per_token


def test_skipped_layers_cost_the_models_dtype():
    assert table.bytes_per_token(SMOL, "fp8_e4m3", "bfloat16", (0, 29)) == 28 * 3 * 128 + 2 * 3 * 256
    # a skip layer vLLM keeps anyway for TurboQuant is counted once
    assert table.bytes_per_token(SMOL, "turboquant_4bit_nc", "bfloat16", (0, 5)) == 25 * 3 * 70 + 5 * 3 * 256


@pytest.mark.parametrize("config, name, kept", [
    (SMOL, "turboquant_4bit_nc", (0, 1, 28, 29)), (SMOL, "turboquant_k8v4", (0, 1, 28, 29)),
    (SMOL, "nvfp4", ()), (SMOL, "fp8_e4m3", ()),
    ({**SMOL, "num_hidden_layers": 3}, "turboquant_3bit_nc", (0, 2)),         # n = min(2, 3 // 2) = 1
    ({**SMOL, "layer_types": ["full_attention", "linear_attention"] * 15}, "turboquant_4bit_nc", ())])  # hybrid
def test_vllm_keeps_turboquants_boundary_layers(config, name, kept):
    # vllm/engine/arg_utils.py adds TurboQuantConfig.get_boundary_skip_layers(model_config) (n=2) to every
    # TurboQuant preset's skip layers: the simulation and the bill keep them too
    assert table.implied_skip_layers(config, name) == kept


def test_the_reference_engine_keeps_the_boundary_layers_in_the_models_dtype():
    from transformers import LlamaConfig, LlamaForCausalLM
    model = LlamaForCausalLM(LlamaConfig(hidden_size=64, intermediate_size=64, num_hidden_layers=6,
                                         num_attention_heads=4, num_key_value_heads=2, vocab_size=32))
    assert F.install(model, "turboquant_4bit_nc") == 2          # layers 2 and 3 of 6
    assert F.install(model, "turboquant_4bit_nc", (2,)) == 1
    assert F.install(model, "nvfp4") == 6


def test_odd_turboquant_slots_are_padded_to_even():
    # head_dim 40, 3-bit keys: 15 + 2 key bytes, 15 + 4 value bytes = 36; head_dim 24: 9+2 + 9+4 = 24
    assert table.head_bytes("turboquant_3bit_nc", 40, "bfloat16") == 36
    assert table.head_bytes("turboquant_k3v4_nc", 8, "bfloat16") == 3 + 2 + 4 + 4 + 1


def test_int8_per_token_head_by_hand():
    x = torch.tensor([[0.0, 1.27, -0.635, 0.00499]])      # absmax 1.27: scale 0.01
    out = F.int8_per_token_head(x)
    assert torch.allclose(out, torch.tensor([[0.0, 1.27, -0.64, 0.0]]), atol=1e-6)   # -63.5 -> -64 (away)


def test_fp8_per_token_head_scales_the_absmax_to_448():
    x = torch.tensor([[2.0, -1.0, 0.5, 0.3]])
    out = F.fp8_per_token_head(x)
    assert out[0, 0] == 2.0 and out[0, 1] == -1.0 and out[0, 2] == 0.5
    assert torch.equal(F.fp8_per_token_head(torch.zeros(1, 4)), torch.zeros(1, 4))


def test_int4_rotation_is_its_own_inverse_up_to_d():
    x = torch.randn(3, 64)
    assert torch.allclose(F.rht(F.rht(x), inverse=True) / 64, x, atol=1e-5)


def test_int4_per_token_head_keeps_a_constant_vector_and_stays_close():
    torch.manual_seed(0)
    x = torch.randn(5, 64)
    assert ((F.int4_per_token_head(x) - x).norm() / x.norm()) < 0.15


def test_e2m1_rounds_to_nearest_even_and_saturates():
    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, -0.3, 0.2])
    assert F.e2m1_round(x).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, -0.5, 0.0]


def test_nvfp4_by_hand():
    # one block of 16: absmax 6 -> scale 1.0 (exact in e4m3): values round straight to the e2m1 grid
    x = torch.tensor([6.0, 2.9, -1.2, 0.2] + [0.0] * 12)
    assert F.nvfp4(x).tolist()[:4] == [6.0, 3.0, -1.0, 0.0]
    # a block below e4m3's smallest scale (2^-9 x 6) is stored as zeros at k_scale 1
    assert torch.equal(F.nvfp4(torch.full((16,), 1e-3)), torch.zeros(16))


def test_turboquant_values_by_hand():
    x = torch.tensor([0.0, 1.5, 3.0, 0.7])     # min 0, scale 3/15 = 0.2: 1.5 -> 7.5 + 0.5 -> code 8, 0.7 -> 4
    assert torch.allclose(F.tq_values(x, 4), torch.tensor([0.0, 1.6, 3.0, 0.8]), atol=1e-3)


def test_turboquant_keys_keep_the_norm_with_norm_correction():
    torch.manual_seed(0)
    x = torch.randn(6, 64)
    out = F.tq_keys(x, 3, norm_correction=True)
    assert torch.allclose(out.norm(dim=-1), x.norm(dim=-1), rtol=1e-3)


def test_turboquant_prefill_reads_raw_and_decode_reads_the_cache():
    trip = F.round_trip("turboquant_3bit_nc")
    module = torch.nn.Module()
    module.qtier_kv_round_trip = trip
    q, k = torch.randn(1, 1, 4, 64), torch.randn(1, 1, 4, 64)
    seen = []
    orig = kvcache.grouped_sdpa
    kvcache.grouped_sdpa = lambda m, q, k, v, mask, **kw: seen.append(k) or (q, None)
    try:
        F._format_sdpa(module, q, k, k.clone(), None)             # prefill: its own 4 positions raw
        F._format_sdpa(module, q[:, :, :1], k, k.clone(), None)   # decode: all 4 from the cache
    finally:
        kvcache.grouped_sdpa = orig
    assert torch.equal(seen[0], k) and torch.equal(seen[1], trip.keys(k))


def test_an_unsimulated_format_is_refused_with_its_reason():
    with pytest.raises(F.NotSimulated, match="4/6 scale search"):
        F.round_trip("nvfp4_4over6")
    assert not table.FORMATS["nvfp4_4over6"].simulated


def test_every_format_vllm_lists_is_in_the_table_or_refused(tmp_path):
    found = vllm_installed.installed(".venv-vllm/bin/python")
    if found is None:
        pytest.skip("no .venv-vllm: the installed list cannot be read")
    assert set(found.cache_dtypes) <= set(table.FORMATS)
    assert set(table.CPU_SERVED) == set(found.cpu_dtypes)
    assert vllm_installed.installed(tmp_path / "bin" / "python") is None
