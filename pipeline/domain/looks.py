"""Which rows of a task a sequential evaluation reads, in which order, and a task's scores recomputed from
the rows one variant evaluated (eval.sequential; pipeline/evaluation/looks_runner.py runs the looks). Pure.

Each local task's rows are read in one seeded order, fixed by the data and eval.seed: every prefix is
a random sample of the data file, and the baseline and every variant read the same prefix, so a look
compares the same documents. A registry task (lm_eval) keeps lm-eval's own order and runs to its cap.
"""
from __future__ import annotations

import random
from dataclasses import replace

from pipeline.domain import metrics, probe_sets
from pipeline.domain.tasks import TaskSpec, data_file

CORPUS = {"bleu": metrics.corpus_bleu, "chrf": metrics.corpus_chrf}


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


def scores_from_rows(spec: TaskSpec, rows: list[dict]) -> dict[str, float]:
    """The task's scores over `rows` (several looks' lm-eval runs), as its YAML aggregates them: corpus
    BLEU/chrF over the cleaned outputs, macro-F1 over the predictions, every other metric the mean of
    its per-sample score."""
    out: dict[str, float] = {}
    for m in spec.higher_is_better:
        if m in CORPUS:
            out[m] = CORPUS[m]([str(r["target"]) for r in rows], [metrics.clean_generation(r["output"]) for r in rows])
        elif m == "macro_f1":
            out[m] = metrics.macro_f1([r["gold"] for r in rows], [r["pred"] for r in rows],
                                              len(rows[0]["choices"]))
        elif rows and all(m in r["scores"] for r in rows):
            out[m] = _weighted_mean(rows, m)
    return out


def _weighted_mean(rows: list[dict], m: str) -> float:
    """The mean of a per-sample score; over rows read in strata (tagged `stratum`, `strata`), each
    stratum's mean weighted by its share of the pool, as the stratified estimate is."""
    if not all("stratum" in r for r in rows):
        return metrics.mean([r["scores"][m] for r in rows])
    pool = rows[0]["strata"]
    total = 0.0
    for h, size in enumerate(pool):
        mine = [r["scores"][m] for r in rows if r["stratum"] == h]
        total += size / sum(pool) * metrics.mean(mine) if mine else 0.0
    return total
