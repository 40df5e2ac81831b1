"""Differential tests of the reference backend's fast paths (attention, log-likelihoods, greedy
generation, token distributions, fp8 KV cache) against lm-eval's HFLM and the model's own forward, on
tiny random models of five families built offline:

- llama: head_dim 16, tied embeddings;
- qwen3: query/key norms, head_dim 48, untied;
- gemma2: sliding window of WINDOW tokens on every other layer, head_dim 256 with its own query scale,
  attention-logit and final-logit soft-capping, tied embeddings;
- gemma3: a sliding window of WINDOW tokens on every other layer (with its own RoPE base), query/key
  norms, head_dim 32, tied;
- mistral: a sliding window of WINDOW tokens on every layer, untied.

The reference is the model's *eager* attention: transformers' own sdpa drops Gemma 2's attention
soft-capping (test_transformers_sdpa_drops_the_attention_softcap), eager is the architecture as its
authors wrote it (and as vLLM computes it). Contexts, prompts and generations run past the window, and
the caps bind: test_each_feature_changes_these_numbers shows that a path which ignored the window or a
cap would fail the comparisons (with the window handling removed from qtier's attention, i.e. its masks
rebuilt without the window, every gemma2, gemma3 and mistral case of the differential tests fails;
with the attention cap ignored, every gemma2 case; with the final cap left out of arch.logits, the
load-time head check hands gemma2 back to HFLM and the `pair` fixture refuses it).
"""
import random
import sys

import pytest
import torch

from pipeline.engines.reference import arch, dists, generate, kvcache, loglik
from pipeline.engines.base import Unsupported
from pipeline.engines.reference.backend import reference_lm_class
from tests import tiny_model
from tests.conftest import ROOT

pytestmark = pytest.mark.model

WINDOW = 5
K_SCALE, V_SCALE = 0.5, 2.0
FAMILIES = {
    "llama": dict(tie_word_embeddings=True),
    "qwen3": dict(head_dim=48),
    # initializer_range 0.1: attention scores up to ~2.5 and logits up to ~4, so caps of 1 and 2 bind
    "gemma2": dict(head_dim=256, query_pre_attn_scalar=64, sliding_window=WINDOW, attn_logit_softcapping=1.0,
                   final_logit_softcapping=2.0, initializer_range=0.1),
    # local layers with their own RoPE base, query/key norms
    "gemma3": dict(head_dim=32, sliding_window=WINDOW, layer_types=["sliding_attention", "full_attention"],
                   initializer_range=0.1),
    "mistral": dict(sliding_window=WINDOW),
}
SLIDING = ("gemma2", "gemma3", "mistral")
PROMPTS = ["The cat sat on", "Translate: hello world", "A", "Summarize the following text in one sentence. "
           "The committee met on Tuesday to plan the spring fair and chose the park.", "Review: great food",
           "Numbers 1 2 3"]


def _rounded(x, scale):
    """K/V through e4m3, written out independently of kvcache.fp8_round."""
    return (x / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).to(x.dtype) * scale


def _own_eager_fp8(module, query, key, value, attention_mask, **kwargs):
    """The model's own eager attention (its modeling file's eager_attention_forward) on rounded K/V."""
    own = sys.modules[type(module).__module__].eager_attention_forward
    return own(module, query, _rounded(key, K_SCALE), _rounded(value, V_SCALE), attention_mask, **kwargs)


def _register_own_fp8() -> str:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    AttentionInterface.register("test_own_eager_fp8", _own_eager_fp8)
    ALL_MASK_ATTENTION_FUNCTIONS.register("test_own_eager_fp8", eager_mask)
    return "test_own_eager_fp8"


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Models this small gain nothing from a second thread, and on a shared machine its spin-waits cost."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, tmp_path_factory):
    """(name, path, tokenizer) of one family's tiny model."""
    from transformers import AutoTokenizer

    name = request.param
    path = tiny_model.build_family(tmp_path_factory.mktemp(name), ROOT, name, **FAMILIES[name])
    return name, path, AutoTokenizer.from_pretrained(path)


def _theirs(path, attn="eager", **config):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation=attn, **config).eval()


def _ours(path, fp8=False):
    from transformers import AutoModelForCausalLM

    info: dict = {}
    model = arch.load(AutoModelForCausalLM, path, {"dtype": torch.float32, "attn_implementation":
                                                   kvcache.register(fp8=fp8)}, info, fp8=fp8)
    if fp8:
        kvcache.set_scales(model, K_SCALE, V_SCALE)
    return model, info


