"""The reference backend's generation returns what lm-eval's HFLM (model.generate) returns, while
rows that are done leave the batch: stop strings, eos, max_gen_toks, left padding. Tiny model."""
import pytest
import torch

from pipeline.backends import generate
from pipeline.backends.reference import reference_lm_class
from tests import tiny_model
from tests.conftest import ROOT

PROMPTS = ["The cat sat on", "Translate: hello world", "A", "Summarize the following text in one sentence. "
           "The committee met on Tuesday to plan the spring fair and chose the park.", "Review: great food",
           "x y z", "Numbers 1 2 3"]


@pytest.fixture(scope="module")
def lms(tmp_path_factory):
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tiny_model.build(tmp_path_factory.mktemp("tiny"), ROOT)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(path)
    return (HFLM(pretrained=model, tokenizer=tok, batch_size=4, max_length=128),
            reference_lm_class()(pretrained=model, tokenizer=tok, batch_size=4, max_length=128))


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
