"""One served vLLM variant as evaluate uses it (base.Session): lm-eval's model, prompt log-probs for
fidelity, the load test (`vllm bench serve` per concurrency, the SLO search), all within the wall
budget (serving.vllm.budget.max_wall_s) counted from the session's start."""
from __future__ import annotations

import copy
import json
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from pipeline.engines.vllm import logs
from pipeline.engines.base import TokenDists, Unsupported, Variant
from pipeline.engines.vllm.server import Server, prompt_logprobs
from pipeline.engines.vllm.argv import bench_argv, bench_file
from pipeline.engines.vllm.bench import bench_summary
from pipeline.schema import Slo, Vllm, replaced
from pipeline.engines.vllm import slo as slo_search


class WallBudget:
    """serving.vllm.budget.max_wall_s from the session's start (None: unbounded)."""

    def __init__(self, max_wall_s: float | None, clock=time.monotonic):
        self.clock, self.deadline = clock, None if max_wall_s is None else clock() + max_wall_s

    def remaining(self, cap: float | None = None) -> float | None:
        """Seconds left (at most cap); None when neither bounds it."""
        left = None if self.deadline is None else max(0.0, self.deadline - self.clock())
        return cap if left is None else left if cap is None else min(left, cap)


OUT_OF_WALL = "the wall budget ran out (serving.vllm.budget.max_wall_s)"


def other_concurrency(cfg: Vllm) -> Vllm:
    """vLLM's second arithmetic: lm-eval's requests in another batch composition (one at a time, or two
    at once when the run sends them one at a time); batch composition changes vLLM's sums (vllm #11658)."""
    return replaced(cfg, num_concurrent=1 if cfg.num_concurrent > 1 else 2,
                    gpu_num_concurrent=1 if cfg.gpu_num_concurrent > 1 else 2)


class VllmSession:
    uuid_prefix: str | None = None          # request ids as UUIDs for `vllm bench serve` (argv.bench_argv)
    loglik_refusal: str | None = None       # why log-likelihood tasks cannot be scored here (an endpoint's contract)
    make_lm: Callable[[Vllm], Any] | None = None     # lm-eval's client of this server at a config (the backend's)

    def __init__(self, server: Server, cfg: Vllm, target: str, served: str, lm, info: dict, out_dir: Path, env,
                 slo: Slo | None = None, wall: WallBudget | None = None, engine_version: str | None = None, *,
                 chat: bool):
        self.server, self.cfg, self.target, self.served = server, cfg, target, served
        self.lm, self.info, self.out_dir, self.env = lm, info, out_dir, env
        self.chat = chat        # lm-eval renders the chat template client-side, with the served tokenizer
        self.slo, self.wall = slo, wall or WallBudget(None)
        self.engine_version = engine_version      # the server's own answer (backend.served_version)

    def remaining_s(self) -> float | None:
        return self.wall.remaining()

    @contextmanager
    def second_arithmetic(self, variant: Variant):
        """This server, with lm-eval's requests in the other batch composition (other_concurrency): the
        arithmetic stage noise ran the baseline in, without a second server."""
        if self.make_lm is None:
            raise Unsupported("this session cannot send its requests in another batch composition")
        twin = copy.copy(self)
        twin.cfg = other_concurrency(self.cfg)
        twin.lm = self.make_lm(twin.cfg)
        twin.info = {**self.info, "num_concurrent": twin.cfg.num_concurrent}
        yield twin


    full_logits = False     # prompt_logprobs: the engine's own top-k (+ the prompt token) per position

    def exact_fidelity(self, baseline: Variant, seqs: list[list[int]]) -> list[tuple[Any, Any]]:
        """vLLM answers with top-k prompt log-probs only (full_logits is False): evaluate compares
        those through token_dists instead."""
        raise Unsupported("vLLM serves top-k prompt log-probs, not full logits: no exact fidelity here")

    def token_dists(self, seqs: list[list[int]], k: int) -> list[TokenDists]:
        out = []
        for seq in seqs:
            timeout = self.wall.remaining(600)      # a request's own cap, never past the wall budget
            if timeout <= 0:
                raise TimeoutError(OUT_OF_WALL)
            out.append(TokenDists(*prompt_logprobs(self.server.base_url, self.served, seq, k, timeout,
                                                   self.server.api_key)))
        return out

    def bench(self, concurrency: int, slo: Slo | None = None, cap_s: float = 1800) -> dict[str, float]:
        """One `vllm bench serve` run, bounded by the wall budget left (TimeoutError past it)."""
        argv = bench_argv(self.cfg, self.target, self.served, self.server.base_url, concurrency, self.out_dir, slo,
                          self.uuid_prefix)
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
                               + (logs.failure_reason(done.stdout + done.stderr) or done.stderr[-300:]))
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
