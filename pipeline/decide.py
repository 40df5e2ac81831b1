"""Stage decide: every variant's results -> results/decision.md, decision.json, metrics.json.

    python -m pipeline.decide

Exits 1 (after writing everything) when any variant failed, so `dvc repro` reports it.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
from pathlib import Path

from pipeline import config, decision, io, launch, memory, paths, report
from pipeline.decision import Row

NOTES = [
    "Each metric cell is `score (delta vs baseline, verdict)`. All metrics are on a 0-100 scale. "
    "BLEU/chrF: sacrebleu corpus scores; ROUGE-L: rouge-score F-measure with stemming, mean over samples; "
    "Accuracy: log-likelihood choice over the label set.",
    "A metric is *inconclusive* when the baseline scores below `decision.min_baseline` in params.yaml "
    "(the model cannot do the task, so a drop or gain means nothing); otherwise it passes when the drop is "
    "within `decision.tolerances`. A tier passes when no metric fails and at least one passes.",
    "Quality comes from the backend named in the last column. On the reference backend (transformers on "
    "CPU) every tier is evaluated in float32: quantized weights are decompressed exactly, W8A8 activations "
    "are fake-quantized per token, and the fp8 KV cache is *simulated* by rounding K/V through float8_e4m3 "
    "(scale 1.0, as vLLM without calibrated scales).",
    "Gen tok/s is batched greedy generation on this machine's CPU with dense float kernels: it ranks "
    "nothing about quantized kernels on a GPU. Weights are the checkpoint files on disk; KV bytes/token = "
    "2 x layers x KV heads x head dim x bytes of the KV dtype as vLLM stores it (auto = model dtype).",
    "The recommended tier is the smallest-memory variant that passes; its command assumes a GPU with vLLM.",
]


def hardware() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, no GPU" if not _gpu() else f"{cpu} + GPU"


def _gpu() -> bool:
    try:
        from pipeline.compat import accelerator_available

        return accelerator_available()
    except Exception:  # noqa: BLE001 - torch missing: no GPU either
        return False


def build_row(params: config.Params, model: str, tier: str, kv: str) -> Row:
    result_file = paths.eval_dir(model, tier, kv) / "result.json"
    if not result_file.is_file():
        return Row(model, tier, kv, status="failed", reason=f"no result: {result_file} is missing")
    res = io.read_json(result_file)
    row = Row(model, tier, kv, status=res["status"], backend=res.get("backend"), reason=res.get("reason"))
    row.extra["scheme"] = params.tiers[tier].label or params.tiers[tier].method
    row.extra["serving"] = res.get("serving", {})
    row.extra["num_samples"] = res.get("num_samples", {})
    for task_metrics in res.get("metrics", {}).values():
        row.metrics.update(task_metrics)
    row.tokens_per_s = res.get("throughput", {}).get("gen_tokens_per_s")
    ckpt = paths.tier_dir(model, tier)
    if ckpt.is_dir() and not (ckpt / "FAILED.txt").exists():
        row.weight_bytes = memory.weight_bytes(ckpt)
    cfg_file = paths.source_dir(model) / "config.json"
    if cfg_file.is_file():
        hf = json.loads(cfg_file.read_text())
        nbytes = memory.kv_dtype_bytes(params.kv_modes[kv].cache_dtype, params.models[model].dtype)
        row.kv_bytes_per_token = memory.kv_bytes_per_token(hf, nbytes)
    return row


def row_json(r: Row) -> dict:
    return {"model": r.model, "tier": r.tier, "kv": r.kv, "status": r.status, "reason": r.reason,
            "backend": r.backend, "metrics": r.metrics, "deltas": r.deltas,
            "verdicts": {m: {"verdict": v, "why": w} for m, (v, w) in r.verdicts.items()},
            "overall": r.overall, "weight_bytes": r.weight_bytes, "kv_bytes_per_token": r.kv_bytes_per_token,
            "gen_tokens_per_s": r.tokens_per_s, "scheme": r.extra.get("scheme"),
            "serving": r.extra.get("serving")}


def main() -> None:
    params = config.load_or_exit()
    rows = [build_row(params, *v) for v in params.variants()]
    decision.judge(rows, params.decision)
    base = (params.decision.baseline.tier, params.decision.baseline.kv)
    models, dvc_metrics, summary = {}, {}, []
    for name, m in params.models.items():
        mine = [r for r in rows if r.model == name]
        rec, why = decision.recommend(rows, name)
        command = None
        if rec is not None:
            command = launch.as_shell(launch.vllm_serve_args(str(paths.tier_dir(name, rec.tier)), m.dtype,
                                                             params.kv_modes[rec.kv].cache_dtype))
        num = next((r.extra["num_samples"] for r in mine if r.extra.get("num_samples")), {})
        models[name] = {"rows": mine, "recommended": rec, "why": why, "command": command,
                        "source": m.source, "num_samples": num}
        dvc_metrics[name] = {r.variant: {**{k: round(v, 3) for k, v in r.metrics.items()},
                                         "weight_mib": round(memory.mib(r.weight_bytes), 2) if r.weight_bytes else None,
                                         "gen_tokens_per_s": r.tokens_per_s} for r in mine if r.status == "ok"}
        summary.append(f"  {name}: recommended "
                       + (f"{rec.tier} + KV {rec.kv}" if rec else f"none ({why})"))
    header = {"generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "hardware": hardware()}
    io.atomic_write_text(paths.RESULTS / "decision.md", report.render(models, base, NOTES, header))
    io.atomic_write_json(paths.RESULTS / "decision.json", {
        "header": header, "baseline": {"tier": base[0], "kv": base[1]},
        "recommended": {n: (None if m["recommended"] is None else
                            {"tier": m["recommended"].tier, "kv": m["recommended"].kv, "why": m["why"],
                             "command": m["command"]}) for n, m in models.items()},
        "rows": [row_json(r) for r in rows]})
    io.atomic_write_json(paths.RESULTS / "metrics.json", dvc_metrics)
    failed = [r for r in rows if r.status == "failed"]
    print("\n".join(["", "qtier: results/decision.md written", *summary]))
    if failed:
        print(f"qtier: {len(failed)} variant(s) failed: "
              + ", ".join(f"{r.model}/{r.variant} ({r.reason})" for r in failed), file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
