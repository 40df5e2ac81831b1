"""The three test tiers and how a run selects them (used by tests/conftest.py and tests/test_tiers.py).

    unit   imports no torch and reads no model; seconds for the tier   pytest -m unit  (two workers)
    model  the model stack: imports torch/transformers, builds tests/   pytest -m model
           tiny_model, reads the embedded GGUF or indexes lm-eval's
           task registry (seconds per test)
    e2e    runs DVC, a serving engine or a (fake) server process        pytest -m e2e

A test is `unit` unless it or its module is marked `model` or `e2e` (`pytestmark = pytest.mark.model`
at module level, or the decorator on one test). `slow` is kept as the name of "model or e2e", so
`-m "not slow"` selects the unit tier as it did before the tiers existed.
"""
from __future__ import annotations

import ast

HEAVY = ("model", "e2e")
TIERS = ("unit", *HEAVY)


def module_tiers(source: str) -> set[str]:
    """The tiers a test module's top-level `pytestmark` names (empty: its tests are unit unless marked
    one by one). Read with ast, so a run can skip a heavy module without importing it."""
    found: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                for t in node.targets):
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.Attribute) and sub.attr in HEAVY:
                    found.add(sub.attr)
    return found


class _Marks(dict):
    """The names a mark expression sees for one test: its markers are true, every other name false."""

    def __missing__(self, key: str) -> bool:
        return False


def selects(markexpr: str, markers: set[str]) -> bool:
    """Whether `-m markexpr` selects a test carrying exactly these markers (and/or/not/parentheses)."""
    return bool(eval(compile(markexpr, "-m", "eval"), {"__builtins__": {}}, _Marks({m: True for m in markers})))


def unit_only(markexpr: str) -> bool:
    """The run selects unit tests and no model or e2e test: then torch is blocked for the whole run.
    An expression beyond and/or/not (pytest's `mark(arg=...)` form) is not read: that run is not blocked."""
    if not markexpr.strip():
        return False
    try:
        return selects(markexpr, {"unit"}) and not any(selects(markexpr, {t, "slow"}) for t in HEAVY)
    except (SyntaxError, TypeError):
        return False


def unit_workers(markexpr: str, given: int | str | None, in_worker: bool, collect_only: bool,
                 cpus: int | None) -> int | None:
    """pytest-xdist workers for this run, or None to leave `-n` as given: a unit-only run without `-n`
    gets two (its tests are independent and CPU-bound); model and e2e runs stay serial, because two
    model or DVC jobs at once on 2 cores each run 10-20x slower."""
    if given is not None or in_worker or collect_only or not unit_only(markexpr):
        return None
    return min(2, cpus or 1)
