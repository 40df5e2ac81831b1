"""decision.md's sequential-evaluation lines (eval.sequential): how many variants settled, the samples
they read against a fixed-n run at the same caps, and where each one stopped. Pure."""
from __future__ import annotations

from pipeline.report.cells import md_row
from pipeline.report.document import ModelReport
from pipeline.scoring.rows import Row

SETTLED = ("pass", "fail")


def looked(m: ModelReport) -> list[Row]:
    """The variants evaluated in looks (the baseline runs to every cap)."""
    return [r for r in m.rows if r.facts.status == "ok" and r.facts.looks and r.judgement.overall != "baseline"]


def samples_read(r: Row, caps: dict[str, int]) -> tuple[int, int]:
    """(samples the variant read, samples a fixed-n run reads at the same caps)."""
    return sum(lk["n"] for lk in r.facts.looks.values()), sum(caps.values())


def summary_line(m: ModelReport) -> list[str]:
    rows = looked(m)
    if not rows:
        return []
    read = [samples_read(r, m.num_samples) for r in rows]
    n, total = sum(a for a, _ in read), sum(b for _, b in read)
    settled = sum(1 for r in rows if r.judgement.overall in SETTLED)
    stopped = sum(1 for r in rows if "stopped at look" in (r.facts.reason or ""))
    return [f"Looks: {settled} of {len(rows)} variants settled (pass or fail); together they read {n:,} of the "
            f"{total:,} samples a fixed-n run at the same caps reads ({n / total:.0%}); {stopped} stopped at the "
            "look where a gated metric failed (*Looks*)." + seconds_text(m, rows), ""]


def seconds_text(m: ModelReport, rows: list[Row]) -> str:
    """The looked variants' evaluate seconds against a fixed-n run's, estimated as one baseline stage
    per variant (the baseline reads every cap, with fidelity and the load test, as a fixed-n row would)."""
    base = next((r.facts.seconds for r in m.rows if r.judgement.overall == "baseline"), None)
    used = [r.facts.seconds for r in rows]
    if not base or any(s is None for s in used):
        return ""
    fixed = base * len(rows)
    return (f" Their evaluate stages took {sum(used) / 60:.1f} min against about {fixed / 60:.1f} min at fixed n "
            f"({len(rows)} x the baseline's {base:.0f} s; {sum(used) / fixed:.0%}; samples read from the sample "
            "cache cost none).")


def looks_lines(m: ModelReport) -> list[str]:
    rows = looked(m)
    if not rows:
        return []
    tasks = list(m.num_samples)
    lines = ["### Looks", "",
             "Each variant read its tasks in looks, the same documents as the baseline in one seeded order, each "
             "verdict read at its look's group-sequential confidence (docs/decision-rule.md \"Looks\"). A cell: "
             "the look it stopped at, samples read of the cap; `-`: not run (the variant had already failed).", "",
             md_row(["variant", *tasks, "samples read", "stopped"]), md_row(["---"] * (len(tasks) + 3))]
    for r in rows:
        cells = []
        for t in tasks:
            lk = r.facts.looks.get(t)
            cells.append("-" if lk is None else f"{lk['looks']}/{lk.get('of', 1)}: {lk['n']:,} of {lk['cap']:,}")
        n, total = samples_read(r, m.num_samples)
        stop = r.facts.reason if "stopped at look" in (r.facts.reason or "") else ""
        lines.append(md_row([r.variant, *cells, f"{n:,} of {total:,}", stop]))
    return lines + [""]
