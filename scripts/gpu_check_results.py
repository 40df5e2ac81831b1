"""The checks scripts/gpu_check.sh applies to its finished GPU run: one line each, PASS or FAIL.

    python scripts/gpu_check_results.py SECONDS      # in the run's folder; exits 1 if any check failed

A check over the served rows needs at least one of them: a run in which every row is unsupported
fails, it does not pass by having nothing to check.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

MODEL = "gpu-check"      # the model name scripts/gpu_check.sh writes into params.yaml


def every(items: Iterable, ok: Callable) -> bool:
    """ok(item) for each item, and at least one item."""
    items = list(items)
    return bool(items) and all(ok(x) for x in items)


def checks(d: dict, quant: dict[str, dict], seconds: int) -> list[tuple[str, bool]]:
    """(what, passed) per check, from results/decision.json and results/quantize/<model>-*.json."""
    rows = [r for r in d["rows"] if r["model"] == MODEL]
    served = [r for r in rows if r["status"] == "ok"]
    return [
        ("every variant has a row and at least one was served",
         every(rows, lambda r: r["status"] in ("ok", "unsupported")) and bool(served)),
        ("the baseline and the 8/4-bit compressed-tensors tiers were served",
         {("fp16", "auto"), ("int8", "auto"), ("int4-gptq", "auto")} <= {(r["tier"], r["kv"]) for r in served}),
        ("every served row ran on vLLM at one compute dtype (bfloat16)",
         every(served, lambda r: r["backend"] == "vllm" and r["compute_dtype"] == "bfloat16")),
        ("quantize computed on the GPU in the model's dtype",
         every([q for q in quant.values() if q.get("recipe")],
               lambda q: (q.get("compute") or {}).get("device") == "cuda")),
        ("lm-eval kept gpu_num_concurrent requests in flight",
         every(served, lambda r: (r["serving"] or {}).get("num_concurrent", 0) >= 16)),
        ("the load test ran at the GPU's concurrency levels",
         every(served, lambda r: len((r["load"] or {}).get("bench", {})) >= 3)),
        ("an SLO search reported a max concurrency per served row",
         every(served, lambda r: ((r["load"] or {}).get("slo") or {}).get("max_concurrency_meeting_slo") is not None)),
        ("fidelity (KL, top-1 agreement) for every served row",
         every(served, lambda r: (r.get("fidelity") or {}).get("status") == "ok")),
        ("a vllm serve line for every target GPU with a recommendation",
         every([g for g in (d.get("per_gpu") or {}).get(MODEL, {}).values() if g], lambda g: g["command"])),
        (f"finished in {seconds // 60} min {seconds % 60} s (expected about 10)", seconds < 30 * 60),
    ]


def main(argv: list[str]) -> int:
    seconds = int(argv[1])
    d = json.loads(Path("results/decision.json").read_text())
    quant = {p.stem: json.loads(p.read_text()) for p in Path("results/quantize").glob(f"{MODEL}-*.json")}
    results = checks(d, quant, seconds)
    for name, ok in results:
        print(("PASS " if ok else "FAIL ") + name)
    print(f"results: {Path.cwd()}/results/decision.md")
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
