"""Models larger than one GPU: tensor and pipeline parallel sizes reach vLLM's command line, and the
memory plan is per shard, checked against a hand computation for Llama-3-8B and -70B shapes."""
import dataclasses
from types import SimpleNamespace

import pytest

from pipeline.engines.vllm import argv as vllm_argv
from pipeline.schema import FieldError, KvMode, Memory, TargetGpu
from pipeline.schema.serving import Vllm
from pipeline.scoring.planning import planner

GIB = 2**30
H100 = TargetGpu(memory_gib=80, bandwidth_gbps=3350, compute_capability=9.0)
MEM = Memory(target_gpus={"H100": H100}, max_model_len=8192)
# Llama-3 shapes: fp16 weights, fp16 KV = 2 (K, V) x layers x 8 KV heads x head dim 128 x 2 bytes
L8 = SimpleNamespace(weights=16_060_000_000, kv=2 * 32 * 8 * 128 * 2)
L70 = SimpleNamespace(weights=141_100_000_000, kv=2 * 80 * 8 * 128 * 2)


def by_hand(weights, kv, tp, pp, kv_heads=8):
    total = 80 * GIB * 0.9
    available = total - weights / (tp * pp) - 1.5 * GIB
    per_token = kv / (pp * min(tp, kv_heads))
    return int(available // (16 * per_token)) * 16


@pytest.mark.parametrize("model,tp,pp", [(L8, 1, 1), (L8, 2, 1), (L70, 4, 1), (L70, 8, 1), (L70, 4, 2), (L70, 16, 1)])
def test_the_plan_per_shard_matches_a_hand_computation(model, tp, pp):
    p = planner.plan("H100", H100, MEM, model.weights, model.kv, tp, pp, kv_heads=8)
    assert p.fits and p.kv_tokens == by_hand(model.weights, model.kv, tp, pp)


def test_a_70b_model_does_not_fit_one_gpu_and_says_per_shard_why():
    p = planner.plan("H100", H100, MEM, L70.weights, L70.kv)
    assert not p.fits and p.reason == "weights 131.4 GiB exceed the 72.0 GiB budget"
    tight = planner.plan("H100", H100, dataclasses.replace(MEM, max_model_len=1_000_000), L70.weights, L70.kv, 2)
    assert not tight.fits and "per GPU of tp 2 x pp 1" in tight.reason


def test_tensor_and_pipeline_parallel_sizes_reach_vllm_s_argv():
    variant = SimpleNamespace(serve_path="ckpt", load_quantization=None, key="m-int8-auto",
                              model_cfg=SimpleNamespace(dtype="float16", trust_remote_code=False),
                              kv_cfg=KvMode(cache_dtype="auto"))
    argv, _ = vllm_argv.serve_argv(Vllm(tensor_parallel_size=4, pipeline_parallel_size=2), variant, 8000, "gpu")
    joined = " ".join(argv)
    assert "--tensor-parallel-size 4" in joined and "--pipeline-parallel-size 2" in joined
    plain, _ = vllm_argv.serve_argv(Vllm(), variant, 8000, "gpu")
    assert "parallel-size" not in " ".join(plain)
    with pytest.raises(FieldError):
        Vllm(pipeline_parallel_size=0)
