"""Which rows of a task a sequential evaluation reads, and in which order (eval.sequential;
pipeline/evaluation/looks_runner.py runs the looks; a task's scores over the rows read come from
task_rows.scores_from_rows, as for a task run whole). Pure.

Each local task's rows are read in one seeded order, fixed by the data and eval.seed: every prefix is
a random sample of the data file, and the baseline and every variant read the same prefix, so a look
compares the same documents. A registry task (lm_eval) keeps lm-eval's own order and runs to its cap.
"""
from __future__ import annotations

import random
from dataclasses import replace

from pipeline.domain.sets import probe_sets
from pipeline.domain.sets.tasks import TaskSpec, data_file


def order(pool: int, seed: int, task: str) -> list[int]:
    """A permutation of range(pool), the same for a task name and seed on any machine (random.Random
    seeds a string through SHA-512)."""
    idx = list(range(pool))
    random.Random(f"{seed}:{task}").shuffle(idx)
    return idx


def in_look_order(specs: list[TaskSpec], seed: int, data: dict[str, str]) -> list[TaskSpec]:
    """Each local task's first num_docs rows of its seeded order (its cap, the limit). `data`: task ->
    its data file: the order is the file's, so two tasks on one file read the same documents."""
    return [s if s.kind == "lm_eval" or not s.pool else
            replace(s, docs=tuple(order(s.pool, seed, data[s.name])[: s.num_docs])) for s in specs]


def data_keys(tasks_params: dict) -> dict[str, str]:
    """task -> the data file its order is seeded with (local tasks; a probe set: its spec, one order for
    every model's copy)."""
    return {n: t.data if probe_sets.is_probe_set(t.data) else str(data_file(n, t))
            for n, t in tasks_params.items() if t.kind != "lm_eval"}


def chunk(spec: TaskSpec, start: int, stop: int) -> TaskSpec:
    """The task restricted to rows [start, stop) of its order: one look's new documents."""
    docs = tuple(spec.doc_ids[start:stop])
    return replace(spec, docs=docs, num_docs=len(docs))
