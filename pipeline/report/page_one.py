"""Page 1 of decision.md: what a reviewer reads in a minute. The recommendation and its serve line,
what a pass means in numbers, the baseline's own scores, the memory saved, where and from what the
run came, the caveats, whether the pick was a close call (report/close_call.py), and one table: a row
per variant, a column per gated task the model can do (the verdict, the delta with its interval at the
interval's own confidence), each followed by a labelled `recovery` column (variant / baseline, as
llm-compressor computes it) and, on a task with flips, a `flips` column. Every sentence is generated
from the data it states; no line over WIDTH. Pure.
"""
from __future__ import annotations

import textwrap

from pipeline.domain.hardware.memory import mib
from pipeline.report import close_call, gpu_picks
from pipeline.report.cells import deciding, is_baseline, label, md_row, status_word, task_cell, task_of
from pipeline.report.document import Header, ModelReport
from pipeline.schema import Baseline
from pipeline.scoring.verdict.judge import not_capable
from pipeline.scoring.verdict.rows import NOT_RUN, Row

WIDTH = 120
# a screen: 44 before the per-GPU picks (report/gpu_picks.py, 4 or 5 lines), 40 of them before the close-call
# line (report/close_call.py), which may take 3 or 4
MAX_LINES = 49


def wrap(text: str) -> list[str]:
    """A paragraph in lines of at most WIDTH characters (markdown joins them again); a line ending in
    markdown's hard break (two spaces) keeps it."""
    hard = text.endswith("  ")
    out = textwrap.wrap(text.rstrip(), WIDTH - 2 * hard, break_long_words=False, break_on_hyphens=False) or [""]
    return out[:-1] + [out[-1] + "  "] if hard else out


def judged_tasks(m: ModelReport) -> list[str]:
    """The tasks with a gated metric the model can do on some row, in report order."""
    out: list[str] = []
    for r in m.rows:
        for mid, v in r.judgement.verdicts.items():
            if not not_capable(v) and v.limit is not None and task_of(mid) not in out:
                out.append(task_of(mid))
    return out


def baseline_row(m: ModelReport, base: Baseline | None) -> Row | None:
    return next((r for r in m.rows if is_baseline(r, base) and r.facts.status == "ok"), None)


def pass_means(m: ModelReport, header: Header, tasks: list[str]) -> list[str]:
    """The margins, the samples per task and the error of each verdict."""
    limits: dict[str, float] = {}
    for r in m.rows:
        for mid, v in r.judgement.verdicts.items():
            if task_of(mid) in tasks and v.limit is not None and not not_capable(v):
                limits.setdefault(mid, v.limit)
    parts = [f"{label(mid)} at most {lim:.1f} points below baseline"
             + (f" ({m.num_samples[task_of(mid)]:,} samples at most)" if task_of(mid) in m.num_samples else "")
             for mid, lim in limits.items()]
    side = (1 - header.confidence) / 2
    return wrap(f"Pass means: {'; '.join(parts)}; each verdict wrong at most {side:.1%} of the time over "
                "all its looks.") if parts else []


def baseline_scores(m: ModelReport, base: Row | None, tasks: list[str]) -> list[str]:
    if base is None:
        return []
    gated = {mid for r in m.rows for mid in r.judgement.verdicts}
    can = [f"{label(mid)} {v:.1f}" for mid, v in base.facts.metrics.items() if mid in gated and task_of(mid) in tasks]
    cannot = sorted({task_of(mid) for r in m.rows for mid, v in r.judgement.verdicts.items() if not_capable(v)})
    text = f"Baseline `{base.facts.tier}` + KV `{base.facts.kv}`: {', '.join(can) or 'no gated score'}"
    if cannot:
        text += f"; it cannot do {', '.join(cannot)} (below decision.min_baseline), so no variant is judged there"
    return wrap(text + ".")


def memory_saved(m: ModelReport, base: Row | None) -> list[str]:
    pick = m.recommendation.row
    if base is None or pick is None or not base.facts.weight_bytes or not pick.facts.weight_bytes:
        return []
    b, p = mib(base.facts.weight_bytes), mib(pick.facts.weight_bytes)
    kb, kp = base.facts.kv_bytes_per_token, pick.facts.kv_bytes_per_token
    kv = f"; KV cache {kb:,} -> {kp:,} bytes/token ({(kp - kb) / kb:+.0%})" if kb and kp else ""
    return wrap(f"Weights: {b:.1f} MiB for the baseline, {p:.1f} MiB for the pick ({(p - b) / b:+.0%}){kv}.")


def recovery(r: Row, base: Row, mid: str) -> float | None:
    """variant / baseline x 100 (llm-compressor's recovery), None where the baseline scores 0."""
    b, v = base.facts.metrics.get(mid), r.score(mid)
    return None if not b or v is None else 100.0 * v / b


