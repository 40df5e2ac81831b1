"""Render the decision as markdown and JSON. Pure: rows and analysis in, text out."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from pipeline import paths
from pipeline.domain import hardware
from pipeline.domain.memory import mib
from pipeline.domain.metrics import split_id
from pipeline.schema import Bootstrap, Memory, TargetGpu
from pipeline.scoring.analysis import KvLength
from pipeline.scoring.decision import GpuRec, Row, task_verdicts
from pipeline.scoring.planner import Plan
from pipeline.scoring.stats import Flips

METRIC_LABELS = {"bleu": "BLEU", "chrf": "chrF", "rouge1": "ROUGE-1", "rouge2": "ROUGE-2",
                 "rougeL": "ROUGE-L", "acc": "Accuracy", "macro_f1": "Macro-F1"}
MARK = {"pass": "pass", "fail": "**FAIL**", "inconclusive": "inconclusive"}

NOTES = [
    "Metrics are named `<task>/<metric>` (a task is an entry of `eval.tasks`): each task is scored, "
    "compared and judged on its own. The first table gives each task's verdict; the tables under it give "
    "each task's gated metrics (those with a tolerance; every metric is in `decision.json`).",
    "Metric cells read `score (delta [95% CI], verdict)`, all on a 0-100 scale. BLEU/chrF: sacrebleu corpus "
    "scores, intervals by sacrebleu-style paired bootstrap; ROUGE-L: rouge-score F-measure with stemming, mean "
    "over samples; Accuracy: log-likelihood choice over the label set; ROUGE/accuracy intervals resample "
    "per-sample scores. Same samples, same seed for every variant.",
    "Non-inferiority: a metric *passes* when the interval's lower bound is at or above -tolerance, *fails* "
    "when its upper bound is below -tolerance, and is *inconclusive* otherwise - or when the baseline scores "
    "below `decision.min_baseline` (the model cannot do the task, so differences mean nothing). A variant "
    "passes when every metric the model can do passes. An inconclusive metric says how many samples would "
    "settle it if the observed effect held (the interval narrows as 1/sqrt(n)).",
    "Power, under each variant's verdicts: for each metric with a tolerance, SD is the standard deviation of "
    "the paired per-sample differences (BLEU/chrF: sentence chrF stands in, so for BLEU a rough guide), n the "
    "samples compared, MDD = "
    "(z(1-a) + z(0.8)) x SD / sqrt(n) the smallest tolerance this n shows non-inferiority for with 80% power "
    "when the tier is truly unchanged, and n80 = ceil(((z(1-a) + z(0.8)) x SD / tolerance)^2) the samples "
    "that give 80% power at the configured tolerance; a = (1 - confidence) / 2, one side of the verdict's "
    "interval. `python -m pipeline.config` prints the same figures for the next run's sample sizes.",
    "Recommendation: the passing variant with the least memory (weights, then KV bytes per token); when no "
    "variant passes, the baseline itself, since only it is known to be as good as the baseline. Per GPU, "
    "only variants that GPU can run and that fit its memory are candidates.",
    "Quality comes from the engine in the Backend column, computing at the activation dtype in the Compute "
    "column: every variant of a model on one backend runs at one dtype, baseline included (vLLM on CPU: "
    "bfloat16; on a GPU: the model's dtype), and a row is compared only with the baseline of the same "
    "backend and compute dtype. On the reference backend (transformers) every tier computes "
    "in one dtype (Compute: on a CPU bfloat16 where the CPU has native bfloat16, else float32; on a GPU the "
    "model's dtype): quantized weights are decompressed into it, W8A8 activations are "
    "fake-quantized per token, bitsandbytes tiers run bitsandbytes' own CPU kernels, and the fp8 KV cache is "
    "*simulated* by rounding K/V through float8_e4m3 (scale 1.0, as vLLM without calibrated scales).",
    "Gen tok/s is batched greedy generation on this machine's CPU: it does not rank quantized GPU kernels. "
    "Weights are the checkpoint's weight files (bitsandbytes: the packed tensors after load-time "
    "quantization, float tensors counted in the serving dtype). KV bytes/token = 2 x layers x KV heads x "
    "head dim x bytes of the KV dtype as vLLM stores it (auto = model dtype).",
]


@dataclass(frozen=True)
class Header:
    """What the report says about the run as a whole."""
    generated: str                   # UTC time stamp
    hardware: str                    # this machine
    baseline: tuple[str, str]        # (tier, kv)
    bootstrap: Bootstrap
    budget: Memory
    gpus: dict[str, TargetGpu]
    hardware_docs: str               # vLLM docs version of the hardware table
    versions: dict[str, str] = field(default_factory=dict)


@dataclass
class ModelReport:
    name: str
    source: str
    rows: list[Row]
    recommended: Row | None
    why: str
    command: str | None
    num_samples: dict[str, int]
    flips: dict[str, dict[str, Flips]] = field(default_factory=dict)          # variant -> task -> flips
    regression_links: dict[str, str] = field(default_factory=dict)           # variant -> link
    kv_length: list[KvLength] = field(default_factory=list)
    plans: dict[str, dict[str, Plan]] = field(default_factory=dict)          # variant -> GPU name -> plan
    gpu_recs: dict[str, GpuRec] = field(default_factory=dict)                # GPU name -> recommendation
    plot: str | None = None
    kv_pairs: list[tuple[str, str]] = field(default_factory=list)           # (uncalibrated, calibrated) KV modes


def label(mid: str, with_task: bool = True) -> str:
    """`translation BLEU` for `translation/bleu` (just `BLEU` without the task)."""
    task, metric = split_id(mid)
    name = METRIC_LABELS.get(metric, metric)
    return f"{task} {name}" if with_task and task else name


def tasks_of(rows: list[Row]) -> list[str]:
    """Task names in the order the rows report their metrics."""
    return list(dict.fromkeys(split_id(mid)[0] for r in rows for mid in r.metrics))


def shown_metrics(rows: list[Row], task: str) -> list[str]:
    """A task's metric ids for its table: the gated ones (with a verdict somewhere), else all."""
    mids = list(dict.fromkeys(mid for r in rows for mid in r.metrics if split_id(mid)[0] == task))
    gated = [mid for mid in mids if any(mid in r.verdicts for r in rows)]
    return gated or mids


