"""What drafts (pipeline/engines/drafts.py) save on the generation tasks, side by side in one process:
one variant's generation tasks decoded with no draft, from the baseline's outputs (stage evaluate's
first arithmetic) and from its own earlier outputs (what the second arithmetic's check reads).

    python -m benchmarks.drafts_speed                          # smollm2-135m fp16 + fp8 KV, params.yaml caps
    python -m benchmarks.drafts_speed smollm2-135m int8 auto --task summarization

Needs the checkpoints (run `dvc repro` first). Prints per path: seconds, the ratio to no draft, the
share of generated tokens taken from a draft, and how many outputs equal the no-draft ones (drafts
change only the kernel shapes, so a bfloat16 run may part at a near tie; float32 should not). Timings
are only comparable within one run on one machine: compare the ratios.
"""
from __future__ import annotations

import argparse
import time

import torch

from pipeline import io, paths, schema
from pipeline.domain import machine, tasks
from pipeline.engines import Variant, drafts
from pipeline.engines.reference import ReferenceBackend
from pipeline.evaluation.lm_eval_runner import run_tasks


def generate_all(session, specs, ev) -> tuple[float, dict[str, list[str]]]:
    t0 = time.perf_counter()
    _, samples = run_tasks(session, specs, ev)
    return time.perf_counter() - t0, {t: [r.get("output") for r in rows] for t, rows in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="smollm2-135m")
    ap.add_argument("tier", nargs="?", default="fp16")
    ap.add_argument("kv", nargs="?", default="fp8")
    ap.add_argument("--task", action="append", help="generation tasks to run (default: summarization)")
    args = ap.parse_args()
    params = schema.load_or_exit()
    names = args.task or ["summarization"]
    specs = [s for s in tasks.build_all(params.eval.tasks, args.model) if s.name in names]
    if not specs or any(s.kind != "generate" for s in specs):
        raise SystemExit(f"drafts_speed: --task must name generation tasks of eval.tasks, got {names}")
    backend = ReferenceBackend(params.serving.reference, params.eval)

    def session_of(tier: str, kv: str):
        record = io.read_json(paths.quantize_record(args.model, tier))
        return backend.session(Variant.of(params, args.model, tier, kv, paths.tier_dir(args.model, tier), record))

    b = params.decision.baseline
    store = drafts.start()
    with session_of(b.tier, b.kv) as session:
        generate_all(session, specs, params.eval)
    from_baseline = dict(store.by_prompt)
    runs = {}
    with session_of(args.tier, args.kv) as session:
        for name, start in (("no draft", {}), ("baseline's outputs", from_baseline), ("its own outputs", None)):
            if start is not None:
                store.clear()
                store.by_prompt.update(start)
            store.tokens = store.confirmed = 0
            seconds, outputs = generate_all(session, specs, params.eval)
            runs[name] = (seconds, outputs, store.confirmed / max(store.tokens, 1))
    hw = machine.describe(machine.cpu_info(), False)
    print(f"drafts benchmark: {args.model} {args.tier} kv {args.kv}, tasks {', '.join(names)}; {hw}, "
          f"torch threads {torch.get_num_threads()}")
    plain_s, plain_out, _ = runs["no draft"]
    print(f"{'drafts':22} {'s':>7} {'vs none':>8} {'tokens from drafts':>19} {'outputs as with none':>21}")
    for name, (seconds, outputs, share) in runs.items():
        same = sum(a == b for t in outputs for a, b in zip(outputs[t], plain_out[t]))
        total = sum(len(v) for v in outputs.values())
        print(f"{name:22} {seconds:7.1f} {plain_s / seconds:7.2f}x {share:19.0%} {same:>14}/{total}")


if __name__ == "__main__":
    main()
