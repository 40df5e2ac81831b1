"""The decision as data: results/decision.json and the DVC metrics file. Pure."""
from __future__ import annotations

import dataclasses
from typing import Any

from pipeline.domain.memory import mib
from pipeline.report.document import Header, ModelReport
from pipeline.report.serving import load_note
from pipeline.scoring.decision import Row, task_verdicts


def dvc_metrics(rows: list[Row]) -> dict:
    out = {}
    for r in rows:
        if r.status != "ok":
            continue
        entry: dict[str, Any] = {k: round(v, 3) for k, v in r.metrics.items()}
        entry.update({f"delta_{k}": round(v, 3) for k, v in r.deltas.items()})
        entry["weight_mib"] = round(mib(r.weight_bytes), 2) if r.weight_bytes else None
        entry["gen_tokens_per_s"] = r.tokens_per_s
        fid = r.info.fidelity or {}
        if fid.get("status") == "ok":
            entry.update(fidelity_kl_mean=fid["kl_mean"], fidelity_kl_p99=fid["kl_p99"],
                         fidelity_top1_agreement=fid["top1_agreement"])
        if r.overall != "baseline":
            entry["passes"] = int(r.overall == "pass")     # numeric, so `dvc exp show` can sort on it
        out[r.variant] = entry
    return out


def _row_json(r: Row, m: ModelReport, baseline: tuple[str, str]) -> dict:
    return {"model": r.model, "tier": r.tier, "kv": r.kv, "status": r.status, "reason": r.reason,
            "backend": r.backend, "compute_dtype": r.compute_dtype, "metrics": r.metrics, "higher_is_better": r.higher_is_better, "deltas": r.deltas,
            "intervals": {k: v.as_dict() for k, v in r.intervals.items()},
            "verdicts": {k: {"verdict": v, "why": w} for k, (v, w) in r.verdicts.items()},
            "task_verdicts": task_verdicts(r.verdicts), "overall": r.overall, "weight_bytes": r.weight_bytes, "kv_bytes_per_token": r.kv_bytes_per_token,
            "gen_tokens_per_s": r.tokens_per_s, "scheme": r.info.scheme,
            "hardware": r.info.hardware, "serving": r.info.serving, "load": r.info.throughput,
            "load_note": load_note(r, next((b for b in m.rows if (b.tier, b.kv) == baseline), None)),
            "flips": {t: dataclasses.asdict(f) for t, f in m.flips.get(r.variant, {}).items()},
            "plans": {g: dataclasses.asdict(p) for g, p in m.plans.get(r.variant, {}).items()},
            "power": {k: p.as_dict() for k, p in r.power.items()}, "fidelity": r.info.fidelity}


def decision_json(models: dict[str, ModelReport], header: Header) -> dict:
    return {
        "generated": header.generated, "hardware": header.hardware, "versions": header.versions,
        "baseline": {"tier": header.baseline[0], "kv": header.baseline[1]},
        "bootstrap": dataclasses.asdict(header.bootstrap), "budget": dataclasses.asdict(header.budget),
        "recommended": {n: None if m.recommended is None else
                        {"tier": m.recommended.tier, "kv": m.recommended.kv, "why": m.why, "command": m.command}
                        for n, m in models.items()},
        "per_gpu": {n: {g: None if rec.row is None else {"tier": rec.row.tier, "kv": rec.row.kv, "command": rec.command}
                        for g, rec in m.gpu_recs.items()} for n, m in models.items()},
        "rows": [_row_json(r, m, header.baseline) for m in models.values() for r in m.rows],
    }
