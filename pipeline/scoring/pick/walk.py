"""One walk of the fixed sequence (pick/sequence.py) over a model's candidates under one GPU filter, and
everything read from it: the pick, the candidate that stops the sequence and why, the runner-up, the
passing run, the held candidates. Pure.

Stage decide walks once per (model, GPU filter) (stages/decide_picks.py) and keeps the Walk on the
Recommendation: page 1's *Why* (pick/recommend.py explain), its close-call line (report/close_call.py),
the per-GPU table (report/gpus.py) and decision.json (report/exports.py) all read that one record, so no
line can name another stopper than the pick's own. Tests:
`.venv/bin/python -m pytest -n 0 -q tests/test_walk.py tests/test_decision.py`.
"""
from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from pipeline.scoring.pick.sequence import in_sequence, run_length, same_memory, weight_classes
from pipeline.scoring.verdict.judge import CANDIDATES, PASS
from pipeline.scoring.verdict.rows import Row

# why a held candidate stops the sequence (decide_picks.kv_barred: scoring/verdict/long_kv.py barred)
HELD_REASON = "held: its KV mode not shown non-inferior by the long-context KL"


@dataclass(frozen=True)
class Walk:
    """The fixed sequence walked once. `sequence`: the candidates in their fixed order (held ones keep
    their place); `run`: how many pass in an unbroken run from the first (sequence.run_length), a held
    one counting as not passing; `at`: the pick's index (the run's last, stepped back over equal
    memory), None when the run is empty; `unheld_at`: the same on the same sequence with nothing held
    (only for saying what holding changed; it claims nothing); `baseline`: the model's reference row
    among those allowed, the recommendation when nothing is picked."""
    sequence: tuple[Row, ...]
    held: frozenset[tuple[str, str]]
    run: int
    at: int | None
    unheld_at: int | None
    baseline: Row | None
    # why a held candidate is held where it is not HELD_REASON (a combination whose parts are not both
    # claimed: pick/axes.py)
    reasons: Mapping[tuple[str, str], str] = field(default_factory=dict, hash=False)

    @property
    def pick(self) -> Row | None:
        """The candidate picked (None: the run is empty; the recommendation is then `chosen`)."""
        return None if self.at is None else self.sequence[self.at]

    @property
    def chosen(self) -> Row | None:
        """What is recommended: the pick, else the baseline (it is the reference), else nothing."""
        return self.pick if self.pick is not None else self.baseline

    @property
    def unheld_chosen(self) -> Row | None:
        return self.sequence[self.unheld_at] if self.unheld_at is not None else self.baseline

    @property
    def passes(self) -> tuple[Row, ...]:
        """The unbroken run of passes from the first, in order (the pick is among them)."""
        return self.sequence[:self.run]

    @property
    def stopper(self) -> Row | None:
        """The first candidate that does not pass, or is held: the sequence claims nothing past it."""
        return self.sequence[self.run] if self.run < len(self.sequence) else None

    def is_held(self, r: Row) -> bool:
        return (r.facts.tier, r.facts.kv) in self.held

    @property
    def stopper_held(self) -> bool:
        return self.stopper is not None and self.is_held(self.stopper)

    @property
    def stop_reason(self) -> str | None:
        """Why the stopper stops it: held (HELD_REASON) before its own verdict, else its verdict."""
        if self.stopper is None:
            return None
        if self.stopper_held:
            return self.reasons.get((self.stopper.facts.tier, self.stopper.facts.kv), HELD_REASON)
        return self.stopper.judgement.overall

    @property
    def runner_up(self) -> Row | None:
        """The passing candidate just before the pick: the next larger one a reader could serve instead."""
        return self.sequence[self.at - 1] if self.at else None

    @property
    def beyond(self) -> tuple[Row, ...]:
        """Candidates past the stopper that pass on their verdicts: the sequence cannot claim them."""
        return tuple(r for r in self.sequence[self.run + 1:] if r.judgement.overall == PASS)

    @property
    def held_in_sequence(self) -> tuple[Row, ...]:
        return tuple(r for r in self.sequence if self.is_held(r))


def settle(chain: list[Row], run: int) -> int | None:
    """The pick's index from the run's length: its last, or, where candidates before it share its memory,
    the first of them in params.yaml's order (all passed in the run: no cost in error control)."""
    at = run - 1 if run else None
    if at is not None:
        classes = weight_classes(chain)
        while at > 0 and same_memory(chain[at - 1], chain[at], classes):
            at -= 1
    return at


def walk(rows: list[Row], model: str, allowed: Set[tuple[str, str]] | None = None,
         held: Set[tuple[str, str]] = frozenset(),
         reasons: Mapping[tuple[str, str], str] | None = None) -> Walk:
    """The fixed sequence over `model`'s variants that ran (judge.CANDIDATES), less the baseline, in
    decreasing memory. `allowed` restricts them to what is known before any verdict (what a GPU can
    serve: its kernels and memory); `held`: (tier, kv) no pick may take for a reason read from the run's
    data (a KV mode the long-context KL does not clear): they keep their place and stop the sequence as
    a variant that does not pass would, so leaving them out cannot carry it past them to a smaller
    variant and the family-wise error stays one verdict's over every candidate in `sequence`;
    `reasons`: why a held candidate is held, where not HELD_REASON."""
    mine = [r for r in rows if r.facts.model == model and (allowed is None or (r.facts.tier, r.facts.kv) in allowed)]
    base = next((r for r in mine if r.judgement.overall == "baseline"), None)
    chain = in_sequence([r for r in mine if r.facts.status in CANDIDATES and r is not base])
    verdict = [r.judgement.overall == PASS for r in chain]
    run = run_length([ok and (r.facts.tier, r.facts.kv) not in held for ok, r in zip(verdict, chain)])
    return Walk(tuple(chain), frozenset(held), run, settle(chain, run), settle(chain, run_length(verdict)), base,
                dict(reasons or {}))
