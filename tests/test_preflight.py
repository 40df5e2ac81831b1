"""The server contract (pipeline/engines/vllm/preflight.py) against fake OpenAI-compatible servers in this
process: one that serves prompt log-probs, one like llama.cpp's that does not, one that counts tokens
with another tokenizer and loops."""
import pytest

from pipeline.engines.vllm import preflight
from tests.fake_openai import Servers


def words(text):
    return text.split()


@pytest.fixture
def serve():
    servers = Servers()
    yield lambda **kw: servers.start(**kw)[0]
    servers.close()


def test_a_server_that_meets_the_contract(serve):
    c = preflight.check(serve(), "m", words)
    assert c.prompt_logprobs and c.logprob_depth == 20 and c.server_tokens == c.tokenizer_tokens == 16
    assert c.failures == [] and c.degenerate == [] and c.loglik_refusal is None


def test_the_depth_is_the_deepest_the_server_accepts(serve):
    assert preflight.check(serve(max_logprobs=5), "m", words).logprob_depth == 5


def test_without_prompt_logprobs_loglik_tasks_are_refused_with_the_reason(serve):
    c = preflight.check(serve(prompt_logprobs=False), "m", words)
    assert not c.prompt_logprobs
    assert c.failures == [c.loglik_refusal] and "at chance" in c.loglik_refusal


def test_another_tokenizer_and_a_looping_answer_are_named(serve):
    c = preflight.check(serve(extra_tokens=3, answer=" 1 1 1 1 1 1 1 1"), "m", words)
    assert c.failures == ["tokenizer round-trip: the server counts 19 tokens in the probe, the model's tokenizer 16"]
    assert c.degenerate == ["'1' repeated in the answer to 'Write one sentence about the sea.'",
                            "'1' repeated in the answer to 'List three colours.'"]


@pytest.mark.parametrize("choice, expected", [
    # 2 requested: "b" is in its top 2, "c" is not and comes as a third entry (vLLM's answer)
    ({"logprobs": {"tokens": ["a", "b", "c"], "token_logprobs": [None, -1.0, -5.0],
                   "top_logprobs": [None, {"b": -1.0, "z": -3.0}, {"x": -0.1, "y": -2.0, "c": -5.0}]}}, (True, 2)),
    # every prompt token outside its top 2 (a random model): 3 entries each, still depth 2
    ({"logprobs": {"tokens": ["a", "b", "c"], "token_logprobs": [None, -9.0, -9.0],
                   "top_logprobs": [None, {"x": -0.1, "y": -2.0, "b": -9.0}, {"x": -0.1, "y": -2.0, "c": -9.0}]}},
     (True, 2)),
    # two of "b"'s top 2 decode alike and share a key: one entry there, depth still 2
    ({"logprobs": {"tokens": ["a", "b", "c"], "token_logprobs": [None, -1.0, -2.0],
                   "top_logprobs": [None, {"b": -1.0}, {"c": -2.0, "y": -3.0}]}}, (True, 2)),
    # a server that returns fewer than asked
    ({"logprobs": {"tokens": ["a", "b", "c"], "token_logprobs": [None, -1.0, -2.0],
                   "top_logprobs": [None, {"b": -1.0}, {"c": -2.0}]}}, (True, 1)),
    ({"logprobs": {"tokens": ["c"], "token_logprobs": [-2.0], "top_logprobs": [{"c": -2.0}]}}, (False, 0)),
    ({"logprobs": None}, (False, 0)),
    ({"logprobs": {"tokens": ["a", "b", "c"], "token_logprobs": [None, None, -2.0]}}, (False, 0)),
])
def test_prompt_logprobs_are_read_from_the_echo(choice, expected):
    assert preflight.prompt_logprobs(choice, 2) == expected
