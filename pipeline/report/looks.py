"""decision.md's sequential-evaluation lines (eval.sequential): how many variants settled, the samples
they read against a fixed-n run at the same caps, and where each one stopped; for speed.md, the
seconds that cost. Pure."""
from __future__ import annotations

from pipeline.domain.result.contract import CANNOT_PASS
from pipeline.report.cells import md_row
from pipeline.report.document import ModelReport
from pipeline.scoring.verdict.rows import Row

SETTLED = ("pass", "fail")


def looked(m: ModelReport) -> list[Row]:
    """The variants evaluated in looks (the baseline runs to every cap)."""
    return [r for r in m.rows if r.facts.status == "ok" and r.facts.looks and r.judgement.overall != "baseline"]


def samples_read(r: Row, caps: dict[str, int]) -> tuple[int, int]:
    """(samples the variant read, samples a fixed-n run reads at the same caps)."""
    return sum(lk.n for lk in r.facts.looks.values()), sum(caps.values())


def plain_reads(r: Row) -> dict[str, int]:
    """task -> the samples the same looks would have read unstratified (a stratified task: its record's
    `plain` at the look it stopped; any other: what it read)."""
    return {t: (lk.strata.plain[lk.looks - 1] if lk.strata else lk.n) for t, lk in r.facts.looks.items()}


def summary_line(m: ModelReport) -> list[str]:
    rows = looked(m)
    if not rows:
        return []
    read = [samples_read(r, m.num_samples) for r in rows]
    n, total = sum(a for a, _ in read), sum(b for _, b in read)
    settled = sum(1 for r in rows if r.judgement.overall in SETTLED)
    stopped = sum(1 for r in rows if r.facts.stopped)
    unpassable = sum(1 for r in rows if CANNOT_PASS in r.facts.not_run.values())
    skipped = (f"; {unpassable} could no longer pass (a gated metric open at its cap) and did not run their "
               "remaining tasks" if unpassable else "")
    cut = sum(1 for r in rows if r.facts.budget_cut())
    skipped += (f"; {cut} read at the last look completed when the time budget ran out (serving.vllm.budget."
                "max_wall_s)" if cut else "")
    plain = sum(sum(plain_reads(r).values()) for r in rows)
    strat = (f", and {plain:,} the same looks unstratified would have ({n / plain:.0%}; eval.sequential.strata)"
             if plain != n else "")
    return [f"Looks: {settled} of {len(rows)} variants settled (pass or fail); together they read {n:,} of the "
            f"{total:,} samples a fixed-n run at the same caps reads ({n / total:.0%}){strat}; {stopped} stopped at the "
            f"look where a gated metric failed{skipped} (*Looks*).", ""]


def cost_line(m: ModelReport) -> list[str]:
    """What the looked variants' evaluate stages took, measured (speed.md: it varies run to run)."""
    rows = looked(m)
    if not rows:
        return []
    text = (seconds_text(m, rows) + phases_text(rows)).strip()
    return [text, ""] if text else []


def fixed_n_seconds(r: Row, base: Row, caps: dict[str, int]) -> float | None:
    """What the variant's evaluate would have taken reading `caps` samples per task (every cap; or the
    unstratified looks' reads, plain_reads): its stage seconds plus, per task,
    the samples it did not read at what a sample of that task costs this variant (its own seconds per
    computed sample; for a task it never computed, the baseline's rate times the variant's speed ratio
    to the baseline on the tasks both computed). None where a needed rate was not measured (samples
    read from the cache cost nothing and time nothing)."""
    own, theirs = r.facts.task_seconds, base.facts.task_seconds
    if r.facts.seconds is None:
        return None
    shared = [t for t, (n, _) in own.items() if n and theirs.get(t, (0, 0.0))[0]]
    ratio = (sum(own[t][1] for t in shared) / sum(own[t][0] * theirs[t][1] / theirs[t][0] for t in shared)
             if shared and all(theirs[t][1] > 0 for t in shared) else None)
    extra = 0.0
    for task, cap in caps.items():
        unread = cap - (lk.n if (lk := r.facts.looks.get(task)) is not None else 0)
        if unread <= 0:
            continue
        n, spent = own.get(task, (0, 0.0))
        if n:
            extra += unread * spent / n
        elif ratio is not None and theirs.get(task, (0, 0.0))[0]:
            extra += unread * ratio * theirs[task][1] / theirs[task][0]
        else:
            return None
    return r.facts.seconds + extra


