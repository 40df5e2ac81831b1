"""The two-axis pick (scoring/pick/axes.py) replayed: the chance that the pick is worse than its margin,
against the bound page 1 states (alpha per chain with a candidate). Pure (numpy) but for `main`, which
reads a decision.json and params.yaml.

    python -m pipeline.scoring.simulation.pick_axes results/decision.json [--sims 2000] [--params params.yaml]

`main` rebuilds the committed run's own paired samples of its deciding 0/100 metric (decision.json keeps,
per variant, the items flipped each way and n: a paired 0/100 sample is those counts up to order) from its
KV-format variant, takes the chains' shape from the run (its weight tiers, KV formats and combinations),
and replays every candidate's verdict through evaluate's looks at its own true delta (replay.py; candidates
independent: in a run they share items, which ties their errors together, so fewer chains err at once) under
three truths:
- **all at the margin**: every candidate exactly at it (the worst case for a false pass);
- **interaction**: every weight tier, KV format and combination unchanged but the smallest weight tier's
  combinations, at the margin (each part non-inferior alone, together inferior; the smallest tier's, since
  a combination is the pick only where it is smaller than every other claim);
- **one good per axis**: the largest weight tier and KV format unchanged, everything else at the margin,
  so each of the three chains can err on its own.
A pick is false when its true delta is at or beyond the margin. Beside it, for the interaction case, the
rule that claims a combination from its parts alone (no test of its own).
"""
from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.schema import builder
from pipeline.scoring.pick.axes import chain_runs
from pipeline.scoring.simulation.replay import Population, Rate, moved, replay
from pipeline.scoring.verdict.sequential import Design, look_sizes


@dataclass(frozen=True)
class Truth:
    """True deltas in each chain's order; `combinations` (i, j, delta): i the weight tier's index, j the
    KV format's."""
    weights: tuple[float, ...]
    kv: tuple[float, ...]
    combinations: tuple[tuple[int, int, float], ...]

    @property
    def chains(self) -> int:
        return sum(1 for c in (self.weights, self.kv, self.combinations) if c)


def shapes(tiers: int, formats: int, margin: float) -> dict[str, Truth]:
    """The three truths of the module docstring for `tiers` weight tiers and `formats` KV formats (every
    combination in memory order: weight tier first, then KV format)."""
    grid = [(i, j) for i in range(tiers) for j in range(formats)]
    bad = -margin
    return {"all_at_margin": Truth((bad,) * tiers, (bad,) * formats, tuple((i, j, bad) for i, j in grid)),
            "interaction": Truth((0.0,) * tiers, (0.0,) * formats,
                                 tuple((i, j, bad if i == tiers - 1 else 0.0) for i, j in grid)),
            "one_good_per_axis": Truth((0.0,) + (bad,) * (tiers - 1), (0.0,) + (bad,) * (formats - 1),
                                       tuple((i, j, bad) for i, j in grid))}


def binary_pairs(n: int, base_rate: float, right_to_wrong: int, wrong_to_right: int) -> Population:
    """A paired 0/100 sample from its counts: n items, the baseline right on round(n x base_rate) of them,
    `right_to_wrong` of those wrong in the variant and `wrong_to_right` of the others right."""
    right = round(n * base_rate)
    if not (right_to_wrong <= right and wrong_to_right <= n - right):
        raise ValueError(f"flips {right_to_wrong}/{wrong_to_right} do not fit {right} right of {n}")
    base = np.r_[np.full(right, 100.0), np.zeros(n - right)]
    tier = base.copy()
    tier[:right_to_wrong] = 0.0
    tier[right:right + wrong_to_right] = 100.0
    return Population.of(base, tier, "binary")


