"""The GPU check's reference path, for an air-gapped GPU host: every tier that runs without vLLM
quantized on CUDA, each with and without the fp8 KV cache evaluated by the reference backend on CUDA,
then one line per check, PASS or FAIL (SKIP: a tier whose library the host lacks, said why).

    bash scripts/gpu_check_offline.sh WHEELS [MODEL]      # installs the wheels, then runs this
    python -m scripts.gpu_check_reference --work DIR [--model local:/path] [--dry-run]

No DVC: the stages are called one after another in dvc.yaml's order, each a `python -m
pipeline.stages...` process under a 10-minute limit, in DIR (a copy of this repository whose
params.yaml it rewrites). --dry-run: the same on the CPU (CUDA hidden), for CI, where every check
expects "cpu" and the 8-minute bound is reported, not checked.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

MODEL = "gpu-check"
COMMAND_LIMIT_S = 600           # each command under 10 minutes
RUN_LIMIT_S = 8 * 60            # the whole check within 8 (on a GPU)
SERVED_ELSEWHERE = ("published", "endpoint")    # a checkpoint or a server of its own, not quantized here
NEEDS = {"bnb-int8": "bitsandbytes", "bnb-nf4": "bitsandbytes"}   # a tier's own library


def plan_params(p: dict, model: str, have) -> tuple[dict, dict[str, str]]:
    """params.yaml for the check, and the tiers left out with why. `have(module)`: importable here."""
    p = json.loads(json.dumps(p))
    p["models"] = {MODEL: {"source": model, "dtype": "bfloat16"}}
    p["serving"]["backend"] = "reference"
    skipped, tiers = {}, {}
    for name, t in p["tiers"].items():
        lib = NEEDS.get(t.get("method", ""))
        if t.get("method") in SERVED_ELSEWHERE:
            skipped[name] = "not quantized here (a published checkpoint or a running server)"
        elif lib and not have(lib):
            skipped[name] = f"{lib} is not on this host (its CUDA wheel alone is larger than the folder)"
        else:
            tiers[name] = t
    p["tiers"] = tiers
    p["kv_modes"] = {k: v for k, v in p["kv_modes"].items() if k in ("auto", "fp8")}
    # caps small enough for minutes: the check is of the path, not of a verdict
    p["eval"]["tasks"] = {name: {**t, "limit": min(t.get("limit", 64), 64 if t["kind"] == "classify" else 8)}
                          for name, t in p["eval"]["tasks"].items() if not str(t.get("data", "")).startswith("retrieval")
                          and "retrieval" not in str(t.get("config", ""))}
    p["eval"]["long_context"].update(texts=2, positions=512)
    p["eval"]["fidelity"].update(limit=2, max_tokens=32)
    p["eval"]["throughput"] = {"batch_size": 2, "new_tokens": 8, "repeats": 1}
    p["calibration"].update(num_samples=8, max_seq_len=128)
    return p, skipped


def commands(p: dict) -> list[list[str]]:
    """The stages in dvc.yaml's order for the one model."""
    stage = [sys.executable, "-m"]
    tiers, kvs, m = list(p["tiers"]), list(p["kv_modes"]), MODEL
    return ([stage + ["pipeline.stages.check"], stage + ["pipeline.stages.evalsets"],
             stage + ["pipeline.stages.prepare", m], stage + ["pipeline.stages.probes", m]]
            + [stage + ["pipeline.stages.quantize", m, t] for t in tiers]
            + [stage + ["pipeline.stages.fidelity_base", m], stage + ["pipeline.stages.noise", m]]
            + [stage + ["pipeline.stages.kvscales", m, t] for t in tiers]
            + [stage + ["pipeline.stages.baseline", m]]
            + [stage + ["pipeline.stages.evaluate", m, t, kv] for t in tiers for kv in kvs])


def read(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def checks(work: Path, p: dict, device: str, ran: list[tuple[str, int]], seconds: float,
           dry_run: bool) -> list[tuple[str, str]]:
    """(PASS | FAIL, what) per check, from the stages' records under `work`."""
    out = [("FAIL", f"{cmd} exited {rc}") for cmd, rc in ran if rc != 0]
    for t in p["tiers"]:
        q = read(work / "results" / "quantize" / f"{MODEL}-{t}.json") or {}
        where = (q.get("compute") or {}).get("device")
        # a recipe tier computes (on `device`); the baseline and bitsandbytes tiers quantize at load time
        ok = q.get("status") == "ok" and (where == device if q.get("recipe") else where is None)
        out.append(("PASS" if ok else "FAIL", f"quantize {t}: status {q.get('status')}, "
                    + (f"computed on {where}" if q.get("recipe") else "no recipe (at load time)")))
    for t in p["tiers"]:
        for kv in p["kv_modes"]:
            r = read(work / "results" / "evals" / MODEL / f"{t}-{kv}" / "result.json") or {}
            serving = r.get("serving") or {}
            ok = r.get("status") == "ok" and serving.get("device") == device and serving.get("backend") == "reference"
            out.append(("PASS" if ok else "FAIL", f"evaluate {t}-{kv}: status {r.get('status')}, "
                        f"{serving.get('backend')} on {serving.get('device')}, metrics {sorted(r.get('metrics') or {})}"))
    timed = f"finished in {seconds / 60:.1f} min (bound {RUN_LIMIT_S // 60} min on a GPU)"
    out.append(("INFO" if dry_run else "PASS" if seconds <= RUN_LIMIT_S else "FAIL", timed))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="a copy of this repository (its params.yaml is rewritten)")
    ap.add_argument("--model", default=None, help="local:/path or embedded:...; default: params.yaml's first model")
    ap.add_argument("--dry-run", action="store_true", help="on the CPU, CUDA hidden (CI)")
    a = ap.parse_args(argv)
    env = dict(os.environ)
    if a.dry_run:
        env["CUDA_VISIBLE_DEVICES"] = ""
        device = "cpu"
    else:
        import torch
        if not torch.cuda.is_available():
            print("gpu_check: torch sees no CUDA device (torch.cuda.is_available() is False); --dry-run for the CPU",
                  file=sys.stderr)
            return 2
        device = "cuda"
        print(f"gpu_check: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    params = a.work / "params.yaml"
    p0 = yaml.safe_load(params.read_text())
    model = a.model or next(iter(p0["models"].values()))["source"]
    p, skipped = plan_params(p0, model, lambda m: importlib.util.find_spec(m) is not None)
    params.write_text(yaml.safe_dump(p, sort_keys=False))
    start, ran = time.monotonic(), []
    for cmd in commands(p):
        name = " ".join(cmd[2:])
        try:
            rc = subprocess.run(cmd, cwd=a.work, env=env, timeout=COMMAND_LIMIT_S).returncode
        except subprocess.TimeoutExpired:
            rc = 124
        ran.append((name, rc))
        if rc != 0 and cmd[2] in ("pipeline.stages.check", "pipeline.stages.prepare"):
            break               # nothing after them can run
    results = checks(a.work, p, device, ran, time.monotonic() - start, a.dry_run)
    results += [("SKIP", f"tier {t}: {why}") for t, why in skipped.items()]
    for verdict, what in results:
        print(f"{verdict} {what}")
    return 1 if any(v == "FAIL" for v, _ in results) else 0


if __name__ == "__main__":
    sys.exit(main())
