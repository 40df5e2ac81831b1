import pytest
import torch

from pipeline.engines.reference import kvcache

pytestmark = pytest.mark.model


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


def _e4m3_grid() -> torch.Tensor:
    """Every finite float8_e4m3fn value, ascending, from the dtype's own decoding (not from kvcache)."""
    vals = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).float()
    return torch.unique(vals[torch.isfinite(vals)])


def test_fp8_truncate_is_the_grid_value_toward_zero():
    grid = _e4m3_grid()
    x = torch.cat([torch.randn(20000) * 3, torch.randn(2000) * 2**-7, grid, (grid[1:] + grid[:-1]) / 2,
                   torch.tensor([1000.0, -1000.0])])
    y = kvcache.fp8_truncate(x)
    mag = x.abs().clamp(max=448.0)
    # brute force: the largest grid value not above |x|, with x's sign
    want = grid[torch.searchsorted(grid, mag, right=True) - 1] * x.sign()
    assert torch.equal(y, want)
    assert torch.equal(kvcache.fp8_truncate(y), y)
    # it differs from round-to-nearest exactly where nearest rounds away from zero
    away = kvcache.fp8_round(x).abs() > mag
    assert ((y != kvcache.fp8_round(x)) == away).all() and away.float().mean() > 0.3


def test_fp8_truncate_uses_scale_and_keeps_dtype():
    assert kvcache.fp8_truncate(torch.tensor([250.0]), scale=4.0).tolist() == [240.0]   # 62.5 -> 60 in e4m3
    assert kvcache.fp8_truncate(torch.randn(8, dtype=torch.bfloat16)).dtype == torch.bfloat16


K_SCALE, V_SCALE = 0.5, 2.0


def _hand_rounded_sdpa(module, query, key, value, attention_mask, **kwargs):
    """K/V rounded to e4m3 here, written out independently of kvcache.fp8_round."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def rnd(x, scale):
        return (x / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).to(x.dtype) * scale

    return sdpa_attention_forward(module, query, rnd(key, K_SCALE), rnd(value, V_SCALE), attention_mask, **kwargs)


@pytest.fixture
def models():
    """The same tiny random Llama three times: plain sdpa, qtier's fp8 attention, K/V rounded by hand."""
    from transformers import AttentionInterface, LlamaConfig, LlamaForCausalLM
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register("test_hand_fp8", _hand_rounded_sdpa)
    ALL_MASK_ATTENTION_FUNCTIONS.register("test_hand_fp8", sdpa_mask)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    out = {}
    for name, impl in (("sdpa", "sdpa"), ("fp8", kvcache.register()), ("hand", "test_hand_fp8")):
        c = cfg.__class__(**cfg.to_dict())
        c._attn_implementation = impl
        out[name] = LlamaForCausalLM(c).eval()
        if name != "sdpa":
            out[name].load_state_dict(out["sdpa"].state_dict())
    assert kvcache.set_scales(out["fp8"], K_SCALE, V_SCALE) == 2
    return out


