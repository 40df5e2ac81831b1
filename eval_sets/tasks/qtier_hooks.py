"""lm-eval hooks for the qtier task YAMLs (referenced as `!function qtier_hooks.<name>`).

Thin adapters: the scoring itself lives in pipeline/domain/metrics.py and is unit-tested there. qtier
scores a local task from its per-sample rows (task_rows.scores_from_rows), not from these aggregates;
they follow the same rules, so lm-eval's own table says the same.
Documents reach these hooks already normalised by pipeline/domain/tasks.py to the canonical fields
(translation: source/reference; summarization: document/reference; classification: text/choices/gold).
"""
from pipeline.domain import metrics, retrieval, tasks


def process_translation(doc, results):
    hyp = metrics.clean_generation(results[0])
    pair = (doc["reference"], hyp)
    return {"bleu": pair, "chrf": pair}


def process_summarization(doc, results):
    return metrics.rouge(doc["reference"], metrics.clean_generation(results[0]))


def process_retrieval(doc, results):
    return {"exact_match": 100.0 * retrieval.score(results[0], str(doc["answer"]))}


def process_classification(doc, results):
    # the rows' rule and tie rule (qtier scores the task from its rows: task_rows.scores_from_rows)
    pred, _ = metrics.choose([ll for ll, _ in results], doc[tasks.POSITION])
    gold = doc["gold"]
    return {"acc": 100.0 * (pred == gold), "macro_f1": (gold, pred, len(doc["choices"]))}


def agg_bleu(items):
    refs, hyps = zip(*items)
    return metrics.corpus_bleu(refs, hyps)


def agg_chrf(items):
    refs, hyps = zip(*items)
    return metrics.corpus_chrf(refs, hyps)


def agg_mean(items):
    return metrics.mean(items)


def agg_macro_f1(items):
    golds, preds, ns = zip(*items)
    return metrics.macro_f1(golds, preds, ns[0])