def seconds_text(m: ModelReport, rows: list[Row]) -> str:
    """The looked variants' evaluate seconds against a fixed-n run's at the same caps (fixed_n_seconds)."""
    base = next((r for r in m.rows if r.judgement.overall == "baseline"), None)
    if base is None:
        return ""
    used = [r.facts.seconds for r in rows]
    fixed = [fixed_n_seconds(r, base, m.num_samples) for r in rows]
    plain = [fixed_n_seconds(r, base, plain_reads(r)) for r in rows]
    if any(s is None for s in used + fixed + plain):
        return (" Their evaluate seconds against a fixed-n run: not estimable here (a task's cost per sample was "
                "not measured: its samples were read from the sample cache).")
    strat = (f", about {sum(plain) / 60:.1f} min in the same looks unstratified"
             if abs(sum(plain) - sum(used)) > 0.5 else "")
    return (f" Their evaluate stages took {sum(used) / 60:.1f} min against about {sum(fixed) / 60:.1f} min at "
            f"fixed n ({sum(used) / sum(fixed):.0%}{strat}; each variant's unread samples at its own measured cost "
            "per sample of the task).")


PHASES = {"load": "loading", "tasks": "the tasks", "second_arithmetic": "their check in the second arithmetic",
          "fidelity": "fidelity", "long_context": "long context", "throughput": "the load test"}


def phases_text(rows: list[Row]) -> str:
    """Where the looked variants' evaluate seconds went (result.json "phases"), summed; the rest of the
    stages' seconds is their processes' start and the writing of results. Empty when no row recorded them."""
    timed = [r for r in rows if r.facts.phases and r.facts.seconds is not None]
    if not timed:
        return ""
    total = sum(r.facts.seconds for r in timed)
    sums = {k: sum(r.facts.phases.get(k, 0.0) for r in timed) for k in PHASES}
    rest = total - sum(sums.values())
    parts = [f"{PHASES[k]} {v / 60:.1f} min" for k, v in sums.items() if v > 0]
    parts.append(f"process start and writing {max(rest, 0.0) / 60:.1f} min")
    return f" Of the {total / 60:.1f} min of {len(timed)} evaluate stages: " + ", ".join(parts) + "."


def looks_lines(m: ModelReport) -> list[str]:
    rows = looked(m)
    if not rows:
        return []
    tasks = list(m.num_samples)
    lines = ["### Looks", "",
             "Each variant read its tasks in looks, the same documents as the baseline in one seeded order, each "
             "verdict read at its look's group-sequential confidence (docs/decision-rule.md \"Looks\"). A cell: "
             "the look it stopped at, samples read of the cap (fixed n); *unstratified, same looks*: what the same "
             "looks read without eval.sequential.strata (a choice task then reads every item alike); `-`: not run (a gated task: the variant had already "
             "failed; a task no tolerance gates, with eval.sequential.probes `passable`: the variant could no "
             "longer pass).", "",
             md_row(["variant", *tasks, "samples read", "unstratified, same looks", "stopped"]),
             md_row(["---"] * (len(tasks) + 4))]
    for r in rows:
        cells = []
        for t in tasks:
            lk = r.facts.looks.get(t)
            cells.append("-" if lk is None else f"{lk.looks}/{lk.of or 1}: {lk.n:,} of {lk.cap:,}")
        n, total = samples_read(r, m.num_samples)
        stop = r.facts.stopped or r.facts.budget_cut() or ""
        if unpassable := [t for t, why in r.facts.not_run.items() if why == CANNOT_PASS]:
            stop = f"not run: {', '.join(unpassable)} (cannot pass: a gated metric open at its cap or unstable)"
        lines.append(md_row([r.variant, *cells, f"{n:,} of {total:,}", f"{sum(plain_reads(r).values()):,}", stop]))
    return lines + [""]
