"""What lm-eval's logged samples become: one compact row per document (sample_row, the JSONL evaluate
writes under samples/), its per-sample scores for paired comparisons, and a task's result.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline import paths
from pipeline.domain import metrics, registry, retrieval
from pipeline.domain.tasks import TaskSpec
from pipeline.io import read_jsonl


def read_samples(variant_dir: Path) -> dict[str, list[dict]]:
    """task -> the per-sample rows an evaluate stage wrote under <variant_dir>/samples/ (see sample_row)."""
    folder = variant_dir / paths.SAMPLES
    return {f.stem: read_jsonl(f) for f in sorted(folder.glob("*.jsonl"))} if folder.is_dir() else {}


def sample_row(spec: TaskSpec, s: dict[str, Any]) -> dict:
    """A compact per-sample log row from one lm-eval sample record."""
    doc = s["doc"]
    row: dict[str, Any] = {"id": doc.get("id", ""), "doc_id": s["doc_id"]}
    row["input"] = {k: v for k, v in doc.items() if k not in ("id", "choices", "gold")}
    row["target"] = s.get("target")
    if spec.kind == "classify":
        row["choices"] = doc["choices"]
        row["gold"] = doc["gold"]
        row["logliks"] = [float(r[0]) for r in s["filtered_resps"]]
        row["pred"], row["tied"] = choose(row["logliks"], int(s["doc_id"]))
    else:
        resp = s["filtered_resps"][0]
        row["output"] = resp if isinstance(resp, str) else resp[0]
    row["prompt_chars"] = len(str(s["arguments"][0][0])) if s.get("arguments") else None
    row["scores"] = per_sample_scores(spec, row)
    return row


def choose(logliks: list[float], doc_id: int) -> tuple[int, bool]:
    """(the predicted choice, whether the best log-likelihood was tied exactly). A tie goes to the
    tied choice at position doc_id mod (number tied): the same choice on both sides of a pair, and
    no label favoured across documents (lm-eval's argmax gives every tie to the first label)."""
    best = max(logliks)
    tied = [i for i, x in enumerate(logliks) if x == best]
    return tied[doc_id % len(tied)], len(tied) > 1


def per_sample_scores(spec: TaskSpec, row: dict) -> dict[str, float]:
    """Per-sample scores for paired comparisons (corpus BLEU has no per-sample form: chrF stands in)."""
    hib = spec.higher_is_better
    if spec.kind == "classify":
        return {"acc": 100.0 * (row["pred"] == row["gold"])}
    hyp = metrics.clean_generation(row["output"])
    ref = str(row["target"])
    scores: dict[str, float] = {}
    if "chrf" in hib or "bleu" in hib:
        scores["chrf"] = metrics.sentence_chrf(ref, hyp)
    if any(m.startswith("rouge") for m in hib):
        scores.update(metrics.rouge(ref, hyp))
    if "exact_match" in hib:        # the retrieval suite: the first number of the whole generation
        scores["exact_match"] = 100.0 * retrieval.score(str(row["output"]), ref)
    return scores


@dataclass(frozen=True)
class TaskResult:
    """One task's outcome in a run: aggregate scores, per-sample rows and each metric's direction,
    all keyed by the task's own metric names (callers prefix `<task>/`)."""
    metrics: dict[str, float]
    rows: list[dict]
    higher_is_better: dict[str, bool]


def task_result(spec: TaskSpec, results: dict, samples: list[dict]) -> TaskResult:
    """From lm-eval's results entry and logged samples of one task (simple_evaluate's output)."""
    samples = sorted(samples, key=lambda r: r["doc_id"])
    if spec.kind == "lm_eval":
        agg, per, hib = registry.scores(results, samples, spec.higher_is_better)
        seen: set[int] = set()
        rows = []
        for s in samples:
            if s["doc_id"] not in seen and s["doc_id"] in per:
                seen.add(s["doc_id"])
                rows.append(registry.sample_row(s, per[s["doc_id"]]))
        return TaskResult(agg, rows, hib)
    found = {m: float(results[f"{m},none"]) for m in spec.higher_is_better if f"{m},none" in results}
    return TaskResult(found, [sample_row(spec, r) for r in samples],
                      {m: spec.higher_is_better[m] for m in found})
