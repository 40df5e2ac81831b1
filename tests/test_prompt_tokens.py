"""A prompt is the same tokens on every backend: the reference backend's HFLM and the vLLM/endpoint
backends' local-completions tokenize log-likelihood pairs and generation prompts alike, BOS first iff
models.<name>.add_bos_token resolved true (pipeline/domain/model/bos.py). Tiny model, no server."""
import pytest
import torch

from pipeline.engines.vllm import backend as vllm_backend
from pipeline.engines.reference.backend import reference_lm_class
from pipeline.schema import Eval, Vllm
from tests import tiny_model
from tests.conftest import ROOT

pytestmark = pytest.mark.model

PAIRS = [("Review: great food\nSentiment:", " positive"), ("Q: 1 2 3", " 4")]
PROMPTS = ["Translate: hello world", "A"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model.build(tmp_path_factory.mktemp("tiny"), ROOT)


@pytest.mark.parametrize("add_bos", [False, True])
def test_reference_and_completions_send_the_same_ids(tiny, add_bos):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny)
    assert tok.bos_token_id is not None and tok("a").input_ids[0] != tok.bos_token_id    # adds none itself
    model = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32).eval()
    ref = reference_lm_class(add_bos)(pretrained=model, tokenizer=tok, batch_size=2, max_length=64)
    api = vllm_backend._local_completions("http://127.0.0.1:9", "m", str(tiny), Vllm(), Eval(tasks={}), add_bos)
    for context, continuation in PAIRS:
        a, b = ref._encode_pair(context, continuation), api._encode_pair(context, continuation)
        assert a == b
        assert (a[0][0] == tok.bos_token_id) is add_bos and a[0][1:] != [] and a[1] != []
    ids, mask = ref.tok_batch_encode(PROMPTS)
    assert [row[m.bool()].tolist() for row, m in zip(ids, mask)] == api.tok_encode(PROMPTS)
    assert all((e[0] == tok.bos_token_id) is add_bos for e in api.tok_encode(PROMPTS))
