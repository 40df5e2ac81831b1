"""The KV repair's measurement (pipeline/evaluation/kv_sensitivity.py) on a tiny random model served
as a variant is (ReferenceBackend.session): the KL with every layer kept is zero, the KL with the
format on some layers is the exact KL of the variant the engine serves with those skip_layers, and a
TurboQuant cache is measured as decode reads it (rounded at every position, whatever the chunk)."""
from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline.engines.base import Variant
from pipeline.engines.reference.backend import ReferenceBackend
from pipeline.evaluation import kv_sensitivity, longctx
from pipeline.schema import Eval, KvMode, Model, Reference, Tier
from tests import tiny_model
from tests.conftest import ROOT

pytestmark = pytest.mark.model
LAYERS, LENGTH, CHUNK = 4, 300, 128


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    return tiny_model.build(tmp_path_factory.mktemp("tiny"), ROOT, layers=LAYERS)


def served(ckpt: Path, mode: KvMode):
    v = Variant("tiny", "fp16", "kv", ckpt, Model(source="local:tiny", dtype="float32", apply_chat_template=False,
                                                  add_bos_token=False), Tier(method="baseline"), mode, serve_path=ckpt)
    return ReferenceBackend(Reference(dtype="float32"), Eval(tasks={})).session(v)


def texts(n: int = 2) -> list[list[int]]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, 512, (LENGTH,), generator=g).tolist() for _ in range(n)]


def test_every_layer_kept_is_the_models_own_cache_and_each_layer_alone_costs_kl(ckpt):
    with served(ckpt, KvMode("nvfp4", skip_layers=[0])) as s:
        probe = kv_sensitivity.Probe(s.model, "nvfp4", texts(), CHUNK)
        assert probe.layers == LAYERS and probe.positions == 2 * (LENGTH - 1)
        assert probe.kl(list(range(LAYERS))) == 0.0
        alone = probe.per_layer()
        assert sorted(alone) == list(range(LAYERS)) and all(v > 0 for v in alone.values())
        assert probe.kl([]) > max(alone.values()) * 0.5


def test_the_kl_measured_is_the_exact_kl_of_the_variant_served_with_those_layers_kept(ckpt):
    seqs, kept = texts(), [1, 3]
    with served(ckpt, KvMode("int4_per_token_head", skip_layers=[0])) as s:
        measured = kv_sensitivity.Probe(s.model, "int4_per_token_head", seqs, CHUNK).kl(kept)
    with served(ckpt, KvMode("auto")) as base, served(ckpt, KvMode("int4_per_token_head", skip_layers=kept)) as v:
        exact = longctx.exact(base.model, v.model, seqs, CHUNK)
    per_position = np.concatenate([kl for kl, _ in exact])
    assert measured > 0 and measured == pytest.approx(float(per_position.mean()), rel=1e-4)


@pytest.fixture(scope="module")
def ckpt6(tmp_path_factory) -> Path:
    """Six layers: vLLM keeps TurboQuant's first and last two in the model's dtype, two stay quantized."""
    return tiny_model.build(tmp_path_factory.mktemp("tiny6"), ROOT, layers=6)


def test_turboquant_is_measured_as_decode_reads_it_whatever_the_chunk(ckpt6):
    """vLLM's TurboQuant prefill reads its own chunk raw; the probe reads every position rounded, so
    the chunk size changes nothing and one whole-text chunk still costs KL."""
    with served(ckpt6, KvMode("turboquant_k3v4_nc", skip_layers=[0])) as s:
        whole = kv_sensitivity.Probe(s.model, "turboquant_k3v4_nc", texts(1), chunk=LENGTH).kl([])
        chunked = kv_sensitivity.Probe(s.model, "turboquant_k3v4_nc", texts(1), chunk=CHUNK).kl([])
        assert whole > 0 and whole == pytest.approx(chunked, rel=1e-3)
        assert all(not m.qtier_kv_round_trip.prefill_raw for m in s.model.modules()
                   if hasattr(m, "qtier_kv_round_trip"))


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory) -> Path:
    from pipeline.domain.model.sources import embedded_gguf_path
    from pipeline.stages.prepare import from_gguf

    out = tmp_path_factory.mktemp("smollm2")
    from_gguf(embedded_gguf_path("smollm2-135m-instruct"), out)
    return out


def test_the_repair_on_the_default_model_keeps_the_fewest_top_ranked_layers_that_meet_the_bound(smollm2):
    """SmolLM2-135M (30 layers), nvfp4, one long text's first 384 tokens in chunks of 128: the layers
    ranked, the bound set between the KL of the format on every layer and none, and the layers chosen
    meet it as measured again while one fewer of the top-ranked do not."""
    from pipeline.domain.sets import long_texts
    from pipeline.quant import kv_repair
    from transformers import AutoTokenizer

    text = long_texts.texts("eval_sets/long_texts.jsonl", "text", 1, ROOT)[0][1]
    seq = AutoTokenizer.from_pretrained(smollm2)(text).input_ids[:384]
    with served(smollm2, KvMode("nvfp4", skip_layers=[0])) as s:
        probe = kv_sensitivity.Probe(s.model, "nvfp4", [seq], chunk=128)
        alone = probe.per_layer()
        assert probe.layers == 30 and len(set(alone.values())) > 20     # measured, not a constant
        order = kv_repair.ranked(alone)
        full = probe.kl([])
        bound = full / 4
        found = kv_repair.choose(order, probe.kl, bound, max_candidates=10)
        rec = kv_repair.summary(order, alone, found)
        assert rec["met_bound"] and 0 < rec["kept"] < 30 and rec["tried"]["0"] == pytest.approx(full, abs=1e-6)
        assert probe.kl(rec["skip_layers"]) <= bound < probe.kl(sorted(order[:rec["kept"] - 1]))
