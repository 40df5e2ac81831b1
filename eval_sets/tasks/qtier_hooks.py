"""lm-eval hooks for the qtier task YAMLs (referenced as `!function qtier_hooks.<name>`).

Thin adapters: each per-document score and each aggregate is the one pipeline/domain/sets/metric_registry.py
declares for the metric (its `score` of a row, its `aggregate` over rows), so lm-eval's own table says
what qtier's does. qtier scores a local task from its per-sample rows (task_rows.scores_from_rows), not
from these aggregates. Documents reach these hooks already normalised by pipeline/domain/sets/tasks.py to the
canonical fields (translation: source/reference; summarization: document/reference; classification:
text/choices/gold).
"""
from pipeline.domain.sets import metric_registry, metrics, tasks
from pipeline.domain.sets.sample_row import partial


def _scores(names, row):
    return {m: metric_registry.get(m).score(row) for m in names}


def process_translation(doc, results):
    # corpus metrics: lm-eval hands the (reference, output) items to the aggregation
    pair = (doc["reference"], results[0])
    return {"bleu": pair, "chrf": pair}


def process_summarization(doc, results):
    return _scores(("rouge1", "rouge2", "rougeL"), partial(target=doc["reference"], output=results[0]))


def process_retrieval(doc, results):
    return _scores(("exact_match",), partial(target=str(doc["answer"]), output=results[0]))


def process_classification(doc, results):
    # the rows' rule and tie rule (qtier scores the task from its rows: task_rows.scores_from_rows)
    pred, _ = metrics.choose([ll for ll, _ in results], doc[tasks.POSITION])
    row = partial(gold=doc["gold"], pred=pred, choices=doc["choices"])
    return {**_scores(("acc",), row), "macro_f1": row}


def _corpus(name, items):
    return metric_registry.get(name).aggregate([partial(target=ref, output=out) for ref, out in items])


def agg_bleu(items):
    return _corpus("bleu", items)


def agg_chrf(items):
    return _corpus("chrf", items)


def agg_mean(items):
    return metrics.mean(items)


def agg_macro_f1(items):
    return metric_registry.get("macro_f1").aggregate(list(items))
