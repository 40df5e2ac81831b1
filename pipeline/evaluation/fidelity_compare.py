"""A variant's next-token distributions against the baseline's (stage fidelity_base) on one session:
exact over the full vocabulary where the backend has full logits, else on both engines' top-k."""
from __future__ import annotations

from typing import Any, Callable

from pipeline.engines.base import Session, Variant
from pipeline.domain.sets import fidelity_set
from pipeline.scoring.estimators import fidelity


def measure_fidelity(session: Session, base: fidelity_set.Baseline, backend: str,
                     baseline: Callable[[], Variant] | None = None, any_dtype: bool = False,
                     any_engine: bool = False) -> tuple[dict[str, Any], list[dict]]:
    """This variant's next-token distributions against the baseline's on the same token ids: per text,
    the KL at each position and whether the top-1 tokens agree (decide summarizes them with intervals).
    Only against a baseline of the same backend and compute dtype. A backend with full logits loads the
    baseline (`baseline()` names it) beside the variant: exact, full vocabulary; vLLM compares its top-k
    with the baseline's. any_dtype: compare across compute dtypes too (stage noise: that is its point);
    any_engine: against the baseline's top-k whatever engine made it (an endpoint: its engine is not ours)."""
    meta = base.meta
    if meta.get("unavailable"):
        return {"status": "unavailable", "why": f"no baseline distributions: {meta['unavailable']}"}, []
    mine = (backend, session.info.get("compute_dtype"))
    if (meta.get("backend"), meta.get("compute_dtype")) != mine and not any_engine \
            and not (any_dtype and meta.get("backend") == backend):
        return {"status": "unavailable", "why": f"the baseline's distributions come from {meta.get('backend')} "
                                                f"at {meta.get('compute_dtype')}, this variant runs on {mine[0]} "
                                                f"at {mine[1]}"}, []
    exact = session.full_logits and baseline is not None
    if exact:
        pairs = session.exact_fidelity(baseline(), base.seqs)
        support = "the full vocabulary (exact): the baseline loaded beside this variant"
    else:
        q = session.token_dists(base.seqs, meta["k"])
        pairs = [(fidelity.position_kl(p_ids, p_lp, d.ids, d.logprobs), fidelity.top1_agreement(p1, d.top1))
                 for p_ids, p_lp, p1, d in zip(base.ids, base.logprobs, base.top1, q)]
        support = (f"the ids in both engines' top-{meta['k']} prompt log-probs, the rest of the mass as one "
                   f"bucket: a lower bound of the full KL (the baseline's top-{meta['k']} holds "
                   f"{base.coverage():.0%} of its probability mass per position, on average)")
    rows = [{"kl": [float(f"{x:.6g}") for x in kl], "agree": [bool(x) for x in agree]} for kl, agree in pairs]
    if (meta.get("backend"), meta.get("compute_dtype")) != mine:
        support += (f"; against the baseline as {meta.get('backend')} computed it at {meta.get('compute_dtype')}: "
                    "the engines' difference is included")
    info = {"status": "ok", "support": support, "k": meta["k"], "exact": exact,
            "texts": len(rows), "tokens": sum(len(r["kl"]) for r in rows)}
    return info, rows
