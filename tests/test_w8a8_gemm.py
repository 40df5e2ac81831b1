"""The W8A8 arithmetic of pipeline/engines/reference/w8a8_gemm.py against independent references: the int8 GEMM
exactly equal to an int64 matmul (extremes, K past the float32-exact bound, odd shapes), the activation
quantization bit for bit as vLLM's formula in numpy, the fp8 operands as an explicit e4m3 rounding, and
both exact implementations giving identical outputs. Model tier: imports torch."""
import numpy as np
import pytest
import torch

from pipeline.engines.reference import w8a8_gemm as g

pytestmark = pytest.mark.model

SHAPES = [(1, 1, 1), (3, 7, 5), (17, 1023, 9), (5, 1024, 3), (4, 1025, 6), (2, 2049, 3), (7, 3000, 11)]


def codes(shape, gen, extremes=True):
    c = torch.randint(-128, 128, shape, generator=gen, dtype=torch.int8)
    if extremes:            # rows of -128, of 127, and a mix of both: the largest products and sums
        flat = c.view(-1, shape[-1])
        flat[0] = -128
        if flat.shape[0] > 1:
            flat[1] = 127
        if flat.shape[0] > 2:
            flat[2, ::2] = -128
            flat[2, 1::2] = 127
    return c


def int64_ref(x: torch.Tensor, w: torch.Tensor) -> np.ndarray:
    return x.numpy().astype(np.int64) @ w.numpy().astype(np.int64).T


def test_the_float32_exact_bound_is_tight():
    assert g.EXACT_K * 128 * 128 == 2 ** 24                 # -128 * -128 summed 1024 times
    assert int(np.float32(2 ** 24)) == 2 ** 24 and int(np.float32(2 ** 24 + 1)) != 2 ** 24 + 1
    # one product more and a float32 sum can be wrong: 1024 x (-128 x -128) + 1 x 1 = 2**24 + 1
    products = np.array([128 * 128] * g.EXACT_K + [1], dtype=np.float32)
    assert int(np.cumsum(products, dtype=np.float32)[-1]) == 2 ** 24 != 2 ** 24 + 1


@pytest.mark.parametrize("m, k, n", SHAPES)
def test_int8_gemm_equals_the_int64_matmul_exactly(m, k, n):
    gen = torch.Generator().manual_seed(m * k * n)
    x, w = codes((m, k), gen), codes((n, k), gen)
    op = g.operands("int8", w, torch.ones(n), None, None, "float32")
    got = g.int8_gemm(x.to(torch.float32), op)
    ref = int64_ref(x, w)
    assert got.dtype == torch.float32
    np.testing.assert_array_equal(got.numpy(), ref.astype(np.float32))     # the int32 -> float32 rounding
    if k <= g.EXACT_K:
        np.testing.assert_array_equal(got.numpy().astype(np.int64), ref)   # below 2**24: the integers


def test_the_worst_case_row_past_1024_is_exact():
    k = 2 * g.EXACT_K + 1
    x = torch.full((2, k), -128, dtype=torch.int8)
    w = torch.full((3, k), -128, dtype=torch.int8)
    w[1] = 127
    w[2, -1] = 127
    op = g.operands("int8", w, torch.ones(3), None, None, "float32")
    got = g.int8_gemm(x.to(torch.float32), op).to(torch.float64).numpy()
    np.testing.assert_array_equal(got, int64_ref(x, w).astype(np.float32))


@pytest.mark.parametrize("impl", g.IMPLS)
def test_a_sum_past_2_to_the_24_is_the_exact_one_rounded_once(impl):
    """1024 products of 2**14 then 1025 of 1: the sum 2**24 + 1025 rounds once to 2**24 + 1024 (as vLLM
    converts its int32); a float32 running sum sticks at 2**24 once it gets there."""
    row = [-128] * g.EXACT_K + [1] * (g.EXACT_K + 1)
    x = torch.tensor([row], dtype=torch.int8)
    op = g.operands("int8", x.clone(), torch.ones(1), None, None, impl)
    assert g.int8_gemm(x.to(torch.float32), op).item() == 2 ** 24 + 1024
    products = (x.to(torch.float32) ** 2).numpy()[0]
    assert int(np.cumsum(products, dtype=np.float32)[-1]) == 2 ** 24


