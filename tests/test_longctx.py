"""Long-context teacher forcing on the reference backend (pipeline/evaluation/longctx.py), on the tiny
random model served the way a variant is (ReferenceBackend.session): with KV auto it is the model's own
forward; with the fp8 KV cache every position reads K/V rounded through float8_e4m3fn, the result of a
forward whose attention rounds all K/V by hand."""
from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline.evaluation import longctx
from pipeline.engines.base import Variant
from pipeline.engines.reference.backend import ReferenceBackend
from pipeline.schema import Eval, KvMode, Model, Reference, Tier
from tests import tiny_model
from tests.conftest import ROOT

pytestmark = pytest.mark.model

SCALE = 0.5            # k/v scale of the fp8 variant (not 1.0, so the scale's use is checked too)
LENGTH, CHUNK = 700, 256    # three chunks, the last partial; tiny_model's max_position_embeddings is 1024


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    return tiny_model.build(tmp_path_factory.mktemp("tiny"), ROOT)


def variant(ckpt: Path, kv: str) -> Variant:
    mode = KvMode(cache_dtype="fp8_e4m3", scale=SCALE) if kv == "fp8" else KvMode(cache_dtype="auto")
    return Variant("tiny", "fp16", kv, ckpt, Model(source="local:tiny", dtype="float32", apply_chat_template=False, add_bos_token=False),
                   Tier(method="baseline"), mode, serve_path=ckpt)


@pytest.fixture(scope="module")
def sessions(ckpt):
    backend = ReferenceBackend(Reference(dtype="float32"), Eval(tasks={}))
    with backend.session(variant(ckpt, "auto")) as auto, backend.session(variant(ckpt, "fp8")) as fp8:
        assert fp8.info["kv_cache"].startswith("fp8_e4m3 simulated") and fp8.info["kv_layers_quantized"] == 2
        yield {"auto": auto.model, "fp8": fp8.model}


def text(vocab: int, n: int = LENGTH, seed: int = 0) -> list[int]:
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def chunked(model, seq, chunk=CHUNK) -> torch.Tensor:
    with torch.inference_mode():
        return torch.cat([lp for _, lp in longctx.chunks(model, seq, chunk)])


def whole_forward(model, seq) -> torch.Tensor:
    with torch.inference_mode():
        return torch.log_softmax(model(input_ids=torch.tensor([seq[:-1]])).logits[0].float(), -1)


