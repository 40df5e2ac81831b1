"""The decision as data: results/decision.json and the DVC metrics file. Pure."""
from __future__ import annotations

import dataclasses
from typing import Any

from pipeline.domain.hardware.memory import mib
from pipeline.report import long_context, noise, provenance
from pipeline.report.cells import is_baseline
from pipeline.report.document import Header, ModelReport
from pipeline.domain.result.records import TaskLooks
from pipeline.report.serving import load_note
from pipeline.scoring.verdict import retrieval_length
from pipeline.scoring.verdict.judge import task_verdicts
from pipeline.scoring.pick.recommend import Recommendation
from pipeline.scoring.pick.walk import Walk
from pipeline.scoring.verdict.rows import Row


def dvc_metrics(rows: list[Row]) -> dict:
    out = {}
    for r in rows:
        f, overall = r.facts, r.judgement.overall
        if f.status != "ok":
            continue
        entry: dict[str, Any] = {k: round(r.score(k), 3) for k in f.metrics}
        entry.update({f"delta_{k}": round(v, 3) for k, v in r.evidence.deltas.items()})
        entry["weight_mib"] = round(mib(f.weight_bytes), 2) if f.weight_bytes else None
        entry["gen_tokens_per_s"] = f.tokens_per_s
        fid = f.fidelity.summary if f.fidelity else None
        if fid is not None:
            entry.update(fidelity_kl_mean=round(fid.kl_mean, 6), fidelity_kl_p99=round(fid.kl_p99, 6),
                         fidelity_top1_agreement=round(fid.top1_agreement, 4))
        if overall != "baseline":
            entry["passes"] = int(overall == "pass")     # numeric, so `dvc exp show` can sort on it
        out[r.variant] = entry
    return out


def row_json(r: Row, m: ModelReport, base: Row | None) -> dict:
    f, e, j = r.facts, r.evidence, r.judgement
    return {"model": f.model, "tier": f.tier, "kv": f.kv, "status": f.status, "reason": f.reason, "stopped": f.stopped,
            "backend": f.backend, "compute_dtype": f.compute_dtype,
            # scores: the estimate each delta comes from (baseline + delta); read_means: the plain mean
            # of the items the variant read, which a stopped or stratified read does not estimate the pool by
            "metrics": {k: r.score(k) for k in f.metrics}, "read_means": f.metrics,
            "higher_is_better": f.higher_is_better, "deltas": e.deltas,
            "intervals": {k: v.as_dict() for k, v in e.intervals.items()},
            "verdicts": {k: {"verdict": v.verdict, "why": v.why, "unstable": v.unstable, "unchecked": v.unchecked,
                             "confidence": v.confidence, "look": v.look,
                             "second_arithmetic": v.second[0] if v.second else None} for k, v in j.verdicts.items()},
            "task_verdicts": task_verdicts(j.verdicts), "overall": j.overall,
            # task -> why it was never run (its gated metrics' verdict is "not run"; a report-only task too)
            "not_run": {t: why[0] for t in {**f.not_run, **f.refused} if (why := f.not_run_why(t))},
            "weight_bytes": f.weight_bytes,
            "kv_bytes_per_token": f.kv_bytes_per_token, "gen_tokens_per_s": f.tokens_per_s, "scheme": f.scheme,
            "hardware": f.hardware, "serving": as_json(f.serving), "load": as_json(f.throughput),
            "load_note": load_note(r, base, m.min_speed_vs_baseline),
            "flips": {t: {k: v for k, v in dataclasses.asdict(x).items() if v is not None}
                      for t, x in m.flips.get(r.variant, {}).items()},
            "ties": {t: {"tied": a, "n": b} for t, (a, b) in m.ties.get(r.variant, {}).items()},
            "plans": {g: dataclasses.asdict(p) for g, p in m.plans.get(r.variant, {}).items()},
            "power": {k: p.as_dict() for k, p in e.power.items()}, "fidelity": f.fidelity.as_dict() if f.fidelity else None,
            "measured_on": as_json(f.measured_on),
            # what it cost: where each task's looks stopped, the stage's seconds and their parts
            "looks": looks_json(f.looks), "seconds": f.seconds,
            "phases": f.phases}


