"""lm-eval's own tasks by name: `eval.tasks.<name>: {lm_eval: arc_easy, limit: 500}`.

A registry task is looked up in lm-eval's task index (lm_eval.tasks.TaskManager, plus the entry's
`include_path` folder of task YAMLs) and run through the same backends as qtier's local tasks, with
per-sample logging. Its per-sample scores come from lm-eval's own logged samples: each logged sample
dict carries the value of every metric for that document (`s["acc"]`, lm-eval's evaluator:
`example.update(metrics)`), and a metric whose aggregate is the mean of those values gets a paired
interval and a verdict like any local task. Metrics lm-eval aggregates otherwise (corpus BLEU,
perplexity...) have no per-sample form here: they are reported without an interval.

Scale: qtier reports its metrics on 0-100 so that tolerances read the same way for all tasks. The
scale follows from what a metric is (metric_registry), never from the values it happens to take: the
metrics lm-eval defines as a fraction of documents (metric_registry's binary ones: acc, acc_norm,
exact_match, ...) are multiplied by 100, aggregate and samples alike; every other metric (bleu, chrf,
perplexity, brier_score, mcc, f1, whose scale differs between tasks...) is kept on the scale lm-eval
reports it. A fraction metric with a value outside [0, 1] is an error naming it: the task computes
something else under that name.

Offline: a task whose `dataset_path` is a Hub dataset (not a local builder such as json/csv with
local files) cannot run without a network; the check says so before any model work.
"""
from __future__ import annotations

import math
import os
import socket
from pathlib import Path
from typing import Any

from pipeline.domain.sets import metric_registry
from pipeline.domain.sets.sample_row import SampleRow
from pipeline.schema import ConfigError, Task, near

LOCAL_BUILDERS = ("json", "csv", "parquet", "text", "arrow", "pandas")
HUB = ("huggingface.co", 443)
_MANAGERS: dict[tuple[str, ...], Any] = {}


def include_paths(task: Task, root: Path) -> tuple[str, ...]:
    return (str(root / task.include_path),) if task.include_path else ()


def manager(paths: tuple[str, ...] = ()):
    """lm-eval's TaskManager over its own tasks plus `paths`, built once per process."""
    if paths not in _MANAGERS:
        # lazy: lm-eval's task index takes seconds
        from lm_eval.tasks import TaskManager

        _MANAGERS[paths] = TaskManager(include_path=list(paths) or None)
    return _MANAGERS[paths]


def entry(name: str, task: Task, root: Path):
    """The index entry of the task's lm-eval name; an unknown name or a group is an error naming the key."""
    if task.include_path and not (root / task.include_path).is_dir():
        raise ConfigError(f"eval.tasks.{name}.include_path: folder not found: {task.include_path}")
    tm = manager(include_paths(task, root))
    found = tm.task_index.get(task.lm_eval)
    if found is None:
        raise ConfigError(f"eval.tasks.{name}.lm_eval: unknown lm-eval task {task.lm_eval!r}"
                          f"{near(task.lm_eval, tm.all_subtasks)}")
    if task.lm_eval not in tm.all_subtasks:
        raise ConfigError(f"eval.tasks.{name}.lm_eval: {task.lm_eval!r} is an lm-eval group or tag, not a single "
                          "task; give one entry per task")
    return found


def needs_hub(cfg: dict) -> bool:
    """The task reads its dataset from the Hub (not a local builder or folder)."""
    path = str(cfg.get("dataset_path", ""))
    return bool(path) and path not in LOCAL_BUILDERS and not Path(path).exists()


