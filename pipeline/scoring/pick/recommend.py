"""The recommendation: the smallest-memory variant the fixed sequence reaches (read from its one walk,
pick/walk.py), the baseline when the first candidate does not pass, and the candidates a target GPU can
serve. Pure. Tests: `.venv/bin/python -m pytest -n 0 -q tests/test_decision.py tests/test_walk.py`.
"""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.domain.hardware import gpus
from pipeline.schema import TargetGpu
from pipeline.scoring.pick.axes import Axes
from pipeline.scoring.planning.planner import Plan
from pipeline.scoring.pick.sequence import memory_key
from pipeline.scoring.pick.walk import Walk, walk
from pipeline.scoring.verdict.judge import ENDPOINT, INCONCLUSIVE, PASS, not_capable
from pipeline.scoring.verdict.rows import NOT_RUN, Row


@dataclass(frozen=True)
class Recommendation:
    """The recommended row (None when nothing qualifies), why, the `vllm serve` command for it, and the
    walk of the fixed sequence it was read from (pick/walk.py; None only for a hand-made one); `axes`: the
    three chains of the two-axis pick (pick/axes.py) where it was read from them, `walk` then the pick's
    chain."""
    row: Row | None
    why: str
    command: str | None = None
    walk: Walk | None = None
    axes: Axes | None = None


def recommend(rows: list[Row], model: str, allowed: set[tuple[str, str]] | None = None,
              held: frozenset[tuple[str, str]] | set[tuple[str, str]] = frozenset()) -> Recommendation:
    """The smallest-memory variant of `model` reached by the fixed sequence over the variants that ran,
    in decreasing memory (one walk: pick/walk.py walk, `allowed` and `held` as there); the baseline
    itself when the first candidate does not pass (it is the reference, so it cannot be worse than
    itself); no row only when neither a variant nor the baseline is allowed."""
    return explain(walk(rows, model, allowed, held), fits=allowed is not None)


def explain(w: Walk, fits: bool = False) -> Recommendation:
    """The recommendation and its *Why*, every word read from the one walk `w` (`fits`: it was walked over
    what a GPU can serve)."""
    chain = list(w.sequence)
    if w.pick is not None:
        best = w.pick
        conclusive = [m for m, v in best.judgement.verdicts.items() if v.verdict == PASS]
        why = (f"the smallest in memory of the {w.run} variant{'s' if w.run > 1 else ''} passing in a row, in order of "
               f"decreasing memory ({', '.join(conclusive)}); family-wise: the chance that the pick is worse than "
               f"a margin is at most one verdict's, over all {len(chain)} candidates (fixed-sequence test)")
        if w.stopper is not None:
            why += (f"; the sequence stops at `{w.stopper.variant}` ({w.stop_reason})"
                    + (f", so {', '.join(f'`{r.variant}`' for r in w.beyond)} (passing beyond it) cannot be claimed"
                       if w.beyond else ""))
        return Recommendation(best, why, walk=w)
    if w.baseline is not None:
        if not chain:
            return Recommendation(w.baseline, "the baseline is the only variant that ran here; nothing smaller was "
                                              "shown to be as good", walk=w)
        return Recommendation(w.baseline, f"the baseline itself: the largest candidate, `{w.stopper.variant}`, does "
                                          f"not pass ({w.stop_reason}), and the fixed sequence claims nothing past a "
                                          "candidate that does not pass (see the verdicts below the table)"
                              + closest(chain), walk=w)
    if not chain:
        return Recommendation(None, "no variant ran successfully" + (" among those that fit" if fits else ""), walk=w)
    return Recommendation(None, "the baseline is not among the candidates (it does not fit or cannot run there) and "
                                "no smaller variant passes in sequence", walk=w)


def chain_text(name: str, w: Walk) -> str:
    """One chain in a clause: its passing run and where it stops."""
    text = f"{name} {w.run} of {len(w.sequence)} passing in a row"
    if w.stopper is not None:
        text += f", stops at `{w.stopper.variant}` ({w.stop_reason})"
        if w.beyond:
            text += f", so {', '.join(f'`{r.variant}`' for r in w.beyond)} (passing beyond it) cannot be claimed"
    return text


