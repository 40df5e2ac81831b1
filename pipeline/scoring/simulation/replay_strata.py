"""Error rates of stratified looks on a choice task, replayed on a run's own items, side by side with
the same looks unstratified. Pure (numpy); its command is `python -m pipeline.scoring.simulation.simulate ...
--strata` (simulate.py).

The population is the run's items: each with its stratum (the baseline's label margin against
eval.sequential.strata.below) and its paired outcome (lost, gained, same). Each simulated run draws a
pool of `cap` items from it with replacement, so the strata's sizes vary as a real pool's do, reads it
in the stratified looks (strata.stratum_reads), and judges each look with the stratified score
interval (strata.effective) at the look's group-sequential confidence; the unstratified procedure
(evaluate's without strata) reads the same kind of pool in its plain looks.

Moving the variant to a true delta keeps the rates of each stratum and puts the extra losses (or
removes losses, towards a delta of 0) where `put` says: `shape`, in proportion to where the run's own
flips are; `low`, all in the stratum read in full; `high`, all in the stratum read at a share, the
adversarial case for a design that reads it least.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pipeline.scoring.verdict import margin as rule
from pipeline.scoring.estimators import paired_binary, strata
from pipeline.scoring.simulation.replay import SCALE, Rate
from pipeline.scoring.verdict.sequential import Design, look_sizes

PUTS = ("shape", "low", "high")


@dataclass(frozen=True)
class Items:
    """The run's items: stratum (0/1) and tier - baseline (-1, 0, +1) per item."""
    stratum: np.ndarray
    diff: np.ndarray
    pool: tuple[int, int] | None = None       # the strata's sizes when the items are a stratified read

    @classmethod
    def of(cls, stratum, base, tier, pool=None) -> Items:
        s, b, t = (np.asarray(x) for x in (stratum, base, tier))
        if not (s.shape == b.shape == t.shape) or s.size < 2:
            raise ValueError(f"strata and paired scores must align ({s.size}, {b.size}, {t.size})")
        return cls(s.astype(int), np.sign(t.astype(float) - b.astype(float)).astype(int),
                   tuple(pool) if pool is not None else None)

    def rates(self, target: float, put: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(share of the population per stratum, lost rate, gained rate per stratum) with the mean delta
        moved to `target` (points) as `put` says."""
        w = (np.array([(self.stratum == h).mean() for h in (0, 1)]) if self.pool is None
             else np.asarray(self.pool, dtype=float) / sum(self.pool))
        lost = np.array([((self.stratum == h) & (self.diff < 0)).sum() / max(1, (self.stratum == h).sum())
                         for h in (0, 1)])
        gained = np.array([((self.stratum == h) & (self.diff > 0)).sum() / max(1, (self.stratum == h).sum())
                           for h in (0, 1)])
        # share of the pool to lose more: from the population's delta, each stratum at its share of the
        # pool (a stratified read holds the close calls at more than theirs: its plain mean is not it)
        extra = float((w * (gained - lost)).sum()) - target / SCALE
        if extra < 0:               # fewer losses: taken off where the losses are
            alloc = w * lost / (w * lost).sum()
        elif put == "shape":
            flips = w * (lost + gained)
            alloc = flips / flips.sum() if flips.sum() > 0 else w
        else:
            alloc = np.array([1.0, 0.0]) if put == "low" else np.array([0.0, 1.0])
        with np.errstate(divide="ignore", invalid="ignore"):
            lost = lost + np.where(w > 0, extra * alloc / np.maximum(w, 1e-12), 0.0)
        if (lost < -1e-12).any() or (lost + gained > 1 + 1e-12).any() or (alloc[w == 0] > 0).any():
            raise ValueError(f"the items cannot be moved to a delta of {target:+.2f} with the losses put {put}")
        return w, np.clip(lost, 0.0, 1.0), gained


def _draw(rng, sims: int, cap: int, lost: float, gained: float) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative lost and gained counts over `cap` items in order, (sims, cap + 1) each."""
    u = rng.random((sims, cap))
    zero = np.zeros((sims, 1), dtype=int)
    return (np.concatenate([zero, np.cumsum(u < lost, 1)], 1),
            np.concatenate([zero, np.cumsum((u >= lost) & (u < lost + gained), 1)], 1))


def replay(items: Items, looks: list[float], cap: int, confidence: float, margin: float, below_share: float,
           sims: int, seed: int, target: float, put: str = "shape", stratified: bool = True,
           floor: float = strata.FLOOR) -> dict[str, np.ndarray]:
    """Per simulated run: the verdict ("pass", "fail", "open") and the items read, stratified (share
    `below_share` of stratum 1) or in the plain looks."""
    rng = np.random.default_rng(seed)
    w, lost, gained = items.rates(target, put)
    design = Design.of(list(looks), confidence)
    verdict = np.full(sims, "open", dtype=object)
    rows = np.arange(sims)
    if not stratified:
        p_lost, p_gained = float((w * lost).sum()), float((w * gained).sum())
        cl, cg = _draw(rng, sims, cap, p_lost, p_gained)
        sizes = look_sizes(looks, cap)
        design = Design.of([n / cap for n in sizes], confidence)
        read = np.full(sims, cap)
        for k, n in enumerate(sizes):
            lo, hi = paired_binary.interval(cl[:, n], cg[:, n], np.full(sims, n), design.confidence_at(k))
            _settle(verdict, read, SCALE * lo, SCALE * hi, margin, n)
        return {"verdict": verdict, "read": read}
    big1 = rng.binomial(cap, w[1], size=sims)
    pool = np.stack([cap - big1, big1], 1)
    cum = [_draw(rng, sims, cap, lost[h], gained[h]) for h in (0, 1)]
    full = np.stack([pool[:, 0], np.minimum(pool[:, 1], np.maximum((pool[:, 1] > 0).astype(int),
                                                                    np.ceil(below_share * pool[:, 1] - 1e-9)))], 1)
    read = full.sum(1)
    for k, t in enumerate(design.fractions):
        r = np.minimum(full, np.maximum((full > 0).astype(int), np.ceil(t * full - 1e-9))).astype(int)
        b = np.stack([cum[h][0][rows, r[:, h]] for h in (0, 1)], 1)
        c = np.stack([cum[h][1][rows, r[:, h]] for h in (0, 1)], 1)
        lo, hi = paired_binary.interval(*strata.effective(b, c, r, pool, floor), design.confidence_at(k))
        _settle(verdict, read, SCALE * lo, SCALE * hi, margin, r.sum(1))
    return {"verdict": verdict, "read": read}


def _settle(verdict: np.ndarray, read: np.ndarray, lo, hi, margin: float, n) -> None:
    passed, failed = rule.settle_open(verdict, lo, hi, margin)
    read[passed | failed] = np.broadcast_to(n, read.shape)[passed | failed]


def rates(items: Items, looks: list[float], cap: int, confidence: float, margin: float, share: float,
          sims: int = 4000, seed: int = 0, floor: float = strata.FLOOR) -> dict[str, list[Rate]]:
    """Per procedure (`stratified, losses <put>` for each put, `unstratified`): false_pass and false_fail
    at the margin, power at a delta of 0, fail_power at twice the margin, items read at the margin."""
    def rate(name: str, hits: np.ndarray) -> Rate:
        p = float(hits.mean())
        return Rate(name, p, math.sqrt(max(p * (1 - p), 1.0 / sims) / sims))

    def block(stratified: bool, put: str) -> list[Rate]:
        def run(target: float, k: int, where: str) -> dict[str, np.ndarray]:
            return replay(items, looks, cap, confidence, margin, share, sims, seed + k, target, where,
                          stratified, floor)
        at = run(-margin, 1, put)
        zero = run(0.0, 2, "shape")
        beyond = run(-2 * margin, 3, put)
        return [rate("false_pass", at["verdict"] == "pass"), rate("false_fail", at["verdict"] == "fail"),
                rate("power", zero["verdict"] == "pass"), rate("fail_power", beyond["verdict"] == "fail"),
                Rate("items_at_margin", float(at["read"].mean()), float(at["read"].std() / math.sqrt(sims)))]

    out = {f"stratified, losses {put}": block(True, put) for put in PUTS}
    out["unstratified"] = block(False, "shape")
    return out
