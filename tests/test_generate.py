"""The reference backend's generation returns what lm-eval's HFLM (model.generate) returns, while
rows that are done leave the batch: stop strings, eos, max_gen_toks, left padding. Tiny model."""
import pytest
import torch

from pipeline.engines.reference import generate
from pipeline.engines.reference.backend import reference_lm_class
from tests import tiny_model
from tests.conftest import ROOT

pytestmark = pytest.mark.model

PROMPTS = ["The cat sat on", "Translate: hello world", "A", "Summarize the following text in one sentence. "
           "The committee met on Tuesday to plan the spring fair and chose the park.", "Review: great food",
           "x y z", "Numbers 1 2 3"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model.build(tmp_path_factory.mktemp("tiny"), ROOT)


def pair(path, attn):
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation=attn).eval()
    tok = AutoTokenizer.from_pretrained(path)
    return (HFLM(pretrained=model, tokenizer=tok, batch_size=4, max_length=128),
            reference_lm_class(add_bos=False)(pretrained=model, tokenizer=tok, batch_size=4, max_length=128))


@pytest.fixture(scope="module")
def lms(tiny):
    return pair(tiny, "sdpa")


def test_fp8_kv_rounded_in_place_gives_the_same_continuations(tiny, monkeypatch):
    """The fp8 KV attention rounds a reserved cache once per position (kvcache.rounded) where
    generate()'s cache is re-rounded whole at every step: the same text either way."""
    from pipeline.engines.reference import kvcache

    hf, ours = pair(tiny, kvcache.register())
    kvcache.set_scales(hf.model, 0.5, 2.0)
    theirs = hf.generate_until(requests(["zzzz"], 16), disable_tqdm=True)
    lengths = []
    real = kvcache.fp8_round
    monkeypatch.setattr(kvcache, "fp8_round", lambda x, s=1.0: lengths.append(x.shape[2]) or real(x, s))
    assert ours.generate_until(requests(["zzzz"], 16), disable_tqdm=True) == theirs
    assert lengths.count(1) > len(lengths) // 2     # decoding steps rounded only their new position


def test_rounded_in_place_only_past_what_it_rounded():
    from pipeline.engines.reference import kvcache

    buf = torch.full((1, 1, 8, 2), 1.03)
    kvcache.reserve(buf)
    view = buf[:, :, :4]
    out = kvcache.rounded(view, 1.0)
    assert out.data_ptr() == buf.data_ptr() and torch.all(buf[:, :, :4] == 1.0) and torch.all(buf[:, :, 4:] == 1.03)
    buf[:, :, 0] = 1.03                           # positions already rounded are not looked at again
    kvcache.rounded(buf[:, :, :6], 1.0)
    assert buf[0, 0, 0, 0] == 1.03 and torch.all(buf[:, :, 4:6] == 1.0)
    plain = torch.full((1, 1, 3, 2), 1.03)        # not a reserved buffer: rounded copy, input untouched
    assert torch.all(kvcache.rounded(plain, 1.0) == 1.0) and torch.all(plain == 1.03)


def requests(until, max_gen_toks):
    from lm_eval.api.instance import Instance

    kw = {"until": until, "do_sample": False, "max_gen_toks": max_gen_toks}
    return [Instance("generate_until", {}, (p, dict(kw)), i) for i, p in enumerate(PROMPTS)]


@pytest.mark.parametrize("until, max_gen_toks", [(["\n"], 12), (["e", "a"], 20), ([" "], 5), (["zzzz"], 16)])
def test_same_continuations_as_hflm(lms, until, max_gen_toks):
    hf, ours = lms
    theirs = hf.generate_until(requests(until, max_gen_toks), disable_tqdm=True)
    mine = ours.generate_until(requests(until, max_gen_toks), disable_tqdm=True)
    assert mine == theirs
    assert any(theirs)


def test_eos_stops_a_row(lms):
    hf, ours = lms
    model = ours.model
    first = hf.generate_until(requests(["zzzz"], 16), disable_tqdm=True)
    # make a token the model does produce the eos: rows end there, as generate() ends them
    token = hf.tokenizer(first[0], add_special_tokens=False).input_ids[2]
    saved = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = token
    try:
        theirs = hf.generate_until(requests(["zzzz"], 16), disable_tqdm=True)
        mine = ours.generate_until(requests(["zzzz"], 16), disable_tqdm=True)
    finally:
        model.generation_config.eos_token_id = saved
    assert mine == theirs and theirs != first


def test_logits_processors_fall_back_to_generate(lms):
    _, ours = lms
    assert generate.plain_greedy(ours.model, {"do_sample": False, "temperature": 0.0})
    assert not generate.plain_greedy(ours.model, {"do_sample": True})
    assert not generate.plain_greedy(ours.model, {"do_sample": False, "top_k": 5})
    ours.model.generation_config.repetition_penalty = 1.3
    try:
        assert not generate.plain_greedy(ours.model, {"do_sample": False})
    finally:
        ours.model.generation_config.repetition_penalty = None


def test_prefill_groups_keep_padding_small_and_long_prompts_unpadded():
    # sorted longest first; short prompts share a micro-batch while padding stays under 5%
    assert generate.prefill_groups([100, 98, 60, 99], pad_free=1024) == [[0, 3, 1], [2]]
    # beyond pad_free only prompts of the same length share one (no mask: sdpa's flash kernel)
    assert generate.prefill_groups([2000, 1990, 2000, 1995], pad_free=1024) == [[0, 2], [3], [1]]
    assert generate.prefill_groups([2000, 1990], pad_free=4096) == [[0, 1]]


def test_unpadded_long_prefills_give_the_same_continuations(lms, monkeypatch):
    """Every prompt past pad_free prefilled in its own micro-batch: the same text as HFLM's generate."""
    hf, ours = lms
    seen = []
    real = generate.prefill_groups

    def groups(lengths):
        seen.append((lengths, real(lengths, pad_free=2)))
        return seen[-1][1]

    monkeypatch.setattr(generate, "prefill_groups", groups)
    theirs = hf.generate_until(requests(["zzzz"], 16), disable_tqdm=True)
    assert ours.generate_until(requests(["zzzz"], 16), disable_tqdm=True) == theirs
    assert seen and all(len({lengths[i] for i in g}) == 1 for lengths, gs in seen for g in gs)
