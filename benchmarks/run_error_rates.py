"""The verdict procedure's error rates on a completed run's own paired samples: for every variant with a
verdict and every gated metric, `python -m pipeline.scoring.simulation.simulate` moved to the margin, with the
procedure before 2026-12 (delta -/+ z x bootstrap SE) beside it.

    python -m benchmarks.run_error_rates [--sims 4000] [--model smollm2-135m]

Reads results/decision.json (which variants reached a verdict, which metrics are gated) and the samples
under results/baseline/<model>/ and results/evals/<model>/<variant>/; params.yaml for the looks, caps
and margins. One row per (variant, metric); a false-pass rate above 0.025 + 2 MC SE is marked. A choice
task read in strata (eval.sequential.strata) is replayed as one (`simulate --strata`): *now* is the worst
placement of the extra losses, *before* the same looks reading every item alike.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from pipeline import paths
from pipeline.domain.sets.metrics import split_id
from pipeline.scoring.simulation import replay_strata, simulate
from pipeline.scoring.simulation.replay import rates

ALPHA = 0.025


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=4000)
    ap.add_argument("--model", default=None)
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    a = ap.parse_args()
    data = json.loads((paths.RESULTS / "decision.json").read_text())
    print(f"{a.sims} simulated runs per rate; false pass promised <= {ALPHA}")
    print("| variant | metric | pairs | changed | false pass (now) | false fail (now) | power at 0 (now) | "
          "false pass (before) |")
    print("|---|---|---|---|---|---|---|---|")
    for row in data["rows"]:
        if row.get("status") != "ok" or (a.model and row["model"] != a.model) or row.get("overall") == "baseline":
            continue
        for mid, v in row.get("verdicts", {}).items():
            # a metric read on an interval: not one the baseline cannot do, nor one never measured
            if mid not in row.get("intervals", {}) or v.get("why", "").startswith("the baseline cannot do"):
                continue
            task, _ = split_id(mid)
            base = paths.baseline_dir(row["model"]) / paths.SAMPLES / f"{task}.jsonl"
            mine = paths.eval_dir(row["model"], row["tier"], row["kv"]) / paths.SAMPLES / f"{task}.jsonl"
            if not (base.is_file() and mine.is_file()):
                continue
            setup = simulate.load(base, mine, mid, a.params, strata_ok=True)
            if "strata" in (row.get("looks", {}).get(task) or {}):
                # a stratified read: its own replay, the worst placement of the extra losses; "before" is
                # the same looks reading every item alike
                items, _, share = simulate.strata_items(base, mine, mid, a.params)
                found = replay_strata.rates(items, setup.looks, setup.cap, setup.confidence, setup.margin, share,
                                            sims=a.sims)
                worst = max((found[f"stratified, losses {put}"] for put in replay_strata.PUTS),
                            key=lambda rs: rs[0].value)
                now = {r.name: r for r in worst}
                old = {r.name: r for r in found["unstratified"]}
            else:
                now = {r.name: r for r in rates(setup.pop, setup.looks, setup.cap, setup.confidence, setup.margin,
                                                a.sims, 0, "score")}
                old = {r.name: r for r in rates(setup.pop, setup.looks, setup.cap, setup.confidence, setup.margin,
                                                a.sims, 0, "wald")}
            fp = now["false_pass"]
            flag = " **over**" if fp.value > ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / a.sims) else ""
            print(f"| {row['tier']}-{row['kv']} | {mid} | {setup.pop.diff.size} | {int(setup.pop.changed.sum())} | "
                  f"{fp.value:.3f} ± {fp.mc_se:.3f}{flag} | {now['false_fail'].value:.3f} | {now['power'].value:.2f} | "
                  f"{old['false_pass'].value:.3f} ± {old['false_pass'].mc_se:.3f} |")


if __name__ == "__main__":
    main()