def online() -> bool:
    if any(os.environ.get(v, "0").lower() in ("1", "true", "yes")
           for v in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")):
        return False
    try:
        socket.create_connection(HUB, timeout=3).close()
    except OSError:
        return False
    return True


def declared_metrics(cfg: dict | None) -> list[str]:
    """Metrics a registry task's config declares (lm-eval's defaults for its output type when it
    declares none). Empty for a Python-only task, whose config the index does not hold."""
    if not cfg:
        return []
    if cfg.get("metric_list"):
        return [m["metric"] for m in cfg["metric_list"]]
    # lazy: only with a registry task configured
    from lm_eval.api.registry import DEFAULT_METRIC_REGISTRY

    return list(DEFAULT_METRIC_REGISTRY.get(cfg.get("output_type", ""), []))


def check(name: str, task: Task, root: Path) -> list[str]:
    """Offline checks of a registry task: the name exists, its data is reachable. Its metric names."""
    cfg = entry(name, task, root).cfg
    if cfg is not None and needs_hub(cfg) and not online():
        raise ConfigError(f"eval.tasks.{name}: task {task.lm_eval} needs its dataset from the Hub "
                          f"({cfg['dataset_path']}); no network")
    return declared_metrics(cfg)


def load(name: str, task: Task, root: Path = Path(".")):
    """The lm-eval Task object (its dataset loaded), ready for simple_evaluate(tasks=[...])."""
    entry(name, task, root)
    return manager(include_paths(task, root)).load([task.lm_eval])["tasks"][task.lm_eval]


def _filter(samples: list[dict]) -> str:
    keys = [s.get("filter", "none") for s in samples]
    return "none" if "none" in keys or not keys else keys[0]


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    return None


def scores(results: dict, samples: list[dict], higher_is_better: dict[str, bool]
           ) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, bool]]:
    """(metric -> aggregate, doc_id -> metric -> per-sample score, metric -> higher_is_better) from
    one task's lm-eval results and logged samples; see the module docstring for the scale rule."""
    key = _filter(samples)
    mine = [s for s in samples if s.get("filter", "none") == key]
    agg: dict[str, float] = {}
    per: dict[str, dict[str, float]] = {s["doc_id"]: {} for s in mine}
    hib: dict[str, bool] = {}
    for metric, better in higher_is_better.items():
        value = _number(results.get(f"{metric},{key}"))
        if value is None:
            continue
        values = [_number(s.get(metric)) for s in mine]
        per_sample = bool(values) and all(v is not None for v in values) \
            and abs(sum(values) / len(values) - value) <= 1e-6 * max(1.0, abs(value))
        fraction = metric_registry.get(metric).kind == metric_registry.BINARY
        scale = 100.0 if fraction else 1.0
        if fraction:
            outside = [v for v in [value, *values] if v is not None and not 0.0 <= v <= 1.0]
            if outside:
                raise ValueError(f"lm-eval metric {metric!r}: value {outside[0]:g} outside [0, 1], yet {metric} is "
                                 "a fraction of documents (binary in pipeline/domain/sets/metric_registry.py): the "
                                 "task computes something else under that name")
        agg[metric] = value * scale
        hib[metric] = bool(better)
        if per_sample:
            for s, v in zip(mine, values, strict=True):
                per[s["doc_id"]][metric] = v * scale
    return agg, per, hib


def sample_row(s: dict, scores: dict[str, float]) -> SampleRow:
    """A per-sample log row (task_rows.sample_row's type) from one lm-eval logged sample."""
    resps = s.get("filtered_resps") or []
    if resps and all(isinstance(r, (list, tuple)) and len(r) == 2 and _number(r[0]) is not None for r in resps):
        logliks = [float(r[0]) for r in resps]
        output = f"choice {max(range(len(logliks)), key=logliks.__getitem__)} (log-likelihoods {logliks})"
    else:
        first = resps[0] if resps else ""
        output = first if isinstance(first, str) else str(first)
    prompt = str(s["arguments"][0][0]) if s.get("arguments") else ""
    return SampleRow(id="", doc_id=s["doc_id"], input={"prompt": prompt}, target=str(s.get("target")),
                     output=output, prompt_chars=len(prompt), lm_eval=True, scores=scores)
