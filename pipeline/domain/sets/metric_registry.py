"""Every metric qtier scores, declared once: its name, label, kind, per-row score, aggregate, interval
method and direction. Every reader asks this table (the rows' scores and a task's aggregate:
task_rows; intervals, looks, power, KV by length, replays: scoring/estimators/analysis.py and
scoring/simulation/simulate.py; lm-eval's scale: registry.py; labels and plots: report/cells.py) and
none keeps a list of names or sniffs a metric's values to guess what it is.

    from pipeline.domain.sets import metric_registry
    m = metric_registry.get("rougeL")     # Metric(kind="graded", interval="studentized", ...)
    m.score(row)                          # its per-row score of a local sample row
    metric_registry.row_scores(["bleu", "chrf"])      # ("chrf",): the per-row scores a task's rows carry

This follows lm-evaluation-harness's registry (lm_eval/api/registry.py: `register_metric(metric=,
higher_is_better=, output_type=, aggregation=)`, and lm_eval/api/metrics.py's one table from an
aggregation to its standard error): a metric is declared by name once, and a new metric is one entry
here. tests/test_metric_registry.py registers a graded metric at run time and sees it scored, aggregated,
interval-read, labelled and judged with no other edit.

Kinds:
- binary: 0 or 100 per sample (accuracy, exact match; lm-eval's fractions of documents, which
  registry.py multiplies by 100): the paired score interval of its discordant pairs ("score");
- graded: a per-sample score on 0-100 (ROUGE): the floored studentized interval ("studentized");
- corpus: a score of the whole set (BLEU, chrF, macro-F1): BLEU and chrF get the studentized interval
  of their jackknife pseudo-values from sacrebleu's per-sentence statistics ("jackknife"); macro-F1 has
  none (reported without an interval, so never passed).
An lm-eval metric not declared here (f1, mcc, perplexity...) is `unknown(name)`: graded, kept on
lm-eval's scale, with an interval only where its per-sample values average to its aggregate.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pipeline.domain.sets import metrics, retrieval
from pipeline.domain.sets.sample_row import SampleRow

BINARY, GRADED, CORPUS = "binary", "graded", "corpus"
KINDS = (BINARY, GRADED, CORPUS)
# the interval each method names is in scoring/estimators/analysis.py INTERVALS (one table)
SCORE, STUDENTIZED, JACKKNIFE = "score", "studentized", "jackknife"

Row = SampleRow          # a local task's sample row (task_rows.sample_row): target, output or gold/pred


@dataclass(frozen=True)
class Metric:
    name: str
    label: str                                   # as decision.md and the plots name it
    kind: str                                    # BINARY, GRADED or CORPUS
    interval: str | None                         # SCORE, STUDENTIZED, JACKKNIFE; None: reported without one
    score: Callable[[Row], float] | None = None  # its per-row score of a local row (0-100); None: none
    # over a local task's rows; None: the mean of `score` (over a stratified read, weighted by stratum)
    aggregate: Callable[[list[Row]], float] | None = None
    higher_is_better: bool = True                # the default of a task YAML that does not say
    # the per-row scores it puts on a local task's rows: its own `score`'s, or (BLEU, no per-sentence
    # form) another metric's that stands in for ranking its samples
    stands_in: tuple[str, ...] | None = None
    rank: int | None = None                      # the score a task's samples are ranked by: lowest first
    sentence_stats: Callable[[], Any] | None = None   # JACKKNIFE: the sacrebleu metric whose statistics it sums

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"metric {self.name}: kind {self.kind!r} is none of {KINDS}")
        if self.interval == JACKKNIFE and self.sentence_stats is None:
            raise ValueError(f"metric {self.name}: a jackknife interval needs its per-sentence statistics")

    @property
    def row_scores(self) -> tuple[str, ...]:
        if self.stands_in is not None:
            return self.stands_in
        return (self.name,) if self.score is not None else ()


def _hyp(row: Row) -> str:
    return metrics.clean_generation(str(row.output))


def _rouge(key: str) -> Callable[[Row], float]:
    return lambda row: metrics.rouge(str(row.target), _hyp(row))[key]


def _corpus(fn: Callable[[list[str], list[str]], float]) -> Callable[[list[Row]], float]:
    return lambda rows: fn([str(r.target) for r in rows], [_hyp(r) for r in rows])


def _bleu():
    from sacrebleu.metrics import BLEU     # lazy: sacrebleu only where a corpus interval is read

    return BLEU()


def _chrf():
    from sacrebleu.metrics import CHRF

    return CHRF()


def _macro_f1(rows: list[Row]) -> float:
    return metrics.macro_f1([r.gold for r in rows], [r.pred for r in rows], len(rows[0].choices))


def _fraction(name: str, label: str) -> Metric:
    """One of lm-eval's metrics that are a fraction of documents (lm_eval/api/metrics.py), 0 or 1 each."""
    return Metric(name, label, BINARY, SCORE)


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("acc", "Accuracy", BINARY, SCORE, score=lambda r: 100.0 * (r.pred == r.gold), rank=0),
    Metric("exact_match", "Exact match", BINARY, SCORE,
           # the retrieval suite: the first number of the whole generation (retrieval.score)
           score=lambda r: 100.0 * retrieval.score(str(r.output), str(r.target))),
    Metric("rouge1", "ROUGE-1", GRADED, STUDENTIZED, score=_rouge("rouge1")),
    Metric("rouge2", "ROUGE-2", GRADED, STUDENTIZED, score=_rouge("rouge2")),
    Metric("rougeL", "ROUGE-L", GRADED, STUDENTIZED, score=_rouge("rougeL"), rank=1),
    Metric("bleu", "BLEU", CORPUS, JACKKNIFE, aggregate=_corpus(metrics.corpus_bleu), stands_in=("chrf",),
           sentence_stats=_bleu),
    Metric("chrf", "chrF", CORPUS, JACKKNIFE, aggregate=_corpus(metrics.corpus_chrf), rank=2,
           score=lambda r: metrics.sentence_chrf(str(r.target), _hyp(r)), sentence_stats=_chrf),
    Metric("macro_f1", "Macro-F1", CORPUS, None, aggregate=_macro_f1),
    _fraction("acc_norm", "Accuracy (length-normalised)"),
    _fraction("acc_mutual_info", "Accuracy (mutual information)"),
    _fraction("acc_bytes", "Accuracy (byte-normalised)"),
    _fraction("acc_all", "Accuracy (all of a question's answers)"),
)}


def unknown(name: str) -> Metric:
    """An lm-eval metric this table does not declare: graded on lm-eval's own scale, labelled by its name."""
    return Metric(name, name, GRADED, STUDENTIZED)


def get(name: str) -> Metric:
    return METRICS.get(name) or unknown(name)


def declared(name: str) -> bool:
    return name in METRICS


def label(name: str) -> str:
    return get(name).label


def row_scores(task_metrics: Iterable[str]) -> tuple[str, ...]:
    """The per-row scores a local task's rows carry for the metrics it reports, in their order."""
    return tuple(dict.fromkeys(s for m in task_metrics for s in get(m).row_scores))


def ranking(scores: Iterable[str]) -> str | None:
    """The score that ranks a task's samples among those its rows carry: the lowest `rank`, else the first."""
    have = list(scores)
    ranked = sorted((get(s).rank, i) for i, s in enumerate(have) if get(s).rank is not None)
    return have[ranked[0][1]] if ranked else (have[0] if have else None)

