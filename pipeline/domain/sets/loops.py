"""Degenerate generations: text that is mostly one unit of words repeated. Read by the baseline's
sanity (pipeline/scoring/estimators/sanity.py) and by an endpoint's preflight (pipeline/engines/vllm/preflight.py). Pure.

    from pipeline.domain.sets.loops import loop_unit; loop_unit("the cat the cat the cat the cat")
"""
from __future__ import annotations

# a unit of 1 to MAX_UNIT words repeated at least MIN_REPEATS times in a row, covering at least
# MIN_SHARE of the output's words (" 1 1 1 1 1", "the cat the cat the cat the cat")
MAX_UNIT, MIN_REPEATS, MIN_SHARE = 8, 4, 0.5


def loop_unit(text: str) -> str | None:
    """The repeated unit when `text` is mostly one unit of words repeated in a row, else None."""
    words = text.split()
    for size in range(1, MAX_UNIT + 1):
        for start in range(0, max(len(words) - size * MIN_REPEATS + 1, 0)):
            unit = words[start:start + size]
            reps = 1
            while words[start + reps * size:start + (reps + 1) * size] == unit:
                reps += 1
            if reps >= MIN_REPEATS and reps * size >= MIN_SHARE * len(words):
                return " ".join(unit)
    return None
