"""How fast is the evaluate stage, side by side with lm-eval's plain `hf` model, and how far from
this machine's limit? One process, one loaded variant, the same task YAMLs and samples for both.

    python -m benchmarks.evaluate_speed                      # smollm2-135m fp16 auto, params.yaml limits
    python -m benchmarks.evaluate_speed smollm2-135m int8 fp8 --before-batch 8

Needs the variant's checkpoint (run `dvc repro` first). Prints, per phase (generation tasks,
log-likelihood tasks): seconds, samples/s and tokens/s (prompt + generated tokens the phase had to
process) for
  before           lm-eval HFLM in float32, batch --before-batch: the evaluate stage before this round;
  qtier, float32   the evaluate stage's path (pipeline/engines: generate, loglik, kvcache) at float32,
                   whose per-sample outputs must agree with "before";
  qtier, <dtype>   the same path at the dtype the evaluate stage picks on this machine (bfloat16 on a CPU
                   with native bfloat16), whose metrics are printed next to the float32 ones;
and the machine's limit for this model in each dtype: tokens/s of one large batched forward (compute
bound, what prompt processing can reach) and memory bandwidth / weight bytes (what batch-1 decoding can
reach). Timings are only comparable within one run on one machine: compare the ratios, not the seconds.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch

from benchmarks.timing import best_of
from pipeline import io, paths, schema
from pipeline.engines import Variant
from pipeline.engines.reference.backend import ReferenceBackend
from pipeline.domain.hardware import machine
from pipeline.domain.sets import tasks
from pipeline.evaluation.lm_eval_runner import run_tasks


def prefill_limit(model, vocab: int, batch: int = 16, length: int = 256) -> float:
    """Tokens/s of one large batched forward: the compute ceiling for prompt processing."""
    ids = torch.randint(0, vocab, (batch, length))
    with torch.inference_mode():
        model(input_ids=ids[:2, :32])
        return batch * length / best_of(lambda: model(input_ids=ids, logits_to_keep=1), 2)


def bandwidth_gbps(nbytes: int = 1 << 30) -> float:
    """Memory read bandwidth, GB/s: a sum over a tensor far larger than the caches."""
    x = torch.ones(nbytes // 4, dtype=torch.float32)
    x.sum()
    return nbytes / best_of(lambda: x.sum(), 3) / 1e9


def work_tokens(tokenizer, samples: dict[str, list[dict]], raw: dict[str, list[dict]]) -> int:
    """The tokens a sample needs a model to process, however it is batched: its prompt once, each
    scored continuation, each generated token. The same count for every path compared."""
    n = 0

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False).input_ids)

    for task, rows in raw.items():
        for s in rows:
            n += count(s["arguments"][0][0])
            n += sum(count(a[1]) for a in s["arguments"] if isinstance(a[1], str))
        for row in samples[task]:
            if row.output is not None:
                n += len(tokenizer(row.output, add_special_tokens=False).input_ids)
    return n


def timed_run(lm, specs, ev, tokenizer) -> dict:
    session = type("S", (), {"lm": lm})()
    raw: dict[str, list[dict]] = {}

    def keep(rows_by_task):
        raw.update(rows_by_task)

    t0 = time.perf_counter()
    metrics, samples = run_tasks(session, specs, ev, raw_samples=keep)
    seconds = time.perf_counter() - t0
    n = sum(len(v) for v in samples.values())
    tokens = work_tokens(tokenizer, samples, raw)
    scores = {task: result.metrics for task, result in metrics.items()}   # task -> metric -> score
    return {"seconds": seconds, "samples": n, "tokens": tokens, "metrics": scores, "rows": samples}


def agreement(a: dict, b: dict) -> str:
    diffs, worst = 0, 0.0
    for task, rows in a["rows"].items():
        for x, y in zip(rows, b["rows"][task]):
            if x.output != y.output or x.pred != y.pred:
                diffs += 1
            for la, lb in zip(x.logliks or [], y.logliks or []):
                worst = max(worst, abs(la - lb))
    total = sum(len(r) for r in a["rows"].values())
    return f"{total - diffs}/{total} samples identical, max log-likelihood difference {worst:.2e}"


def metric_change(a: dict, b: dict) -> str:
    """Each task metric of b next to a's: the bfloat16 path changes outputs, its metrics must stay within noise
    (`python -m pipeline.backend_diff` gives the paired intervals on a full run)."""
    parts = []
    for task, metrics in a["metrics"].items():
        for name, value in metrics.items():
            if isinstance(value, (int, float)) and name in b["metrics"].get(task, {}):
                parts.append(f"{task}/{name} {value:.1f}->{b['metrics'][task][name]:.1f}")
    return ", ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="smollm2-135m")
    ap.add_argument("tier", nargs="?", default="fp16")
    ap.add_argument("kv", nargs="?", default="auto")
    ap.add_argument("--before-batch", type=int, default=8, help="HFLM batch size of the 'before' path")
    args = ap.parse_args()
    params = schema.load_or_exit()
    record = io.read_json(paths.quantize_record(args.model, args.tier))
    # dtype and chat template as the evaluate stage resolves them (quantize's and prepare's records)
    variant = Variant.of(params, args.model, args.tier, args.kv, paths.tier_dir(args.model, args.tier), record)
    specs = tasks.build_all(params.eval.tasks, args.model)
    phases = {"generation": [s for s in specs if s.kind == "generate"],
              "log-likelihood": [s for s in specs if s.kind != "generate"]}
    from lm_eval.models.huggingface import (
        HFLM,  # lazy: seconds of imports, after argument errors
    )

    backend = ReferenceBackend(params.serving.reference, params.eval)
    stage_dtype = backend.placement(variant).dtype
    results: dict[str, dict[str, dict]] = {phase: {} for phase, group in phases.items() if group}
    limits: dict[str, tuple[float, float]] = {}     # dtype -> (prefill tok/s, weight bytes as loaded)
    # float32 first: today's evaluate stage (lm-eval's hf, batch 8) and this path at the same dtype,
    # whose outputs must agree; then the path at the dtype the evaluate stage uses on this machine.
    dtypes = ["float32"] + ([stage_dtype] if stage_dtype != "float32" else [])
    for dtype in dtypes:
        ref = replace(params.serving.reference, dtype=dtype)
        with ReferenceBackend(ref, params.eval).session(variant) as session:
            model, tok = session.model, session.tokenizer
            ours = model.config._attn_implementation
            for phase, group in phases.items():
                if not group:
                    continue
                if dtype == "float32":
                    before_lm = HFLM(pretrained=model, tokenizer=tok, batch_size=args.before_batch,
                                     max_length=session.lm.max_length)
                    # transformers' own sdpa (the fp8 KV variant keeps its rounding, on transformers' sdpa)
                    model.set_attn_implementation("sdpa" if args.kv == "auto" else ours)
                    results[phase]["before"] = timed_run(before_lm, group, params.eval, tok)
                    model.set_attn_implementation(ours)
                results[phase][dtype] = timed_run(session.lm, group, params.eval, tok)
            limits[dtype] = (prefill_limit(model, model.config.vocab_size),
                             sum(p.numel() * p.element_size() for p in model.parameters()))
    from lm_eval.tasks import TaskManager  # lazy, as above

    index_s = best_of(TaskManager, 1)   # what lm-eval's simple_evaluate builds when given no task_manager
    bw = bandwidth_gbps()
    hw = machine.describe(machine.cpu_info(), False)
    print(f"qtier evaluate benchmark: {args.model} {args.tier} kv {args.kv}, {hw}, torch threads "
          f"{torch.get_num_threads()}; the evaluate stage computes in {stage_dtype} here")
    for dtype, (limit, weights) in limits.items():
        print(f"machine limit in {dtype}: prompt processing {limit:,.0f} tok/s (one forward, batch 16 x 256); "
              f"memory bandwidth {bw:.1f} GB/s / {weights / 2**20:,.0f} MiB of weights -> batch-1 decode "
              f"{bw * 1e9 / weights:,.1f} tok/s")
    paths_ = {"before": (f"lm-eval hf, batch {args.before_batch}, float32", "float32")}
    for dtype in dtypes:
        paths_[dtype] = (f"qtier reference, batch {params.eval.batch_size}, {dtype}", dtype)
    print(f"{'phase':16} {'path':40} {'s':>7} {'samples/s':>10} {'tok/s':>9} {'of limit':>9}")
    total = {name: [0.0, 0, 0] for name in paths_}
    for phase, runs in results.items():
        before = runs["before"]
        for name, (label, dtype) in paths_.items():
            r = runs[name]
            tps = r["tokens"] / r["seconds"]
            note = "" if name == "before" else f"  {before['seconds'] / r['seconds']:.2f}x; " + (
                f"{agreement(before, r)}; metrics {'identical' if before['metrics'] == r['metrics'] else 'DIFFER'}"
                if dtype == "float32" else f"metrics {metric_change(runs['float32'], r)} vs float32")
            print(f"{phase:16} {label:40} {r['seconds']:7.1f} {r['samples'] / r['seconds']:10.2f} "
                  f"{tps:9.0f} {tps / limits[dtype][0]:9.0%}{note}")
            for i, v in enumerate((r["seconds"], r["samples"], r["tokens"])):
                total[name][i] += v
    bs, bn, _ = total["before"]
    for with_index in (False, True):
        b = bs + (index_s if with_index else 0.0)
        ups = ", ".join(f"{paths_[n][0]} {(total[n][1] / total[n][0]) / (bn / b):.2f}x"
                        f" ({total[n][2] / total[n][0] / limits[paths_[n][1]][0]:.0%} of its prompt limit)"
                        for n in dtypes)
        head = "+ task index" if with_index else "all tasks"
        extra = (f" (lm-eval's default TaskManager indexes its task YAMLs in {index_s:.1f} s at every evaluate;"
                 f" the evaluate stage skips it)") if with_index else ""
        print(f"{head:16} speed-up per sample vs before: {ups}{extra}")

if __name__ == "__main__":
    main()
