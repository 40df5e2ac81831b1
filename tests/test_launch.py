from pipeline.domain.hardware import serve_line as launch


def test_vllm_serve_args_for_fp8_kv():
    args = launch.vllm_serve_args("artifacts/m/tiers/int4-gptq", "float16", "fp8_e4m3",
                                  {"max_model_len": 4096, "enforce_eager": True, "quantization": None})
    assert args == ["vllm", "serve", "artifacts/m/tiers/int4-gptq", "--dtype", "float16",
                    "--kv-cache-dtype", "fp8", "--max-model-len", "4096", "--enforce-eager"]
    assert "--quantization" not in args
