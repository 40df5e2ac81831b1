import pytest

from pipeline.domain.hardware import memory

LLAMA3_8B = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "hidden_size": 4096}
QWEN3_4B = {"num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "hidden_size": 2560}
SMOL = {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64,
        "hidden_size": 576}


def test_kv_bytes_per_token_published_configs():
    assert memory.kv_bytes_per_token(LLAMA3_8B, 2) == 128 * 1024
    assert memory.kv_bytes_per_token(QWEN3_4B, 2) == 144 * 1024   # head_dim 128 != 2560/32
    assert memory.kv_bytes_per_token(SMOL, 2) == 2 * 30 * 3 * 64 * 2
    assert memory.kv_bytes_per_token(SMOL, 1) == memory.kv_bytes_per_token(SMOL, 2) // 2


def test_mha_without_kv_heads_uses_attention_heads():
    cfg = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}
    assert memory.kv_bytes_per_token(cfg, 2) == 2 * 2 * 4 * 16 * 2


def test_kv_dtype_bytes():
    assert memory.kv_dtype_bytes("auto", "float16") == 2
    assert memory.kv_dtype_bytes("auto", "bfloat16") == 2
    assert memory.kv_dtype_bytes("fp8_e4m3", "float16") == 1
    with pytest.raises(ValueError):
        memory.kv_dtype_bytes("int3", "float16")


def test_weight_bytes_counts_weight_files_only(tmp_path):
    (tmp_path / "model-00001.safetensors").write_bytes(b"x" * 100)
    (tmp_path / "model-00002.safetensors").write_bytes(b"x" * 50)
    (tmp_path / "tokenizer.json").write_bytes(b"x" * 1000)
    assert memory.weight_bytes(tmp_path) == 150
