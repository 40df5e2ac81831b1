"""Per-sample comparisons of a variant against its baseline: intervals, flips, the largest
regressions and KV-cache sensitivity by input length. Pure: sample rows in, numbers out.

Sample rows are the typed rows evaluate writes (pipeline/domain/sets/sample_row.py).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass

from pipeline.domain.sets import metric_registry, metrics
from pipeline.domain.sets.sample_row import SampleRow
from pipeline.scoring.estimators import stats

Pair = tuple[SampleRow, SampleRow]          # (baseline or reference row, variant row) of one document


def align(base: list[SampleRow], tier: list[SampleRow], subset: bool = False) -> list[Pair]:
    """Pair samples by doc_id; both runs must have scored the same documents (subset: the tier's are
    some of the baseline's, as a variant stopped at a look is)."""
    b = {r.doc_id: r for r in base}
    t = {r.doc_id: r for r in tier}
    if (not t.keys() <= b.keys()) if subset else b.keys() != t.keys():
        raise ValueError(f"baseline and variant scored different samples ({len(b)} vs {len(t)})")
    return [(b[k], t[k]) for k in sorted(t)]


def common(a: list[SampleRow], b: list[SampleRow]) -> tuple[list[SampleRow], list[SampleRow]]:
    """Both runs' samples of the documents both scored (two variants stopped at different looks read
    two prefixes of one order)."""
    shared = {r.doc_id for r in a} & {r.doc_id for r in b}
    return [r for r in a if r.doc_id in shared], [r for r in b if r.doc_id in shared]


def within(rows: list, docs: Collection[int] | None, doc=lambda x: x.doc_id) -> list:
    """The rows (or pairs: `doc` reads a pair's document id) of the documents `docs`; None: all of them."""
    return list(rows) if docs is None else [x for x in rows if doc(x) in docs]


@dataclass(frozen=True)
class Read:
    """The pairs a task's per-sample numbers (flips, ties, regressions, deltas by length) come from: `n`
    of them, and `verdict_n`, the items the verdict beside them was read on (its settled look's)."""
    n: int
    verdict_n: int

    def label(self) -> str:
        """'' where the numbers are the verdict's pairs, else ' (n=478)': they are over more (an older
        result.json without the look order)."""
        return "" if self.n == self.verdict_n else f" (n={self.n:,})"


def sample_score_key(task_rows: list[SampleRow]) -> str:
    """The score that ranks a task's samples (flips aside): of those the rows carry, the one
    metric_registry ranks first (acc, rougeL, chrF), else the first."""
    found = metric_registry.ranking(task_rows[0].scores if task_rows else {})
    if found is None:
        raise ValueError("sample rows carry no per-sample score")
    return found


def _local(pairs: list[Pair]) -> bool:
    """A local task's rows, with the outputs a corpus metric is recomputed from; a registry task's rows
    (`lm_eval`) carry only lm-eval's own per-sample values."""
    return not pairs[0][0].lm_eval


def _scores(m: str, pairs: list[Pair]) -> tuple[list[float], list[float]] | None:
    """Both sides' per-sample scores of `m`, None where some row lacks one (no per-sample form)."""
    if not all(m in b.scores and m in t.scores for b, t in pairs):
        return None
    return [b.scores[m] for b, _ in pairs], [t.scores[m] for _, t in pairs]


def _score_interval(m: str, pairs: list[Pair], confidence: float) -> stats.Interval | None:
    found = _scores(m, pairs)
    return None if found is None else stats.paired_binary_mean(*found, confidence, strata_of(pairs))


def _studentized(m: str, pairs: list[Pair], confidence: float) -> stats.Interval | None:
    found = _scores(m, pairs)
    return None if found is None else stats.paired_graded_mean(*found, confidence)


def _jackknife(m: str, pairs: list[Pair], confidence: float) -> stats.Interval | None:
    """Recomputed as a corpus score from a local task's logged outputs; a registry task's rows have no
    outputs to recompute it from, only lm-eval's per-sample values where it keeps them (read as graded)."""
    if not _local(pairs):
        return _studentized(m, pairs, confidence)
    refs = [str(b.target) for b, _ in pairs]
    bh = [metrics.clean_generation(b.output) for b, _ in pairs]
    th = [metrics.clean_generation(t.output) for _, t in pairs]
    return stats.paired_corpus(m, refs, bh, th, confidence)


# each interval method metric_registry names -> how the pairs are read with it (lm-eval's one table
# from an aggregation to its standard error, lm_eval/api/metrics.py stderr_for_metric)
INTERVALS = {metric_registry.SCORE: _score_interval, metric_registry.STUDENTIZED: _studentized,
             metric_registry.JACKKNIFE: _jackknife}


def intervals(task_metrics: list[str], pairs: list[Pair], confidence: float
              ) -> dict[str, stats.Interval]:
    """The paired interval of tier - baseline, at `confidence`, for each metric a task reports (keyed by
    the task's own metric names), by the method metric_registry declares for it. A metric without one,
    or without the per-sample form it reads, gets none."""
    out: dict[str, stats.Interval] = {}
    for m in task_metrics:
        read = INTERVALS.get(metric_registry.get(m).interval)
        found = read(m, pairs, confidence) if read is not None and pairs else None
        if found is not None:
            out[m] = found
    return out


def strata_of(pairs: list[Pair]) -> tuple[list[int], list[int]] | None:
    """(stratum per pair, the strata's sizes) when the variant's rows were read in strata
    (evaluation/stratified.py tags them), else None."""
    if not pairs or any(t.stratum is None for _, t in pairs):
        return None
    return [t.stratum for _, t in pairs], list(pairs[0][1].strata)


def flips(pairs: list[Pair]) -> stats.Flips:
    """Predictions changed against gold; over a stratified read, with the pool's share flipped estimated
    (each stratum's share weighted by its size), as the stratified delta is."""
    found = stats.flips([b.gold for b, _ in pairs], [b.pred for b, _ in pairs], [t.pred for _, t in pairs])
    design = strata_of(pairs)
    if design is None:
        return found
    weights = design_weights(pairs)
    flipped = [(b.pred == b.gold) != (t.pred == b.gold) for b, t in pairs]
    return dataclasses.replace(found, share=sum(w for w, f in zip(weights, flipped) if f) / sum(weights))


@dataclass(frozen=True)
class Regression:
    doc_id: int
    drop: float
    base: SampleRow
    tier: SampleRow


def _margin(row: SampleRow) -> float:
    """Log-likelihood margin of the gold label over the best other label."""
    ll, gold = row.logliks, row.gold
    others = [x for i, x in enumerate(ll) if i != gold]
    return ll[gold] - max(others) if others else 0.0


def largest_regressions(pairs: list[Pair], k: int) -> list[Regression]:
    """The k samples whose score dropped most (classification: right->wrong flips first, then the
    largest loss of gold-label margin). Only real drops are listed."""
    if not pairs:
        return []
    key = sample_score_key([b for b, _ in pairs])
    ranked = [Regression(b.doc_id, b.scores[key] - t.scores[key]
                         # a choice task: right->wrong flips first, then the loss of gold-label margin
                         + (_margin(b) - _margin(t) if b.logliks is not None else 0.0), b, t) for b, t in pairs]
    ranked = [r for r in ranked if r.drop > 1e-9]
    return sorted(ranked, key=lambda r: (-r.drop, r.doc_id))[:k]


@dataclass(frozen=True)
class Bucket:
    lo: int
    hi: int | None
    n: int
    delta: float | None      # mean per-sample score delta, tier - reference


def design_weights(pairs: list[Pair]) -> list[float]:
    """Each pair's weight in an estimate over the pool: 1 for a plain read; over a stratified read its
    stratum's pool size over the items read from it (the weights of the stratified delta), so a bucket
    or a share reads the close calls at their share of the pool, not at the share the design read."""
    design = strata_of(pairs)
    if design is None:
        return [1.0] * len(pairs)
    labels, pool = design
    read = {h: labels.count(h) for h in set(labels)}
    return [pool[h] / read[h] for h in labels]


def by_length(pairs: list[Pair], edges: list[int]) -> list[Bucket]:
    """Mean per-sample score delta per prompt-length bucket (edges are lower bounds, in characters),
    weighted as the read's own estimate is (design_weights)."""
    if not pairs:
        return []
    key = sample_score_key([b for b, _ in pairs])
    weights = design_weights(pairs)
    out = []
    for i, lo in enumerate(edges):
        hi = edges[i + 1] if i + 1 < len(edges) else None
        sel = [(b, t, w) for (b, t), w in zip(pairs, weights)
               if (b.prompt_chars or 0) >= lo and (hi is None or (b.prompt_chars or 0) < hi)]
        delta = (sum(w * (t.scores[key] - b.scores[key]) for b, t, w in sel) / sum(w for _, _, w in sel)
                 if sel else None)
        out.append(Bucket(lo, hi, len(sel), delta))
    return out


@dataclass(frozen=True)
class KvLength:
    """Score delta by prompt length of a KV-quantized variant against the same tier with the baseline KV."""
    model: str
    variant: str
    reference: str           # the same tier's variant with the baseline KV cache
    task: str
    buckets: list[Bucket]


Samples = dict[str, list[SampleRow]]         # task -> sample rows


def metrics_of(metric_ids: Iterable[str], task: str) -> dict[str, str]:
    """The task's own metric name -> its id, among `metric_ids`."""
    found = {}
    for mid in metric_ids:
        t, metric = metrics.split_id(mid)
        if t == task:
            found[metric] = mid
    return found


def paired_tasks(theirs: Samples, mine: Samples, looked: Collection[str] = ()
                 ) -> Iterator[tuple[str, list[Pair]]]:
    """(task, its (reference, row) sample pairs) for every task both logged; a `looked` task (stopped
    at a look) pairs its documents with the same ones of the reference's."""
    for task, rows in mine.items():
        if task in theirs:
            yield task, align(theirs[task], rows, subset=task in looked)
