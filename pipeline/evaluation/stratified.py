"""Which items a stratified choice task reads at each look (eval.sequential.strata): the strata from the
baseline's label margins, the documents in look order, and each row tagged with its stratum so that
every interval read from it, in evaluate, the check or decide, is the stratified one
(scoring/estimators/strata.py; analysis.intervals reads the tags).

    plan = stratified.plan(spec, baseline_rows, ev)    # None: the task is read unstratified
    rows = plan.tag(rows)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from pipeline.domain import tasks
from pipeline.schema import Eval
from pipeline.scoring.estimators import strata


@dataclass(frozen=True)
class Plan:
    spec: tasks.TaskSpec             # docs: the stratified look order (every item it reads by the cap)
    sizes: list[int]                 # items read by each look
    fractions: list[float]           # each look's information fraction (eval.sequential.looks)
    stratum: dict[int, int]          # doc id -> 0 (below the margin: read in full) or 1
    pool: tuple[int, int]            # the cap's items per stratum
    reads: list[list[int]]           # items read per stratum by each look

    def tag(self, rows: list[dict]) -> list[dict]:
        """The rows with their stratum and the pool's strata (new dicts: the sample cache's stay as
        they are)."""
        return [{**r, "stratum": self.stratum[r["doc_id"]], "strata": list(self.pool)} for r in rows]

    def record(self, design, cap: int) -> dict:
        """result.json's account of the design (the task's looks record); `plain`: what the same looks
        read unstratified."""
        return {"below": design.below, "share": design.share, "pool": list(self.pool), "reads": self.reads,
                "plain": [min(cap, math.ceil(t * cap - 1e-9)) for t in self.fractions]}


def plan(spec: tasks.TaskSpec, base_rows: list[dict] | None, ev: Eval) -> Plan | None:
    """The stratified reading of a local choice task whose baseline rows carry label log-likelihoods;
    None for any other task, or with eval.sequential.strata unset."""
    design = ev.sequential.strata if ev.sequential else None
    if design is None or spec.docs is None or not tasks.is_loglik(spec) or not base_rows:
        return None
    by_doc = {r["doc_id"]: r for r in base_rows}
    docs = list(spec.doc_ids)
    if any(d not in by_doc or "logliks" not in by_doc[d] for d in docs):
        return None
    labels = strata.assign([strata.label_margin(by_doc[d]["logliks"]) for d in docs], design.below)
    stratum = {d: int(h) for d, h in zip(docs, labels)}
    pool = (int((labels == 0).sum()), int((labels == 1).sum()))
    fractions = list(ev.sequential.looks)
    reads = strata.stratum_reads(pool, design.share, fractions)
    kept: list[int] = []            # a small pool can give two looks the same items: the later one stays
    for k, r in enumerate(reads):
        if kept and sum(r) == sum(reads[kept[-1]]):
            kept[-1] = k
        else:
            kept.append(k)
    fractions, reads = [fractions[k] for k in kept], [reads[k] for k in kept]
    order = strata.look_order(docs, stratum, reads)
    return Plan(replace(spec, docs=tuple(order)), [sum(r) for r in reads], fractions, stratum, pool, reads)
