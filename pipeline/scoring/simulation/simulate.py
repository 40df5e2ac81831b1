"""The error rates of evaluate's verdicts on one metric, replayed on a run's own paired samples.

    python -m pipeline.scoring.simulation.simulate <baseline samples.jsonl> <variant samples.jsonl> \\
        --metric summarization/rougeL [--sims 4000] [--params params.yaml] [--method wald]

The two files are samples/<task>.jsonl as results/ stores them (a baseline's, a variant's; a variant
stopped at a look pairs its documents with the baseline's). The looks, cap, confidence and margin
come from params.yaml (eval.sequential, eval.tasks.<task>.limit, decision); the replay itself is
pipeline/scoring/simulation/replay.py. One line per rate with its Monte-Carlo SE, e.g. `false_pass 0.021 ± 0.002`.
`--method wald` replays the procedure before 2026-12 (delta -/+ z x bootstrap SE), for comparison.
`--candidates K` replays a repair search's pick among K candidates, then its verdict
(pipeline/scoring/simulation/repair_confirmation.py): picked apart from the verdicts, and picked by them.
`--sequence K [--good G]` replays the pick across models (one fixed sequence over K candidates, the first
G unchanged, the rest at the margin; pipeline/scoring/simulation/pick_across.py) beside the smallest-passing rule.
`--strata` replays a choice task's stratified looks (eval.sequential.strata; replay_strata.py) beside
the same looks unstratified, the extra losses at the margin put three ways; a variant's rows read in
strata (the default for a choice task) are replayed only that way.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from pipeline.domain.sets import metric_registry, metrics, sample_row
from pipeline.domain.sets.sample_row import SampleRow
from pipeline.schema import builder
from pipeline.scoring.estimators import analysis, stats, strata
from pipeline.scoring.simulation import pick_across, replay_strata, repair_confirmation as selection
from pipeline.scoring.simulation.replay import Population, rates


@dataclass(frozen=True)
class Setup:
    pop: Population
    looks: list[float]
    cap: int
    confidence: float
    margin: float


def population(base_rows: list[SampleRow], tier_rows: list[SampleRow], metric: str) -> Population:
    """The pairs of one metric, of the kind metric_registry declares: per-sample scores, or a local
    corpus metric's jackknife pseudo-values."""
    pairs = analysis.align(base_rows, tier_rows, subset=True)
    declared = metric_registry.get(metric)
    if declared.interval == metric_registry.JACKKNIFE and pairs and not pairs[0][0].lm_eval:
        m = stats.sentence_metric(metric)
        refs = [str(b.target) for b, _ in pairs]
        bh = [metrics.clean_generation(b.output) for b, _ in pairs]
        th = [metrics.clean_generation(t.output) for _, t in pairs]
        pb = stats.pseudo_values(m, stats.segment_stats(m, bh, refs))
        pt = stats.pseudo_values(m, stats.segment_stats(m, th, refs))
        return Population.of(pb, pt, kind=metric_registry.CORPUS, changed=[a != b for a, b in zip(bh, th)])
    if declared.interval is None:
        raise ValueError(f"metric {metric!r} has no interval (pipeline/domain/sets/metric_registry.py): nothing to replay")
    missing = [b.doc_id for b, t in pairs if metric not in b.scores or metric not in t.scores]
    if missing:
        raise KeyError(f"metric {metric!r} is not in the rows' scores (doc {missing[0]})")
    kind = metric_registry.BINARY if declared.kind == metric_registry.BINARY else metric_registry.GRADED
    return Population.of([b.scores[metric] for b, _ in pairs], [t.scores[metric] for _, t in pairs], kind)


def load(baseline: Path, variant: Path, metric_id: str, params_path: Path, strata_ok: bool = False) -> Setup:
    params = builder.load(params_path)
    task, metric = metrics.split_id(metric_id)
    if task not in params.eval.tasks:
        raise KeyError(f"eval.tasks has no task {task!r} (params: {params_path})")
    gate = params.gate(metric_id)
    if gate.tolerance is None:
        raise ValueError(f"{metric_id} has no tolerance in {params_path}: it is reported, not judged")
    base_rows, tier_rows = sample_row.read(baseline), sample_row.read(variant)
    pop = population(base_rows, tier_rows, metric)
    tagged = analysis.strata_of(analysis.align(base_rows, tier_rows, subset=True))
    if tagged is not None and not strata_ok and sum(tagged[1]) > pop.diff.size:
        # its items hold the close calls at more than their share: replayed plainly they are another population
        raise ValueError(f"{variant}: a stratified read ({pop.diff.size} of {sum(tagged[1])} items, "
                         "eval.sequential.strata): replay it with --strata")
    base_value = float(pop.base.mean()) if pop.kind != metric_registry.CORPUS else _corpus_value(base_rows, metric)
    seq = params.eval.sequential
    cap = params.eval.tasks[task].limit or len(base_rows)
    return Setup(pop, list(seq.looks) if seq else [], int(cap), params.decision.confidence,
                 gate.tolerance.allowed_drop(base_value))


