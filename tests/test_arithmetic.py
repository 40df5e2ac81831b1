"""The noise stage's second arithmetic on the reference backend (pipeline/engines/reference/arithmetic.py): every
Linear computes on bfloat16-rounded operands with float32 accumulation (model tier: tiny model)."""
import pytest
import torch

from pipeline.engines.reference import arithmetic
from pipeline.engines.base import Variant
from pipeline.engines.reference.backend import ReferenceBackend
from pipeline.schema import Eval, KvMode, Model, Reference, Tier
from tests import tiny_model

pytestmark = pytest.mark.model


def test_a_linear_computes_on_bf16_rounded_operands():
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32)
    x = torch.randn(3, 64)
    expected = torch.nn.functional.linear(x.to(torch.bfloat16).float(), lin.weight.to(torch.bfloat16).float(), lin.bias)
    plain = lin(x)
    assert arithmetic.bf16_operands(torch.nn.Sequential(lin)) == (1, 0)
    assert torch.equal(lin(x), expected) and not torch.equal(lin(x), plain)


def test_a_quantized_linear_keeps_its_kernel_and_computes_on_a_rounded_input():
    """bitsandbytes' layers hold integer codes (CI's AVX2 machine checks nf4 in bf16-operands)."""
    torch.manual_seed(0)

    class Int8Linear(torch.nn.Linear):          # what Linear4bit / Linear8bitLt look like to the walk
        def __init__(self):
            super().__init__(64, 32)
            self.weight = torch.nn.Parameter(torch.randint(-127, 127, (32, 64), dtype=torch.int8), requires_grad=False)
            self.seen = None

        def forward(self, x):
            self.seen = x
            return torch.nn.functional.linear(x, self.weight.float() / 127)

    q, lin = Int8Linear(), torch.nn.Linear(64, 64)
    codes = q.weight.clone()
    x = torch.randn(3, 64)
    assert arithmetic.bf16_operands(torch.nn.Sequential(lin, q)) == (1, 1)
    torch.nn.Sequential(lin, q)(x)
    assert torch.equal(q.weight, codes) and torch.equal(q.seen, q.seen.to(torch.bfloat16).float())
    assert arithmetic.described(1, 1) == " (1 layers; 1 quantized layers: inputs only, their own weight kernel)"


def test_a_half_precision_linear_is_refused():
    with pytest.raises(ValueError, match="needs a float32 model, this Linear is torch.float16"):
        arithmetic.bf16_operands(torch.nn.Sequential(torch.nn.Linear(4, 4).half()))


@pytest.mark.parametrize("choice, dtype, expected", [("auto", "float32", "bf16-operands"),
                                                     ("auto", "bfloat16", "float32"),
                                                     ("float32", "float32", "float32")])
def test_auto_is_the_other_arithmetic(choice, dtype, expected):
    assert arithmetic.resolve(choice, dtype) == expected


def test_a_noise_session_computes_in_the_second_arithmetic_and_compares_with_the_plain_baseline(tmp_path, root):
    ckpt = tiny_model.build(tmp_path / "tiny", root)
    v = Variant("tiny", "fp16", "auto", ckpt, Model(source="local:tiny", dtype="float16", apply_chat_template=False, add_bos_token=False),
                Tier(method="baseline"), KvMode(cache_dtype="auto"), serve_path=ckpt)
    ids = [list(range(5, 40))]
    ref = Reference(dtype="float32")
    with ReferenceBackend(ref, Eval(tasks={})).session(v) as plain:
        assert "arithmetic" not in plain.info
        p = plain.model(torch.tensor(ids)).logits
    with ReferenceBackend(ref, Eval(tasks={}), noise=True).session(v) as noisy:
        assert noisy.info["arithmetic"].startswith("bf16-operands: every Linear's operands rounded to bfloat16")
        q = noisy.model(torch.tensor(ids)).logits
        ((kl, agree),) = noisy.exact_fidelity(v, ids)          # against the baseline in the plain arithmetic
    assert 0 < (p - q).abs().max() < 0.1
    assert float(kl.max()) > 0 and agree.mean() > 0.8


def test_a_session_opens_its_variant_in_the_second_arithmetic_beside_itself(tmp_path, root):
    """evaluate's check of each settled verdict (evaluation/second_arithmetic.py) opens this while the
    variant's own session stays open."""
    ckpt = tiny_model.build(tmp_path / "tiny", root)
    v = Variant("tiny", "fp16", "auto", ckpt, Model(source="local:tiny", dtype="float16", apply_chat_template=False, add_bos_token=False),
                Tier(method="baseline"), KvMode(cache_dtype="auto"), serve_path=ckpt)
    ids = torch.tensor([list(range(5, 40))])
    with ReferenceBackend(Reference(dtype="float32"), Eval(tasks={})).session(v) as plain:
        with plain.second_arithmetic(v) as second:
            assert second.info["arithmetic"].startswith("bf16-operands") and "arithmetic" not in plain.info
            assert second.model is not plain.model
            assert 0 < (plain.model(ids).logits - second.model(ids).logits).abs().max() < 0.1


@pytest.mark.parametrize("options", [{"load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
                                     {"load_in_8bit": True, "llm_int8_threshold": 6.0}])
def test_a_bitsandbytes_variant_opens_in_the_second_arithmetic(tmp_path, root, options):
    """What CI's AVX2 machine met: evaluate checks an nf4 verdict in bf16-operands."""
    ckpt = tiny_model.build(tmp_path / "tiny", root)
    v = Variant("tiny", "nf4", "auto", ckpt, Model(source="local:tiny", dtype="float16", apply_chat_template=False, add_bos_token=False),
                Tier(method="bnb-nf4", hardware="bitsandbytes"), KvMode(cache_dtype="auto"), serve_path=ckpt,
                load_quantization=options)
    ids = torch.tensor([list(range(5, 40))])
    with ReferenceBackend(Reference(dtype="float32"), Eval(tasks={}), noise=True).session(v) as second:
        assert "quantized layers: inputs only" in second.info["arithmetic"]
        assert torch.isfinite(second.model(ids).logits).all()