def task_cell(r: Row, task: str, is_baseline: bool) -> str:
    if r.status != "ok":
        return "–"
    if not any(split_id(mid)[0] == task for mid in r.metrics):
        return "not measured"
    if is_baseline:
        return "baseline"
    verdict = task_verdicts(r.verdicts).get(task)
    return MARK.get(verdict, verdict) if verdict else "not gated"


def metric_cell(r: Row, metric: str, is_baseline: bool) -> str:
    if r.status != "ok":
        return "–"
    if metric not in r.metrics:
        return "not measured"
    value = f"{r.metrics[metric]:.1f}"
    if is_baseline:
        return f"{value} (baseline)"
    iv = r.intervals.get(metric)
    delta = r.deltas.get(metric)
    d = "n/a" if delta is None else f"{delta:+.1f}"
    if iv is not None:
        d += f" [{iv.lo:+.1f}, {iv.hi:+.1f}]"
    verdict = r.verdicts.get(metric)
    return f"{value} ({d}, {MARK[verdict[0]]})" if verdict else f"{value} ({d})"


def status_cell(r: Row) -> str:
    if r.status == "ok":
        return MARK.get(r.overall, r.overall)
    label = "unsupported here" if r.status == "unsupported" else r.status
    return f"{label}: {r.reason}" if r.reason else label


def _cells(cells: list[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "/").replace("\n", " ") for c in cells) + " |"


def main_table(m: ModelReport, baseline: tuple[str, str], gpus: dict[str, TargetGpu] | None = None) -> list[str]:
    cc = {n: g.compute_capability for n, g in (gpus or {}).items()}
    names = tasks_of(m.rows)
    head = (["Tier", "KV cache", "Scheme"] + names
            + ["Flips (R→W / W→R)", "Verdict", "Weights (MiB)", "KV bytes/token", "Gen tok/s (this CPU)", "Backend",
               "Compute", "vLLM GPUs"])
    lines = [_cells(head), "|" + "---|" * len(head)]
    for r in m.rows:
        is_base = (r.tier, r.kv) == baseline
        flips = m.flips.get(r.variant, {})
        flip = ", ".join(f"{f.right_to_wrong}/{f.wrong_to_right}" for f in flips.values()) if flips else "–"
        verdict = "baseline" if is_base and r.status == "ok" else status_cell(r)
        if r.variant in m.regression_links and r.status == "ok":
            verdict += f" ([regressions]({m.regression_links[r.variant]}))"
        lines.append(_cells([r.tier, r.kv, r.info.scheme]
                            + [task_cell(r, t, is_base) for t in names]
                            + [flip, verdict,
                               f"{mib(r.weight_bytes):.1f}" if r.weight_bytes else "–",
                               f"{r.kv_bytes_per_token:,}" if r.kv_bytes_per_token else "–",
                               f"{r.tokens_per_s:.1f}" if r.tokens_per_s else "–", r.backend or "–",
                               r.compute_dtype or "–", hardware.describe(r.info.hardware, cc) if cc else "–"]))
    return lines