def vllm_quant_int8(x: np.ndarray, scale=None):
    """vLLM's dynamic_scaled_int8_quant / static_scaled_int8_quant (csrc/cpu/dnnl_kernels.cpp), in numpy."""
    if scale is None:
        scale = (np.abs(x).max(axis=-1, keepdims=True) / np.float32(127.0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(scale > 0, 1.0 / scale.astype(np.float64), 0.0).astype(np.float32)
    return np.rint(np.clip(x * inv, np.float32(-128), np.float32(127))).astype(np.float32), scale


def test_int8_activations_are_quantized_bit_for_bit_as_vllm():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(9, 577, generator=gen) * torch.logspace(-3, 3, 9).unsqueeze(1)
    x[3] = 0.0                                    # an all-zero token: codes 0, no NaN
    x[4, 10] = 1e4                                # one outlier flattens the rest of its row
    q, s = g.quantize_int8(x)
    rq, rs = vllm_quant_int8(x.numpy())
    np.testing.assert_array_equal(s.numpy(), rs)
    np.testing.assert_array_equal(q.numpy(), rq)
    assert q.abs().max() <= 127 and torch.equal(q[3], torch.zeros(577))
    static = torch.tensor([0.01])
    q, s = g.quantize_int8(x, static)
    np.testing.assert_array_equal(q.numpy(), vllm_quant_int8(x.numpy(), np.float32([0.01]))[0])
    assert q.min() == -128 and q.max() == 127     # a static scale saturates
    assert torch.equal(s, static)


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("m, k, n", [(1, 64, 5), (6, 1536, 7), (5, 577, 3)])
def test_int8_linear_is_the_exact_sum_scaled_in_float32(m, k, n, static):
    gen = torch.Generator().manual_seed(k + n)
    x = torch.randn(2, m, k, generator=gen).to(torch.bfloat16)
    w = codes((n, k), gen)
    ws = (torch.rand(n, 1, generator=gen) / 100).to(torch.float16)       # as the checkpoint stores them
    xs = torch.tensor([0.02], dtype=torch.float16) if static else None
    bias = torch.randn(n, generator=gen)
    op = g.operands("int8", w, ws, xs, bias, "float32")
    y = g.linear(x, op)
    assert y.dtype == torch.bfloat16 and y.shape == (2, m, n)
    xf = x.reshape(-1, k).to(torch.float32).numpy()
    q, s = vllm_quant_int8(xf, None if xs is None else xs.float().numpy())
    acc = (q.astype(np.int64) @ w.numpy().astype(np.int64).T).astype(np.float32)
    ref = (acc * ws.float().numpy().reshape(-1)) * s + bias.numpy()
    assert torch.equal(y.reshape(-1, n), torch.from_numpy(ref).to(torch.bfloat16))


@pytest.mark.parametrize("m, k, n", [(1, 8, 3), (5, 1030, 4), (3, 2049, 2)])
def test_int_mm_and_float32_give_identical_outputs(m, k, n):
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(m, k, generator=gen)
    w = codes((n, k), gen)
    ws = torch.rand(n, generator=gen)
    a = g.linear(x, g.operands("int8", w, ws, None, None, "float32"))
    b = g.linear(x, g.operands("int8", w, ws, None, None, "int_mm"))
    assert torch.equal(a, b)


def e4m3_round(v: np.ndarray) -> np.ndarray:
    """Round float32 values already in [-448, 448] to float8_e4m3fn by hand: 3 mantissa bits, exponent
    bias 7 (smallest normal 2**-6, subnormal step 2**-9), nearest with ties to even."""
    a = np.abs(v).astype(np.float64)
    exp = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    step = np.where(a >= 2.0 ** -6, 2.0 ** (np.maximum(exp, -6) - 3), 2.0 ** -9)
    return (np.sign(v) * np.rint(a / step) * step).astype(np.float32)


def test_e4m3_reference_rounding_agrees_with_itself_on_known_values():
    vals = np.float32([0, 1, 1.0625, 1.125, 1.1875, 448, 2 ** -9, 3 * 2 ** -10, 2 ** -6 + 2 ** -10, -17])
    np.testing.assert_array_equal(e4m3_round(vals), np.float32([0, 1, 1.0, 1.125, 1.25, 448, 2 ** -9,
                                                                2 * 2 ** -9, 2 ** -6, -16]))


def test_fp8_operands_are_e4m3_rounded_and_summed_in_float32():
    gen = torch.Generator().manual_seed(3)
    m, k, n = 6, 1300, 5
    x = torch.randn(m, k, generator=gen) * 3
    x[2] = 0.0
    w = (torch.randn(n, k, generator=gen) * 100).clamp(-448, 448).to(torch.float8_e4m3fn)
    ws = torch.rand(n, 1, generator=gen).to(torch.float16)
    q, s = g.quantize_fp8(x)
    amax = np.abs(x.numpy()).max(axis=1, keepdims=True)
    rs = np.maximum((amax / np.float32(448)).astype(np.float32), np.float32(g.FP8_MIN_SCALE))
    np.testing.assert_array_equal(s.numpy(), rs)
    scaled = np.clip(x.numpy() * (np.float32(1) / rs), -448, 448)
    np.testing.assert_array_equal(q.to(torch.float32).numpy(), e4m3_round(scaled))
    y = g.linear(x, g.operands("fp8", w, ws, None, None))
    prods = q.to(torch.float64).numpy()[:, None, :] * w.to(torch.float64).numpy()[None, :, :]
    exact = prods.sum(-1) * rs.astype(np.float64) * ws.double().numpy().reshape(-1)
    # float32 sums: at most k roundings of 2**-24 relative to the sum of |products|
    bound = k * 2.0 ** -24 * np.abs(prods).sum(-1) * rs * ws.double().numpy().reshape(-1) + 1e-30
    assert np.all(np.abs(y.double().numpy() - exact) <= bound + 2.0 ** -23 * np.abs(exact))
    assert torch.equal(y[2], torch.zeros(n))


def test_the_exact_path_refuses_reduced_precision_float32():
    op = g.operands("int8", torch.ones(2, 4, dtype=torch.int8), torch.ones(2), None, None)
    torch.set_float32_matmul_precision("medium")        # oneDNN may then multiply float32 in bfloat16
    try:
        with pytest.raises(RuntimeError, match="full precision"):
            g.linear(torch.ones(1, 4), op)
    finally:
        torch.set_float32_matmul_precision("highest")
    # codes 127, sum 4 x 127, scale 1/127
    torch.testing.assert_close(g.linear(torch.ones(1, 4), op), torch.full((1, 2), 4.0))


def test_operands_reject_a_wrong_weight_or_scale():
    with pytest.raises(ValueError, match="expected torch.int8"):
        g.operands("int8", torch.ones(2, 4), torch.ones(2), None, None)
    with pytest.raises(ValueError, match="3 values for 2 output channels"):
        g.operands("int8", torch.ones(2, 4, dtype=torch.int8), torch.ones(3), None, None)
    with pytest.raises(ValueError, match="no 'int_mm' GEMM for fp8"):
        g.operands("fp8", torch.ones(2, 4).to(torch.float8_e4m3fn), torch.ones(2), None, None, "int_mm")


def test_fastest_impl_picks_the_faster_of_the_two_exact_gemms():
    assert g.fastest_impl(64, 32, timer={"float32": 2.0, "int_mm": 0.5}.get) == ("int_mm", {"float32": 2.0, "int_mm": 0.5})
    assert g.fastest_impl(64, 32, timer={"float32": 0.5, "int_mm": 9.0}.get)[0] == "float32"
    assert g.fastest_impl(64, 32, timer=lambda impl: 1.0)[0] == "float32"      # a tie keeps the portable one


def test_fastest_impl_times_both_here():
    impl, ms = g.fastest_impl(96, 48, rows=16, repeats=1)
    assert impl in g.IMPLS and set(ms) == set(g.IMPLS) and all(v > 0 for v in ms.values())
    assert ms[impl] == min(ms.values())
