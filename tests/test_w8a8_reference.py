"""The reference backend serves W8A8 checkpoints through the engine's arithmetic (pipeline/engines/reference/w8a8.py),
not compressed-tensors' fake quantization: on a tiny random Llama quantized by llm-compressor (int8 and
fp8, dynamic per-token; int8 with static activation scales), every quantized Linear runs the W8A8 GEMM,
the session records which, and the logits stay close to the fake-quantized model's.

Both run in float32 (serving.reference.dtype), so the figures hold on any CPU. Tolerance (max |logit
difference| over 2 x 40 tokens, logits of magnitude ~1.45): measured 0.0087 for int8 dynamic (vLLM's
activation scale is max|x| / 127, compressed-tensors' max|x| / 127.5: a different grid, not only rounding),
3e-7 for fp8 and 2e-7 for int8 static (same grid; only where float32 rounds differs). Allowed: 0.05, 1e-4
and 1e-4. On a bfloat16 CPU the fake-quantized model rounds every product to 8 bits: that difference is
what the exact path removes, not what this test bounds. Model tier: imports torch and llm-compressor."""
import json
import shutil

import pytest
import torch

from pipeline.engines import Unsupported, Variant
from pipeline.engines.reference import w8a8_gemm
from pipeline.engines.reference.backend import ReferenceBackend
from pipeline.domain.hardware.machine import cpu_info
from pipeline.schema import Eval, KvMode, Model, Reference, Tier
from tests import tiny_model
from tests.conftest import ROOT

pytestmark = pytest.mark.model

SCHEMES = {
    "int8": ("int", "token", True),
    "fp8": ("float", "token", True),
    "int8-static": ("int", "tensor", False),
}
TOLERANCE = {"int8": 0.05, "fp8": 1e-4, "int8-static": 1e-4}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    from datasets import Dataset
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pipeline.quant import recipes
    from pipeline.quant.compat import patch_llmcompressor_pin_memory

    tmp = tmp_path_factory.mktemp("w8a8")
    # intermediate 1040: down_proj's rows are longer than the float32-exact 1024, so they are chunked
    src = tiny_model.build(tmp / "tiny", ROOT, intermediate=1040)
    patch_llmcompressor_pin_memory()
    texts = [json.loads(line)["text"] for line in (ROOT / "calibration/calibration.jsonl").read_text().splitlines()[:4]]
    out = {}
    for name, (kind, strategy, dynamic) in SCHEMES.items():
        model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(src)
        group = {"targets": ["Linear"],
                 "weights": {"num_bits": 8, "type": kind, "symmetric": True, "strategy": "channel", "dynamic": False},
                 "input_activations": {"num_bits": 8, "type": kind, "symmetric": True, "strategy": strategy,
                                       "dynamic": dynamic}}
        recipe = {"quant_stage": {"quant_modifiers": {"QuantizationModifier": {
            "ignore": ["lm_head"], "config_groups": {"group_0": group}}}}}
        data = {} if dynamic else {"dataset": Dataset.from_dict({"text": texts}), "text_column": "text",
                                   "num_calibration_samples": 4, "max_seq_length": 32,
                                   "shuffle_calibration_samples": False}
        oneshot(model=model, tokenizer=tok, recipe=recipes.to_yaml(recipe), log_dir=None, **data)
        ckpt = tmp / name
        model.to(torch.float16).save_pretrained(ckpt, save_compressed=True)
        tok.save_pretrained(ckpt)
        out[name] = ckpt
    return out


def variant(ckpt):
    return Variant("tiny", "w8a8", "auto", ckpt, Model(source="local:tiny", dtype="float16", apply_chat_template=False, add_bos_token=False),
                   Tier(method="baseline"), KvMode(cache_dtype="auto"), serve_path=ckpt)


def fake_quantized(ckpt, dtype: str):
    from transformers import AutoModelForCausalLM, CompressedTensorsConfig

    return AutoModelForCausalLM.from_pretrained(ckpt, dtype=getattr(torch, dtype),
                                                quantization_config=CompressedTensorsConfig(run_compressed=False)).eval()


@pytest.mark.parametrize("name", list(SCHEMES))
def test_the_reference_runs_w8a8_layers_through_the_engines_arithmetic(checkpoints, name, monkeypatch):
    calls = []
    real = w8a8_gemm.linear
    monkeypatch.setattr(w8a8_gemm, "linear", lambda x, op: calls.append(op) or real(x, op))
    ids = torch.randint(0, 500, (2, 40), generator=torch.Generator().manual_seed(0))
    with ReferenceBackend(Reference(dtype="float32"), Eval(tasks={})).session(variant(checkpoints[name])) as s:
        kind = "fp8" if name == "fp8" else "int8"
        acts = "static per-tensor" if name == "int8-static" else "per-token"
        assert s.info["w8a8_arithmetic"].startswith(f"{kind} W8A8 as vLLM") and f"{acts} activations" in s.info["w8a8_arithmetic"]
        assert s.info["w8a8_layers"] == 14            # 2 layers x (q, k, v, o, gate, up, down); lm_head is not quantized
        assert s.info["shared_prompt_prefix"] is True      # as vLLM's prefix caching computes a shared prompt
        linears = {n: m for n, m in s.model.named_modules() if isinstance(m, torch.nn.Linear)}
        assert {n for n, m in linears.items() if hasattr(m, "qtier_w8a8")} == set(linears) - {"lm_head"}
        op = s.model.model.layers[0].mlp.down_proj.qtier_w8a8
        # int8 runs the exact GEMM the session timed faster here: torch._int_mm's weight is [K, N], float32's [N, K]
        timed = s.info.get("w8a8_gemm_ms")
        impl = min(timed, key=timed.get) if kind == "int8" else "float32"
        assert (timed is not None) == (kind == "int8")
        assert op.impl == impl and tuple(op.weight.shape) == ((1040, 64) if impl == "int_mm" else (64, 1040))
        if name == "int8-static":
            assert s.model.model.layers[0].mlp.down_proj.qtier_w8a8.input_scale is not None
        with torch.no_grad():
            exact = s.model(ids).logits
        dtype = s.info["dtype"]
    assert len(calls) == 14
    with torch.no_grad():
        fake = fake_quantized(checkpoints[name], dtype)(ids).logits
    diff = (exact.float() - fake.float()).abs().max().item()
    assert 0 < diff <= TOLERANCE[name], diff
    assert (exact.argmax(-1) == fake.argmax(-1)).float().mean() >= 0.9


def test_a_scheme_without_an_implementation_is_refused_before_the_model_loads(checkpoints, tmp_path, monkeypatch):
    ckpt = tmp_path / "asym"
    shutil.copytree(checkpoints["int8"], ckpt)
    cfg = json.loads((ckpt / "config.json").read_text())
    cfg["quantization_config"]["config_groups"]["group_0"]["input_activations"]["symmetric"] = False
    (ckpt / "config.json").write_text(json.dumps(cfg))
    import transformers

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(Unsupported, match=r"input_activations\.symmetric = False"):
        with ReferenceBackend(Reference(), Eval(tasks={})).session(variant(ckpt)):
            pass
