"""What the serving engine reported: its facts (decision.md), and what was timed: startup, the load test,
the service level and the speed floor (speed.md, which varies run to run). Pure."""
from __future__ import annotations

from pipeline import paths
from pipeline.domain.result.facts import ServedEngine, Serving
from pipeline.report.cells import is_baseline, md_row, status_cell
from pipeline.report.document import ModelReport
from pipeline.schema import Baseline
from pipeline.scoring.verdict.rows import Row


def decode_speed(r: Row) -> float | None:
    """A row's single-stream decode tokens/s as evaluate recorded it (c=1 bench TPOT, else the probe)."""
    tp = r.facts.throughput
    if tp is None:
        return None
    return (tp.roofline.decode_tokens_per_s if tp.roofline else None) or tp.decode_probe_tokens_per_s


def load_note(r: Row, base: Row | None, ratio: float | None) -> str | None:
    """Why a row's load figures do not count here: skipped at evaluate time (serving.vllm.budget.
    min_decode_tok_s, or a decode probe out of time), or below `ratio` (report.min_speed_vs_baseline;
    None: no floor) x the baseline's decode speed - a ratio evaluate@<variant> cannot apply, as it does
    not depend on the baseline's run."""
    tp = r.facts.throughput
    speed, base_speed = decode_speed(r), decode_speed(base) if base is not None and base is not r else None
    slow = None
    if ratio and speed is not None and base_speed and speed < ratio * base_speed:
        slow = (f"too slow here: {speed:.1f} tok/s vs {base_speed:.1f} for the baseline "
                f"(below {ratio:g}x, report.min_speed_vs_baseline)")
    why = (tp.skipped or tp.cut) if tp else None
    return "; ".join(x for x in (slow, why) if x) or None


def slo_cells(r: Row) -> list[str]:
    """SLO, highest concurrency meeting it, goodput there, probes; decode tok/s and roofline share."""
    tp = r.facts.throughput
    s = tp.slo if tp else None
    if s:
        slo, best, good = s.slo, s.max_concurrency_meeting_slo, s.goodput_at_that_concurrency
        cells = [f"p{slo.percentile:g} TTFT <= {slo.ttft_ms:g} ms, TPOT <= {slo.tpot_ms:g} ms",
                 str(best) if best else "none (not even 1)", f"{good:.2f}" if good is not None else "–",
                 f"{len(s.probes)} ({s.stopped or ''})"]
    else:
        cells = ["–", "–", "–", "–"]
    roof = tp.roofline if tp else None
    speed = decode_speed(r)
    cells.append(f"{speed:.1f}" if speed is not None else "–")
    if roof is not None and roof.fraction is not None and roof.roofline_tokens_per_s is not None:
        cells.append(f"{roof.fraction:.0%} of {roof.roofline_tokens_per_s:,.0f} tok/s")
    else:
        cells.append((roof.unknown if roof else None) or "bandwidth unknown (serving.bandwidth_gbps)")
    return cells


def engine_lines(m: ModelReport) -> list[str]:
    """Engine facts for rows served by vLLM: its quantization, KV dtype and KV capacity beside the formula's."""
    served = [r for r in m.rows if r.facts.backend == "vllm"]
    if not served:
        return []
    lines = ["### Served by vLLM", "",
             md_row(["Variant", "Status", "Engine quantization / KV dtype", "KV cache (engine)",
                     "KV cache (formula)", "Max concurrency", "Server log"]), "|---|---|---|---|---|---|---|"]
    for r in served:
        s = r.facts.serving or Serving(backend="vllm", device="–")      # a variant that left no result
        eng = s.engine or ServedEngine()
        lines.append(md_row([r.variant, status_cell(r) if r.facts.status != "ok" else "ok",
                             f"{eng.quantization or '–'} / {eng.kv_cache_dtype or '–'}",
                             f"{s.kv_cache_tokens:,} tokens" if s.kv_cache_tokens else "–",
                             r.facts.kv_formula or "–",
                             f"{s.max_concurrency:.2f}x at {s.max_model_len}" if s.max_concurrency
                             else "–", paths.server_log(r.facts.model, r.variant)]))
    return lines + [""]


def load_lines(m: ModelReport, baseline: Baseline | None = None) -> list[str]:
    """What was timed on rows served by vLLM: startup, the load test, the service level, the speed floor."""
    served = [r for r in m.rows if r.facts.backend == "vllm"]
    if not served:
        return []
    lines = ["### Served by vLLM", "", md_row(["Variant", "Startup (s)"]), "|---|---|"]
    lines += [md_row([r.variant, r.facts.serving.startup_s if r.facts.serving and r.facts.serving.startup_s
                      is not None else "–"]) for r in served]
    bench = [(r, c, f) for r in served if r.facts.status == "ok" and r.facts.throughput
             for c, f in r.facts.throughput.bench.items()]
    if bench:
        lines += ["", "Load (`vllm bench serve`, random prompts):", "",
                  md_row(["Variant", "Concurrency", "TTFT p50/p99 (ms)", "TPOT p50/p99 (ms)", "ITL p50/p99 (ms)",
                          "Output tok/s", "Requests/s"]), "|---|---|---|---|---|---|---|"]
        for r, c, f in bench:
            lines.append(md_row([r.variant, c,
                                 f"{f.get('median_ttft_ms', 0):.0f} / {f.get('p99_ttft_ms', 0):.0f}",
                                 f"{f.get('median_tpot_ms', 0):.1f} / {f.get('p99_tpot_ms', 0):.1f}",
                                 f"{f.get('median_itl_ms', 0):.1f} / {f.get('p99_itl_ms', 0):.1f}",
                                 f"{f.get('output_throughput', 0):.1f}", f"{f.get('request_throughput', 0):.2f}"]))
    base = next((r for r in m.rows if baseline and is_baseline(r, baseline)), None)
    ok = [r for r in served if r.facts.status == "ok"]
    if ok:
        lines += ["", "Service level (`serving.slo`: highest `--max-concurrency` meeting it, by bisection; goodput "
                  "= requests/s meeting it, vLLM's `--goodput`) and decode speed at concurrency 1 against the "
                  "bandwidth roofline (`serving.bandwidth_gbps` / weight bytes):", "",
                  md_row(["Variant", "SLO", "Max concurrency meeting it", "Goodput (req/s)", "Probes",
                          "Decode tok/s (c=1)", "Share of roofline"]), "|---|---|---|---|---|---|---|"]
        lines += [md_row([r.variant, *slo_cells(r)]) for r in ok]
        notes = [(r, load_note(r, base, m.min_speed_vs_baseline)) for r in ok]
        lines += [""] + [f"- {r.variant}: {n}" for r, n in notes if n]
    return lines + [""]
