"""decision.md's engine-noise section: the baseline under a second arithmetic against the baseline as
run (stage noise), each settled verdict's check under that arithmetic (evaluate's, scoring/verdict/arith_check.py)
and each variant's flips inside the baseline's flip margin. Pure."""
from __future__ import annotations

from pipeline.report.cells import ci, md_row
from pipeline.scoring.estimators.fidelity import Read
from pipeline.report.document import ModelReport
from pipeline.scoring.verdict.judge import INCONCLUSIVE


def unstable(m: ModelReport) -> list[tuple[str, str, str]]:
    """(variant, metric, its verdict in the run's arithmetic) for every verdict the second did not give."""
    return [(r.variant, mid, v.unstable) for r in m.rows for mid, v in r.judgement.verdicts.items()
            if v.unstable is not None and v.verdict == INCONCLUSIVE]


def checked(m: ModelReport) -> list[tuple[str, str, str, str]]:
    """(variant, metric, the run's verdict, the second arithmetic's) for every verdict evaluate checked."""
    return [(r.variant, mid, v.unstable or v.verdict, v.second[0]) for r in m.rows
            for mid, v in r.judgement.verdicts.items() if v.second is not None]


def summary_line(m: ModelReport) -> list[str]:
    """One line under the recommendation: whether the verdicts were checked under the second arithmetic."""
    f = m.noise
    if f is None:
        return []
    if f.status != "ok":
        return [f"Engine noise: not measured ({f.why or f.status}); verdicts rest on one arithmetic.", ""]
    n, bad = len(checked(m)), len(unstable(m))
    return [f"Engine noise: {n} settled verdict{'s' if n != 1 else ''} checked under a second arithmetic "
            f"({f.arithmetic}), {bad} unstable (*Engine noise floor*).", ""]


def noise_lines(m: ModelReport) -> list[str]:
    f = m.noise
    if f is None or f.status != "ok":
        return []
    lines = ["### Engine noise floor", "",
             f"The baseline evaluated again under {f.arithmetic}: the same samples, a second equally valid "
             "arithmetic. Its shift is the engine's own noise on the baseline:", "",
             "| metric | second arithmetic - baseline |", "|---|---|"]
    for mid, iv in f.intervals.items():
        lines.append(md_row([mid, f"{iv.delta:+.2f} [{iv.lo:+.2f}, {iv.hi:+.2f}]"]))
    lines.append("")
    for task, fl in f.flips.items():
        lines.append(f"{task}: {fl.right_to_wrong + fl.wrong_to_right} of {fl.n} predictions flipped under the "
                     f"second arithmetic ({fl.right_to_wrong} right to wrong, {fl.wrong_to_right} wrong to right); "
                     f"the largest log-likelihood margin it flipped: {f.margin.get(task, 0.0):.3f}.")
    lines += kl_line(f.fidelity)
    lines += ["", "Each settled verdict is checked the same way: the variant's samples computed again under the "
              "second arithmetic and judged against the baseline's under it, at the same look. A verdict the two "
              "arithmetics do not both give is *unstable*: inconclusive, never a pass (docs/decision-rule.md "
              "\"Engine noise\"). A variant that can no longer pass is not checked.", ""]
    found = checked(m)
    if found:
        lines += ["| variant | metric | run's arithmetic | second arithmetic | |", "|---|---|---|---|---|"]
        lines += [md_row([v, mid, a, b, "stable" if a == b else "**unstable**"]) for v, mid, a, b in found] + [""]
    if m.noise_flips:
        tasks = sorted({t for d in m.noise_flips.values() for t in d})
        lines += ["Flips against the baseline over the pairs each verdict was read on (as under *Quality by "
                  "task*), and how many had a baseline margin within the noise floor's (flips the engine alone "
                  "can make):", "",
                  "| variant | " + " | ".join(tasks) + " |", "|---|" + "---|" * len(tasks)]
        for variant, by_task in m.noise_flips.items():
            cells = [f"{by_task[t][0]} ({by_task[t][1]} inside)" + label(m, variant, t) if t in by_task else "–"
                     for t in tasks]
            lines.append(md_row([variant, *cells]))
        lines.append("")
    return lines


def label(m: ModelReport, variant: str, task: str) -> str:
    """' (n=478)' where the flips are over more pairs than the verdict's (comparison.read_of), else ''."""
    read = m.reads.get(variant, {}).get(task)
    return read.label() if read is not None else ""


def kl_line(fid: Read | None) -> list[str]:
    """The second arithmetic's next-token KL and top-1 agreement against the baseline as run (the
    fidelity texts): the floor under every variant's KL in *Fidelity*."""
    s = fid.summary if fid else None
    if s is None:
        why = (fid.record.why or fid.record.status) if fid else "not measured"
        return [f"Fidelity under the second arithmetic: {why}."]
    return [f"Fidelity under the second arithmetic against the baseline as run ({s.n_texts} texts, "
            f"{s.n_tokens:,} tokens): KL mean {s.kl_mean:.4f} {ci(s.kl_mean_ci, '.4f')} nats/token, p99 "
            f"{s.kl_p99:.3f}, top-1 agreement {s.top1_agreement:.1f}% {ci(s.top1_agreement_ci, '.1f')}: "
            "a variant's KL in *Fidelity* at or below this is within the engine's own noise."]


def noise_json(m: ModelReport) -> dict:
    f = m.noise
    if f is None:
        return {"status": "missing"}
    return {"status": f.status, "why": f.why, "arithmetic": f.arithmetic,
            "intervals": {k: {"delta": iv.delta, "lo": iv.lo, "hi": iv.hi, "n": iv.n} for k, iv in f.intervals.items()},
            "flips": {t: {"right_to_wrong": x.right_to_wrong, "wrong_to_right": x.wrong_to_right, "n": x.n}
                      for t, x in f.flips.items()},
            "margin": f.margin, "fidelity": f.fidelity.as_dict() if f.fidelity else None,
            "variant_flips": {v: {t: {"flips": a, "inside_noise_margin": b} for t, (a, b) in d.items()}
                              for v, d in m.noise_flips.items()},
            "checked": [{"variant": v, "metric": mid, "run": a, "second": b} for v, mid, a, b in checked(m)],
            "unstable": [{"variant": v, "metric": mid, "run": was} for v, mid, was in unstable(m)]}