def task_tables(m: ModelReport, baseline: tuple[str, str]) -> list[str]:
    """One table per task: its metrics' cells `score (delta [95% CI], verdict)` per variant."""
    lines: list[str] = []
    for task in tasks_of(m.rows):
        mids = shown_metrics(m.rows, task)
        n = m.num_samples.get(task)
        lines += [f"#### {task}" + (f" ({n} samples)" if n else ""), "",
                  _cells(["Variant"] + [label(x, with_task=False) for x in mids]), "|" + "---|" * (1 + len(mids))]
        for r in m.rows:
            if r.status == "ok":
                lines.append(_cells([r.variant] + [metric_cell(r, x, (r.tier, r.kv) == baseline) for x in mids]))
        lines.append("")
    return lines


def _ci(lo_hi: list[float], fmt: str) -> str:
    return f"[{format(lo_hi[0], fmt)}, {format(lo_hi[1], fmt)}]"


def fidelity_lines(m: ModelReport) -> list[str]:
    """Next-token KL and top-1 agreement vs the baseline per variant (report-only: no verdict uses them)."""
    found = [(r, r.info.fidelity) for r in m.rows if r.info.fidelity]
    if not found:
        return []
    lines = ["### Fidelity to the baseline's next-token distributions", "",
             "Teacher-forced on the fidelity texts (eval.fidelity); intervals over texts. Report-only: the "
             "verdicts above come from the task metrics. Bands (mean KL): <0.1 excellent, 0.1-1 moderate, >1 large.",
             "", _cells(["Variant", "KL mean (nats/token)", "KL p99", "Top-1 agreement (%)", "Band", "Texts / tokens"]),
             "|" + "---|" * 6]
    notes: dict[str, set[str]] = {}          # support text -> the backends it describes
    for r, f in found:
        if f.get("status") != "ok":
            lines.append(_cells([r.variant, f"{f.get('status')}: {f.get('why')}", "–", "–", "–", "–"]))
            continue
        lines.append(_cells([r.variant, f"{f['kl_mean']:.4f} {_ci(f['kl_mean_ci'], '.4f')}",
                             f"{f['kl_p99']:.3f} {_ci(f['kl_p99_ci'], '.3f')}",
                             f"{f['top1_agreement']:.1f} {_ci(f['top1_agreement_ci'], '.1f')}", f["band"],
                             f"{f['n_texts']} / {f['n_tokens']:,}"]))
        if f.get("support"):
            notes.setdefault(f["support"], set()).add(r.backend or "?")
    return lines + [""] + [f"KL support ({'; '.join(sorted(b))}): {n}." for n, b in notes.items()] + [""]


def kv_scale_lines(m: ModelReport, baseline: tuple[str, str]) -> list[str]:
    """Each tier's calibrated fp8 KV rows beside its uncalibrated ones: scores with their delta to the
    baseline [CI], and the fidelity KL, so the effect of calibrating the k/v scales reads across."""
    if not m.kv_pairs:
        return []
    rows = {(r.tier, r.kv): r for r in m.rows}
    mids = [mid for t in tasks_of(m.rows) for mid in shown_metrics(m.rows, t)]
    head = ["Tier", "KV mode", "k/v scales"] + [label(x) for x in mids] + ["KL mean [CI]", "Verdict"]
    intro = ("The calibrated mode serves the tier re-made with llm-compressor's `kv_cache_scheme` (per-layer "
             "k/v scales from the calibration set, in the checkpoint vLLM loads); the uncalibrated one uses "
             "scale 1.0, vLLM's default.")
    lines = ["### fp8 KV cache: calibrated scales beside uncalibrated", "", intro, "", _cells(head),
             "|" + "---|" * len(head)]
    tiers = list(dict.fromkeys(r.tier for r in m.rows))
    for uncal, cal in m.kv_pairs:
        for tier in tiers:
            for kv, how in ((uncal, "1.0 (uncalibrated)"), (cal, "calibrated")):
                r = rows.get((tier, kv))
                if r is None:
                    continue
                f = r.info.fidelity or {}
                kl = f"{f['kl_mean']:.4f} {_ci(f['kl_mean_ci'], '.4f')}" if f.get("status") == "ok" else "–"
                lines.append(_cells([tier, kv, how] + [metric_cell(r, x, (r.tier, r.kv) == baseline) for x in mids]
                                    + [kl, status_cell(r)]))
    return lines + [""]


