"""The report's plots, each a PNG: quality delta (with the interval each verdict was read on) against
weight memory, one panel per gated metric the model can do; next-token KL and retrieval accuracy against
context length, one panel per tier."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.domain.hardware.memory import mib
from pipeline.report.cells import label
from pipeline.scoring.verdict import long_kv, retrieval_length
from pipeline.scoring.verdict.rows import Row


def spread(xs: list[float], width: float) -> list[float]:
    """xs with the points that share a value (variants of equal memory) set side by side, `width` apart,
    centred on it, so their intervals do not hide each other."""
    out, seen = list(xs), {}
    for i, x in enumerate(xs):
        seen.setdefault(round(x, 1), []).append(i)
    for group in seen.values():
        for k, i in enumerate(group):
            out[i] = xs[i] + (k - (len(group) - 1) / 2) * width
    return out


def quality_vs_memory(rows: list[Row], metrics: list[str], out: Path, title: str,
                      limits: dict[str, float] | None = None, round_kv: list[str] | None = None) -> None:
    """A panel per metric; a colour per tier and a marker per KV mode (circles: the cache in the model's
    dtype, `round_kv`; squares: any other), named in one legend, so no label overlaps another;
    limits: metric -> allowed drop (drawn as a dashed line at -limit)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    shown = [m for m in metrics if any(m in r.evidence.intervals for r in rows)]
    tiers = list(dict.fromkeys(r.facts.tier for r in rows))
    colour = {t: f"C{k % 10}" for k, t in enumerate(tiers)}
    marker = {kv: "o" if kv in (round_kv or []) else "s" for kv in dict.fromkeys(r.facts.kv for r in rows)}
    fig, axes = plt.subplots(1, max(len(shown), 1), figsize=(4.6 * max(len(shown), 1) + 1.6, 3.8), squeeze=False)
    for ax, metric in zip(axes[0], shown):
        drawn = [(r, r.evidence.intervals[metric]) for r in rows
                 if metric in r.evidence.intervals and r.facts.weight_bytes]
        xs = [mib(r.facts.weight_bytes) for r, _ in drawn]
        if not xs:      # no compared variant's weights are known here (an endpoint's are on its server)
            ax.text(0.5, 0.5, "no compared variant's weights known", ha="center", transform=ax.transAxes, fontsize=8)
        width = 0.012 * ((max(xs) - min(xs)) or max(xs)) if xs else 0.0
        for (r, iv), x in zip(drawn, spread(xs, width)):
            ax.errorbar(x, iv.delta, yerr=[[iv.delta - iv.lo], [iv.hi - iv.delta]], fmt=marker[r.facts.kv],
                        color=colour[r.facts.tier], capsize=3, ms=5)
        ax.axhline(0, color="grey", lw=0.8)
        if limits and metric in limits:
            ax.axhline(-limits[metric], color="red", lw=0.8, ls="--")
        ax.set_xlabel("weights (MiB)")
        ax.set_ylabel("delta vs baseline (points)")
        ax.set_title(label(metric), fontsize=10)    # `translation BLEU`
    handles = [Line2D([], [], color=colour[t], marker="s", ls="", label=t) for t in tiers]
    handles += [Line2D([], [], color="black", marker=m, ls="", mfc="none", label=f"KV {kv}") for kv, m in marker.items()]
    handles += [Line2D([], [], color="red", ls="--", lw=0.8, label="minus the allowed drop")]
    fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1 - 1.6 / fig.get_figwidth(), 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(out)


@dataclass(frozen=True)
class Line:
    tier: str
    kv: str
    xs: list[float]
    ys: list[float]


def panels(lines: list[Line], baseline_kv: str) -> tuple[dict[str, list[Line]], dict[str, str]]:
    """(tier -> its lines, tiers in the order they first appear: the report's row order; KV mode -> its
    colour, the baseline's mode first so that every plot gives a mode the same colour)."""
    by_tier: dict[str, list[Line]] = {}
    for line in lines:
        by_tier.setdefault(line.tier, []).append(line)
    kvs = sorted(dict.fromkeys(line.kv for line in lines), key=lambda kv: kv != baseline_kv)
    return by_tier, {kv: f"C{k % 10}" for k, kv in enumerate(kvs)}


def _by_length(lines: list[Line], out: Path, title: str, xlabel: str, ylabel: str, baseline_kv: str,
               ylim: tuple[float, float] | None = None) -> None:
    """One panel per tier, one line per KV mode in it (a colour per mode, the same in every panel; the
    baseline's mode solid with open markers, any other dashed with small filled ones, so two modes that
    measured the same are both seen), on a log2 length axis, y shared; writes the PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_tier, colour = panels(lines, baseline_kv)
    ncols = min(4, len(by_tier))
    nrows = -(-len(by_tier) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.9 * ncols, 2.4 * nrows + 0.6), sharex=True, sharey=True,
                             squeeze=False)
    for ax, (tier, group) in zip(axes.flat, by_tier.items()):
        for line in group:
            base = line.kv == baseline_kv
            ax.plot(line.xs, line.ys, color=colour[line.kv], ls="-" if base else "--",
                    marker="o", ms=8 if base else 4, mfc="none" if base else colour[line.kv], label=f"KV {line.kv}")
        ax.set_title(tier, fontsize=9)
        ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(by_tier):]:
        ax.set_visible(False)
    if ylim is not None:
        axes[0][0].set_ylim(*ylim)
    for ax in axes[-1]:
        ax.set_xlabel(xlabel, fontsize=8)
    for row in axes:
        row[0].set_ylabel(ylabel, fontsize=8)
    found = {h.get_label(): h for ax in axes.flat for h in ax.get_lines()}
    handles = {f"KV {kv}": found[f"KV {kv}"] for kv in colour if f"KV {kv}" in found}
    fig.legend(list(handles.values()), list(handles), loc="upper right", fontsize=7, ncol=len(handles))
    fig.suptitle(title, fontsize=10, x=0.02, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def kl_by_position(rows: list[Row], out: Path, title: str, baseline_kv: str) -> bool:
    """Next-token KL against the baseline by position bucket (eval.long_context): a panel per tier, a
    line per KV mode measured. False when no variant was measured."""
    shown = [r for r in rows if long_kv.measured(r.facts)]
    if not shown:
        return False
    lines = []
    for r in shown:
        b = [x for x in r.facts.long_context.buckets if x.kl_mean is not None]
        lines.append(Line(r.facts.tier, r.facts.kv, [(x.lo + x.hi) / 2 for x in b], [x.kl_mean for x in b]))
    _by_length(lines, out, title, "token position (bucket midpoint)", "KL to the baseline (nats/token)", baseline_kv)
    return True


def retrieval_by_length(entries: list[retrieval_length.ByLength], out: Path, title: str, baseline_kv: str) -> bool:
    """The retrieval suite's exact-match accuracy by prompt length: a panel per tier, a line per KV mode
    that measured a length. False when there is nothing to draw."""
    shown = [e for e in entries if any(c.accuracy is not None for _, c in e.cells)]
    if not shown:
        return False
    lines = []
    for e in shown:
        points = [(x.tokens, c.accuracy) for x, c in e.cells if c.accuracy is not None]
        lines.append(Line(e.tier, e.kv, [p[0] for p in points], [p[1] for p in points]))
    _by_length(lines, out, title, "prompt length (tokens)", "exact match (%)", baseline_kv, ylim=(-5, 105))
    return True