def false_pick(truth: Truth, pop: Population, looks: list[float], cap: int, confidence: float, margin: float,
               sims: int = 2000, seed: int = 0) -> tuple[Rate, Rate]:
    """(the two-axis pick's false-pick rate, the parts-only rule's) under `truth`."""
    sizes = look_sizes(looks, cap) if looks else [cap]
    design = Design.of([n / cap for n in sizes], confidence)
    confs = [design.confidence_at(k) for k in range(len(sizes))] if looks else [confidence]
    deltas = list(truth.weights) + list(truth.kv) + [d for _, _, d in truth.combinations]
    passed = np.stack([replay(moved(pop, d, seed), sizes, confs, margin, sims, seed + 10 + k, d)["verdict"] == "pass"
                       for k, d in enumerate(deltas)])
    nw, nk = len(truth.weights), len(truth.kv)
    delta = {(i, -1): d for i, d in enumerate(truth.weights)} | {(-1, j): d for j, d in enumerate(truth.kv)}
    delta |= {(i, j): d for i, j, d in truth.combinations}
    wrong = np.zeros(sims, bool)
    naive = np.zeros(sims, bool)
    for s in range(sims):
        col = passed[:, s]
        combos = [(i, j, bool(col[nw + nk + c])) for c, (i, j, _) in enumerate(truth.combinations)]
        w, k, c = chain_runs(list(col[:nw]), list(col[nw:nw + nk]), combos)
        # each chain's pick as (weight index, KV index), -1 the baseline's: the largest is the smallest in memory
        picks = [(w - 1, -1)] * bool(w) + [(-1, k - 1)] * bool(k) + [combos[c - 1][:2]] * bool(c)
        wrong[s] = bool(picks) and delta[max(picks)] <= -margin + 1e-9
        parts = [(i, j) for i, j, _ in combos if i < w and j < k] + picks
        naive[s] = bool(parts) and delta[max(parts)] <= -margin + 1e-9

    def rate(name: str, hits: np.ndarray) -> Rate:
        p = float(hits.mean())
        return Rate(name, p, math.sqrt(max(p * (1 - p), 1.0 / sims) / sims))
    return rate("false_pick_two_axes", wrong), rate("false_pick_parts_only", naive)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m pipeline.scoring.simulation.pick_axes",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("decision", type=Path, help="a run's decision.json (results/decision.json)")
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--metric", default="classification/acc", help="a 0/100 metric with flips in decision.json")
    ap.add_argument("--sims", type=int, default=2000)
    a = ap.parse_args(argv)
    params = builder.load(a.params)
    base = params.decision.baseline
    d = json.loads(a.decision.read_text())
    rows = [r for r in d["rows"] if r["status"] == "ok"]
    ref = next(r for r in rows if (r["tier"], r["kv"]) == (base.tier, base.kv))
    task = a.metric.split("/")[0]
    src = next(r for r in rows if r["tier"] == base.tier and r["kv"] != base.kv and task in r["flips"])
    f = src["flips"][task]
    pop = binary_pairs(f["n"], ref["metrics"][a.metric] / 100, f["right_to_wrong"], f["wrong_to_right"])
    tiers = len({r["tier"] for r in rows if r["kv"] == base.kv} - {base.tier})
    formats = len({r["kv"] for r in rows if r["tier"] == base.tier} - {base.kv})
    margin = params.tolerance(a.metric).abs
    cap = params.eval.tasks[task].limit
    alpha = (1 - params.decision.confidence) / 2
    print(f"paired {a.metric} of {src['tier']}-{src['kv']} (n {f['n']}); {tiers} weight tiers, {formats} KV formats, "
          f"margin {margin}, cap {cap}, {a.sims} sims")
    for name, truth in shapes(tiers, formats, margin).items():
        ours, naive = false_pick(truth, pop, params.eval.sequential.looks, cap, params.decision.confidence, margin,
                                 a.sims)
        print(f"{name}: {ours.line()}; stated {alpha * truth.chains:.3f} ({truth.chains} chains at {alpha:.3f}); "
              f"{naive.line()}")


if __name__ == "__main__":
    main()
