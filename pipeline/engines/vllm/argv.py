"""The vLLM command lines of a variant: `vllm serve` and `vllm bench serve`, run through
launch.py under the vLLM environment's python, and that process's environment. Pure."""
from __future__ import annotations

import os
from pathlib import Path

from pipeline.engines.base import Variant
from pipeline.domain.hardware.serve_line import vllm_serve_args
from pipeline.domain.hardware import compute
from pipeline.schema import Slo, Vllm
from pipeline.engines.vllm import slo as slo_search

LAUNCHER = Path(__file__).with_name("launch.py")


def served_dtype(engine: dict[str, str], requested: str) -> str:
    """The activation dtype the engine reports in its startup log ("torch.bfloat16"), else the one
    requested on its command line."""
    return str(engine.get("dtype") or requested).replace("torch.", "")


def serve_argv(cfg: Vllm, variant: Variant, port: int, dev: str) -> tuple[list[str], str]:
    """The server command line for a variant (and the model path it serves). Pure."""
    target = str(variant.serve_path)
    extra: dict[str, object] = {}
    if variant.load_quantization is not None:
        extra["quantization"] = "bitsandbytes"
    dtype = compute.compute_dtype(dev, variant.model_cfg.dtype, cfg.dtype)   # the same for every tier
    extra.update(
        max_model_len=cfg.max_model_len,
        gpu_memory_utilization=cfg.cpu_memory_utilization if dev == "cpu" else cfg.gpu_memory_utilization,
        max_num_seqs=cfg.max_num_seqs,
        tensor_parallel_size=cfg.tensor_parallel_size if cfg.tensor_parallel_size != 1 else None,
        pipeline_parallel_size=cfg.pipeline_parallel_size if cfg.pipeline_parallel_size != 1 else None,
        enforce_eager=cfg.enforce_eager,
        trust_remote_code=variant.model_cfg.trust_remote_code,
        host="127.0.0.1", port=port, served_model_name=variant.key,
        kv_cache_dtype_skip_layers=list(variant.kv_cfg.skip_layers),
    )
    args = vllm_serve_args(target, dtype, variant.kv_cfg.cache_dtype, extra)
    return [cfg.python, str(LAUNCHER), *args[1:]], target


def bench_file(concurrency: int, slo: Slo | None = None) -> str:
    return f"{'slo' if slo else 'bench'}-c{concurrency}.json"


# request ids of `--request-id-prefix` P are P + str(i): with P 31 hex digits and at most 10 requests each id
# is 32 hex digits, which a server taking only UUIDs as x-request-id accepts (llama-cpp-python's)
UUID_IDS_MAX_PROMPTS = 10


def bench_argv(cfg: Vllm, target: str, served: str, base_url: str, concurrency: int, out_dir: Path,
               slo: Slo | None = None, uuid_prefix: str | None = None) -> list[str]:
    """`vllm bench serve` at one concurrency. With an SLO (an SLO probe): its percentile is reported too,
    vLLM counts goodput (`--goodput ttft:<ms> tpot:<ms>`, requests meeting both limits) and every
    concurrency slot gets at least one request. `uuid_prefix` (31 hex digits): request ids that parse as
    UUIDs, at most UUID_IDS_MAX_PROMPTS requests."""
    b = cfg.bench
    percentiles = ["50", "99"]
    num_prompts = b.num_prompts
    if slo is not None:
        percentiles = sorted(set(percentiles) | {slo_search.percentile_word(slo.percentile)}, key=float)
        num_prompts = max(num_prompts, concurrency)
    if uuid_prefix is not None:
        num_prompts = min(num_prompts, UUID_IDS_MAX_PROMPTS)
    argv = [cfg.python, str(LAUNCHER), "bench", "serve", "--backend", "vllm",
            "--base-url", base_url, "--model", served, "--tokenizer", target,
            "--dataset-name", "random", "--random-input-len", str(b.input_len),
            "--random-output-len", str(b.output_len), "--ignore-eos", "--num-prompts", str(num_prompts),
            "--max-concurrency", str(concurrency), "--seed", str(b.seed),
            "--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", ",".join(percentiles)]
    if uuid_prefix is not None:
        argv += ["--request-id-prefix", uuid_prefix]
    if slo is not None:
        argv += ["--goodput", f"ttft:{slo.ttft_ms:g}", f"tpot:{slo.tpot_ms:g}"]
    return argv + ["--save-result", "--result-dir", str(out_dir), "--result-filename", bench_file(concurrency, slo)]


def server_env(dev: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The vLLM processes' environment: this one without hub tokens, offline, no usage statistics."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items()
           if not k.startswith(("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"))}
    env.update(HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    if dev == "cpu":
        env["VLLM_TARGET_DEVICE"] = "cpu"
    return env
