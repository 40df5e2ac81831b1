"""The reference backend's log-likelihood path gives HFLM's numbers: same log-probs (float tolerance)
and the same greedy flags, on one-token and multi-token continuations, shared and distinct contexts,
and truncated inputs. A tiny random model, built in seconds."""
import random

import pytest
import torch

from pipeline.engines.reference import loglik
from tests import tiny_model
from tests.conftest import ROOT

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def hflm(tmp_path_factory):
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tiny_model.build(tmp_path_factory.mktemp("tiny"), ROOT)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return HFLM(pretrained=model, tokenizer=AutoTokenizer.from_pretrained(path), batch_size=3, max_length=40)


def requests(lm):
    rng = random.Random(0)
    vocab = lm.model.config.vocab_size
    reqs = []
    for i in range(7):
        ctx = [rng.randrange(vocab) for _ in range(rng.randint(3, 50))]   # some longer than max_length
        for cont_len in (1, 1, 3):
            cont = [rng.randrange(vocab) for _ in range(cont_len)]
            reqs.append(((f"c{i}", f"x{len(reqs)}"), ctx, cont))
    # a continuation that is the model's own greedy choice, so is_greedy is True at least once
    ctx = reqs[0][1]
    with torch.no_grad():
        nxt = int(lm.model(torch.tensor([ctx[-40:]])).logits[0, -1].argmax())
    reqs.append((("g", "g"), ctx, [nxt]))
    return reqs


def test_same_numbers_as_hflm(hflm):
    reqs = requests(hflm)
    theirs = hflm._loglikelihood_tokens(reqs, disable_tqdm=True)
    ours = loglik.score(hflm.model, reqs, hflm.max_length, 3)
    assert len(ours) == len(theirs)
    for (a, ga), (b, gb) in zip(ours, theirs):
        assert a == pytest.approx(b, abs=1e-4)
        assert ga == gb
    assert any(g for _, g in ours)


def test_order_does_not_matter(hflm):
    reqs = requests(hflm)
    # results come back in request order, whatever the order and batch size (beyond float rounding)
    backwards = list(reversed(loglik.score(hflm.model, list(reversed(reqs)), 40, 2)))
    for (a, ga), (b, gb) in zip(backwards, loglik.score(hflm.model, reqs, 40, 8)):
        assert a == pytest.approx(b, abs=1e-4) and ga == gb


def test_shared_prefix_stops_short_of_scored_positions():
    assert loglik.shared_prefix([(1, 2, 3, 4), (1, 2, 3, 5), (1, 2, 9)], [1, 1, 1]) == 2
    assert loglik.shared_prefix([(1, 2, 3, 4), (1, 2, 3, 4, 5)], [2, 1]) == 2      # 4 - 2 scored
    assert loglik.shared_prefix([(7, 2), (1, 2)], [1, 1]) == 0


def test_shared_prefixes_give_the_same_numbers(hflm):
    """Classification-like batches: a long common prompt, different texts, two one-token labels."""
    import random

    rng = random.Random(3)
    head = [rng.randrange(100) for _ in range(12)]
    reqs = []
    for i in range(6):
        ctx = head + [rng.randrange(100) for _ in range(rng.randint(2, 9))]
        for label in (5, 6):
            reqs.append(((f"c{i}", str(label)), ctx, [label]))
    theirs = hflm._loglikelihood_tokens(reqs, disable_tqdm=True)
    ours = loglik.score(hflm.model, reqs, hflm.max_length, 4)
    for (a, ga), (b, gb) in zip(ours, theirs):
        assert a == pytest.approx(b, abs=1e-4) and ga == gb


def test_plain_decoder_models_are_supported_and_the_forward_decides(hflm):
    """The head is checked against the model's own forward (arch.head_handback), not its config: a Llama
    ignores a final_logit_softcapping set on its config, which arch.logits would apply, so a copy with it
    set is handed back to HFLM (Gemma 2's forward applies it: tests/test_architectures.py)."""
    from transformers import LlamaForCausalLM

    assert loglik.supported(hflm.model)
    capped = LlamaForCausalLM(hflm.model.config.__class__(**{**hflm.model.config.to_dict(),
                                                              "final_logit_softcapping": 0.5})).eval()
    assert not loglik.supported(capped)


def test_without_prefix_sharing_the_numbers_are_hflms_exactly(hflm):
    reqs = requests(hflm)
    theirs = hflm._loglikelihood_tokens(reqs, disable_tqdm=True)
    ours = loglik.score(hflm.model, reqs, hflm.max_length, 3, share_prefix=False)
    assert [g for _, g in ours] == [g for _, g in theirs]
    assert max(abs(a - b) for (a, _), (b, _) in zip(ours, theirs)) < 1e-4