def reasons(rows: list[Row], baseline: tuple[str, str] | None = None) -> list[str]:
    out = []
    for r in rows:
        parts = [f"{label(x)} {v}: {why}" for x, (v, why) in r.verdicts.items()]
        if r.status == "ok" and (r.tier, r.kv) != baseline:
            bare = [label(x) for x in r.metrics if x not in r.intervals and x not in r.verdicts]
            if bare and baseline is not None:
                parts.append(f"reported without an interval (no per-sample form): {', '.join(bare)}")
        if parts:
            out.append(f"- **{r.variant}** → {r.overall}. " + "; ".join(parts))
            out += power_line(r)
    return out


def power_line(r: Row) -> list[str]:
    """A sub-bullet with each gated metric's power figures (see NOTES), or nothing."""
    if not r.power:
        return []
    return ["  - power: " + "; ".join(f"{label(x)} {p.compact()}" for x, p in r.power.items())]


def hardware_table(m: ModelReport, gpus: dict[str, TargetGpu]) -> list[str]:
    cc = {n: g.compute_capability for n, g in gpus.items()}
    seen: dict[str, str] = {}
    for r in m.rows:
        seen.setdefault(r.tier, r.info.hardware)
    lines = [_cells(["Tier", "vLLM kernel family", "Target GPUs that can serve it", "Basis"]), "|---|---|---|---|"]
    for tier, kind in seen.items():
        k = hardware.kind(kind)
        lines.append(_cells([tier, k.label, hardware.describe(kind, cc), k.source]))
    return lines


def planner_table(m: ModelReport, gpus: dict[str, TargetGpu]) -> list[str]:
    names = list(gpus)
    lines = [_cells(["Variant", "Weights (MiB)"] + [f"{n}: KV tokens / max concurrency / decode roofline tok/s"
                                                    for n in names]), "|" + "---|" * (2 + len(names))]
    for r in m.rows:
        plans = m.plans.get(r.variant)
        if not plans:
            continue
        cells = [r.variant, f"{mib(r.weight_bytes):.1f}"]
        for n in names:
            p = plans[n]
            cells.append(f"{p.kv_tokens:,} / {p.max_concurrency:,.1f} / {p.roofline_tokens_per_s:,.0f}"
                         if p.fits else f"does not fit: {p.reason}")
        lines.append(_cells(cells))
    return lines


def kv_length_lines(m: ModelReport) -> list[str]:
    if not m.kv_length:
        return ["No KV-quantized variant had a same-tier reference to compare against."]
    lines = [_cells(["Variant", "vs", "Task", "Buckets (prompt chars: n, mean score delta)"]), "|---|---|---|---|"]
    worse_long = 0
    comparable = 0
    for k in m.kv_length:
        parts = [f"{b.lo}-{b.hi if b.hi is not None else '∞'}: n={b.n}, "
                 + ("–" if b.delta is None else f"{b.delta:+.2f}") for b in k.buckets]
        filled = [b for b in k.buckets if b.delta is not None]
        if len(filled) >= 2:
            comparable += 1
            worse_long += filled[-1].delta < filled[0].delta
        lines.append(_cells([k.variant, k.reference, k.task, "; ".join(parts)]))
    lines += ["", f"Longest bucket worse than shortest in {worse_long} of {comparable} comparisons "
              "(field experience says KV quantization hurts long inputs most; with these sample sizes a "
              "difference of a few points is within noise)."]
    return lines


def decode_speed(r: Row) -> float | None:
    """A row's single-stream decode tokens/s as evaluate recorded it (c=1 bench TPOT, else the probe)."""
    tp = r.info.throughput or {}
    return (tp.get("roofline") or {}).get("decode_tokens_per_s") or tp.get("decode_probe_tokens_per_s")