def explain_axes(a: Axes, alpha: float, fits: bool = False) -> Recommendation:
    """The recommendation and its *Why* from the two-axis pick `a` (pick/axes.py), at one verdict's
    one-sided `alpha` per chain."""
    chains = "; ".join(chain_text(n, w) for n, w in a.chains)
    n = len(a.chains)
    error = (f"family-wise: {f'{n} fixed sequences at {alpha:.1%} each' if n > 1 else f'one fixed sequence at {alpha:.1%}'}"
             f", so the pick is worse than a margin at most {a.stated_error(alpha):.1%} of the time")
    if a.pick is not None:
        conclusive = [m for m, v in a.pick.judgement.verdicts.items() if v.verdict == PASS]
        return Recommendation(a.pick, f"the smallest in memory of what the two axes claim ({', '.join(conclusive)}): "
                                      f"{chains}; {error}", walk=a.walk, axes=a)
    if a.baseline is not None:
        if not a.chains:
            return Recommendation(a.baseline, "the baseline is the only variant that ran here; nothing smaller was "
                                              "shown to be as good", walk=a.walk, axes=a)
        rows = [r for _, w in a.chains for r in w.sequence]
        return Recommendation(a.baseline, f"the baseline itself: no axis claims a candidate ({chains}), and a fixed "
                                          "sequence claims nothing past a candidate that does not pass"
                              + closest(rows), walk=a.walk, axes=a)
    if not a.chains:
        return Recommendation(None, "no variant ran successfully" + (" among those that fit" if fits else ""),
                              walk=a.walk, axes=a)
    return Recommendation(None, "the baseline is not among the candidates (it does not fit or cannot run there) and "
                                f"no axis claims a candidate ({chains})", walk=a.walk, axes=a)


def closest(rows: list[Row]) -> str:
    """The inconclusive variant nearest to passing, for the reader who wants to try harder."""
    cands = [r for r in rows if r.judgement.overall == INCONCLUSIVE]
    if not cands:
        return ""

    def open_metrics(r: Row) -> list[str]:
        return [m for m, v in r.judgement.verdicts.items() if v.verdict != PASS and not not_capable(v)]
    cands = [r for r in cands if open_metrics(r)]
    if not cands:                 # every metric not capable: no metric to be close on
        return ""
    best = min(cands, key=lambda r: (len(open_metrics(r)), memory_key(r)))
    return f"; closest: `{best.variant}`, " + "; ".join(
        f"{state} on {', '.join(mids)}" for state, mids in by_state(best, open_metrics(best)).items())


def by_state(r: Row, metrics: list[str]) -> dict[str, list[str]]:
    """The metrics under what they are: 'inconclusive', or 'not run (<why>)' (a task never run is not
    inconclusive: there is no evidence either way), the inconclusive first."""
    out: dict[str, list[str]] = {INCONCLUSIVE: []}
    for m in metrics:
        v = r.judgement.verdicts[m]
        out.setdefault(v.text() if v.verdict == NOT_RUN else v.verdict, []).append(m)
    return {state: mids for state, mids in out.items() if mids}


def gpu_candidates(rows: list[Row], model: str, name: str, gpu: TargetGpu, plans: dict[str, dict[str, Plan]]
                   ) -> set[tuple[str, str]]:
    """(tier, kv) of the model's variants a GPU can serve: vLLM has kernels for the tier's family at
    the GPU's compute capability, and the memory plan fits. `plans`: variant -> GPU name -> Plan. An
    endpoint is sized by its own server (its weights are there, unknown here, so it has no plan): it is
    a candidate wherever its declared family runs, so each GPU's sequence holds it where page 1's does."""
    return {(r.facts.tier, r.facts.kv) for r in rows if r.facts.model == model
            and gpus.supports(r.facts.hardware, gpu.compute_capability)
            and (r.facts.backend == ENDPOINT or ((p := plans.get(r.variant, {}).get(name)) is not None and p.fits))}
