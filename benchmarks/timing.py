"""The one timing rule every benchmark here uses: the best of a few repeats (the least disturbed by
other work on the machine); benchmarks print ratios of such times taken in one run."""
from __future__ import annotations

import time
from typing import Callable


def best_of(fn: Callable[[], object], repeats: int = 3) -> float:
    """Seconds of the fastest of `repeats` calls of fn()."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best