def looks_json(looks: dict[str, TaskLooks]) -> dict:
    """Each task's looks as evaluate recorded them, without the look order (result.json keeps it). A
    `settled` record is the later of the two arithmetics' looks (scoring/verdict/arith_check.py), so each
    names the arithmetic it was read in: "run" (the verdict's own interval, as `first` has it) or
    "second" (the engine's second arithmetic settling it later: not the interval beside the verdict)."""
    out = {}
    for task, lk in looks.items():
        found = dataclasses.asdict(lk)
        found.pop("order", None)
        for metric, rec in found["settled"].items():
            rec["arithmetic"] = "run" if lk.first is None or lk.first.get(metric) == lk.settled[metric] else "second"
        out[task] = found
    return out


def as_json(record: object | None) -> dict | None:
    """A typed result.json record as decision.json writes it (None: not recorded)."""
    return dataclasses.asdict(record) if record is not None else None


def recommended_json(rec: Recommendation, with_why: bool = True) -> dict | None:
    if rec.row is None:
        return None
    found = {"tier": rec.row.facts.tier, "kv": rec.row.facts.kv, "why": rec.why, "command": rec.command}
    if not with_why:
        del found["why"]
    if rec.walk is not None:
        found["sequence"] = walk_json(rec.walk)
    if rec.axes is not None:            # every chain of the two-axis pick (scoring/pick/axes.py)
        found["chains"] = {n: walk_json(w) for n, w in rec.axes.chains}
    return found


def walk_json(w: Walk) -> dict:
    """The one walk the pick was read from (scoring/pick/walk.py), by variant name: the candidates in order,
    the passing run, the pick, its runner-up, the stopper and why, the held candidates."""
    name = lambda r: None if r is None else r.variant  # noqa: E731
    return {"candidates": [r.variant for r in w.sequence], "passes": [r.variant for r in w.passes],
            "pick": name(w.pick), "runner_up": name(w.runner_up), "stopper": name(w.stopper),
            "stop_reason": w.stop_reason, "held": [r.variant for r in w.held_in_sequence]}


def decision_json(models: dict[str, ModelReport], header: Header) -> dict:
    def base_of(m: ModelReport) -> Row | None:
        return next((b for b in m.rows if is_baseline(b, header.baseline)), None)

    rows = [r for m in models.values() for r in m.rows]
    return {
        "generated": header.generated, "versions": header.versions,
        "machines": {key: desc for desc, key in provenance.machines(rows).items()},
        "engines": provenance.engines_of(rows),
        # decision.baseline.model only where set: a run without a reference across models writes what it did
        "baseline": {k: v for k, v in dataclasses.asdict(header.baseline).items() if k != "model" or v is not None},
        "confidence": header.confidence, "fidelity_bootstrap": dataclasses.asdict(header.fidelity_bootstrap),
        "budget": dataclasses.asdict(header.budget),
        "recommended": {n: recommended_json(m.recommendation) for n, m in models.items()},
        "per_gpu": {n: {g: recommended_json(rec, with_why=False) for g, rec in m.gpu_recs.items()}
                    for n, m in models.items()},
        "rows": [row_json(r, m, base_of(m)) for m in models.values() for r in m.rows],
        "noise_floor": {n: noise.noise_json(m) for n, m in models.items()},
        "long_context": {n: long_context.long_json(m) for n, m in models.items()},
        "retrieval": {n: retrieval_length.as_json(m.retrieval) for n, m in models.items()},
        "baseline_sanity": {n: [{"task": s.task, "kind": s.kind, "what": s.what, "causes": s.causes} for s in m.sanity]
                            for n, m in models.items()},
    }