def load_note(r: Row, base: Row | None) -> str | None:
    """Why a row's load figures do not count here: skipped at evaluate time (serving.vllm.budget.
    min_decode_tok_s, or a decode probe out of time), or below min_speed_vs_baseline x the baseline's
    decode speed - a ratio evaluate@<variant> cannot apply, as it does not depend on the baseline's run."""
    tp = r.info.throughput or {}
    ratio = ((r.info.serving or {}).get("budget") or {}).get("min_speed_vs_baseline")
    speed, base_speed = decode_speed(r), decode_speed(base) if base is not None and base is not r else None
    slow = None
    if ratio and speed is not None and base_speed and speed < ratio * base_speed:
        slow = (f"too slow here: {speed:.1f} tok/s vs {base_speed:.1f} for the baseline "
                f"(below {ratio:g}x, serving.vllm.budget.min_speed_vs_baseline)")
    why = tp.get("skipped") or tp.get("cut")
    return "; ".join(x for x in (slow, why) if x) or None


def slo_cells(r: Row) -> list[str]:
    """SLO, highest concurrency meeting it, goodput there, probes; decode tok/s and roofline share."""
    tp = r.info.throughput or {}
    s = tp.get("slo")
    if s:
        slo = s["slo"]
        best = s.get("max_concurrency_meeting_slo")
        good = s.get("goodput_at_that_concurrency")
        cells = [f"p{slo['percentile']:g} TTFT <= {slo['ttft_ms']:g} ms, TPOT <= {slo['tpot_ms']:g} ms",
                 str(best) if best else "none (not even 1)", f"{good:.2f}" if good is not None else "–",
                 f"{len(s.get('probes', []))} ({s.get('stopped', '')})"]
    else:
        cells = ["–", "–", "–", "–"]
    roof = tp.get("roofline") or {}
    speed = decode_speed(r)
    cells.append(f"{speed:.1f}" if speed is not None else "–")
    if "fraction" in roof:
        cells.append(f"{roof['fraction']:.0%} of {roof['roofline_tokens_per_s']:,.0f} tok/s")
    else:
        cells.append(roof.get("unknown", "bandwidth unknown (serving.bandwidth_gbps)"))
    return cells


def serving_lines(m: ModelReport, baseline: tuple[str, str] | None = None) -> list[str]:
    """Engine facts and load figures for rows served by vLLM."""
    served = [r for r in m.rows if r.backend == "vllm"]
    if not served:
        return []
    lines = ["### Served by vLLM", "",
             _cells(["Variant", "Status", "Startup (s)", "Engine quantization / KV dtype", "KV cache (engine)",
                     "KV cache (formula)", "Max concurrency", "Server log"]), "|---|---|---|---|---|---|---|---|"]
    for r in served:
        s = r.info.serving or {}
        eng = s.get("engine", {})
        formula = r.info.kv_formula
        lines.append(_cells([r.variant, status_cell(r) if r.status != "ok" else "ok", s.get("startup_s", "–"),
                             f"{eng.get('quantization', '–')} / {eng.get('kv_cache_dtype', '–')}",
                             f"{s['kv_cache_tokens']:,} tokens" if s.get("kv_cache_tokens") else "–",
                             formula or "–",
                             f"{s['max_concurrency']:.2f}x at {s.get('max_model_len')}" if s.get("max_concurrency")
                             else "–", paths.server_log(r.model, r.variant)]))
    bench = [(r, c, f) for r in served if r.status == "ok"
             for c, f in (r.info.throughput.get("bench") or {}).items()]
    if bench:
        lines += ["", "Load (`vllm bench serve`, random prompts):", "",
                  _cells(["Variant", "Concurrency", "TTFT p50/p99 (ms)", "TPOT p50/p99 (ms)", "ITL p50/p99 (ms)",
                          "Output tok/s", "Requests/s"]), "|---|---|---|---|---|---|---|"]
        for r, c, f in bench:
            lines.append(_cells([r.variant, c,
                                 f"{f.get('median_ttft_ms', 0):.0f} / {f.get('p99_ttft_ms', 0):.0f}",
                                 f"{f.get('median_tpot_ms', 0):.1f} / {f.get('p99_tpot_ms', 0):.1f}",
                                 f"{f.get('median_itl_ms', 0):.1f} / {f.get('p99_itl_ms', 0):.1f}",
                                 f"{f.get('output_throughput', 0):.1f}", f"{f.get('request_throughput', 0):.2f}"]))
    base = next((r for r in m.rows if baseline and (r.tier, r.kv) == baseline), None)
    ok = [r for r in served if r.status == "ok"]
    if ok:
        lines += ["", "Service level (`serving.slo`: highest `--max-concurrency` meeting it, by bisection; goodput "
                  "= requests/s meeting it, vLLM's `--goodput`) and decode speed at concurrency 1 against the "
                  "bandwidth roofline (`serving.bandwidth_gbps` / weight bytes):", "",
                  _cells(["Variant", "SLO", "Max concurrency meeting it", "Goodput (req/s)", "Probes",
                          "Decode tok/s (c=1)", "Share of roofline"]), "|---|---|---|---|---|---|---|"]
        lines += [_cells([r.variant, *slo_cells(r)]) for r in ok]
        notes = [(r, load_note(r, base)) for r in ok]
        lines += [""] + [f"- {r.variant}: {n}" for r, n in notes if n]
    return lines + [""]


