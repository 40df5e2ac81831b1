"""pipeline/quant/sensitivity.py on a tiny random Llama: RTN rounds onto its grid, the proxy KL is 0
for the unrounded model and restores the weights it rounds, and the repair plan is deterministic and
promotes whole fused groups."""
from types import SimpleNamespace

import pytest
import torch

from pipeline.quant import sensitivity
from pipeline.schema import Repair, Tier

pytestmark = pytest.mark.model


class CharTokenizer:
    def __call__(self, text, return_tensors, truncation, max_length):
        ids = [ord(c) % 128 for c in text][:max_length]
        return SimpleNamespace(input_ids=torch.tensor([ids]))


@pytest.fixture(scope="module")
def model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(cfg).eval()


TEXTS = ["the quick brown fox jumps over the lazy dog", "pack my box with five dozen liquor jugs",
         "sphinx of black quartz, judge my vow"]


@pytest.mark.parametrize("symmetric", [True, False])
def test_rtn_keeps_values_on_its_grid_and_errs_by_at_most_half_a_step(symmetric):
    w = torch.randn(8, 32, generator=torch.Generator().manual_seed(0))
    q = sensitivity.rtn(w, 4, 16, symmetric)
    groups = w.reshape(8, 2, 16)
    span = groups.abs().amax(-1) / 7 if symmetric else (groups.amax(-1) - groups.amin(-1)) / 15   # one step
    err = (q - w).reshape(8, 2, 16).abs().amax(-1)
    assert torch.all(err <= span / 2 + 1e-6)
    assert torch.allclose(sensitivity.rtn(q, 4, 16, symmetric), q, atol=1e-6)      # rounding is idempotent
    assert len(torch.unique(q.reshape(8, 2, 16)[0, 0])) <= 16


def test_ignore_follows_llm_compressor_names():
    assert sensitivity.ignored("lm_head", ["lm_head"])
    assert sensitivity.ignored("model.layers.0.mlp.gate_proj", ["re:.*gate_proj$"])
    assert not sensitivity.ignored("model.layers.0.mlp.up_proj", ["lm_head", "re:.*gate_proj$"])


def test_proxy_kl_is_zero_unrounded_grows_with_fewer_bits_and_restores_the_weights(model):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    proxy = sensitivity.Proxy(model, CharTokenizer(), TEXTS, 32, ["lm_head"])
    assert "lm_head" not in proxy.linears and len(proxy.linears) == 14
    assert proxy.kl({}) == pytest.approx(0.0, abs=1e-6)
    everything = lambda bits: {n: (bits, 16, True) for n in proxy.linears}   # noqa: E731
    assert proxy.kl(everything(3)) > proxy.kl(everything(4)) > proxy.kl(everything(8)) > 0
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_plan_is_deterministic_and_promotes_whole_fused_groups(model):
    tier = Tier(method="gptq", recipe="recipes/gptq_w4a16.yaml", weight_bits=4, group_size=16,
                hardware="int4-w4a16", repair=Repair(max_kl=1e-5, max_candidates=6, texts=3, max_len=32))
    first = sensitivity.plan(model, CharTokenizer(), TEXTS, tier, 16)
    again = sensitivity.plan(model, CharTokenizer(), TEXTS, tier, 16)
    first.pop("seconds"), again.pop("seconds")
    assert first == again
    assert first["groups"] == 8 and len(first["proxy"]["tried"]) <= 6
    mods = set(first["promoted_modules"])
    for layer in (0, 1):
        for fused in (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")):
            parent = f"model.layers.{layer}.{'self_attn' if 'q_proj' in fused else 'mlp'}"
            assert len({f"{parent}.{leaf}" in mods for leaf in fused}) == 1
    assert 4 <= first["effective_bits"] <= 8
    if first["met_bound"]:
        assert first["proxy"]["tried"][str(len(first["promoted"]))] <= 1e-5


def test_the_fisher_scores_rank_linears_as_their_own_kl_does_and_leave_the_model_as_it_was(model):
    from scipy.stats import spearmanr

    proxy = sensitivity.Proxy(model, CharTokenizer(), TEXTS, 32, ["lm_head"])
    grads = [p.requires_grad for p in model.parameters()]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    low = {n: (4, 16, True) for n in proxy.linears}
    scores = proxy.scores(low)
    alone = {n: proxy.kl({n: low[n]}) for n in proxy.linears}
    assert all(v > 0 for v in scores.values())
    assert spearmanr([scores[n] for n in alone], list(alone.values())).statistic > 0.6
    assert sum(proxy.scores({n: (8, None, True) for n in proxy.linears}).values()) < sum(scores.values())
    assert [p.requires_grad for p in model.parameters()] == grads and all(p.grad is None for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
