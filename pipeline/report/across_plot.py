"""results/plots/across-models-quality_vs_memory.png: every variant of every model against the reference
across models (decision.baseline.model), one panel per gated metric. x: weight memory (GiB, log scale),
the target GPUs' memory drawn as vertical lines; y: the paired delta against the reference with the
interval its verdict was read on; the Pareto front (no other variant both smaller and better) joined by
a line. The y-range is zoomed to where the decision is made (down to three allowed drops below the
reference): a variant below it is drawn at the edge as a down-pointing triangle, its delta written
beside it. A colour per model; filled: pass, hollow: inconclusive, a cross: fail."""
from __future__ import annotations

from pathlib import Path

from pipeline.report.cells import label
from pipeline.report.document import AcrossReport
from pipeline.schema import TargetGpu

GIB = 1024 ** 3
ZOOM = 3.0          # the y-range reaches this many allowed drops below the reference


def pareto(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point dominates (memory no larger and delta no lower, one of them
    strictly), in increasing memory."""
    front = [i for i, (x, y) in enumerate(points)
             if not any((x2 <= x and y2 >= y) and (x2, y2) != (x, y) for x2, y2 in points)]
    return sorted(front, key=lambda i: points[i][0])


def y_range(deltas: list[tuple[float, float, float]], limit: float) -> tuple[float, float]:
    """(bottom, top): from ZOOM allowed drops below 0 (or the lowest interval above that) to the highest
    interval's top, with a little room."""
    bottom = -ZOOM * max(limit, 1e-9)
    lows = [lo for _, lo, _ in deltas if lo >= bottom]
    top = max([hi for _, _, hi in deltas] + [limit * 0.5])
    return min(lows + [-1.2 * limit]) - 0.1 * limit, top + 0.1 * max(limit, top)


def quality_vs_memory(a: AcrossReport, gpus: dict[str, TargetGpu], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    rows = [r for r in a.across.rows if r.facts.weight_bytes and r.judgement.overall != "baseline"]
    shown = [m for m in a.limits if any(m in r.evidence.intervals for r in rows)]
    models = list(dict.fromkeys(r.facts.model for r in a.across.rows))
    colour = {m: f"C{k % 10}" for k, m in enumerate(models)}
    fig, axes = plt.subplots(1, max(len(shown), 1), figsize=(5.5 * max(len(shown), 1) + 1.8, 4.2), squeeze=False)
    for ax, metric in zip(axes[0], shown):
        drawn = [(r, r.evidence.intervals[metric]) for r in rows if metric in r.evidence.intervals]
        limit = a.limits[metric]
        bottom, top = y_range([(iv.delta, iv.lo, iv.hi) for _, iv in drawn], limit)
        for r, iv in drawn:
            x, v = r.facts.weight_bytes / GIB, r.judgement.verdicts.get(metric)
            style = marker_style(v.verdict if v else "inconclusive", colour[r.facts.model])
            if iv.delta < bottom:
                ax.plot(x, bottom, marker="v", color=colour[r.facts.model], ms=7, clip_on=False)
                ax.annotate(f"{iv.delta:+.0f}", (x, bottom), textcoords="offset points", xytext=(4, 3), fontsize=7)
                continue
            ax.errorbar(x, iv.delta, yerr=[[iv.delta - iv.lo], [iv.hi - iv.delta]], capsize=3, **style)
        xs = [(r.facts.weight_bytes / GIB, iv.delta) for r, iv in drawn]
        front = pareto(xs)
        ax.plot([xs[i][0] for i in front], [min(max(xs[i][1], bottom), top) for i in front],
                color="black", lw=0.8, ls=":", zorder=0)
        ax.axhline(0, color="grey", lw=0.8)
        ax.axhline(-limit, color="red", lw=0.8, ls="--")
        for gib, names in by_memory(gpus).items():     # one line per memory size, its GPUs named once
            ax.axvline(gib, color="grey", lw=0.6, ls="-.")
            ax.annotate(", ".join(names), (gib, top), rotation=90, fontsize=7, va="top", ha="right")
        ax.set_xscale("log")
        ax.set_ylim(bottom, top)
        ax.set_xlabel("weights (GiB, log scale)")
        ax.set_ylabel("delta vs the reference (points)")
        ax.set_title(label(metric), fontsize=10)    # `translation BLEU`
    handles = [Line2D([], [], color=colour[m], marker="o", ls="", label=m) for m in models]
    handles += [Line2D([], [], color="black", marker="o", ls="", label="pass"),
                Line2D([], [], color="black", marker="o", mfc="none", ls="", label="inconclusive"),
                Line2D([], [], color="black", marker="x", ls="", label="fail"),
                Line2D([], [], color="black", marker="v", ls="", label="below the range (delta written)"),
                Line2D([], [], color="red", ls="--", lw=0.8, label="minus the allowed drop"),
                Line2D([], [], color="black", ls=":", lw=0.8, label="Pareto front"),
                Line2D([], [], color="grey", ls="-.", lw=0.6, label="GPU memory")]
    fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    ref = a.across.reference
    fig.suptitle(f"every model against {ref.model}/{ref.variant}: quality delta vs weight memory" if ref else "", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1 - 1.8 / (5.5 * max(len(shown), 1) + 1.8), 0.95))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def by_memory(gpus: dict[str, TargetGpu]) -> dict[float, list[str]]:
    out: dict[float, list[str]] = {}
    for g, gpu in gpus.items():
        out.setdefault(float(gpu.memory_gib), []).append(g)
    return out


def marker_style(verdict: str, colour: str) -> dict:
    if verdict == "pass":
        return {"fmt": "o", "color": colour, "ms": 6}
    if verdict == "fail":
        return {"fmt": "x", "color": colour, "ms": 7}
    return {"fmt": "o", "color": colour, "mfc": "none", "ms": 6}