@pytest.fixture(scope="module")
def pair(family):
    """HFLM on the model's own eager forward, the reference's LM on qtier's paths (same weights)."""
    from lm_eval.models.huggingface import HFLM

    name, path, tok = family
    ours, info = _ours(path)
    assert info["attention"].startswith("qtier's") and info["loglikelihood"].startswith("qtier's"), info
    ours.qtier_info = info
    return (HFLM(pretrained=_theirs(path), tokenizer=tok, batch_size=4, max_length=40),
            reference_lm_class(add_bos=False)(pretrained=ours, tokenizer=tok, batch_size=4, max_length=40))


@pytest.fixture(scope="module")
def fp8_pair(family):
    """The same with the fp8 KV cache: the model's own eager attention on K/V rounded by hand."""
    from lm_eval.models.huggingface import HFLM

    name, path, tok = family
    ours, info = _ours(path, fp8=True)
    assert "fp8" in info["attention"], info
    theirs = _theirs(path, attn=_register_own_fp8())
    return (HFLM(pretrained=theirs, tokenizer=tok, batch_size=4, max_length=40),
            reference_lm_class(add_bos=False)(pretrained=ours, tokenizer=tok, batch_size=4, max_length=40))


def requests(vocab):
    """Contexts of 2-45 tokens (past the window, some past max_length), a shared prompt prefix, one- and
    multi-token continuations: every batch is right-padded, some share their prefix through the cache."""
    rng = random.Random(0)
    head = [rng.randrange(vocab) for _ in range(12)]
    reqs = []
    for i in range(6):
        ctx = [rng.randrange(vocab) for _ in range(rng.randint(2, 45))]
        for cont_len in (1, 3):
            reqs.append(((f"c{i}", str(cont_len)), ctx, [rng.randrange(vocab) for _ in range(cont_len)]))
    for i in range(4):
        ctx = head + [rng.randrange(vocab) for _ in range(rng.randint(2, 9))]
        reqs += [((f"p{i}", str(label)), ctx, [label]) for label in (5, 6)]
    return reqs


def _with_greedy(lm, reqs):
    """One request whose continuation is the model's own greedy choice, so is_greedy is True once."""
    ctx = reqs[0][1]
    with torch.no_grad():
        nxt = int(lm.model(torch.tensor([ctx[-40:]])).logits[0, -1].argmax())
    return reqs + [(("g", "g"), ctx, [nxt])]


def _scored(lms, monkeypatch):
    hf, ours = lms
    calls = []
    real = loglik.score
    monkeypatch.setattr(loglik, "score", lambda *a, **k: calls.append(1) or real(*a, **k))
    reqs = _with_greedy(hf, requests(hf.model.config.vocab_size))
    theirs = hf._loglikelihood_tokens(reqs, disable_tqdm=True)
    mine = ours._loglikelihood_tokens(reqs, disable_tqdm=True)
    assert calls, "the reference LM did not take qtier's log-likelihood path"
    return mine, theirs


def _generated(lms, monkeypatch, until, max_gen_toks):
    from lm_eval.api.instance import Instance

    hf, ours = lms
    calls = []
    real = generate.greedy
    monkeypatch.setattr(generate, "greedy", lambda *a, **k: calls.append(1) or real(*a, **k))
    kw = {"until": until, "do_sample": False, "max_gen_toks": max_gen_toks}
    reqs = [Instance("generate_until", {}, (p, dict(kw)), i) for i, p in enumerate(PROMPTS)]
    theirs = hf.generate_until(reqs, disable_tqdm=True)
    mine = ours.generate_until(reqs, disable_tqdm=True)
    assert calls, "the reference LM did not take qtier's generation path"
    return mine, theirs


def test_loglikelihoods_match_hflm(pair, monkeypatch):
    mine, theirs = _scored(pair, monkeypatch)
    for (a, ga), (b, gb) in zip(mine, theirs, strict=True):
        assert a == pytest.approx(b, abs=1e-4) and ga == gb
    assert any(g for _, g in theirs)


@pytest.mark.parametrize("until, max_gen_toks", [(["zzzz"], 16), (["\n", "e"], 12)])
def test_greedy_generation_matches_hflm(pair, monkeypatch, until, max_gen_toks):
    mine, theirs = _generated(pair, monkeypatch, until, max_gen_toks)
    assert mine == theirs and any(theirs)


def _seqs(vocab):
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, vocab, (n,), generator=g).tolist() for n in (3, 17, 30)]


def test_token_distributions_match_the_models_own(pair):
    hf, ours = pair
    for seq, d in zip(_seqs(hf.model.config.vocab_size), dists.token_dists(ours.model, _seqs(hf.model.config.vocab_size), 5)):
        with torch.no_grad():
            full = torch.log_softmax(hf.model(torch.tensor([seq[:-1]])).logits[0].float(), -1)
        assert torch.equal(torch.tensor(d.top1), full.argmax(-1))
        assert torch.allclose(torch.tensor(d.logprobs), full.gather(1, torch.tensor(d.ids)), atol=1e-5)


