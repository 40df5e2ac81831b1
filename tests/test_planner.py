import pytest

from pipeline.domain.hardware import memory
from pipeline.schema import Memory, TargetGpu
from pipeline.scoring.planning import planner

GIB = 2**30
QWEN3_4B = {"num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
            "hidden_size": 2560}


def test_capacity_matches_vllm_documented_qwen3_4b_within_1_percent():
    # vLLM docs: Qwen3-4B, "Available KV cache memory: 11.47 GiB ... GPU KV cache size: 83,488 tokens"
    per_token = memory.kv_bytes_per_token(QWEN3_4B, 2)
    assert per_token == 144 * 1024
    tokens = planner.kv_capacity_tokens(11.47 * GIB, per_token, 16)
    assert tokens % 16 == 0
    assert tokens == pytest.approx(83_488, rel=0.01)


def test_plan_hand_computed():
    gpu = TargetGpu(24, 1000, 8.9)
    budget = Memory({"X-24G": gpu}, max_model_len=4096, gpu_memory_utilization=0.9, block_size=16,
                    activation_peak_gib=1.0, non_torch_overhead_gib=0.5)
    weights = 16 * GIB                                    # a 8B model in fp16
    per_token = 128 * 1024                                # Llama-3-8B-like, fp16 KV
    p = planner.plan("X", gpu, budget, weights, per_token)
    available = 24 * 0.9 * GIB - 16 * GIB - 1.5 * GIB     # 4.1 GiB
    assert p.fits and p.available_kv_bytes == int(available)
    assert p.kv_tokens == int(available // (16 * per_token)) * 16 == 33_584
    assert p.max_concurrency == pytest.approx(33_584 / 4096)
    assert p.roofline_tokens_per_s == pytest.approx(1000e9 / (weights + 2048 * per_token))


def test_weights_alone_exceeding_budget_do_not_fit():
    p = planner.plan("L4", TargetGpu(24, 300, 8.9), Memory({}), 30 * GIB, 1024)
    assert not p.fits and "exceed" in p.reason and p.kv_tokens == 0


def test_kv_smaller_than_one_request_does_not_fit():
    budget = Memory({}, max_model_len=32768)
    p = planner.plan("L4", TargetGpu(24, 300, 8.9), budget, 19 * GIB, 128 * 1024)
    assert not p.fits and "less than one max_model_len" in p.reason


def test_fp8_kv_doubles_capacity():
    gpu, budget = TargetGpu(80, 2039, 8.0), Memory({})
    a = planner.plan("X", gpu, budget, 16 * GIB, 128 * 1024)
    b = planner.plan("X", gpu, budget, 16 * GIB, 64 * 1024)
    assert b.kv_tokens == pytest.approx(2 * a.kv_tokens, abs=16)
