"""decision.md's engine-noise section: the baseline under a second arithmetic against the baseline as
run (stage noise), the unstable verdicts it makes, and each variant's flips inside its margin. Pure."""
from __future__ import annotations

from pipeline.report.cells import md_row
from pipeline.report.document import ModelReport
from pipeline.scoring.decision import INCONCLUSIVE


def unstable(m: ModelReport) -> list[tuple[str, str, str]]:
    """(variant, metric, its verdict on sampling alone) for every verdict the engine's noise undid."""
    return [(r.variant, mid, v.unstable) for r in m.rows for mid, v in r.judgement.verdicts.items()
            if v.unstable is not None and v.verdict == INCONCLUSIVE]


def summary_line(m: ModelReport) -> list[str]:
    """One line under the recommendation: whether verdicts account for the engine's own noise."""
    f = m.noise
    if f is None:
        return []
    if f.status != "ok":
        return [f"Engine noise: not measured ({f.why or f.status}); verdicts rest on sampling alone.", ""]
    n = len(unstable(m))
    return [f"Engine noise: verdicts include the engine's own noise (the baseline under {f.arithmetic}); "
            f"{n} verdict{'s' if n != 1 else ''} unstable under it (*Engine noise floor*).", ""]


def noise_lines(m: ModelReport) -> list[str]:
    f = m.noise
    if f is None or f.status != "ok":
        return []
    lines = ["### Engine noise floor", "",
             f"The baseline evaluated again under {f.arithmetic}: the same samples, a second equally valid "
             "arithmetic. What it moves is the engine's own noise: its shift estimates the between-arithmetic "
             "SD of any delta, folded into every verdict's interval (added in quadrature, times z), and a "
             "verdict that only sampling settles is *unstable* (never a pass).", "",
             "| metric | second arithmetic - baseline | between-arithmetic SD of a delta |", "|---|---|---|"]
    for mid, iv in f.intervals.items():
        lines.append(md_row([mid, f"{iv.delta:+.2f} [{iv.lo:+.2f}, {iv.hi:+.2f}]", f"{f.widths()[mid]:.2f}"]))
    lines.append("")
    for task, fl in f.flips.items():
        lines.append(f"{task}: {fl.right_to_wrong + fl.wrong_to_right} of {fl.n} predictions flipped under the "
                     f"second arithmetic ({fl.right_to_wrong} right to wrong, {fl.wrong_to_right} wrong to right); "
                     f"the largest log-likelihood margin it flipped: {f.margin.get(task, 0.0):.3f}.")
    lines.append("")
    bad = unstable(m)
    if bad:
        lines += ["| variant | metric | on sampling alone |", "|---|---|---|"]
        lines += [md_row([v, mid, was]) for v, mid, was in bad] + [""]
    if m.noise_flips:
        tasks = sorted({t for d in m.noise_flips.values() for t in d})
        lines += ["Flips against the baseline, and how many had a baseline margin within the noise floor's "
                  "(flips the engine alone can make):", "",
                  "| variant | " + " | ".join(tasks) + " |", "|---|" + "---|" * len(tasks)]
        for variant, by_task in m.noise_flips.items():
            cells = [f"{by_task[t][0]} ({by_task[t][1]} inside)" if t in by_task else "–" for t in tasks]
            lines.append(md_row([variant, *cells]))
        lines.append("")
    return lines


def noise_json(m: ModelReport) -> dict:
    f = m.noise
    if f is None:
        return {"status": "missing"}
    return {"status": f.status, "why": f.why, "arithmetic": f.arithmetic,
            "intervals": {k: {"delta": iv.delta, "lo": iv.lo, "hi": iv.hi, "n": iv.n} for k, iv in f.intervals.items()},
            "widths": f.widths(),
            "flips": {t: {"right_to_wrong": x.right_to_wrong, "wrong_to_right": x.wrong_to_right, "n": x.n}
                      for t, x in f.flips.items()},
            "margin": f.margin,
            "variant_flips": {v: {t: {"flips": a, "inside_noise_margin": b} for t, (a, b) in d.items()}
                              for v, d in m.noise_flips.items()},
            "unstable": [{"variant": v, "metric": mid, "on_sampling": was} for v, mid, was in unstable(m)]}
