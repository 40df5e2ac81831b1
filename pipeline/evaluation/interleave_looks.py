"""A variant's gated tasks taking their looks in turn (a session with a time budget: vLLM's), so the
budget ends each at a completed look. The tasks are looks_runner._task generators.

    interleave_looks.round_robin(tasks, done, halts)
"""
from __future__ import annotations

import inspect

from pipeline.evaluation.lm_eval_runner import WallBudgetExceeded


def round_robin(gated: list, done, halts=lambda: False) -> None:
    """Look 1 of every gated task, then look 2 of each still open, ...: under a time budget every task
    gets its first look before any gets a second, so the budget ends each at a completed look rather
    than leaving the later tasks unmeasured. A failed task (or `halts()`: the variant can no longer
    pass) halts the others at their last completed look; the budget running out in one ends the others there too (and goes on to stop the variant)."""
    active = list(gated)
    try:
        while active:
            for task in list(active):
                try:
                    next(task)
                except StopIteration:
                    active.remove(task)
                    if done.stopped or halts():
                        for other in active:
                            halt(other, False)
                        return
    except WallBudgetExceeded as cut:
        for other in active:
            halt(other, cut)
        raise


def halt(task, how) -> None:
    """End a task at its last completed look: `how` False (the variant failed elsewhere) or the
    budget's exception (recorded as the budget's cut). One not started yet stays not run."""
    if inspect.getgeneratorstate(task) != inspect.GEN_SUSPENDED:
        task.close()
        return
    try:
        task.send(False) if how is False else task.throw(how)
    except (StopIteration, WallBudgetExceeded):
        pass
