"""The pick on two axes: weight tiers judged with the model's own KV cache, KV formats judged on the
baseline's weights, and a combination (tier, KV format) a candidate only when both its parts are
claimed. Pure.

Three fixed sequences, four with a repaired KV mode (pick/walk.py, each in decreasing memory, fixed
before any verdict):
- **weights**: every tier with the baseline's KV mode;
- **KV formats**: the baseline's tier with every other KV mode, less the repaired ones;
- **repaired KV formats**: the baseline's tier with each mode whose kept layers kvrepair chose (a repair
  keeps layers in full precision, so it sorts before its own format in memory: in one chain a failing
  repair would stop the formats that need none);
- **combinations**: every other (tier, KV mode) that ran. One whose weight tier is not in the weights
  chain's passing run, or whose KV mode is not in the KV chain's, is held (`opens`): it keeps its place
  and stops its chain as a non-pass would, so the chain's order stays fixed in advance. A combination's
  KV mode is claimed when it lies in the passing run of its own KV chain (plain or repaired).
Each chain is a fixed-sequence test at one verdict's alpha, so a claimed candidate worse than its margin
needs the first such candidate of some chain to pass: the pick (the smallest in memory of the chains'
picks) is worse than a margin with probability at most alpha times the number of chains with a candidate
(`stated_error`; tests/test_pick_axes.py simulates it, interaction included). A KV format that fails
stops only the KV chain and the combinations that use it, never a weight tier with the model's own KV.
Decision record: docs/decisions/two-axis-pick.md. Tests: `.venv/bin/python -m pytest -n 0 -q
tests/test_axes.py tests/test_pick_axes.py`.
"""
from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass

from pipeline.scoring.pick.sequence import in_sequence, run_length
from pipeline.scoring.pick.walk import Walk, walk
from pipeline.scoring.verdict.rows import Row

WEIGHTS, KV, REPAIRED, COMBINATIONS = "weights", "KV formats", "repaired KV formats", "combinations"
PARTS_REASON = "held: a part not claimed on its own axis"


def opens(i: int | None, j: int | None, weight_run: int, kv_run: int) -> bool:
    """Whether a combination may be claimed: its weight tier (index `i` in the weights chain) and its KV
    format (index `j` in the KV chain) both lie in their chain's passing run (None: not in that chain)."""
    return i is not None and j is not None and i < weight_run and j < kv_run


def chain_runs(weights: Sequence[bool], kv: Sequence[bool], combinations: Sequence[tuple[int, int, bool]]
               ) -> tuple[int, int, int]:
    """The three runs from verdicts alone (the simulators' entry): `weights` and `kv` the pass of each
    candidate in its chain's order; `combinations` (i, j, passed) in theirs."""
    w, k = run_length(weights), run_length(kv)
    return w, k, run_length([ok and opens(i, j, w, k) for i, j, ok in combinations])


@dataclass(frozen=True)
class Axes:
    """The walks (pick/walk.py) and the pick read from them (`repaired`: empty without a repaired mode)."""
    weights: Walk
    kv: Walk
    combinations: Walk
    repaired: Walk | None = None

    @property
    def chains(self) -> list[tuple[str, Walk]]:
        """The chains with at least one candidate, each a fixed-sequence test at one verdict's alpha."""
        return [(n, w) for n, w in ((WEIGHTS, self.weights), (KV, self.kv), (REPAIRED, self.repaired),
                                    (COMBINATIONS, self.combinations)) if w is not None and w.sequence]

    @property
    def pick(self) -> Row | None:
        """The smallest in memory of the chains' picks (pick/sequence.py's order), None when none claims."""
        picks = [w.pick for _, w in self.chains if w.pick is not None]
        return in_sequence(picks)[-1] if picks else None

    @property
    def baseline(self) -> Row | None:
        return self.weights.baseline or self.kv.baseline or self.combinations.baseline

    @property
    def chosen(self) -> Row | None:
        return self.pick if self.pick is not None else self.baseline

    @property
    def walk(self) -> Walk | None:
        """The chain the pick came from; with no pick, the first chain (its first candidate did not pass)."""
        for _, w in self.chains:
            if self.pick is not None and w.pick is self.pick:
                return w
        return self.chains[0][1] if self.chains and self.pick is None else None

    def stated_error(self, alpha: float) -> float:
        """The bound on the chance that the pick is worse than a margin: alpha per chain with a candidate."""
        return alpha * len(self.chains)


def axes(rows: list[Row], model: str, base_tier: str, base_kv: str, allowed: Set[tuple[str, str]] | None = None,
         held: Set[tuple[str, str]] = frozenset()) -> Axes:
    """The two axes over `model`'s rows that ran (walk's `allowed` and `held` as there, applied to every
    chain). The combinations are opened by the unfiltered weights and KV walks: a part claimed on page 1 is
    claimed on every GPU, whichever of its rows that GPU can serve."""
    mine = [r for r in rows if r.facts.model == model]
    keys = {(r.facts.tier, r.facts.kv) for r in mine}
    repaired_kv = {r.facts.kv for r in mine if r.facts.kv_repair is not None}
    base = {(base_tier, base_kv)}
    on_weights = {(t, k) for t, k in keys if k == base_kv} | base
    on_repaired = {(t, k) for t, k in keys if t == base_tier and k in repaired_kv} | base
    on_kv = ({(t, k) for t, k in keys if t == base_tier} - on_repaired) | base
    combos = (keys - on_weights - on_kv - on_repaired) | base

    def within(axis: set[tuple[str, str]]) -> set[tuple[str, str]]:
        return axis if allowed is None else axis & set(allowed)
    gate_w = walk(rows, model, on_weights, held)
    w_at = {r.facts.tier: i for i, r in enumerate(gate_w.sequence)}
    kv_claimed = set()                  # the KV modes in the passing run of their own chain
    for chain in (on_kv, on_repaired):
        gate = walk(rows, model, chain, held)
        kv_claimed |= {r.facts.kv for r in gate.passes}
    closed = {(t, k) for t, k in combos - base
              if not opens(w_at.get(t), 0 if k in kv_claimed else None, gate_w.run, 1)}
    repaired = walk(rows, model, within(on_repaired), held) if repaired_kv else None
    return Axes(walk(rows, model, within(on_weights), held), walk(rows, model, within(on_kv), held),
                walk(rows, model, within(combos), set(held) | closed, {c: PARTS_REASON for c in closed}),
                repaired)