def strata_items(baseline: Path, variant: Path, metric_id: str, params_path: Path
                 ) -> tuple[replay_strata.Items, float, float]:
    """The pairs with the baseline's strata (its label margins against eval.sequential.strata.below)."""
    design = builder.load(params_path).eval.sequential
    if design is None or design.strata is None:
        raise ValueError(f"eval.sequential.strata is not set in {params_path}")
    pairs = analysis.align(sample_row.read(baseline), sample_row.read(variant), subset=True)
    if any(b.logliks is None for b, _ in pairs):
        raise ValueError(f"{baseline}: the rows carry no label log-likelihoods (not a choice task)")
    _, metric = metrics.split_id(metric_id)
    labels = strata.assign([strata.label_margin(b.logliks) for b, _ in pairs], design.strata.below)
    tagged = analysis.strata_of(pairs)
    items = replay_strata.Items.of(labels, [b.scores[metric] for b, _ in pairs],
                                   [t.scores[metric] for _, t in pairs], tagged[1] if tagged else None)
    return items, design.strata.below, design.strata.share


def _corpus_value(rows: list[SampleRow], metric: str) -> float:
    """The baseline's corpus score, as the task aggregates it (metric_registry)."""
    return metric_registry.get(metric).aggregate(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m pipeline.scoring.simulation.simulate", description=__doc__.split("\n")[0])
    ap.add_argument("baseline", type=Path, help="the baseline's samples/<task>.jsonl")
    ap.add_argument("variant", type=Path, help="the variant's samples/<task>.jsonl")
    ap.add_argument("--metric", required=True, help="<task>/<metric>, e.g. summarization/rougeL")
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--sims", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--method", choices=("score", "wald"), default="score",
                    help="wald: the procedure before 2026-12 (delta -/+ z x bootstrap SE), for comparison")
    ap.add_argument("--strata", action="store_true",
                    help="a choice task's stratified looks (eval.sequential.strata) beside the plain ones")
    ap.add_argument("--candidates", type=int, default=0,
                    help="K >= 2: a repair search's pick among K candidates, then its verdict")
    ap.add_argument("--sequence", type=int, default=0,
                    help="K >= 2: the pick across models, one fixed sequence over K candidates")
    ap.add_argument("--good", type=int, default=0, help="with --sequence: the first G candidates unchanged")
    a = ap.parse_args(argv)
    try:
        setup = load(a.baseline, a.variant, a.metric, a.params, strata_ok=a.strata)
    except (OSError, ValueError, KeyError) as e:
        print(f"qtier simulate: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    pop = setup.pop
    print(f"# {a.metric}: {pop.kind}, {pop.diff.size} pairs ({int(pop.changed.sum())} changed), observed delta "
          f"{pop.diff.mean():+.3f}, margin {setup.margin:.3f}, cap {setup.cap}, looks {setup.looks or 'none'}, "
          f"confidence {setup.confidence}, method {a.method}, {a.sims} runs per rate")
    if a.strata:
        try:
            items, below, share = strata_items(a.baseline, a.variant, a.metric, a.params)
        except (OSError, ValueError, KeyError) as e:
            print(f"qtier simulate: {e}", file=sys.stderr)
            raise SystemExit(2) from None
        print(f"# strata: margin below {below} nats read whole ({int((items.stratum == 0).sum())} of "
              f"{items.stratum.size} items here), the rest at {share}")
        for name, found in replay_strata.rates(items, setup.looks, setup.cap, setup.confidence, setup.margin,
                                               share, sims=a.sims, seed=a.seed).items():
            print(f"{name}: " + "; ".join(r.line() for r in found))
        return
    if a.sequence:
        found = pick_across.rates(pop, setup.looks, setup.cap, setup.confidence, setup.margin, a.sequence,
                                  a.good, sims=a.sims, seed=a.seed)
    elif a.candidates:
        found = selection.rates(pop, setup.looks, setup.cap, setup.confidence, setup.margin, a.candidates,
                                sims=a.sims, seed=a.seed)
    else:
        found = rates(pop, setup.looks, setup.cap, setup.confidence, setup.margin, a.sims, a.seed, a.method)
    for r in found:
        print(r.line())


if __name__ == "__main__":
    main()