def _hand_fp8_sdpa(module, query, key, value, attention_mask, **kwargs):
    """Every K and V rounded to e4m3 at SCALE, written out apart from kvcache.py."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def rnd(x):
        return (x / SCALE).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).to(x.dtype) * SCALE

    return sdpa_attention_forward(module, query, rnd(key), rnd(value), attention_mask, **kwargs)


@pytest.fixture(scope="module")
def hand(ckpt):
    from transformers import AttentionInterface, AutoModelForCausalLM
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register("test_longctx_hand_fp8", _hand_fp8_sdpa)
    ALL_MASK_ATTENTION_FUNCTIONS.register("test_longctx_hand_fp8", sdpa_mask)
    return AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32,
                                                attn_implementation="test_longctx_hand_fp8").eval()


def per_position_gap(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    return (a - b).abs().max(-1).values.numpy()


def test_kv_auto_is_the_models_own_forward(sessions):
    model = sessions["auto"]
    seq = text(model.config.vocab_size)
    got, own = chunked(model, seq), whole_forward(model, seq)
    assert got.shape == (LENGTH - 1, model.config.vocab_size)
    assert per_position_gap(got, own).max() < 1e-5
    (d,) = longctx.position_dists(model, [seq], k=8, chunk=CHUNK)
    np.testing.assert_array_equal(d.top1, own.argmax(-1).numpy())
    np.testing.assert_allclose(d.logprobs, own.topk(8, -1).values.numpy(), atol=1e-5)
    np.testing.assert_allclose(d.target, own.gather(1, torch.tensor(seq[1:])[:, None])[:, 0].numpy(), atol=1e-5)


def test_every_position_reads_rounded_kv_with_the_fp8_cache(sessions, hand):
    """At each of the 699 positions (three chunks, so most read K/V cached by earlier chunks) the fp8
    variant is a whole forward with every K/V rounded by hand, up to float noise, and is over ten times
    that noise away from the unrounded forward: a position that read unrounded K/V, its own chunk's or
    the cache's, would sit on the unrounded side. (The noise is not float32's 1e-7: a K/V element whose
    pre-rounding value differs in its last bit between two kernel shapes can land on the other side of
    an e4m3 rounding boundary, a 6% step in that element.)"""
    seq = text(sessions["fp8"].config.vocab_size, seed=1)
    got = chunked(sessions["fp8"], seq)
    to_hand = per_position_gap(got, whole_forward(hand, seq))
    to_plain = per_position_gap(got, whole_forward(sessions["auto"], seq))
    assert to_hand.max() < 1e-4, to_hand.max()
    assert (to_plain > 10 * max(to_hand.max(), 1e-6)).all(), (to_plain.min(), to_hand.max())


def test_chunk_size_does_not_change_the_result(sessions):
    """Up to the rounding-boundary noise above (measured 7e-5 token by token, the fp8 effect itself 1e-3)."""
    seq = text(sessions["fp8"].config.vocab_size, seed=2)
    one = chunked(sessions["fp8"], seq, chunk=LENGTH)
    for chunk in (50, 333):
        assert per_position_gap(chunked(sessions["fp8"], seq, chunk), one).max() < 2e-4, chunk


@pytest.fixture(scope="module")
def pair(ckpt):
    """Two clearly different models for the KL arithmetic (the fp8 cache alone moves the near-uniform
    distributions of the random model by ~1e-5 nats, float noise for a KL): the tiny model with its
    (tied) embedding scaled 3x, and a copy with noise added to every weight and the fp8 cache."""
    from transformers import AutoModelForCausalLM

    from pipeline.engines.reference import kvcache

    out, g = [], torch.Generator().manual_seed(9)
    for fp8 in (False, True):
        m = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32,
                                                 attn_implementation=kvcache.register(fp8=fp8)).eval()
        with torch.no_grad():
            m.get_input_embeddings().weight.mul_(3.0)
            for p in m.parameters() if fp8 else ():
                p.add_(0.03 * torch.randn(p.shape, generator=g))
        out.append(m)
    return out


def test_against_a_stored_baseline_is_the_exact_kl_with_the_whole_vocabulary_and_below_it_with_less(pair):
    base_model, model = pair
    vocab = base_model.config.vocab_size
    seqs = [text(vocab, 300, seed=3), text(vocab, 40, seed=4)]
    exact = longctx.exact(base_model, model, seqs, chunk=128)
    full = longctx.against(model, longctx.position_dists(base_model, seqs, k=vocab, chunk=128), seqs, chunk=128)
    top5 = longctx.against(model, longctx.position_dists(base_model, seqs, k=5, chunk=128), seqs, chunk=128)
    for (kl, agree), (kl_full, agree_full), (kl5, agree5) in zip(exact, full, top5):
        assert kl.mean() > 0.02, kl.mean()                  # measured 0.07
        np.testing.assert_allclose(kl_full, kl, rtol=1e-3, atol=1e-6)
        assert (kl5 <= kl + 1e-5).all() and kl5.mean() < kl.mean()
        np.testing.assert_array_equal(agree, agree_full)
        np.testing.assert_array_equal(agree, agree5)
    for kl, agree in longctx.exact(model, model, seqs, chunk=128):
        assert kl.max() < 1e-6 and agree.all()


def test_texts_beyond_the_context_or_too_short_are_refused(sessions):
    model = sessions["auto"]
    with pytest.raises(ValueError, match="reads 1025 positions, more than the model's max_position_embeddings 1024"):
        longctx.position_dists(model, [text(model.config.vocab_size, 1026)], k=4)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        longctx.position_dists(model, [[5]], k=4)
    base = longctx.position_dists(model, [text(model.config.vocab_size, 20)], k=4)
    with pytest.raises(ValueError, match="19 positions for a text of 30 tokens"):
        longctx.against(model, base, [text(model.config.vocab_size, 30)])


def test_the_stored_baseline_round_trips_and_a_variant_is_measured_per_bucket(pair, tmp_path):
    from pipeline.domain.sets import fidelity_set

    base_model, model = pair
    vocab = base_model.config.vocab_size
    assert longctx.probe_length(base_model, 4096, 300) == 300 and longctx.probe_length(base_model, 4096, 8192) == 1024
    seqs = [text(vocab, 301, seed=s) for s in (5, 6, 7)]
    base = longctx.baseline(base_model, seqs, k=5, first_edge=64)
    assert base.meta["edges"] == [0, 64, 128, 256, 300]
    fidelity_set.save(tmp_path / "long.npz", base)
    loaded = fidelity_set.load(tmp_path / "long.npz")
    assert loaded.seqs == seqs and loaded.meta == base.meta
    found = longctx.measure(model, loaded)
    assert found["status"] == "ok" and found["texts"] == 3 and found["positions"] == 300
    assert [(b["lo"], b["hi"]) for b in found["buckets"]] == [(0, 64), (64, 128), (128, 256), (256, 300)]
    direct = longctx.against(model, longctx.position_dists(base_model, seqs, k=5), seqs)
    # the bucket's value is the mean of the per-text means, and per_text holds those means
    first = [kl[:64].mean() for kl, _ in direct]
    assert found["buckets"][0]["kl_mean"] == pytest.approx(np.mean(first), rel=1e-4)
    assert [row[0] for row in found["per_text"]["kl"]] == pytest.approx(first, rel=1e-4)
    assert all(b["kl_ci"] is not None and b["kl_mean"] > 0 for b in found["buckets"])
    same = longctx.measure(base_model, loaded)
    assert all(b["kl_mean"] < 1e-6 and b["top1"] == 100.0 for b in same["buckets"])


def test_an_engine_read_by_its_own_top_k_is_measured_per_bucket_below_the_exact_kl(pair):
    """vLLM on a CPU (no model in this process) is read by its prompt log-probs: its own top-k per position.
    Faked here by the reference models' top-k, so the figures can be checked against `measure`."""
    base_model, model = pair
    vocab = base_model.config.vocab_size
    seqs = [text(vocab, 301, seed=s) for s in (5, 6, 7)]

    def engine(m):
        return lambda ss, k: longctx.position_dists(m, ss, k)
    base = longctx.baseline_topk(engine(base_model), seqs, k=5, first_edge=64, model_context=1024, path="p")
    assert base.meta["edges"] == [0, 64, 128, 256, 300] and base.meta["path"] == "p" and base.meta["k"] == 5
    assert base.seqs == seqs and [i.shape for i in base.ids] == [(300, 5)] * 3
    found = longctx.measure_topk(engine(model), base, "p")
    full = longctx.measure(model, base)
    assert found["status"] == "ok" and found["path"] == "p" and found["texts"] == 3 and found["positions"] == 300
    for topk, exact in zip(found["buckets"], full["buckets"]):
        # both top-k partition the vocabulary more coarsely than the baseline's top-k with Q known everywhere
        assert 0 < topk["kl_mean"] <= exact["kl_mean"] + 1e-9
        assert topk["top1"] == pytest.approx(exact["top1"])
    same = longctx.measure_topk(engine(base_model), base, "p")
    assert all(b["kl_mean"] < 1e-6 and b["top1"] == 100.0 for b in same["buckets"])


def test_which_engines_are_read_and_why_the_others_are_not():
    path, why = longctx.engine_path("vllm", "cpu")
    assert path == longctx.PREFILL_READS_CACHE and why is None
    assert longctx.engine_path("vllm", "gpu") == (None, longctx.NOT_ON_A_GPU)
    path, why = longctx.engine_path("endpoint", None)
    assert path is None and "not endpoint" in why
