"""The recommendation: the smallest-memory variant the fixed sequence reaches (pick/sequence.py), the
baseline when the first candidate does not pass, and the candidates a target GPU can serve. Pure.
"""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.domain import hardware
from pipeline.schema import TargetGpu
from pipeline.scoring.planning.planner import Plan
from pipeline.scoring.pick.sequence import in_sequence, memory_key, same_memory, sequence_pick, weight_classes
from pipeline.scoring.verdict.judge import CANDIDATES, ENDPOINT, INCONCLUSIVE, PASS, not_capable
from pipeline.scoring.verdict.rows import Row


@dataclass(frozen=True)
class Recommendation:
    """The recommended row (None when nothing qualifies), why, and the `vllm serve` command for it."""
    row: Row | None
    why: str
    command: str | None = None


def recommend(rows: list[Row], model: str, allowed: set[tuple[str, str]] | None = None,
              held: frozenset[tuple[str, str]] | set[tuple[str, str]] = frozenset()) -> Recommendation:
    """The smallest-memory variant of `model` reached by the fixed sequence (sequence_pick) over the
    variants that ran, in decreasing memory; the baseline itself when the first candidate does not
    pass (it is the reference, so it cannot be worse than itself). `allowed` restricts the candidates
    to what is known before any verdict (what a GPU can run); no row comes back only when neither a
    variant nor the baseline is allowed. `held`: (tier, kv) that no pick may take for a reason read from
    the run's data (a KV mode the long-context KL does not clear): they keep their place in the sequence
    and stop it as a variant that does not pass would, so leaving them out cannot carry the sequence past
    them to a smaller variant and the family-wise error stays the test's."""
    mine = [r for r in rows if r.facts.model == model and (allowed is None or (r.facts.tier, r.facts.kv) in allowed)]
    base = next((r for r in mine if r.judgement.overall == "baseline"), None)
    chain = in_sequence([r for r in mine if r.facts.status in CANDIDATES and r is not base])
    at = sequence_pick([r.judgement.overall == PASS and (r.facts.tier, r.facts.kv) not in held for r in chain])
    if at is not None:
        run = at + 1
        # equal memory: the first in params.yaml's order (all passed in the run: no cost in error control)
        classes = weight_classes(chain)
        while at > 0 and same_memory(chain[at - 1], chain[at], classes):
            at -= 1
        best = chain[at]
        conclusive = [m for m, v in best.judgement.verdicts.items() if v.verdict == PASS]
        why = (f"the smallest in memory of the {run} variant{'s' if run > 1 else ''} passing in a row, in order of "
               f"decreasing memory ({', '.join(conclusive)}); family-wise: the chance that the pick is worse than "
               f"a margin is at most one verdict's, over all {len(chain)} candidates (fixed-sequence test)")
        if run < len(chain):
            beyond = [r.variant for r in chain[run + 1:] if r.judgement.overall == PASS]
            stop = chain[run]
            word = ("held: its KV mode not shown non-inferior by the long-context KL"
                    if (stop.facts.tier, stop.facts.kv) in held else stop.judgement.overall)
            why += (f"; the sequence stops at `{stop.variant}` ({word})"
                    + (f", so {', '.join(f'`{v}`' for v in beyond)} (passing beyond it) cannot be claimed"
                       if beyond else ""))
        return Recommendation(best, why)
    if base is not None:
        if not chain:
            return Recommendation(base, "the baseline is the only variant that ran here; nothing smaller was shown "
                                        "to be as good")
        first = chain[0]
        word = ("held: its KV mode not shown non-inferior by the long-context KL"
                if (first.facts.tier, first.facts.kv) in held else first.judgement.overall)
        return Recommendation(base, f"the baseline itself: the largest candidate, `{first.variant}`, does not pass "
                                    f"({word}), and the fixed sequence claims nothing past a "
                                    "candidate that does not pass (see the verdicts below the table)" + closest(chain))
    if not chain:
        return Recommendation(None, "no variant ran successfully"
                              + ("" if allowed is None else " among those that fit"))
    return Recommendation(None, "the baseline is not among the candidates (it does not fit or cannot run there) and "
                                "no smaller variant passes in sequence")


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
    return f"; closest: `{best.variant}`, inconclusive on {', '.join(open_metrics(best))}"


def gpu_candidates(rows: list[Row], model: str, name: str, gpu: TargetGpu, plans: dict[str, dict[str, Plan]]
                   ) -> set[tuple[str, str]]:
    """(tier, kv) of the model's variants a GPU can serve: vLLM has kernels for the tier's family at
    the GPU's compute capability, and the memory plan fits. `plans`: variant -> GPU name -> Plan. An
    endpoint is sized by its own server (its weights are there, unknown here, so it has no plan): it is
    a candidate wherever its declared family runs, so each GPU's sequence holds it where page 1's does."""
    return {(r.facts.tier, r.facts.kv) for r in rows if r.facts.model == model
            and hardware.supports(r.facts.hardware, gpu.compute_capability)
            and (r.facts.backend == ENDPOINT or ((p := plans.get(r.variant, {}).get(name)) is not None and p.fits))}