def test_fp8_kv_matches_the_models_own_attention_on_rounded_kv(fp8_pair, pair, monkeypatch):
    mine, theirs = _scored(fp8_pair, monkeypatch)
    for (a, ga), (b, gb) in zip(mine, theirs, strict=True):
        assert a == pytest.approx(b, abs=1e-4) and ga == gb
    plain = _loglik(pair[1].model, _with_greedy(pair[0], requests(pair[0].model.config.vocab_size)))
    assert max(abs(a - b) for (a, _), b in zip(mine, plain)) > 1e-3     # the rounding is there
    gen_mine, gen_theirs = _generated(fp8_pair, monkeypatch, ["zzzz"], 16)
    assert gen_mine == gen_theirs


def _loglik(model, reqs):
    return [a for a, _ in loglik.score(model, reqs, 40, 4)]


@pytest.mark.parametrize("name, change", [
    ("gemma2", {"sliding_window": 4096}), ("gemma3", {"sliding_window": 4096}), ("mistral", {"sliding_window": 4096}),
    ("gemma2", {"attn_logit_softcapping": None}), ("gemma2", {"final_logit_softcapping": None}),
])
def test_each_feature_changes_these_numbers(tmp_path, name, change):
    """Without the window (or a cap) the model's own forward gives other log-likelihoods on these inputs,
    by far more than the tolerance above: a fast path that ignored it could not pass."""
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoTokenizer

    path = tiny_model.build_family(tmp_path, ROOT, name, **FAMILIES[name])
    tok, reqs = AutoTokenizer.from_pretrained(path), requests(500)
    with_it, without = ([a for a, _ in HFLM(pretrained=m, tokenizer=tok, batch_size=4, max_length=40)
                         ._loglikelihood_tokens(reqs, disable_tqdm=True)]
                        for m in (_theirs(path), _theirs(path, **change)))
    assert max(abs(a - b) for a, b in zip(with_it, without)) > 1e-2


def test_transformers_sdpa_drops_the_attention_softcap(tmp_path):
    path = tiny_model.build_family(tmp_path, ROOT, "gemma2", **FAMILIES["gemma2"])
    ids = torch.tensor([_seqs(500)[2]])
    with torch.no_grad():
        eager, sdpa, ours = (m(ids).logits for m in (_theirs(path), _theirs(path, attn="sdpa"), _ours(path)[0]))
    assert torch.allclose(ours, eager, atol=1e-5)
    assert (sdpa - eager).abs().max() > 1e-2


def test_a_forward_that_rescales_its_logits_is_handed_back(tmp_path):
    """Cohere multiplies its logits by logit_scale after the head: log-likelihoods go to HFLM's own path,
    distributions come from the model's own forward, and the session info says so."""
    import transformers
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tiny_model.FAMILIES["cohere"] = ("CohereConfig", "CohereForCausalLM")
    try:
        path = tiny_model.build_family(tmp_path, ROOT, "cohere", logit_scale=0.0625)
    finally:
        del tiny_model.FAMILIES["cohere"]
    assert isinstance(transformers.AutoConfig.from_pretrained(path), transformers.CohereConfig)
    info: dict = {}
    model = arch.load(AutoModelForCausalLM, path, {"dtype": torch.float32,
                                                   "attn_implementation": kvcache.register(fp8=False)}, info, fp8=False)
    assert info["loglikelihood"].startswith("HFLM's own") and "after its LM head" in info["loglikelihood"]
    assert info["token_dists"].startswith("the model's own forward")
    assert not loglik.supported(model)
    seq = _seqs(500)[1]
    with torch.no_grad():
        full = torch.log_softmax(model(torch.tensor([seq[:-1]])).logits[0].float(), -1)
    d = dists.token_dists(model, [seq], 5)[0]
    assert torch.allclose(torch.tensor(d.logprobs), full.gather(1, torch.tensor(d.ids)), atol=1e-6)
    tok = AutoTokenizer.from_pretrained(path)
    reqs = requests(500)[:4]
    ours = reference_lm_class(add_bos=False)(pretrained=model, tokenizer=tok, batch_size=4, max_length=40)
    hf = HFLM(pretrained=_theirs(path), tokenizer=tok, batch_size=4, max_length=40)
    for (a, _), (b, _) in zip(ours._loglikelihood_tokens(reqs, disable_tqdm=True),
                              hf._loglikelihood_tokens(reqs, disable_tqdm=True), strict=True):
        assert a == pytest.approx(b, abs=1e-4)