def test_fp8_attention_forward_equals_hand_rounded_kv(models):
    ids = torch.randint(0, 128, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        plain, fp8, hand = (models[n](ids).logits for n in ("sdpa", "fp8", "hand"))
    assert torch.equal(fp8, hand)
    assert not torch.equal(fp8, plain)
    assert torch.allclose(fp8, plain, atol=0.05)


def test_generation_through_the_cache_uses_the_rounding(models):
    ids = torch.randint(0, 128, (1, 8), generator=torch.Generator().manual_seed(2))
    kw = dict(max_new_tokens=4, do_sample=False, output_logits=True, return_dict_in_generate=True,
              pad_token_id=0)
    with torch.no_grad():
        plain, fp8, hand = (models[n].generate(ids, **kw) for n in ("sdpa", "fp8", "hand"))
    assert len(fp8.logits) == 4
    # every decoding step, not only the prompt, reads rounded K/V from the cache
    for step_fp8, step_hand, step_plain in zip(fp8.logits, hand.logits, plain.logits, strict=True):
        assert torch.equal(step_fp8, step_hand)
        assert not torch.equal(step_fp8, step_plain)
    assert torch.equal(fp8.sequences, hand.sequences)


def test_calibrated_scales_go_to_their_own_layer_and_none_may_be_missing(models):
    per_layer = {"model.layers.0.self_attn": (0.5, 2.0), "model.layers.1.self_attn": (0.25, 4.0)}
    assert kvcache.set_layer_scales(models["fp8"], per_layer) == 2
    attn = [m for m in models["fp8"].modules() if hasattr(m, "k_proj")]
    assert [(a.qtier_k_scale, a.qtier_v_scale) for a in attn] == [(0.5, 2.0), (0.25, 4.0)]
    with pytest.raises(ValueError, match="model.layers.1.self_attn"):
        kvcache.set_layer_scales(models["fp8"], {"model.layers.0.self_attn": (1.0, 1.0)})


# --- grouped_sdpa's folded path (a GQA layer with a padding mask: every padded batch) against an oracle ----------

def attention_oracle(query, key, value, allowed, scale, softcap=None):
    """softmax(q.k * scale) . v over the keys allowed[b][t] lets query row t see, one batch row, query head
    and query position at a time in float64: query head h reads KV head h // (heads / kv_heads). Rows
    that may see no key stay NaN. softcap: the scores pass through tanh(s / cap) * cap first."""
    batch, heads, q_len, dim = query.shape
    per_kv = heads // key.shape[1]
    out = torch.full((batch, q_len, heads, dim), float("nan"), dtype=torch.float64)
    for b in range(batch):
        for h in range(heads):
            k, v = key[b, h // per_kv].double(), value[b, h // per_kv].double()
            for t in range(q_len):
                seen = [j for j in range(key.shape[2]) if allowed[b][t][j]]
                if not seen:
                    continue
                scores = torch.stack([query[b, h, t].double() @ k[j] for j in seen]) * scale
                if softcap is not None:
                    scores = torch.tanh(scores / softcap) * softcap
                weights = torch.exp(scores - scores.max())
                weights = weights / weights.sum()
                out[b, t, h] = sum(w * v[j] for w, j in zip(weights, seen, strict=True))
    return out


def padded(pads, q_len, k_len, causal=True):
    """allowed[b][t][j]: left padding of pads[b] keys, and causal with the queries the last q_len keys."""
    return [[[j >= pad and (not causal or j <= t + k_len - q_len) for j in range(k_len)] for t in range(q_len)]
            for pad in pads]


def gqa_inputs(batch, heads, kv_heads, q_len, k_len, dim=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, heads, q_len, dim, generator=g), torch.randn(batch, kv_heads, k_len, dim, generator=g),
            torch.randn(batch, kv_heads, k_len, dim, generator=g))


class GqaLayer:
    """What grouped_sdpa reads of an attention module."""
    def __init__(self, groups):
        self.num_key_value_groups, self.is_causal, self.training = groups, True, False


def as_mask(allowed, additive: bool, rows: int | None = None):
    m = torch.tensor(allowed)[:, None]                      # [batch, 1, q, k], True: may attend
    if rows == 1:
        m = m[:, :, -1:]                                     # one row, broadcast over the queries
    if additive:
        return torch.where(m, 0.0, torch.finfo(torch.float32).min)
    return m


def compare(got, expected, allowed):
    checked = 0
    for b, rows in enumerate(allowed):
        for t, row in enumerate(rows):
            if any(row):
                assert torch.allclose(got[b, t].double(), expected[b, t], atol=1e-5), (b, t)
                checked += 1
    assert checked >= len(allowed)


@pytest.mark.parametrize("case, pads, q_len, k_len, causal, additive, rows, scale", [
    ("prefill, left padded", [0, 2, 5], 7, 7, True, False, None, None),
    ("prefill, additive mask", [0, 2, 5], 7, 7, True, True, None, 0.2),
    ("decode one token against the cache", [0, 3, 4], 1, 9, True, False, None, None),
    ("a chunk after the cache", [1, 0, 6], 3, 8, True, False, None, 0.3),
    ("a padding-only mask broadcast over the queries", [0, 2, 3], 4, 6, False, False, 1, None),
])
def test_folded_grouped_sdpa_equals_per_head_attention_with_a_padded_mask(monkeypatch, case, pads, q_len, k_len,
                                                                          causal, additive, rows, scale):
    import transformers.integrations.sdpa_attention as hf_sdpa

    def fallback(*args, **kwargs):
        raise AssertionError("grouped_sdpa took transformers' repeat-K/V path, not its folded one")

    monkeypatch.setattr(hf_sdpa, "sdpa_attention_forward", fallback)
    heads, kv_heads = 6, 2
    query, key, value = gqa_inputs(len(pads), heads, kv_heads, q_len, k_len)
    allowed = padded(pads, q_len, k_len, causal)
    if rows == 1:
        allowed = [[b[-1]] * q_len for b in allowed]
    mask = as_mask(padded(pads, q_len, k_len, causal), additive, rows)
    got, weights = kvcache.grouped_sdpa(GqaLayer(heads // kv_heads), query, key, value, mask, scaling=scale)
    assert weights is None and got.shape == (len(pads), q_len, heads, 16)
    expected = attention_oracle(query, key, value, allowed, scale if scale is not None else 16 ** -0.5)
    compare(got, expected, allowed)


def test_the_oracle_agrees_with_transformers_sdpa_on_the_same_padded_inputs():
    """The oracle itself checked against the path grouped_sdpa replaces (K/V repeated per query head)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    pads, heads, kv_heads = [0, 2, 5], 6, 2
    query, key, value = gqa_inputs(3, heads, kv_heads, 7, 7, seed=1)
    allowed = padded(pads, 7, 7)
    got, _ = sdpa_attention_forward(GqaLayer(heads // kv_heads), query, key, value, as_mask(allowed, False))
    compare(got, attention_oracle(query, key, value, allowed, 16 ** -0.5), allowed)


@pytest.mark.parametrize("case, pads, q_len, k_len, masked", [
    ("prefill, no mask (sdpa's is_causal)", [0, 0], 6, 6, False),
    ("prefill, left padded", [0, 3], 6, 6, True),
    ("decode one token, no mask", [0, 0], 1, 7, False),
    ("decode one token against a padded cache", [2, 0], 1, 7, True),
    ("a chunk after the cache", [1, 0], 3, 8, True),
])
def test_softcapped_attention_equals_per_head_attention_with_capped_scores(case, pads, q_len, k_len, masked):
    """Gemma 2's attention-logit soft-capping (kvcache._softcapped) against the oracle, scores large
    enough (x4) for a cap of 1.0 to bind."""
    heads, kv_heads = 6, 2
    query, key, value = gqa_inputs(len(pads), heads, kv_heads, q_len, k_len, seed=2)
    query = query * 4
    allowed = padded(pads, q_len, k_len)
    mask = as_mask(allowed, additive=False) if masked else None
    got, _ = kvcache.grouped_sdpa(GqaLayer(heads // kv_heads), query, key, value, mask, scaling=0.25, softcap=1.0)
    compare(got, attention_oracle(query, key, value, allowed, 0.25, softcap=1.0), allowed)
    uncapped, _ = kvcache.grouped_sdpa(GqaLayer(heads // kv_heads), query, key, value, mask, scaling=0.25)
    assert (uncapped - got).abs().max() > 1e-2                     # the cap binds on these scores


def test_features_qtier_attention_does_not_implement_raise():
    query, key, value = gqa_inputs(1, 4, 2, 6, 6)
    with pytest.raises(kvcache.UnhandledAttention, match="s_aux"):
        kvcache.grouped_sdpa(GqaLayer(2), query, key, value, None, s_aux=torch.zeros(4))
    with pytest.raises(kvcache.UnhandledAttention, match="sliding window of 4 with 6 keys"):
        kvcache.grouped_sdpa(GqaLayer(2), query, key, value, None, sliding_window=4)
    # bookkeeping a module passes along changes nothing: no error
    kvcache.grouped_sdpa(GqaLayer(2), query, key, value, None, position_ids=torch.arange(6), use_cache=True,
                         sliding_window=8, s_aux=None)