def recovery_cell(r: Row, base: Row, task: str) -> str:
    """Recovery of the metric that decided the task, '–' where there is none."""
    found = deciding(r, task)
    rec = recovery(r, base, found[0]) if found is not None and found[1].lo is not None else None
    return f"{rec:.0f}%" if rec is not None else "–"


def flips_cell(m: ModelReport, r: Row, task: str) -> str:
    flips = m.flips.get(r.variant, {}).get(task)
    read = m.reads.get(r.variant, {}).get(task)        # over the verdict's pairs, else labelled with its own n
    return (f"{100.0 * flips.rate:.1f}%" + (read.label() if read else "")
            if flips is not None and flips.n and deciding(r, task) else "–")


def has_flips(m: ModelReport, task: str) -> bool:
    return any((f := m.flips.get(r.variant, {}).get(task)) is not None and f.n for r in m.rows)


def gated(m: ModelReport, task: str) -> list[str]:
    """The task's metrics judged on some row (a tolerance, a baseline that can do them)."""
    return list(dict.fromkeys(mid for r in m.rows for mid, v in r.judgement.verdicts.items()
                              if task_of(mid) == task and not not_capable(v)))


def table(m: ModelReport, base: Row, tasks: list[str]) -> list[str]:
    flipped = {t: has_flips(m, t) for t in tasks}
    head = ["Tier", "KV", "Verdict"] + [c for t in tasks for c in [t, "recovery"] + ["flips"] * flipped[t]] + ["Weights MiB"]
    lines = [md_row(head), "|" + "---|" * len(head)]
    for r in m.rows:
        f = r.facts
        if r is base:
            verdict = "baseline"
            cells = [c for t in tasks for c in [", ".join(f"{label(x, with_task=False)} {f.metrics[x]:.1f}"
                                                          for x in gated(m, t) if x in f.metrics), "–"]
                     + ["–"] * flipped[t]]
        elif f.status != "ok":
            verdict, cells = status_word(f.status), ["–"] * (len(head) - 4)
        else:
            verdict = r.judgement.overall.replace("fail", "FAIL")
            cells = [c for t in tasks for c in [task_cell(r, t, None, interval=True), recovery_cell(r, base, t)]
                     + [flips_cell(m, r, t)] * flipped[t]]
        lines.append(md_row([f.tier, f.kv, verdict] + cells + [f"{mib(f.weight_bytes):.1f}" if f.weight_bytes else "–"]))
    return lines + ["", *wrap("Task cells: verdict, delta in points [interval] at its confidence; recovery: variant / "
                              f"baseline; flips: items flipped; {NOT_RUN} (why): never run; moot: the variant could no "
                              "longer pass (*Every variant* says why in full)."), ""]


def lines(m: ModelReport, header: Header, provenance_line: str, opening: list[str]) -> list[str]:
    """Page 1 for one model: `opening` (the recommendation, from summary.recommendation_lines) first."""
    tasks = judged_tasks(m)
    base = baseline_row(m, header.baseline)
    out = [x for line in opening for x in (wrap(line) if line and not line.startswith("|") else [line])]
    out += pass_means(m, header, tasks) + baseline_scores(m, base, tasks) + memory_saved(m, base)
    out += [x for line in gpu_picks.lines(m, base, header.baseline.kv, header.budget.max_model_len) for x in wrap(line)]
    out += caveats(m, header, provenance_line)[:-1] + [x for line in close_call.lines(m) for x in wrap(line)] + [""]
    if base is not None and tasks:
        out += table(m, base, tasks)
    return out


def caveats(m: ModelReport, header: Header, provenance_line: str) -> list[str]:
    """What a reviewer must keep beside the pick, each from the rows that show it."""
    rows = [r for r in m.rows if r.facts.measured_on]
    found = []
    if rows and not any(r.facts.measured_on.accelerator for r in rows if r.facts.measured_on):
        found.append("measured on a CPU: no GPU kernel, speed or memory was measured (per-GPU lines are planned)")
    if any(r.facts.backend == "reference" and r.facts.kv != header.baseline.kv for r in m.rows):
        found.append("the quantized KV cache is simulated (values rounded as vLLM stores them), not vLLM's")
    single = sorted({why for r in m.rows if r.judgement.verdicts and (why := r.facts.one_arithmetic())})
    if single:
        found.append("the verdicts rest on the run's arithmetic alone, not checked in a second ("
                     + "; ".join(single) + ")")
    unchecked = sorted({r.variant for r in m.rows for v in r.judgement.verdicts.values() if v.unchecked})
    if unchecked:
        found.append(f"unchecked verdicts (inconclusive) on {', '.join(unchecked)}")
    cut = [r.variant for r in m.rows if r.facts.budget_cut()]
    if cut:
        found.append(f"the time budget ended {', '.join(cut)} at a completed look (serving.vllm.budget.max_wall_s)")
    lines = wrap(provenance_line)
    if found:
        lines += wrap("Caveats: " + "; ".join(found) + ".")
    return lines + [""]
