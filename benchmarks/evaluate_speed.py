"""How fast is the evaluate stage, side by side with lm-eval's plain `hf` model, and how far from
this machine's limit? One process, one loaded variant, the same task YAMLs and samples for both.

    python -m benchmarks.evaluate_speed                      # smollm2-135m fp16 auto, params.yaml limits
    python -m benchmarks.evaluate_speed smollm2-135m int8 fp8 --before-batch 8

Needs the variant's checkpoint (run `dvc repro` first). Prints, per phase (generation tasks,
log-likelihood tasks): seconds, samples/s and tokens/s (prompt + generated tokens the phase had to
process) for "before" (lm-eval HFLM, batch --before-batch: the evaluate path before this change) and
"after" (the reference backend as the evaluate stage runs it), whether their per-sample outputs agree,
and the machine's limit for this model: tokens/s of one large batched forward (compute bound, what
prompt processing can reach) and memory bandwidth / weight bytes (what batch-1 decoding can reach).
Timings are only comparable within one run on one machine: compare the ratios, not the seconds.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from pipeline import io, paths, schema
from pipeline.backends import Variant
from pipeline.backends.reference import ReferenceBackend
from pipeline.domain import machine, tasks
from pipeline.stages.evaluate import run_tasks


def best_of(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


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
            if "output" in row:
                n += len(tokenizer(row["output"], add_special_tokens=False).input_ids)
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
            if x.get("output") != y.get("output") or x.get("pred") != y.get("pred"):
                diffs += 1
            for la, lb in zip(x.get("logliks", []), y.get("logliks", [])):
                worst = max(worst, abs(la - lb))
    total = sum(len(r) for r in a["rows"].values())
    return f"{total - diffs}/{total} samples identical, max log-likelihood difference {worst:.2e}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="smollm2-135m")
    ap.add_argument("tier", nargs="?", default="fp16")
    ap.add_argument("kv", nargs="?", default="auto")
    ap.add_argument("--before-batch", type=int, default=8, help="HFLM batch size of the 'before' path")
    args = ap.parse_args()
    params = schema.load_or_exit()
    record = io.read_json(paths.quantize_record(args.model, args.tier))
    variant = Variant(args.model, args.tier, args.kv, paths.tier_dir(args.model, args.tier),
                      params.models[args.model], params.tiers[args.tier], params.kv_modes[args.kv],
                      serve_path=Path(record["serve_path"]), load_quantization=record.get("load_quantization"))
    specs = tasks.build_all(params.eval.tasks)
    phases = {"generation": [s for s in specs if s.kind == "generate"],
              "log-likelihood": [s for s in specs if s.kind != "generate"]}
    from lm_eval.models.huggingface import (
        HFLM,  # lazy: seconds of imports, after argument errors
    )

    with ReferenceBackend(params.serving.reference, params.eval).session(variant) as session:
        model, tok = session.model, session.tokenizer
        before_lm = HFLM(pretrained=model, tokenizer=tok, batch_size=args.before_batch,
                         max_length=session.lm.max_length)
        ours = model.config._attn_implementation
        # before: transformers' own sdpa (the fp8 KV variant keeps its rounding, on transformers' sdpa)
        theirs = "sdpa" if args.kv == "auto" else ours
        results = {}
        for phase, group in phases.items():
            if group:
                model.set_attn_implementation(theirs)
                before = timed_run(before_lm, group, params.eval, tok)
                model.set_attn_implementation(ours)
                results[phase] = (before, timed_run(session.lm, group, params.eval, tok))
        from lm_eval.tasks import TaskManager  # lazy, as above

        index_s = best_of(TaskManager, 1)   # what lm-eval's simple_evaluate builds when given no task_manager
        limit = prefill_limit(model, model.config.vocab_size)
        bw = bandwidth_gbps()
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
    hw = machine.describe(machine.cpu_info(), False)
    print(f"qtier evaluate benchmark: {args.model} {args.tier} kv {args.kv}, {hw}, torch threads "
          f"{torch.get_num_threads()}")
    print(f"machine limit: prompt processing {limit:,.0f} tok/s (one forward, batch 16 x 256); "
          f"memory bandwidth {bw:.1f} GB/s -> batch-1 decode {bw * 1e9 / weights:,.1f} tok/s "
          f"({weights / 2**20:,.0f} MiB of weights as loaded)")
    print(f"{'phase':16} {'path':34} {'s':>7} {'samples/s':>10} {'tok/s':>9} {'of limit':>9}")
    total = {"before": [0.0, 0, 0], "after": [0.0, 0, 0]}
    for phase, (before, after) in results.items():
        for name, r, label in (("before", before, f"lm-eval hf, batch {args.before_batch}"),
                               ("after", after, f"qtier reference, batch {params.eval.batch_size}")):
            tps = r["tokens"] / r["seconds"]
            print(f"{phase:16} {label:34} {r['seconds']:7.1f} {r['samples'] / r['seconds']:10.2f} "
                  f"{tps:9.0f} {tps / limit:9.0%}")
            for i, v in enumerate((r["seconds"], r["samples"], r["tokens"])):
                total[name][i] += v
        print(f"{'':16} speed-up {before['seconds'] / after['seconds']:.2f}x; {agreement(before, after)}; "
              f"metrics {'identical' if before['metrics'] == after['metrics'] else 'DIFFER'}")
    (bs, bn, bt), (as_, an, at) = total["before"], total["after"]
    print(f"{'all tasks':16} before {bn / bs:.2f} samples/s, {bt / bs:,.0f} tok/s; after {an / as_:.2f} samples/s, "
          f"{at / as_:,.0f} tok/s ({at / as_ / limit:.0%} of the prompt-processing limit); "
          f"speed-up per sample {(an / as_) / (bn / bs):.2f}x")
    bs += index_s
    print(f"{'+ task index':16} lm-eval's default TaskManager indexes its task YAMLs in {index_s:.1f} s at every "
          f"evaluate (the evaluate stage skips it): before {bn / bs:.2f} samples/s; speed-up per sample "
          f"{(an / as_) / (bn / bs):.2f}x")


if __name__ == "__main__":
    main()