def gpu_lines(m: ModelReport) -> list[str]:
    out = []
    for gpu, rec in m.gpu_recs.items():
        if rec.row is None:
            out += [f"- **{gpu}**: nothing to recommend - {rec.why}."]
        else:
            out += [f"- **{gpu}**: `{rec.row.tier}` + KV `{rec.row.kv}`", "", "  ```bash", f"  {rec.command}", "  ```"]
    return out


def render(models: dict[str, ModelReport], header: Header) -> str:
    base = header.baseline
    b = header.bootstrap
    budget = header.budget
    lines = ["# qtier decision", "",
             f"Generated {header.generated} by `dvc repro` on {header.hardware}. Baseline: tier "
             f"`{base[0]}` with KV cache `{base[1]}`. Intervals: {b.confidence:.0%} paired bootstrap, "
             f"{b.resamples} resamples, seed {b.seed}.", ""]
    if header.versions:
        lines += ["Versions: " + ", ".join(f"{k} {v}" for k, v in header.versions.items()) + ".", ""]
    for m in models.values():
        lines += [f"## {m.name}", "", f"Source: `{m.source}`. Samples per task: "
                  + ", ".join(f"{t} {n}" for t, n in m.num_samples.items()) + ".", ""]
        if m.recommended is not None:
            lines += [f"**Recommended: `{m.recommended.tier}` with KV cache `{m.recommended.kv}`** - {m.why}.", "",
                      "```bash", m.command or "", "```", "",
                      "Sized for each target GPU (`--max-model-len`, `--gpu-memory-utilization`, `--max-num-seqs`) "
                      "under *Per target GPU* below.", ""]
        else:
            lines += [f"**No tier can be recommended**: {m.why}.", ""]
        lines += main_table(m, base, header.gpus) + ["", "### Quality by task", ""] + task_tables(m, base)
        lines += ["Why each verdict:", ""] + reasons(m.rows, base) + [""]
        lines += fidelity_lines(m)
        lines += kv_scale_lines(m, base)
        lines += serving_lines(m, base)
        if m.plot:
            lines += [f"![quality delta vs weight memory]({m.plot})", ""]
        lines += [f"### Per target GPU (max_model_len {budget.max_model_len}, gpu_memory_utilization "
                  f"{budget.gpu_memory_utilization}, block size {budget.block_size})", ""]
        lines += gpu_lines(m) + [""]
        lines += ["### Which GPUs can serve each tier (vLLM docs v" + header.hardware_docs + ")", ""]
        lines += hardware_table(m, header.gpus) + [""]
        lines += ["### Memory bill", "",
                  f"available KV = memory x utilization - weights - {budget.activation_peak_gib} GiB activations "
                  f"- {budget.non_torch_overhead_gib} GiB non-torch; roofline at context "
                  f"{budget.max_model_len // 2} for one sequence.", ""]
        lines += planner_table(m, header.gpus) + [""]
        lines += ["### KV-cache quantization by input length", ""] + kv_length_lines(m) + [""]
    lines += ["## How to read this", ""] + [f"- {n}" for n in NOTES] + [""]
    return "\n".join(lines)


