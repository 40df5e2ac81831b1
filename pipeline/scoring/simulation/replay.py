"""Error rates of the verdict procedure, replayed on paired per-sample scores by resampling. Pure
(numpy); its command is `python -m pipeline.scoring.simulation.simulate`.

Takes a baseline's and a variant's paired per-sample scores of one metric, moves the variant so that its true delta sits exactly at the margin, at zero
or at twice the margin, and replays what evaluate does with one gated metric: documents drawn with
replacement from the pairs (the population), read in the looks of eval.sequential at their caps, each
look's interval (paired_binary, paired_graded, or the corpus metric's jackknife form) at the look's
group-sequential confidence, a pass or fail stopping the metric, open at the cap otherwise. The check
in the engine's second arithmetic is not replayed: a pass needs it too, so it can only lower the rates
of passing printed here.

How the variant is moved keeps the shape of its differences: a 0/100 metric keeps its gained pairs
and loses margin + gained (as rates); a graded metric moves only its changed pairs (exact zeros stay
zeros, scores clipped to 0-100), and when too few pairs changed to reach the target, unchanged pairs
drop to 0 in a seeded order until it can (the "identical outputs at the margin" case); a corpus
metric (BLEU, chrF) is replayed on its per-sentence jackknife pseudo-values, moved the same way.

The rates: false_pass (a pass with the true delta at the margin; promised <= alpha), false_fail (a
fail there; <= alpha), power (a pass with the true delta 0), fail_power (a fail at twice the margin),
and the mean samples read at the margin, each with its Monte-Carlo standard error.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from pipeline.domain.sets import metric_registry
from pipeline.scoring.verdict import margin as rule
from pipeline.scoring.estimators import paired_binary, paired_graded
from pipeline.scoring.verdict.sequential import Design, look_sizes

SCALE = paired_graded.SCALE


@dataclass(frozen=True)
class Population:
    """One metric's paired samples: `kind` binary (0/100), graded (per-sample 0-100) or corpus
    (jackknife pseudo-values); `base` the baseline's per-sample scores (graded), `diff` tier - baseline,
    `changed` whether each pair's output differs."""
    kind: str
    base: np.ndarray
    diff: np.ndarray
    changed: np.ndarray

    @classmethod
    def of(cls, base, tier, kind: str, changed=None) -> Population:
        """`kind`: the metric's, as metric_registry declares it (simulate.population asks it)."""
        b, t = np.asarray(base, dtype=float), np.asarray(tier, dtype=float)
        if b.shape != t.shape or b.size < 2:
            raise ValueError(f"paired scores must align and number at least 2 ({b.size} vs {t.size})")
        if kind not in metric_registry.KINDS:
            raise ValueError(f"kind {kind!r} is none of {metric_registry.KINDS}")
        if kind == metric_registry.BINARY and not (np.isin(b, (0.0, SCALE)).all() and np.isin(t, (0.0, SCALE)).all()):
            raise ValueError("a binary metric's per-sample scores are 0 or 100")
        ch = (t != b) if changed is None else np.asarray(changed, dtype=bool)
        return cls(kind, b, t - b, ch)


def moved(pop: Population, target: float, seed: int = 0) -> Population:
    """`pop` with its mean difference moved to `target`, its shape kept (module docstring)."""
    if pop.kind == metric_registry.BINARY:
        return pop          # binary populations are moved as rates in `replay`
    if pop.kind == metric_registry.CORPUS:
        diff, ch = pop.diff.copy(), pop.changed.copy()
        if not ch.any():                 # nothing changed: the worst case at the target, a few full moves
            k = max(1, math.ceil(abs(target) * diff.size / SCALE))
            ch[np.random.default_rng(seed).permutation(diff.size)[:k]] = True
            diff[ch] = 0.0
        diff[ch] += (target * diff.size - diff.sum()) / ch.sum()
        return replace(pop, diff=diff, changed=ch)
    tier, ch = pop.base + pop.diff, pop.changed.copy()
    current = float(pop.diff.mean())
    extreme = 0.0 if target < current else SCALE
    order = iter(np.random.default_rng(seed).permutation(np.flatnonzero(~ch)))
    # the target must lie between the current mean and the changed pairs all at the extreme
    while (target - (np.where(ch, extreme, tier) - pop.base).mean()) * (target - current) > 0:
        nxt = next(order, None)
        if nxt is None:
            raise ValueError(f"the scores cannot be moved to a mean difference of {target:+.2f}")
        ch[nxt] = True
    lo, hi = -SCALE, SCALE
    for _ in range(60):                  # the shift of the changed pairs' scores, by bisection
        mid = 0.5 * (lo + hi)
        mean = (np.where(ch, np.clip(tier + mid, 0.0, SCALE), tier) - pop.base).mean()
        lo, hi = (mid, hi) if mean < target else (lo, mid)
    new = np.where(ch, np.clip(tier + 0.5 * (lo + hi), 0.0, SCALE), tier)
    return replace(pop, diff=new - pop.base, changed=ch | (new != pop.base))


