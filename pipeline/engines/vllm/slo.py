"""The highest concurrency that meets a service level, found with few load tests.

A service level (params `serving.slo`) caps TTFT and TPOT at a percentile, as `vllm bench serve
--goodput ttft:<ms> tpot:<ms>` counts "good" requests (DistServe's goodput, arXiv 2401.09670). Latency
grows with concurrency, so the search doubles from 1 until a level fails (or max_concurrency), then
bisects between the last level that met it and the first that did not. Every probe is a real bench run,
so the search stops at max_probes runs or once time_budget_s has gone, and says which bound stopped it.

Pure: `measure(concurrency) -> figures` is injected (the vLLM session runs `vllm bench serve`; tests
pass a latency curve). A measure that raises TimeoutError counts as a level that failed, out of time.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

CONVERGED, MAX_PROBES, TIME_BUDGET, FAILS_AT_1, MEETS_AT_MAX = (
    "converged", "max_probes", "time_budget", "fails at concurrency 1", "meets at max_concurrency")


@dataclass(frozen=True)
class Probe:
    concurrency: int
    meets: bool
    figures: dict
    seconds: float


@dataclass
class SloSearch:
    best: int | None                  # highest concurrency probed that met the SLO; None: not even 1
    stopped: str                      # CONVERGED | MAX_PROBES | TIME_BUDGET | FAILS_AT_1 | MEETS_AT_MAX
    probes: list[Probe] = field(default_factory=list)

    @property
    def best_figures(self) -> dict | None:
        return next((p.figures for p in self.probes if p.concurrency == self.best and p.meets), None)


def percentile_word(percentile: float) -> str:
    """A percentile as vLLM spells it in flags and result keys: 99, 99.9."""
    return str(int(percentile)) if int(percentile) == percentile else str(percentile)


def percentile_key(metric: str, percentile: float) -> str:
    """vLLM's result key for a metric percentile (`p99_ttft_ms`, `p99.9_tpot_ms`)."""
    return f"p{percentile_word(percentile)}_{metric}_ms"


def meets_slo(figures: dict, ttft_ms: float, tpot_ms: float, percentile: float) -> bool:
    """Both percentiles reported and within their limits, and at least one request completed."""
    ttft, tpot = figures.get(percentile_key("ttft", percentile)), figures.get(percentile_key("tpot", percentile))
    if ttft is None or tpot is None or not figures.get("completed", 1):
        return False
    return ttft <= ttft_ms and tpot <= tpot_ms


def search(measure: Callable[[int], dict], meets: Callable[[dict], bool], max_concurrency: int, max_probes: int,
           time_budget_s: float, clock: Callable[[], float] = time.monotonic,
           known: dict[int, dict] | None = None) -> SloSearch:
    """Double from 1, then bisect; at most max_probes measures, none started after time_budget_s.
    `known`: figures already measured at some concurrencies (the load test's own levels, run with the
    SLO's percentiles): reused as probes of 0 s that count against neither bound."""
    t0 = clock()
    out = SloSearch(best=None, stopped=CONVERGED)
    lo, hi = 0, None                    # lo: highest level that met (0 = none yet); hi: lowest that failed
    known = known or {}

    def probe(c: int) -> bool | None:
        if c in known:
            ok = meets(known[c])
            out.probes.append(Probe(c, ok, known[c], 0.0))
            return ok
        if sum(1 for p in out.probes if p.concurrency not in known) >= max_probes:
            out.stopped = MAX_PROBES
            return None
        if clock() - t0 >= time_budget_s:
            out.stopped = TIME_BUDGET
            return None
        start = clock()
        try:
            figures, ok = measure(c), None
        except TimeoutError as e:
            figures, ok = {"timeout": str(e) or "timed out"}, False
            out.stopped = TIME_BUDGET
        ok = meets(figures) if ok is None else ok
        out.probes.append(Probe(c, ok, figures, round(clock() - start, 2)))
        return ok

    c = 1
    while hi is None:
        ok = probe(c)
        if ok is None or "timeout" in out.probes[-1].figures:
            break
        if ok:
            lo = c
            if c >= max_concurrency:
                out.stopped = MEETS_AT_MAX
                break
            c = min(2 * c, max_concurrency)
        else:
            hi = c
    while hi is not None and hi - lo > 1 and lo > 0 and out.stopped == CONVERGED:
        mid = (lo + hi) // 2
        ok = probe(mid)
        if ok is None:
            break
        if ok:
            lo = mid
        else:
            hi = mid
            if "timeout" in out.probes[-1].figures:
                break
    if lo == 0 and hi == 1:
        out.stopped = FAILS_AT_1
    out.best = lo or None
    return out


def summary(result: SloSearch, slo: dict) -> dict:
    """What result.json records: the SLO, the answer, the goodput there and every probe."""
    best = result.best_figures or {}
    return {"slo": slo, "max_concurrency_meeting_slo": result.best,
            "goodput_at_that_concurrency": best.get("request_goodput"), "stopped": result.stopped,
            "probes": [{"concurrency": p.concurrency, "meets": p.meets, "seconds": p.seconds, **p.figures}
                       for p in result.probes]}
