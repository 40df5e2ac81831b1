"""Teacher-forced next-token distributions of the reference backend (pipeline/engines/reference/dists.py)
against the model's own full logits, on a tiny random model built in seconds."""
import numpy as np
import pytest
import torch

from pipeline.engines.reference import dists
from pipeline.scoring.estimators import fidelity
from tests import tiny_model
from tests.conftest import ROOT

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    path = tiny_model.build(tmp_path_factory.mktemp("tiny"), ROOT)
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def seqs(model, n=3):
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, model.config.vocab_size, (length,), generator=g).tolist() for length in (5, 9, 2)[:n]]


def full_logprobs(model, seq):
    with torch.no_grad():
        return torch.log_softmax(model(input_ids=torch.tensor([seq])).logits[0, :-1].float(), -1).numpy()


def test_top_k_is_the_models_own_distribution(model):
    out = dists.token_dists(model, seqs(model), k=7)
    for seq, d in zip(seqs(model), out):
        full = full_logprobs(model, seq)
        assert d.ids.shape == (len(seq) - 1, 7) and d.logprobs.shape == (len(seq) - 1, 7)
        expect_ids = np.argsort(-full, axis=-1)[:, :7]
        np.testing.assert_array_equal(np.sort(d.ids, axis=1), np.sort(expect_ids, axis=1))
        np.testing.assert_allclose(d.logprobs, np.take_along_axis(full, d.ids, 1), atol=1e-5)
        np.testing.assert_array_equal(d.top1, full.argmax(-1))


def test_exact_is_the_full_vocabulary_kl_and_argmax_agreement(model):
    from transformers import AutoModelForCausalLM

    other = AutoModelForCausalLM.from_config(model.config).eval()
    for seq, (kl, agree) in zip(seqs(model), dists.exact(model, other, seqs(model))):
        p_full, q_full = full_logprobs(model, seq), full_logprobs(other, seq)
        np.testing.assert_allclose(kl, (np.exp(p_full) * (p_full - q_full)).sum(-1), rtol=1e-4, atol=1e-6)
        np.testing.assert_array_equal(agree, p_full.argmax(-1) == q_full.argmax(-1))
    for kl, agree in dists.exact(model, model, seqs(model)):
        assert np.abs(kl).max() < 1e-6 and agree.all()
