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

from pipeline.domain.sets import tasks
from pipeline.domain.sets.sample_row import SampleRow
from pipeline.domain.result.records import Strata
from pipeline.schema import Eval
from pipeline.scoring.estimators import strata
from pipeline.scoring.verdict.sequential import look_sizes


@dataclass(frozen=True)
class Plan:
    spec: tasks.TaskSpec             # docs: the stratified look order (every item it reads by the cap)
    sizes: list[int]                 # items read by each look
    fractions: list[float]           # each look's information fraction (eval.sequential.looks)
    stratum: dict[int, int]          # doc id -> 0 (below the margin: read in full) or 1
    pool: tuple[int, int]            # the cap's items per stratum
    reads: list[list[int]]           # items read per stratum by each look

    def tag(self, rows: list[SampleRow]) -> list[SampleRow]:
        """The rows with their stratum and the pool's strata."""
        return [replace(r, stratum=self.stratum[r.doc_id], strata=list(self.pool)) for r in rows]

    def record(self, design, cap: int) -> Strata:
        """result.json's account of the design (the task's looks record); `plain`: what the same looks
        read unstratified."""
        return Strata(design.below, design.share, list(self.pool), self.reads,
                      [min(cap, math.ceil(t * cap - 1e-9)) for t in self.fractions])


def plan(spec: tasks.TaskSpec, base_rows: list[SampleRow] | None, ev: Eval) -> Plan | None:
    """The stratified reading of a local choice task whose baseline rows carry label log-likelihoods;
    None for any other task, or with eval.sequential.strata unset."""
    design = ev.sequential.strata if ev.sequential else None
    if design is None or spec.docs is None or not tasks.is_loglik(spec) or not base_rows:
        return None
    docs = list(spec.doc_ids)
    stratum = strata_of(docs, base_rows, design.below)
    if stratum is None:
        return None
    labels = [stratum[d] for d in docs]
    pool = (labels.count(0), labels.count(1))
    fractions, reads = strata.look_reads(pool, design.share, ev.sequential.looks)
    order = strata.look_order(docs, stratum, reads)
    return Plan(replace(spec, docs=tuple(order)), [sum(r) for r in reads], fractions, stratum, pool, reads)


def strata_of(docs: list[int], base_rows: list[SampleRow], below: float) -> dict[int, int] | None:
    """doc id -> its stratum from the baseline's label margins; None where a doc has no baseline row
    with label log-likelihoods (the task is then read unstratified)."""
    by_doc = {r.doc_id: r for r in base_rows}
    if any(d not in by_doc or by_doc[d].logliks is None for d in docs):
        return None
    labels = strata.assign([strata.label_margin(by_doc[d].logliks) for d in docs], below)
    return {d: int(h) for d, h in zip(docs, labels)}


def sizes(ev: Eval, cap: int, base_rows: list[SampleRow] | None) -> list[int]:
    """Items a local task capped at `cap` reads by each look, as evaluate reads it: in strata of the
    baseline's rows (the cap's documents, read by stage baseline) where `plan` would stratify it, else
    sequential.look_sizes. The time budget plans with this (stages/look_budget.py). A registry task is
    read whole: the caller knows which task is one (its spec, or eval.tasks.<task>.lm_eval)."""
    design = ev.sequential.strata
    stratum = strata_of([r.doc_id for r in base_rows], base_rows, design.below) if design and base_rows else None
    if stratum is None:
        return look_sizes(ev.sequential.looks, cap)
    labels = list(stratum.values())
    return [sum(r) for r in strata.look_reads((labels.count(0), labels.count(1)), design.share, ev.sequential.looks)[1]]
