"""Quality metrics, as pure functions over per-sample outputs.

- BLEU and chrF: sacrebleu corpus scores (Post, 2018, "A Call for Clarity in Reporting BLEU
  Scores"); default 13a tokenization, chrF with char order 6, beta 2.
- ROUGE-1/2/L: rouge-score (Lin, 2004) F-measure with the Porter stemmer, mean over samples, x100.
- Macro-F1 over the label set (as scikit-learn's f1_score(average="macro")); accuracy is the mean of
  per-sample 0/100 scores (`choose`: the log-likelihood choice over the labels, one tie rule).

Scales: every metric is reported on 0-100, so tolerances read the same way for all of them.

Names: outside a task a metric is `<task>/<metric>` (metric_id), so two tasks that both report
`acc` never overwrite each other. What each metric is (kind, label, per-row score, aggregate,
interval, direction) is declared once, in metric_registry.py; these are the functions it names.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence


def metric_id(task: str, metric: str) -> str:
    """`translation/bleu`: the one name of a task's metric in results, decisions and reports."""
    return f"{task}/{metric}"


def split_id(mid: str) -> tuple[str, str]:
    """(task, metric) of a metric id; a bare metric name (no task) gives task ''."""
    task, _, metric = mid.rpartition("/")
    return task, metric


def clean_generation(text: str) -> str:
    """The model's answer as scored: first non-empty line, stripped."""
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def choose(logliks: Sequence[float], position: int) -> tuple[int, bool]:
    """(the predicted choice, whether the best log-likelihood was tied exactly): the one classification
    rule, for the per-sample rows and lm-eval's hook alike. A tie goes to the tied choice at index
    position mod (number tied), `position` being the document's row in its data file (lm-eval's doc_id):
    the same choice on both sides of a pair, and no label favoured across documents (a plain argmax
    gives every tie to the first label)."""
    best = max(logliks)
    tied = [i for i, x in enumerate(logliks) if x == best]
    return tied[position % len(tied)], len(tied) > 1


def corpus_bleu(refs: Sequence[str], hyps: Sequence[str]) -> float:
    import sacrebleu

    return float(sacrebleu.corpus_bleu(list(hyps), [list(refs)]).score)


def corpus_chrf(refs: Sequence[str], hyps: Sequence[str]) -> float:
    import sacrebleu

    return float(sacrebleu.corpus_chrf(list(hyps), [list(refs)]).score)


def sentence_chrf(ref: str, hyp: str) -> float:
    import sacrebleu

    return float(sacrebleu.sentence_chrf(hyp, [ref]).score)


_SCORER = None


def rouge(ref: str, hyp: str) -> dict[str, float]:
    return dict(_rouge(ref, hyp))


@functools.lru_cache(maxsize=256)
def _rouge(ref: str, hyp: str) -> tuple[tuple[str, float], ...]:
    # cached: ROUGE-1, -2 and -L are three metrics (metric_registry), scored by one call per row
    global _SCORER
    if _SCORER is None:
        from rouge_score import rouge_scorer

        _SCORER = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    scores = _SCORER.score(ref, hyp)
    return tuple((k, 100.0 * v.fmeasure) for k, v in scores.items())


def mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else float("nan")


def macro_f1(golds: Sequence[int], preds: Sequence[int], num_labels: int) -> float:
    """Unweighted mean of per-label F1; a label never predicted nor present scores 0."""
    if not golds:
        return float("nan")
    f1s = []
    for label in range(num_labels):
        tp = sum(1 for g, p in zip(golds, preds, strict=True) if g == label and p == label)
        fp = sum(1 for g, p in zip(golds, preds, strict=True) if g != label and p == label)
        fn = sum(1 for g, p in zip(golds, preds, strict=True) if g == label and p != label)
        denom = 2 * tp + fp + fn
        f1s.append(2 * tp / denom if denom else 0.0)
    return 100.0 * sum(f1s) / num_labels