def test_attention_features_qtier_does_not_implement_hand_the_model_back(tmp_path, monkeypatch):
    """An attention module that passes something qtier's attention does not implement (here an attention
    sink, as gpt-oss passes `s_aux`) raises at the load-time probe: the model runs its own eager attention,
    recorded; with the fp8 KV cache, whose rounding lives in qtier's attention, it is unsupported."""
    from transformers import AutoModelForCausalLM
    from transformers.models.llama import modeling_llama

    path = tiny_model.build_family(tmp_path, ROOT, "llama")
    real = modeling_llama.LlamaAttention.forward
    monkeypatch.setattr(modeling_llama.LlamaAttention, "forward",
                        lambda self, *a, **k: real(self, *a, s_aux=torch.zeros(4), **k))
    info: dict = {}
    model = arch.load(AutoModelForCausalLM, path, {"dtype": torch.float32,
                                                   "attn_implementation": kvcache.register(fp8=False)}, info, fp8=False)
    assert model.config._attn_implementation == "eager"
    assert info["attention"].startswith("the model's own eager attention") and "s_aux" in info["attention"]
    ids = torch.tensor([_seqs(500)[2]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, _theirs(path)(ids).logits)     # what it runs now: the model's own
    with pytest.raises(Unsupported, match="s_aux"):
        arch.load(AutoModelForCausalLM, path, {"dtype": torch.float32, "attn_implementation": kvcache.register()},
                  {}, fp8=True)


def test_an_architecture_transformers_runs_without_sdpa_is_handed_back(tmp_path):
    """gpt-oss (attention sinks): transformers refuses any sdpa-style attention for it, so qtier's too."""
    from transformers import AutoModelForCausalLM

    _gpt_oss(tmp_path)
    info: dict = {}
    model = arch.load(AutoModelForCausalLM, tmp_path, {"dtype": torch.float32,
                                                       "attn_implementation": kvcache.register(fp8=False)}, info, fp8=False)
    assert model.config._attn_implementation == "eager" and "GptOss" in info["attention"]
    assert info["architecture"]["sliding_window"] == f"{WINDOW} tokens on 1 of 2 layers"
    with pytest.raises(Unsupported, match="fp8 KV cache"):
        arch.load(AutoModelForCausalLM, tmp_path, {"dtype": torch.float32, "attn_implementation": kvcache.register()},
                  {}, fp8=True)


def test_the_features_are_recorded(family, pair):
    name = family[0]
    info = pair[1].model.qtier_info["architecture"]
    assert info["model_type"] == {"gemma3": "gemma3_text"}.get(name, name)
    assert info["head_dim"] == FAMILIES[name].get("head_dim", 16)
    assert info["tied_embeddings"] == (name in ("llama", "gemma2", "gemma3"))
    assert info["qk_norm"] == (name in ("qwen3", "gemma3"))
    assert (info["sliding_window"] is not None) == (name in SLIDING)
    if name == "gemma2":
        assert info["sliding_window"] == f"{WINDOW} tokens on 1 of 2 layers"
        assert (info["attn_logit_softcapping"], info["final_logit_softcapping"]) == (1.0, 2.0)


def _variant(path, cache_dtype):
    from pipeline.engines.base import Variant
    from pipeline.schema import KvMode, Model, Tier

    return Variant("m", "base", cache_dtype, path, Model(source=f"local:{path}", dtype="bfloat16",
                                                        apply_chat_template=False, add_bos_token=False),
                   Tier(method="baseline"), KvMode(cache_dtype=cache_dtype), serve_path=path)


def _gpt_oss(path):
    from transformers import GptOssConfig, GptOssForCausalLM

    torch.manual_seed(0)
    GptOssForCausalLM(GptOssConfig(vocab_size=300, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=2,
                                   num_experts_per_tok=1, sliding_window=WINDOW)).save_pretrained(path)
    tiny_model.tokenizer(ROOT, 300).save_pretrained(path)
    return path


def test_the_session_info_of_the_row_says_what_ran(tmp_path):
    """ReferenceBackend.session, as evaluate opens it: the row's `serving` names the attention, the
    log-likelihood and distribution paths and the architecture; gpt-oss is handed back with auto KV and
    unsupported with the fp8 KV cache."""
    from pipeline.engines.reference.backend import ReferenceBackend
    from pipeline.schema import Eval, Reference

    backend = ReferenceBackend(Reference(dtype="float32"), Eval(tasks={}))
    gemma = tiny_model.build_family(tmp_path / "gemma2", ROOT, "gemma2", **FAMILIES["gemma2"])
    with backend.session(_variant(gemma, "fp8_e4m3")) as session:
        info = session.info
    assert "fp8" in info["attention"] and info["loglikelihood"].startswith("qtier's")
    assert info["architecture"]["final_logit_softcapping"] == 2.0
    oss = _gpt_oss(tmp_path / "gpt_oss")
    with backend.session(_variant(oss, "auto")) as session:
        assert session.info["attention"].startswith("the model's own eager attention")
        assert session.model.config._attn_implementation == "eager"
    with pytest.raises(Unsupported, match="GptOss"):
        with backend.session(_variant(oss, "fp8_e4m3")):
            pass