def regressions_md(model: str, variant: str, baseline: tuple[str, str], per_task: dict[str, list]) -> str:
    lines = [f"# Largest regressions: {model} {variant} vs {baseline[0]}-{baseline[1]}", ""]
    for task, regs in per_task.items():
        lines += [f"## {task}", ""]
        if not regs:
            lines += ["No sample got worse.", ""]
            continue
        for g in regs:
            inp = "; ".join(f"{k}: {v}" for k, v in g.base["input"].items() if k != "reference")
            lines += [f"### doc {g.doc_id} (drop {g.drop:.2f})", "", f"- **input**: {inp}",
                      f"- **reference**: {g.base.get('target')}"]
            if "logliks" in g.base:
                ch = g.base["choices"]
                lines += [f"- **baseline**: {ch[g.base['pred']]} (log-likelihoods {g.base['logliks']})",
                          f"- **{variant}**: {ch[g.tier['pred']]} (log-likelihoods {g.tier['logliks']})"]
            else:
                lines += [f"- **baseline**: {g.base['output']}", f"- **{variant}**: {g.tier['output']}"]
            lines.append("")
    return "\n".join(lines)


def dvc_metrics(rows: list[Row]) -> dict:
    out = {}
    for r in rows:
        if r.status != "ok":
            continue
        entry: dict[str, Any] = {k: round(v, 3) for k, v in r.metrics.items()}
        entry.update({f"delta_{k}": round(v, 3) for k, v in r.deltas.items()})
        entry["weight_mib"] = round(mib(r.weight_bytes), 2) if r.weight_bytes else None
        entry["gen_tokens_per_s"] = r.tokens_per_s
        fid = r.info.fidelity or {}
        if fid.get("status") == "ok":
            entry.update(fidelity_kl_mean=fid["kl_mean"], fidelity_kl_p99=fid["kl_p99"],
                         fidelity_top1_agreement=fid["top1_agreement"])
        if r.overall != "baseline":
            entry["passes"] = int(r.overall == "pass")     # numeric, so `dvc exp show` can sort on it
        out[r.variant] = entry
    return out


def _row_json(r: Row, m: ModelReport, baseline: tuple[str, str]) -> dict:
    return {"model": r.model, "tier": r.tier, "kv": r.kv, "status": r.status, "reason": r.reason,
            "backend": r.backend, "compute_dtype": r.compute_dtype, "metrics": r.metrics, "higher_is_better": r.higher_is_better, "deltas": r.deltas,
            "intervals": {k: v.as_dict() for k, v in r.intervals.items()},
            "verdicts": {k: {"verdict": v, "why": w} for k, (v, w) in r.verdicts.items()},
            "task_verdicts": task_verdicts(r.verdicts), "overall": r.overall, "weight_bytes": r.weight_bytes, "kv_bytes_per_token": r.kv_bytes_per_token,
            "gen_tokens_per_s": r.tokens_per_s, "scheme": r.info.scheme,
            "hardware": r.info.hardware, "serving": r.info.serving, "load": r.info.throughput,
            "load_note": load_note(r, next((b for b in m.rows if (b.tier, b.kv) == baseline), None)),
            "flips": {t: dataclasses.asdict(f) for t, f in m.flips.get(r.variant, {}).items()},
            "plans": {g: dataclasses.asdict(p) for g, p in m.plans.get(r.variant, {}).items()},
            "power": {k: p.as_dict() for k, p in r.power.items()}, "fidelity": r.info.fidelity}


def decision_json(models: dict[str, ModelReport], header: Header) -> dict:
    return {
        "generated": header.generated, "hardware": header.hardware, "versions": header.versions,
        "baseline": {"tier": header.baseline[0], "kv": header.baseline[1]},
        "bootstrap": dataclasses.asdict(header.bootstrap), "budget": dataclasses.asdict(header.budget),
        "recommended": {n: None if m.recommended is None else
                        {"tier": m.recommended.tier, "kv": m.recommended.kv, "why": m.why, "command": m.command}
                        for n, m in models.items()},
        "per_gpu": {n: {g: None if rec.row is None else {"tier": rec.row.tier, "kv": rec.row.kv, "command": rec.command}
                        for g, rec in m.gpu_recs.items()} for n, m in models.items()},
        "rows": [_row_json(r, m, header.baseline) for m in models.values() for r in m.rows],
    }
