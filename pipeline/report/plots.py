"""Quality delta (with its bootstrap intervals) against weight memory, one panel per metric. Writes a PNG."""
from __future__ import annotations

from pathlib import Path

from pipeline.domain.memory import mib
from pipeline.scoring import long_kv, retrieval_length
from pipeline.scoring.rows import Row


def quality_vs_memory(rows: list[Row], metrics: list[str], out: Path, title: str,
                      limits: dict[str, float] | None = None, round_kv: list[str] | None = None) -> None:
    """limits: metric -> allowed drop (drawn as a dashed line at -limit); round_kv: the KV modes drawn
    as circles (the cache in the model's dtype), every other mode as squares."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [m for m in metrics if any(m in r.evidence.intervals for r in rows)]
    fig, axes = plt.subplots(1, max(len(shown), 1), figsize=(4.2 * max(len(shown), 1), 3.6), squeeze=False)
    for ax, metric in zip(axes[0], shown):
        for r in rows:
            iv = r.evidence.intervals.get(metric)
            if iv is None or not r.facts.weight_bytes:
                continue
            x = mib(r.facts.weight_bytes)
            marker = "o" if r.facts.kv in (round_kv or []) else "s"
            ax.errorbar(x, iv.delta, yerr=[[iv.delta - iv.lo], [iv.hi - iv.delta]], fmt=marker, capsize=3)
            ax.annotate(r.variant, (x, iv.delta), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.axhline(0, color="grey", lw=0.8)
        if limits and metric in limits:
            ax.axhline(-limits[metric], color="red", lw=0.8, ls="--", label="-tolerance")
            ax.legend(loc="lower right", fontsize=7)
        ax.set_xlabel("weights (MiB)")
        ax.set_ylabel(f"{metric} delta vs baseline")
        ax.set_title(metric)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(out)


def _by_length(lines: list[tuple[list, list, bool, str]], out: Path, title: str, xlabel: str, ylabel: str,
               ylim: tuple[float, float] | None = None) -> None:
    """One line per (xs, ys, dashed, label) against a log2 length axis; writes the PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for xs, ys, dashed, label in lines:
        ax.plot(xs, ys, marker="o", ls="--" if dashed else "-", label=label)
    ax.set_xscale("log", base=2)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def kl_by_position(rows: list[Row], out: Path, title: str, baseline_kv: str) -> bool:
    """Next-token KL against the baseline by position bucket (eval.long_context), one line per variant
    measured: solid in the baseline's KV mode, dashed in any other. False when no variant was measured."""
    shown = [r for r in rows if long_kv.measured(r.facts)]
    if not shown:
        return False
    lines = []
    for r in shown:
        b = [x for x in r.facts.long_context["buckets"] if x.get("kl_mean") is not None]
        lines.append(([(x["lo"] + x["hi"]) / 2 for x in b], [x["kl_mean"] for x in b], r.facts.kv != baseline_kv,
                      r.variant))
    _by_length(lines, out, title, "token position (bucket midpoint)", "KL to the baseline (nats/token)")
    return True


def retrieval_by_length(entries: list[retrieval_length.ByLength], out: Path, title: str, baseline_kv: str) -> bool:
    """The retrieval suite's exact-match accuracy by prompt length, one line per variant that measured a
    length: solid in the baseline's KV mode, dashed in any other. False when there is nothing to draw."""
    shown = [e for e in entries if any(c.accuracy is not None for _, c in e.cells)]
    if not shown:
        return False
    lines = []
    for e in shown:
        points = [(x.tokens, c.accuracy) for x, c in e.cells if c.accuracy is not None]
        lines.append(([p[0] for p in points], [p[1] for p in points], e.kv != baseline_kv, e.variant))
    _by_length(lines, out, title, "prompt length (tokens)", "exact match (%)", ylim=(-5, 105))
    return True
