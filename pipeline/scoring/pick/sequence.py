"""The order the recommendation tests its candidates in, and the fixed-sequence pick along it. Pure.

Used by pick/walk.py (the one walk a pick, its stopper and runner-up are read from) and the simulators;
tests/test_sequence.py (the order), tests/test_pick.py (the pick's error rate, simulated):
`.venv/bin/python -m pytest -n 0 -q tests/test_sequence.py tests/test_pick.py`.
Decision record: docs/decisions/fixed-sequence-pick.md.
"""
from __future__ import annotations

from collections.abc import Sequence

from pipeline.scoring.verdict.rows import Row

# Weights within 1% of each other are one memory class: the order among them is params.yaml's, not a
# kilobyte of scale tensors (fp8 and int8 W8A8 of SmolLM2-135M differ by 1,048 of 163 million bytes, and
# that kilobyte put fp8 first and stopped the sequence at it). Weight bytes are known before any verdict,
# so the order stays fixed in advance and the pick's error control is unchanged.
MEMORY_TIE = 0.01


def memory_key(r: Row) -> tuple[float, float]:
    """(weight bytes, KV bytes per token), unknown as infinite (largest first)."""
    f = r.facts
    return (f.weight_bytes if f.weight_bytes is not None else float("inf"),
            f.kv_bytes_per_token if f.kv_bytes_per_token is not None else float("inf"))


def weight_classes(rows: list[Row], tie: float = MEMORY_TIE) -> dict[int, int]:
    """id(row) -> its weight class, 0 the largest: walking the rows by decreasing weight bytes, a row opens
    a new class when it is more than `tie` (relative) below the first row of the current class."""
    classes: dict[int, int] = {}
    head, k = None, -1
    for r in sorted(rows, key=lambda r: -memory_key(r)[0]):
        w = memory_key(r)[0]
        if head is None or w < head * (1 - tie):
            head, k = w, k + 1
        classes[id(r)] = k
    return classes


def in_sequence(rows: list[Row], tie: float = MEMORY_TIE) -> list[Row]:
    """The order the recommendation tests candidates in, fixed before any verdict is read: decreasing
    memory (weight class, then KV bytes per token), params.yaml's order among equals."""
    order = {id(r): i for i, r in enumerate(rows)}
    cls = weight_classes(rows, tie)
    return sorted(rows, key=lambda r: (cls[id(r)], -memory_key(r)[1], order[id(r)]))


def same_memory(a: Row, b: Row, classes: dict[int, int]) -> bool:
    """Whether two rows share a weight class (`classes`: weight_classes of rows holding both) and KV bytes
    per token."""
    return classes[id(a)] == classes[id(b)] and memory_key(a)[1] == memory_key(b)[1]


def run_length(passed: Sequence[bool]) -> int:
    """The one walk of the fixed sequence (Maurer, Hothorn & Lehmacher 1995; Westfall & Krishen 2001):
    how many candidates, in their fixed order, pass in an unbroken run from the first. The pick is the
    last of that run (index run - 1; none when 0) and the candidate at index run, if any, stops the
    sequence. A candidate worse than its margin is claimed only if it passes, and the first such one in
    the order must pass for any later one to be reached: so the chance that the pick is worse than a
    margin is at most one test's alpha, however many candidates there are (tests/test_pick.py simulates
    13). A candidate held for the run's data (pick/walk.py) enters as False where it stands.
    pick/walk.py builds every pick, stopper and runner-up from this; the simulators call it too."""
    run = 0
    for ok in passed:
        if not ok:
            break
        run += 1
    return run
