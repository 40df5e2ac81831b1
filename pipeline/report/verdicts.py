"""Why each verdict, and the power of each gated metric, as one table each: a row per compared
variant, a column per gated metric. What is the same for every variant (a metric the baseline cannot
do, the allowed drop, n) is said once, in the column head or above the table. Pure."""
from __future__ import annotations

from pipeline.report.cells import MARK, is_baseline, label, md_row, task_of, word
from pipeline.report.document import ModelReport
from pipeline.schema import Baseline
from pipeline.scoring.planning.power import Power
from pipeline.scoring.verdict.judge import not_capable
from pipeline.scoring.verdict.rows import NOT_RUN, Row, Settle


def compared(m: ModelReport, base: Baseline | None) -> list[Row]:
    return [r for r in m.rows if r.facts.status == "ok" and not is_baseline(r, base) and r.judgement.verdicts]


def in_report_order(m: ModelReport, metrics: list[str]) -> list[str]:
    """Metric ids in the order the rows report them (task by task)."""
    order = list(dict.fromkeys(mid for r in m.rows for mid in r.facts.metrics))
    return sorted(metrics, key=lambda mid: order.index(mid) if mid in order else len(order))


def one_value(values: list) -> object | None:
    """The value every row shares, else None."""
    return values[0] if values and all(v == values[0] for v in values) else None


def stopped(r: Row) -> str | None:
    """Where a variant that left tasks not run stopped (result.json `stopped`: the look where a gated
    metric failed), said once in its row; the tasks it then left are its cells' "not run (...)"."""
    left = any(v.verdict == NOT_RUN for v in r.judgement.verdicts.values())
    return r.facts.stopped if left else None


def verdict_cell(r: Row, mid: str, shared_limit: bool) -> str:
    """One metric's cell: a metric whose task was never run reads "not run (<why>)" (Verdict.text)."""
    v = r.judgement.verdicts.get(mid)
    if v is None:
        return "–"
    if v.verdict == NOT_RUN:
        return v.text()
    if v.note is not None:
        return f"{MARK[v.verdict]}: {v.note}"
    cell = f"{word(v)} [{v.lo:+.2f}, {v.hi:+.2f}]"
    if not shared_limit:
        cell += f" vs -{v.limit:.2f} (n={v.n})"
    if v.settle is not None:
        cell += f"; {v.settle.short()}"
    return cell


def why_lines(m: ModelReport, base: Baseline | None, confidence: float) -> list[str]:
    rows = compared(m, base)
    if not rows:
        return []
    metrics = in_report_order(m, list(dict.fromkeys(mid for r in rows for mid in r.judgement.verdicts)))
    lines = ["### Why each verdict", ""]
    columns = []
    for mid in metrics:
        found = [r.judgement.verdicts.get(mid) for r in rows]
        same = one_value([(v.verdict, v.note) for v in found if v is not None])
        capable = [v for v in found if v is not None and not_capable(v)]
        if capable:         # the baseline's: said once, no column of the same sentence
            lines.append(f"- {label(mid)}: not judged on any variant: {capable[0].note}.")
        elif same is not None and same[1] is not None and None not in found:
            lines.append(f"- {label(mid)}: {same[0]} on every variant: {same[1]}.")
        else:
            columns.append(mid)
    bare = {r.variant: [label(x) for x in r.facts.metrics if x not in r.evidence.intervals
                        and x not in r.judgement.verdicts] for r in rows}
    for name in dict.fromkeys(x for found in bare.values() for x in found):
        which = [v for v, found in bare.items() if name in found]
        where = "every variant" if len(which) == len(rows) else ", ".join(which)
        lines.append(f"- {name}: reported without an interval (no per-sample form), not gated ({where}).")
    if len(lines) > 2:
        lines.append("")
    if not columns:
        return lines
    head, shared = ["Variant", "Verdict"], {}
    for mid in columns:
        ivs = [v for r in rows if (v := r.judgement.verdicts.get(mid)) is not None and v.note is None]
        limit_n = one_value([(v.limit, v.n) for v in ivs])
        shared[mid] = limit_n is not None
        head.append(f"{label(mid)}: interval vs -{limit_n[0]:.2f} (n={limit_n[1]})" if limit_n else label(mid))
    lines += [f"Each cell: the verdict and the interval it was read on (variant - baseline, turned so that a "
              "drop is negative; a look's repeated interval, one-sided "
              f"{(1 - confidence) / 2:.1%} over all looks), against minus the allowed drop; an inconclusive one "
              "says how many samples would settle it if the effect held (it may not hold: a tier whose "
              "effect sits at the margin settles at no sample size; docs/performance.md).", "",
              md_row(head + ["Largest regressions"]), "|" + "---|" * (len(head) + 1)]
    for r in rows:
        link, why_stopped = m.regression_links.get(r.variant), stopped(r)
        why = why_stopped or r.facts.budget_cut()
        verdict = MARK.get(r.judgement.overall, r.judgement.overall) + (f": {why}" if why else "")
        lines.append(md_row([r.variant, verdict]
                            + [verdict_cell(r, mid, shared[mid]) for mid in columns]
                            + [f"[{r.variant}]({link})" if link else "–"]))
    return lines + [""]


def power_lines(m: ModelReport, base: Baseline | None) -> list[str]:
    """SD / MDD / n80 per variant and gated metric (How to read this: Power)."""
    rows = [r for r in m.rows if r.evidence.power and not is_baseline(r, base)]
    if not rows:
        return []
    metrics = in_report_order(m, list(dict.fromkeys(mid for r in rows for mid in r.evidence.power)))
    ns = {mid: one_value([p.n for r in rows if (p := r.evidence.power.get(mid)) is not None]) for mid in metrics}
    head = ["Variant"] + [f"{label(mid)} (n={ns[mid]})" if ns[mid] is not None else label(mid) for mid in metrics]
    lines = ["### Power", "", "Each cell: the spread the verdict's own interval implies (half-width x sqrt(n) / z; "
             "not the sample SD, which is near 0 where most outputs equal the baseline's) / minimum detectable "
             "drop at this n / samples for 80% power at the tolerance (n80), in items read by this design; an n80 "
             "beyond what the design reads says the pool it would take.", "",
             md_row(head), "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.variant]
        for mid in metrics:
            p = r.evidence.power.get(mid)
            if p is None:
                cells.append("–")
                continue
            n80 = n80_text(p, r.facts.reach(task_of(mid)) or fixed_reach(m.num_samples.get(task_of(mid))))
            cells.append(f"{p.sd:.1f} / {p.mdd:.1f} / {n80}" + ("" if ns[mid] is not None else f" (n={p.n})"))
        lines.append(md_row(cells))
    return lines + [""]


def fixed_reach(cap: int | None) -> tuple[int, int] | None:
    """A task read at a fixed n reads all of its pool."""
    return (cap, cap) if cap else None


def n80_text(p: Power, reach: tuple[int, int] | None) -> str:
    """n80, and where it is more than the design reads (`reach`: the most items it reads, from a pool of
    that many), the pool it would take, as the close-call line says it (rows.Settle)."""
    if p.n_for_80pct_power is None:
        return "–"
    found = Settle(p.n_for_80pct_power, "pass", *reach) if reach is not None else None
    more = (f" (more than the {found.readable:,} this design reads: a pool of about {found.pool_needed():,})"
            if found is not None and found.beyond() else "")
    return f"{p.n_for_80pct_power:,}{more}"
