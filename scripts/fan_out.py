"""Fan the variants' evaluate stages out over workers through DVC's run-cache (docs/scale-out.md).

    python -m scripts.fan_out plan N          # which evaluate stages each of N workers runs
    python -m scripts.fan_out upstream        # once: every stage the evaluations need, pushed
    python -m scripts.fan_out worker K N      # worker K of N (0-based): its share of evaluate@*, pushed
    python -m scripts.fan_out aggregate       # restores every stage from the remote's run-cache, runs decide

Every worker is a clone of one commit with the project's DVC remote as default (`dvc remote add -d`),
started by any launcher (a GPU of this node each: CUDA_VISIBLE_DEVICES=K; Slurm, Kubernetes, SkyPilot).
Each step is `dvc repro --pull` of its stages, which restores from the remote's run-cache every stage
another machine ran with the same command, deps and params, then `dvc push --run-cache`. No scheduler:
a worker that finds a stage already pushed restores it; one that finds nothing runs it.
"""
from __future__ import annotations

import argparse
import subprocess
import sys

REPORT = ("decide",)                 # what the aggregate runs; the check stage (persistent outputs) runs anywhere


def stage_names() -> list[str]:
    out = subprocess.run(["dvc", "stage", "list", "--name-only"], capture_output=True, text=True, check=True)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def evaluations(names: list[str]) -> list[str]:
    return sorted(n for n in names if n.startswith("evaluate@"))


def upstream(names: list[str]) -> list[str]:
    """Every stage an evaluation depends on, in dvc.yaml's order: all but the evaluations and decide."""
    return [n for n in names if not n.startswith("evaluate@") and n not in REPORT]


def share(names: list[str], worker: int, workers: int) -> list[str]:
    """Worker `worker`'s evaluate stages: every `workers`-th one, so the shares differ by at most one."""
    if not 0 <= worker < workers:
        raise SystemExit(f"qtier: worker {worker} of {workers}: the worker index runs from 0 to {workers - 1}")
    return evaluations(names)[worker::workers]


def dvc(*args: str) -> None:
    print("+ dvc " + " ".join(args), flush=True)
    if subprocess.run(["dvc", *args]).returncode != 0:
        raise SystemExit(f"qtier: `dvc {' '.join(args)}` failed")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    sub.add_parser("plan").add_argument("workers", type=int)
    sub.add_parser("upstream")
    w = sub.add_parser("worker")
    w.add_argument("worker", type=int)
    w.add_argument("workers", type=int)
    sub.add_parser("aggregate")
    a = ap.parse_args(argv)
    names = stage_names()
    if a.step == "plan":
        for k in range(a.workers):
            print(f"worker {k}: " + " ".join(share(names, k, a.workers)))
    elif a.step == "upstream":
        dvc("repro", "--pull", *upstream(names))
        dvc("push", "--run-cache")
    elif a.step == "worker":
        mine = share(names, a.worker, a.workers)
        if mine:
            dvc("repro", "--pull", *mine)
            dvc("push", "--run-cache")
        else:
            print(f"worker {a.worker} of {a.workers}: no evaluate stage left for it", file=sys.stderr)
    else:
        dvc("repro", "--pull")


if __name__ == "__main__":
    main()