def replay(pop: Population, sizes: list[int], confidences: list[float], margin: float, sims: int,
           seed: int, target: float, method: str = "score") -> dict[str, np.ndarray]:
    """Per simulated run: the verdict ("pass", "fail", "open") and the samples read. `method`: score
    (evaluate's intervals) or wald (qtier's procedure before 2026-12: delta -/+ z x the bootstrap SE
    for graded and corpus metrics, kept to show what it got wrong)."""
    rng = np.random.default_rng(seed)
    cap = sizes[-1]
    verdict = np.full(sims, "open", dtype=object)
    read = np.full(sims, cap)
    if pop.kind == metric_registry.BINARY:
        gained = float((pop.diff > 0).mean())
        lost = gained - target / SCALE
        if lost < 0 or lost + gained > 1:
            raise ValueError(f"a 0/100 metric cannot have a mean difference of {target:+.2f} with "
                             f"{gained:.1%} of pairs gained")
        draws = rng.choice(3, size=(sims, cap), p=[lost, gained, 1 - lost - gained])
    else:
        idx = rng.integers(0, pop.diff.size, size=(sims, cap))
    for n, conf in zip(sizes, confidences):
        if pop.kind == metric_registry.BINARY:
            b = (draws[:, :n] == 0).sum(1)
            c = (draws[:, :n] == 1).sum(1)
            lo, hi = paired_binary.interval(b, c, np.full(sims, n), conf)
            lo, hi = SCALE * lo, SCALE * hi
        else:
            d, ch = pop.diff[idx[:, :n]], pop.changed[idx[:, :n]]
            if pop.kind == metric_registry.GRADED:
                base = pop.base[idx[:, :n]]
                down, up = base.max(1), SCALE - base.min(1)
            else:
                down = up = np.full(sims, SCALE)
            if method == "wald":
                half = NormalDist().inv_cdf(0.5 + conf / 2) * np.sqrt(d.var(1) / n)
                lo, hi = d.mean(1) - half, d.mean(1) + half
            else:
                lo, hi = paired_graded.intervals(np.full(sims, n), d.mean(1), d.var(1, ddof=1), ch.sum(1),
                                                 np.maximum(down, 1e-9), np.maximum(up, 1e-9),
                                                 paired_graded.tail_stats(d), conf)
        passed, failed = rule.settle_open(verdict, lo, hi, margin)
        read[passed | failed] = n
    return {"verdict": verdict, "read": read}


@dataclass(frozen=True)
class Rate:
    name: str
    value: float
    mc_se: float

    def line(self) -> str:
        return f"{self.name} {self.value:.3f} ± {self.mc_se:.3f}"


def rates(pop: Population, looks: list[float], cap: int, confidence: float, margin: float,
          sims: int = 4000, seed: int = 0, method: str = "score") -> list[Rate]:
    """The procedure's error rates and power on `pop` (module docstring)."""
    sizes = look_sizes(looks, cap) if looks else [cap]
    design = Design.of([n / cap for n in sizes], confidence)
    confs = [design.confidence_at(k) for k in range(len(sizes))] if looks else [confidence]

    def run(target: float, k: int) -> dict[str, np.ndarray]:
        return replay(moved(pop, target, seed), sizes, confs, margin, sims, seed + k, target, method)

    def rate(name: str, hits: np.ndarray) -> Rate:
        p = float(hits.mean())
        return Rate(name, p, math.sqrt(max(p * (1 - p), 1.0 / sims) / sims))

    at = run(-margin, 1)
    zero = run(0.0, 2)
    beyond = run(-2 * margin, 3)
    return [rate("false_pass", at["verdict"] == "pass"), rate("false_fail", at["verdict"] == "fail"),
            rate("power", zero["verdict"] == "pass"), rate("fail_power", beyond["verdict"] == "fail"),
            Rate("samples_at_margin", float(at["read"].mean()), float(at["read"].std() / math.sqrt(sims)))]
