import pytest
import torch

from pipeline.backends import kvcache


def test_fp8_round_is_idempotent_and_close():
    x = torch.randn(4, 3, 17, 64) * 3
    y = kvcache.fp8_round(x)
    assert torch.equal(kvcache.fp8_round(y), y)
    normal = x.abs() > 2**-6                       # e4m3: 3 mantissa bits -> rel. error <= 2^-4
    rel = ((y - x).abs() / x.abs())[normal]
    assert rel.max() <= 2**-4 + 1e-6
    assert not torch.equal(x, y)


def test_fp8_round_saturates_and_uses_scale():
    x = torch.tensor([1000.0, -1000.0, 0.0])
    assert kvcache.fp8_round(x).tolist() == [448.0, -448.0, 0.0]
    assert kvcache.fp8_round(x, scale=4.0).tolist() == [1024.0, -1024.0, 0.0]   # 250 -> 256 in e4m3


def test_fp8_round_keeps_dtype():
    x = torch.randn(8, dtype=torch.bfloat16)
    assert kvcache.fp8_round(x).dtype == torch.bfloat16


@pytest.fixture
def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return cfg, LlamaForCausalLM(cfg).eval()


def test_fp8_attention_changes_logits_slightly(tiny_llama):
    from transformers import LlamaForCausalLM

    cfg, ref = tiny_llama
    cfg_fp8 = cfg.__class__(**cfg.to_dict())
    cfg_fp8._attn_implementation = kvcache.register()
    sim = LlamaForCausalLM(cfg_fp8).eval()
    sim.load_state_dict(ref.state_dict())
    assert kvcache.set_scales(sim, 1.0, 1.0) == 2
    ids = torch.randint(0, 128, (2, 12))
    with torch.no_grad():
        a, b = ref(ids).logits, sim(ids).logits
    assert not torch.equal(a, b)
    assert torch.allclose(a, b, atol=0.05)
    # generation through the cache uses the same rounding as the prompt
    with torch.no_grad():
        out = sim.generate(ids[:1], max_new_tokens=4, do_sample=False)
    assert out.shape == (1, 16)
